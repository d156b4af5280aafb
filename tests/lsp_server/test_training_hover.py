"""Training end to end: a real script compiles forward and backward with lens; the real server's hover on
the user's line lists kernels of both graphs, each saying which direction it is."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

PROGRAM = '''import torch


def block(x, w):
    y = torch.nn.functional.gelu(x @ w)
    return torch.nn.functional.layer_norm(y, (y.shape[-1],))


w = torch.randn(16, 16, requires_grad=True)
torch.compile(block, backend="lens")(torch.randn(8, 16), w).sum().backward()
'''
GELU_LINE = 4  # 0-based


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return program_workspace(tmp_path_factory, "training_ws", PROGRAM, ([sys.executable, "PROG"], {"LENS_DEBUG": "1"}))


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, trained: Path):
    await start_session(lsp_client, trained)
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_hover_on_a_trained_line_shows_forward_and_backward_kernels(client: LanguageClient, trained: Path):
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier((trained / "prog.py").as_uri()), types.Position(GELU_LINE, 8)))
    text = hover.contents.value
    assert ", forward" in text and ", backward" in text, text


async def test_hover_on_the_function_says_which_graph_each_kernel_is_in(client: LanguageClient, trained: Path):
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier((trained / "prog.py").as_uri()), types.Position(GELU_LINE - 1, 5)))
    text = hover.contents.value
    assert "(forward)" in text and "(backward)" in text, text
