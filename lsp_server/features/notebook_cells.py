"""Which notebook cell a compile in a Jupyter kernel came from. ipykernel compiles each cell under the name
`<tmp>/ipykernel_<pid>/<murmur2 of the cell's text>.py` (IPython alone: `<ipython-input-<count>-<sha1>>`), a
file on no disk: a cell is matched by the name its text hashes to, else (edited since it ran) by the recorded
texts of the lines its compile came from. `CELLS` holds the answer for the features' uri <-> path lookups."""
from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import unquote

from lsp_server.index import Index

IPYKERNEL_SEED = 0xC70F6907  # ipykernel.compiler.get_tmp_hash_seed(), also what VS Code's debugger hashes with
IPYKERNEL_FILE = re.compile(r"(^|[\\/])ipykernel_\d+[\\/](?P<hash>\d+)\.py$")
IPYTHON_INPUT = re.compile(r"<ipython-input-(?P<count>\d+)-(?P<hash>[0-9a-f]{12})>$")


def murmur2_x86(text: str, seed: int = IPYKERNEL_SEED) -> int:
    """MurmurHash2 (32-bit) of the text's UTF-8 bytes, as ipykernel names a cell's file."""
    data = text.encode("utf-8")
    m, length = 0x5BD1E995, len(data)
    h = seed ^ length
    end = length & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[end:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


@functools.lru_cache(maxsize=1024)
def text_hashes(text: str) -> tuple[int, str]:
    """ipykernel's and IPython's hashes of a cell's text, once per text (matching asks for them per file, on
    every keystroke in a cell)."""
    return murmur2_x86(text), hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


@functools.lru_cache(maxsize=1024)
def stripped_lines(text: str) -> frozenset[str]:
    return frozenset(line.strip() for line in text.splitlines())


@dataclass(frozen=True)
class Cell:
    """A code cell of an open notebook: its text now and the kernel's execution count when it last ran."""

    uri: str
    text: str
    execution_order: int | None = None


@dataclass(frozen=True)
class CellFile:
    """A file of the index that is a kernel's cell: the newest run's time and its recorded line texts."""

    path: str
    time: datetime
    recorded: dict[int, str]

    def exact(self, cell: Cell) -> bool:
        """The cell's text is the one this file was compiled from."""
        kernel = IPYKERNEL_FILE.search(self.path)
        if kernel is not None:
            return int(kernel["hash"]) == text_hashes(cell.text)[0]
        ipython = IPYTHON_INPUT.search(self.path)
        return ipython is not None and text_hashes(cell.text)[1] == ipython["hash"]

    def count(self) -> int | None:
        """The execution count in IPython's name (ipykernel's names carry none)."""
        ipython = IPYTHON_INPUT.search(self.path)
        return int(ipython["count"]) if ipython is not None else None

    def score(self, cell: Cell) -> float:
        """The share of recorded lines whose text the cell still has (0 below half: not this cell's)."""
        texts = [text for text in self.recorded.values() if text]
        if not texts:
            return 0.0
        current = stripped_lines(cell.text)
        share = sum(text in current for text in texts) / len(texts)
        return share if share >= 0.5 else 0.0


def is_cell_file(path: str) -> bool:
    return IPYKERNEL_FILE.search(path) is not None or IPYTHON_INPUT.search(path) is not None


def cell_files(index: Index) -> list[CellFile]:
    """The index's files compiled from kernel cells, each with the lines its newest run recorded."""
    found = []
    for path in sorted(p for p in index.covered_files() if is_cell_file(p)):
        view = index.view_for_file(path)
        if view is None:
            continue
        recorded = {line: text for (file, line), text in view.line_text.items() if file == path}
        found.append(CellFile(path, view.run.time, recorded))
    return found


def match_cells(cells: list[Cell], files: list[CellFile]) -> dict[str, str]:
    """Cell uri -> the file its compile is indexed under. A cell whose text hashes to a file's name takes the
    newest such file; a file no cell's text hashes to goes to the cell that ran (it has an execution count) and
    still has most of its recorded lines (ties: IPython's count equal to the cell's execution count, then the
    cell that ran last), unless that cell has an exact file of its own (the file is an older version of it);
    such a cell takes its newest file."""
    matched: dict[str, CellFile] = {}
    exact_files: set[str] = set()
    for cell in cells:
        exact = [f for f in files if f.exact(cell)]
        if exact:
            matched[cell.uri] = max(exact, key=lambda f: (f.time, f.path))
            exact_files.update(f.path for f in exact)
    by_cell: dict[str, list[CellFile]] = {}
    for file in files:
        if file.path in exact_files:
            continue
        scored = [(file.score(cell), file.count() == cell.execution_order, cell.execution_order, cell)
                  for cell in cells if cell.execution_order is not None]
        best = max(scored, key=lambda s: s[:3], default=None)
        if best is None or best[0] == 0 or best[3].uri in matched:
            continue
        by_cell.setdefault(best[3].uri, []).append(file)
    for uri, candidates in by_cell.items():
        matched[uri] = max(candidates, key=lambda f: (f.time, f.path))
    return {uri: file.path for uri, file in matched.items()}


@dataclass
class CellMap:
    """The open notebooks' cells and the files they map to, both ways (replaced whole on each change)."""

    file_by_cell: dict[str, str] = field(default_factory=dict)  # unquoted cell uri -> path
    cell_by_file: dict[str, str] = field(default_factory=dict)  # path -> the cell's uri as the client sent it

    def set(self, cells: list[Cell], files: list[CellFile]) -> bool:
        """Match again; True when the mapping changed."""
        matched = match_cells(cells, files)
        order = {cell.uri: cell.execution_order or 0 for cell in cells}
        by_file: dict[str, str] = {}
        for uri, path in sorted(matched.items(), key=lambda item: order[item[0]]):
            by_file[path] = uri  # cells of the same text: the one that ran last answers for the file
        file_by_cell = {unquote(uri): path for uri, path in matched.items()}
        changed = file_by_cell != self.file_by_cell or by_file != self.cell_by_file
        self.file_by_cell, self.cell_by_file = file_by_cell, by_file
        return changed

    def file_of(self, uri: str) -> str | None:
        return self.file_by_cell.get(unquote(uri)) if self.file_by_cell else None

    def cell_of(self, path: str) -> str | None:
        return self.cell_by_file.get(os.path.normpath(path)) if self.cell_by_file else None


CELLS = CellMap()
