"""Answers follow the user's edits (issue 45): after lines are added above (unsaved, then saved) every
line-anchored answer is on the line that moved, and a line whose text changed since the compile has no kernels of
its own any more (its hover says they are from its older text). A real compile of the graph-break program by our
backend, edited through the real client (didOpen / didChange)."""
from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_workspaces import SERVER, program_workspace, start_session
from real_programs import BREAKS, LENS_RUN, def_span, line_of
from test_function_kernels import hover, kernels_at, lens_titles

ADDED = "# two lines added\n# above everything\n"
SIGMOID = "z = torch.sigmoid(y).mean(dim=-1)"


@pytest.fixture(scope="session")
def edits_ws(tmp_path_factory):
    return program_workspace(tmp_path_factory, "edits", BREAKS, LENS_RUN)


@pytest_lsp.fixture(config=SERVER)
async def edits_client(lsp_client: LanguageClient, edits_ws):
    await start_session(lsp_client, edits_ws)
    yield
    await lsp_client.shutdown_session()


def open_with(client: LanguageClient, path, text: str) -> None:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, BREAKS)))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=2, uri=uri), [types.TextDocumentContentChangeWholeDocument(text)]))


async def inlays(client: LanguageClient, path, lines: int) -> dict[int, str]:
    found = await client.text_document_inlay_hint_async(types.InlayHintParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Range(types.Position(0, 0), types.Position(lines, 0))))
    return {hint.position.line + 1: hint.label for hint in found or []}


async def diagnostics_by_code(client: LanguageClient, uri: str, code: str, want: int) -> list[int]:
    """The lines (1-based) of the `code` diagnostics the client holds once `want` of them arrived."""
    for _ in range(100):
        lines = sorted(d.range.start.line + 1 for d in client.diagnostics.get(uri, []) if d.code == code)
        if len(lines) == want:
            return lines
        await asyncio.sleep(0.1)
    raise AssertionError(f"{code} diagnostics of {uri}: {client.diagnostics.get(uri)}")


async def test_unsaved_lines_added_above_move_every_answer(edits_client, edits_ws):
    prog = edits_ws / "prog.py"
    before_inlays = await inlays(edits_client, prog, 40)
    before_extern = await diagnostics_by_code(edits_client, prog.as_uri(), "extern-call", 1)
    step = def_span(BREAKS, "step")
    step_kernels = await kernels_at(edits_client, prog, step[0])
    assert step_kernels == [("graph_2", "cpp_fused_abs_mul_sum_0"), ("graph_3", "cpp_fused_mean_sigmoid_0")]
    open_with(edits_client, prog, ADDED + BREAKS)  # not saved: the file on disk is as it was compiled
    assert await inlays(edits_client, prog, 40) == {line + 2: label for line, label in before_inlays.items()}
    assert await kernels_at(edits_client, prog, step[0] + 2) == step_kernels
    assert await kernels_at(edits_client, prog, step[0]) == []  # the blank line that moved there
    titles = await lens_titles(edits_client, prog)
    assert step[0] not in titles and titles[step[0] + 2][0].startswith("2 kernels")
    sigmoid = line_of(BREAKS, SIGMOID)
    assert "cpp_fused_mean_sigmoid_0" in await hover(edits_client, prog, sigmoid + 2)
    assert "cpp_fused_mean_sigmoid_0" not in await hover(edits_client, prog, sigmoid)  # now `print("step", n)`
    assert await diagnostics_by_code(edits_client, prog.as_uri(), "extern-call", 1) == [before_extern[0] + 2]


async def test_a_changed_line_says_its_kernels_are_from_its_older_text(edits_client, edits_ws):
    prog = edits_ws / "prog.py"
    sigmoid = line_of(BREAKS, SIGMOID)
    open_with(edits_client, prog, BREAKS.replace(SIGMOID, "z = torch.tanh(y).mean(dim=-1)"))
    text = await hover(edits_client, prog, sigmoid)
    assert f"line {sigmoid} changed since the compile: its older version `{SIGMOID}` became cpp_fused_mean_sigmoid_0" \
        in text
    assert sigmoid not in await inlays(edits_client, prog, 40)
    assert await kernels_at(edits_client, prog, sigmoid) == []
    step = def_span(BREAKS, "step")
    assert await kernels_at(edits_client, prog, step[0]) == [("graph_2", "cpp_fused_abs_mul_sum_0")]


@pytest.fixture(scope="session")
def saved_ws(tmp_path_factory):
    return program_workspace(tmp_path_factory, "edits_saved", BREAKS, LENS_RUN)


@pytest_lsp.fixture(config=SERVER)
async def saved_client(lsp_client: LanguageClient, saved_ws):
    await start_session(lsp_client, saved_ws)
    yield
    await lsp_client.shutdown_session()


async def test_saved_lines_added_above_move_hover_and_linked_lines(saved_client, saved_ws):
    prog = saved_ws / "prog.py"
    command = types.ExecuteCommandParams("kernelLens.linkedLines", [{"uri": prog.as_uri()}])
    before = await saved_client.workspace_execute_command_async(command)
    prog.write_text(ADDED + BREAKS)  # saved, never opened: the server reads the file on disk
    sigmoid = line_of(BREAKS, SIGMOID)
    assert "cpp_fused_mean_sigmoid_0" in await hover(saved_client, prog, sigmoid + 2)
    assert "cpp_fused_mean_sigmoid_0" not in await hover(saved_client, prog, sigmoid)
    after = await saved_client.workspace_execute_command_async(command)
    assert after["graph_id"] == before["graph_id"] and before["links"]
    assert [(k["source_line"] + 2, k["generated_lines"]) for k in before["links"]] == \
        [(k["source_line"], k["generated_lines"]) for k in after["links"]]
