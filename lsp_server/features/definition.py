"""Go-to-definition: kernel line in output_code.py → FX node line in fx_graph_readable.py → user source line."""
from __future__ import annotations

import re
from typing import Any

from lsprotocol import types

from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import path_of, uri_of
from lsp_server.index import Index

FX_LINE_COMMENT = re.compile(r"//\s*Corresponding FX code line:\s*(?P<line>\d+)")


def line_location(path: object, line: int) -> types.Location:
    position = types.Position(max(line - 1, 0), 0)
    return types.Location(uri_of(path), types.Range(position, position))


def definitions(index: Index, uri: str, line0: int) -> list[types.Location]:
    path = path_of(uri)
    generated = index.generated_file(path)
    if generated is not None:
        kernel = generated.kernel_at(line0 + 1)
        if kernel is None:
            return []
        graph = generated.graph
        mark = FX_LINE_COMMENT.search(graph.code_line(line0 + 1))
        if mark is not None:  # `// Corresponding FX code line: 6` names its node's line itself
            return [line_location(graph.readable, int(mark["line"]))]
        kernel_line = generated.line_nodes.get(line0 + 1)
        names = kernel_line.nodes if kernel_line else kernel.nodes
        nodes = [graph.nodes[n] for n in names if n in graph.nodes]
        return [line_location(graph.node_file(n), n.readable_line) for n in nodes if n.readable_line is not None]
    found = index.node_at_readable_line(path, line0 + 1)
    if found is not None and found[1].source is not None:
        source = found[1].source
        return [line_location(source.file, source.line)]
    return []


def register(server: Any) -> None:
    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    @failsafe(server, "definition")
    def definition(params: types.DefinitionParams) -> list[types.Location] | None:
        return definitions(server.index, params.text_document.uri, params.position.line) or None
