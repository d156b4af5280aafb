"""The compiler's side of `kernel_map.json` (docs/debug-directory.md): which output_code.py lines came
from which FX nodes, which user source line each node came from, and each kernel's arguments with their dtypes,
built as lens_format's `KernelMap` record (which owns the file's fields and writes it)."""
from __future__ import annotations

import logging

import torch

from compiler.codegen.half import is_half
from compiler.codegen.wrapper import OutputCode
from compiler.debug.graph_source import ReadableGraph
from compiler.ir.nodes import ExternArg, ExternCall, Layout
from compiler.scheduler import ScheduledGraph
from lens_format.kernel_map import KernelArg, KernelMap, MappedKernel, MappedLine, MappedNode

log = logging.getLogger(__name__)


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` -> "bfloat16" (the name users write after `torch.`)."""
    return str(dtype).removeprefix("torch.")


def _shape(layout: Layout) -> list:
    return [int(s) if getattr(s, "is_Integer", isinstance(s, int)) else str(s) for s in layout.size]


def _arg(name: str, buffer: str, role: str, dtype: torch.dtype, layout: Layout, ctype: str | None = None,
         output: str | None = None) -> KernelArg:
    # a half-precision buffer of a generated kernel is kept as 16-bit patterns, computed in float (codegen/half.py)
    return KernelArg(name, role, dtype_name(dtype), buffer, _shape(layout), ctype or "",
                     "float32" if is_half(dtype) and ctype else "", output or "")


def _extern_inputs(name: str, a: ExternArg, layouts: dict) -> list[KernelArg]:
    if a.items is not None:
        return [e for k, item in enumerate(a.items) for e in _extern_inputs(f"{name}[{k}]", item, layouts)]
    if a.buffer is None or a.buffer not in layouts:
        return []
    dtype, layout = layouts[a.buffer]
    if a.view is not None:
        layout = Layout(tuple(a.view[0]), tuple(a.view[1]))
    return [_arg(name, a.buffer, "in", dtype, layout)]


def kernel_args(graph: ScheduledGraph, code: OutputCode) -> dict[str, list[KernelArg]]:
    """Kernel name (as in `code.kernels`) -> its arguments in call order: tensors with role (in / out / in_out),
    dtype, shape (and, for generated kernels, the C++ element type), then a generated kernel's size symbols."""
    layouts = graph.ir.buffer_layouts()
    rendered = {rk.name: rk for rk in code.rendered}
    out: dict[str, list[KernelArg]] = {}
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
                # a.output: the output node written over the input buffer
                args.append(_arg(a.param, a.buffer, role, dtype, layout, a.ctype, a.output))
            args += [KernelArg(s.split()[-1], "size", "int64") for s in rendered[lines.name].sizes]
        else:
            break
        out[lines.name] = args
    return out


def build_kernel_map(graph_id: str, readable: ReadableGraph, code: OutputCode, status: str = "ok",
                     graph_kind: str = "inference", graph: ScheduledGraph | None = None) -> KernelMap:
    nodes = [MappedNode(name, readable.targets.get(name, ""), line, readable.sources.get(name),
                        list(readable.callers.get(name, [])))
             for name, line in readable.lines.items()]
    try:  # the arguments are for readers: a gap in them is logged, never a graph run eagerly
        args = kernel_args(graph, code) if graph is not None else {}
    except Exception:  # noqa: BLE001
        log.warning("kernel-lens: %s: kernel arguments left out of kernel_map.json", graph_id, exc_info=True)
        args = {}
    kernels = [MappedKernel(k.name, k.kind, k.start, k.end, list(k.nodes),
                            [MappedLine(n, list(ns)) for n, ns in k.lines], k.target or "", args.get(k.name))
               for k in code.kernels]
    return KernelMap(graph_id, status, graph_kind, nodes, kernels)
