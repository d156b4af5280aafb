"""End-to-end: the real server on structured traces (TORCH_TRACE logs) — diagnostics on the user's lines,
quick fixes, code lens and hover figures, rank divergences, trace-only kernels, logs that grow or get replaced."""
from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest_lsp
from lsp_workspaces import SERVER, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_diagnostics import wait_for_diagnostics
from trace_workspaces import RECORDED_SCENARIOS, FIXTURES, SCENARIOS, line_of, records, remapped_log, trace_workspace

BREAKS = "breaks_recompile_failure"


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(path.as_uri())


async def hover(client: LanguageClient, path: Path, line0: int) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(doc(path), types.Position(line0, 4)))
    return None if result is None else result.contents.value


def by_code(diagnostics: list[types.Diagnostic], code: str) -> list[types.Diagnostic]:
    return [d for d in diagnostics if d.code == code]


@pytest_lsp.fixture(config=SERVER)
async def breaks_client(lsp_client: LanguageClient, tmp_path: Path):
    trace_workspace(tmp_path / "ws", BREAKS)
    await start_session(lsp_client, tmp_path / "ws", {"kernelLens": {"graphBreakSeverity": "error"}})
    yield
    await lsp_client.shutdown_session()


async def test_graph_break_severity_setting_and_newer_run_clears_the_break(breaks_client: LanguageClient,
                                                                           tmp_path: Path):
    workspace = tmp_path / "ws"
    script = workspace / f"{BREAKS}.py"
    found = await wait_for_diagnostics(breaks_client, script.as_uri(), lambda d: by_code(d, "graph-break"))
    (graph_break,) = by_code(found, "graph-break")
    assert graph_break.range.start.line == line_of(script, "if b.sum() < 0")
    assert graph_break.severity == types.DiagnosticSeverity.Error  # graphBreakSeverity: error
    # The same program runs again (a day later) without the graph break: its log is the newer run.
    newer = remapped_log(FIXTURES / BREAKS / "dedicated_log_torch_trace_single.log", RECORDED_SCENARIOS,
                         str(workspace), drop_kinds=("dynamo_graph_break_reason",), day="1231")
    (workspace / "torch_trace" / "dedicated_log_torch_trace_later.log").write_text("".join(newer))
    after = await wait_for_diagnostics(breaks_client, script.as_uri(), lambda d: not by_code(d, "graph-break"))
    assert [d.range.start.line for d in by_code(after, "compile-failure")] == [
        line_of(script, "def sine"), line_of(script, "return y @ torch.ones")]


@pytest_lsp.fixture(config=SERVER)
async def ranks_client(lsp_client: LanguageClient, tmp_path: Path):
    trace_workspace(tmp_path / "ws", "two_ranks")
    await start_session(lsp_client, tmp_path / "ws")
    yield
    await lsp_client.shutdown_session()


async def test_two_ranks_divergence_diagnostic_hover_and_per_rank_lenses(ranks_client: LanguageClient,
                                                                         tmp_path: Path):
    script = tmp_path / "ws" / "two_ranks.py"
    break_line = line_of(script, "if rank == 1")
    found = await wait_for_diagnostics(ranks_client, script.as_uri(), lambda d: by_code(d, "rank-divergence"))
    diverging = {d.range.start.line: d.message for d in by_code(found, "rank-divergence")}
    assert diverging[break_line] == "Ranks diverge in step: graph break only on ranks [1], not on [0]"
    (graph_break,) = by_code(found, "graph-break")
    assert graph_break.range.start.line == break_line and graph_break.message.endswith("(rank 1)")
    assert graph_break.severity == types.DiagnosticSeverity.Warning
    def_line = line_of(script, "def step")
    text = await hover(ranks_client, script, def_line)
    assert "`step` (rank 0): 1 frame compiled · 1 graph · 2 ops" in text
    assert "`step` (rank 1): 2 frames compiled · 2 graphs · 5 ops" in text and "1 graph break" in text
    assert "Ranks diverge in step: graph break only on ranks [1], not on [0]" in text
    lenses = await ranks_client.text_document_code_lens_async(types.CodeLensParams(doc(script)))
    titles = sorted(lens.command.title for lens in lenses if lens.range.start.line == def_line)
    assert [t.split(" · ")[0] for t in titles] == ["rank 0: 1 graph", "rank 1: 2 graphs"]


