"""The FX graph as Inductor prints it (fx_graph_readable.py), each node's line in that text, and the
user's source location of each node taken from its `stack_trace`."""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field

import torch
import torch.fx

from lens_format.jsonio import SourceRef

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>[^\n]+)\n(?P<code>[^\n]*)')
_TORCH_DIR = os.path.dirname(torch.__file__)


def user_frames(node: torch.fx.Node) -> list[SourceRef]:
    """The user frames of the node's stack trace, outermost first (frames inside torch itself are skipped)."""
    return list(_user_frames(node.meta.get("stack_trace") or "", os.getcwd()))


@functools.lru_cache(maxsize=8192)
def _user_frames(trace: str, cwd: str) -> tuple[SourceRef, ...]:
    """(The nodes of one source line share a trace: a deep model's 1,200 nodes read ~20 frames each, 0.6 s of
    BART's compile when each frame's path was made absolute again.)"""
    frames = [(_absolute(m["file"], cwd), m) for m in _FRAME.finditer(trace)]
    user = [f for f in frames if not f[0].startswith(_TORCH_DIR)] or frames[-1:]
    return tuple(SourceRef(path, int(m["line"]), m["fn"].strip(), m["code"].strip()) for path, m in user)


@functools.lru_cache(maxsize=4096)
def _absolute(path: str, cwd: str) -> str:
    """`os.path.abspath(path)` with `cwd` the current folder (a relative path's meaning: part of the cache key)."""
    return os.path.normpath(os.path.join(cwd, path))


def source_of(node: torch.fx.Node) -> SourceRef | None:
    """The innermost user frame of the node's stack trace (frames inside torch itself are skipped)."""
    frames = user_frames(node)
    return frames[-1] if frames else None


@dataclass
class ReadableGraph:
    text: str
    lines: dict[str, int]  # FX node name -> 1-based line of its statement
    sources: dict[str, SourceRef]
    targets: dict[str, str]  # FX node name -> "aten.neg.default"
    op_names: dict[str, str]  # FX node name -> short op name for kernel names (original aten op)
    callers: dict[str, list[SourceRef]] = field(default_factory=dict)  # the frames calling `sources`', outermost first


def target_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def _short_op(node: torch.fx.Node) -> str:
    original = node.meta.get("original_aten")
    target = original if isinstance(original, torch._ops.OpOverload) else node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._opname
    return getattr(target, "__name__", node.name)


# a statement of the printed graph: `  name: "f32[4]..." = ...` or `  name = ...` (group 1: the node's name)
_ASSIGNS = re.compile(r"^\s+(\w+)(?:: [^=]+)? = ")


def _defines(line: str, name: str) -> bool:
    """Whether `line` of the printed graph assigns node `name` (one regex for all nodes: compiling one per node was
    0.5 s of BART's compile)."""
    found = _ASSIGNS.match(line)
    return found is not None and found.group(1) == name


def readable_graph(gm: torch.fx.GraphModule) -> ReadableGraph:
    text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    text_lines = text.splitlines()
    lines: dict[str, int] = {}
    sources: dict[str, SourceRef] = {}
    targets: dict[str, str] = {}
    op_names: dict[str, str] = {}
    callers: dict[str, list[SourceRef]] = {}
    search_from = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        for i in range(search_from, len(text_lines)):
            if _defines(text_lines[i], node.name):
                lines[node.name] = i + 1
                search_from = i + 1
                break
        frames = user_frames(node)
        if frames:
            sources[node.name] = frames[-1]
            if len(frames) > 1:
                callers[node.name] = frames[:-1]
        targets[node.name] = target_name(node.target)
        op_names[node.name] = _short_op(node)
    return ReadableGraph(text if text.endswith("\n") else text + "\n", lines, sources, targets, op_names, callers)
