"""`kernel_map.json`: which output_code.py lines came from which FX nodes, each node's user source line, and
each kernel's arguments with their dtypes. The compiler builds a `KernelMap` and writes its `to_json`; readers
take `read_kernel_map` (malformed entries are skipped, never raised)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import (SourceRef, as_dict_list, as_int, as_str, as_str_list, parse_source_ref,
                                read_json_object, source_ref_json)

VERSION = 1
STATUSES = ("ok", "compile_error", "accuracy_error")
GRAPH_KINDS = ("inference", "forward", "backward")


@dataclass
class MappedNode:
    """An FX node: its line in fx_graph_readable.py and the user source line it came from."""

    name: str
    target: str
    readable_line: int | None
    source: SourceRef | None
    callers: list[SourceRef] = field(default_factory=list)  # the user frames that called `source`'s, outermost first

    def to_json(self) -> dict[str, Any]:
        data = {"name": self.name, "target": self.target, "readable_line": self.readable_line,
                "source": source_ref_json(self.source)}
        if self.callers:
            data["callers"] = [c.to_json() for c in self.callers]
        return data

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MappedNode:
        callers = d.get("callers")
        return cls(as_str(d.get("name")), as_str(d.get("target")), as_int(d.get("readable_line")),
                   parse_source_ref(d.get("source")),
                   [c for v in callers if (c := parse_source_ref(v)) is not None] if isinstance(callers, list) else [])


@dataclass
class MappedLine:
    """A generated statement's output_code.py line (1-based) and the FX nodes it computes."""

    output_code_line: int
    nodes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"output_code_line": self.output_code_line, "nodes": list(self.nodes)}


@dataclass
class KernelArg:
    """One argument of a kernel in call order (docs/debug-directory.md, `args`)."""

    name: str  # in_ptr0 / out_ptr0 / in_out_ptr0 / s0 for generated kernels; args[K] / out for an extern call
    role: str  # in | out | in_out | size
    dtype: str  # torch's dtype without `torch.` (int64 for a size)
    buffer: str | None = None  # the name call(args) passes (None for a size)
    shape: list[int | str] | None = None  # a size symbol as text (None for a size)
    ctype: str = ""  # generated kernels: the C++ element type in memory
    compute_dtype: str = ""  # float32 where a half-precision buffer is computed as floats
    output: str = ""  # in_out: the output node written over `buffer`

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name}
        if self.buffer is not None:
            data["buffer"] = self.buffer
        data.update(role=self.role, dtype=self.dtype)
        if self.shape is not None:
            data["shape"] = list(self.shape)
        for key in ("ctype", "compute_dtype", "output"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        return data

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> KernelArg:
        shape = d.get("shape")
        buffer = d.get("buffer")
        return cls(as_str(d.get("name")), as_str(d.get("role")), as_str(d.get("dtype")),
                   buffer if isinstance(buffer, str) else None,
                   [s for s in shape if isinstance(s, (int, str)) and not isinstance(s, bool)]
                   if isinstance(shape, list) else None,
                   as_str(d.get("ctype")), as_str(d.get("compute_dtype")), as_str(d.get("output")))


@dataclass
class MappedKernel:
    name: str
    kind: str  # pointwise | reduction | extern
    start_line: int | None  # output_code_lines: the kernel's span in output_code.py (an extern: its call)
    end_line: int | None
    nodes: list[str]
    lines: list[MappedLine] = field(default_factory=list)
    target: str = ""  # extern kernels: the op the call runs
    args: list[KernelArg] | None = None  # None: not known (maps written before it existed)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "kind": self.kind,
                                "output_code_lines": [self.start_line, self.end_line], "nodes": list(self.nodes),
                                "lines": [line.to_json() for line in self.lines]}
        if self.target:
            data["target"] = self.target
        if self.args is not None:
            data["args"] = [a.to_json() for a in self.args]
        return data

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MappedKernel:
        span = d.get("output_code_lines")
        start = end = None
        if isinstance(span, list) and len(span) == 2:
            start, end = as_int(span[0]), as_int(span[1])
        lines = [MappedLine(line, as_str_list(item.get("nodes"))) for item in as_dict_list(d.get("lines"))
                 if (line := as_int(item.get("output_code_line"))) is not None]
        args = ([KernelArg.from_json(a) for a in as_dict_list(d.get("args")) if as_str(a.get("name"))]
                if isinstance(d.get("args"), list) else None)
        return cls(as_str(d.get("name")), as_str(d.get("kind"), "pointwise"), start, end,
                   as_str_list(d.get("nodes")), lines, as_str(d.get("target")), args)

    def covers(self, output_code_line: int) -> bool:
        return self.start_line is not None and self.end_line is not None and \
            self.start_line <= output_code_line <= self.end_line


@dataclass
class KernelMap:
    graph_id: str
    status: str = "ok"  # ok | compile_error | accuracy_error
    graph_kind: str = "inference"  # inference | forward | backward
    nodes: list[MappedNode] = field(default_factory=list)
    kernels: list[MappedKernel] = field(default_factory=list)
    path: Path | None = field(default=None, compare=False)  # where it was read from

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "graph_id": self.graph_id, "status": self.status,
                "graph_kind": self.graph_kind, "nodes": [n.to_json() for n in self.nodes],
                "kernels": [k.to_json() for k in self.kernels]}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path | None = None) -> KernelMap:
        nodes = [MappedNode.from_json(d) for d in as_dict_list(data.get("nodes")) if as_str(d.get("name"))]
        kernels = [MappedKernel.from_json(d) for d in as_dict_list(data.get("kernels")) if as_str(d.get("name"))]
        return cls(as_str(data.get("graph_id")), as_str(data.get("status"), "ok"),
                   as_str(data.get("graph_kind"), "inference"), nodes, kernels, path)

    def kernel_at(self, output_code_line: int) -> MappedKernel | None:
        return next((k for k in self.kernels if k.covers(output_code_line)), None)

    def nodes_at(self, output_code_line: int) -> list[str]:
        """The FX nodes of the statement at or just before the line (the kernel's nodes where none is)."""
        kernel = self.kernel_at(output_code_line)
        if kernel is None:
            return []
        best: list[str] = []
        for entry in kernel.lines:
            if entry.output_code_line <= output_code_line:
                best = entry.nodes
        return list(best) or list(kernel.nodes)

    def node(self, name: str) -> MappedNode | None:
        return next((n for n in self.nodes if n.name == name), None)

    def kernel_of(self, node: str) -> MappedKernel | None:
        """The kernel that computes `node`, if any."""
        return next((k for k in self.kernels if node in k.nodes), None)


def read_kernel_map(path: Path) -> KernelMap:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not kernel_map.json."""
    return KernelMap.from_json(read_json_object(path), path)
