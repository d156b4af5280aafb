"""Structured-trace findings follow the user's edits in a file only a TORCH_TRACE log recorded (issue 45): no debug
directory holds the file's line texts there, so the trace's own stack frames (Dynamo's `loc` of each frame) are
what a finding's line is found by again. Lines added above move the graph break and the failures with them; a
break whose line was rewritten is no longer shown (it belongs to the older text)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_workspaces import SERVER, start_session
from trace_workspaces import line_of, trace_workspace

BREAKS = "breaks_recompile_failure"
ADDED = "# two lines added\n# above everything\n"
BREAK_LINE = "if b.sum() < 0"


@pytest_lsp.fixture(config=SERVER)
async def trace_only_client(lsp_client: LanguageClient, tmp_path: Path):
    trace_workspace(tmp_path / "ws", BREAKS)
    await start_session(lsp_client, tmp_path / "ws")
    yield
    await lsp_client.shutdown_session()


def change(client: LanguageClient, path: Path, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=version, uri=path.as_uri()),
        [types.TextDocumentContentChangeWholeDocument(text)]))


async def lines_become(client: LanguageClient, uri: str, code: str, want: list[int]) -> list[int]:
    """The lines (1-based) of the `code` diagnostics once they are `want` (as they are after 10 s otherwise)."""
    for _ in range(100):
        lines = sorted(d.range.start.line + 1 for d in client.diagnostics.get(uri, []) if d.code == code)
        if lines == want:
            break
        await asyncio.sleep(0.1)
    return lines


async def test_trace_findings_follow_unsaved_edits_and_leave_a_rewritten_line(trace_only_client, tmp_path):
    script = tmp_path / "ws" / f"{BREAKS}.py"
    uri, text = script.as_uri(), script.read_text()
    brk = line_of(script, BREAK_LINE) + 1  # (1-based)
    assert await lines_become(trace_only_client, uri, "graph-break", [brk]) == [brk]
    failures = [line_of(script, "def sine") + 1, line_of(script, "return y @ torch.ones") + 1]
    assert await lines_become(trace_only_client, uri, "compile-failure", failures) == failures
    trace_only_client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri, "python", 1, text)))
    change(trace_only_client, script, 2, ADDED + text)  # not saved
    assert await lines_become(trace_only_client, uri, "graph-break", [brk + 2]) == [brk + 2]
    moved = [n + 2 for n in failures]
    assert await lines_become(trace_only_client, uri, "compile-failure", moved) == moved
    rewritten = "\n".join(line.replace(BREAK_LINE, "if b.mean() < 0") for line in (ADDED + text).split("\n"))
    change(trace_only_client, script, 3, rewritten)  # the break's own line changed: its finding is of the old text
    assert await lines_become(trace_only_client, uri, "graph-break", []) == []
    assert await lines_become(trace_only_client, uri, "compile-failure", moved) == moved
