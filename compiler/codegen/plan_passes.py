"""Planning a kernel: one visible list of named passes (PASSES) that fill a KernelPlan in order, each writing its
decisions with their reasons; with `config.verify_plan` (LENS_VERIFY_PLAN=1) plan_verify.py checks the plan after
every pass. The printer (codegen/cpp.py) takes the plan as it comes out and decides nothing it records."""
from __future__ import annotations

from typing import Callable

import sympy
import torch

from compiler import config
from compiler import decisions as why
from compiler.codegen import half, loop_nest, plan_verify, range_splits
from compiler.codegen.index import merge_loops
from compiler.codegen.plan import InnerLoops, KernelPlan, PlanContext, sizes_text
from compiler.codegen.strategies import column_reduction, exp_lanes, joint_loops, lane_reduction, prefetch, streaming
from compiler.codegen.strategies import deferred_output as pipeline
from compiler.codegen.strategies import symbolic_sizes as symbolic
from compiler.codegen.strategies.inplace import kernel_params
from compiler.codegen.strategies.kernel_locals import plan_locals
from compiler.codegen.strategies.sibling_pairs import fused_body, plan_pair
from compiler.codegen.strategies.size_variants import Assumptions, checks
from compiler.ir.nodes import Layout, substitute
from compiler.ir.size_symbols import is_static
from compiler.scheduler import FusedKernel

Pass = Callable[[KernelPlan, PlanContext], None]


def node_bodies(plan: KernelPlan, ctx: PlanContext) -> None:
    """Each node's body over the kernel's outer variables and its own inner and reduction ones."""
    k = ctx.kernel
    plan.nest.vars = [sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(len(k.outer))]
    plan.nest.sizes = list(k.outer)
    plan.bodies = [loop_nest.node_mapping(ctx, n, i, plan.nest.vars) for i, n in enumerate(k.nodes)]


def merge_outer_loops(plan: KernelPlan, ctx: PlanContext) -> None:
    """Adjacent outer loops every index walks as one become one loop."""
    before = list(plan.nest.sizes)
    exprs = [e for b in plan.bodies for e in b.exprs]
    plan.nest.vars, plan.nest.sizes, subst = merge_loops(plan.nest.vars, plan.nest.sizes, exprs)
    for b in plan.bodies:
        b.body = substitute(b.body, subst)
        b.store = sympy.expand(b.store.xreplace(subst))
    if len(plan.nest.sizes) < len(before):
        plan.decide("merge loops", "", f"outer loops {sizes_text(before)} -> {sizes_text(plan.nest.sizes)}",
                    "every index steps through them as through one loop")


def threads(plan: KernelPlan, ctx: PlanContext) -> None:
    """Whether the outer loop runs on threads (static work against config.cpp.min_chunk_size, symbolic work
    at run time), and the nest's other loop-wide choices."""
    nest = plan.nest
    total = symbolic.largest([b.work for b in plan.bodies])
    for s in nest.sizes:
        total *= s
    nest.total = total
    nest.parallel = bool(symbolic.worth_threads(total) and nest.vars)
    nest.parallel_if = symbolic.parallel_if(total)
    nest.simdlen = f" simdlen({config.cpp.simdlen})" if config.cpp.simdlen else ""
    nest.flat = not any(b.inner[0] for b in plan.bodies)
    if not nest.vars:
        choice, reason = "one thread", "no outer loop"
    elif not is_static(total):
        choice, reason = "threads if the run-time work is enough", f"{total} >= {config.cpp.min_chunk_size} elements"
    elif nest.parallel:
        choice, reason = "threads", f"{total} elements of work >= config.cpp.min_chunk_size = {config.cpp.min_chunk_size}"
    else:
        choice, reason = "one thread", f"{total} elements of work < config.cpp.min_chunk_size = {config.cpp.min_chunk_size}"
    plan.decide("threads", "", choice, reason)


