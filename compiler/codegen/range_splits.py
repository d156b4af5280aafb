"""Plan pass "range splits" (plan_passes.PASSES): a pointwise loop whose variable is compared with constants runs as
one loop per range between them, planned here (`LoopNest.splits`, `InnerLoops.splits`) and printed by cpp.py."""
from __future__ import annotations

import dataclasses

import sympy
import torch

from compiler import config
from compiler.codegen.plan import KernelPlan, PlanContext
from compiler.ir.nodes import Cast, Constant, Expr, IndexValue, Op, walk

_COMPARISONS = {"lt": 0, "ge": 0, "le": 1, "gt": 1}  # `x < c` and `x >= c` change at c; `x <= c`, `x > c` at c + 1
MAX_SPLITS = 8


def _boundaries(body, var: sympy.Symbol, size: int) -> set[int]:
    """Where a comparison of the loop variable with a constant changes its answer inside (0, size)."""
    found = set()
    for e in walk(body):
        at = _comparison(e, var)
        if at is not None and 0 < at < size:
            found.add(at)
    return found


def _comparison(e, var: sympy.Symbol) -> int | None:
    """Where `e`, a comparison of `var` with an integer constant, changes its answer (`x < c` and `x >= c` at c), or
    None when `e` is no such comparison."""
    if not (isinstance(e, Op) and e.name in _COMPARISONS and len(e.args) == 2):
        return None
    a, b = e.args
    if isinstance(a, IndexValue) and isinstance(b, Constant) and a.expr == var and isinstance(b.value, int) \
            and not isinstance(b.value, bool):
        return b.value + _COMPARISONS[e.name]
    return None


def decided(body: Expr, var: sympy.Symbol, start: int, end: int) -> Expr:
    """`body` in one range [start, end) of `var`'s split loop, the comparisons of `var` the range decides replaced by
    their answer: a pad's `x >= 0 && x < 112` is `true` in [0, 112), so its select's condition no longer steps with
    the loop (expressions.py prints it as bits, which g++ vectorizes; a `?:` on a mask mixing a row test with the
    column's comparisons it kept scalar, "control flow in loop")."""
    memo: dict[int, Expr] = {}
    for node in walk(body):
        if isinstance(node, Op):
            new: Expr = dataclasses.replace(node, args=tuple(memo[id(a)] for a in node.args))
            at = _comparison(node, var)
            if at is not None and (start >= at or end <= at):  # the same answer over the whole range
                upper = start >= at  # (every x in the range is at or past the change)
                answer = upper if node.name in ("ge", "gt") else not upper
                new = Constant(torch.bool, node.origin, answer)
        elif isinstance(node, Cast):
            new = dataclasses.replace(node, arg=memo[id(node.arg)])
        else:
            new = node
        memo[id(node)] = new
    return memo[id(body)]


def _cuts(body, var: sympy.Symbol, size, pragma: str | None) -> list[int]:
    """Where a simd loop (not one on threads) over `var` < `size` is cut: its comparisons' boundaries, few enough."""
    if not isinstance(size, int) or "parallel" in (pragma or "") or "simd" not in (pragma or ""):
        return []
    cuts = _boundaries(body, var, size)
    return sorted(cuts) if len(cuts) <= MAX_SPLITS else []


def _ranges_text(var, size, cuts: list[int]) -> str:
    return f"({var} < {size}) as loops over " + ", ".join(
        f"[{a}, {b})" for a, b in zip([0, *cuts], [*cuts, size]))


def plan_splits(plan: KernelPlan, ctx: PlanContext) -> None:
    """A pointwise loop whose variable is compared with constants (a concatenation along the innermost dimension
    selects its input by `x < 96`, a pad by `x >= 1`) runs as one loop per range between them: in each, g++ knows the
    comparisons' answers and the clamped indices' values, and vectorizes plain loads instead of gathering every input
    per element (a 12544 x 192 concatenation + scale + ReLU: 3.1 -> 0.5 ms, one thread). The last loop of a flat
    kernel's nest, or a node's own last loop; not loops on threads, reductions or strategies' own loops."""
    if not config.cpp.range_splits or plan.strategy != "nest":
        return
    nest = plan.nest
    if (nest.flat and nest.vars and len(nest.vars) == len(nest.sizes) == len(nest.pragmas) and not plan.flat_blocks
            and not plan.deferred and not nest.region and not plan.streamed and not plan.pairs
            and not ctx.kernel.has_reduction and plan.bodies):
        var, size = nest.vars[-1], nest.sizes[-1]
        cuts = sorted(set().union(*(_cuts(b.body, var, size, nest.pragmas[-1]) for b in plan.bodies)))
        if len(cuts) <= MAX_SPLITS and cuts:
            nest.splits = cuts
            plan.decide("range splits", "", "the last outer loop " + _ranges_text(var, size, cuts),
                        "its variable is compared with constants: each loop's comparisons are known")
    for name, loops in plan.inner.items():
        if loops.streamed_row or not loops.vars or len(loops.pragmas) != len(loops.vars):
            continue
        node = next(n for n in ctx.kernel.nodes if n.name == name)
        if node.reduction_type:
            continue
        cuts = _cuts(loops.body, loops.vars[-1], loops.sizes[-1], loops.pragmas[-1])
        if cuts:
            loops.splits = cuts
            plan.decide("range splits", name, "its last loop " + _ranges_text(loops.vars[-1], loops.sizes[-1], cuts),
                        "its variable is compared with constants: each loop's comparisons are known")
