"""Parses `ir_post_fusion.txt` (Inductor's and ours): scheduler nodes, their buffers and loop-body ops."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

NODE_HEADER = re.compile(r"^(?P<name>[A-Za-z_]\w*): (?P<kind>\w+)\((?P<detail>[^)]*)\)\s*$")
WRITES = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.writes = \[(?P<deps>.*)\]\s*$")
BUFFER_NAME = re.compile(r"(?:name=)?'(?P<buf>\w+)'")
BODY_OP = re.compile(r"^\s+\w+ = ops\.(?P<op>\w+)\(")
EXTERN_KERNEL = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.node\.kernel = (?P<kernel>[\w.]+)\s*$")
UNMET = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.unmet_dependencies = (?P<deps>.*)$")  # reads of other nodes' buffers
ITERATION = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.group\.iteration = (?P<iteration>.+?)\s*$")


@dataclass
class IrNode:
    """One top-level scheduler node (fused nodes list their parts' ops too)."""

    name: str
    kind: str
    line: int
    writes: list[str] = field(default_factory=list)
    body_ops: list[str] = field(default_factory=list)
    extern_kernel: str | None = None
    reads: list[str] = field(default_factory=list)  # buffers other nodes write (its unmet dependencies)
    iteration: str | None = None  # its loop sizes as Inductor grouped them, e.g. "(262144, 1)"


@dataclass
class IrGraph:
    path: Path
    nodes: list[IrNode]


def parse_ir_post_fusion(path: Path) -> IrGraph:
    """Never raises on content; unknown lines are skipped."""
    return parse_ir_post_fusion_text(path, path.read_text(encoding="utf-8", errors="replace"))


def parse_ir_post_fusion_text(path: Path, text: str) -> IrGraph:
    nodes: list[IrNode] = []
    by_name: dict[str, IrNode] = {}
    current: IrNode | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = NODE_HEADER.match(line)
        if header:
            name = header["name"]
            owner = next((n for n in nodes if name in n.name.split("_")), None)
            if owner is None or name == owner.name:
                current = IrNode(name, header["kind"], number)
                nodes.append(current)
                by_name[name] = current
            else:
                current = owner  # a part of a fused node: fold its ops into the fused node
            continue
        if current is None:
            continue
        writes = WRITES.match(line)
        if writes and (writes["name"] == current.name or writes["name"] in current.name.split("_")):
            current.writes += [m["buf"] for m in BUFFER_NAME.finditer(writes["deps"]) if m["buf"] not in current.writes]
            continue
        unmet = UNMET.match(line)
        if unmet and unmet["name"] == current.name:
            current.reads = [m["buf"] for m in BUFFER_NAME.finditer(unmet["deps"])]
            continue
        iteration = ITERATION.match(line)
        if iteration and (iteration["name"] == current.name or current.iteration is None):
            current.iteration = iteration["iteration"]  # a fused node's: its own, else its first part's
            continue
        extern = EXTERN_KERNEL.match(line)
        if extern:
            current.extern_kernel = extern["kernel"]
            continue
        op = BODY_OP.match(line)
        if op and op["op"] not in ("load", "store", "store_reduction", "index_expr", "constant"):
            current.body_ops.append(op["op"])
    return IrGraph(path, nodes)
