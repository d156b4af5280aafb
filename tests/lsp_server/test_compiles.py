"""The compiles picker's data through the real server, from committed structured traces: the `torch.compile`
line that wrapped each compiled function, torch.compiler.config's set values, and graph breaks counted once per
place over frames, recompiles and ranks (kernelLens.listGraphBreaks)."""
from __future__ import annotations

from pathlib import Path

import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_diagnostics import wait_for_diagnostics
from trace_workspaces import line_of, trace_workspace

from lsp_server.index import build_view
from lsp_server.loading.run_loader import load_run

BREAKS = "breaks_recompile_failure"


@pytest_lsp.fixture(config=SERVER)
async def traces_client(lsp_client: LanguageClient, tmp_path: Path):
    trace_workspace(tmp_path / "ws", BREAKS)
    trace_workspace(tmp_path / "ws", "two_ranks")
    await start_session(lsp_client, tmp_path / "ws")
    yield
    await lsp_client.shutdown_session()


async def command(client: LanguageClient, name: str, uri: str | None = None):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=name, arguments=[{"uri": uri}] if uri else [{}]))


async def test_compile_call_config_and_graph_breaks_counted_once(traces_client: LanguageClient, tmp_path: Path):
    script, ranks_script = tmp_path / "ws" / f"{BREAKS}.py", tmp_path / "ws" / "two_ranks.py"
    await wait_for_diagnostics(traces_client, script.as_uri(), lambda ds: any(d.code == "graph-break" for d in ds))
    await wait_for_diagnostics(traces_client, ranks_script.as_uri(),
                               lambda ds: any(d.code == "graph-break" for d in ds))
    compiles = await command(traces_client, "kernelLens.listCompiles", script.as_uri())
    branchy = {c["compile_id"]: c for c in compiles if c["function"] == "branchy"}
    wrapped = {"uri": script.as_uri(), "line": line_of(script, 'compiled = torch.compile(branchy, backend="eager")')}
    assert branchy["0/0"]["compile_call"] == wrapped and branchy["0/1"]["compile_call"] == wrapped
    assert branchy["0/0"]["origin"] == "TORCH_TRACE" and branchy["0/0"]["config"] == {}  # nothing set
    sine = next(c for c in compiles if c["function"] == "sine")
    assert sine["compile_call"] is None  # `torch.compile(fn, ...)` in a loop over functions names none: not claimed
    # the break in branchy: hit by its first compile and its recompile, both of frame 0
    found = (await command(traces_client, "kernelLens.listGraphBreaks", script.as_uri()))["graph_breaks"]
    assert found == [{"reason": "Data-dependent branching", "uri": script.as_uri(),
                      "line": line_of(script, "if b.sum() < 0"), "compiles": 2, "frames": 1, "ranks": [],
                      "functions": ["branchy"]}]
    everywhere = (await command(traces_client, "kernelLens.listGraphBreaks"))["graph_breaks"]
    (ranked,) = [b for b in everywhere if b["uri"] == ranks_script.as_uri()]
    assert ranked["ranks"] == [1] and ranked["line"] == line_of(ranks_script, "if rank == 1")
    assert len(everywhere) == 2


async def test_each_compile_carries_its_guards_and_a_recompile_the_guard_that_failed(traces_client: LanguageClient,
                                                                                     tmp_path: Path):
    script = tmp_path / "ws" / f"{BREAKS}.py"
    await wait_for_diagnostics(traces_client, script.as_uri(), lambda ds: any(d.code == "graph-break" for d in ds))
    compiles = await command(traces_client, "kernelLens.listCompiles", script.as_uri())
    first, again = (next(c for c in compiles if c["function"] == "branchy" and c["compile_id"] == cid)
                    for cid in ("0/0", "0/1"))
    # the 0/0 call's guard on `a`'s sizes failed for the 12-element call: Dynamo recompiled as 0/1
    failed = [g for g in first["guard_list"] if g["failed_for"]]
    assert len(failed) == 1 and failed[0]["failed_for"] == ["0/1"], first["guard_list"]
    (guard,) = failed
    assert guard["kind"] == "TENSOR_MATCH" and guard["code"].startswith("check_tensor(L['a'], ")
    assert "size=[10]" in guard["code"] and guard["line"] == line_of(script, "x = a * 2")
    kinds = [g["kind"] for g in first["guard_list"]]
    assert kinds.count("TENSOR_MATCH") == 2 and "GLOBAL_STATE" in kinds  # both tensors', and the ambient ones
    assert next(g for g in first["guard_list"] if g["kind"] == "GLOBAL_STATE")["line"] is None
    # the recompile quotes that guard of 0/0 beside the failure in words
    assert again["recompile_causes"] == [{"cache_entry": "0/0", "guard": guard["code"],
                                          "words": "`a`'s dimension 0 changed: compiled for 10, called with 12"}]
    assert again["recompile_reasons"] == [again["recompile_causes"][0]["words"]]
    assert not any(g["failed_for"] for g in again["guard_list"])  # nothing recompiled after it
    assert again["guard_list"] and all(c["recompile_causes"] == [] for c in compiles if c["compile_id"].endswith("/0"))


def test_a_graph_of_dynamos_continuation_is_its_users_function_after_the_break():
    """The picker labels a debug-directory graph of `torch_dynamo_resume_in_branchy_at_5` as `branchy` after line 5:
    the index reads the continuation's name once, when it builds the run's view."""
    run_dir = next((FIXTURES / "inductor_gpu" / "graph_break" / "torch_compile_debug").glob("run_*"))
    view = build_view(load_run(run_dir))
    by_frame = {fn: [(e.graph.id, e.function, e.resumed_after) for e in entries]
                for (_, fn), entries in view.graphs_by_function.items()}
    assert by_frame["branchy"] == [("model__0_inference_0.0", "branchy", None)]
    assert by_frame["torch_dynamo_resume_in_branchy_at_5"] == [("model__1_inference_1.1", "branchy", 5),
                                                               ("model__2_inference_2.2", "branchy", 5)]
