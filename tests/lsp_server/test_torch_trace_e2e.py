"""End to end: real torch runs under TORCH_TRACE (one process read live while it runs; two gloo ranks)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsp_server.parsers.torch_trace.findings import find_divergences, trace_diagnostics
from lsp_server.parsers.torch_trace.logs_dir import TraceDirectory, load_trace_dir
from lsp_server.reports.trace_view import render_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "torch_trace"
_spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)

pytestmark = pytest.mark.timeout(600)


def _write_user_script(folder: Path, scenario: str) -> Path:
    """The user's program, written into the test's own folder (so paths in the trace point there)."""
    script = folder / f"{scenario}.py"
    script.write_text((FIXTURES / "scenarios" / f"{scenario}.py").read_text())
    return script


def _line_of(script: Path, text: str) -> int:
    return next(i for i, ln in enumerate(script.read_text().splitlines(), 1) if text in ln)


class LiveRun:
    """A real run whose trace folder was polled while the process wrote it."""

    def __init__(self, script: Path, trace_dir: Path, live: TraceDirectory, polls_with_news: int) -> None:
        self.script, self.trace_dir, self.live, self.polls_with_news = script, trace_dir, live, polls_with_news


@pytest.fixture(scope="session")
def single_run(tmp_path_factory) -> LiveRun:
    folder = tmp_path_factory.mktemp("trace_single")
    script = _write_user_script(folder, "breaks_recompile_failure")
    trace_dir = folder / "torch_trace"
    trace_dir.mkdir()
    live = TraceDirectory([trace_dir])
    proc = subprocess.Popen([sys.executable, str(script)], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "TORCH_TRACE": str(trace_dir)})
    polls_with_news = 0
    while proc.poll() is None:
        polls_with_news += bool(live.refresh())
        time.sleep(0.02)
    assert proc.returncode == 0
    live.refresh()
    return LiveRun(script, trace_dir, live, polls_with_news)


@pytest.fixture(scope="session")
def two_rank_run(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("trace_ranks")
    script = _write_user_script(folder, "two_ranks")
    port = str(29600 + os.getpid() % 300)
    make_fixtures.run_scenario(script, folder / "torch_trace", args=(port,))
    return script, folder / "torch_trace"


def test_live_reading_matches_a_full_read(single_run):
    fresh = load_trace_dir(single_run.trace_dir)
    live = single_run.live.summary
    assert single_run.polls_with_news >= 1
    assert live.skipped_records == 0 == fresh.skipped_records
    assert [f.lens_text() for f in live.functions()] == [f.lens_text() for f in fresh.functions()]
    assert render_text(live) == render_text(fresh)


def test_real_run_graph_break_recompile_and_failures(single_run):
    script = single_run.script
    summary = load_trace_dir(single_run.trace_dir)
    diags = {(d.kind, d.line): d for d in trace_diagnostics(summary)}
    assert all(d.file == str(script) for d in diags.values())
    gb = diags[("graph_break", _line_of(script, "if b.sum() < 0"))]
    assert gb.quick_fix and gb.quick_fix.symbol == "torch.cond"
    rc = diags[("recompile", _line_of(script, "def branchy"))]
    assert "size mismatch at index 0. expected 10, actual 12" in rc.message
    assert "boom from raising_backend" in diags[("compile_failure", _line_of(script, "def sine"))].message
    assert diags[("compile_failure", _line_of(script, "return y @ torch.ones"))].severity == "error"
    branchy = next(f for f in summary.functions() if f.name == "branchy")
    assert (branchy.graphs, branchy.recompiles, len(branchy.graph_breaks)) == (2, 1, 1)
    assert branchy.compile_time_s > 0


def test_real_two_rank_run_flags_the_rank_only_graph_break(two_rank_run):
    script, trace_dir = two_rank_run
    summary = load_trace_dir(trace_dir)
    assert list(summary.rank_logs()) == [0, 1]
    per_rank = {f.rank: f for f in summary.functions() if f.name == "step"}
    assert len(per_rank[0].graph_breaks) == 0 and len(per_rank[1].graph_breaks) == 1
    divergence = next(d for d in find_divergences(summary) if d.kind == "graph_break")
    assert (divergence.line, divergence.ranks_with, divergence.ranks_without) == (
        _line_of(script, "if rank == 1"), [1], [0])
    assert "Ranks diverge:" in render_text(summary)