def choose_strategy(plan: KernelPlan, ctx: PlanContext) -> None:
    """A column reduction's blocks of outputs, a total's per-thread partials, or the loop nest."""
    nest, bodies = plan.nest, plan.bodies
    refused = column_reduction.refusal(ctx, list(nest.vars), bodies)  # (symbolic: blocks of outputs)
    if refused is None:
        plan.strategy = "column"
        plan.column = column_reduction.plan_column(ctx, plan)
        how = "threads split the rows" if plan.column.phases else "threads take blocks of outputs"
        plan.decide("strategy", "", "column reduction", f"reductions read the outputs contiguously; {how}")
        plan.decide("column blocks", "", plan.column.describe(), "as printed")
    elif ctx.plans and column_reduction.applies_to_total(ctx, list(nest.vars), bodies):
        plan.strategy = "total"
        plan.decide("strategy", "", "total reduction", "one sum/prod over enough elements: per-thread partials")
    else:
        plan.strategy = "nest"
        plan.decide("strategy", "", "loop nest", f"not a column reduction: {refused}")


def streamed_stores(plan: KernelPlan, ctx: PlanContext) -> None:
    if plan.strategy != "nest":
        return
    if not ctx.plans:  # (each plans from concrete or hinted sizes; a generic symbolic kernel runs plain loops)
        plan.decide("streaming", "", "not applied", "a generic body over symbolic sizes (size variants plan it)")
        return
    streaming.plan(plan, ctx)


def row_prefetch(plan: KernelPlan, ctx: PlanContext) -> None:
    if plan.strategy != "nest":
        return
    if ctx.plans or symbolic.static_loops(*plan.bodies):  # (rows of concrete length, any count of them)
        prefetch.plan(plan, ctx)
    else:
        plan.decide("row prefetch", "", "no", "rows of symbolic length in a generic body")


def deferred_output_pass(plan: KernelPlan, ctx: PlanContext) -> None:
    """Planned after the row prefetch: it runs inside the prefetching pass."""
    if plan.strategy == "nest" and ctx.plans:
        pipeline.plan(plan, ctx)


def sibling_pairs(plan: KernelPlan, ctx: PlanContext) -> None:
    """Which producers share their loop with the reduction after them (fused loops run on the outer loop's
    thread: only in a kernel whose outer loop runs on threads)."""
    if plan.strategy != "nest" or not plan.nest.parallel:
        return
    deferred = plan.deferred.node if plan.deferred else None
    nodes, bodies, i = [n for n in ctx.kernel.nodes if n is not deferred], plan.bodies, 0
    while i < len(nodes):
        fused = None
        if i + 1 < len(nodes) and symbolic.static_loops(bodies[i], bodies[i + 1]):
            fused = fused_body(ctx, plan.streamed, nodes[i], bodies[i], nodes[i + 1], bodies[i + 1])
        if fused is not None:
            pair = plan.pairs[nodes[i].name] = plan_pair(nodes[i], bodies[i], nodes[i + 1], fused,
                                                          plan.accumulators[nodes[i + 1].name], plan.row_prefetch)
            plan.decide("sibling loops", nodes[i].name, f"one loop with {nodes[i + 1].name}",
                        "the reduction reads back the element this iteration writes")
            plan.decide("sibling loop", nodes[i].name, pair.describe(), "as printed")
        i += 1 + (fused is not None)


