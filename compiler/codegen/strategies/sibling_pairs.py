"""Whether a row's pointwise producer and the reduction reading it back can share one loop, and how that loop runs
(sibling_loops.py prints the pair as planned; prefetch.py plans its passes around it)."""
from __future__ import annotations

from dataclasses import replace

import sympy

from compiler.codegen.cpp_ops import simd_reduction_op
from compiler.codegen.plan import NodeBody, PlanContext, RowPrefetch, SiblingPair
from compiler.codegen.strategies import exp_lanes
from compiler.ir.nodes import ComputedBuffer, Load, Op, substitute, walk


def fused_body(ctx: PlanContext, streamed: set[str], a: ComputedBuffer, ba: NodeBody, b: ComputedBuffer,
               bb: NodeBody) -> NodeBody | None:
    """Node `b`'s body with its reduction variable renamed to `a`'s loop variable, or None when the
    pair cannot share one loop (`streamed`: nodes whose stores stream)."""
    if a.reduction_type or a.name in streamed or not b.reduction_type:
        return None
    if simd_reduction_op(b.dtype, b.reduction_type) is None:
        return None
    (ivars, isizes), (rvars, rsizes) = ba.inner, bb.red
    if len(ivars) != 1 or len(rvars) != 1 or isizes != rsizes or bb.inner[0]:
        return None
    x = ivars[0]
    body = substitute(bb.body, {rvars[0]: x})
    written = sympy.expand(ba.store)
    for ld in walk(body):
        if isinstance(ld, Load) and ld.buffer == a.name and sympy.expand(ctx.flat(ld) - written) != 0:
            return None  # reads another element than the one this iteration writes
    return replace(bb, body=body)


def plan_pair(a: ComputedBuffer, ba: NodeBody, b: ComputedBuffer, fused: NodeBody, acc: str,
              pf: RowPrefetch) -> SiblingPair:
    """How producer `a` and reduction `b` (its body in `a`'s loop: `fused`) run in one loop into `acc`: by lines
    when the kernel prefetches its next row there (`pf`), by blocks of exp lanes when the producer has a float exp,
    else one `omp simd reduction` loop."""
    size = ba.inner[1][0]
    if pf.into == a.name:
        return SiblingPair(b.name, fused, "lines", acc, pf.lanes)
    if _lane_blocks(ba, size):
        lanes = exp_lanes.LINE
        main = size - size % lanes
        return SiblingPair(b.name, fused, "lane_blocks", acc, lanes, main, main < size)
    return SiblingPair(b.name, fused, "simd", acc, op=simd_reduction_op(b.dtype, b.reduction_type))


def _lane_blocks(ba: NodeBody, size: int) -> bool:
    """Whether the pair runs by blocks of one vector's lanes and a tail (when it does not go by lines,
    prefetch.py): a float exp in the producer, cut out of its loop (exp_lanes.py) rather than called per
    vector and, in the tail, per element."""
    return size >= exp_lanes.LINE and any(isinstance(e, Op) and e.name == "exp" and exp_lanes.inlines(e.dtype)
                                          for e in walk(ba.body))
