"""Loops g++ left scalar, end to end: a real lens compile writes vectorization.txt; the real server shows
g++'s reason in the hover of the generated loop and of the user's line that became it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

PROGRAM = '''import torch


def transpose_sum(a):
    return a.t().contiguous() * 2 + a.t().sum(1, keepdim=True)


torch.compile(transpose_sum, backend="lens")(torch.randn(6, 10))
'''
BODY_LINE = 4  # 0-based line of the return statement


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a cache of its own: the vectorization report is written when the library is built
    cache = str(tmp_path_factory.mktemp("vectorization_cache"))
    return program_workspace(tmp_path_factory, "vectorization_ws", PROGRAM,
                             ([sys.executable, "PROG"], {"LENS_DEBUG": "1", "LENS_CACHE_DIR": cache}))


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, compiled: Path):
    await start_session(lsp_client, compiled)
    yield lsp_client
    await lsp_client.shutdown_session()


def reported_lines(graph: Path) -> dict[int, str]:
    out = {}
    for line in (graph / "vectorization.txt").read_text().splitlines()[1:]:
        kernel, number, rest = line.split(":", 2)
        out.setdefault(int(number), rest.split("  | ")[0].strip())
    return out


async def test_hover_shows_why_a_loop_stayed_scalar(client: LanguageClient, compiled: Path):
    graph = next(compiled.glob("torch_compile_debug/run_*/lens/graph_*"))
    reported = reported_lines(graph)
    assert reported, "this program has a loop g++ does not vectorize (a transposed read)"
    line, reason = next(iter(reported.items()))
    output_code = graph / "output_code.py"
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(output_code.as_uri()), types.Position(line - 1, 8)))
    assert "**Not vectorized**" in hover.contents.value and reason in hover.contents.value

    source = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier((compiled / "prog.py").as_uri()), types.Position(BODY_LINE, 8)))
    assert "**Not vectorized**" in source.contents.value and reason in source.contents.value


async def test_a_line_g_plus_plus_vectorized_has_no_such_note(client: LanguageClient, compiled: Path):
    graph = next(compiled.glob("torch_compile_debug/run_*/lens/graph_*"))
    reported = reported_lines(graph)
    code = (graph / "output_code.py").read_text().splitlines()
    clean = next(i for i, text in enumerate(code, 1) if "tmp" in text and i not in reported)
    hover = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier((graph / "output_code.py").as_uri()), types.Position(clean - 1, 8)))
    assert hover is not None and "Not vectorized" not in hover.contents.value
