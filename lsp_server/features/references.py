"""Find-references from a user source line (or `def`) → every generated line computing it."""
from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_server.features.definition import line_location
from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import def_name_at, path_of
from lsp_server.index import Index


def generated_references(server: Any, index: Index, uri: str, line0: int) -> list[types.Location]:
    path = path_of(uri)
    function = def_name_at(server, uri, line0)
    if function is not None:
        refs = index.kernels_of_function(path, function)
        if refs:
            return [line_location(ref.graph.output_code, ref.kernel.start_line) for ref in refs]
    locations = []
    for hit in index.hits_at(path, line0 + 1):
        locations += [line_location(hit.ref.graph.output_code, n) for n in hit.generated_lines]
    return locations


def register(server: Any) -> None:
    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    @failsafe(server, "references")
    def references(params: types.ReferenceParams) -> list[types.Location] | None:
        return generated_references(server, server.index, params.text_document.uri, params.position.line) or None
