"""Generates `output_code.py`: the graph's C++ source (one translation unit), the Python `call(args)`
that allocates buffers, launches kernels and extern ATen calls, `get_args()`, and a `__main__` that
benchmarks (`-p` profiles). Records, for every line, the FX nodes it comes from."""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import sympy
import torch

from compiler import config
from compiler.codegen.cpp import RenderedKernel, render_kernel
from compiler.codegen.cpp_ops import PRELUDE
from compiler.codegen.strategies import inplace
from compiler.cpp_text import vector_math
from compiler.cpp_text.math_prelude import PRELUDE_END
from compiler.ir.nodes import ExternArg, ExternCall, GraphIR, Layout, contiguous_strides
from compiler.ir.size_symbols import FloatSize, float_size_py, is_static, py_expr, substitute_hints
from compiler.machine import gemm
from compiler.machine.memory import storage_numel
from compiler.scheduler import FusedKernel, ScheduledGraph


@dataclass
class KernelLines:
    """Where a kernel (or extern call) landed in output_code.py, line by line."""

    name: str
    kind: str
    nodes: list[str]
    start: int
    end: int
    lines: list[tuple[int, list[str]]] = field(default_factory=list)  # (output_code line, nodes)
    target: str | None = None  # an extern call's op (`aten.mm.default`)


@dataclass
class OutputCode:
    text: str
    cpp_first_line: int  # output_code.py line holding C++ line 1
    kernels: list[KernelLines]
    rendered: list[RenderedKernel]


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str = "") -> int:
        self.lines.append(text)
        return len(self.lines)  # 1-based number of the line just added


