"""End-to-end: the real server process over stdio, on our compiler's debug directory (lens_foo1 fixture)."""
from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_workspaces import OK_RUN

KERNEL = "cpp_fused_cat_maximum_neg_0"
DEF_LINE, NEG_LINE, MAX_LINE, CAT_LINE = 3, 4, 5, 6  # 0-based lines of foo1.py
KERNEL_NEG_LINE = 17  # 0-based line of `auto tmp1 = -tmp0;` in output_code.py


def graph_dir(workspace: Path) -> Path:
    return workspace / "torch_compile_debug" / OK_RUN / "lens" / "graph_0"


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(path.as_uri())


async def hover_text(client: LanguageClient, path: Path, line: int, character: int = 4) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(doc(path), types.Position(line, character)))
    return None if result is None else result.contents.value


async def test_hover_on_def_lists_the_functions_kernels_with_source_and_time(lens_client: LanguageClient,
                                                                             lens_workspace: Path):
    text = await hover_text(lens_client, lens_workspace / "foo1.py", DEF_LINE)
    assert text is not None
    assert "`foo1` compiled into 1 kernel" in text
    assert KERNEL in text and "pointwise" in text
    assert "max_propagate_nan(tmp2, tmp1)" in text  # the kernel's C++ source block
    assert (graph_dir(lens_workspace) / "output_code.py").as_uri() + "#L6" in text
    assert "0.016 ms (80.0%)" in text


async def test_hover_on_source_line_shows_its_generated_line(lens_client: LanguageClient, lens_workspace: Path):
    text = await hover_text(lens_client, lens_workspace / "foo1.py", NEG_LINE)
    assert text is not None
    assert "line 5 became 1 kernel" in text
    assert "auto tmp1 = -tmp0;" in text
    assert "#L18" in text
    assert await hover_text(lens_client, lens_workspace / "foo1.py", 0) is None  # `import torch`: nothing


async def test_hover_on_kernel_line_shows_fx_node_and_source(lens_client: LanguageClient, lens_workspace: Path):
    text = await hover_text(lens_client, graph_dir(lens_workspace) / "output_code.py", KERNEL_NEG_LINE)
    assert text is not None
    assert "FX node `neg` = `aten.neg.default`" in text
    assert "fx_graph_readable.py:4" in text
    assert "foo1.py:5" in text and "a = torch.neg(x1)" in text


async def test_definition_chain_kernel_line_to_fx_node_to_source(lens_client: LanguageClient, lens_workspace: Path):
    output_code = graph_dir(lens_workspace) / "output_code.py"
    first = await lens_client.text_document_definition_async(
        types.DefinitionParams(doc(output_code), types.Position(KERNEL_NEG_LINE + 3, 8)))  # the maximum line
    assert [(loc.uri, loc.range.start.line) for loc in first] == [
        ((graph_dir(lens_workspace) / "fx_graph_readable.py").as_uri(), 6)]
    second = await lens_client.text_document_definition_async(
        types.DefinitionParams(types.TextDocumentIdentifier(first[0].uri), first[0].range.start))
    assert [(loc.uri, loc.range.start.line) for loc in second] == [((lens_workspace / "foo1.py").as_uri(), MAX_LINE)]


async def test_references_from_source_line_are_generated_lines(lens_client: LanguageClient, lens_workspace: Path):
    refs = await lens_client.text_document_references_async(types.ReferenceParams(
        text_document=doc(lens_workspace / "foo1.py"), position=types.Position(CAT_LINE, 4),
        context=types.ReferenceContext(include_declaration=False)))
    output_code = (graph_dir(lens_workspace) / "output_code.py").as_uri()
    assert [(r.uri, r.range.start.line) for r in refs] == [(output_code, 22)]


async def test_code_lens_above_compiled_function(lens_client: LanguageClient, lens_workspace: Path):
    lenses = await lens_client.text_document_code_lens_async(types.CodeLensParams(doc(lens_workspace / "foo1.py")))
    titles = [(lens.range.start.line, lens.command.title) for lens in lenses]
    assert (DEF_LINE, f"1 kernel · {KERNEL}") in titles
    assert (DEF_LINE, "0.02 ms · 3.1× vs eager") in titles


async def test_inlay_hints_at_line_ends_with_time_share(lens_client: LanguageClient, lens_workspace: Path):
    hints = await lens_client.text_document_inlay_hint_async(types.InlayHintParams(
        doc(lens_workspace / "foo1.py"), types.Range(types.Position(0, 0), types.Position(20, 0))))
    by_line = {h.position.line: (h.position.character, h.label) for h in hints}
    assert sorted(by_line) == [NEG_LINE, MAX_LINE, CAT_LINE]
    assert by_line[NEG_LINE] == (len("    a = torch.neg(x1)"), f"→ {KERNEL} · 26.7%")


async def test_document_symbols_one_per_kernel(lens_client: LanguageClient, lens_workspace: Path):
    symbols = await lens_client.text_document_document_symbol_async(
        types.DocumentSymbolParams(doc(graph_dir(lens_workspace) / "output_code.py")))
    assert [(s.name, s.range.start.line, s.range.end.line) for s in symbols] == [(KERNEL, 5, 25)]
    assert symbols[0].detail == "pointwise · neg, maximum, cat"
