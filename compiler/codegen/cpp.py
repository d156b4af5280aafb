"""Renders a FusedKernel as one `extern "C"` C++ function, keeping for every line the FX node(s) it
comes from: it plans the kernel first (codegen/plan_passes.py: loops, threads, strategy, streaming, prefetch...)
and then prints the plan. Outer loops run under OpenMP when the work is big enough; innermost loops are `omp simd`."""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy
import torch

from compiler import config
from compiler.codegen import half, loop_nest, plan_passes, plan_record, plan_verify
from compiler.codegen.cpp_ops import CTYPES, REDUCTION_COMBINE, REDUCTION_INIT, simd_reduction_op
from compiler.codegen.expressions import ExpressionRenderer
from compiler.codegen.index import cpp_index
from compiler.codegen.plan import DeferredPass, KernelPlan, NodeBody, PlanError, RowPrefetch
from compiler.codegen.strategies import (
    column_reduction,
    exp_lanes,
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
from compiler.ir.nodes import Cast, ComputedBuffer, Layout, substitute
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


class KernelRenderer(ExpressionRenderer):
    def __init__(self, kernel: FusedKernel, layouts: dict[str, tuple[torch.dtype, Layout]],
                 readable_lines: dict[str, int], inplace: dict[str, str],
                 assume: size_variants.Assumptions | None = None):
        self.k, self.layouts, self.readable = kernel, layouts, readable_lines
        self.lines: list[tuple[str, list[str]]] = []
        self.indent = 0
        self.last_origin: str | None = None
        self.context = plan_passes.plan_context(kernel, layouts, inplace, assume)
        self.locals = self.context.locals
        self.outer_vars: list[sympy.Symbol] = []
        self.local_stores: dict[str, sympy.Expr] = {}  # scalar locals: the flat index they hold
        # buffers an earlier node stored once this outer iteration -> (that flat index, the scalar holding it):
        # a later node's load there reads the scalar (a load through an output pointer inside a loop that
        # stores through another stops g++ vectorizing it: it cannot tell them apart in an OpenMP region)
        self.mirrors: dict[str, tuple[sympy.Expr, str]] = {}
        self.stream_stage: dict[str, str] = {}  # node -> the staged line element its store goes to now
        self.inplace = self.context.inplace  # outputs over inputs (inplace.py)
        self.params = self.context.params
        self.lane_loops: list[exp_lanes.LaneLoop] = []  # the lane loops open now (codegen/strategies/exp_lanes.py)
        # a kernel over symbolic sizes (codegen/strategies/symbolic_sizes.py) takes them as arguments and runs plain
        # loops, but in its size variants (`assume`: decisions taken from the hints, checked at run time; size_variants.py)
        self.sizes = self.context.sizes
        self.assume = assume
        self.plan = KernelPlan(kernel.name)  # (built by render: codegen/plan_passes.py)
        self._printed_inner: set[str] = set()  # nodes whose planned inner loops were checked (config.verify_plan)
        self.init_expressions()

    # -- what the plan decided (codegen/plan.py) ---------------------------------
    @property
    def streamed(self) -> set[str]:
        """Nodes whose stores stream (codegen/strategies/streaming.py)."""
        return self.plan.streamed

    @property
    def row_prefetch(self) -> RowPrefetch:
        """Where row kernels ask for the next row (codegen/strategies/prefetch.py)."""
        return self.plan.row_prefetch

    @property
    def deferred(self) -> DeferredPass | None:
        """An output pass run a row late (codegen/strategies/deferred_output.py)."""
        return self.plan.deferred

    # -- lines ---------------------------------------------------------------------
    def emit(self, text: str, nodes: list[str] | None = None) -> None:
        self.lines.append(("    " * self.indent + text, list(nodes or [])))

    def statement(self, text: str, origin: str | None) -> None:
        if origin is not None and origin != self.last_origin and origin in self.readable:
            self.emit(f"// Corresponding FX code line: {self.readable[origin]}")
        self.last_origin = origin
        self.emit(text, [origin] if origin else [])

    # -- loops -------------------------------------------------------------------
    def open_loop(self, var: sympy.Symbol, size: int, pragma: str | None, nodes: list[str], start: int = 0,
                  step: int = 1) -> None:
        if pragma:
            self.emit(pragma)
        if isinstance(size, sympy.Basic):
            size = cpp_index(size)
        if isinstance(start, sympy.Basic):  # (a symbolic row's tail starts past its lanes)
            start = cpp_index(start)
        inc = f"{var.name}++" if step == 1 else f"{var.name} += {step}"
        self.emit(f"for (int64_t {var.name} = {start}; {var.name} < {size}; {inc})", nodes)
        self.emit("{")
        self.indent += 1

    def open_lanes(self, var: sympy.Symbol, lanes: int, nodes: list[str], count: int | None = None) -> None:
        """Inside `for (var_base ...; var_base += lanes)`: the `simd` loop over the block, defining `var`
        (`count`: the first lanes only, a row's tail)."""
        self.exp_values = {}
        self.open_lanes_named(var.name, lanes, nodes, count)

    def open_lanes_named(self, var: str, lanes: int, nodes: list[str], count: int | None = None) -> None:
        self.lane_loops.append(exp_lanes.LaneLoop(var, lanes, list(nodes), len(self.lines), self.indent, count))
        self.open_loop(sympy.Symbol(f"{var}_lane"), lanes if count is None else count, "#pragma omp simd", nodes)
        self.emit(f"int64_t {var} = {var}_base + {var}_lane;", nodes[:1])

    def simd_line(self, var: str, size: int, text: str, nodes: list[str]) -> None:
        """A one-line `simd` loop: `for (var = 0; var < size; var++) text`."""
        self.emit("#pragma omp simd", nodes)
        self.emit(f"for (int64_t {var} = 0; {var} < {size}; {var}++) {text}", nodes)

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

    def fold_tree(self, part: str, lanes: int, combine: str, nodes: list[str], also: str | None = None) -> int:
        """Halve `part[0:lanes]` pairwise while the count is even (lane i takes lane i + half), so that a row's
        partials meet in a tree of vector steps rather than a chain of `lanes` dependent scalar operations
        (a 256-wide softmax row, one thread, L2-resident: 279 -> 236 ns; the order of a tree is also the one
        ATen's vectorized reductions add their lanes in); `also`, an array folded by addition beside it.
        Returns how many lanes are left for the caller's scalar combine."""
        while lanes > 1 and lanes % 2 == 0:
            half = lanes // 2
            text = f"{part}[lane] = {combine.format(acc=f'{part}[lane]', v=f'{part}[lane + {half}]')};"
            if also:
                text = f"{{ {text} {also}[lane] += {also}[lane + {half}]; }}"
            self.simd_line("lane", half, text, nodes)
            lanes = half
        return lanes

    def close(self) -> None:
        self.indent -= 1
        self.emit("}")
        if self.lane_loops and self.lane_loops[-1].indent == self.indent:
            if not self.lane_loops.pop().cutting:  # the loop ends: its cut exps' arrays are out of scope
                self.exp_values = {}

    # -- the kernel --------------------------------------------------------------
    def render(self) -> RenderedKernel:
        """Plan the kernel (codegen/plan_passes.py), then print the plan."""
        self.plan = plan_passes.build_plan(self.context)
        plan_record.kernel_plan(self.plan, self.assume is not None)
        k, nest, bodies = self.k, self.plan.nest, self.plan.bodies
        signature = ", ".join([f"{'' if a.is_output else 'const '}{a.ctype}* __restrict__ {a.param}"
                               for a in unique(self.params)] + [f"int64_t {s.name}" for s in self.sizes])
        self.emit(f'extern "C" void {k.name}({signature})', k.origins)
        self.emit("{")
        self.indent += 1
        symbolic.declare_scratch(self, self.locals)
        if self.plan.strategy == "column":
            column_reduction.render(self, nest.sizes[0], nest.vars[0], bodies, nest.parallel)
        elif self.plan.strategy == "total":
            column_reduction.render_total(self, bodies)
        else:
            self._render_nest(nest.vars, nest.sizes, bodies, nest.parallel, nest.simdlen)
        self.indent -= 1
        self.emit("}")
        return RenderedKernel(k.name, k.kind, list(k.origins), unique(self.params), self.lines,
                              [s.name for s in self.sizes])

    def _render_nest(self, ovars, osizes, bodies: list[NodeBody], parallel: bool, simdlen: str) -> None:
        """The outer loops (shared by the kernel's nodes), then each node's own inner/reduction loops."""
        k, flat = self.k, self.plan.nest.flat
        pragmas = loop_nest.outer_pragmas(k, osizes, parallel, simdlen, flat, self.plan.nest.parallel_if)
        if self.streamed:
            pragmas = streaming.open_region(self, pragmas)
        if self.deferred:
            pipeline.declare(self)
        blocked = flat and bool(self.streamed)  # the last outer loop goes by whole lines
        nest = len(ovars) - blocked
        for v, s, pragma in zip(ovars[:nest], osizes[:nest], pragmas):
            self.open_loop(v, s, pragma, k.origins)
        self.outer_vars = list(ovars)
        if blocked:
            streaming.render_flat(self, ovars[-1], osizes[-1], pragmas[-1], bodies,
                                  lambda: self._render_bodies(bodies, parallel))
        else:
            self._render_bodies(bodies, parallel)
        for _ in range(nest):
            self.close()
        if self.deferred:
            pipeline.finish(self)
        if self.streamed:
            streaming.close_region(self)

    def _render_bodies(self, bodies: list[NodeBody], parallel: bool) -> None:
        """One outer iteration: the kernel's local arrays, then each node's block (and row prefetches)."""
        deferred = self.deferred.node if self.deferred else None
        for node in self.k.nodes:
            local = self.locals.get(node.name)
            if local is not None and self.deferred and node.name in self.deferred.arrays:
                pipeline.slot_pointers(self, node.name)
            elif local is not None and not local.scalar and not is_static(local.numel):
                symbolic.scratch_row(self, node, local)
            elif local is not None and not local.scalar:
                self.statement(f"alignas(64) {CTYPES[node.dtype]} {local.name}[{local.numel}];", node.origin)
        nodes, i, pf = [n for n in self.k.nodes if n is not deferred], 0, self.row_prefetch
        while i < len(nodes):
            fused = self.plan.pairs.get(nodes[i].name)  # (a producer and its reduction in one loop: planned)
            if fused is not None:
                sibling_loops.render_pair(self, nodes[i], bodies[i], nodes[i + 1], bodies[i + 1], fused)
            else:
                self._render_node_block(nodes[i], bodies[i], parallel_inner=not parallel)
            pair = fused is not None
            i += 1 + pair
            if i - 1 - pair <= pf.after < i:
                self.lines += [("    " * self.indent + line, []) for line in pf.burst()]
        if self.deferred:
            pipeline.end_row(self)

    def _mirrored(self, n: ComputedBuffer) -> str | None:
        """The scalar the plan keeps node `n`'s stored value in for later nodes (plan_passes.mirrors), unless its
        store goes to a staged line here (a streamed flat kernel's line block: later nodes read the line)."""
        return None if n.name in self.stream_stage else self.plan.mirrors.get(n.name)

    def _render_node_block(self, n: ComputedBuffer, b: NodeBody, parallel_inner: bool) -> None:
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
            if config.verify_plan and n.name not in self._printed_inner:  # (a later print sees the body merged)
                self._printed_inner.add(n.name)
                plan_verify.check_printed_loops(self.k.name, n.name, b, store, planned, parallel_inner, self.flat)
            ivars, isizes, pragmas = planned.vars, planned.sizes, planned.pragmas
            b.body = substitute(b.body, planned.subst)
            store = sympy.expand(store.xreplace(planned.subst))
        if n.reduction_type:
            self._render_reduction(n, b, store)
        else:
            row = planned.streamed_row if planned is not None else ""
            opened = 0
            for depth, (v, s) in enumerate(zip(ivars, isizes)):
                if depth == len(ivars) - 1 and row:
                    streaming.render_row(self, n, b, v, s, store, row)
                    break
                self.open_loop(v, s, pragmas[depth], n.origins)
                opened += 1
            else:
                if mirror is not None:
                    self.statement(f"{mirror} = {self.stored_body(n, b)};", n.origin)
                    self.statement(f"{self.store_target(n, store)} = {mirror};", n.origin)
                else:
                    self.store_body(n, b, store)
            for _ in range(opened):
                self.close()
        self.indent -= 1
        self.emit("}")
        if mirror is not None:
            self.mirrors[n.name] = (store, mirror)

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

    def store_body(self, n: ComputedBuffer, b: NodeBody, store: sympy.Expr) -> None:
        """`target = value;`: node `n`'s body at the current indices stored at flat index `store`."""
        target = self.store_target(n, store)
        self.statement(f"{target} = {self.stored_body(n, b)};", n.origin)

    def accumulator(self, n: ComputedBuffer) -> str:
        local = self.locals.get(n.name)
        return local.name if local is not None else f"acc_{self.params[n.name].param}"

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
        rvars, rsizes = b.red
        rtype = n.reduction_type
        acc = self.accumulator(n)
        lanes = 64 // half.compute_itemsize(n.dtype)
        how = self.plan.reduction_loops[n.name]  # (planned: plan_passes.reduction_loop)
        if how in ("lanes", "wide_sum"):
            lane_reduction.render(self, n, b, acc, lanes)
        elif how == "blocked":
            row_blocks.render_blocked_reduction(self, n, b, acc)
        else:
            op = simd_reduction_op(n.dtype, rtype)
            for depth, (v, s) in enumerate(zip(rvars, rsizes)):
                last = depth == len(rvars) - 1
                pragma = None
                if last and op:
                    pragma = f"#pragma omp simd reduction({op}:{acc})"
                self.open_loop(v, s, pragma, n.origins)
            self.combine(n, b, acc, acc)
            for _ in rvars:
                self.close()
        self.store_reduction(n, store, acc)

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
