"""Renders a FusedKernel as one `extern "C"` C++ function, keeping for every line the FX node(s) it
comes from: it plans the kernel first (codegen/plan_passes.py: loops, threads, strategy, streaming, prefetch...)
and then prints the plan. Outer loops run under OpenMP when the work is big enough; innermost loops are `omp simd`."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace

import sympy
import torch

from compiler import config
from compiler.codegen import half, plan_passes, plan_record, plan_verify, range_splits
from compiler.codegen.cpp_ops import CTYPES, REDUCTION_COMBINE, REDUCTION_INIT
from compiler.codegen.expressions import ExpressionRenderer
from compiler.codegen.index import cpp_index, simplify_indices
from compiler.codegen.plan import KernelPlan, NodeBody, PlanError
from compiler.codegen.printer import LinePrinter
from compiler.codegen.strategies import (
    column_reduction,
    half_lanes,
    lane_reduction,
    row_blocks,
    sibling_loops,
    size_variants,
    streaming,
)
from compiler.codegen.strategies import deferred_output as pipeline
from compiler.codegen.strategies import symbolic_sizes as symbolic
from compiler.codegen.strategies.inplace import KernelArg, unique
from compiler.codegen.strategies.kernel_locals import LocalBuffer
from compiler.ir.nodes import Cast, ComputedBuffer, Layout
from compiler.ir.size_symbols import is_static
from compiler.scheduler import FusedKernel


@dataclass
class RenderedKernel:
    name: str
    kind: str
    origins: list[str]
    args: list[KernelArg]
    lines: list[tuple[str, list[str]]]  # C++ text, FX nodes it comes from ([] for structure)
    sizes: list[str] = ()  # Dynamo's size symbols it takes after the pointers (`int64_t s0`), by name


class KernelRenderer(ExpressionRenderer, LinePrinter):
    """Plans one kernel (plan_passes.build_plan) and prints the plan; the strategies print their planned pieces
    through it as a printer.NodePrinter. Its own state is printing state: the lines, the locals' names and the
    indices they hold, the scalars mirroring stored values, the staged line elements of a line block."""

    def __init__(self, kernel: FusedKernel, layouts: dict[str, tuple[torch.dtype, Layout]],
                 readable_lines: dict[str, int], inplace: dict[str, str],
                 assume: size_variants.Assumptions | None = None):
        self.k, self.layouts = kernel, layouts
        self.init_lines(readable_lines)
        self.context = plan_passes.plan_context(kernel, layouts, inplace, assume)
        self.locals = dict(self.context.locals)  # (the column strategy holds some in its lanes: render)
        self.outer_vars: list[sympy.Symbol] = []
        self.local_stores: dict[str, sympy.Expr] = {}  # scalar locals: the flat index they hold
        # buffers an earlier node stored once this outer iteration -> (that flat index, the scalar holding it):
        # a later node's load there reads the scalar (a load through an output pointer inside a loop that
        # stores through another stops g++ vectorizing it: it cannot tell them apart in an OpenMP region)
        self.mirrors: dict[str, tuple[sympy.Expr, str]] = {}
        self.stream_stage: dict[str, str] = {}  # node -> the staged line element its store goes to now
        self.params = self.context.params
        # a kernel over symbolic sizes (codegen/strategies/symbolic_sizes.py) takes them as arguments and runs plain
        # loops, but in its size variants (`assume`: decisions taken from the hints, checked at run time; size_variants.py)
        self.sizes = self.context.sizes
        self.assume = assume
        self.plan = KernelPlan(kernel.name)  # (built by render: codegen/plan_passes.py)
        self.init_expressions()

    def declare_lanes(self, n: ComputedBuffer, acc: str, lanes: int) -> str:
        """Per-lane partials `{acc}_lanes` of reduction node `n`, set to its initial value (see fold_lanes)."""
        t = CTYPES[n.dtype]
        self.statement(f"alignas(64) {t} {acc}_lanes[{lanes}];", n.origin)
        self.simd_line("lane", lanes, f"{acc}_lanes[lane] = {REDUCTION_INIT[n.reduction_type].format(t=t)};",
                       [n.origin])
        return f"{acc}_lanes"

    def fold_lanes(self, n: ComputedBuffer, acc: str, lanes: int) -> None:
        """`acc` combined with the per-lane partials (halving them pairwise, see fold_tree)."""
        combine = REDUCTION_COMBINE[n.reduction_type]
        first = self.fold_tree(f"{acc}_lanes", lanes, combine, [n.origin])
        self.emit(f"for (int64_t lane = 0; lane < {first}; lane++) "
                  f"{acc} = {combine.format(acc=acc, v=f'{acc}_lanes[lane]')};", [n.origin])

    # -- the kernel --------------------------------------------------------------
    def render(self) -> RenderedKernel:
        """Plan the kernel (codegen/plan_passes.py), then print the plan."""
        self.plan = plan_passes.build_plan(self.context)
        plan_record.kernel_plan(self.plan, self.assume is not None)
        k, nest, bodies = self.k, self.plan.nest, self.plan.bodies
        signature = ", ".join([f"{'' if a.is_output else 'const '}{a.ctype}* __restrict__ {a.param}"
                               for a in unique(self.params)] + [f"int64_t {s.name}" for s in self.sizes])
        self.emit(f'extern "C" void {k.name}({signature})', k.origins)
        self.open_block()
        symbolic.declare_scratch(self, k.nodes, self.locals)
        if self.plan.strategy == "column":
            col = self.plan.column
            for n, b in zip(k.nodes, bodies):  # (its local reductions: later nodes read their lanes or partials)
                if n.name in col.held:
                    self.locals[n.name] = LocalBuffer(col.held[n.name], True, 1)
                    self.local_stores[n.name] = sympy.expand(b.store)
            column_reduction.render(self, col, k.nodes, bodies, nest.vars, nest.sizes, nest.parallel_if, k.origins)
        elif self.plan.strategy == "total":
            column_reduction.render_total(self, k.nodes, bodies, self.plan.reduction_loops[k.nodes[0].name])
        else:
            self._render_nest(bodies)
        self.indent -= 1
        self.emit("}")
        return RenderedKernel(k.name, k.kind, list(k.origins), unique(self.params), self.lines,
                              [s.name for s in self.sizes])

    def _render_nest(self, bodies: list[NodeBody]) -> None:
        """The outer loops (shared by the kernel's nodes), then each node's own inner/reduction loops, as planned."""
        k, nest, d = self.k, self.plan.nest, self.plan.deferred
        if nest.region:
            streaming.open_region(self, nest.region)
        if d:
            pipeline.declare(self, d)
        fb = self.plan.flat_blocks  # the last outer loop goes by whole lines
        opened = len(nest.vars) - (fb is not None) - bool(nest.splits)
        for v, s, pragma in zip(nest.vars[:opened], nest.sizes[:opened], nest.pragmas):
            self.open_loop(v, s, pragma, k.origins)
        self.outer_vars = list(nest.vars)
        if nest.splits:  # the last outer loop as one loop per range (range_splits.py)
            var = nest.vars[-1]
            self._loops_per_range(var, nest.sizes[-1], nest.splits, nest.pragmas[-1], k.origins,
                                  lambda lo, hi: self._render_bodies([_in_range(b, var, lo, hi) for b in bodies], {}))
        elif fb is not None:
            streamed = [(n, b) for n, b in zip(k.nodes, bodies) if n.name in self.plan.streamed]
            streaming.render_flat(self, fb, nest.vars[-1], nest.sizes[-1], streamed, self.plan.stream_out,
                                  k.origins, lambda stage: self._render_bodies(bodies, stage))
        else:
            self._render_bodies(bodies, {})
        for _ in range(opened):
            self.close()
        if d:
            pipeline.finish(self, d)
        if nest.region:
            streaming.close_region(self)

    def _render_bodies(self, bodies: list[NodeBody], stage: dict[str, str]) -> None:
        """One outer iteration: the kernel's local arrays, then each node's block (and row prefetches); `stage`: the
        staged line elements streamed nodes store to (streaming.render_flat)."""
        d, parallel = self.plan.deferred, self.plan.nest.parallel
        self.stream_stage = stage
        for node in self.k.nodes:
            local = self.locals.get(node.name)
            if local is not None and d and node.name in d.arrays:
                pipeline.slot_pointers(self, d, node.name)
            elif local is not None and not local.scalar and not is_static(local.numel):
                symbolic.scratch_row(self, node, local)
            elif local is not None and not local.scalar:
                self.statement(f"alignas(64) {CTYPES[node.dtype]} {local.name}[{local.numel}];", node.origin)
        nodes, i, pf = [n for n in self.k.nodes if d is None or n is not d.node], 0, self.plan.row_prefetch
        followers = {f for names in self.plan.joint.values() for f in names}  # (printed in their leader's loop)
        while i < len(nodes):
            pair = self.plan.pairs.get(nodes[i].name)  # (a producer and its reduction in one loop: planned)
            if pair is not None:
                sibling_loops.render_pair(self, nodes[i], bodies[i], nodes[i + 1], bodies[i + 1], pair, pf, d)
            elif nodes[i].name not in followers:
                self.node_block(nodes[i], bodies[i], parallel_inner=not parallel)
            fused = pair is not None
            i += 1 + fused
            if i - 1 - fused <= pf.after < i:
                self.lines += [("    " * self.indent + line, []) for line in pf.burst()]
        if d:
            pipeline.end_row(self, d)
        self.stream_stage = {}

    def _mirrored(self, n: ComputedBuffer) -> str | None:
        """The scalar the plan keeps node `n`'s stored value in for later nodes (plan_passes.mirrors), unless its
        store goes to a staged line here (a streamed flat kernel's line block: later nodes read the line)."""
        return None if n.name in self.stream_stage else self.plan.mirrors.get(n.name)

    def node_block(self, n: ComputedBuffer, b: NodeBody, parallel_inner: bool) -> None:
        ivars, isizes = b.inner
        local = self.locals.get(n.name)
        mirror = self._mirrored(n)
        if local is not None and local.scalar and not n.reduction_type:
            self.statement(f"{CTYPES[n.dtype]} {local.name};", n.origin)
        if mirror is not None and not n.reduction_type:
            self.statement(f"{CTYPES[n.dtype]} {mirror};", n.origin)
        if n.reduction_type:
            self.declare_accumulator(n, b)
        self.emit("{")
        self.indent += 1
        store = sympy.expand(b.store)
        planned = self.plan.inner.get(n.name)  # (plan_passes.inner_loops)
        pragmas: list[str | None] = []
        if planned is None and ivars and config.verify_plan:
            raise PlanError(self.k.name, "inner loops", f"{n.name}'s own loops {isizes} were not planned")
        if planned is not None:
            if config.verify_plan:
                plan_verify.check_printed_loops(self.k.name, n.name, b, store, planned, parallel_inner, self.flat)
            ivars, isizes, pragmas = planned.vars, planned.sizes, planned.pragmas
            b, store = replace(b, body=planned.body), planned.store  # (its body over the merged loops)
        if n.reduction_type:
            self._render_reduction(n, b, store)
        else:
            row = planned.streamed_row if planned is not None else ""
            splits = planned.splits if planned is not None else []
            opened = 0
            for depth, (v, s) in enumerate(zip(ivars, isizes)):
                if depth == len(ivars) - 1 and row:
                    streaming.render_row(self, n, self.plan.stream_out[n.name], b, v, s, store, planned)
                    break
                if depth == len(ivars) - 1 and splits:  # one loop per range (range_splits.py)
                    self._loops_per_range(v, s, splits, pragmas[depth], n.origins,
                                          lambda lo, hi: self._store_node(n, _in_range(b, v, lo, hi), store, mirror))
                    break
                self.open_loop(v, s, pragmas[depth], n.origins)
                opened += 1
            else:
                self._joint_followers(n, store, self._store_node(n, b, store, mirror))
            for _ in range(opened):
                self.close()
        self.indent -= 1
        self.emit("}")
        if mirror is not None:
            self.mirrors[n.name] = (store, mirror)

    def _joint_followers(self, n: ComputedBuffer, store: sympy.Expr, value: str) -> None:
        """The nodes planned into pointwise node `n`'s innermost loop (strategies/joint_loops.py), after its store of
        `value`: their loads of `n` at that element read `value` (`n` is not half precision: it is what was stored)."""
        names = self.plan.joint.get(n.name, [])
        if not names:
            return
        self.mirrors[n.name] = (store, value)
        by_name = {m.name: m for m in self.k.nodes}
        for name in names:
            planned = self.plan.inner[name]
            f = by_name[name]
            self._store_node(f, NodeBody(planned.body, planned.store, ([], []), ([], []), [], 1), planned.store, None)
        del self.mirrors[n.name]

    def _loops_per_range(self, var: sympy.Symbol, size: int, splits: list[int], pragma: str | None,
                         nodes: list[str], body) -> None:
        """`var`'s loop as one loop per range between the planned `splits`, `body(start, end)` printing each one's
        body."""
        bounds = [0, *splits, size]
        for start, end in zip(bounds, bounds[1:]):
            self.open_loop(var, end, pragma, nodes, start=start)
            body(start, end)
            self.close()

    def _store_node(self, n: ComputedBuffer, b: NodeBody, store: sympy.Expr, mirror: str | None) -> str:
        """A pointwise node's value computed and stored at the current indices (and kept in its mirror scalar); the
        operand naming the stored value."""
        if mirror is not None:
            self.statement(f"{mirror} = {self.stored_body(n, b)};", n.origin)
            self.statement(f"{self.store_target(n, store)} = {mirror};", n.origin)
            return mirror
        return self.store_body(n, b, store)

    @contextmanager
    def renamed_locals(self, names: dict[str, str], stores: dict[str, sympy.Expr]):
        """Print with kernel-local buffers `names` under other C++ names (a deferred pass's pending row), the
        scalars of `stores` held at those flat indices."""
        saved, saved_stores = self.locals, self.local_stores
        self.locals = {**saved, **{n: replace(saved[n], name=new) for n, new in names.items()}}
        self.local_stores = {**saved_stores, **stores}
        try:
            yield
        finally:
            self.locals, self.local_stores = saved, saved_stores

    def local_index(self, flat: sympy.Expr) -> sympy.Expr:
        """A local array holds one outer iteration: its index is the flat index without the outer part."""
        return sympy.expand(flat.xreplace({v: 0 for v in self.outer_vars}))

    def store_target(self, n: ComputedBuffer, store: sympy.Expr) -> str:
        if n.name in self.stream_stage:
            return self.stream_stage[n.name]
        local = self.locals.get(n.name)
        if local is None:
            return f"{self.params[n.name].param}[{cpp_index(store)}]"
        if local.scalar:
            self.local_stores[n.name] = store
            return local.name
        return f"{local.name}[{cpp_index(self.local_index(store))}]"

    def stored_value(self, n: ComputedBuffer, value: str) -> str:
        """What a store of node `n` writes: a half dtype's bits to memory (a buffer, a streamed line), a float
        rounded to the half dtype to a kernel-local buffer (codegen/half.py); other dtypes' values as they are."""
        if n.name in self.locals and n.name not in self.stream_stage:
            return half.round_to(n.dtype, value)
        return half.store(n.dtype, value)

    def stored_body(self, n: ComputedBuffer, b: NodeBody) -> str:
        """The stored value of node `n`'s body at the current indices; a body ending in a cast to `n`'s half
        dtype (a graph's `_to_copy`, an autocast) is rounded once by the store, not once more before it."""
        body = b.body
        if isinstance(body, Cast) and half.is_half(n.dtype) and body.arg.dtype.is_floating_point:
            b = replace(b, body=body.arg)
        return self.stored_value(n, self.body_value(b))

    def store_body(self, n: ComputedBuffer, b: NodeBody, store: sympy.Expr) -> str:
        """`target = value;`: node `n`'s body at the current indices stored at flat index `store`; `value`."""
        target, value = self.store_target(n, store), self.stored_body(n, b)
        self.statement(f"{target} = {value};", n.origin)
        return value

    def accumulator(self, n: ComputedBuffer) -> str:
        return self.plan.accumulators[n.name]  # (planned: plan_passes.accumulators)

    def declare_accumulator(self, n: ComputedBuffer, b: NodeBody) -> None:
        """Declared before the node's block: a local reduction's accumulator is what later nodes read."""
        acc, rtype = self.accumulator(n), n.reduction_type
        if rtype in ("argmax", "argmin"):
            vt = CTYPES[b.body.dtype]
            init = "lens_lowest" if rtype == "argmax" else "lens_highest"
            self.statement(f"{vt} {acc}_val = {init}<{vt}>(); int64_t {acc} = 0;", n.origin)
        else:
            self.statement(f"{CTYPES[n.dtype]} {acc} = {REDUCTION_INIT[rtype].format(t=CTYPES[n.dtype])};",
                           n.origin)

    def _render_reduction(self, n: ComputedBuffer, b: NodeBody, store: sympy.Expr) -> None:
        loop = self.plan.reduction_loops[n.name]  # (planned: lane_reduction.plan_loop)
        if loop.how in ("lanes", "wide_sum"):
            lane_reduction.render(self, n, b, loop)
        elif loop.how == "blocked":
            row_blocks.render_blocked_reduction(self, n, b, loop, self.plan.row_prefetch, self.plan.deferred)
        else:
            rvars, rsizes = b.red
            for depth, (v, s) in enumerate(zip(rvars, rsizes)):
                pragma = f"#pragma omp simd reduction({loop.op}:{loop.acc})" if depth == len(rvars) - 1 and loop.op \
                    else None
                self.open_loop(v, s, pragma, n.origins)
            self.combine(n, b, loop.acc, loop.acc)
            for _ in rvars:
                self.close()
        self.store_reduction(n, store, loop.acc)

    def store_reduction(self, n: ComputedBuffer, store: sympy.Expr, acc: str) -> None:
        """After the reduction loops: the result goes to its buffer, or stays in its local accumulator."""
        if n.name not in self.locals:
            self.statement(f"{self.params[n.name].param}[{cpp_index(store)}] = {half.store(n.dtype, acc)};", n.origin)
        else:
            if half.is_half(n.dtype):  # (a float accumulator: what later nodes read is the rounded result)
                self.statement(f"{acc} = {half.round_to(n.dtype, acc)};", n.origin)
            self.local_stores[n.name] = store

    def combine(self, n: ComputedBuffer, b: NodeBody, acc: str, into: str) -> None:
        """One reduction step: the body's value at the current indices folded into `into`."""
        val = self.body_value(b)
        rtype = n.reduction_type
        if rtype in ("argmax", "argmin"):
            rvars, rsizes = b.red
            flat = sympy.Integer(0)
            for v, s in zip(rvars, rsizes):
                flat = flat * s + v
            value_dtype = b.body.dtype
            best = f"{acc}_val"
            better = f"{val} > {best}" if rtype == "argmax" else f"{val} < {best}"
            nan = f" || ({val} != {val})" if value_dtype.is_floating_point else ""
            guard = f"!({best} != {best}) && ({better}{nan})" if value_dtype.is_floating_point else better
            self.statement(f"if ({guard}) {{ {best} = {val}; {acc} = {cpp_index(flat)}; }}", n.origin)
        else:
            self.statement(f"{into} = {REDUCTION_COMBINE[rtype].format(acc=into, v=val)};", n.origin)



def render_kernel(kernel: FusedKernel, layouts: dict[str, tuple[torch.dtype, Layout]],
                  readable_lines: dict[str, int], inplace: dict[str, str] | None = None) -> RenderedKernel:
    generic = KernelRenderer(kernel, layouts, readable_lines, inplace or {}).render()
    if generic.sizes:
        generic = size_variants.render(kernel, layouts, generic, lambda k, lay, assume: KernelRenderer(
            k, lay, readable_lines, inplace or {}, assume).render())
    return replace(generic, lines=half_lanes.apply(generic.lines))


def _in_range(b: NodeBody, var: sympy.Symbol, start: int, end: int) -> NodeBody:
    """`b` in the loop over `var` in [start, end), one range of a split loop: its clamps and comparisons the range
    decides folded (a concatenation's `min(x, 63)` is `x` in the first part's range: an affine load that vectorizes)."""
    return replace(b, body=range_splits.decided(simplify_indices(b.body, {var: (start, end)}), var, start, end))
