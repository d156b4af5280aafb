"""Reductions over a strided dimension into a contiguous output, like `x.sum(0)` of a (8192, 1024) tensor or
a bias gradient: the natural nest (output outer, reduction inner) reads one column at a time with a
4 KiB stride and cannot vectorize (31 ms against eager's 2.5 ms). This nest keeps a block of contiguous
outputs in per-block accumulators, walks the reduction dims outside and the block inside (a vector loop
over contiguous memory), and gives threads whole blocks, so each output is still summed in order. Outer
loops before the contiguous one (`x.sum(1)` of (16, 1024, 512), a middle axis) run around the blocks, and
threads take (outer index, block) pairs: 21.5 -> 1.4-2.9 ms, one thread, against Inductor's 2.7-4.2.
"""
from __future__ import annotations

import math

import sympy
import torch

from compiler.codegen import half
from compiler.codegen.cpp_ops import CTYPES, REDUCTION_COMBINE, REDUCTION_INIT, SIMD_REDUCTION_OPS
from compiler.codegen.index import cpp_index
from compiler.codegen.plan import ColumnPlan, KernelPlan, NodeBody, PlanContext, ReductionLoop
from compiler.codegen.printer import NodePrinter
from compiler.codegen.strategies import size_variants
from compiler.ir.nodes import ComputedBuffer, Load, substitute, walk
from compiler.ir.size_symbols import is_static

KINDS = ("sum", "prod", "max", "min")
BLOCK_BYTES = 1024  # accumulators per block: 256 floats, 128 doubles (L1-resident)
# Under outer loops, a whole row of outputs up to this many bytes is one block: (16, 1024, 512).sum(1) by blocks of
# 256 floats read each 2 KiB row in two pieces, 2.98 ms; by whole rows 1.38 (Inductor 2.91); rows of 4 KiB 2.83 ->
# 1.76, 8 KiB the same, 16 KiB no better (one thread, thread CPU time, medians of 15 interleaved).
ROW_BLOCK_BYTES = 8192


def _reductions(k, bodies: list[NodeBody], kinds: tuple[str, ...]) -> int:
    """How many leading nodes are reductions of `kinds` (not of bools) when the rest are pointwise epilogue
    nodes and no node has inner loops of its own; 0 when the kernel has another shape."""
    m = 0
    while m < len(k.nodes) and k.nodes[m].reduction_type:
        m += 1
    if any(b.inner[0] for b in bodies) or any(n.reduction_type for n in k.nodes[m:]):
        return 0
    if any(n.reduction_type not in kinds or n.dtype == torch.bool for n in k.nodes[:m]):
        return 0
    return m


def refusal(ctx: PlanContext, ovars: list[sympy.Symbol], bodies: list[NodeBody]) -> str | None:
    """Why kernel `ctx.kernel` is not a column reduction, None when it is: reduction nodes first (e.g. var's sum
    and sum of squares, or layer-norm backward's weight and bias gradients), pointwise epilogue nodes after them
    (mean's division), one (merged) outer var that every reduction reads contiguously, and reduction vars that
    no load along the outputs walks contiguously (a load the outputs share, one value per row, may). The outputs
    are the last outer loop's; outer loops before it (a reduction over a middle axis) run around its blocks."""
    k = ctx.kernel
    m = _reductions(k, bodies, KINDS)
    if m == 0:
        return "not reductions first and a pointwise epilogue without loops of its own"
    if not ovars:
        return "no outer loop"
    if any(ctx.locals.get(n.name) is not None and not ctx.locals[n.name].scalar for n in k.nodes):
        return "a kernel-local array"
    x = ovars[-1]
    for n, b in zip(k.nodes[:m], bodies[:m]):
        rvars = b.red[0]
        loads = [e for e in walk(b.body) if isinstance(e, Load)]
        if not rvars or not loads:
            return f"{n.name} has no reduction loop or reads nothing"
        for ld in loads:
            flat = sympy.expand(ctx.flat(ld))
            if x not in flat.free_symbols:
                continue  # one value for a whole row of outputs (layer norm backward's per-row mean and rstd)
            if flat.coeff(x) != 1 or any(abs(flat.coeff(r)) == 1 for r in rvars):
                return f"{n.name} reads {ld.buffer} contiguously along its reduction, or not along the outputs"
    if not all(sympy.expand(b.store).coeff(x) == 1 for b in bodies):
        return "outputs not contiguous along the outer loop"
    return None