@pytest_lsp.fixture(config=SERVER)
async def growing_client(lsp_client: LanguageClient, tmp_path: Path):
    """The log of BREAKS arrives in two pieces, as a running program writes it; the folder is a traceDirs one."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / f"{BREAKS}.py").write_text((SCENARIOS / f"{BREAKS}.py").read_text())
    await start_session(lsp_client, workspace, {"kernelLens": {"traceDirs": [str(tmp_path / "elsewhere")]}})
    yield
    await lsp_client.shutdown_session()


async def wait_for_compile(client: LanguageClient, script: Path, function: str, compile_id: str,
                           timeout: float = 30.0) -> dict:
    """Poll kernelLens.listCompiles until the index holds `function`'s compile `compile_id`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        compiles = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="kernelLens.listCompiles", arguments=[{"uri": script.as_uri()}]))
        found = next((c for c in compiles or [] if (c["function"], c["compile_id"]) == (function, compile_id)), None)
        if found is not None:
            return found
        assert asyncio.get_running_loop().time() < deadline, f"no compile {compile_id} of {function}: {compiles}"
        await asyncio.sleep(0.02)


async def test_growing_log_in_a_trace_dirs_folder_is_read_as_it_grows(growing_client: LanguageClient,
                                                                       tmp_path: Path):
    workspace = tmp_path / "ws"
    script = workspace / f"{BREAKS}.py"
    framed = remapped_log(FIXTURES / BREAKS / "dedicated_log_torch_trace_single.log", RECORDED_SCENARIOS,
                          str(workspace))
    cut = next(i for i, rec in enumerate(framed) if '"dynamo_graph_break_reason"' in rec)
    log = tmp_path / "elsewhere" / "dedicated_log_torch_trace_live.log"
    log.parent.mkdir()
    log.write_text("".join(framed[:cut]) + framed[cut][:40])  # ends inside the graph-break record
    # the server has read the log's first piece once it knows the compile that piece starts (its dynamo_start)
    await wait_for_compile(growing_client, script, "branchy", "0/0")
    breaks = await growing_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.listGraphBreaks", arguments=[{"uri": script.as_uri()}]))
    assert breaks == {"graph_breaks": []}  # the half-written record is not read as a break (the index says so)
    assert not by_code(growing_client.diagnostics.get(script.as_uri(), []), "graph-break")
    with log.open("a") as f:
        f.write(framed[cut][40:] + "".join(framed[cut + 1:]))
    found = await wait_for_diagnostics(growing_client, script.as_uri(),
                                       lambda d: by_code(d, "graph-break") and by_code(d, "compile-failure"))
    assert by_code(found, "graph-break")[0].range.start.line == line_of(script, "if b.sum() < 0")
    assert types.WORKSPACE_CODE_LENS_REFRESH in growing_client.refresh_requests  # lens titles changed


@pytest_lsp.fixture(config=SERVER)
async def inductor_trace_client(lsp_client: LanguageClient, tmp_path: Path):
    trace_workspace(tmp_path / "ws", "inductor_small")
    await start_session(lsp_client, tmp_path / "ws")
    yield
    await lsp_client.shutdown_session()


async def test_run_with_only_a_trace_has_kernels_hover_and_definition(inductor_trace_client: LanguageClient,
                                                                     tmp_path: Path):
    script = tmp_path / "ws" / "inductor_small.py"
    relu_line = line_of(script, "y = torch.relu(x @ w)")
    text = await hover(inductor_trace_client, script, relu_line)
    assert text is not None and "became 2 kernels" in text
    assert "cpp_fused_add_mul_relu_0" in text and "extern_kernels.mm" in text
    text = await hover(inductor_trace_client, script, line_of(script, "def mlp_head"))
    assert "`mlp_head`: 1 frame compiled · 1 graph · 4 ops · 11 guards" in text
    assert "`mlp_head` compiled into 2 kernels" in text
    refs = await inductor_trace_client.text_document_references_async(types.ReferenceParams(
        text_document=doc(script), position=types.Position(relu_line, 6),
        context=types.ReferenceContext(include_declaration=False)))
    launch = next(r for r in refs if "output_code.py" in r.uri)
    to_node = await inductor_trace_client.text_document_definition_async(
        types.DefinitionParams(types.TextDocumentIdentifier(launch.uri), launch.range.start))
    assert to_node and all(loc.uri.endswith("fx_graph_readable.py") for loc in to_node)
    sources = set()
    for node in to_node:
        to_source = await inductor_trace_client.text_document_definition_async(
            types.DefinitionParams(types.TextDocumentIdentifier(node.uri), node.range.start))
        sources |= {(loc.uri, loc.range.start.line) for loc in to_source}
    assert (script.as_uri(), relu_line) in sources and {uri for uri, _ in sources} == {script.as_uri()}
    runs = await inductor_trace_client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelLens.listRuns"))
    assert [(r["kind"], r["graphs"], r["kernels"]) for r in runs] == [("trace", 1, 2)]


