"""A row kernel's output pass, deferred by one row into the next row's compute pass.

Softmax over rows makes three passes over each row: the max (the row comes from memory), exp(x - max)
into the row's local array with its sum (the arithmetic; the next row's lines are asked for there,
prefetch.py), and the output pass, which scales the local array and streams it out. One after the
other, the exp pass computes while nothing is written, and the output pass is a burst of streaming
stores (64 per 4 KiB row) that waits on the write-combining buffers while the arithmetic units idle.
Here the output pass of row i-1 runs inside the exp pass of row i, a line per block of it, so the stores
drain while the exponentials are computed. What the output pass reads of row i-1 is kept one row longer:
local arrays get two slots used in turn, scalars (the sum) a `_prev` copy; the deferred code sees `x0` as
row i-1 (`const int64_t x0 = lens_prev_row;` in its block). Each thread writes its last row after its
loop, before the fence. The rows a thread runs need not be contiguous: the slots alternate per row run.

It applies when the kernel's last node is a streamed pointwise output over one inner loop as long as the
pass that prefetches the next row by lines (`RowPrefetch.into`), with lines of the same size, and that
output pass reads no row of an input (only the kernel's local arrays and scalars, and weights): layer
norm's output pass reads its input row again, and deferred it ran 3% slower (nothing to overlap with in
a sum of squares). Measured on the device's Xeon (2 threads, medians of 75, through the generated
`call()`): softmax (8192,1024) 3.64 -> 3.40 ms, masked softmax 3.87 -> 3.76 ms; hand-written kernels
on two other hosts 4.12 -> 3.86 and 1.97 -> 1.87 ms, the AMD box 2.17 -> 1.93 ms.
`LENS_PIPELINE_ROWS=0` turns it off.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import sympy

from compiler import config
from compiler.codegen.cpp_ops import CTYPES
from compiler.codegen.plan import DeferredPass, KernelPlan, PlanContext
from compiler.codegen.printer import NodePrinter
from compiler.codegen.strategies import prefetch, streaming
from compiler.ir.nodes import Load, substitute, walk
from compiler.ir.size_symbols import is_static

PREV, SLOT = "lens_prev_row", "lens_slot"


def plan(plan: KernelPlan, ctx: PlanContext) -> None:
    """The pass of kernel `ctx.kernel` to defer by a row (`plan.deferred`), or none, and why."""
    pf, ovars, bodies = plan.row_prefetch, plan.nest.vars, plan.bodies
    nodes = ctx.kernel.nodes
    if not config.cpp.pipeline_rows or len(ovars) != 1 or not pf.into or not plan.streamed:
        why = ("off (config.cpp.pipeline_rows)" if not config.cpp.pipeline_rows else
               f"{len(ovars)} outer loops, not one" if len(ovars) != 1 else
               "no pass prefetches the next row by lines" if not pf.into else "no output streams")
        plan.decide("deferred output pass", "", "no", why)
        return
    node, b = nodes[-1], bodies[-1]
    (ivars, isizes), host = b.inner, [n.name for n in nodes].index(pf.into)
    # (the host pass runs by whole lines, so a loop as long as it is whole lines too)
    if (node.name not in plan.streamed or node.reduction_type or len(ivars) != 1
            or streaming.line_lanes(node) != pf.lanes
            or isizes[0] != prefetch.blocked_length(ctx, plan.streamed, nodes, bodies, host, True)
            or not streaming.line_aligned(sympy.expand(b.store), ivars[0], pf.lanes)):
        plan.decide("deferred output pass", node.name, "no", "the last node is not a streamed pointwise row as "
                    f"long as {pf.into}'s pass, in lines of the same size")
        return
    loads = [ld for ld in walk(b.body) if isinstance(ld, Load)]
    if any(ld.buffer not in ctx.locals and ovars[0] in ctx.flat(ld).free_symbols for ld in loads):
        plan.decide("deferred output pass", node.name, "no", "it reads a row of an input again: nothing to "
                    "overlap with (+3% measured on layer norm)")
        return
    reads = {ld.buffer for ld in loads if ld.buffer in ctx.locals}
    if any(not is_static(ctx.locals[n].numel) for n in reads):
        plan.decide("deferred output pass", node.name, "no", "a local array it reads has a symbolic length "
                    "(its slots are stack arrays)")
        return
    scalars = sorted(n for n in reads if ctx.locals[n].scalar)
    dtypes = {n.name: n.dtype for n in nodes}
    plan.deferred = DeferredPass(node, b, ovars[0], sorted(n for n in reads if not ctx.locals[n].scalar), scalars,
                                 {n: ctx.locals[n] for n in reads}, {n: CTYPES[dtypes[n]] for n in reads},
                                 {ld.buffer: ctx.flat(ld) for ld in loads if ld.buffer in scalars},
                                 plan.stream_out[node.name])
    plan.decide("deferred output pass", node.name, f"runs a row late in {pf.into}'s pass",
                "its stores drain while the next row computes")


def declare(r: NodePrinter, d: DeferredPass) -> None:
    """Before the row loop (inside the parallel region): the thread's pending row and what it keeps."""
    r.emit("// the output pass of each row runs in the next row's (compiler/codegen/strategies/deferred_output.py)", [d.node.origin])
    r.emit(f"int64_t {PREV} = -1;")
    if d.arrays:
        r.emit(f"int64_t {SLOT} = 0;")
    for name in d.scalars:
        r.emit(f"{d.ctypes[name]} {d.locals[name].name}_prev = 0;")
    for name in d.arrays:
        r.emit(f"alignas(64) {d.ctypes[name]} {d.locals[name].name}_slots[2][{d.locals[name].numel}];")


