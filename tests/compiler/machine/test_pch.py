"""The precompiled prelude: built once in the background, then used by later builds, with diagnostics and
the vectorization report still on the full source's lines."""
import ctypes
import math
import os

import pytest

from compiler import config
from compiler.codegen.cpp_ops import PRELUDE
from compiler.cpp_text.math_prelude import PRELUDE_END
from compiler.machine import build, helper_library, pch
from tests.compiler.conftest import cpp_source

KERNEL = r'''
extern "C" void add_one(const float* __restrict__ in, float* __restrict__ out)
{
    #pragma omp simd
    for (int64_t i = 0; i < 64; i++) out[i] = lens_max(in[i], 0.0f) + 1.0f;
}
'''


def compiled_files(monkeypatch) -> list[list[str]]:
    seen = []
    real = build._sources
    monkeypatch.setattr(build, "_sources", lambda *a: seen.append(real(*a)) or seen[-1])
    return seen


def test_first_build_parses_the_prelude_then_later_builds_use_the_precompiled_one(build_cache, monkeypatch):
    seen = compiled_files(monkeypatch)
    build.build_shared_library(cpp_source(KERNEL))
    pch.wait_for_builds()
    (folder,) = (build_cache / "pch").iterdir()
    assert (folder / "lens_prelude.h.gch").exists() and not (folder / ".building").exists()
    so = build.build_shared_library(cpp_source(KERNEL + "// another graph\n"))
    assert "-include" not in seen[0] and seen[1][:3] == ["-Winvalid-pch", "-include", str(folder / "lens_prelude.h")]
    data = (ctypes.c_float * 64)(*[float(i - 32) for i in range(64)])
    out = (ctypes.c_float * 64)()
    ctypes.CDLL(so).add_one(data, out)
    assert list(out) == [max(i - 32, 0) + 1.0 for i in range(64)]


def test_the_prelude_build_starts_after_the_kernels_are_built_not_beside_them(build_cache, monkeypatch):
    events = []
    real_start, real_run, real_bg = build._start, build._run, pch.build_in_background
    monkeypatch.setattr(build, "_start", lambda cmd: events.append("g++") or real_start(cmd))
    monkeypatch.setattr(build, "_run", lambda cmd: events.append("g++") or real_run(cmd))
    monkeypatch.setattr(pch, "build_in_background", lambda *a: events.append("prelude") or real_bg(*a))
    build.build_shared_library(cpp_source(KERNEL))
    assert events[-1] == "prelude" and events.count("prelude") == 1 and "g++" in events
    pch.wait_for_builds()
    build.build_shared_library(cpp_source(KERNEL))  # cached: nothing to build
    assert events.count("prelude") == 1


def test_errors_against_the_precompiled_prelude_name_lines_of_the_full_source(build_cache):
    # the kernel calls lens_exp: the build also blanks the fast expf's definitions and links its object
    kernel = KERNEL.replace("lens_max(in[i], 0.0f)", "lens_exp(in[i])")
    build.build_shared_library(cpp_source(kernel))
    pch.wait_for_builds()
    broken = cpp_source(kernel.replace("+ 1.0f;", "+ 1.0f + undefined_thing;"))
    with pytest.raises(build.CppCompileError) as err:
        build.build_shared_library(broken)
    first = next(d for d in err.value.diagnostics if d.severity == "error")
    assert os.path.basename(first.file) == "kernels.cpp"
    assert "undefined_thing" in broken.splitlines()[first.line - 1]
    assert "-include" in err.value.command and any(arg.endswith("lens_expf.o") for arg in err.value.command)


def test_vectorization_report_skips_prelude_lines_and_keeps_kernel_lines(build_cache):
    gather = KERNEL.replace("out[i] = lens_max(in[i], 0.0f) + 1.0f;", "out[i] = in[(i * 7) % 64] + out[i / 3];")
    build.build_shared_library(cpp_source(KERNEL))
    pch.wait_for_builds()
    src = cpp_source(gather.replace("#pragma omp simd\n", ""))
    build.build_shared_library(src)
    lines = build.vectorization_report(src, build.opt_info_report(src))
    assert lines and all(line.startswith("add_one:") for line in lines)
    assert all("out[i] = in[" in src.splitlines()[int(line.split(":")[1]) - 1] for line in lines)


