"""Notebooks end to end: a real Jupyter kernel (ipykernel, driven through jupyter_client) runs cells that compile
with backend="lens" (LENS_DEBUG=1) into a workspace; the real server gets the notebook as VS Code sends it
(notebookDocument/didOpen with `vscode-notebook-cell:` uris) and answers on the cells' own lines: a cell as it
ran, a cell edited since (not run again), a cell edited and run again, a cell that never ran."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_workspaces import SERVER
from test_diagnostics import wait_for_diagnostics

jupyter_client = pytest.importorskip("jupyter_client", reason="jupyter_client is in the test extra")
pytest.importorskip("ipykernel", reason="ipykernel is in the test extra")

IMPORTS = "import torch\n"
# an mm (an ATen call: a note on its line) and a fused relu * 2 kernel
MLP = '''def mlp(x, w):
    h = x @ w
    return torch.relu(h) * 2

mlp_c = torch.compile(mlp, backend="lens")
mlp_c(torch.randn(8, 16), torch.randn(16, 4)).shape'''
SCALE = '''def scale(x):
    return torch.neg(x) * 3

torch.compile(scale, backend="lens")(torch.randn(32)).shape'''
ACT_FIRST = '''def act(x):
    return torch.relu(x) + 1

torch.compile(act, backend="lens")(torch.randn(16)).shape'''
ACT_SECOND = ACT_FIRST.replace("torch.relu(x) + 1", "torch.sigmoid(x) - 1")
NEVER_RAN = '''def other(x):
    return torch.relu(x) + 1'''


@dataclass
class Ran:
    """The workspace a kernel compiled into, and the execution count each cell text last ran as."""

    path: Path
    counts: dict[str, int]


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    workspace = tmp_path_factory.mktemp("notebook_ws")
    manager = jupyter_client.KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(workspace), env={**os.environ, "LENS_DEBUG": "1"})
    client = manager.client()
    client.start_channels()
    counts: dict[str, int] = {}
    try:
        client.wait_for_ready(timeout=120)
        for code in (IMPORTS, MLP, SCALE, ACT_FIRST, ACT_SECOND):
            errors: list[str] = []
            reply = client.execute_interactive(code, timeout=300, output_hook=lambda msg: errors.append(
                msg["content"].get("traceback")) if msg["msg_type"] == "error" else None)
            assert reply["content"]["status"] == "ok", errors
            counts[code] = reply["content"]["execution_count"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert len(list(workspace.glob("torch_compile_debug/run_*/lens/graph_*/kernel_map.json"))) == 4
    return Ran(workspace, counts)


def cell_uri(notebook: Path, index: int) -> str:
    """A cell's uri as VS Code's notebook editor names it (the fragment numbers the cell)."""
    return f"vscode-notebook-cell:{notebook}#W{index}sZmlsZQ%3D%3D"


NOTEBOOK_CAPABILITIES = types.NotebookDocumentClientCapabilities(
    synchronization=types.NotebookDocumentSyncClientCapabilities())


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER.server_command))
async def notebook_client(lsp_client: LanguageClient, kernel_run: Ran):
    capabilities = pytest_lsp.client_capabilities("visual-studio-code")
    capabilities.notebook_document = NOTEBOOK_CAPABILITIES
    uri = kernel_run.path.as_uri()
    for method in (types.WORKSPACE_CODE_LENS_REFRESH, types.WORKSPACE_INLAY_HINT_REFRESH):
        lsp_client.feature(method)(lambda params: None)
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=uri, workspace_folders=[types.WorkspaceFolder(uri, "ws")]))
    assert result.capabilities.notebook_document_sync is not None
    yield
    await lsp_client.shutdown_session()


def open_notebook(client: LanguageClient, notebook: Path, cells: list[tuple[str, int | None]],
                  from_disk: bool = False) -> list[str]:
    """notebookDocument/didOpen of code cells (text, execution count or None); returns their uris. A notebook
    run in the editor has execution summaries; one opened `from_disk`, as VS Code sends it, only the ipynb's
    `execution_count` in each cell's metadata (its client leaves out a summary without a success flag)."""
    uris = [cell_uri(notebook, i) for i in range(len(cells))]

    def cell(uri: str, count: int | None) -> types.NotebookCell:
        if from_disk:
            return types.NotebookCell(types.NotebookCellKind.Code, uri, metadata={"execution_count": count})
        return types.NotebookCell(types.NotebookCellKind.Code, uri, execution_summary=None if count is None
                                  else types.ExecutionSummary(count, True))
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=notebook.as_uri(), notebook_type="jupyter-notebook", version=1,
            cells=[cell(uri, count) for uri, (_, count) in zip(uris, cells)]),
        cell_text_documents=[types.TextDocumentItem(uri, "python", 1, text) for uri, (text, _) in zip(uris, cells)]))
    return uris


