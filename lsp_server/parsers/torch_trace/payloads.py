"""Parsers for the text payloads of structured-trace records: Dynamo graph-break reports and recompile reasons.

Formats vary across torch versions (2.13: `Graph Break Reason:` + `Explanation:` + `Hint:` lines; older:
`Reason: Unsupported: ...`); unknown lines are kept as text, never fatal.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from lsp_server.parsers.torch_trace.reader import StackFrame

BREAK_LOCATION = re.compile(r"^Graph break (?:in user code )?at (.+):(\d+)\s*$")
TRACEBACK_FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$')
# line start -> the GraphBreak section it opens (the rest of the line is the section's first text)
SECTION_STARTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Graph Break Reason:\s*(.*)$"), "reason"),
    (re.compile(r"^Reason:\s*(.*)$"), "reason"),
    (re.compile(r"^\s*Explanation:\s*(.*)$"), "explanation"),
    (re.compile(r"^\s*Hint:\s*(.*)$"), "hint"),
    (re.compile(r"^\s*Developer debug context:\s*(.*)$"), "debug_context"),
    (re.compile(r"^\s*For more details about this graph break, please visit:\s*(\S+)"), "doc_url"),
    (re.compile(r"^User code traceback:\s*()$"), "traceback"),
    (re.compile(r"^NoneType: None()$"), "end"),
)
# An API or config named in a Dynamo hint, in backticks: what a quick fix can point the user to.
NAMED_FIX = re.compile(r"`((?:torch|functools|math)\.[\w.]+(?:\([^`]*\))?)`")
CACHE_ENTRY = re.compile(r"^(\d+/\d+|!?\d+/\d+/\d+): (.*)$")
GUARD_COMMENT = re.compile(r"\s{2,}#\s")  # where Dynamo's comment after a guard's code starts


@dataclass(frozen=True, slots=True)
class QuickFix:
    """A fix Dynamo's own hint names: `symbol` is the API/config to use, `title` the hint sentence."""
    title: str
    symbol: str


@dataclass(slots=True)
class GraphBreak:
    """One graph break as Dynamo reported it, located at the user's line."""
    file: str | None
    line: int | None
    reason: str
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    debug_context: str = ""
    doc_url: str | None = None
    user_stack: list[StackFrame] = field(default_factory=list)

    @property
    def quick_fix(self) -> QuickFix | None:
        """The first hint that names an API or config to use, as a quick-fix suggestion."""
        for hint in self.hints:
            m = NAMED_FIX.search(hint)
            if m:
                return QuickFix(title=hint, symbol=m.group(1))
        return None


@dataclass(frozen=True, slots=True)
class FailedGuard:
    """A recompile reason: the guard of cache entry `cache_entry` (e.g. "0/0") that failed, and why."""
    cache_entry: str | None
    reason: str


def parse_graph_break(text: str) -> GraphBreak:
    """Parse a `dynamo_graph_break_reason` payload."""
    gb = GraphBreak(file=None, line=None, reason="")
    sections: dict[str, list[str]] = {"reason": [], "explanation": [], "debug_context": []}
    current: list[str] | None = None
    in_traceback = False
    for raw in text.splitlines():
        m = BREAK_LOCATION.match(raw)
        if m and gb.file is None:
            gb.file, gb.line = m.group(1), int(m.group(2))
            current = sections["reason"]  # old format: the reason follows on the next lines
            continue
        started = _section_start(raw)
        if started is not None:
            name, first = started
            in_traceback = name == "traceback"
            current = None
            if name == "hint":
                gb.hints.append(first.strip())
            elif name == "doc_url":
                gb.doc_url = first
            elif name in sections:
                current = sections[name]
                current.append(first)
            continue
        if in_traceback:
            _add_traceback_line(gb.user_stack, raw)
        elif current is not None:
            current.append(raw)
        elif gb.hints and raw.strip():
            gb.hints[-1] += " " + raw.strip()
    gb.reason = _join(sections["reason"])
    gb.explanation = _join(sections["explanation"])
    gb.debug_context = _join(sections["debug_context"])
    if gb.file is None and gb.user_stack:
        gb.file, gb.line = gb.user_stack[-1].file, gb.user_stack[-1].line
    if not gb.reason:
        gb.reason = next((ln.strip() for ln in text.splitlines()[1:] if ln.strip()), "graph break")
    return gb


def _section_start(line: str) -> tuple[str, str] | None:
    for pattern, name in SECTION_STARTS:
        m = pattern.match(line)
        if m:
            return name, m.group(1)
    return None


def _add_traceback_line(stack: list[StackFrame], line: str) -> None:
    m = TRACEBACK_FRAME.match(line)
    if m:
        stack.append(StackFrame(m.group(1), int(m.group(2)), m.group(3)))
    elif stack and stack[-1].code is None and line.strip() and set(line.strip()) - set("^~ "):
        last = stack[-1]
        stack[-1] = StackFrame(last.file, last.line, last.name, line.strip())


def _join(lines: list[str]) -> str:
    """Dedent a section's lines into one text, dropping blank edges."""
    text = "\n".join(ln.rstrip() for ln in lines).strip("\n")
    body = [ln for ln in text.splitlines()[1:] if ln.strip()]
    indent = min((len(ln) - len(ln.lstrip()) for ln in body), default=0)
    first, *rest = text.splitlines() or [""]
    return "\n".join([first.strip(), *(ln[indent:] for ln in rest)]).strip()


def parse_recompile_reasons(text: str) -> list[FailedGuard]:
    """Parse a `recompile_reasons` payload: a JSON list (older torch; 2.13 for several) or `0/0: reason` lines
    (2.13). A reason is its first line without the `  # user code` comment Dynamo adds to a guard it quotes
    (`n == 2   # return x * n  # prog.py:4 in f`, then `User stack trace:` lines)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, list):
        entries = [v if isinstance(v, str) else json.dumps(v) for v in value]
    elif isinstance(value, str):
        entries = [value]
    else:
        entries = _entries_of_lines(text)
    return [_failed_guard(entry) for entry in entries if entry.strip()]


def _entries_of_lines(text: str) -> list[str]:
    """The `0/0: reason` lines, a line without a cache entry continuing the entry before it (its stack)."""
    entries: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if entries and not CACHE_ENTRY.match(line.strip()) and CACHE_ENTRY.match(entries[-1].strip().splitlines()[0]):
            entries[-1] += "\n" + line
        else:
            entries.append(line)
    return entries


def _failed_guard(entry: str) -> FailedGuard:
    first = entry.strip().splitlines()[0]
    m = CACHE_ENTRY.match(first)
    cache_entry, reason = (m.group(1), m.group(2)) if m else (None, first)
    return FailedGuard(cache_entry, GUARD_COMMENT.split(reason, 1)[0].strip())
