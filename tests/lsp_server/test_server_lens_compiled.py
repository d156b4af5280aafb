"""End-to-end on a debug dir written by our real `lens` backend (torch.compile(fn, backend="lens"))."""
from __future__ import annotations

from pathlib import Path

from lsp_workspaces import InductorWorkspace
from lsprotocol import types
from pytest_lsp import LanguageClient

KERNEL = "cpp_fused_cat_maximum_neg_0"
DEF_LINE, MAX_LINE = 3, 5  # 0-based lines of foo1.py


def graph_dir(workspace: InductorWorkspace) -> Path:
    return next(workspace.path.glob("torch_compile_debug/run_*/lens/graph_0"))


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if needle in line)


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(path.as_uri())


async def test_hover_definition_and_launch_line_on_real_lens_run(lens_compiled_client: LanguageClient,
                                                                 lens_compiled_workspace: InductorWorkspace):
    script = lens_compiled_workspace.script
    hover = await lens_compiled_client.text_document_hover_async(types.HoverParams(doc(script), types.Position(DEF_LINE, 4)))
    assert "`foo1` compiled into 1 kernel" in hover.contents.value and KERNEL in hover.contents.value

    output_code = graph_dir(lens_compiled_workspace) / "output_code.py"
    readable = graph_dir(lens_compiled_workspace) / "fx_graph_readable.py"
    max_line = line_of(output_code, "max_propagate_nan(tmp")
    to_node = await lens_compiled_client.text_document_definition_async(
        types.DefinitionParams(doc(output_code), types.Position(max_line, 12)))
    assert [(l.uri, l.range.start.line) for l in to_node] == [(readable.as_uri(), line_of(readable, "aten.maximum"))]
    to_source = await lens_compiled_client.text_document_definition_async(
        types.DefinitionParams(doc(readable), to_node[0].range.start))
    assert [(l.uri, l.range.start.line) for l in to_source] == [(script.as_uri(), MAX_LINE)]

    launch = line_of(output_code, f"    {KERNEL}(")  # the call in call(args), outside the kernel's C++ span
    launch_hover = await lens_compiled_client.text_document_hover_async(
        types.HoverParams(doc(output_code), types.Position(launch, 6)))
    assert "FX node `neg`" in launch_hover.contents.value and "FX node `cat`" in launch_hover.contents.value

    kernels = await lens_compiled_client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.kernelsAt", arguments=[{"uri": script.as_uri(), "line": MAX_LINE}]))
    assert [(k["name"], k["kind"]) for k in kernels] == [(KERNEL, "pointwise")]
    assert kernels[0]["line"] in {l for l in range(kernels[0]["start_line"], kernels[0]["end_line"] + 1)}
