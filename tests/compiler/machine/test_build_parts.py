"""Graphs of several kernels build in parts, one g++ per core, linked into one library: same kernels, same
diagnostics on the full source's lines, same vectorization report, compile errors still on the user's line."""
import ctypes
import json
import os
import pathlib

import pytest
import torch

from compiler import config
from compiler.machine import build, build_parts, pch
from tests.compiler.conftest import assert_same, cpp_source

KERNELS = r'''
extern "C" void add_one(const float* __restrict__ in, float* __restrict__ out)
{
    #pragma omp simd
    for (int64_t i = 0; i < 64; i++) out[i] = in[i] + 1.0f;
}

extern "C" void twice(const float* __restrict__ in, float* __restrict__ out)
{
    #pragma omp simd
    for (int64_t i = 0; i < 64; i++) out[i] = in[i] * 2.0f;
}

extern "C" void exp_of(const float* __restrict__ in, float* __restrict__ out)
{
    #pragma omp simd
    for (int64_t i = 0; i < 64; i++) out[i] = lens_exp(in[i]);
}
'''


@pytest.fixture
def two_jobs(build_cache, monkeypatch):
    monkeypatch.setattr(config.cpp, "build_jobs", 2)
    calls = []
    real = build._compile_parts
    monkeypatch.setattr(build, "_compile_parts", lambda compiler, parts, *a: calls.append(parts) or real(compiler, parts, *a))
    return calls


def run_kernels(so: str) -> dict[str, list[float]]:
    lib = ctypes.CDLL(so)
    data = (ctypes.c_float * 64)(*[i / 8 - 4 for i in range(64)])
    out = {}
    for name in ("add_one", "twice", "exp_of"):
        buf = (ctypes.c_float * 64)()
        getattr(lib, name)(data, buf)
        out[name] = list(buf)
    return out


def test_units_cut_before_each_kernel_and_keep_the_code_before_the_first_with_it():
    rest = "\n// support code\nint helper() { return 1; }\n" + KERNELS
    found = build_parts.units(rest, 100)
    assert [text.count('extern "C" void') for _, text in found] == [1, 1, 1]
    assert "helper" in found[0][1] and found[0][0] == 100
    for line, text in found[1:]:
        assert rest.splitlines()[line - 100] == text.splitlines()[0]


def test_parts_balance_units_and_name_each_units_line_of_the_full_source():
    source = cpp_source(KERNELS + "\n" + KERNELS.replace("add_one", "big").replace("64", "1 << 20") * 3)
    prelude, rest, first = pch.split(source)
    bodies = build_parts.parts(rest, first, "/x/kernels.cpp", 2)
    assert len(bodies) == 2 and sum(b.count('extern "C" void') for b in bodies) == source.count('extern "C" void')
    full = source.splitlines()
    for body in bodies:
        lines = body.splitlines()
        for i, text in enumerate(lines):
            if text.startswith("#line"):
                n = int(text.split()[1])
                assert full[n - 1] == lines[i + 1] and text.endswith('"/x/kernels.cpp"')
    assert build_parts.parts(rest, first, "/x/kernels.cpp", 1) is None
    one = cpp_source(KERNELS.split("\n\n")[0])
    assert build_parts.parts(pch.split(one)[1], first, "/x/kernels.cpp", 4) is None


@pytest.mark.parametrize("precompiled", [False, True])
def test_kernels_built_in_parts_run_like_one_build(two_jobs, precompiled, monkeypatch):
    if precompiled:  # first build starts the precompiled prelude and the expf object; later ones use them
        build.build_shared_library(cpp_source(KERNELS + "// warm\n"))
        pch.wait_for_builds()
        two_jobs.clear()
    so = build.build_shared_library(cpp_source(KERNELS))
    assert len(two_jobs) == 1 and len(two_jobs[0]) == 2
    assert any("-include" in part for part in two_jobs[0]) == precompiled
    monkeypatch.setattr(config.cpp, "build_jobs", 1)
    single = build.build_shared_library(cpp_source(KERNELS + "// one g++\n"))
    assert len(two_jobs) == 1  # one job: no parts
    assert run_kernels(so) == run_kernels(single)


@pytest.mark.parametrize("precompiled", [False, True])
def test_errors_in_any_part_name_lines_of_the_full_source(two_jobs, precompiled):
    if precompiled:
        build.build_shared_library(cpp_source(KERNELS + "// warm\n"))
        pch.wait_for_builds()
    broken = cpp_source(KERNELS.replace("in[i] * 2.0f;", "in[i] * undefined_thing;")
                        .replace("in[i] + 1.0f;", "in[i] + other_undefined;"))
    with pytest.raises(build.CppCompileError) as err:
        build.build_shared_library(broken)
    errors = [d for d in err.value.diagnostics if d.severity == "error"]
    assert {os.path.basename(d.file) for d in errors} == {"kernels.cpp"}
    named = {thing for d in errors for thing in ("undefined_thing", "other_undefined")
             if thing in broken.splitlines()[d.line - 1]}
    assert named == {"undefined_thing", "other_undefined"}  # both parts' errors, each on its own line


