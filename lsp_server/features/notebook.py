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


def open_cells(server: Any, ran: dict[str, int]) -> list[Cell]:
    """The open notebooks' code cells. `ran` keeps each cell's last known execution count while it is open:
    VS Code's ipynb support clears a cell's count when it is edited (Jupyter's "not run since"), but the
    compile it made is still the cell's."""
    cells = []
    for notebook in server.workspace.notebook_documents.values():
        for cell in notebook.cells:
            if cell.kind != types.NotebookCellKind.Code:
                continue
            document = server.workspace.text_documents.get(unquote(cell.document))  # pygls keys them unquoted
            if document is None:
                continue
            order = execution_order(cell)
            if order is not None:
                ran[cell.document] = order
            cells.append(Cell(cell.document, document.source, ran.get(cell.document)))
    for gone in set(ran) - {cell.uri for cell in cells}:
        del ran[gone]
    return cells


def execution_order(cell: types.NotebookCell) -> int | None:
    """The kernel's count when the cell last ran: its execution summary, else (a notebook opened from disk:
    VS Code's client sends no summary without a success flag) the `execution_count` of its ipynb metadata."""
    if cell.execution_summary is not None:
        return cell.execution_summary.execution_order
    count = cell.metadata.get("execution_count") if isinstance(cell.metadata, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None


def register(server: Any) -> None:
    ran: dict[str, int] = {}

    def remap() -> bool:
        """Match the open cells again; True when a cell now answers for another file (or for none)."""
        return CELLS.set(open_cells(server, ran), cell_files(server.index))

    server.index_changed_hooks.insert(0, remap)  # before diagnostics are published by cell

    def changed(params: Any) -> None:
        if remap():
            refresh_editor(server)  # diagnostics move to the cells, lenses and hints are asked for again
        else:
            server.after_index_change([])  # a cell's text changed: its diagnostics follow its lines

    for method in (types.NOTEBOOK_DOCUMENT_DID_OPEN, types.NOTEBOOK_DOCUMENT_DID_CHANGE,
                   types.NOTEBOOK_DOCUMENT_DID_CLOSE):
        server.feature(method)(failsafe(server, method)(changed))
