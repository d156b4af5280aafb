"""Checks a KernelPlan after each planning pass (config.verify_plan, LENS_VERIFY_PLAN=1; on in the tests): a plan
that contradicts itself raises PlanError naming the pass that left it so, instead of printing wrong C++; and, as a
node is printed, that the loops planned for it are the ones its body calls for."""
from __future__ import annotations

import sympy

from compiler.codegen import loop_nest
from compiler.codegen.index import merge_loops
from compiler.codegen.plan import (
    REDUCTION_LOOPS,
    STRATEGIES,
    InnerLoops,
    KernelPlan,
    NodeBody,
    PlanContext,
    PlanError,
    ReductionLoop,
)
from compiler.ir.nodes import IndexValue, Load, walk


class PlanVerifier:
    """Verifies one kernel's plan pass after pass; bodies whose symbols were checked are not checked again."""

    def __init__(self, ctx: PlanContext):
        self.ctx = ctx
        self._checked: set[tuple[int, int]] = set()

    def check(self, plan: KernelPlan, pass_name: str) -> None:
        problem = next((p for p in self.problems(plan) if p), None)
        if problem:
            raise PlanError(plan.kernel, pass_name, problem)

    def problems(self, plan: KernelPlan):
        """Each inconsistency found (generated lazily: the first one is reported)."""
        ctx, nest = self.ctx, plan.nest
        nodes = {n.name: n for n in ctx.kernel.nodes}
        yield "" if len(nest.vars) == len(nest.sizes) else \
            f"{len(nest.vars)} outer loop variables for {len(nest.sizes)} sizes"
        yield "" if not plan.bodies or len(plan.bodies) == len(nodes) else \
            f"{len(plan.bodies)} node bodies for {len(nodes)} nodes"
        yield "" if plan.strategy in ("", *STRATEGIES) else f"unknown strategy {plan.strategy!r}"
        size = nest.sizes[-1] if nest.sizes else None
        yield "" if not nest.splits or (nest.flat and isinstance(size, int) and list(nest.splits) == sorted(
            set(nest.splits)) and 0 < nest.splits[0] and nest.splits[-1] < size) else \
            f"range splits {nest.splits} do not cut a flat nest's last loop of {size}"
        nest_only = [what for what, value in (("streamed stores", plan.streamed), ("a row prefetch", plan.row_prefetch.targets),
                                              ("a deferred pass", plan.deferred), ("sibling loops", plan.pairs))
                     if value]
        yield f"{nest_only[0]} in a {plan.strategy} strategy" if nest_only and plan.strategy != "nest" else ""
        yield "" if plan.column is None or plan.strategy == "column" else "a column plan outside a column strategy"
        for name in sorted(plan.streamed):
            if name not in nodes or name not in ctx.kernel.unread_outputs or name in ctx.locals:
                yield f"streamed node {name} is not an output of the kernel"
        yield from self._prefetch(plan, list(nodes))
        d = plan.deferred
        if d is not None:
            yield "" if plan.row_prefetch.into else f"deferred pass of {d.node.name} without a row prefetch by lines"
            yield "" if d.node.name in plan.streamed else f"deferred pass of {d.node.name}, which does not stream"
        for name in plan.pairs:
            yield "" if name in nodes else f"sibling loops of unknown node {name}"
        for name, loop in plan.reduction_loops.items():
            reduction = name in nodes and nodes[name].reduction_type
            yield "" if reduction else f"a reduction loop for {name}, not a reduction"
            yield from _reduction_loop(name, loop, plan)
        names = list(nodes)
        for name, pair in plan.pairs.items():
            after = names[names.index(name) + 1] if name in names[:-1] else None
            red = pair.reduction
            yield "" if red == after else f"sibling loop of {name} with {red}, not the node after it"
            yield "" if red not in plan.reduction_loops else f"{red} has a loop of its own and a sibling's"
        fb = plan.flat_blocks
        if fb is not None:
            yield "" if plan.nest.flat and plan.streamed else "line blocks in a kernel that is not flat and streamed"
            staged = sorted(set(fb.stage) - plan.streamed)
            yield "" if not staged else f"line blocks stage {staged}, not streamed"
        col = plan.column
        if col is not None:
            yield "" if 0 < col.reductions <= len(nodes) else f"a column reduction of {col.reductions} reductions"
            held = sorted(set(col.held) - set(ctx.locals))
            yield "" if not held else f"column values held for non-local {held}"
        outer = set(nest.vars) | set(ctx.sizes)
        for n, b in zip(ctx.kernel.nodes, plan.bodies):
            yield self._unknown_symbols(n.name, b, outer | set(b.inner[0]) | set(b.red[0]))

    def _prefetch(self, plan: KernelPlan, names: list[str]):
        pf = plan.row_prefetch
        if not pf.targets:
            yield "" if not pf.into and pf.after < 0 else "a row prefetch without targets"
            return
        yield "" if bool(pf.into) != (pf.after >= 0) else "a row prefetch both by lines and after a pass, or neither"
        yield "" if not pf.into or pf.into in names else f"row prefetch into unknown node {pf.into}"
        yield "" if pf.after < len(names) else f"row prefetch after node {pf.after} of {len(names)}"
        yield "" if plan.nest.vars and pf.row == plan.nest.vars[-1].name else \
            f"row prefetch over {pf.row}, not the last outer loop"

    def _unknown_symbols(self, name: str, b: NodeBody, known: set[sympy.Symbol]) -> str:
        key = (id(b.body), id(b.store))
        if key in self._checked:
            return ""
        found = set(sympy.sympify(b.store).free_symbols)
        for e in walk(b.body):
            if isinstance(e, Load):
                found |= self.ctx.flat(e).free_symbols
            elif isinstance(e, IndexValue):
                found |= sympy.sympify(e.expr).free_symbols
        unknown = sorted(s.name for s in found - known)
        if unknown:
            return f"body of {name} refers to unknown variables {', '.join(unknown)}"
        self._checked.add(key)
        return ""


