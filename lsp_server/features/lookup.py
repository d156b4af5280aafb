"""Position → index answers shared by features: uris, `def` lines of user files, kernels at a line."""
from __future__ import annotations

import os
import re
from typing import Any, Sequence
from urllib.parse import unquote

from pygls.uris import from_fs_path, to_fs_path

from lsp_server.features.notebook_cells import CELLS
from lsp_server.index import Index
from lsp_server.model import TraceFunction, normalize_path

MAX_DECORATOR_LINES = 8  # a decorated function's code object starts at its first decorator
DEF_LINE = re.compile(r"^(?P<indent>\s*)(?:async\s+)?def\s+(?P<name>[A-Za-z_]\w*)\s*\(")


def path_of(uri: str) -> str:
    # a notebook cell answers as the file its kernel compiled it under (features/notebook_cells.py)
    path = to_fs_path(uri) or CELLS.file_of(uri)
    return normalize_path(path) if path else uri


def uri_of(path: str | Any) -> str:
    return CELLS.cell_of(str(path)) or from_fs_path(str(path)) or str(path)


# uri → (what the text was read from, its lines): pygls splits an open buffer, and reads a closed file from
# disk, on every `.lines`; a hover on a `def` asks for them each time (issue 33: hover p99 ≤ 20 ms)
_LINES: dict[str, tuple[object, Sequence[str]]] = {}


def document_lines(server: Any, uri: str) -> Sequence[str]:
    """The editor's text of `uri` (open buffer, else the file on disk), split once per version of the text."""
    try:
        document = server.workspace.get_text_document(uri)
        if server.workspace.text_documents.get(unquote(uri)) is document:
            key: object = document.source  # the open buffer's text object: replaced on every edit
        elif document.path is not None:
            stat = os.stat(document.path)
            key = (stat.st_mtime_ns, stat.st_size)
        else:
            return document.lines
        cached = _LINES.get(uri)
        if cached is not None and (cached[0] is key or cached[0] == key):
            return cached[1]
        lines = document.lines
        _LINES[uri] = (key, lines)
        return lines
    except (OSError, UnicodeError, ValueError):
        return []


def def_name_at(server: Any, uri: str, line0: int) -> str | None:
    lines = document_lines(server, uri)
    if 0 <= line0 < len(lines):
        match = DEF_LINE.match(lines[line0])
        return match["name"] if match else None
    return None


def def_line_above(server: Any, uri: str, function: str, line: int) -> int | None:
    """1-based line of the nearest `def function(` at or above `line` (1-based) of the document."""
    lines = document_lines(server, uri)
    for number in range(min(line, len(lines)) - 1, -1, -1):
        match = DEF_LINE.match(lines[number])
        if match and match["name"] == function:
            return number + 1
    return None


def def_lines(server: Any, uri: str) -> list[tuple[int, str, int]]:
    """(0-based line, function name, column of the name) for each `def` in the document."""
    found = []
    for number, text in enumerate(document_lines(server, uri)):
        match = DEF_LINE.match(text)
        if match:
            found.append((number, match["name"], match.start("name")))
    return found


def trace_functions_at(index: Index, path: str, name: str, line: int) -> list[TraceFunction]:
    """The structured trace's figures (one per rank) for the function `name` whose `def` is at `line`."""
    named = [f for f in index.trace_functions_in(path) if f.name == name]
    near = [f for f in named if 0 <= line - f.def_line <= MAX_DECORATOR_LINES]
    if not near:
        return []
    closest = max(f.def_line for f in near)
    return sorted((f for f in near if f.def_line == closest), key=lambda f: (f.rank is None, f.rank or 0))
