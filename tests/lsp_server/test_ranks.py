"""The ranks of a distributed job as the index reads them (issue 49): lens/run.json's rank (a bad file is no rank and
a problem line, never an exception), which runs make one job, and ranks that agree saying nothing but their rank."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from test_server_lens_ddp import RANK0, RANK1, ddp_workspace

from lsp_server.features.diagnostics import rank_findings
from lsp_server.features.ranks import (
    function_divergences,
    rank_jobs,
    ranks_hover_line,
    run_divergence,
)
from lsp_server.index import Index
from lsp_server.loading.run_loader import load_run
from lsp_server.model import Run
from lsp_server.reports.index_report import print_index


@pytest.fixture
def rank1(tmp_path: Path) -> Path:
    return ddp_workspace(tmp_path, (RANK1,)) / "torch_compile_debug" / RANK1


def test_run_json_gives_the_runs_rank(rank1: Path):
    run = load_run(rank1)
    assert (run.rank, run.world_size, run.rank_label, run.problems()) == (1, 2, "rank 1 of 2", [])


@pytest.mark.parametrize("text, problem", [
    ("{not json", ("the run's rank is unknown: {path}:1: invalid JSON: Expecting property name enclosed in double "
                   "quotes: line 1 column 2 (char 1)")),
    ('{"version": 99, "pid": 302, "rank": 1, "world_size": 2}',
     "the run's rank is unknown: {path}: unsupported version 99: this server reads major version 1"),
    ('{"version": 1, "pid": 302, "rank": 2, "world_size": 2}',
     ("the run's rank is unknown: {path}: rank 2 of world_size 2 is not a rank of a job (an integer from 0 to "
      "world_size - 1)")),
    ('{"version": 1, "pid": 302, "rank": "one", "world_size": 2}',
     ("the run's rank is unknown: {path}: rank None of world_size 2 is not a rank of a job (an integer from 0 to "
      "world_size - 1)")),
])
def test_a_malformed_run_json_is_no_rank_and_a_problem_naming_the_file(rank1: Path, text: str, problem: str):
    path = rank1 / "lens" / "run.json"
    path.write_text(text)
    run = load_run(rank1)
    assert (run.rank, run.world_size, run.rank_label) == (None, None, "")
    assert len(run.graphs) == 4  # the graphs load as ever
    assert run.problems() == [problem.format(path=path)]


@pytest.mark.parametrize("text", [None, '{"version": 1, "pid": 302, "rank": null, "world_size": null}'])
def test_no_run_json_or_no_process_group_is_no_rank_and_no_problem(rank1: Path, text: str | None):
    path = rank1 / "lens" / "run.json"
    path.unlink() if text is None else path.write_text(text)
    run = load_run(rank1)
    assert (run.rank, run.rank_label, run.problems()) == (None, "", [])


def ranked(index: Index, name: str, rank: int, seconds: float, world_size: int = 2) -> Run:
    run = Run(name, Path("/runs") / name, "lens", datetime(2026, 2, 1, 10) + timedelta(seconds=seconds),
              rank=rank, world_size=world_size)
    index.put_run(run)
    return run


def test_a_job_is_distinct_ranks_of_one_world_size_started_within_a_minute():
    index = Index()
    ranked(index, "a0", 0, 0)
    ranked(index, "a1", 1, 2)
    ranked(index, "b0", 0, 30)  # launched again within the minute: rank 0 is taken, a job of its own
    ranked(index, "b1", 1, 31)
    ranked(index, "c1", 1, 200)  # alone: no job
    ranked(index, "d0", 0, 300, world_size=4)  # another world size
    ranked(index, "d1", 1, 301)
    assert [[r.id for r in job] for job in rank_jobs(index)] == [["a0", "a1"], ["b0", "b1"]]


def test_ranks_that_agree_say_only_their_rank(tmp_path: Path):
    """Rank 0's run again as rank 1 of the same job (same graphs and kernels): no divergence anywhere."""
    workspace = ddp_workspace(tmp_path, (RANK0,))
    twin = workspace / "torch_compile_debug" / "run_2026_02_01_10_00_01_000000-pid_303"
    shutil.copytree(workspace / "torch_compile_debug" / RANK0, twin)
    (twin / "lens" / "run.json").write_text(json.dumps({"version": 1, "pid": 303, "rank": 1, "world_size": 2}))
    index = Index()
    for folder in (workspace / "torch_compile_debug").iterdir():
        index.put_run(load_run(folder))
    view, other = index.views[RANK0], index.views[twin.name]
    program = str(workspace / "ddp_train.py")
    assert ranks_hover_line(index, view, program, 17) == "Other ranks — rank 1: same 6 kernels"
    assert function_divergences(view, other) == [] and run_divergence(view, other) is None
    assert rank_findings(index, None) == []


def test_the_index_report_names_each_runs_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    workspace = ddp_workspace(tmp_path)
    assert print_index(str(workspace), as_json=False) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if line.startswith("run_")]
    assert heads == [f"{RANK0}  [lens]  rank 0 of 2  2026-02-01T10:00:00.001000  2 graphs, 11 kernels",
                     f"{RANK1}  [lens]  rank 1 of 2  2026-02-01T10:00:00  4 graphs, 22 kernels"]
    assert print_index(str(workspace), as_json=True) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["rank"], r["world_size"], r["problems"]) for r in runs] == [(0, 2, []), (1, 2, [])]


def test_ranks_with_the_same_graphs_but_other_kernels_on_a_line_say_which(tmp_path: Path):
    """Rank 0's run again as rank 1, one kernel of the backward graph renamed in its kernel map (`self.b`'s bias
    gradient, of line 18 alone): same graph count, other kernels on line 18 only."""
    workspace = ddp_workspace(tmp_path, (RANK0,))
    twin = workspace / "torch_compile_debug" / "run_2026_02_01_10_00_01_000000-pid_303"
    shutil.copytree(workspace / "torch_compile_debug" / RANK0, twin)
    (twin / "lens" / "run.json").write_text(json.dumps({"version": 1, "pid": 303, "rank": 1, "world_size": 2}))
    kernel_map = twin / "lens" / "graph_1" / "kernel_map.json"
    kernel_map.write_text(kernel_map.read_text().replace('"cpp_fused_sum_1"', '"cpp_fused_sum_9"'))
    index = Index()
    for folder in (workspace / "torch_compile_debug").iterdir():
        index.put_run(load_run(folder))
    view, other = index.views[twin.name], index.views[RANK0]  # rank 1 answers (the newer run)
    program = str(workspace / "ddp_train.py")
    assert ranks_hover_line(index, view, program, 17) == "Other ranks — rank 0: same 6 kernels"
    assert ranks_hover_line(index, view, program, 18) == (
        "Other ranks — rank 0: 7 kernels, `cpp_fused_sum_1` instead of `cpp_fused_sum_9`")
    assert [d.message for d in function_divergences(view, other)] == [
        "Ranks diverge in `forward`: different kernels on line 18"]
    assert run_divergence(view, other) == "rank 0 of 2 compiled other kernels than rank 1 of 2"
    assert [(f.run.id, f.line, f.code, f.severity) for f in rank_findings(index, None)] == [
        (twin.name, 18, "rank-divergence", "warning")]