def _reduction_loop(name: str, loop: ReductionLoop, plan: KernelPlan):
    """A reduction loop's plan agrees with itself: lanes where it keeps partials, an operator where OpenMP reduces."""
    yield "" if loop.how in REDUCTION_LOOPS else f"{name}: unknown reduction loop {loop.how!r}"
    partials = loop.how in ("lanes", "wide_sum", "blocked")
    yield "" if partials == (loop.lanes > 0) else f"{name}: {loop.lanes} lanes for a {loop.how} loop"
    reduces = loop.how in ("simd", "thread_partials")
    yield "" if reduces == bool(loop.op) else f"{name}: operator {loop.op!r} for a {loop.how} loop"
    blocked = loop.how == "blocked"
    yield "" if not blocked or plan.row_prefetch.into == name else f"{name} by lines without the row prefetch there"
    cut = not loop.cut_exps or (partials and loop.partials % 16 == 0)
    yield "" if cut else f"{name}: exps cut from {loop.partials} lanes"


def check_printed_loops(kernel: str, node: str, b: NodeBody, store: sympy.Expr, planned: InnerLoops,
                        parallel_inner: bool, flat) -> None:
    """A node's loops as planned (plan_passes.inner_loops) are the ones its body and the caller's threads call for
    when it is first printed: merged the same, and on threads only where the caller's loop is not."""
    ivars, isizes = b.inner
    merged_vars, merged_sizes, _ = merge_loops(ivars, isizes, loop_nest.index_exprs(flat, b.body) + [store])
    on_threads = any(p and "parallel" in p for p in planned.pragmas)
    if (merged_vars, merged_sizes) != (planned.vars, planned.sizes) or (on_threads and not parallel_inner):
        raise PlanError(kernel, "inner loops", f"{node}'s loops were planned as {planned.sizes} {planned.pragmas} "
                        f"but print as {merged_sizes} (threads allowed: {parallel_inner})")