def merge_reduction_loops(plan: KernelPlan, ctx: PlanContext) -> None:
    """A reduction's adjacent loops every index it reads walks as one become one loop: BatchNorm's per-channel sums
    over (N, H, W) run over N and H*W, a vector loop of 49 elements at 7x7 instead of 7. Not argmax/argmin (their
    result is a position in the loops)."""
    for n, b in zip(ctx.kernel.nodes, plan.bodies):
        rvars, rsizes = b.red
        if len(rvars) < 2 or n.reduction_type in ("argmax", "argmin"):
            continue
        merged_vars, merged_sizes, subst = merge_loops(rvars, rsizes, loop_nest.index_exprs(ctx.flat, b.body))
        if len(merged_vars) == len(rvars):
            continue
        b.body = substitute(b.body, subst)
        b.exprs = [sympy.expand(e.xreplace(subst)) for e in b.exprs]
        b.red = (merged_vars, merged_sizes)
        plan.decide("merge loops", n.name, f"reduction loops {sizes_text(rsizes)} -> {sizes_text(merged_sizes)}",
                    "every index steps through them as through one loop")


def accumulators(plan: KernelPlan, ctx: PlanContext) -> None:
    """Each reduction's accumulator: its kernel-local scalar, else `acc_<its parameter>` (stored after its loops)."""
    for n in ctx.kernel.nodes:
        if n.reduction_type:
            local = ctx.locals.get(n.name)
            plan.accumulators[n.name] = local.name if local is not None else f"acc_{ctx.params[n.name].param}"


def reduction_loops(plan: KernelPlan, ctx: PlanContext) -> None:
    """How each reduction of the nest that runs in its own loop is vectorized, or why not, and its loop's lanes,
    tail or `omp simd reduction` operator (lane_reduction.plan_loop)."""
    if plan.strategy == "total":
        n = ctx.kernel.nodes[0]
        loop = plan.reduction_loops[n.name] = column_reduction.plan_total(n, plan.accumulators[n.name])
        plan.decide("reduction loop", n.name, loop.describe(), "as printed")
    if plan.strategy != "nest":
        return
    paired = {p.reduction for p in plan.pairs.values()}
    for n, b in zip(ctx.kernel.nodes, plan.bodies):
        if not n.reduction_type or n.name in paired:
            continue
        loop, reason = lane_reduction.plan_loop(n, b.red, plan.accumulators[n.name], plan.row_prefetch)
        plan.reduction_loops[n.name] = loop
        plan.decide("vectorize", n.name, loop.how, reason)
        plan.decide("reduction loop", n.name, loop.describe(), "as printed")
        if loop.how == "scalar":  # (why.json: the reduction loop stays scalar)
            why.not_vectorized([n.origin], "no_simd_reduction", reduction=n.reduction_type, dtype=n.dtype)


def inner_loops(plan: KernelPlan, ctx: PlanContext) -> None:
    """Each node's own pointwise loops as the printer opens them (a producer fused into its reduction's loop has its
    loop planned by the sibling pass): adjacent ones every index walks as one merged, the first on threads where the
    nest's outer loop is not (the nest's nodes; a column reduction's and the deferred pass's run on the outer
    loop's thread), the last `omp simd`."""
    paired = set(plan.pairs) | {p.reduction for p in plan.pairs.values()}
    deferred = plan.deferred.node.name if plan.deferred else None
    for n, b in zip(ctx.kernel.nodes, plan.bodies):
        ivars, isizes = b.inner
        if not ivars or n.name in paired or (n.reduction_type and plan.strategy != "nest"):
            continue  # (a column reduction's and a total's reductions run in loops of their strategy's)
        exprs = loop_nest.index_exprs(ctx.flat, b.body) + [sympy.expand(b.store)]
        vars_, sizes, subst = merge_loops(ivars, isizes, exprs)
        if len(vars_) < len(ivars):
            plan.decide("merge loops", n.name, f"inner loops {sizes_text(isizes)} -> {sizes_text(sizes)}",
                        "every index steps through them as through one loop")
        on_threads = plan.strategy == "nest" and not plan.nest.parallel and n.name != deferred
        work = 1
        for s in sizes:
            work *= s
        pragmas: list[str | None] = []
        for depth in range(len(vars_)):
            last = depth == len(vars_) - 1
            if depth == 0 and on_threads and symbolic.worth_threads(work) and not n.reduction_type:
                pragmas.append("#pragma omp parallel for" + (" simd" if last else "") + symbolic.parallel_if(work))
                plan.decide("threads", n.name, "its own first loop on threads",
                            f"the outer loop runs on one thread and {work} elements of work are enough")
            else:
                pragmas.append("#pragma omp simd" if last else None)
        store = sympy.expand(sympy.expand(b.store).xreplace(subst))
        loops = plan.inner[n.name] = InnerLoops(vars_, sizes, subst, pragmas, substitute(b.body, subst), store)
        if n.name in plan.streamed and not n.reduction_type:  # (streaming kernels' outer loops run on threads)
            loops.streamed_row = streaming.row_layout(n, vars_[-1], sizes[-1], store)
            plan.decide("streamed rows", n.name, streaming.plan_row(ctx, loops, n, b), "where its innermost loop's "
                        "stores fall on line boundaries")