def slot_pointers(r: NodePrinter, d: DeferredPass, name: str) -> None:
    """At the top of a row: local array `name` is this row's slot, `_prev` the pending row's."""
    local, t = d.locals[name].name, d.ctypes[name]
    r.emit(f"{t}* __restrict__ {local} = {local}_slots[{SLOT}];")
    r.emit(f"const {t}* __restrict__ {local}_prev = {local}_slots[{SLOT} ^ 1];")


def end_row(r: NodePrinter, d: DeferredPass) -> None:
    """At the end of a row: it becomes the pending one."""
    for name in d.scalars:
        r.emit(f"{d.locals[name].name}_prev = {d.locals[name].name};")
    r.emit(f"{PREV} = {d.row.name};")
    if d.arrays:
        r.emit(f"{SLOT} ^= 1;")


@contextmanager
def _pending_row(r: NodePrinter, d: DeferredPass):
    """Print with the pending row's locals (`_prev` names; its scalars were stored at the index it reads them)."""
    with r.renamed_locals({n: f"{d.locals[n].name}_prev" for n in d.arrays + d.scalars}, d.scalar_reads):
        r.open_block()
        r.emit(f"const int64_t {d.row.name} = {PREV};")
        yield
    r.close()


def line(r: NodePrinter, d: DeferredPass, var: sympy.Symbol) -> None:
    """Inside the host pass's block of a line over `var`: the pending row's line of the deferred node."""
    (ivar,), _ = d.body.inner
    body = replace(d.body, body=substitute(d.body.body, {ivar: var}))
    r.emit(f"if ({PREV} >= 0)", [d.node.origin])
    with _pending_row(r, d):
        streaming.render_line(r, d.node, d.out, body, var, sympy.expand(d.body.store).xreplace({ivar: var}),
                              d.cut_exps)


def finish(r: NodePrinter, d: DeferredPass) -> None:
    """After the row loop: the thread's last row."""
    r.emit(f"if ({PREV} >= 0)", [d.node.origin])
    with _pending_row(r, d):
        for name in d.arrays:
            local, t = d.locals[name].name, d.ctypes[name]
            r.emit(f"const {t}* __restrict__ {local}_prev = {local}_slots[{SLOT} ^ 1];")
        r.node_block(d.node, replace(d.body), parallel_inner=False)
