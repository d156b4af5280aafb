"""TraceLoader and trace runs on the committed TORCH_TRACE logs: grouping logs into runs, the newest run per
file wins, appended bytes read incrementally, a deleted log's run dropped, Inductor graphs written as a run."""
from __future__ import annotations

from pathlib import Path

from trace_workspaces import FIXTURES, RECORDED_SCENARIOS, SCENARIOS, remapped_log, trace_workspace

from lsp_server.loading.graph_builder import normalize_path
from lsp_server.loading.trace_loader import TraceLoader, trace_runs_of, user_caller
from lsp_server.parsers.torch_trace.compiles import FrameCompile, resumed_function
from lsp_server.parsers.torch_trace.reader import StackFrame

BREAKS_LOG = FIXTURES / "breaks_recompile_failure" / "dedicated_log_torch_trace_single.log"


def loader(tmp_path: Path, root: Path) -> TraceLoader:
    return TraceLoader([root], tmp_path / "cache")


def test_two_rank_logs_are_one_run_and_a_later_log_of_a_rank_starts_the_next(tmp_path: Path):
    logs = trace_workspace(tmp_path / "ws", "two_ranks")
    later = remapped_log(FIXTURES / "two_ranks" / "dedicated_log_torch_trace_rank_0.log", RECORDED_SCENARIOS,
                         str(tmp_path / "ws"), day="1231")
    (logs / "dedicated_log_torch_trace_rank_0_later.log").write_text("".join(later))
    traces = loader(tmp_path, logs)
    traces.refresh_all()
    runs = trace_runs_of(traces.directory.summary)
    assert [sorted(Path(p).name for p in run.logs) for run in runs] == [
        ["dedicated_log_torch_trace_rank_0.log", "dedicated_log_torch_trace_rank_1.log"],
        ["dedicated_log_torch_trace_rank_0_later.log"]]
    facts = traces.facts()  # the later single-rank run owns two_ranks.py: no rank-1 break, no divergence
    assert [(f.rank, f.graph_breaks) for f in facts.functions] == [(0, 0)]
    assert not [d for d in facts.findings if d.kind in ("graph_break", "rank_divergence")]


def test_appended_bytes_are_read_incrementally_and_a_deleted_log_is_forgotten(tmp_path: Path):
    framed = remapped_log(BREAKS_LOG, RECORDED_SCENARIOS, str(tmp_path))
    log = tmp_path / "traces" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    half = len(framed) // 2
    log.write_text("".join(framed[:half]))
    traces = loader(tmp_path, log.parent)
    traces.refresh_all()
    reader = traces.directory.readers[str(log)]
    first_offset, first_records = reader.offset, reader.records_read
    assert first_offset == len("".join(framed[:half]).encode())
    with log.open("a") as f:
        f.write("".join(framed[half:]))
    update = traces.refresh_paths({log})
    assert reader.offset == log.stat().st_size and reader.generation == 0  # continued, not restarted
    assert reader.records_read > first_records
    kinds = {d.kind for d in update.facts.findings}
    assert {"graph_break", "recompile", "compile_failure"} <= kinds
    assert all(d.file == normalize_path(str(tmp_path / "breaks_recompile_failure.py")) for d in update.facts.findings)
    log.unlink()
    gone = traces.refresh_paths({log})
    assert gone.facts.findings == [] and str(log) not in traces.directory.readers


def test_inductor_graphs_of_a_log_become_a_trace_run(tmp_path: Path):
    logs = trace_workspace(tmp_path / "ws", "inductor_small")
    traces = loader(tmp_path, logs)
    (run,) = traces.refresh_all().runs
    assert run.kind == "trace" and run.pid is not None
    (graph,) = run.graphs
    assert sorted(k.name for k in graph.kernels) == ["cpp_fused_add_mul_relu_0", "extern_kernels.mm"]
    assert graph.problems == []  # provenance version 2.0 (Inductor's) is read
    assert {f.name for f in graph.path.iterdir()} >= {"output_code.py", "fx_graph_readable.py",
                                                      "inductor_provenance_tracking_node_mappings.json"}
    assert traces.refresh_paths({next(logs.glob("*.log"))}).runs == []  # nothing new: no reparse
    assert [r.id for r in traces.refresh_all(every_run=True).runs] == [run.id]


def test_cache_folders_nobody_wrote_to_for_a_week_are_removed_at_start(tmp_path: Path):
    import os
    import time

    from lsp_server.loading.trace_runs import TraceRunWriter
    cache = tmp_path / "cache"
    old, fresh, mixed = cache / "old-log-0123", cache / "fresh-log-4567", cache / "mixed-log-89ab"
    for folder in (old, fresh, mixed):
        (folder / "torchinductor" / "frame_0.0_graph_0").mkdir(parents=True)
        (folder / "torchinductor" / "frame_0.0_graph_0" / "output_code.py").write_text("# code\n")
    week_ago = time.time() - 8 * 86400
    for folder in (old, mixed):
        for path in [folder, *folder.rglob("*")]:
            os.utime(path, (week_ago, week_ago))
    os.utime(mixed / "torchinductor" / "frame_0.0_graph_0" / "output_code.py")  # one file written just now
    TraceRunWriter(cache)
    assert not old.exists() and fresh.exists() and mixed.exists()


def test_a_compile_called_through_torch_names_the_users_call_not_eval_frame():
    # A compiled function called from another compiled function's resume frame: Dynamo's stack has torch's
    # eval_frame.py between the user's call and the frame.
    stack = (StackFrame("/proj/prog.py", 19, "<module>"),
             StackFrame("/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", 1166, "compile_wrapper"),
             StackFrame("/proj/prog.py", 4, "scale"))
    fc = FrameCompile(source="log", rank=None, frame_id=2, frame_compile_id=0, stack=stack)
    assert user_caller(fc) == stack[0]
    torch_only = FrameCompile(source="log", rank=None, frame_id=2, frame_compile_id=0, stack=stack[1:])
    assert user_caller(torch_only) is None


def test_a_resume_function_is_the_users_function_after_its_first_break():
    assert resumed_function("torch_dynamo_resume_in_both_at_14") == ("both", 14)
    assert resumed_function("torch_dynamo_resume_in_torch_dynamo_resume_in_f_at_3_at_9") == ("f", 9)
    assert resumed_function("scale") == ("scale", None)
