"""Keeping a GPU run's Triton cache entries beside its debug dir (issue 47), on the H100 run's real entries: the
run's kernels' entries are copied, another program's are not, and the copied run indexes with its chain."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from lsp_server.loading.keep_triton import keep_triton_entries, main, run_kernels
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