def test_vectorization_report_of_parts_keeps_kernel_lines(two_jobs, monkeypatch):
    monkeypatch.setattr(config, "debug", True)
    gather = KERNELS.replace("out[i] = in[i] * 2.0f;", "out[i] = in[(i * 7) % 64] + out[i / 3];")
    source = cpp_source(gather)
    build.build_shared_library(source)
    assert two_jobs
    report = build.opt_info_report(source)
    lines = build.vectorization_report(source, report)
    assert lines and all(line.startswith(("add_one:", "twice:", "exp_of:")) for line in lines)
    assert any(line.startswith("twice:") and "in[(i * 7) % 64]" in line for line in lines)


def two_kernels(x1, x2):
    s = x2.sum(dim=0, keepdim=True)
    a = torch.neg(x1)
    b = torch.maximum(x2, a)  # the line the compile error names
    return b, s


def test_graph_of_two_kernels_matches_eager_and_maps_errors_to_the_user_line(two_jobs, tmp_path, monkeypatch):
    x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
    assert_same(two_kernels, x1, x2)
    assert two_jobs and len(two_jobs[-1]) == 2
    monkeypatch.setattr(config.cpp, "op_overrides", {"neg": "-{x}"})
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path / "debug"))
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(two_kernels, backend="lens")(x1, x2)
    line = two_kernels.__code__.co_firstlineno + 3
    assert "LensCompileError" in str(info.value) and f"{__file__}:{line}" in str(info.value)
    graph_dir = next(pathlib.Path(tmp_path / "debug").glob("run_*/lens/graph_*"))
    report = json.loads((graph_dir / "compile_error.json").read_text())
    first = next(d for d in report["diagnostics"] if d["severity"] == "error")
    assert first["source"]["line"] == line and first["kernel"].endswith("_1") and "kernels_part" in report["command"]


def test_identical_kernels_compile_once_and_each_name_runs(two_jobs):
    copies = KERNELS + KERNELS.replace("add_one", "add_one_again").replace("twice", "twice_again").replace(
        "exp_of(", "exp_of_again(").replace("for (int64_t", "// another comment\n    for (int64_t")
    source = cpp_source(copies)
    prelude, rest, first = pch.split(source)
    bodies = build_parts.parts(rest, first, "/x/kernels.cpp", 2)
    assert sum(b.count("#pragma omp simd") for b in bodies) == 3  # three bodies compiled, three aliases
    assert sum(b.count("__attribute__((alias(") for b in bodies) == 3
    lib = ctypes.CDLL(build.build_shared_library(source))
    data = (ctypes.c_float * 64)(*[i / 8 - 4 for i in range(64)])
    for name in ("add_one", "twice", "exp_of"):
        a, b = (ctypes.c_float * 64)(), (ctypes.c_float * 64)()
        getattr(lib, name)(data, a)
        getattr(lib, f"{name}_again")(data, b)
        assert list(a) == list(b)


LOCALS = r'''
extern "C" void row_sum_%(name)s(const float* __restrict__ in, float* __restrict__ out)
{
    float %(a)s = 0;
    alignas(64) float %(a)s_lanes[16];
    for (int64_t i = 0; i < 16; i++) %(a)s_lanes[i] = in[i] * %(scale)s;
    for (int64_t i = 0; i < 16; i++) %(a)s += %(a)s_lanes[i];
    float %(b)s = %(a)s + 1.0f;
    out[0] = %(b)s;
}
'''


def test_kernels_differing_only_in_their_local_buffers_names_compile_once():
    """One layer's kernel and the next one's name their local buffers after the graph's buffers (buf44_local,
    buf51_local): the same code, compiled once; a kernel whose code differs (a constant) is compiled on its own."""
    kernels = [LOCALS % dict(name=n, a=a, b=b, scale=s) for n, a, b, s in (
        ("0", "buf44_local", "buf45_local", "2.0f"), ("1", "buf51_local", "buf52_local", "2.0f"),
        ("2", "buf9_local", "buf8_local", "2.0f"), ("3", "buf60_local", "buf61_local", "3.0f"))]
    found = build_parts.units("".join(kernels), 1)
    kept = build_parts.deduplicated(found)
    assert len(kept) == 2
    assert kept[0][1].count('alias("row_sum_0")') == 2  # row_sum_1 and row_sum_2
    source = cpp_source("".join(kernels))
    lib = ctypes.CDLL(build.build_shared_library(source))
    data = (ctypes.c_float * 16)(*[i / 4 for i in range(16)])
    got = {}
    for n in range(4):
        out = (ctypes.c_float * 1)()
        getattr(lib, f"row_sum_{n}")(data, out)
        got[n] = out[0]
    total = sum(i / 4 for i in range(16))
    assert got == {0: total * 2 + 1, 1: total * 2 + 1, 2: total * 2 + 1, 3: total * 3 + 1}
