"""Find-references from a user source line (or `def`) → every generated line computing it."""
from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_server.features.definition import line_location
from lsp_server.features.failsafe import failsafe
from lsp_server.features.function_kernels import function_kernels
from lsp_server.features.source_lines import file_lines
from lsp_server.index import Index


def generated_references(server: Any, index: Index, uri: str, line0: int) -> list[types.Location]:
    lines = file_lines(server, index, uri)
    if lines is None:
        return []
    span = lines.span_at(line0 + 1)
    if span is not None:
        refs = function_kernels(lines, span).refs
        if refs:
            return [line_location(ref.graph.output_code, ref.kernel.start_line) for ref in refs]
    locations = []
    for hit in lines.hits(line0 + 1):
        locations += [line_location(hit.ref.graph.output_code, n) for n in hit.generated_lines]
    return locations


def register(server: Any) -> None:
    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    @failsafe(server, "references")
    def references(params: types.ReferenceParams) -> list[types.Location] | None:
        return generated_references(server, server.index, params.text_document.uri, params.position.line) or None
