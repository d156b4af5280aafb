"""`notes.txt`: the compiler's decisions about one graph, one a line — nodes that run as ATen calls and why
(`NODE: extern call to TARGET (REASON)`) and a graph that runs eagerly (`GRAPH runs eagerly (no generated code):
WHY`). Any other line is kept as free text; nothing in the file is fatal to a reader."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lens_format.errors import ParseError

_EXTERN = re.compile(r"^(?P<node>[A-Za-z_][\w.]*): extern call to (?P<target>[^\s(]+)(?: \((?P<reason>.*)\))?$")
_EAGER = re.compile(r"^(?P<graph>\S+) runs eagerly(?: \([^)]*\))?: (?P<why>.+)$")


@dataclass(frozen=True)
class ExternNote:
    """An FX node the compiler left to ATen: `target` is the op called, `reason` why it has no kernel."""

    node: str
    target: str
    reason: str
    line: int = 0  # 1-based, in notes.txt (0: not read from a file)

    def to_line(self) -> str:
        return f"{self.node}: extern call to {self.target}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True)
class EagerNote:
    """The whole graph runs eagerly (no generated code)."""

    graph_id: str
    reason: str
    line: int = 0

    def to_line(self) -> str:
        return f"{self.graph_id} runs eagerly (no generated code): {self.reason}"


@dataclass
class GraphNotes:
    externs: list[ExternNote] = field(default_factory=list)
    eager: EagerNote | None = None
    other: list[str] = field(default_factory=list)  # free text for people

    def extern_for(self, node: str) -> ExternNote | None:
        return next((note for note in self.externs if note.node == node), None)

    def to_text(self) -> str:
        """The file's text: extern notes, free text, then the eager note ("" when there is nothing to say)."""
        lines = [n.to_line() for n in self.externs] + self.other + ([self.eager.to_line()] if self.eager else [])
        return "".join(line + "\n" for line in lines)

    @classmethod
    def from_text(cls, text: str) -> GraphNotes:
        notes = cls()
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


def read_notes(path: Path) -> GraphNotes:
    """ParseError (naming the file) only when it cannot be read; any text parses."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError(path, f"cannot read: {exc}") from exc
    return GraphNotes.from_text(text)