def reductions(ctx: PlanContext, bodies: list[NodeBody]) -> int:
    """How many leading nodes of a column reduction are its reductions."""
    return _reductions(ctx.kernel, bodies, KINDS)


def plan_column(ctx: PlanContext, plan: KernelPlan) -> ColumnPlan:
    """The column reduction of kernel `ctx.kernel`: blocks of outputs along the last outer loop (threads take whole
    blocks, of each index of the loops before it), or, where one outer loop runs on threads over a static count of
    outputs, rows split among threads when `split_phases` allows."""
    nest, bodies, nodes = plan.nest, plan.bodies, ctx.kernel.nodes
    m, size, outer = _reductions(ctx.kernel, bodies, KINDS), nest.sizes[-1], list(nest.sizes[:-1])
    phases = None
    if nest.parallel and ctx.plans and is_static(size) and not outer:  # (symbolic: blocks of outputs)
        phases = split_phases(ctx, bodies, m, size)
    if phases:
        for phase in phases:  # one loop nest: a pass's nodes use its first one's reduction vars
            rvars = bodies[phase[0]].red[0]
            for i in phase[1:]:
                bodies[i].body = substitute(bodies[i].body, dict(zip(bodies[i].red[0], rvars)))
                bodies[i].red = bodies[phase[0]].red
        x = nest.vars[0].name
        held = {n.name: half.round_to(n.dtype, f"static_cast<{CTYPES[n.dtype]}>(acc{i}_parts[{x}])")
                for i, n in enumerate(nodes[:m]) if n.name in ctx.locals}
        anchors = {}
        for n, b in zip(nodes[:m], bodies[:m]):
            first = next((ld for ld in walk(b.body) if isinstance(ld, Load) and ld.buffer in ctx.params), None)
            anchors[n.name] = ctx.params[first.buffer].param if first else ""
        return ColumnPlan(m, 0, True, phases, SPLIT_CHUNK_ROWS, held, anchors,
                          {n.name: _partial_dtype(n) for n in nodes[:m]})
    itemsize = max(half.compute_itemsize(n.dtype) for n in nodes[:m])
    block = BLOCK_BYTES // itemsize
    block = max(1, min(size, block)) if is_static(size) else block
    if outer and is_static(size) and size * itemsize <= ROW_BLOCK_BYTES:
        block = size  # (a whole row: blocks of part of it read every row in pieces, twice the DRAM traffic)
    x = nest.vars[-1].name
    held = {n.name: half.round_to(n.dtype, f"static_cast<{CTYPES[n.dtype]}>(acc{i}_lanes[{x}_lane])")
            for i, n in enumerate(nodes[:m]) if n.name in ctx.locals}
    parallel = nest.parallel and (bool(outer) or not is_static(size) or size > block)
    return ColumnPlan(m, block, parallel, None, 0, held, outer=outer)


