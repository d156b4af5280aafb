"""A user file's answers where its lines are now: the run's source lines re-anchored through the document's
current text (open buffer, saved or not) against the line texts recorded at compile time, and each `def`'s own
lines (Python's `ast` on that text), so a function owns the kernels of the lines of its body.

A recorded line keeps its answers only where a line of the same text is found at its place in the current
text (the lines before it may have moved it); a line whose text changed since the compile is `stale`: its
kernels are from an older version of the line, and it gets no inlay, lens or diagnostic.
"""
from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from lsp_server.index import Index, LineHit, RunView
from lsp_server.model import normalize_path
from lsp_server.features.lookup import document_lines, path_of

DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class DefSpan:
    """A `def` of the document: its name, enclosing classes/functions (`Net.forward`), the line of `def` and
    the last line of its body (1-based), and the spans of the defs nested in it (theirs, not its)."""

    name: str
    qualname: str
    line: int
    column: int
    first: int  # the first decorator's line (the code object's first line), else `line`
    last: int
    nested: tuple[tuple[int, int], ...] = ()

    def owns(self, line: int) -> bool:
        return self.line <= line <= self.last and not any(a <= line <= b for a, b in self.nested)


def def_spans(lines: Sequence[str]) -> list[DefSpan]:
    """Every `def` of the text, outermost first; an unparsable text (mid-edit) by indentation."""
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return spans_by_indent(lines)
    found: list[DefSpan] = []
    scopes: list[tuple[int, int]] = []  # every def's and class's lines: a def's nested ones are not its own

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):  # statements only: a def is never inside an expression
            if not isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                continue
            if isinstance(child, DEF_NODES + (ast.ClassDef,)):
                scopes.append((child.lineno, child.end_lineno or child.lineno))
            if isinstance(child, DEF_NODES):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                column = len(lines[child.lineno - 1]) - len(lines[child.lineno - 1].lstrip()) if \
                    child.lineno <= len(lines) else 0
                column += len("async def ") if isinstance(child, ast.AsyncFunctionDef) else len("def ")
                found.append(DefSpan(child.name, prefix + child.name, child.lineno, column, first,
                                     child.end_lineno or child.lineno))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)
    visit(tree, "")
    found = [replace(d, nested=tuple(s for s in scopes if d.line < s[0] and s[1] <= d.last)) for d in found]
    return sorted(found, key=lambda d: d.line)


def spans_by_indent(lines: Sequence[str]) -> list[DefSpan]:
    """`def` lines and the lines indented under them, for a text `ast` cannot parse."""
    found = []
    for number, text in enumerate(lines, start=1):
        stripped = text.lstrip()
        if not stripped.startswith(("def ", "async def ")):
            continue
        indent = len(text) - len(stripped)
        name = stripped.split("def ", 1)[1].split("(", 1)[0].strip()
        last = number
        for later in range(number, len(lines)):
            body = lines[later]
            if body.strip() and len(body) - len(body.lstrip()) <= indent:
                break
            if body.strip():
                last = later + 1
        found.append(DefSpan(name, name, number, indent + stripped.index("def ") + 4, number, last))
    return found


def recorded_texts(view: RunView, file: str) -> dict[int, str]:
    """Each recorded line of `file` in the run and its text at compile time (stripped)."""
    return {line: text for (f, line), text in view.line_text.items() if f == file}


def align(recorded: dict[int, str], current: Sequence[str]) -> dict[int, int]:
    """Recorded line -> current line (1-based) for the recorded lines whose text is found in order: each at the
    line of its text nearest to where the lines matched before it put it (an insertion above moves them all)."""
    stripped = [text.strip() for text in current]
    if all(0 < line <= len(stripped) and stripped[line - 1] == text for line, text in recorded.items()):
        return {line: line for line in recorded}
    where: dict[str, list[int]] = {}
    for number, text in enumerate(stripped, start=1):
        where.setdefault(text, []).append(number)
    moved: dict[int, int] = {}
    offset, after = 0, 0
    for line in sorted(recorded):
        candidates = where.get(recorded[line], [])
        at = bisect.bisect_right(candidates, after)
        later = candidates[at:]
        if not later:
            continue
        expected = line + offset
        best = min(later, key=lambda n: (abs(n - expected), n))
        moved[line] = best
        offset, after = best - line, best
    return moved


