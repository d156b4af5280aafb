"""Keeping a GPU run's Triton cache entries beside its debug dir (issue 47), on the H100 run's real entries: the
run's kernels' entries are copied, another program's are not, and the copied run indexes with its chain;
`kernel-lens compile`'s step after a run does the same and leaves a CPU run alone."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from lsp_server.loading.keep_triton import keep_after_compile, keep_triton_entries, main, run_kernels
from lsp_server.loading.run_loader import load_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inductor_gpu_train"


def test_keeps_the_runs_entries_only_and_the_run_indexes_with_them(tmp_path: Path, capsys):
    (run,) = (FIXTURES / "transformer_train").glob("torch_compile_debug/run_*")
    cache = tmp_path / "triton_cache_of_the_machine"
    shutil.copytree(run / "triton_cache", cache)
    gemm_entries = (FIXTURES / "autotune_gemm").glob("torch_compile_debug/run_*/triton_cache/*/triton_mm.json")
    foreign = sorted(p.parent for p in gemm_entries)[0]
    shutil.copytree(foreign, cache / foreign.name)
    shutil.copytree(FIXTURES / "transformer_train" / "profiler_traces", tmp_path / "profiler_traces")
    copy = tmp_path / "torch_compile_debug" / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("triton_cache"))
    ours = {p.parent.name for p in (run / "triton_cache").glob("*/*.json")}
    assert keep_triton_entries(copy, [cache]) == len(ours)
    assert {p.name for p in (copy / "triton_cache").iterdir()} == ours  # not the triton_mm entry
    assert {p.name.split(".")[0] for p in (copy / "triton_cache").glob("*/*.json")} <= run_kernels(copy)
    assert keep_triton_entries(copy, [cache]) == 0  # kept once
    loaded = load_run(copy)
    gelu = next(k for g in loaded.graphs for k in g.kernels if k.name == "triton_poi_fused_gelu_view_7")
    # no .best_config records beside this copy: the profiler trace's launch (registers, threads) tells which of
    # the two compiled configs ran, the one Inductor's own record names in the fixture
    recorded = {json.loads(p.read_text())["triton_cache_hash"]
                for p in (FIXTURES / "transformer_train").glob("inductor_cache/*/*.best_config")}
    assert len(gelu.gpu.entries) == 2 and gelu.gpu.chosen_by == "profiled launch"
    assert gelu.gpu.chosen.key in recorded and "sass" in gelu.gpu.chosen.stages
    assert main([str(copy), "--triton-cache", str(cache)]) == 0
    assert f"kept 0 Triton cache entries of {len(run_kernels(copy))} kernels" in capsys.readouterr().out


def cache_env(monkeypatch, tmp_path: Path, triton_cache: Path) -> None:
    """The script's environment as `kernel-lens compile` sees it: this Triton cache and no other."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton_cache))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "no_inductor_cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_after_compile_keeps_the_runs_entries_and_leaves_another_programs_kernel_of_that_name(
        tmp_path: Path, monkeypatch):
    """`kernel-lens compile`'s step on the H100 run copied without its entries, the machine's cache holding them
    and one more entry of the same kernel name compiled from another program's file (its TTIR names that file):
    every kernel's entries come back, the other program's does not."""
    (run,) = (FIXTURES / "transformer_train").glob("torch_compile_debug/run_*")
    cache = tmp_path / "machine_triton_cache"
    shutil.copytree(run / "triton_cache", cache)
    ours = {p.parent.name for p in (run / "triton_cache").glob("*/*.json")}
    gelu = next(p.parent for p in cache.glob("*/triton_poi_fused_gelu_view_7.ttir"))
    other = cache / ("X" * len(gelu.name))
    shutil.copytree(gelu, other)
    ttir = other / "triton_poi_fused_gelu_view_7.ttir"
    (kernel_file,) = {m for m in re.findall(r'loc\("([^"]+\.py)"', ttir.read_text()) if "/inductor_cache/" in m}
    ttir.write_text(ttir.read_text().replace(kernel_file, "/tmp/another_program/inductor_cache/zz/czz.py"))
    copy = tmp_path / "torch_compile_debug" / run.name
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("triton_cache"))
    cache_env(monkeypatch, tmp_path, cache)
    line = keep_after_compile(str(copy))
    assert {p.name for p in (copy / "triton_cache").iterdir()} == ours  # not the other program's
    kernels = {p.name.split(".")[0] for p in (copy / "triton_cache").glob("*/*.json")}
    assert line == (f"Triton cache entries kept: {copy / 'triton_cache'} ({len(ours)} new; {len(kernels)} of "
                    f"{len(run_kernels(copy))} kernels have theirs)")
    assert kernels == run_kernels(copy)  # the fixture kept an entry for every kernel of the run


def test_after_compile_does_nothing_and_says_nothing_for_a_cpu_run(tmp_path: Path, monkeypatch):
    """A real Inductor CPU run (C++ kernels): no Triton kernel, so no folder and no line, even with a cache."""
    (run,) = (FIXTURES.parent / "inductor_cpu_lines" / "block").glob("torch_compile_debug/run_*")
    copy = tmp_path / "torch_compile_debug" / run.name
    shutil.copytree(run, copy)
    assert any("cpp_fused" in p.read_text() for p in copy.glob("torchinductor/*/output_code.py"))
    (gpu_run,) = (FIXTURES / "transformer_train").glob("torch_compile_debug/run_*")
    cache_env(monkeypatch, tmp_path, gpu_run / "triton_cache")
    assert keep_after_compile(str(copy)) is None
    assert not (copy / "triton_cache").exists()