def render(r: NodePrinter, col: ColumnPlan, nodes: list[ComputedBuffer], bodies: list[NodeBody],
           ovars: list[sympy.Symbol], sizes: list, parallel_if: str, origins: list[str]) -> None:
    """Print the column reduction `col` plans (outputs along the last of the outer loops `ovars` < `sizes`;
    `parallel_if`: a symbolic count's run-time clause of threads); its local reductions are read by later nodes as
    `col.held` says."""
    m, x, size = col.reductions, ovars[-1], sizes[-1]
    if col.phases:
        _render_split(r, col, nodes, bodies, x, size, origins)
        return
    block = col.block
    if col.parallel:  # (threads take an outer index and a block of it)
        collapse = f" collapse({len(col.outer) + 1})" if col.outer else ""
        r.emit("#pragma omp parallel for" + collapse + parallel_if, list(origins))
    for v, s in zip(ovars[:-1], sizes[:-1]):
        r.emit(f"for (int64_t {v.name} = 0; {v.name} < {_text(s)}; {v.name}++)", list(origins))
    r.emit(f"for (int64_t {x.name}_base = 0; {x.name}_base < {size}; {x.name}_base += {block})", list(origins))
    r.open_block()
    width = f"lens_min<int64_t>({block}, {size} - {x.name}_base)"
    for i, (n, b) in enumerate(zip(nodes[:m], bodies[:m])):
        acc, t = f"acc{i}_lanes", CTYPES[n.dtype]
        r.statement(f"alignas(64) {t} {acc}[{block}];", n.origin)
        r.emit(f"for (int64_t lane = 0; lane < {block}; lane++) {acc}[lane] = "
               f"{REDUCTION_INIT[n.reduction_type].format(t=t)};", [n.origin])
        rvars, rsizes = b.red
        for v, sz in zip(rvars, rsizes):
            r.open_loop(v, sz, None, n.origins)
        r.emit("#pragma omp simd", [n.origin])
        _lane_loop(r, x, width, n.origins)
        r.combine(n, b, acc, f"{acc}[{x.name}_lane]")
        r.close()
        for _ in rvars:
            r.close()
        if n.name not in col.held:  # stored before the next reduction, which may read it (a held one: its lane)
            _lane_loop(r, x, width, n.origins)
            store = sympy.expand(b.store)
            r.statement(f"{r.store_target(n, store)} = {half.store(n.dtype, f'{acc}[{x.name}_lane]')};", n.origin)
            r.close()
    if m == len(nodes):
        r.close()
        return
    _lane_loop(r, x, width, list(origins))
    for node, nb in zip(nodes[m:], bodies[m:]):
        r.node_block(node, nb, parallel_inner=False)
    r.close()
    r.close()


def _text(size) -> str:
    """A size as an operand in C++: a number as it is, a symbolic one parenthesized."""
    return str(size) if is_static(size) else f"({cpp_index(sympy.expand(size))})"


def _lane_loop(r: NodePrinter, x: sympy.Symbol, width: str, origins: list[str]) -> None:
    r.emit(f"for (int64_t {x.name}_lane = 0; {x.name}_lane < {width}; {x.name}_lane++)", origins)
    r.open_block()
    r.emit(f"int64_t {x.name} = {x.name}_base + {x.name}_lane;", origins)


# -- few outputs, many rows: threads split the rows ---------------------------------------------------------
SPLIT_MAX_BYTES = 24 * 1024  # one thread's accumulators for one pass over the rows (L1-resident)
SPLIT_MIN_ROWS = 64
# Rows reduced into a fresh chunk partial before it joins the thread's partial (kept in double for float
# sums): rounding error grows with the chunk, not with the thread's share of the rows (x.sum(0) of
# (8192, 1024): 0.002 from the exact sum, eager's cascade sum 0.004; one float partial per thread 0.064).
SPLIT_CHUNK_ROWS = 64
PAGE = 4096


def split_phases(ctx: PlanContext, bodies: list[NodeBody], m: int, size: int) -> list[list[int]] | None:
    """When a thread's accumulators for every output fit in L1 and there are rows to share: the reduction
    nodes grouped into passes over the rows (a node joins the pass before it when it reduces the same
    ranges and reads none of that pass's results); None to keep whole output blocks per thread instead.
    (A symbolic count of rows: decided from its hint in a size variant, size_variants.holds.)"""
    k = ctx.kernel
    phases: list[list[int]] = []
    for i in range(m):
        reads = {ld.buffer for ld in walk(bodies[i].body) if isinstance(ld, Load)}
        last = phases[-1] if phases else None
        if (last and bodies[last[0]].red[1] == bodies[i].red[1]
                and not reads & {k.nodes[j].name for j in last}):
            last.append(i)
        else:
            phases.append([i])
    for phase in phases:
        rows = math.prod(bodies[phase[0]].red[1])
        nbytes = sum(_padded(size, k.nodes[i].dtype) + _padded(size, _partial_dtype(k.nodes[i])) for i in phase)
        if nbytes > SPLIT_MAX_BYTES or not size_variants.holds(ctx, sympy.Ge(rows, SPLIT_MIN_ROWS)):
            return None
    return phases


