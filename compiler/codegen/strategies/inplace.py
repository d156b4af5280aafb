"""Kernel outputs written over an input buffer that dies in the same kernel (Inductor's in-place buffers).

`relu(addmm(...))` in an MLP or encoder writes its 16-32 MiB result into a second buffer of the same
shape, although nothing reads the first one afterwards: the kernel reads every line of one buffer and
writes every line of another, whose old contents the CPU first reads too (write-allocate). Written over
the input instead, each line is read once and written back from L1. A pointwise node qualifies when its
input buffer
- was allocated by the generated code (an earlier kernel's output, or an extern `out=` call's): never a
  graph input, a graph output or an extern op's own result (which may be a view);
- is read for the last time by this kernel, by this node alone, and only at the element the node writes
  (so each element is read before it is overwritten, in the same iteration);
- has the node's dtype and element count, both contiguous (its shape may differ: a view's).
The kernel then takes one `in_out_ptr` for both, and `call()` names the output as the input's buffer.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

from compiler.codegen import half
from compiler.codegen.cpp_ops import CTYPES
from compiler.ir.nodes import ComputedBuffer, ExternCall, Layout, contiguous_strides
from compiler.scheduler import FusedKernel, ScheduledGraph


@dataclass
class KernelArg:
    param: str  # in_ptr0 / out_ptr0 / in_out_ptr0
    buffer: str  # what call() passes
    ctype: str
    is_output: bool
    output: str | None = None  # an in_out_ptr's output node, written over `buffer` (kernel_map.json says so)


def kernel_params(k: FusedKernel, layouts: dict[str, tuple[torch.dtype, Layout]], local: set[str] | dict,
                  inplace: dict[str, str]) -> dict[str, KernelArg]:
    """Buffer name -> the kernel's parameter for it: buffers read from outside (in_ptrN), outputs (out_ptrN),
    and an output written over an input (one in_out_ptrN under both names)."""
    params: dict[str, KernelArg] = {}

    def add(buffer: str, kind: str) -> KernelArg:
        if buffer not in params:
            count = len({id(a) for a in params.values() if a.param.startswith(kind + "_ptr")})
            dtype = layouts[buffer][0]
            ctype = half.STORAGE_CTYPES.get(dtype, CTYPES[dtype])
            params[buffer] = KernelArg(f"{kind}_ptr{count}", buffer, ctype, kind != "in")
        return params[buffer]

    for n in k.nodes:
        if n.name in inplace:
            params[n.name] = add(inplace[n.name], "in_out")
            params[n.name].output = n.name
    written = k.buffers()
    for n in k.nodes:
        for ld in n.reads():
            if ld.buffer not in written:
                add(ld.buffer, "in")
    for n in k.nodes:
        if n.name not in local:
            add(n.name, "out")
    return params


def unique(params: dict[str, KernelArg]) -> list[KernelArg]:
    """The kernel's parameters in order, each once."""
    return list({id(a): a for a in params.values()}.values())


def plan(sg: ScheduledGraph, layouts: dict[str, tuple[torch.dtype, Layout]], keep: set[str],
         last_reads: dict[str, int], out_variant) -> dict[str, str]:
    """Output node -> the input buffer it is written over. `keep`: graph outputs (and bases of output
    views); `last_reads`: buffer -> index of the last step reading it; `out_variant(step)`: whether an
    extern step writes into a buffer the generated code allocates."""
    fresh: set[str] = set()  # buffers `call()` allocates, not yet written over
    out: dict[str, str] = {}
    for i, step in enumerate(sg.steps):
        if isinstance(step, ExternCall):
            if out_variant(step):
                fresh.add(step.name)
            continue
        for n in step.nodes:
            if n.name in step.local:
                continue
            b = _writable_input(step, n, layouts, fresh - keep, last_reads, i)
            if b is not None:
                out[n.name] = b
                fresh.discard(b)
            fresh.add(n.name)
    return out


def _writable_input(k: FusedKernel, n: ComputedBuffer, layouts, candidates: set[str], last_reads: dict[str, int],
                    step: int) -> str | None:
    if n.reduction_type:
        return None
    dtype, lay = layouts[n.name]
    if tuple(lay.stride) != contiguous_strides(lay.size):
        return None
    at = lay.flat_index(tuple(n.vars))
    for b in dict.fromkeys(ld.buffer for ld in n.reads()):
        if b not in candidates or last_reads.get(b) != step or not _same_memory(layouts[b], (dtype, lay)):
            continue
        if any(ld.buffer == b for m in k.nodes if m is not n for ld in m.reads()):
            continue
        blay = layouts[b][1]
        if all(_canonical(blay.flat_index(ld.index) - at) == 0 for ld in n.reads() if ld.buffer == b):
            return b
    return None


def _same_memory(a: tuple[torch.dtype, Layout], b: tuple[torch.dtype, Layout]) -> bool:
    """Both contiguous, of one dtype and element count (a (2048, 2048) product and the (8, 256, 2048) relu
    over it: the same memory, element for element, in another shape)."""
    (da, la), (db, lb) = a, b
    return (da == db and tuple(la.stride) == contiguous_strides(la.size) and
            tuple(lb.stride) == contiguous_strides(lb.size) and la.numel == lb.numel)


def _canonical(e: sympy.Expr) -> sympy.Expr:
    """`e` expanded with `a % d` as a symbol m(a, d) and `a // d` as `(a - m(a, d)) / d`: a view's
    `d*(x // d) + x % d` becomes `x` (a difference that is not 0 this way is taken as not 0)."""
    mods: dict[tuple[str, int], sympy.Symbol] = {}

    def mod(a: sympy.Expr, d: sympy.Expr) -> sympy.Symbol:
        return mods.setdefault((sympy.srepr(a), int(d)), sympy.Symbol(f"lens_mod{len(mods)}", integer=True))

    e = e.replace(lambda t: isinstance(t, ModularIndexing) and t.args[1] == 1 and t.args[2].is_Integer,
                  lambda t: mod(t.args[0], t.args[2]))
    e = e.replace(lambda t: isinstance(t, FloorDiv) and t.args[1].is_Integer,
                  lambda t: (t.args[0] - mod(t.args[0], t.args[1])) / t.args[1])
    return sympy.expand(e)
