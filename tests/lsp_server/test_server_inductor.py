"""End-to-end on real Inductor CPU debug dirs (TORCH_COMPILE_DEBUG=1 + torch.compile, generated per session)."""
from __future__ import annotations

from pathlib import Path

from lsp_workspaces import InductorWorkspace
from lsprotocol import types
from pytest_lsp import LanguageClient

FOO1_DEF, NEG_LINE, MAX_LINE, MLP_DEF, MM_LINE = 3, 4, 5, 10, 11  # 0-based lines of the generated model.py


def graph_dirs(workspace: InductorWorkspace) -> dict[str, Path]:
    """Graph folder of each function, found through the kernel name in output_code.py."""
    found = {}
    for code in workspace.path.glob("torch_compile_debug/run_*/torchinductor/*/output_code.py"):
        text = code.read_text()
        found["foo1" if "cpp_fused_maximum_neg_0" in text else "mlp"] = code.parent
    return found


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(path.as_uri())


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if needle in line)


async def hover(client: LanguageClient, path: Path, line: int) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(doc(path), types.Position(line, 4)))
    return None if result is None else result.contents.value


async def test_hover_on_defs_lists_real_inductor_kernels(inductor_client: LanguageClient,
                                                          inductor_workspace: InductorWorkspace):
    text = await hover(inductor_client, inductor_workspace.script, FOO1_DEF)
    assert "`foo1` compiled into 1 kernel" in text
    assert "cpp_fused_maximum_neg_0" in text and "async_compile.cpp_pybinding" in text
    text = await hover(inductor_client, inductor_workspace.script, MLP_DEF)
    assert "`mlp` compiled into 2 kernels" in text
    assert "cpp_fused_mul_relu_sum_0` · reduction" in text and "extern_kernels.mm` · extern" in text


async def test_hover_on_source_and_kernel_lines(inductor_client: LanguageClient, inductor_workspace: InductorWorkspace):
    text = await hover(inductor_client, inductor_workspace.script, NEG_LINE)
    assert "line 5 became 1 kernel" in text and ".neg()" in text  # the vectorized C++ negation line
    output_code = graph_dirs(inductor_workspace)["foo1"] / "output_code.py"
    text = await hover(inductor_client, output_code, line_of(output_code, ".neg()"))
    assert "FX node `neg` = `aten.neg.default`" in text and "a = torch.neg(x1)" in text


async def test_definition_from_cpp_line_to_fx_node_to_source(inductor_client: LanguageClient,
                                                             inductor_workspace: InductorWorkspace):
    folder = graph_dirs(inductor_workspace)["foo1"]
    output_code = folder / "output_code.py"
    cpp_line = line_of(output_code, "at::vec::maximum(")
    to_node = await inductor_client.text_document_definition_async(
        types.DefinitionParams(doc(output_code), types.Position(cpp_line, 10)))
    readable = folder / "fx_graph_readable.py"
    assert [(loc.uri, loc.range.start.line) for loc in to_node] == [
        (readable.as_uri(), line_of(readable, "torch.ops.aten.maximum.default"))]
    to_source = await inductor_client.text_document_definition_async(
        types.DefinitionParams(doc(readable), to_node[0].range.start))
    assert [(loc.uri, loc.range.start.line) for loc in to_source] == [(inductor_workspace.script.as_uri(), MAX_LINE)]


async def test_extern_launch_line_maps_to_mm_node(inductor_client: LanguageClient, inductor_workspace: InductorWorkspace):
    output_code = graph_dirs(inductor_workspace)["mlp"] / "output_code.py"
    launch = line_of(output_code, "extern_kernels.mm(")
    locations = await inductor_client.text_document_definition_async(
        types.DefinitionParams(doc(output_code), types.Position(launch, 10)))
    readable = output_code.parent / "fx_graph_readable.py"
    assert [loc.range.start.line for loc in locations] == [line_of(readable, "torch.ops.aten.mm.default")]
    refs = await inductor_client.text_document_references_async(types.ReferenceParams(
        text_document=doc(inductor_workspace.script), position=types.Position(MM_LINE, 6),
        context=types.ReferenceContext(include_declaration=False)))
    assert [(r.uri, r.range.start.line) for r in refs] == [(output_code.as_uri(), launch)]


async def test_lens_symbols_and_commands_on_inductor_run(inductor_client: LanguageClient,
                                                         inductor_workspace: InductorWorkspace):
    lenses = await inductor_client.text_document_code_lens_async(types.CodeLensParams(doc(inductor_workspace.script)))
    assert sorted((lens.range.start.line, lens.command.title) for lens in lenses) == [
        (FOO1_DEF, "1 kernel · cpp_fused_maximum_neg_0"),
        (MLP_DEF, "2 kernels · extern_kernels.mm, cpp_fused_mul_relu_sum_0")]  # the order call() runs them
    hints = await inductor_client.text_document_inlay_hint_async(types.InlayHintParams(
        doc(inductor_workspace.script), types.Range(types.Position(0, 0), types.Position(30, 0))))
    assert {h.position.line: h.label for h in hints}[MM_LINE] == "→ extern_kernels.mm"
    output_code = graph_dirs(inductor_workspace)["mlp"] / "output_code.py"
    symbols = await inductor_client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(output_code)))
    assert [(s.name, s.detail) for s in symbols] == [
        ("cpp_fused_mul_relu_sum_0", "reduction · sum_1, relu, mul"), ("extern_kernels.mm", "extern · mm")]
    runs = await inductor_client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelLens.listRuns"))
    assert [(r["kind"], r["graphs"], r["kernels"], r["selected"]) for r in runs] == [("inductor", 2, 3, True)]
    kernels = await inductor_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.kernelsAt", arguments=[{"uri": inductor_workspace.script.as_uri(), "line": MAX_LINE}]))
    assert [(k["name"], k["kind"], k["time_ms"]) for k in kernels] == [("cpp_fused_maximum_neg_0", "pointwise", None)]
    assert kernels[0]["line"] == line_of(graph_dirs(inductor_workspace)["foo1"] / "output_code.py", "at::vec::maximum(")
