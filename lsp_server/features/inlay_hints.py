"""Inlay hints at the end of source lines: the line's share of the profiled time and its milliseconds per
iteration (a kernel's time split evenly over the source lines it computes), then which kernel(s) it became. The
cost comes first: VS Code cuts a hint at 43 characters, and the kernel names are what may be cut."""
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
        recorded = lines.to_recorded[line]
        label = hint_label(short_kernel_names([h.ref for h in hits]), index.line_share(path, recorded),
                           index.line_ms(path, recorded))
        end = len(text[line0].rstrip("\r\n"))
        hints.append(types.InlayHint(types.Position(line0, end), label, padding_left=True))
    return hints


def hint_label(kernels: str, share: float | None, ms: float | None) -> str:
    """"12.5% · 0.031 ms → cpp_fused_mul_relu_0" where the line was profiled, else "→ cpp_fused_mul_relu_0"."""
    cost = " · ".join(([f"{share:.1f}%"] if share else []) + ([format_ms(ms)] if ms else []))
    return f"{cost} → {kernels}" if cost else f"→ {kernels}"


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
