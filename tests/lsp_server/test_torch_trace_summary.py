"""The trace model, findings and CLI view on the committed real logs (tests/fixtures/torch_trace)."""
from __future__ import annotations

import json
from pathlib import Path

from lsp_server.parsers.torch_trace.findings import find_divergences, trace_diagnostics
from lsp_server.parsers.torch_trace.logs_dir import load_trace_dir
from lsp_server.reports.trace_view import print_trace, render_json, render_text, trace_report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "torch_trace"
SCENARIOS = FIXTURES / "scenarios"


def _line_of(script: Path, text: str) -> int:
    """1-based line of the first line containing `text` in a scenario script."""
    return next(i for i, ln in enumerate(script.read_text().splitlines(), 1) if text in ln)


def _function(summary, name, rank=None):
    return next(f for f in summary.functions() if f.name == name and f.rank == rank)


def test_function_figures_for_break_recompile_and_failures():
    summary = load_trace_dir(FIXTURES / "breaks_recompile_failure")
    script = SCENARIOS / "breaks_recompile_failure.py"
    branchy = _function(summary, "branchy")
    assert branchy.def_line == _line_of(script, "def branchy")
    assert branchy.frames == 2  # the function and its resume frame after the break
    assert branchy.graphs == 2
    assert branchy.ops == sum(fc.graph_op_count for fc in branchy.latest_per_frame())
    assert branchy.recompiles == 1
    assert [g.reason for g in branchy.recompile_reasons] == [
        "tensor 'a' size mismatch at index 0. expected 10, actual 12",
        "tensor 'x' size mismatch at index 0. expected 10, actual 12"]
    assert [(gb.line, gb.reason) for gb in branchy.graph_breaks] == [
        (_line_of(script, "if b.sum() < 0"), "Data-dependent branching")]
    assert "1 graph break" in branchy.lens_text() and "recompiled 1×" in branchy.lens_text()
    sine = _function(summary, "sine")
    assert [fc.fail_type for fc in sine.failures] == ["BackendCompilerFailed"]
    assert sine.failures[0].fail_file is None  # a backend failure names no user frame
    bad = _function(summary, "bad_matmul")
    assert (bad.failures[0].fail_type, bad.failures[0].fail_line) == (
        "TorchRuntimeError", _line_of(script, "return y @ torch.ones"))


def test_diagnostics_place_findings_on_user_lines():
    summary = load_trace_dir(FIXTURES / "breaks_recompile_failure")
    script = SCENARIOS / "breaks_recompile_failure.py"
    by_kind = {}
    for d in trace_diagnostics(summary):
        by_kind.setdefault(d.kind, []).append(d)
    (gb,) = by_kind["graph_break"]
    assert gb.line == _line_of(script, "if b.sum() < 0") and gb.message == "Graph break: Data-dependent branching"
    assert gb.quick_fix is not None and gb.quick_fix.symbol == "torch.cond"
    assert any(r.message.startswith("Hint: Use `torch.cond`") for r in gb.related)
    assert any("data-dependent branching" in r.message for r in gb.related)  # the explanation
    (rc,) = by_kind["recompile"]
    assert rc.line == _line_of(script, "def branchy")
    assert "recompiled 1×" in rc.message
    assert len(rc.related) == 2 and all("size mismatch" in r.message for r in rc.related)
    failures = {d.line: d for d in by_kind["compile_failure"]}
    backend = failures[_line_of(script, "def sine")]  # no user frame: falls back to the def line
    assert backend.severity == "error" and "boom from raising_backend" in backend.message
    assert "TorchRuntimeError" in failures[_line_of(script, "return y @ torch.ones")].message


def test_inductor_output_code_and_provenance_are_reachable():
    summary = load_trace_dir(FIXTURES / "inductor_small")
    (fc,) = summary.compiles()
    assert fc.output_code_path and fc.output_code_path.endswith(".py")
    code = fc.output_code_text()
    assert "async_compile.cpp_pybinding" in code and "def call(" in code
    (graph,) = fc.inductor_graphs
    mappings = json.loads(graph.text("inductor_provenance_tracking_node_mappings"))
    assert set(mappings) >= {"preToPost", "postToPre", "cppCodeToPost", "postToCppCode"}
    post_grad = graph.text("inductor_post_grad_graph")
    assert f"inductor_small.py:{_line_of(SCENARIOS / 'inductor_small.py', 'torch.relu(x @ w)')}" in post_grad
    assert {"fx_graph_runnable", "inductor_output_code"} <= set(graph.artifacts)
    assert {"before_pre_grad_graph", "dynamo_output_graph", "dynamo_cpp_guards_str"} <= set(fc.artifacts)


