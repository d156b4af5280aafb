"""End-to-end: the real server process over stdio, on our compiler's debug directory (lens_foo1 fixture)."""
from __future__ import annotations

from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lens_foo1_fixture import (KERNEL, KERNEL_CALL_LINE, KERNEL_CAT_LINE, KERNEL_END, KERNEL_MAX_LINE, KERNEL_NEG_LINE,
                               KERNEL_START, KERNEL_TIMED, PROFILED)
from lsp_workspaces import OK_RUN, SERVER, start_session

DEF_LINE, NEG_LINE, MAX_LINE, CAT_LINE = 3, 4, 5, 6  # 0-based lines of foo1.py


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
    assert "max_propagate_nan(tmp0, tmp2)" in text  # the kernel's C++ source block
    assert (graph_dir(lens_workspace) / "output_code.py").as_uri() + f"#L{KERNEL_START + 1}" in text
    ms, percent = KERNEL_TIMED["total_ms"], KERNEL_TIMED["percent"]
    assert ms < 0.01 and f"{ms * 1000:.2f} µs ({percent:.1f}%)" in text  # well under 0.01 ms: shown in µs


async def test_hover_on_source_line_shows_its_generated_line(lens_client: LanguageClient, lens_workspace: Path):
    text = await hover_text(lens_client, lens_workspace / "foo1.py", NEG_LINE)
    assert text is not None
    share, ms = KERNEL_TIMED["percent"] / 3, KERNEL_TIMED["total_ms"] / 3  # the kernel's time split over 3 lines
    time = f"{ms * 1000:.2f} µs" if ms < 0.01 else f"{ms:.3f} ms"
    # the words of the profile view and the cost gutter: what the share is of, and what the time is per
    assert f"line 5 became 1 kernel · {share:.1f}% of the profiled iteration · {time} per iteration" in text
    assert "auto tmp2 = decltype(tmp1)(-tmp1);" in text
    assert f"#L{KERNEL_NEG_LINE + 1}" in text
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
        types.DefinitionParams(doc(output_code), types.Position(KERNEL_MAX_LINE, 12)))
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
    # the kernel's store of `cat`, and the call of the kernel (which runs all three of its nodes)
    assert [(r.uri, r.range.start.line) for r in refs] == [(output_code, KERNEL_CAT_LINE), (output_code, KERNEL_CALL_LINE)]


async def test_code_lens_above_compiled_function(lens_client: LanguageClient, lens_workspace: Path):
    lenses = await lens_client.text_document_code_lens_async(types.CodeLensParams(doc(lens_workspace / "foo1.py")))
    titles = [(lens.range.start.line, lens.command.title) for lens in lenses]
    assert (DEF_LINE, f"1 kernel · {KERNEL}") in titles
    speed = f"{PROFILED['compiled_ms']:.2f} ms · {PROFILED['eager_ms'] / PROFILED['compiled_ms']:.1f}× vs eager"
    assert (DEF_LINE, speed) in titles


async def test_inlay_hints_at_line_ends_with_time_share(lens_client: LanguageClient, lens_workspace: Path):
    hints = await lens_client.text_document_inlay_hint_async(types.InlayHintParams(
        doc(lens_workspace / "foo1.py"), types.Range(types.Position(0, 0), types.Position(20, 0))))
    by_line = {h.position.line: (h.position.character, h.label) for h in hints}
    assert sorted(by_line) == [NEG_LINE, MAX_LINE, CAT_LINE]
    share = KERNEL_TIMED["percent"] / 3  # the kernel's time, split over the three lines it computes
    ms = KERNEL_TIMED["total_ms"] / 3  # and its ms per iteration (µs below 0.01 ms)
    time = f"{ms * 1000:.2f} µs" if ms < 0.01 else f"{ms:.3f} ms"
    assert by_line[NEG_LINE] == (len("    a = torch.neg(x1)"), f"{share:.1f}% · {time} → {KERNEL}")


async def test_document_symbols_one_per_kernel(lens_client: LanguageClient, lens_workspace: Path):
    symbols = await lens_client.text_document_document_symbol_async(
        types.DocumentSymbolParams(doc(graph_dir(lens_workspace) / "output_code.py")))
    assert [(s.name, s.range.start.line, s.range.end.line) for s in symbols] == [(KERNEL, KERNEL_START, KERNEL_END)]
    assert symbols[0].detail == "pointwise · neg, maximum, cat"


async def test_hover_on_def_follows_the_open_buffer_then_the_file(lens_client: LanguageClient, lens_workspace: Path):
    """The server keeps a document's lines between hovers: an edit, and closing the buffer, still count."""
    source = lens_workspace / "foo1.py"
    assert "`foo1` compiled into" in (await hover_text(lens_client, source, DEF_LINE) or "")
    text = source.read_text()
    lens_client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(source.as_uri(), "python", 1, "\n\n" + text)))
    assert "`foo1` compiled into" in (await hover_text(lens_client, source, DEF_LINE + 2) or "")
    assert "`foo1` compiled into" not in (await hover_text(lens_client, source, DEF_LINE) or "")
    lens_client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(2, source.as_uri()),
        [types.TextDocumentContentChangeWholeDocument(text)]))
    assert "`foo1` compiled into" in (await hover_text(lens_client, source, DEF_LINE) or "")
    lens_client.text_document_did_close(types.DidCloseTextDocumentParams(doc(source)))
    source.write_text("\n" + text)  # the file on disk now has the `def` one line lower
    assert "`foo1` compiled into" in (await hover_text(lens_client, source, DEF_LINE + 1) or "")


def load_lsp_bench():
    """benchmarks/lsp_bench.py: its writer of debug directories in our format, any number of kernels."""
    import importlib.util
    import sys
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "lsp_bench.py"
    spec = importlib.util.spec_from_file_location("lsp_bench_for_tests", path)
    module = sys.modules["lsp_bench_for_tests"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module



@pytest_lsp.fixture(config=SERVER)
async def many_client(lsp_client: LanguageClient, tmp_path: Path):
    """A run of one function compiled into 12 kernels (written as lsp_bench writes its runs)."""
    bench = load_lsp_bench()
    bench.write_source(tmp_path / "many.py", 1, 12)
    (tmp_path / "torch_compile_debug").mkdir()
    bench.write_run(tmp_path / "torch_compile_debug", bench.run_name(0), tmp_path / "many.py", 1, 12)
    await start_session(lsp_client, tmp_path)
    yield
    await lsp_client.shutdown_session()


async def test_hover_on_a_def_of_many_kernels_shows_the_first_ones_code_and_lists_the_rest(many_client: LanguageClient,
                                                                                             tmp_path: Path):
    text = await hover_text(many_client, tmp_path / "many.py", load_lsp_bench().def_line(0, 12) - 1)
    assert text is not None and "`fn_0` compiled into 12 kernels" in text
    assert text.count("```cpp") == 8 and "… and 4 more kernels:\n" in text
    rest = text.split("… and 4 more kernels:\n", 1)[1].splitlines()
    assert [line.split("]")[0] for line in rest] == [f"- [cpp_fused_neg_0_{k}" for k in range(8, 12)]
    assert all("output_code.py#L" in line and line.endswith("· pointwise") for line in rest)
