"""Dynamo's guards of one compile, from the structured trace's `dynamo_cpp_guards_str` payload (the guard tree
Dynamo prints: `| | +- TENSOR_MATCH: check_tensor(L['x'], ...)  # x = a * 2  # prog.py:6 in f`), and which of
them a recompile reason quotes (`tensor 'x' size mismatch ...`, `n == 2`)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from lsp_server.parsers.torch_trace.payloads import GUARD_COMMENT

# `+- KIND: code` (a guard); `+- GuardManager: source=...` and `+- RootGuardManager` are the tree's own nodes
GUARD_LINE = re.compile(r"^[\s|]*\+- (?P<kind>[A-Z][A-Z0-9_]*)(?::\s*(?P<code>.*))?$")
USER_LINE = re.compile(r"(?P<file>[^\s#]+):(?P<line>\d+) in [\w<>.]+")  # the comment's end: `…/prog.py:6 in f`
LOCAL = re.compile(r"\b[LG]\['([^']+)'\]")  # Dynamo's sources: L['x'] (a local), G['y'] (a global)
TENSOR_FAILURE = re.compile(r"^tensor '(?P<name>[^']+)' ")
CHECK_TENSOR = re.compile(r"^check_tensor\((?P<source>[^,]+),")
MAX_CODE = 300  # GLOBAL_STATE's code is a JSON document of every global setting


@dataclass(frozen=True, slots=True)
class DynamoGuard:
    """One guard: its kind (`TENSOR_MATCH`, `EQUALS_MATCH`, `LAMBDA_GUARD`...), its code as Dynamo wrote it, and
    the user's line it came from (Dynamo's comment, whose path Dynamo cuts to its last characters; None for the
    guards every compile has)."""
    kind: str
    code: str
    line: int | None
    file_tail: str | None = None

    def in_file(self, path: str) -> bool:
        """Whether the guard's line is one of `path`: the tail Dynamo kept ends it, or names the same file (the
        tail is relative to where the program ran, and a folder may have moved since)."""
        tail = self.file_tail
        if self.line is None or not tail:
            return False
        return path.endswith(tail) or tail.endswith("/" + path.rsplit("/", 1)[-1])


def parse_guard_tree(text: str) -> list[DynamoGuard]:
    """The guards of a `dynamo_cpp_guards_str` payload in Dynamo's order; other lines are skipped."""
    guards = []
    for raw in text.splitlines():
        m = GUARD_LINE.match(raw)
        if m is None:
            continue
        parts = GUARD_COMMENT.split(m["code"] or "")
        code, comment = parts[0].strip(), parts[-1] if len(parts) > 1 else ""
        where = USER_LINE.search(comment) if len(parts) > 2 else None  # `# user code  # file:line in f`
        if len(code) > MAX_CODE:
            code = code[:MAX_CODE - 1] + "…"
        guards.append(DynamoGuard(m["kind"], code, int(where["line"]) if where else None,
                                  where["file"] if where else None))
    return guards


def quoted_guard(guards: list[DynamoGuard], reason: str) -> int | None:
    """The index of the guard a recompile reason says failed: a tensor's (`tensor 'x' size mismatch ...`: the
    TENSOR_MATCH of `x`), else the guard whose code the reason quotes (`n == 2` for `L['n'] == 2`); None when
    none is recognisable."""
    tensor = TENSOR_FAILURE.match(reason)
    if tensor:
        wanted = _local_names(tensor["name"])
        for i, g in enumerate(guards):
            source = CHECK_TENSOR.match(g.code) if g.kind == "TENSOR_MATCH" else None
            if source and _local_names(source["source"].strip()) == wanted:
                return i
        return None
    wanted = _local_names(reason.strip())
    return next((i for i, g in enumerate(guards) if _local_names(g.code) == wanted), None)


def _local_names(code: str) -> str:
    """`L['x'] == 2` as a recompile reason writes it: `x == 2`."""
    return LOCAL.sub(lambda m: m.group(1), code)