def mirrors(plan: KernelPlan, ctx: PlanContext) -> None:
    """A value a node stores once per outer iteration that a later node of the kernel reads is kept in a scalar, and
    the later node reads the scalar: a load through an output pointer inside a loop that stores through another stops
    g++ vectorizing it (it cannot tell them apart in an OpenMP region). Not beside a deferred output pass (its rows
    run a row late), for nodes with loops of their own, kernel-local or half-precision values, or a reduction run by
    lines of the prefetching pass."""
    if plan.deferred:
        return
    nodes = ctx.kernel.nodes
    for i, (n, b) in enumerate(zip(nodes, plan.bodies)):
        if b.inner[0] or n.name in ctx.locals or n.name not in ctx.params or half.is_half(n.dtype) or (
                n.reduction_type and n.name in plan.reduction_loops and plan.reduction_loops[n.name].how == "blocked"):
            continue
        if not any(ld.buffer == n.name for m in nodes[i + 1:] for ld in m.reads()):
            continue
        param = ctx.params[n.name].param  # (not kernel-local: a reduction's accumulator is acc_<param>)
        plan.mirrors[n.name] = plan.accumulators[n.name] if n.reduction_type else f"{param}_at"
        plan.decide("mirrors", n.name, f"later nodes read {plan.mirrors[n.name]}",
                    "stored once per outer iteration and read again in this kernel")


def outer_loops(plan: KernelPlan, ctx: PlanContext) -> None:
    """The nest's outer loops' pragmas (loop_nest.outer_pragmas): a streaming kernel's inside its parallel region
    (streaming.region), and a streamed flat kernel's vector loop by blocks of whole lines (streaming.flat_blocks)."""
    if plan.strategy != "nest":
        return
    nest = plan.nest
    pragmas = loop_nest.outer_pragmas(ctx.kernel, nest.sizes, nest.parallel, nest.simdlen, nest.flat, nest.parallel_if)
    if plan.streamed:
        nest.region, pragmas = streaming.region(pragmas)
    if nest.flat and any(n.name in plan.streamed for n in ctx.kernel.nodes):
        plan.flat_blocks = fb = streaming.flat_blocks(plan, ctx, pragmas[-1])
        plan.decide("streamed lines", "", f"the last outer loop by blocks of {fb.lanes} lanes up to {fb.main}"
                    + (", then a plain tail" if fb.tail else ""), "a flat kernel's streamed nodes each stage a line")
    nest.pragmas = pragmas
    printed = pragmas[:-1] + [plan.flat_blocks.pragma] if plan.flat_blocks else pragmas
    if nest.vars:
        plan.decide("outer loops", "", " | ".join(p or "plain" for p in printed) + (f" in {nest.region}" if nest.region
                    else ""), "OpenMP: threads on the first loop, simd on a flat kernel's last")


