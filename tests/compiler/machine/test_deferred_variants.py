"""A cold build of kernels with size variants (compiler/machine/runtime.py, compiler/cpp_text/variant_text.py): the
first call runs the kernels' generic bodies, built from the source without the variants; the whole source builds
in the background and its kernels take the generic ones' place; eager's results throughout; a warm start loads
the whole library at once; a variant that fails to build leaves the generic bodies; debug mode builds it all."""
import logging
import re

import pytest
import torch

from compiler import config
from compiler.cpp_text.variant_text import VARIANTS_BEGIN, generic_only
from compiler.machine import build, pch, runtime

SOFTMAX_ROWS = (64, 5, 3000, 16)


@pytest.fixture
def loads(build_cache, monkeypatch):
    """Each load_cpp_module call of generated code: (namespace, kernels it returned, generic kernels then); and
    each library built, by source."""
    monkeypatch.setattr(config, "debug", False)
    monkeypatch.setattr(config, "graph_cache", False)
    monkeypatch.setattr(config.cpp, "deferred_size_variants", True)
    monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 64 * 1024)  # variants for rows >= 16
    seen = {"loads": [], "built": []}
    real_load, real_build = runtime.load_cpp_module, runtime.build_shared_library

    def load(source, kernels, *args, namespace=None, **kw):
        out = real_load(source, kernels, *args, namespace=namespace, **kw)
        seen["loads"].append((source, namespace, out, dict(out)))
        return out

    def build_library(source, name="kernels"):
        seen["built"].append(source)
        return real_build(source, name)
    monkeypatch.setattr(runtime, "load_cpp_module", load)
    monkeypatch.setattr(runtime, "build_shared_library", build_library)
    yield seen
    pch.wait_for_builds()


def _softmax():
    torch._dynamo.reset()
    return torch.compile(lambda x: torch.softmax(x, -1), backend="lens", dynamic=True)


def _check(fn, rows=SOFTMAX_ROWS):
    for n in rows:
        x = torch.randn(n, 1024)
        torch.testing.assert_close(fn(x), torch.softmax(x, -1))


def test_the_first_call_runs_generic_bodies_and_the_variants_replace_them_when_built(loads):
    f = _softmax()
    _check(f, rows=(64,))
    (source, namespace, out, generic), = loads["loads"]
    assert VARIANTS_BEGIN in source and "_v0(" in source
    first = loads["built"][0]
    assert first == generic_only(source) and not re.search(r'^extern "C" void \w+_v\d+\(', first, re.M)
    assert first.count("\n") == source.count("\n")  # every line where it was: diagnostics, the kernel map
    pch.wait_for_builds()
    assert loads["built"][-1] == source and build.cached_library(source) in runtime._LIBS
    for name, fn in out.items():
        assert namespace[name] is fn and fn is not generic[name]  # the whole library's kernels, bound
    _check(f)  # both sides of the variants' checks, and a size no variant was planned for
    x = torch.randn(9, 1000)  # a row length no variant was planned for
    torch.testing.assert_close(f(x), torch.softmax(x, -1))


def test_a_warm_start_loads_the_whole_library_and_builds_nothing(loads):
    _check(_softmax(), rows=(64,))
    pch.wait_for_builds()
    built = len(loads["built"])
    f = _softmax()
    _check(f)
    (source, namespace, out, generic), = loads["loads"][1:]
    assert len(loads["built"]) == built + 1 and loads["built"][-1] == source  # the cache's, not a generic build
    assert all(namespace[name] is fn for name, fn in out.items())


def test_size_variants_that_fail_to_build_leave_the_generic_bodies_and_say_so(loads, monkeypatch, caplog):
    real = runtime.build_shared_library

    def failing(source, name="kernels"):
        if VARIANTS_BEGIN in source:  # the whole source: its variants do not compile
            raise build.CppCompileError(["g++"], "kernels.cpp:9: error: variant broke", "kernels.cpp", [])
        return real(source, name)
    monkeypatch.setattr(runtime, "build_shared_library", failing)
    with caplog.at_level(logging.WARNING, logger="compiler.machine.runtime"):
        f = _softmax()
        _check(f, rows=(64,))
        pch.wait_for_builds()
    assert "keeps its kernels' generic bodies" in caplog.text and "variant broke" in caplog.text
    (_, namespace, out, generic), = loads["loads"]
    assert all(namespace[name] is generic[name] for name in out)
    _check(f)


def test_debug_mode_builds_the_variants_before_the_first_call(loads, monkeypatch, tmp_path):
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path / "debug"))
    _check(_softmax(), rows=(64,))
    (source, namespace, out, generic), = loads["loads"]
    assert loads["built"] == [source] and all(namespace[name] is fn for name, fn in out.items())


def test_generic_only_blanks_each_variant_function_and_skips_the_calls():
    source = "\n".join([
        "// prelude", 'extern "C" void k_0_v0(int64_t s0)', "{", "    fast();", "}",
        'extern "C" void k_0(int64_t s0)', "{", "    void k_0_v0(int64_t s0);", VARIANTS_BEGIN,
        "    if (s0 == 8) k_0_v0(s0);", "    else", "#endif  // LENS_GENERIC_ONLY", "    {", "        slow();",
        "    }", "}", ""])
    text = generic_only(source)
    assert text.split("\n") == [
        "// prelude", "", "", "", "", 'extern "C" void k_0(int64_t s0)', "{", "    void k_0_v0(int64_t s0);",
        "#if 0  // LENS_GENERIC_ONLY", "    if (s0 == 8) k_0_v0(s0);", "    else", "#endif  // LENS_GENERIC_ONLY",
        "    {", "        slow();", "    }", "}", ""]
    assert generic_only(text.replace("#if 0  // LENS_GENERIC_ONLY", "")) is None
