"""Support objects (compiler/prebuilt.py): the fast expf is compiled once per toolchain in the background and
linked by later builds, whose compiled text has its definitions blanked with line numbers kept."""
import ctypes
import math
import os

import pytest

from compiler import build, config, pch, prebuilt
from compiler.codegen import vector_math
from tests.compiler.conftest import cpp_source

EXP_KERNEL = r'''
extern "C" void exp_all(const float* __restrict__ in, float* __restrict__ out)
{
    #pragma omp simd
    for (int64_t i = 0; i < 67; i++) out[i] = lens_exp(in[i]);
}
'''


def commands(monkeypatch, texts: list[str] | None = None) -> list[list[str]]:
    """The g++ commands builds run from now on (and the text of the .cpp each compiled, into `texts`)."""
    seen = []
    real = build._run

    def run(cmd):
        seen.append(cmd)
        if texts is not None:
            with open(next(arg for arg in cmd if arg.endswith(".cpp"))) as f:
                texts.append(f.read())
        return real(cmd)

    monkeypatch.setattr(build, "_run", run)
    return seen


def run_exp(so: str) -> None:
    data = (ctypes.c_float * 67)(*[(i - 33) / 4 for i in range(67)])
    out = (ctypes.c_float * 67)()
    ctypes.CDLL(so).exp_all(data, out)
    for x, y in zip(data, out):
        assert abs(y - math.exp(x)) <= 2e-7 * math.exp(x)


def test_the_first_build_compiles_the_definitions_and_later_builds_link_the_object(build_cache, monkeypatch):
    assert vector_math.FAST_EXP_DEFINITIONS in cpp_source(EXP_KERNEL)
    texts = []
    seen = commands(monkeypatch, texts)
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL)))
    pch.wait_for_builds()
    (obj,) = (build_cache / "prebuilt").glob("*/lens_expf.o")
    assert not any(arg.endswith(".o") for arg in seen[0]) and "_ZGVeN16v_lens_expf(lens_v16sf x)" in texts[0]
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL + "// another graph\n")))
    assert str(obj) in seen[1]
    text = texts[1]
    assert "_ZGVeN16v_lens_expf(lens_v16sf x)" not in text  # the definitions are blank lines...
    full = cpp_source(EXP_KERNEL + "// another graph\n")
    kernel_line = next(i for i, line in enumerate(full.splitlines(), 1) if "out[i] = lens_exp" in line)
    body = text.split("\n", 1)[1] if text.startswith("#line") else text  # ...the kernels keep their lines
    first = int(text.split()[1]) if text.startswith("#line") else 1
    assert body.splitlines()[kernel_line - first].strip().startswith("for (int64_t i = 0; i < 67; i++) out[i]")


def test_an_object_that_does_not_build_is_tried_once_and_builds_keep_the_definitions(build_cache, monkeypatch):
    bad = prebuilt.Part("lens_expf", vector_math.FAST_EXP_DEFINITIONS, "#error this object does not build\n")
    monkeypatch.setattr(prebuilt, "PARTS", (bad,))
    seen = commands(monkeypatch)
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL)))
    pch.wait_for_builds()
    (folder,) = (build_cache / "prebuilt").iterdir()
    assert (folder / "failed").exists() and "this object does not build" in (folder / "build.log").read_text()
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL + "// another graph\n")))
    assert not pch._PENDING and not any(arg.endswith(".o") for cmd in seen for arg in cmd)


def test_turned_off_every_build_compiles_the_definitions(build_cache, monkeypatch):
    monkeypatch.setattr(config.cpp, "prebuilt_objects", False)
    build.build_shared_library(cpp_source(EXP_KERNEL))
    pch.wait_for_builds()
    assert not (build_cache / "prebuilt").exists()


@pytest.mark.parametrize("cxx,expected", [("g++", "gcc"), ("clang++", "clang"), ("x86_64-linux-gnu-g++-12",
                                          "x86_64-linux-gnu-gcc-12"), ("c++", "cc"), ("icpx", None)])
def test_the_c_driver_beside_each_cxx(cxx, expected, monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda path: path)
    build.c_driver.cache_clear()
    try:
        assert build.c_driver(cxx) == expected
    finally:
        build.c_driver.cache_clear()


def test_kernels_that_need_the_cxx_runtime_are_linked_by_the_cxx_driver(build_cache, monkeypatch):
    if build.c_driver(config.cpp.cxx) is None:
        pytest.skip(f"no C driver beside {config.cpp.cxx}")
    seen = commands(monkeypatch)
    kernel = r'''
namespace std { [[noreturn]] void terminate() noexcept; }  // defined in libstdc++
extern "C" void scratch(const float* __restrict__ in, float* __restrict__ out)
{
    if (in[0] != in[0]) std::terminate();
    for (int i = 0; i < 4; i++) out[i] = in[3 - i] * 2.0f;
}
'''
    so = build.build_shared_library(cpp_source(kernel))
    assert [os.path.basename(cmd[0]) for cmd in seen] == [os.path.basename(build.c_driver(config.cpp.cxx)),
                                                          config.cpp.cxx]
    data, out = (ctypes.c_float * 4)(1, 2, 3, 4), (ctypes.c_float * 4)()
    ctypes.CDLL(so).scratch(data, out)
    assert list(out) == [8.0, 6.0, 4.0, 2.0]