def _padded(size: int, dtype: torch.dtype) -> int:
    """Bytes of `size` values, rounded up to whole cache lines."""
    return -(-size * half.compute_itemsize(dtype) // 64) * 64


def _partial_dtype(n) -> torch.dtype:
    """What a thread's partial of node `n` is kept in."""
    floats = (torch.float32, *half.HALF_DTYPES)
    return torch.float64 if n.dtype in floats and n.reduction_type == "sum" else n.dtype


def _render_split(r: NodePrinter, col: ColumnPlan, nodes: list[ComputedBuffer], bodies: list[NodeBody],
                  x: sympy.Symbol, size: int, origins: list[str]) -> None:
    """Each thread reduces a contiguous share of the rows into its own accumulators for all outputs (a
    vector loop over contiguous memory, and every thread streams its own part of the input in order);
    the partials are then combined per output in thread order (the same bits on every run with the same
    thread count). A pass that reads an earlier pass's results starts after it is combined."""
    m, origins = col.reductions, list(origins)
    r.open_block()
    r.emit(f"const int lens_threads = lens_min<int>(omp_get_max_threads(), {MAX_PARTIALS});", origins)
    # per thread and node: its partial, and room for its chunk's partial placed against the input (_chunk)
    arrays = [(f"acc{i}_{kind}", dtype, extra) for i, n in enumerate(nodes[:m])
              for kind, dtype, extra in (("parts", col.partials[n.name], 0), ("chunks", n.dtype, PAGE))]
    offsets = [0]
    for _, dtype, extra in arrays:
        offsets.append(offsets[-1] + _padded(size, dtype) + extra)
    r.emit(f"char* lens_block = static_cast<char*>(__builtin_malloc({offsets[-1]} * lens_threads + 64));",
                  origins)
    r.emit("char* lens_parts = lens_block + (-reinterpret_cast<__UINTPTR_TYPE__>(lens_block) & 63);",
                  origins)
    for (name, dtype, extra), offset in zip(arrays, offsets):
        kind = "char" if extra else CTYPES[dtype]
        r.emit(f"{kind}* {name} = reinterpret_cast<{kind}*>(lens_parts + {offset} * lens_threads);", origins)
    r.emit("#pragma omp parallel num_threads(lens_threads)", origins)
    r.open_block()
    r.emit("const int64_t lens_team = omp_get_num_threads(), lens_tid = omp_get_thread_num();", origins)
    for phase in col.phases:
        _render_pass(r, col, nodes, bodies, x, size, phase)
    if m < len(nodes):
        r.emit("#pragma omp for", origins)
        r.open_loop(x, size, None, origins)
        for node, nb in zip(nodes[m:], bodies[m:]):
            r.node_block(node, nb, parallel_inner=False)
        r.close()
    r.close()
    r.emit("__builtin_free(lens_block);", origins)
    r.close()


def _chunk(r: NodePrinter, n, anchor_param: str, acc: str, t: str, stride: int, offset: int) -> None:
    """The thread's chunk partial, placed `offset` bytes past the input's address modulo 4 KiB (rounded to a
    line). Chunk partials on the threads' stacks, or packed side by side on the heap, ran 15-30% slower on
    one machine or the other (x.sum(0) of (8192, 1024): stores to the partial and loads of the row
    whose addresses agree in their low 12 bits wait on each other); placed this way they ran as fast as the
    best of those on both."""
    anchor = (f"(reinterpret_cast<__UINTPTR_TYPE__>({anchor_param}) & -64)"  # line-aligned
              if anchor_param else "0")
    room = f"{acc}_room"
    r.emit(f"char* {room} = {acc}_chunks + {stride} * lens_tid;", [n.origin])
    r.emit(f"{t}* __restrict__ {acc} = reinterpret_cast<{t}*>({room} + (({anchor} + {offset // 64 * 64} - "
                  f"reinterpret_cast<__UINTPTR_TYPE__>({room})) & {PAGE - 1}));", [n.origin])


def _render_pass(r: NodePrinter, col: ColumnPlan, all_nodes: list[ComputedBuffer], bodies: list[NodeBody],
                 x: sympy.Symbol, size: int, phase: list[int]) -> None:
    nodes = [all_nodes[i] for i in phase]
    origins = [o for n in nodes for o in n.origins]
    rvars, rsizes = bodies[phase[0]].red  # (planned: the pass's nodes use the first one's reduction vars)
    X = x.name
    r.open_block()
    for j, (i, n) in enumerate(zip(phase, nodes)):
        pd = col.partials[n.name]
        pt = CTYPES[pd]
        r.statement(f"{pt}* __restrict__ acc{i}_mine = acc{i}_parts + "
                           f"{_padded(size, pd) // half.compute_itemsize(pd)} * lens_tid;", n.origin)
        r.simd_line(X, size, f"acc{i}_mine[{X}] = {REDUCTION_INIT[n.reduction_type].format(t=pt)};",
                           [n.origin])
        _chunk(r, n, col.anchors[n.name], f"acc{i}", CTYPES[n.dtype], _padded(size, n.dtype) + PAGE,
               (2 * j + 1) * PAGE // (2 * len(phase)))
    rows = _text(math.prod(rsizes))
    r.emit(f"const int64_t lens_end = {rows} * (lens_tid + 1) / lens_team;", origins)
    r.emit(f"for (int64_t lens_first = {rows} * lens_tid / lens_team; lens_first < lens_end; "
                  f"lens_first += {col.chunk_rows})", origins)
    r.open_block()
    for i, n in zip(phase, nodes):
        init = REDUCTION_INIT[n.reduction_type].format(t=CTYPES[n.dtype])
        r.simd_line(X, size, f"acc{i}[{X}] = {init};", [n.origin])
    r.emit(f"for (int64_t lens_row = lens_first; lens_row < lens_min<int64_t>(lens_first + {col.chunk_rows}, "
                  f"lens_end); lens_row++)", origins)
    r.open_block()
    inner = 1
    for v, s in reversed(list(zip(rvars, rsizes))):  # the row number as the reduction vars
        row = "lens_row" if inner == 1 else f"(lens_row / {_text(inner)})"
        r.emit(f"const int64_t {v.name} = {row}" + (f" % {_text(s)};" if v != rvars[0] else ";"), origins)
        inner *= s
    r.open_loop(x, size, "#pragma omp simd", origins)
    for i, n in zip(phase, nodes):
        r.combine(n, bodies[i], f"acc{i}", f"acc{i}[{X}]")
    r.close()
    r.close()
    for i, n in zip(phase, nodes):  # the chunk's partial joins the thread's
        mine = f"acc{i}_mine[{X}]"
        r.simd_line(X, size, f"{mine} = {REDUCTION_COMBINE[n.reduction_type].format(acc=mine, v=f'acc{i}[{X}]')};",
                           [n.origin])
    r.close()
    r.close()
    r.emit("#pragma omp barrier", origins)
    r.emit("#pragma omp for", origins)
    r.open_loop(x, size, None, origins)
    for i, n in zip(phase, nodes):
        pd = col.partials[n.name]
        t, pt = CTYPES[n.dtype], CTYPES[pd]
        other = f"acc{i}_parts[{_padded(size, pd) // half.compute_itemsize(pd)} * lens_t + {X}]"
        r.statement(f"{pt} acc{i}_all = acc{i}_parts[{X}];", n.origin)
        r.emit(f"for (int64_t lens_t = 1; lens_t < lens_team; lens_t++) acc{i}_all = "
                      f"{REDUCTION_COMBINE[n.reduction_type].format(acc=f'acc{i}_all', v=other)};", [n.origin])
        r.emit(f"acc{i}_parts[{X}] = acc{i}_all;", [n.origin])
        if n.name not in col.held:  # (a held one: later passes and the epilogue read the combined value)
            value = half.store(n.dtype, f"static_cast<{t}>(acc{i}_all)")
            r.statement(f"{r.store_target(n, sympy.expand(bodies[i].store))} = {value};", n.origin)
    r.close()


# -- reductions to one value (x.sum(), mse_loss's mean) ----------------------------------------------------
PARALLEL_SUM_MIN_WORK = 1 << 15  # below this a single thread is faster than waking the team
MAX_PARTIALS = 256


def applies_to_total(ctx: PlanContext, ovars: list, bodies: list[NodeBody]) -> bool:
    """No outer loop, a sum/prod reduction node first (its own loops), pointwise epilogue nodes after."""
    if ovars or _reductions(ctx.kernel, bodies, ("sum", "prod")) != 1:
        return False
    b = bodies[0]
    work = 1
    for s in b.red[1]:
        work *= s
    return bool(b.red[0]) and size_variants.holds(ctx, sympy.Ge(work, PARALLEL_SUM_MIN_WORK))


def plan_total(n: ComputedBuffer, acc: str) -> ReductionLoop:
    """A total's reduction loop: per-thread partials, each an `omp simd reduction` over its share."""
    return ReductionLoop("thread_partials", acc, op=SIMD_REDUCTION_OPS[n.reduction_type])


def render_total(r: NodePrinter, nodes: list[ComputedBuffer], bodies: list[NodeBody], loop: ReductionLoop) -> None:
    """Each thread sums a contiguous share of the first reduction dim into its own partial; the partials
    are added in thread order (the same bits on every run with the same thread count); `loop` as planned."""
    n, b = nodes[0], bodies[0]
    t = CTYPES[n.dtype]
    init = REDUCTION_INIT[n.reduction_type].format(t=t)
    op, acc = loop.op, loop.acc
    part = f"{acc}_part"
    r.declare_accumulator(n, b)
    r.open_block()
    r.emit(f"const int lens_threads = lens_min<int>(omp_get_max_threads(), {MAX_PARTIALS});", [n.origin])
    r.emit(f"{t} lens_partials[{MAX_PARTIALS}];", [n.origin])
    r.emit(f"for (int i = 0; i < lens_threads; i++) lens_partials[i] = {init};", [n.origin])
    r.emit("#pragma omp parallel num_threads(lens_threads)", [n.origin])
    r.open_block()
    r.emit("const int64_t lens_team = omp_get_num_threads(), lens_tid = omp_get_thread_num();", [n.origin])
    r.statement(f"{t} {part} = {init};", n.origin)
    rvars, rsizes = b.red
    v, s = rvars[0], rsizes[0]
    last = len(rvars) == 1
    if last:
        r.emit(f"#pragma omp simd reduction({op}:{part})", [n.origin])
    s = _text(s)
    r.emit(f"for (int64_t {v.name} = {s} * lens_tid / lens_team; {v.name} < {s} * (lens_tid + 1) / lens_team; "
                  f"{v.name}++)", n.origins)
    r.open_block()
    for depth, (w, size) in enumerate(zip(rvars[1:], rsizes[1:])):
        pragma = f"#pragma omp simd reduction({op}:{part})" if depth == len(rvars) - 2 else None
        r.open_loop(w, size, pragma, n.origins)
    r.combine(n, b, part, part)
    for _ in rvars[1:]:
        r.close()
    r.close()
    r.emit(f"lens_partials[lens_tid] = {part};", [n.origin])
    r.close()
    r.emit("for (int i = 0; i < lens_threads; i++)", [n.origin])
    r.open_block()
    r.statement(f"{acc} = {REDUCTION_COMBINE[n.reduction_type].format(acc=acc, v='lens_partials[i]')};",
                       n.origin)
    r.close()
    r.store_reduction(n, sympy.expand(b.store), acc)
    r.close()
    for node, nb in zip(nodes[1:], bodies[1:]):
        r.node_block(node, nb, parallel_inner=False)
