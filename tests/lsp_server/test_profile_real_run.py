"""Profiling end to end: `kernel-lens profile` on a real script, then the real server shows the kernel's
time in the hover of the function, a code lens with the speedup, and the profile data for the view."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

PROGRAM = '''import torch


def scaled_softmax(x, scale):
    s = x * scale
    return torch.softmax(s, dim=-1)


torch.compile(scaled_softmax, backend="lens")(torch.randn(256, 128), 0.5)
'''
DEF_LINE = 3


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    argv = [sys.executable, "-m", "compiler", "profile", "--iters", "5", "--warmup", "1", "PROG"]
    return program_workspace(tmp_path_factory, "profile_ws", PROGRAM, (argv, {}))


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, profiled: Path):
    await start_session(lsp_client, profiled)
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_hover_lens_and_profile_show_measured_times(client: LanguageClient, profiled: Path):
    graph = next(profiled.glob("torch_compile_debug/run_*/lens/graph_*"))
    prof = json.loads((graph / "profile.json").read_text())
    kernel = prof["kernels"][0]
    assert kernel["total_ms"] > 0 and prof["compiled_ms"] > 0
    uri = (profiled / "prog.py").as_uri()
    hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri),
                                                                     types.Position(DEF_LINE, 5)))
    text = hover.contents.value
    assert kernel["name"] in text
    assert re.search(r"\d+(\.\d+)? (ms|µs)", text), text  # the kernel's measured time
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    titles = " | ".join(lens.command.title for lens in lenses if lens.command and lens.range.start.line == DEF_LINE)
    assert "vs eager" in titles or "×" in titles, titles
    data = await client.workspace_execute_command_async(types.ExecuteCommandParams("kernelLens.getProfile", [{}]))
    rows = [k for g in data["graphs"] for k in g["kernels"]]
    assert {k["name"] for k in rows} == {k["name"] for k in prof["kernels"]}
    assert all(k["source"] and k["source"]["uri"] == uri for k in rows)
