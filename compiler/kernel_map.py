"""The compiler's side of `kernel_map.json` (docs/debug-directory.md): which output_code.py lines came
from which FX nodes, which user source line each node came from, and each kernel's arguments with their dtypes."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from compiler.codegen.half import is_half
from compiler.codegen.wrapper import OutputCode
from compiler.graph_source import ReadableGraph
from compiler.ir import ExternArg, ExternCall, Layout
from compiler.scheduler import ScheduledGraph

KERNEL_MAP_VERSION = 1
log = logging.getLogger(__name__)


@dataclass
class KernelMap:
    graph_id: str
    status: str  # ok | compile_error | accuracy_error
    graph_kind: str = "inference"  # inference | forward | backward
    nodes: list[dict] = field(default_factory=list)
    kernels: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"version": KERNEL_MAP_VERSION, "graph_id": self.graph_id, "status": self.status,
                "graph_kind": self.graph_kind, "nodes": self.nodes, "kernels": self.kernels}

    def kernel_at(self, output_code_line: int) -> dict | None:
        for k in self.kernels:
            start, end = k["output_code_lines"]
            if start <= output_code_line <= end:
                return k
        return None

    def nodes_at(self, output_code_line: int) -> list[str]:
        k = self.kernel_at(output_code_line)
        if k is None:
            return []
        best: list[str] = []
        for entry in k["lines"]:  # the statement at or just before the line
            if entry["output_code_line"] <= output_code_line:
                best = entry["nodes"]
        return best or list(k["nodes"])

    def node(self, name: str) -> dict | None:
        return next((n for n in self.nodes if n["name"] == name), None)


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` -> "bfloat16" (the name users write after `torch.`)."""
    return str(dtype).removeprefix("torch.")


def _shape(layout: Layout) -> list:
    return [int(s) if getattr(s, "is_Integer", isinstance(s, int)) else str(s) for s in layout.size]


def _arg(name: str, buffer: str, role: str, dtype: torch.dtype, layout: Layout, ctype: str | None = None) -> dict:
    entry = {"name": name, "buffer": buffer, "role": role, "dtype": dtype_name(dtype), "shape": _shape(layout)}
    if ctype:
        entry["ctype"] = ctype
    if is_half(dtype) and ctype:
        entry["compute_dtype"] = "float32"  # kept as 16-bit patterns, computed in float (codegen/half.py)
    return entry


def _extern_inputs(name: str, a: ExternArg, layouts: dict) -> list[dict]:
    if a.items is not None:
        return [e for k, item in enumerate(a.items) for e in _extern_inputs(f"{name}[{k}]", item, layouts)]
    if a.buffer is None or a.buffer not in layouts:
        return []
    dtype, layout = layouts[a.buffer]
    if a.view is not None:
        layout = Layout(tuple(a.view[0]), tuple(a.view[1]))
    return [_arg(name, a.buffer, "in", dtype, layout)]


def kernel_args(graph: ScheduledGraph, code: OutputCode) -> dict[str, list[dict]]:
    """Kernel name (as in `code.kernels`) -> its arguments in call order: tensors with role (in / out / in_out),
    dtype, shape (and, for generated kernels, the C++ element type), then a generated kernel's size symbols."""
    layouts = graph.ir.buffer_layouts()
    rendered = {rk.name: rk for rk in code.rendered}
    out: dict[str, list[dict]] = {}
    for step, lines in zip(graph.steps, code.kernels):  # both in execution order, one entry per step
        if isinstance(step, ExternCall):
            if not lines.name.startswith(f"extern_{step.name}_"):
                break
            args = [e for k, a in enumerate(step.args) for e in _extern_inputs(f"args[{k}]", a, layouts)]
            args += [e for key, a in step.kwargs.items() for e in _extern_inputs(key, a, layouts)]
            for k, o in enumerate(step.outputs):
                if o is not None:
                    args.append(_arg(f"out[{k}]" if step.is_tuple else "out", o[0], "out", o[1], o[2]))
        elif lines.name in rendered and step.name == lines.name:
            args = []
            for a in rendered[lines.name].args:
                role = "in_out" if a.param.startswith("in_out") else "out" if a.is_output else "in"
                dtype, layout = layouts[a.buffer]
                args.append(_arg(a.param, a.buffer, role, dtype, layout, a.ctype))
                if a.output:  # the output node written over the input buffer
                    args[-1]["output"] = a.output
            args += [{"name": s.split()[-1], "role": "size", "dtype": "int64"} for s in rendered[lines.name].sizes]
        else:
            break
        out[lines.name] = args
    return out


def build_kernel_map(graph_id: str, readable: ReadableGraph, code: OutputCode, status: str = "ok",
                     graph_kind: str = "inference", graph: ScheduledGraph | None = None) -> KernelMap:
    nodes = []
    for name, line in readable.lines.items():
        src = readable.sources.get(name)
        nodes.append({"name": name, "target": readable.targets.get(name, ""), "readable_line": line,
                      "source": src.to_json() if src else None})
    try:  # the arguments are for readers: a gap in them is logged, never a graph run eagerly
        args = kernel_args(graph, code) if graph is not None else {}
    except Exception:  # noqa: BLE001
        log.warning("kernel-lens: %s: kernel arguments left out of kernel_map.json", graph_id, exc_info=True)
        args = {}
    kernels = []
    for k in code.kernels:
        kernels.append({"name": k.name, "kind": k.kind, "output_code_lines": [k.start, k.end],
                        "nodes": list(k.nodes),
                        "lines": [{"output_code_line": n, "nodes": list(ns)} for n, ns in k.lines]})
        if k.target:
            kernels[-1]["target"] = k.target
        if k.name in args:
            kernels[-1]["args"] = args[k.name]
    return KernelMap(graph_id, status, graph_kind, nodes, kernels)
