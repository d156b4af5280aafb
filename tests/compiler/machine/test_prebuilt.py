"""Support objects (compiler/machine/prebuilt.py): the fast expf is compiled once per toolchain in the background and
linked by later builds, whose compiled text has its definitions blanked with line numbers kept."""
import ctypes
import math
import os
import pathlib

import pytest

from compiler import config
from compiler.cpp_text import vector_math
from compiler.machine import build, pch, prebuilt
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


@pytest.fixture
def one_job(monkeypatch):
    """One g++ at a time: objects not built yet build in the background."""
    monkeypatch.setattr(config.cpp, "build_jobs", 1)


@pytest.fixture
def two_jobs(monkeypatch) -> list[tuple[list[str], str]]:
    """Two g++ at a time: an object not built yet is compiled beside the kernels; the commands started and
    the text of the source each compiled."""
    monkeypatch.setattr(config.cpp, "build_jobs", 2)
    started = []
    real = build._start

    def start(cmd):
        sources = [arg for arg in cmd if arg.endswith(".cpp")]
        started.append((cmd, pathlib.Path(sources[-1]).read_text()))
        return real(cmd)

    monkeypatch.setattr(build, "_start", start)
    return started


def test_the_first_build_compiles_the_definitions_and_later_builds_link_the_object(build_cache, one_job, monkeypatch):
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


def test_an_object_that_does_not_build_is_tried_once_and_builds_keep_the_definitions(build_cache, one_job, monkeypatch):
    bad = prebuilt.Part("lens_expf", vector_math.FAST_EXP_DEFINITIONS, "#error this object does not build\n")
    monkeypatch.setattr(prebuilt, "PARTS", (bad,))
    seen = commands(monkeypatch)
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL)))
    pch.wait_for_builds()
    (folder,) = (build_cache / "prebuilt").iterdir()
    assert (folder / "failed").exists() and "this object does not build" in (folder / "build.log").read_text()
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL + "// another graph\n")))
    assert not pch._PENDING and not any(arg.endswith(".o") for cmd in seen for arg in cmd)


def test_with_two_jobs_the_first_build_compiles_the_object_beside_the_kernel(build_cache, two_jobs, monkeypatch):
    seen = commands(monkeypatch)
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL)))
    (folder,) = (build_cache / "prebuilt").iterdir()
    obj = folder / "lens_expf.o"
    assert obj.exists() and not (folder / ".building").exists()  # built by this build: nothing to wait for
    (kernel_cmd, kernel_text), (object_cmd, object_text) = two_jobs
    assert "_ZGVeN16v_lens_expf(lens_v16sf x)" not in kernel_text  # blanked: the object is compiled beside it
    assert "_ZGVeN16v_lens_expf(lens_v16sf x)" in object_text and str(folder / "lens_expf.cpp") in object_cmd
    assert str(obj) in seen[0]  # ...and linked
    two_jobs.clear()
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL + "// another graph\n")))
    assert str(obj) in seen[1] and not two_jobs  # one kernel, object built: one g++ as before


def test_with_two_jobs_an_object_that_does_not_build_leaves_the_definitions_inline(build_cache, two_jobs, monkeypatch):
    bad = prebuilt.Part("lens_expf", vector_math.FAST_EXP_DEFINITIONS, "#error this object does not build\n")
    monkeypatch.setattr(prebuilt, "PARTS", (bad,))
    seen = commands(monkeypatch)
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL)))
    (folder,) = (build_cache / "prebuilt").iterdir()
    assert (folder / "failed").exists() and "this object does not build" in (folder / "build.log").read_text()
    assert not (folder / ".building").exists() and not any(arg.endswith(".o") for arg in seen[-1])
    two_jobs.clear()
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL + "// another graph\n")))
    assert not two_jobs and not any("lens_expf" in " ".join(p.args) for p in pch._PENDING)


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


def test_with_two_jobs_an_object_whose_compiler_does_not_start_leaves_the_definitions_inline(build_cache, two_jobs,
                                                                                            monkeypatch):
    real = build._start

    def start(cmd):
        if any(arg.endswith("lens_expf.cpp") for arg in cmd):
            raise build.CompilerNotFoundError("could not run 'g++': out of processes")
        return real(cmd)

    monkeypatch.setattr(build, "_start", start)
    run_exp(build.build_shared_library(cpp_source(EXP_KERNEL)))
    (folder,) = (build_cache / "prebuilt").iterdir()
    assert (folder / "failed").exists() and "out of processes" in (folder / "build.log").read_text()
    assert not (folder / ".building").exists() and not (folder / "lens_expf.o").exists()


ERF_KERNEL = r'''
extern "C" void erf_all(const float* __restrict__ in, float* __restrict__ out)
{
    #pragma omp simd
    for (int64_t i = 0; i < 67; i++) out[i] = lens_erf(in[i]) + lens_exp(in[i]);
}
'''


def test_every_part_a_kernel_calls_is_built_once_and_linked(build_cache, one_job, monkeypatch):
    # a kernel calling erf and exp: both objects, the definitions of both blanked in later builds
    texts = []
    seen = commands(monkeypatch, texts)
    data = (ctypes.c_float * 67)(*[(i - 33) / 8 for i in range(67)])
    for graph in ("", "// another graph\n"):
        out = (ctypes.c_float * 67)()
        ctypes.CDLL(build.build_shared_library(cpp_source(ERF_KERNEL + graph))).erf_all(data, out)
        for x, y in zip(data, out):
            assert abs(y - math.erf(x) - math.exp(x)) <= 4e-7 * (1 + math.exp(x))
        pch.wait_for_builds()
    objects = {p.name: p for p in (build_cache / "prebuilt").glob("*/*.o")}
    assert set(objects) == {"lens_expf.o", "lens_erff.o"}
    assert all(str(obj) in seen[-1] for obj in objects.values())
    assert "_ZGVeN16v_lens_erff(lens_v16sf x)" in texts[0] and "_ZGVeN16v_lens_erff(lens_v16sf x)" not in texts[-1]