GPU_TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "inductor_gpu"


def test_torch_2_11_gpu_training_trace_keeps_forward_and_backward_code():
    """The GPU engineer's torch-2.11 H100 trace (tests/fixtures/inductor_gpu): other version, same model."""
    summary = load_trace_dir(GPU_TRACES / "mlp_train" / "torch_trace")
    assert summary.skipped_records == 0
    (fc,) = summary.compiles()
    assert len(fc.inductor_graphs) == 2  # forward, then backward, under one compile id
    forward, backward = (g.text("inductor_output_code") for g in fc.inductor_graphs)
    assert "async_compile.triton(" in forward and "async_compile.triton(" in backward and forward != backward
    assert all(g.text("inductor_provenance_tracking_node_mappings") for g in fc.inductor_graphs)


def test_torch_2_11_gpu_graph_break_trace():
    summary = load_trace_dir(GPU_TRACES / "graph_break" / "torch_trace")
    (gb,) = [d for d in trace_diagnostics(summary) if d.kind == "graph_break"]
    assert gb.message == "Graph break: Data-dependent branching" and gb.quick_fix is not None
    (branchy,) = [f for f in summary.functions() if f.graph_breaks]
    assert branchy.frames >= 2 and all(fc.output_code is not None for fc in branchy.compiles)


def test_two_ranks_diverge_on_the_graph_break():
    summary = load_trace_dir(FIXTURES / "two_ranks")
    script = SCENARIOS / "two_ranks.py"
    assert list(summary.rank_logs()) == [0, 1]
    assert _function(summary, "step", 0).graph_breaks == []
    assert len(_function(summary, "step", 1).graph_breaks) == 1
    kinds = {d.kind: d for d in find_divergences(summary)}
    assert kinds["graph_break"].ranks_with == [1] and kinds["graph_break"].ranks_without == [0]
    assert kinds["graph_break"].line == _line_of(script, "if rank == 1")
    assert "graph" in kinds  # rank 1 has two graphs, rank 0 one
    gb_diag = next(d for d in trace_diagnostics(summary) if d.kind == "graph_break")
    assert gb_diag.ranks == [1]
    assert any(d.kind == "rank_divergence" for d in trace_diagnostics(summary))


def test_render_text_lists_breaks_recompiles_failures_per_rank():
    text = render_text(load_trace_dir(FIXTURES / "breaks_recompile_failure"))
    assert "graph break at" in text and "Data-dependent branching" in text
    assert "recompile: tensor 'a' size mismatch" in text
    assert "FAILED: BackendCompilerFailed" in text and "FAILED at " in text
    two = trace_report(FIXTURES / "two_ranks")
    assert "rank 0 " in two and "rank 1 " in two and "Ranks diverge:" in two


def test_render_json_is_serialisable_and_complete():
    report = render_json(load_trace_dir(FIXTURES / "two_ranks"))
    json.dumps(report)
    assert report["version"] == 1 and report["skipped_records"] == 0
    assert sorted(lg["rank"] for lg in report["logs"]) == [0, 1]
    steps = {f["rank"]: f for f in report["functions"] if f["name"] == "step"}
    assert steps[1]["graph_breaks"] == 1 and steps[0]["graph_breaks"] == 0
    assert {d["kind"] for d in report["divergences"]} >= {"graph_break"}


def test_print_trace_cli_entry(capsys, tmp_path):
    assert print_trace(FIXTURES / "two_ranks", as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 1
    assert print_trace(FIXTURES / "two_ranks") == 0
    assert capsys.readouterr().out.startswith("Structured trace: 2 log(s)")
    assert print_trace(tmp_path / "missing") == 2
