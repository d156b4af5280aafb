"""Kernels over symbolic sizes (Dynamo's `s0`, `u0`, ... in loop bounds, strides and indices).

Such a kernel takes each symbol it uses as an `int64_t` argument named after it, after its pointers, and the
wrapper passes the values it read from the inputs. Decisions that need a size are made at run time: threads are
used when the work is big enough (an `if(parallel: ...)` clause on the loop's pragma, the same
`config.cpp.min_chunk_size` threshold static kernels apply at code generation), and the strategies planned from
concrete sizes (streaming stores, row prefetch and its deferred output pass, sibling loops, the column split)
run in size variants of the kernel's body, each behind a run-time check of the sizes it was planned for
(codegen/strategies/size_variants.py: `holds` takes a decision from the hints there); the generic body runs plain
`omp parallel for` outer loops and `omp simd` inner ones. Row strategies whose own loops are static apply there
too: per-lane max/min and wide sums over a row of known length, a producer and its row sum in one loop,
kernel-local arrays of a static row. A kernel-local array of a symbolic row (softmax's exps over `s0` columns) is
a per-thread heap row, grown when a call's rows are longer (`scratch_row`), where a static one is a stack array.
"""
from __future__ import annotations

import sympy
import torch

from compiler import config
from compiler.codegen.cpp_ops import CTYPES
from compiler.codegen.index import cpp_index
from compiler.codegen.plan import NodeBody
from compiler.codegen.printer import NodePrinter
from compiler.ir.nodes import ComputedBuffer, IndexValue, Layout, Load, walk
from compiler.ir.size_symbols import Size, free_symbols, is_static, sorted_symbols
from compiler.scheduler import FusedKernel


def kernel_symbols(k: FusedKernel, layouts: dict[str, tuple[torch.dtype, Layout]]) -> list[sympy.Symbol]:
    """The size symbols kernel `k`'s C++ may name: those of its loop sizes, its nodes' and inputs' layouts,
    and its indices (its own index variables left out), by name."""
    found = free_symbols(k.outer)
    buffers = set()
    for n in k.nodes:
        found |= free_symbols([n.layout.size, n.layout.stride, n.reduction_ranges])
        for e in walk(n.body):
            if isinstance(e, Load):
                buffers.add(e.buffer)
                found |= free_symbols(e.index)
            elif isinstance(e, IndexValue):
                found |= e.expr.free_symbols
    for b in buffers:
        found |= free_symbols([layouts[b][1].size, layouts[b][1].stride])
    own = {v for n in k.nodes for v in (*n.vars, *n.reduction_vars)}
    return sorted_symbols(found - own)


def largest(works: list[Size]) -> Size:
    """The most work one of a kernel's nodes does per outer iteration (at least 1)."""
    if is_static(works):
        return max(1, max(works))
    return sympy.Max(1, *works)


def worth_threads(work: Size) -> bool:
    """Whether a loop nest doing `work` elements runs on threads: decided here for a static amount; a symbolic
    one is compiled with threads and `parallel_if` decides at run time."""
    return not is_static(work) or work >= config.cpp.min_chunk_size


def parallel_if(work: Size) -> str:
    """The clause that keeps a symbolic amount of work below `min_chunk_size` on one thread ('' if static)."""
    if is_static(work):
        return ""
    return f" if(parallel: {cpp_index(sympy.expand(work))} >= {config.cpp.min_chunk_size})"


def static_loops(*bodies: NodeBody) -> bool:
    """Whether node bodies' own loops (inner and reduction) have concrete sizes."""
    return all(is_static(b.inner[1]) and is_static(b.red[1]) for b in bodies)


def declare_scratch(r: NodePrinter, nodes: list[ComputedBuffer], locals_: dict) -> None:
    """At the kernel's top: each symbolic-size local array's per-thread row and its capacity (elements), kept
    from call to call (the most a thread ever needed: rows grow, never shrink)."""
    for n in nodes:
        local = locals_.get(n.name)
        if local is not None and not local.scalar and not is_static(local.numel):
            r.statement(f"static thread_local {CTYPES[n.dtype]}* {local.name}_row = nullptr;", n.origin)
            r.statement(f"static thread_local int64_t {local.name}_cap = 0;", n.origin)


def scratch_row(r: NodePrinter, n: ComputedBuffer, local) -> None:
    """In an outer iteration: the local array `local` of node `n` as this thread's row, grown if too short."""
    t, size = CTYPES[n.dtype], cpp_index(sympy.expand(local.numel))
    r.emit(f"if ({local.name}_cap < {size})", [n.origin])
    r.open_block()
    r.statement(f"__builtin_free({local.name}_row);", n.origin)
    r.statement(f"{local.name}_row = static_cast<{t}*>(__builtin_malloc(sizeof({t}) * {size}));", n.origin)
    r.statement(f"{local.name}_cap = {size};", n.origin)
    r.close()
    r.statement(f"{t}* __restrict__ {local.name} = {local.name}_row;", n.origin)