def moved_line(to_current: dict[int, int], has_text: bool, line: int, matched: list[int]) -> int | None:
    """Recorded line `line` in the current text (`to_current`: the recorded lines found again, `matched` their
    sorted numbers): where its recorded text was found, None where that text changed (`has_text`), else moved as
    the found lines just around it moved when they agree (None where they do not: an edit between them)."""
    if line in to_current:
        return to_current[line]
    if has_text:
        return None
    at = bisect.bisect_left(matched, line)
    around = matched[max(at - 1, 0):at + 1]  # the matched recorded lines just before and after it
    shifts = {to_current[old] - old for old in around}
    return line + shifts.pop() if len(shifts) == 1 else None


def trace_line_mover(server: Any, index: Index, uri: str):
    """For a file no debug directory recorded: a function taking a structured-trace finding's line to where it is
    in the document now (None where its text, recorded by Dynamo's stack frames, changed since the run), through
    the line texts the trace recorded for the file; None when the trace recorded none."""
    file = normalize_path(path_of(uri))
    recorded = {line: text for (f, line), text in index.trace.line_texts.items() if f == file}
    if not recorded:
        return None
    to_current = align(recorded, document_lines(server, uri))
    matched = sorted(to_current)
    return lambda line: moved_line(to_current, line in recorded, line, matched)


@dataclass
class FileLines:
    """The answering run's lines of one document, where they are in its current text."""

    view: RunView
    file: str
    to_current: dict[int, int] = field(default_factory=dict)  # recorded line -> current line
    to_recorded: dict[int, int] = field(default_factory=dict)  # current line -> recorded line
    stale: dict[int, int] = field(default_factory=dict)  # current line -> recorded line whose text it was
    text: Sequence[str] = ()  # the document's lines this answers for
    unchanged: bool = False  # every recorded line is where it was, with its text
    memo: dict = field(default_factory=dict)  # answers derived from this version of the text (dropped with it)


    def hits(self, line: int) -> list[LineHit]:
        """The kernels of current line `line` (none where its text changed since the compile)."""
        recorded = self.to_recorded.get(line)
        return self.view.by_source_line.get((self.file, recorded), []) if recorded is not None else []

    def lines(self) -> dict[int, list[LineHit]]:
        """Current line -> its kernels, for every recorded line still in the text."""
        return {self.to_current[line]: hits for (f, line), hits in self.view.by_source_line.items()
                if f == self.file and line in self.to_current}

    def current(self, recorded: int) -> int | None:
        return self.to_current.get(recorded)

    def moved_line(self, line: int) -> int | None:
        """Where recorded line `line` is now: its own place when its text was recorded (None where it changed);
        a line with no recorded text (a `print` that broke the graph) moves as the recorded lines around it
        moved when they agree (None where they do not: an edit between them)."""
        if "matched" not in self.memo:
            self.memo["matched"] = sorted(self.to_current)
        return moved_line(self.to_current, (self.file, line) in self.view.line_text, line, self.memo["matched"])

    @property
    def spans(self) -> list[DefSpan]:
        """The document's `def`s (parsed on first use: diagnostics after an edit need only the lines)."""
        if "spans" not in self.memo:
            self.memo["spans"] = def_spans(self.text)
        return self.memo["spans"]

    def span_at(self, line: int) -> DefSpan | None:
        """The innermost `def` whose `def` line (or decorator) is `line`."""
        return next((d for d in reversed(self.spans) if d.first <= line <= d.line), None)

    def owner(self, line: int) -> DefSpan | None:
        """The innermost `def` whose body holds `line`."""
        return next((d for d in reversed(self.spans) if d.owns(line)), None)


def file_lines(server: Any, index: Index, uri: str) -> FileLines | None:
    """The document's lines re-anchored (once per version of its text and per answering run)."""
    path = path_of(uri)
    view = index.view_for_file(path)
    if view is None:
        return None
    text = document_lines(server, uri)
    key = ("file_lines", path)
    cached = view.memo.get(key)
    if cached is not None and cached[0] is text:
        return cached[1]
    file = normalize_path(path)
    recorded = recorded_texts(view, file)
    moved = align(recorded, text)
    found = FileLines(view, file, moved, {new: old for old, new in moved.items()}, text=text,
                      unchanged=len(moved) == len(recorded) and all(old == new for old, new in moved.items()))
    taken = set(found.to_recorded)
    matched = sorted(moved)
    for line in recorded:
        if line in moved:
            continue
        before = bisect.bisect_left(matched, line)
        at = line + (moved[matched[before - 1]] - matched[before - 1] if before else 0)
        if 0 < at <= len(text) and at not in taken and text[at - 1].strip():
            found.stale[at] = line
    view.memo[key] = (text, found)
    return found