@pytest_lsp.fixture(config=SERVER)
async def live_client(lsp_client: LanguageClient, tmp_path: Path):
    """An empty workspace (no torch_trace/ yet) with the user's program; the test runs it under TORCH_TRACE."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / f"{BREAKS}.py").write_text((SCENARIOS / f"{BREAKS}.py").read_text())
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def test_real_torch_run_under_torch_trace_publishes_diagnostics_live(live_client: LanguageClient,
                                                                          tmp_path: Path):
    workspace = tmp_path / "ws"
    script = workspace / f"{BREAKS}.py"
    env = {**os.environ, "TORCH_TRACE": str(workspace / "torch_trace")}
    env.pop("TORCH_COMPILE_DEBUG", None)
    process = await asyncio.create_subprocess_exec(sys.executable, str(script), cwd=workspace, env=env,
                                                   stdout=asyncio.subprocess.DEVNULL,
                                                   stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, stderr.decode()[-3000:]
    found = await wait_for_diagnostics(live_client, script.as_uri(), lambda d: len(by_code(d, "compile-failure")) == 2
                                       and by_code(d, "graph-break") and by_code(d, "recompile"), timeout=30)
    (graph_break,) = by_code(found, "graph-break")
    assert graph_break.range.start.line == line_of(script, "if b.sum() < 0")
    assert graph_break.message == "Graph break: Data-dependent branching"
    assert graph_break.severity == types.DiagnosticSeverity.Warning
    related = [r.message for r in graph_break.related_information]
    assert any(m.startswith("Hint: Use `torch.cond`") for m in related)
    assert any("data-dependent" in m.lower() for m in related if not m.startswith("Hint:"))  # the explanation
    (recompile,) = by_code(found, "recompile")
    assert recompile.range.start.line == line_of(script, "def branchy")
    # in plain words, with the failed guard itself quoted
    assert recompile.message == ("branchy recompiled 1×: `a`'s dimension 0 changed: compiled for 10, called with 12 "
                                 "(failed guard `tensor 'a' size mismatch at index 0. expected 10, actual 12`)")
    assert [r.message for r in recompile.related_information] == [
        "guard failed (0/0): `a`'s dimension 0 changed: compiled for 10, called with 12 — "
        "`tensor 'a' size mismatch at index 0. expected 10, actual 12`",
        "guard failed (1/0): `x`'s dimension 0 changed: compiled for 10, called with 12 — "
        "`tensor 'x' size mismatch at index 0. expected 10, actual 12`"]
    failures = {d.range.start.line: d for d in by_code(found, "compile-failure")}
    assert "boom from raising_backend" in failures[line_of(script, "def sine")].message
    assert failures[line_of(script, "return y @ torch.ones")].severity == types.DiagnosticSeverity.Error

    actions = await live_client.text_document_code_action_async(types.CodeActionParams(
        doc(script), graph_break.range, types.CodeActionContext([graph_break])))
    (fix,) = actions
    assert fix.kind == types.CodeActionKind.QuickFix and fix.title.startswith("Use torch.cond here")
    (edit,) = fix.edit.changes[script.as_uri()]
    assert edit.range.start.line == graph_break.range.start.line and "torch.cond" in edit.new_text
    assert list(fix.diagnostics) == [graph_break]

    def_line = line_of(script, "def branchy")
    text = await hover(live_client, script, def_line)
    assert "`branchy`: 2 frames compiled · 2 graphs · 4 ops" in text and "recompiled 1×" in text
    assert "Guards that failed" in text and "`0/0: tensor 'a' size mismatch at index 0. expected 10, actual 12`" in text
    lenses = await live_client.text_document_code_lens_async(types.CodeLensParams(doc(script)))
    titles = {lens.range.start.line: lens.command.title for lens in lenses}
    assert titles[def_line].startswith("2 graphs · 4 ops · 1 graph break · recompiled 1× · ")
    assert titles[line_of(script, "def sine")].startswith("0 graphs · 0 ops · 1 failed compile")

    # The compiles picker: each compile with its id, the call that triggered it and why it recompiled, in words.
    compiles = await live_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.listCompiles", arguments=[{"uri": script.as_uri()}]))
    branchy = {c["compile_id"]: c for c in compiles if c["function"] == "branchy"}
    assert {"0/0", "0/1"} <= set(branchy), [c["compile_id"] for c in compiles]
    assert branchy["0/0"]["call_site"] == {"uri": script.as_uri(),
                                           "line": line_of(script, "compiled(torch.randn(10), torch.ones(10))")}
    assert branchy["0/1"]["call_site"]["line"] == line_of(script, "compiled(torch.randn(12), torch.ones(12))")
    assert branchy["0/1"]["recompile_reasons"] == ["`a`'s dimension 0 changed: compiled for 10, called with 12"]
    assert branchy["0/0"]["status"] == "compiled" and branchy["0/0"]["graph_breaks"] == 1
    assert {c["status"] for c in compiles if c["function"] == "sine"} == {"failed"}