def test_a_prelude_that_does_not_build_is_tried_once_and_builds_go_on_without_it(build_cache):
    flags, version = build.build_flags(), build.compiler_version(config.cpp.cxx)
    bad = PRELUDE + "#error this prelude does not build\n" + PRELUDE_END + "\n"
    assert pch.ready_header(bad, config.cpp.cxx, flags, version) is None
    pch.wait_for_builds()
    folder = pch.folder_for(bad, config.cpp.cxx, flags, version)
    assert os.path.exists(os.path.join(folder, "failed")) and "this prelude" in open(os.path.join(folder, "build.log")).read()
    assert pch.ready_header(bad, config.cpp.cxx, flags, version) is None
    assert not pch._PENDING  # no second attempt


def test_turned_off_it_compiles_the_full_source(build_cache, monkeypatch):
    monkeypatch.setattr(config.cpp, "precompiled_header", False)
    seen = compiled_files(monkeypatch)
    build.build_shared_library(cpp_source(KERNEL))
    assert not (build_cache / "pch").exists() and "-include" not in seen[0]


def test_vector_exp_works_through_the_precompiled_prelude(build_cache):
    # lens_exp's 16-lane variant and its assembler-aliased scalar symbol live in the prelude (vector_math.py)
    kernel = KERNEL.replace("add_one", "exp_all").replace("lens_max(in[i], 0.0f) + 1.0f", "lens_exp(in[i])")
    kernel = kernel.replace("i < 64", "i < 67")
    build.build_shared_library(cpp_source(kernel))
    pch.wait_for_builds()
    so = build.build_shared_library(cpp_source(kernel + "// another graph\n"))
    assert any((build_cache / "pch").glob("*/lens_prelude.h.gch"))
    data = (ctypes.c_float * 67)(*[(i - 33) / 4 for i in range(67)])
    out = (ctypes.c_float * 67)()
    ctypes.CDLL(so).exp_all(data, out)
    for x, y in zip(data, out):
        assert abs(y - math.exp(x)) <= 2e-7 * math.exp(x)


LIBRARY = 'extern "C" int lens_forty_two() { return 42; }\n'


def _forty_two(path: str):
    fn = ctypes.CDLL(path).lens_forty_two
    fn.restype = ctypes.c_int
    return fn


def test_a_background_library_builds_once_then_loads_once(build_cache):
    loads = []
    holder = helper_library.BackgroundLibrary("forty_two", lambda: True, lambda: (LIBRARY, ["-DUNUSED=1"]),
                                   lambda path: loads.append(path) or _forty_two(path))
    assert holder.pending() and holder.path.startswith(str(build_cache / "forty_two"))  # (started, not there yet)
    fn = holder.get(wait=True)
    assert fn() == 42 and holder.get() is fn and not holder.pending() and loads == [holder.path]


@pytest.mark.parametrize("case", ["disabled", "no recipe", "does not build", "does not load"])
def test_a_background_library_is_off_for_good_after_any_failure(build_cache, case):
    recipes, loads = [], []

    def recipe():
        recipes.append(1)
        return None if case == "no recipe" else (LIBRARY + ("#error no\n" if case == "does not build" else ""), [])
    holder = helper_library.BackgroundLibrary("forty_two", lambda: case != "disabled", recipe,
                                   lambda path: loads.append(path) or (None if case == "does not load" else 1))
    assert holder.get(wait=True) is None and holder.off and not holder.pending()
    assert holder.get(wait=True) is None and len(recipes) == (0 if case == "disabled" else 1)
    assert len(loads) == (1 if case == "does not load" else 0)
