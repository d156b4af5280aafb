"""Software prefetch of the next row in row kernels (an outer loop over rows, inner or reduction loops over
each row: softmax, layer norm, row reductions).

Why: a row of 1024 floats is one 4 KiB page, and the hardware's L2 streamer stops at page boundaries, so
every row starts with demand misses that the kernel's arithmetic then waits on. In kernels that pass over
each row more than once, the first pass reads the row from memory and the later ones from L1; we ask for
the next row's lines during the second pass, one line per block of 16 floats, so memory streams while that
pass computes (its loop then runs by blocks of a line with per-lane partials, as g++ drops
`__builtin_prefetch` from the loops it vectorizes). Measured (2 threads, one process, medians of 25, kernel
alone, softmax and layer norm on (8192, 1024)): on the device's Xeon, against asking for the whole next row
at once after the first pass, softmax 4.66 -> 3.69 and 4.72 -> 3.73 ms, layer norm 2.45 -> 2.12 and 2.19 ->
1.79 ms; on the AMD machine softmax 3.15 -> 2.75 ms, layer norm unchanged. Per-line prefetches in the last
(output) pass, or in the first, were slower than that. Where the second pass cannot go by lines (rows not a
whole number of lines, other reductions), the whole next row is asked for after the first pass (softmax
4.88 -> 4.23 ms against none). One-pass row reductions (x.mean(-1)) stream on their own: prefetches before,
after or inside the pass cost 0-8% on the Xeon and up to 40% on the AMD machine.
"""
from __future__ import annotations

import sympy

from compiler import config
from compiler.codegen.index import cpp_index
from compiler.codegen.plan import KernelPlan, NodeBody, PlanContext, RowPrefetch
from compiler.codegen.strategies.sibling_pairs import fused_body
from compiler.ir.nodes import Load, walk
from compiler.ir.size_symbols import is_static

LINE_BYTES = 64
# Rows smaller than this stream fine without help (several rows per page); larger ones would evict the
# current row from L1 before it is used (48 KiB L1 on the machines we measured).
MIN_ROW_BYTES = 1024
MAX_ROW_BYTES = 16 * 1024


def plan(plan: KernelPlan, ctx: PlanContext) -> None:
    """Which inputs of kernel `ctx.kernel` to prefetch a row ahead, and where (`plan.row_prefetch`; a kernel
    whose outer loop runs on threads fuses sibling loops)."""
    ovars, osizes, bodies, pairs = plan.nest.vars, plan.nest.sizes, plan.bodies, plan.nest.parallel
    passes = _passes(ctx, plan.streamed, bodies, pairs)
    if not config.cpp.prefetch_rows or not ovars or len(passes) < 2 or (is_static(osizes[-1]) and osizes[-1] < 2):
        why = ("off (config.cpp.prefetch_rows)" if not config.cpp.prefetch_rows else "no outer loop over rows"
               if not ovars else f"{len(passes)} pass(es) over each row, not two or more" if len(passes) < 2
               else "one row")
        plan.decide("row prefetch", "", "no", why)
        return  # (a kernel without loops inside its outer loops is flat: that loop is the vector one)
    row, rows = ovars[-1], osizes[-1] if is_static(osizes[-1]) else cpp_index(osizes[-1])  # (a symbolic count)
    outer = set(ovars)
    targets: dict[tuple[str, str], tuple[int, int]] = {}
    for b in bodies:
        ranges = dict(zip(*b.inner)) | dict(zip(*b.red))
        for ld in walk(b.body):
            arg = ctx.params.get(ld.buffer) if isinstance(ld, Load) else None
            if arg is None or arg.is_output or ld.buffer in ctx.locals:
                continue
            span = _dense_row(sympy.expand(ctx.flat(ld)), row, outer, ranges)
            itemsize = ctx.layouts[ld.buffer][0].itemsize
            if span is None or not is_static(span[1]) or not MIN_ROW_BYTES <= span[1] * itemsize <= MAX_ROW_BYTES:
                continue
            targets.setdefault((arg.param, cpp_index(span[0])), (span[1], LINE_BYTES // itemsize))
    if not targets:
        plan.decide("row prefetch", "", "no", f"no input read as a contiguous row of {MIN_ROW_BYTES}-"
                    f"{MAX_ROW_BYTES} bytes per {row}")
        return
    out = RowPrefetch(row.name, rows, [(*key, *shape) for key, shape in targets.items()])
    shapes = set(targets.values())
    length, lanes = next(iter(shapes))
    nodes = ctx.kernel.nodes
    if (len(shapes) == 1 and length % lanes == 0
            and blocked_length(ctx, plan.streamed, nodes, bodies, passes[1], pairs) == length):
        out.into = nodes[passes[1]].name
        plan.decide("row prefetch", out.into, "a line per block of its pass",
                    f"rows of {length} elements are whole lines and the second pass runs by lines")
    else:
        out.after = passes[0]
        plan.decide("row prefetch", nodes[passes[0]].name, "the whole next row after its pass",
                    "the second pass cannot run by lines (rows not whole lines, several row shapes, or no "
                    "plain sum/prod or producer-and-sum pass)")
    plan.row_prefetch = out


def _passes(ctx: PlanContext, streamed: set[str], bodies: list[NodeBody], pairs: bool) -> list[int]:
    """Indices of the nodes that open a pass over the row: those with loops of their own, but not a reduction
    that shares its producer's loop (sibling_loops.py: the pair is one pass, and its producer names it)."""
    nodes, out, i = ctx.kernel.nodes, [], 0
    while i < len(nodes):
        if bodies[i].inner[0] or bodies[i].red[0]:
            out.append(i)
        pair = pairs and i + 1 < len(nodes) and fused_body(ctx, streamed, nodes[i], bodies[i], nodes[i + 1],
                                                          bodies[i + 1]) is not None
        i += 1 + pair
    return out


def _dense_row(index: sympy.Expr, row: sympy.Symbol, outer: set, ranges: dict) -> tuple[sympy.Expr, int] | None:
    """(flat index where the next row starts, row length) when one row's accesses are a dense block."""
    terms = index.as_coefficients_dict()
    inner = []
    for term, coeff in terms.items():
        if term == 1:
            continue
        if not isinstance(term, sympy.Symbol) or not coeff.is_Integer:
            return None  # floor/mod indexing, products of variables
        if term in outer:
            continue
        if term not in ranges or coeff <= 0:
            return None
        inner.append((int(coeff), ranges[term]))
    if not inner or terms.get(row, 0) == 0:
        return None  # no row to stream, or every row reads the same block
    length = 1
    for coeff, size in sorted(inner):
        if coeff != length:
            return None
        length *= size
    start = index.xreplace({sym: 0 for sym in index.free_symbols if sym not in outer})
    return sympy.expand(start.xreplace({row: row + 1})), length


# -- a pass by blocks of a line, with the next row's lines asked for one per block --------------------------
def blocked_length(ctx: PlanContext, streamed: set[str], nodes: list, bodies: list[NodeBody], i: int,
                   pairs: bool) -> int | None:
    """The row length of node i's pass when it can run by blocks of a line: a plain sum/prod over one loop,
    or (`pairs`: the kernel fuses sibling loops) a producer fused with the sum that reads it back."""
    n, b = nodes[i], bodies[i]
    if pairs and i + 1 < len(nodes) and fused_body(ctx, streamed, n, b, nodes[i + 1], bodies[i + 1]) is not None:
        return b.inner[1][0]
    if n.reduction_type in ("sum", "prod") and n.dtype.is_floating_point and not b.inner[0] and len(b.red[0]) == 1:
        return b.red[1][0]
    return None
