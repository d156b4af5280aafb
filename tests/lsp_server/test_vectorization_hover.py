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


def reported(graph: Path) -> dict[int, list[str]]:
    """vectorization.txt: output_code.py line -> g++'s reasons there."""
    out: dict[int, list[str]] = {}
    for line in (graph / "vectorization.txt").read_text().splitlines()[1:]:
        kernel, number, rest = line.split(":", 2)
        out.setdefault(int(number), []).append(rest.split("  | ")[0].strip())
    return out


async def hover(client: LanguageClient, path: Path, line: int) -> str:
    found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(path.as_uri()),
                                                                     types.Position(line - 1, 8)))
    return "" if found is None else found.contents.value


async def test_hover_shows_in_plain_words_why_the_innermost_loop_stayed_scalar(client: LanguageClient, compiled: Path):
    graph = next(compiled.glob("torch_compile_debug/run_*/lens/graph_*"))
    code = (graph / "output_code.py").read_text().splitlines()
    found = reported(graph)
    # g++ reports three things here; only one is a loop carrying the elements that stayed scalar
    statement = next(n for n, reasons in found.items() if any("not profitable" in r for r in reasons))
    loop = max(n for n, text in enumerate(code, 1) if n < statement and text.strip().startswith("for ("))
    assert "#pragma omp simd reduction" in code[loop - 2]  # the reduction over the transposed read
    text = await hover(client, graph / "output_code.py", statement)
    assert "**Not vectorized** (`cpp_fused_add_mul_sum_0` in graph `graph_0`, run `" in text
    assert f"the loop at [line {loop}]" in text and "g++ judged vector code no faster here" in text
    assert "__builtin_memset" not in text  # the local sum's zero-filling is no miss
    source = await hover(client, compiled / "prog.py", BODY_LINE + 1)
    assert "**Not vectorized**" in source and "g++ judged vector code no faster here" in source


async def test_outer_loops_and_memsets_are_not_reported(client: LanguageClient, compiled: Path):
    graph = next(compiled.glob("torch_compile_debug/run_*/lens/graph_*"))
    found = reported(graph)
    outer = next(n for n, reasons in found.items() if any("consecutive inner loops" in r for r in reasons))
    memset = next(n for n, reasons in found.items() if any("__builtin_memset" in r for r in reasons))
    assert "Not vectorized" not in await hover(client, graph / "output_code.py", outer)
    code = (graph / "output_code.py").read_text().splitlines()
    simd = next(n for n, text in enumerate(code, 1) if n > outer and "#pragma omp simd" in text and n != memset)
    assert "Not vectorized" not in await hover(client, graph / "output_code.py", simd + 2)  # g++ vectorized it
