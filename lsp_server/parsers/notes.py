"""`notes.txt`: the compiler's decisions about one graph, one a line — nodes that run as ATen calls and why
(`NODE: extern call to TARGET (REASON)`), and graphs that run eagerly (`GRAPH runs eagerly (no generated
code): WHY`). Any other line is kept as free text; nothing in the file is fatal."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_EXTERN = re.compile(r"^(?P<node>[A-Za-z_][\w.]*): extern call to (?P<target>[^\s(]+)(?: \((?P<reason>.*)\))?$")
_EAGER = re.compile(r"^(?P<graph>\S+) runs eagerly(?: \([^)]*\))?: (?P<why>.+)$")


@dataclass(frozen=True)
class ExternNote:
    """An FX node the compiler left to ATen: `target` is the op called, `reason` why it has no kernel."""

    node: str
    target: str
    reason: str
    line: int  # 1-based, in notes.txt


@dataclass(frozen=True)
class EagerNote:
    """The whole graph runs eagerly (no generated code)."""

    graph_id: str
    reason: str
    line: int


@dataclass
class GraphNotes:
    externs: list[ExternNote] = field(default_factory=list)
    eager: EagerNote | None = None
    other: list[str] = field(default_factory=list)

    def extern_for(self, node: str) -> ExternNote | None:
        return next((note for note in self.externs if note.node == node), None)


def parse_notes_text(text: str) -> GraphNotes:
    notes = GraphNotes()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        extern = _EXTERN.match(line)
        eager = None if extern else _EAGER.match(line)
        if extern is not None:
            notes.externs.append(ExternNote(extern["node"], extern["target"], extern["reason"] or "", number))
        elif eager is not None and notes.eager is None:
            notes.eager = EagerNote(eager["graph"], eager["why"].strip(), number)
        else:
            notes.other.append(line)
    return notes


def parse_notes(path: Path) -> GraphNotes:
    return parse_notes_text(path.read_text(errors="replace"))
