"""Parses Inductor's provenance records: `inductor_provenance_tracking_node_mappings.json` (kernel and handle → FX
nodes, post-grad → pre-grad nodes) and the kernel stack traces (kernel and handle → the full user stacks of its
nodes, callers included: `inductor_provenance_tracking_kernel_stack_traces`, logged to the structured trace)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from lens_format.errors import ParseError
from lens_format.jsonio import SourceRef, as_str_list, read_json_object

INDUCTOR_MAJORS = (1, 2)


@dataclass
class KernelProvenance:
    """`cppCodeToPost` entry: `kernel:handle` (older torch: plain `kernel`) → post-grad node names."""

    kernel: str
    handle: int | None
    nodes: list[str]


@dataclass
class ProvenanceMap:
    path: Path
    kernels: list[KernelProvenance]
    post_to_pre: dict[str, list[str]] = field(default_factory=dict)
    pre_to_post: dict[str, list[str]] = field(default_factory=dict)

    def nodes_of(self, kernel: str) -> list[str]:
        names: list[str] = []
        for entry in self.kernels:
            if entry.kernel == kernel:
                names.extend(n for n in entry.nodes if n not in names)
        return names


def split_handle(key: str) -> tuple[str, int | None]:
    name, _, handle = key.rpartition(":")
    if name and handle.isdigit():
        return name, int(handle)
    return key, None


def parse_provenance(path: Path) -> ProvenanceMap:
    """ParseError on bad JSON; the `version` key is optional here (the debug-dir copy lacks it; the
    structured-trace copy has Inductor's own version, 2.0 in torch 2.11-2.13, same keys as 1.0)."""
    data = read_json_object(path, require_version=False, majors=INDUCTOR_MAJORS)
    kernels = []
    for key_name in ("cppCodeToPost", "tritonCodeToPost", "kernelCodeToPost"):
        table = data.get(key_name)
        if isinstance(table, dict):
            for key, nodes in table.items():
                kernel, handle = split_handle(str(key))
                kernels.append(KernelProvenance(kernel, handle, as_str_list(nodes)))
    post_to_pre, pre_to_post = name_table(data.get("postToPre")), name_table(data.get("preToPost"))
    return ProvenanceMap(path, kernels, post_to_pre, pre_to_post)


def name_table(table: object) -> dict[str, list[str]]:
    return {str(k): as_str_list(v) for k, v in table.items()} if isinstance(table, dict) else {}


KERNEL_STACKS_FILE = "inductor_provenance_tracking_kernel_stack_traces.json"  # a trace run's copy of the record
# `  File "/abs/prog.py", line 23, in run` then the line's code, then (3.11+) `^^^^` under the expression
STACK_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+?)\s*$')


@dataclass
class KernelStacks:
    """One kernel's (`kernel:handle`) stack traces: each the full user stack of some of its nodes, outermost
    frame first, the node's own line last."""

    kernel: str
    handle: int | None
    stacks: list[list[SourceRef]]


def stack_frames(trace: str) -> list[SourceRef]:
    """A Python traceback's frames (`File "x.py", line 4, in f` and the code line after it), outermost first."""
    frames: list[SourceRef] = []
    lines = trace.splitlines()
    for at, text in enumerate(lines):
        found = STACK_FRAME.match(text)
        if found is None:
            continue
        code = lines[at + 1].strip() if at + 1 < len(lines) else ""
        code = "" if STACK_FRAME.match(code) or not code.strip("^~ ") else code
        frames.append(SourceRef(found["file"], int(found["line"]), found["function"], code))
    return frames


def kernel_stacks_from_text(text: str, path: Path) -> list[KernelStacks]:
    """ParseError on bad JSON; entries that are not `kernel:handle` → list of tracebacks are skipped."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise ParseError(path, f"invalid JSON: {exc}", getattr(exc, "lineno", None)) from exc
    if not isinstance(data, dict):
        raise ParseError(path, "expected a JSON object at top level")
    found = []
    for key, traces in data.items():
        kernel, handle = split_handle(str(key))
        stacks = [frames for trace in as_str_list(traces) if (frames := stack_frames(trace))]
        if stacks:
            found.append(KernelStacks(kernel, handle, stacks))
    return found


def parse_kernel_stacks(path: Path) -> list[KernelStacks]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError(path, f"cannot read: {exc}") from exc
    return kernel_stacks_from_text(text, path)