def py_repr(v) -> str:
    if isinstance(v, sympy.Basic):  # a size expression of the symbols call() read from its inputs
        return py_expr(v) if not isinstance(v, sympy.logic.boolalg.Boolean) else f"({v})"
    if isinstance(v, FloatSize):
        return float_size_py(v)
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, torch.device):
        return f"torch.device({str(v)!r})"
    if isinstance(v, (torch.layout, torch.memory_format)):
        return str(v)
    if isinstance(v, torch._ops.OpOverload):  # an argument of a higher-order op (with_effects)
        return f"torch.ops.{v.namespace}.{v._opname}.{v._overloadname}"
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        return f"float({str(v)!r})"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(py_repr(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    return repr(v)


def _arg_code(a: ExternArg, layouts: dict[str, tuple[torch.dtype, Layout]]) -> str:
    if a.items is not None:
        return "[" + ", ".join(_arg_code(x, layouts) for x in a.items) + "]"
    if a.buffer is None:
        return py_repr(a.value)
    size, stride, offset = a.view
    lay = layouts[a.buffer][1]
    if offset == 0 and tuple(size) == lay.size and all(
            x == y for x, y, s in zip(stride, lay.stride, size) if s != 1):
        return a.buffer
    return f"reinterpret({a.buffer}, {py_repr(tuple(size))}, {py_repr(tuple(stride))}, {py_repr(offset)})"


# Extern ops called with a preallocated output (their `.out` overload) when the output is dense and contiguous,
# through torch's Python bindings (`torch.bmm(..., out=)`: ~2 us a call less than `torch.ops.aten.bmm.out`, whose
# OpOverload goes through the dispatcher's Python entry; the same ATen kernel).
OUT_VARIANTS = {"aten.mm.default": "torch.mm", "aten.addmm.default": "torch.addmm",
                "aten.bmm.default": "torch.bmm", "aten.baddbmm.default": "torch.baddbmm"}
# 2-D products go through compiler/machine/gemm.py, which picks ATen's mm or oneDNN and returns the output buffer.
GEMM_HELPERS = {"aten.mm.default": "gemm.mm", "aten.addmm.default": "gemm.addmm"}


def _through_helper(step: ExternCall, ir: GraphIR) -> bool:
    """Whether a 2-D product goes through gemm.py's helper, which picks its library per call. One only ATen can
    run (float32 of sizes known below gemm.fewest_routed_macs(); a half one unless its weight, an input of graph
    `ir`, may be a frozen constant with a pack) calls ATen's out= op directly: the helper's checks cost ~5 us a
    call, 6% of a MobileBERT forward (61 calls)."""
    if step.target not in GEMM_HELPERS:
        return False
    dtype, mm = step.outputs[0][1], step.target == "aten.mm.default"
    if dtype != torch.float32 and (gemm.fewest_routed_macs(dtype) == sys.maxsize
                                   or step.args[1 if mm else 2].buffer not in {b.name for b in ir.inputs}):
        return False  # (a half product: a pack only serves it from a registered constant, machine/gemm.py)
    a = step.args[0 if mm else 1]
    dims = (*step.outputs[0][2].size, a.view[0][1] if a.view is not None else None)
    if not all(d is not None and is_static(d) for d in dims):
        return True
    return math.prod(int(d) for d in dims) >= gemm.fewest_routed_macs(dtype)


def _out_variant(step: ExternCall) -> str | None:
    op = OUT_VARIANTS.get(step.target)
    if op is None or step.is_tuple or len(step.outputs) != 1 or step.outputs[0] is None:
        return None
    lay = step.outputs[0][2]
    return op if tuple(lay.stride) == contiguous_strides(lay.size) else None


# ops of ours whose Python output_code.py calls directly, not through the dispatcher (which costs a trip back into
# Python: ~8 us of a convolution's ~25 on a one-pixel input), ATen ops it calls through a function of ours
# (convolution_backward: machine/conv_train.py), and the import that brings each
DIRECT_CALLS = {"lens.conv2d_onednn.default": ("conv_packed.conv2d", "from compiler.machine import conv_packed"),
                "lens.conv2d_onednn_add.default": ("conv_packed.conv2d_add", "from compiler.machine import conv_packed"),
                "lens.linear_onednn.default": ("linear_packed.linear", "from compiler.machine import linear_packed"),
                "aten.convolution_backward.default": ("conv_train.convolution_backward",
                                                      "from compiler.machine import conv_train")}


def _op_code(target: str) -> str:
    """`aten.mm.default` -> torch.ops.aten.mm.default; `higher_order.with_effects` -> torch.ops.higher_order...;
    an op of DIRECT_CALLS -> its Python function."""
    direct = DIRECT_CALLS.get(target)
    return direct[0] if direct is not None else "torch.ops." + target


def generate_output_code(sg: ScheduledGraph, readable_lines: dict[str, int], graph_id: str,
                         header: str = "") -> OutputCode:
    ir: GraphIR = sg.ir
    layouts = ir.buffer_layouts()
    over = inplace.plan(sg, layouts, _graph_output_buffers(sg), _last_reads(sg), _out_variant) \
        if config.cpp.inplace_buffers else {}
    rendered = [render_kernel(k, layouts, readable_lines, over) for k in sg.kernels]
    out = _Lines()
    for line in header.splitlines():
        out.add(f"# {line}".rstrip())
    out.add("import sys")
    out.add("import torch")
    if any(isinstance(s, ExternCall) and _through_helper(s, ir) and _out_variant(s) for s in sg.steps):
        out.add("from compiler.machine import gemm")
    for target in sorted({s.target for s in sg.steps if isinstance(s, ExternCall) and s.target in DIRECT_CALLS}):
        out.add(DIRECT_CALLS[target][1])
    out.add("from compiler.machine.runtime import load_cpp_module, reinterpret, rand_strided, empty_strided, "
            "empty_strided_cpu, with_layout")
    out.add("")
    src_line = out.add("cpp_source = r'''")
    cpp_first = src_line  # the string starts with a newline: C++ line 1 is this line's remainder
    for line in (PRELUDE + vector_math.declarations()).splitlines():
        out.add(line)
    out.add(PRELUDE_END)
    for line in vector_math.definitions("\n".join(text for rk in rendered for text, _ in rk.lines)).splitlines():
        out.add(line)
    kernels: list[KernelLines] = []
    for rk in rendered:
        out.add("")
        start = None
        entry = KernelLines(rk.name, rk.kind, rk.origins, 0, 0)
        for text, nodes in rk.lines:
            n = out.add(text)
            start = start or n
            if nodes and not text.lstrip().startswith(("for ", "extern ", "#pragma")):
                entry.lines.append((n, nodes))
        entry.start, entry.end = start or 0, len(out.lines)
        kernels.append(entry)
    out.add("'''")
    out.add("")
    nargs = ", ".join(f"{rk.name!r}: {len(rk.args) + len(rk.sizes)}" for rk in rendered)
    out.add(f"kernels = load_cpp_module(cpp_source, {{{nargs}}}, name={graph_id!r}, "
            f"profile=__name__ == '__main__' and '-p' in sys.argv, namespace=globals())")
    for rk in rendered:
        out.add(f"{rk.name} = kernels[{rk.name!r}]")
    out.add("")
    out.add("")
    kernels = _emit_call(out, sg, rendered, kernels, layouts, over)
    _emit_get_args(out, ir)
    out.add("")
    out.add("")
    out.add('if __name__ == "__main__":')
    kinds = {k.name: k.kind for k in kernels}
    out.add("    from compiler.tools.profiling import output_code_main")
    out.add(f"    output_code_main(call, get_args, __file__, {kinds!r})")
    return OutputCode("\n".join(out.lines) + "\n", cpp_first, kernels, rendered)


def _last_reads(sg: ScheduledGraph) -> dict[str, int]:
    """Buffer -> the last step that reads it."""
    last: dict[str, int] = {}
    for i, step in enumerate(sg.steps):
        if isinstance(step, FusedKernel):
            for n in step.nodes:
                for ld in n.reads():
                    last[ld.buffer] = i
        else:
            for a in list(step.args) + list(step.kwargs.values()):
                for b in _arg_buffers(a):
                    last[b] = i
    return last


def _graph_output_buffers(sg: ScheduledGraph) -> set[str]:
    keep = {name for kind, name in sg.ir.outputs if kind == "buffer"}
    return keep | {v.buffer for kind, v in sg.ir.outputs if kind == "view"}


def _last_uses(sg: ScheduledGraph) -> dict[int, list[str]]:
    """For each step, the buffers read for the last time there (candidates for `del`)."""
    keep = _graph_output_buffers(sg)
    by_step: dict[int, list[str]] = {}
    for b, i in _last_reads(sg).items():
        if b not in keep:
            by_step.setdefault(i, []).append(b)
    return by_step


def _arg_buffers(a: ExternArg) -> list[str]:
    if a.items is not None:
        return [b for x in a.items for b in _arg_buffers(x)]
    return [a.buffer] if a.buffer else []


def _emit_call(out: _Lines, sg: ScheduledGraph, rendered: list[RenderedKernel], kernels: list[KernelLines],
               layouts, over: dict[str, str]) -> list[KernelLines]:
    """Emits `call(args)`; returns every kernel and extern call in execution order."""
    ir = sg.ir
    out.add("def call(args):")
    names = ir.arg_names
    if names:
        out.add(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = args")
    out.add("    args.clear()")
    for sym, code in ir.bindings:  # Dynamo's size symbols, read from the inputs (compiler/ir/size_symbols.py)
        out.add(f"    {sym.name} = {code}")
    by_name = {rk.name: (rk, kl) for rk, kl in zip(rendered, kernels)}
    ordered: list[KernelLines] = []
    params = {a.buffer for rk in rendered for a in rk.args} | set(over)
    in_kernel_only = {n.name for k in sg.kernels for n in k.nodes if n.name not in params}
    dels = {i: [b for b in names if b not in in_kernel_only] for i, names in _last_uses(sg).items()}
    used = set(_last_reads(sg)) | _graph_output_buffers(sg)
    for i, step in enumerate(sg.steps):
        if isinstance(step, FusedKernel):
            rk, kl = by_name[step.name]
            out.add(f"    # Topologically Sorted Source Nodes: [{', '.join(step.origins)}]")
            for n in step.nodes:
                if n.name in in_kernel_only:  # lives in registers or a per-iteration array of the kernel
                    continue
                dtype, lay = layouts[n.name]
                if n.name in over:  # written over a buffer this kernel reads for the last time
                    base = over[n.name]
                    same = layouts[base][1] == lay
                    out.add(f"    {n.name} = {base}" if same else
                            f"    {n.name} = reinterpret({base}, {py_repr(lay.size)}, {py_repr(lay.stride)}, 0)")
                    continue
                out.add(f"    {n.name} = {allocation(lay, dtype)}")
            ptrs = ", ".join([f"{a.buffer}.data_ptr()" for a in rk.args] + list(rk.sizes))
            line = out.add(f"    {step.name}({ptrs})")
            kl.lines.append((line, list(step.origins)))
            ordered.append(kl)
        else:
            args = [_arg_code(a, layouts) for a in step.args]
            args += [f"{k}={_arg_code(v, layouts)}" for k, v in step.kwargs.items()]
            out.add(f"    # Source Nodes: [{step.origin}] (extern: {step.reason})")
            out_op, target = _out_variant(step), step.target
            if out_op is not None and _through_helper(step, ir):
                lay = step.outputs[0][2]
                layout = f"size={py_repr(lay.size)}, stride={py_repr(lay.stride)}"
                start = out.add(f"    {step.name} = {GEMM_HELPERS[step.target]}({', '.join(args + [layout])})")
            elif out_op is not None:  # the output comes from the buffer pool (no page faults on reuse)
                if target in GEMM_HELPERS:  # (aten.mm.out: the profiler's aten::mm, not the helper's lens::mm)
                    target = target.replace(".default", ".out")
                dtype, lay = step.outputs[0][1], step.outputs[0][2]
                start = out.add(f"    {step.name} = {allocation(lay, dtype)}")
                out.add(f"    {out_op}({', '.join(args + [f'out={step.name}'])})")
            else:
                start = out.add(f"    {step.name} = {_op_code(step.target)}({', '.join(args)})")
            for sym, code in step.binds:  # a data-dependent size its result defines (before any use)
                out.add(f"    {sym.name} = {code}")
            # kernels read extern outputs with the fake tensor's strides: a real result laid out
            # differently is copied into that layout, never read wrongly
            if step.is_tuple:
                for k, o in enumerate(step.outputs):  # unused ones are left alone: their sizes may differ
                    if o is not None and o[0] in used:  # from the meta function's (embedding_bag's do)
                        out.add(f"    {o[0]} = with_layout({step.name}[{k}], {py_repr(o[2].size)}, "
                                f"{py_repr(o[2].stride)}, {py_repr(o[1])})")
            elif out_op is None and step.outputs[0] is not None:
                lay = step.outputs[0][2]
                out.add(f"    {step.name} = with_layout({step.name}, {py_repr(lay.size)}, {py_repr(lay.stride)}, "
                        f"{py_repr(step.outputs[0][1])})")
            ordered.append(KernelLines(f"extern_{step.name}_{step.target.split('.')[1]}", "extern",
                                       [step.origin], start, len(out.lines), [(start, [step.origin])],
                                       target=target))
        if dels.get(i):
            out.add(f"    del {', '.join(sorted(dels[i]))}")
    results = []
    for kind, v in ir.outputs:
        if kind == "buffer":
            results.append(v)
        elif kind == "view":
            results.append(f"reinterpret({v.buffer}, {py_repr(v.size)}, {py_repr(v.stride)}, {py_repr(v.offset)})")
        else:
            results.append(py_repr(v))
    out.add(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    out.add("")
    out.add("")
    return ordered


def _emit_get_args(out: _Lines, ir: GraphIR) -> None:
    out.add("def get_args():")
    hints = ir.hints  # (symbolic sizes: the example inputs' values)
    tensors = {b.name: f"rand_strided({py_repr(substitute_hints(b.layout.size, hints))}, "
                       f"{py_repr(substitute_hints(b.layout.stride, hints))}, {b.dtype})" for b in ir.inputs}
    scalars = {name: py_repr(substitute_hints(e, hints)) for name, e in ir.scalar_inputs.items()}
    items = [tensors.get(name) or scalars[name] for name in ir.arg_names]
    out.add(f"    return [{', '.join(items)}]")


def allocation(lay: Layout, dtype: torch.dtype) -> str:
    """The expression allocating a buffer: the pool's `empty_strided` for buffers it may serve, torch's own
    allocation without the dispatcher for smaller ones (`runtime.empty_strided_cpu`: each call of a call()
    counts after a kernel that streamed its inputs, 6 us there against 11 through the dispatcher and the
    pool's layers). A symbolic size goes to the pool, which decides per call."""
    small = is_static((lay.size, lay.stride)) and storage_numel(lay.size, lay.stride) * dtype.itemsize < \
        config.cpp.min_pool_bytes
    if small:
        return f"empty_strided_cpu({py_repr(lay.size)}, {py_repr(lay.stride)}, {dtype})"
    return f"empty_strided({py_repr(lay.size)}, {py_repr(lay.stride)}, dtype={dtype})"
