"""Parses `fx_graph_readable.py`: the FX nodes, their lines, and their `# File:` source frames."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lens_format.jsonio import SourceRef

# `# File: /abs/x.py:4 in foo1, code: a = torch.neg(x1)`; older torch omits ` in fn`.
FILE_COMMENT = re.compile(r"^\s*# File: (?P<file>.+?):(?P<line>\d+)(?: in (?P<function>[^,]+))?, code: (?P<code>.*)$")
# `neg: "u8[4, 8]" = torch.ops.aten.neg.default(arg0_1);  arg0_1 = None`
NODE_STATEMENT = re.compile(
    r"^\s+(?P<name>[A-Za-z_]\w*)\s*(?::\s*\"[^\"]*\"|:\s*[\w\[\], .]+)?\s*=\s*(?P<target>[A-Za-z_][\w.]*)\("
)
FORWARD_DEF = re.compile(r"^\s*def forward\(")
GETITEM = re.compile(r"^\s+(?P<name>[A-Za-z_]\w*)\s*(?::\s*\"[^\"]*\")?\s*=\s*(?P<of>[A-Za-z_]\w*)\[\d+\]\s*(?:;|$)")
# a bare name (no attribute, keyword or call) or a number (inf too) of a node's call
ARG = re.compile(r"(?<![\w.\"'])(?:(?P<number>-?(?:\d+\.?\d*(?:e[+-]?\d+)?|inf))|(?P<name>[A-Za-z_]\w*))(?![\w.\"'(]|\s*=[^=])")


@dataclass
class ReadableNode:
    """One node statement; `frames` are its `# File:` comments, innermost (the user's line) last."""

    name: str
    target: str
    line: int
    frames: list[SourceRef] = field(default_factory=list)
    args: list[str] = field(default_factory=list)  # the names its call reads (nodes, inputs), in order

    @property
    def source(self) -> SourceRef | None:
        return self.frames[-1] if self.frames else None


@dataclass
class ReadableGraph:
    path: Path
    nodes: list[ReadableNode]
    forward_line: int | None = None


def parse_fx_graph_readable(path: Path) -> ReadableGraph:
    """Never raises on content: lines it does not recognise are skipped."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return parse_fx_graph_readable_text(path, text)


def parse_fx_graph_readable_text(path: Path, text: str) -> ReadableGraph:
    nodes: list[ReadableNode] = []
    frames: list[SourceRef] = []
    frames_closed = False  # a node statement ends a run of comments; the next comment starts a new one
    forward_line = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            frames, frames_closed = [], False
            continue
        comment = FILE_COMMENT.match(line)
        if comment:
            if frames_closed:
                frames, frames_closed = [], False
            frames.append(SourceRef(comment["file"].strip(), int(comment["line"]),
                                    (comment["function"] or "").strip(), comment["code"].strip()))
            continue
        if forward_line is None and FORWARD_DEF.match(line):
            forward_line = number
            continue
        item = GETITEM.match(line)
        if item is not None:  # `getitem_1: "f32[8, 1]" = var_mean[1]`: a part of a node's tuple
            nodes.append(ReadableNode(item["name"], "operator.getitem", number, list(frames), [item["of"]]))
            frames_closed = True
            continue
        statement = NODE_STATEMENT.match(line)
        if statement and not line.lstrip().startswith(("return", "#")):
            call = line[statement.end():].split(";", 1)[0]
            nodes.append(ReadableNode(statement["name"], clean_target(statement["target"]), number, list(frames),
                                      call_args(call)))
            frames_closed = True
    return ReadableGraph(path, nodes, forward_line)


def call_args(call: str) -> list[str]:
    """The names and numbers a node's call reads (`mul(arg0_1, 0.5)` -> arg0_1, 0.5; numbers as floats print)."""
    found = []
    for token in ARG.finditer(call):
        if token["name"] and token["name"] not in ("None", "True", "False"):
            found.append(token["name"])
        elif token["number"]:
            found.append(str(float(token["number"])))
    return found


def clean_target(target: str) -> str:
    """`torch.ops.aten.neg.default` → `aten.neg.default`."""
    return target[len("torch.ops."):] if target.startswith("torch.ops.") else target


def op_name(target: str) -> str:
    """`aten.neg.default` → `neg`; `operator.getitem` → `getitem`."""
    parts = target.split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "inductor", "quantized", "_quantized"):
        return parts[1]
    return parts[-1] if parts else target
