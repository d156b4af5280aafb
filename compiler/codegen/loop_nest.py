"""How a FusedKernel's nodes sit in loops: each node's index variables mapped onto the kernel's shared
outer loops and its own inner/reduction loops, and the OpenMP pragmas of the outer loops."""
from __future__ import annotations

import sympy

from compiler.codegen.index import simplify_indices
from compiler.codegen.plan import NodeBody, PlanContext
from compiler.ir.nodes import ComputedBuffer, IndexValue, Load, loop_dims, substitute, walk
from compiler.scheduler import FusedKernel


def outer_pragmas(k: FusedKernel, sizes: list[int], parallel: bool, simdlen: str, flat: bool,
                  condition: str = "") -> list[str | None]:
    """OpenMP pragmas for the outer loops: threads on the first (collapsing small leading loops),
    `simd` on the innermost when the kernel has no reduction loop inside; `condition`, a clause added to the
    parallel one (codegen/strategies/symbolic_sizes.py's run-time choice)."""
    n = len(sizes)
    pragmas: list[str | None] = [None] * n
    simd_last = flat and not k.has_reduction  # the last outer loop is the innermost loop
    if n and simd_last:
        pragmas[-1] = f"#pragma omp simd{simdlen}"
    if parallel and n:
        nest = n - 1 if simd_last else n  # loops the threads may share
        if simd_last and n == 1:
            pragmas[0] = f"#pragma omp parallel for simd{simdlen}{condition}"
        elif nest >= 1:
            collapse = nest if nest > 1 and isinstance(sizes[0], int) and sizes[0] < 64 else 1
            pragmas[0] = "#pragma omp parallel for" + (f" collapse({collapse})" if collapse > 1 else "") + condition
    return pragmas


def index_exprs(flat, body) -> list[sympy.Expr]:
    """Every index `body` computes: its loads' flat indices (`flat`: a plan context's or renderer's) and its index
    values (what decides whether loops can be merged)."""
    return ([flat(e) for e in walk(body) if isinstance(e, Load)]
            + [e.expr for e in walk(body) if isinstance(e, IndexValue)])


def node_mapping(ctx: PlanContext, n: ComputedBuffer, i: int, outer_vars: list[sympy.Symbol]) -> NodeBody:
    """Map node `n`'s (the i-th of kernel `ctx.kernel`) index vars onto the kernel's outer vars and its
    own inner/reduction vars: its body and store index in those, its loops, and its work per outer step."""
    dims = loop_dims(n)
    mapping: dict[sympy.Symbol, sympy.Expr] = {v: sympy.Integer(0) for v in n.vars}
    inner_vars, inner_sizes = [], []
    for j, d in enumerate(dims):
        if j < len(outer_vars):
            mapping[n.vars[d]] = outer_vars[j]
        else:
            v = sympy.Symbol(f"x{i}_{j}", integer=True, nonnegative=True)
            mapping[n.vars[d]] = v
            inner_vars.append(v)
            inner_sizes.append(n.layout.size[d])
    red_vars = [sympy.Symbol(f"r{i}_{j}", integer=True, nonnegative=True) for j in range(len(n.reduction_vars))]
    mapping.update(dict(zip(n.reduction_vars, red_vars)))
    ranges = dict(zip(outer_vars, ctx.kernel.outer))
    ranges.update(zip(inner_vars, inner_sizes))
    ranges.update(zip(red_vars, n.reduction_ranges))
    body = simplify_indices(substitute(n.body, mapping), ranges)
    out_index = tuple(mapping[v] for v in n.vars)
    store = n.layout.flat_index(out_index)
    exprs = index_exprs(ctx.flat, body) + [store]
    work = 1
    for s in list(inner_sizes) + list(n.reduction_ranges):
        work *= s
    return NodeBody(body, store, (inner_vars, inner_sizes), (red_vars, list(n.reduction_ranges)), exprs, work)
