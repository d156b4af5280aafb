"""Inlay hints at the end of source lines: which kernel(s) the line became, its share of the profiled time and
its milliseconds per iteration (a kernel's time split evenly over the source lines it computes)."""
from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_server.features.describe import format_ms, short_kernel_names
from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import document_lines, path_of
from lsp_server.features.source_lines import file_lines
from lsp_server.index import Index


def inlay_hints(server: Any, index: Index, uri: str, first0: int, last0: int) -> list[types.InlayHint]:
    path = path_of(uri)
    text = document_lines(server, uri)
    lines = file_lines(server, index, uri)
    if lines is None:
        return []
    hints = []
    for line, hits in sorted(lines.lines().items()):  # a line whose text changed since the compile has none
        line0 = line - 1
        if not (first0 <= line0 <= last0) or line0 >= len(text):
            continue
        label = "→ " + short_kernel_names([h.ref for h in hits])
        recorded = lines.to_recorded[line]
        share, ms = index.line_share(path, recorded), index.line_ms(path, recorded)
        if share:
            label += f" · {share:.1f}%"
        if ms:
            label += f" · {format_ms(ms)}"
        end = len(text[line0].rstrip("\r\n"))
        hints.append(types.InlayHint(types.Position(line0, end), label, padding_left=True))
    return hints


def refresh_hints(server: Any) -> None:
    """Ask the client to request hints again: a new run (a profile) changes them without an edit."""
    workspace = getattr(server.client_capabilities, "workspace", None)
    capabilities = getattr(workspace, "inlay_hint", None)
    if capabilities is not None and capabilities.refresh_support:
        server.workspace_inlay_hint_refresh(None)


def register(server: Any) -> None:
    server.index_changed_hooks.append(lambda: refresh_hints(server))
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT)
    @failsafe(server, "inlayHint")
    def inlay_hint(params: types.InlayHintParams) -> list[types.InlayHint] | None:
        if not server.settings.inlay_hints:
            return None
        rng = params.range
        return inlay_hints(server, server.index, params.text_document.uri, rng.start.line, rng.end.line) or None
