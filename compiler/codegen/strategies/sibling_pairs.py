"""Whether a row's pointwise producer and the reduction reading it back can share one loop (sibling_loops.py
renders the pair; prefetch.py plans its passes around it): the check alone, so that planning imports no renderer."""
from __future__ import annotations

from dataclasses import replace

import sympy

from compiler.codegen.cpp_ops import simd_reduction_op
from compiler.codegen.plan import NodeBody, PlanContext
from compiler.ir.nodes import ComputedBuffer, Load, substitute, walk


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