def exp_lane_cuts(plan: KernelPlan, ctx: PlanContext) -> None:
    """Which lane loops cut a float exp out (exp_lanes.py: an inline 16-lane exp instead of a call per vector): those
    of a multiple of 16 lanes whose bodies hold one, the lanes of a reduction, a sibling pair, a streamed row's lines
    or the deferred pass's lines (a streamed flat kernel's line block prints its nodes in blocks of their own)."""
    bodies = {n.name: b for n, b in zip(ctx.kernel.nodes, plan.bodies)}
    pieces = []
    for name, loop in plan.reduction_loops.items():
        if loop.how in ("lanes", "wide_sum", "blocked"):
            loop.cut_exps = exp_lanes.cuts(loop.partials, bodies[name].body)
            pieces.append((name, loop.cut_exps, loop.partials))
    for name, pair in plan.pairs.items():
        if pair.how != "simd":
            pair.cut_exps = exp_lanes.cuts(pair.lanes, bodies[name].body, pair.body.body)
            pieces.append((name, pair.cut_exps, pair.lanes))
    for name, inner in plan.inner.items():
        if inner.streamed_row:
            lanes = inner.row_lanes
            inner.cut_exps = exp_lanes.cuts(lanes, bodies[name].body)
            pieces.append((name, inner.cut_exps, lanes))
    if plan.deferred is not None:
        d = plan.deferred
        d.cut_exps = exp_lanes.cuts(streaming.line_lanes(d.node), d.body.body)
        pieces.append((d.node.name, d.cut_exps, streaming.line_lanes(d.node)))
    for name, cut, lanes in pieces:
        if cut:
            plan.decide("exp lanes", name, f"its exps by lens_exp_lanes<{lanes}>, cut out of its lane loop",
                        "an inline vector exp rather than a call of its vector variant in the loop")


def size_assumptions(plan: KernelPlan, ctx: PlanContext) -> None:
    """A size variant's decisions on symbolic sizes, the run-time check its plan relies on."""
    if ctx.assume is not None:
        plan.assumptions = checks(ctx.assume)


PASSES: list[tuple[str, Pass]] = [
    ("node bodies", node_bodies),
    ("merge loops", merge_outer_loops),
    ("merge reduction loops", merge_reduction_loops),
    ("threads", threads),
    ("choose strategy", choose_strategy),
    ("streaming", streamed_stores),
    ("row prefetch", row_prefetch),
    ("deferred output pass", deferred_output_pass),
    ("accumulators", accumulators),
    ("sibling loops", sibling_pairs),
    ("reduction loops", reduction_loops),
    ("inner loops", inner_loops),
    ("mirrors", mirrors),
    ("outer loops", outer_loops),
    ("range splits", range_splits.plan_splits),
    ("joint loops", joint_loops.plan_joint),
    ("exp lanes", exp_lane_cuts),
    ("size assumptions", size_assumptions),
]


def plan_context(kernel: FusedKernel, layouts: dict[str, tuple[torch.dtype, Layout]],
                 inplace: dict[str, str] | None = None, assume: Assumptions | None = None) -> PlanContext:
    """What planning reads of `kernel` (`inplace`: outputs written over inputs, inplace.py; `assume`: a size
    variant's assumptions, size_variants.py)."""
    inplace = inplace or {}
    locals_ = plan_locals(kernel, layouts)
    return PlanContext(kernel, layouts, locals_, kernel_params(kernel, layouts, locals_, inplace),
                       {n.name for n in kernel.nodes if n.name in inplace}, symbolic.kernel_symbols(kernel, layouts),
                       assume)


def build_plan(ctx: PlanContext, passes: list[tuple[str, Pass]] | None = None) -> KernelPlan:
    """Kernel `ctx.kernel`'s plan, by `passes` (PASSES) in order; checked after each with config.verify_plan."""
    plan = KernelPlan(ctx.kernel.name)
    verifier = plan_verify.PlanVerifier(ctx) if config.verify_plan else None
    for name, run in PASSES if passes is None else passes:
        run(plan, ctx)
        if verifier is not None:
            verifier.check(plan, name)
    return plan

