"""Parses our compiler's `kernel_map.json` (docs/debug-directory.md) into dataclasses."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lens_format.jsonio import (SourceRef, as_dict_list, as_int, as_str, as_str_list, parse_source_ref,
                            read_json_object)


@dataclass
class MappedNode:
    name: str
    target: str
    readable_line: int | None
    source: SourceRef | None


@dataclass
class MappedLine:
    output_code_line: int
    nodes: list[str]


@dataclass
class MappedKernel:
    name: str
    kind: str
    start_line: int | None
    end_line: int | None
    nodes: list[str]
    lines: list[MappedLine] = field(default_factory=list)


@dataclass
class KernelMap:
    path: Path
    graph_id: str
    status: str
    nodes: list[MappedNode]
    kernels: list[MappedKernel]
    graph_kind: str = "inference"


def parse_kernel_map(path: Path) -> KernelMap:
    """ParseError on bad JSON or an unknown major version; malformed entries are skipped."""
    data = read_json_object(path)
    nodes = []
    for entry in as_dict_list(data.get("nodes")):
        name = as_str(entry.get("name"))
        if name:
            nodes.append(MappedNode(name, as_str(entry.get("target")), as_int(entry.get("readable_line")),
                                    parse_source_ref(entry.get("source"))))
    kernels = []
    for entry in as_dict_list(data.get("kernels")):
        name = as_str(entry.get("name"))
        if not name:
            continue
        span = entry.get("output_code_lines")
        start = end = None
        if isinstance(span, list) and len(span) == 2:
            start, end = as_int(span[0]), as_int(span[1])
        lines = [MappedLine(line, as_str_list(item.get("nodes")))
                 for item in as_dict_list(entry.get("lines"))
                 if (line := as_int(item.get("output_code_line"))) is not None]
        kernels.append(MappedKernel(name, as_str(entry.get("kind"), "pointwise"), start, end,
                                    as_str_list(entry.get("nodes")), lines))
    return KernelMap(path, as_str(data.get("graph_id")), as_str(data.get("status"), "ok"), nodes, kernels,
                     as_str(data.get("graph_kind"), "inference"))
