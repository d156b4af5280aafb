"""Notebooks: the open notebooks' code cells matched to the kernel files their compiles are indexed under
(`features/notebook_cells.py`), again when a notebook opens, changes or closes and when the index changes; the other
features then answer on a cell's uri and lines as on a file's."""
from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from lsprotocol import types

from lsp_server.features.commands import refresh_editor
from lsp_server.features.failsafe import failsafe
from lsp_server.features.notebook_cells import CELLS, Cell, cell_files

# what the server asks the client to send: every notebook's Python code cells (VS Code: "jupyter-notebook")
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(notebook_selector=[
    types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage("python")], notebook="*")])


def open_cells(server: Any) -> list[Cell]:
    cells = []
    for notebook in server.workspace.notebook_documents.values():
        for cell in notebook.cells:
            if cell.kind != types.NotebookCellKind.Code:
                continue
            document = server.workspace.text_documents.get(unquote(cell.document))  # pygls keys them unquoted
            if document is None:
                continue
            summary = cell.execution_summary
            cells.append(Cell(cell.document, document.source, summary.execution_order if summary else None))
    return cells


def remap(server: Any) -> bool:
    """Match the open cells again; True when a cell now answers for another file (or for none)."""
    return CELLS.set(open_cells(server), cell_files(server.index))


def register(server: Any) -> None:
    server.index_changed_hooks.insert(0, lambda: remap(server))  # before diagnostics are published by cell

    def changed(params: Any) -> None:
        if remap(server):
            refresh_editor(server)  # diagnostics move to the cells, lenses and hints are asked for again
        else:
            server.after_index_change([])  # a cell's text changed: its diagnostics follow its lines

    for method in (types.NOTEBOOK_DOCUMENT_DID_OPEN, types.NOTEBOOK_DOCUMENT_DID_CHANGE,
                   types.NOTEBOOK_DOCUMENT_DID_CLOSE):
        server.feature(method)(failsafe(server, method)(changed))
