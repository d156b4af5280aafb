"""The mark_dynamic quick fix on a recompile caused by a size specialization, through the real server: on the
committed trace of breaks_recompile_failure.py, and on a program run under TORCH_TRACE here whose fixed
version then runs without recompiling."""
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
from trace_workspaces import line_of, trace_workspace

BREAKS = "breaks_recompile_failure"
PROGRAM = '''import torch


def scale(x, k: float):
    return x * k


if __name__ == "__main__":
    compiled = torch.compile(scale, backend="eager")
    compiled(torch.randn(8, 3), 2.0)
    x = torch.randn(12, 3)
    compiled(x, 2.0)
'''


def apply_edits(text: str, edits: list[types.TextEdit]) -> str:
    """The text after `edits` (LSP: ranges refer to the original text), applied last position first."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(position: types.Position) -> int:
        return offsets[position.line] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


async def mark_dynamic_action(client: LanguageClient, script: Path) -> types.CodeAction:
    found = await wait_for_diagnostics(client, script.as_uri(), lambda ds: any(d.code == "recompile" for d in ds),
                                       timeout=60)
    (recompile,) = [d for d in found if d.code == "recompile"]
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(script.as_uri()), recompile.range, types.CodeActionContext([recompile])))
    (action,) = [a for a in actions or [] if "mark_dynamic" in a.title]
    assert action.kind == types.CodeActionKind.QuickFix and list(action.diagnostics) == [recompile]
    return action


@pytest_lsp.fixture(config=SERVER)
async def breaks_client(lsp_client: LanguageClient, tmp_path: Path):
    trace_workspace(tmp_path / "ws", BREAKS)
    await start_session(lsp_client, tmp_path / "ws")
    yield
    await lsp_client.shutdown_session()


async def test_an_expression_argument_becomes_a_variable_marked_before_the_first_call(breaks_client: LanguageClient,
                                                                                    tmp_path: Path):
    script = tmp_path / "ws" / f"{BREAKS}.py"
    action = await mark_dynamic_action(breaks_client, script)
    # `a`'s dimension 0 failed the guard (b's size changed too, but Dynamo names the first guard that fails)
    assert action.title == "Mark a[0] dynamic before the call (torch._dynamo.mark_dynamic)"
    before = script.read_text()
    after = apply_edits(before, action.edit.changes[script.as_uri()])
    first_call = line_of(script, "compiled(torch.randn(10), torch.ones(10))")
    lines = after.splitlines()
    # the frame's first compile came from this call: marked there, not in the function (Dynamo refuses to trace it)
    assert lines[first_call:first_call + 3] == ["    a = torch.randn(10)", "    torch._dynamo.mark_dynamic(a, 0)",
                                                "    compiled(a, torch.ones(10))  # b.sum() > 0: same branch every run"]
    assert after.count("mark_dynamic") == 1 and len(lines) == len(before.splitlines()) + 2


@pytest_lsp.fixture(config=SERVER)
async def program_client(lsp_client: LanguageClient, tmp_path: Path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "prog.py").write_text(PROGRAM)
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def run(script: Path, env: dict[str, str]) -> str:
    process = await asyncio.create_subprocess_exec(sys.executable, str(script), cwd=script.parent, env=env,
                                                   stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, stderr.decode()[-3000:]
    return stderr.decode()


async def test_the_fixed_program_compiles_once(program_client: LanguageClient, tmp_path: Path):
    script = tmp_path / "ws" / "prog.py"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_COMPILE_DEBUG", "TORCH_LOGS")}
    await run(script, {**env, "TORCH_TRACE": str(script.parent / "torch_trace")})
    action = await mark_dynamic_action(program_client, script)
    assert action.title == "Mark x[0] dynamic before the call (torch._dynamo.mark_dynamic)"
    fixed = apply_edits(script.read_text(), action.edit.changes[script.as_uri()])
    # `x` is a module-level name already: the first call's tensor gets its own
    assert ("    x_dynamic = torch.randn(8, 3)\n    torch._dynamo.mark_dynamic(x_dynamic, 0)\n"
            "    compiled(x_dynamic, 2.0)\n") in fixed
    script.write_text(fixed)
    logged = await run(script, {**env, "TORCH_LOGS": "recompiles"})
    assert "Recompiling" not in logged and "scale" not in logged, logged
    script.write_text(PROGRAM)  # the unfixed program does recompile: the check above can fail
    assert "Recompiling function scale" in await run(script, {**env, "TORCH_LOGS": "recompiles"})