async def hover(client: LanguageClient, uri: str, line: int) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(uri), types.Position(line, 5)))
    return None if result is None else result.contents.value


async def lenses(client: LanguageClient, uri: str) -> list[tuple[int, str]]:
    found = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(uri)))
    return [(lens.range.start.line, lens.command.title) for lens in found or []]


async def test_cells_answer_on_their_own_lines(notebook_client: LanguageClient, kernel_run: Ran):
    edited_scale = "# scaled, edited after it ran\n" + SCALE
    cells = [(IMPORTS, kernel_run.counts[IMPORTS]), (MLP, kernel_run.counts[MLP]),
             (edited_scale, kernel_run.counts[SCALE]), (ACT_SECOND, kernel_run.counts[ACT_SECOND]),
             (NEVER_RAN, None)]
    imports, mlp, scale, act, never = open_notebook(notebook_client, kernel_run.path / "nb.ipynb", cells)

    # the cell as it ran: the def's hover lists its kernels; a body line's hover, its generated line
    text = await hover(notebook_client, mlp, 0)
    assert text is not None and "`mlp` compiled into" in text and "cpp_fused_mul_relu" in text
    line_text = await hover(notebook_client, mlp, 2)
    assert line_text is not None and "line 3 became" in line_text and "relu" in line_text
    assert any(line == 0 and "cpp_fused_mul_relu" in title for line, title in await lenses(notebook_client, mlp))
    hints = await notebook_client.text_document_inlay_hint_async(types.InlayHintParams(
        types.TextDocumentIdentifier(mlp), types.Range(types.Position(0, 0), types.Position(6, 0))))
    # at the end of each of the cell's lines that became code: the mm's call, and relu * 2's kernel
    assert [(h.position.line, h.position.character, h.label) for h in hints or []] == [
        (1, len("    h = x @ w"), "→ extern_buf0_mm"),
        (2, len("    return torch.relu(h) * 2"), "→ cpp_fused_mul_relu_0")]
    assert await hover(notebook_client, imports, 0) is None
    # the kernel view: the cell's lines and the generated lines they became, the cell named as the source
    linked = await notebook_client.workspace_execute_command_async(types.ExecuteCommandParams(
        "kernelLens.linkedLines", [{"uri": mlp}]))
    assert linked["source_uri"] == mlp
    assert [link["source_line"] for link in linked["links"]] == [1, 2]

    # the mm runs as an ATen call: the note is published on the cell, on its line
    notes = await wait_for_diagnostics(notebook_client, mlp, lambda found: len(found) > 0)
    assert {d.range.start.line for d in notes} == {1}, notes  # `h = x @ w`
    assert not any(uri.startswith("file:") and "ipykernel_" in uri for uri in notebook_client.diagnostics)

    # edited after it ran (a line inserted above): still its kernels, one line lower
    text = await hover(notebook_client, scale, 1)
    assert text is not None and "`scale` compiled into" in text and "neg" in text
    assert any(line == 1 for line, _ in await lenses(notebook_client, scale))

    # edited and run again: the second run's kernels (sigmoid), not the first's (relu)
    text = await hover(notebook_client, act, 0)
    assert text is not None and "sigmoid" in text and "relu" not in text

    # never ran: a def of the same text as nothing compiled answers nothing
    assert await hover(notebook_client, never, 0) is None
    assert await lenses(notebook_client, never) == []


async def test_a_cell_edited_in_the_editor_keeps_its_answers(notebook_client: LanguageClient, kernel_run: Ran):
    notebook = kernel_run.path / "edited.ipynb"
    [scale] = open_notebook(notebook_client, notebook, [(SCALE, kernel_run.counts[SCALE])], from_disk=True)
    assert "`scale` compiled into" in (await hover(notebook_client, scale, 0) or "")
    # VS Code's edit: the text, and the ipynb's execution_count cleared (Jupyter's "not run since")
    notebook_client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(version=2, uri=notebook.as_uri()),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(data=[
            types.NotebookCell(types.NotebookCellKind.Code, scale, metadata={"execution_count": None})], text_content=[
            types.NotebookDocumentCellContentChanges(
                document=types.VersionedTextDocumentIdentifier(version=2, uri=scale),
                changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(0, 0), types.Position(0, 0)), text="# a comment\n\n")])]))))
    assert await hover(notebook_client, scale, 0) is None  # the comment
    text = await hover(notebook_client, scale, 2)
    assert text is not None and "`scale` compiled into" in text
    assert any(line == 2 for line, _ in await lenses(notebook_client, scale))
