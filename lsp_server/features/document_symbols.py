"""Document symbols for an indexed output_code.py: one per kernel."""
from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import path_of
from lsp_server.index import Index

SYMBOL_KIND = {"extern": types.SymbolKind.Event}  # everything else is a Function


def kernel_symbols(index: Index, uri: str) -> list[types.DocumentSymbol]:
    generated = index.generated_file(path_of(uri))
    if generated is None:
        return []
    symbols = []
    for kernel in sorted(generated.graph.kernels, key=lambda k: k.start_line):
        start, end = kernel.start_line - 1, max(kernel.end_line - 1, kernel.start_line - 1)
        end_column = len(generated.graph.code_line(kernel.end_line))
        whole = types.Range(types.Position(start, 0), types.Position(end, end_column))
        first = types.Range(types.Position(start, 0), types.Position(start, len(generated.graph.code_line(kernel.start_line))))
        detail = kernel.kind + (f" · {', '.join(kernel.nodes)}" if kernel.nodes else "")
        symbols.append(types.DocumentSymbol(kernel.name, SYMBOL_KIND.get(kernel.kind, types.SymbolKind.Function),
                                            whole, first, detail=detail))
    return symbols


def register(server: Any) -> None:
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @failsafe(server, "documentSymbol")
    def document_symbol(params: types.DocumentSymbolParams) -> list[types.DocumentSymbol] | None:
        return kernel_symbols(server.index, params.text_document.uri) or None
