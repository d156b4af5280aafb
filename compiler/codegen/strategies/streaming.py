"""Streaming (non-temporal) stores for large graph outputs.

A plain store of a line that is not in cache first reads the line from DRAM (read for ownership), so a
kernel that writes N bytes of fresh output moves 2N; a streaming store writes whole 64-byte lines without
reading them, and leaves the caches to the data that will be read again. Measured on the device's Xeon
(2 threads, one process, medians of 60): a 32 MiB float copy 2.38 -> 1.14 ms, softmax (8192,1024)
4.85 -> 3.56 ms; on the AMD Zen 4 box 1.90 -> 1.52 and 3.32 -> 2.83 ms.

Which stores: outputs of the graph that no step reads (`FusedKernel.unread_outputs`: nothing later in the
kernel or the graph wants them back from cache), of at least `config.cpp.streaming_store_min_bytes`,
written by a kernel whose outer loop runs on threads, contiguously along the innermost loop, with every
other index term a multiple of a line. The loop then runs over blocks of one line: a `simd` loop fills an
aligned line on the stack (g++ keeps it in a register) and `lens_stream_line` writes it out; elements
past the last whole line are stored plainly. A line whose address is not 64-byte aligned (an output at an
odd offset) is stored plainly too, so alignment is never assumed. Streaming stores are weakly ordered:
each thread fences (`sfence`) before the parallel region's closing barrier. Where a narrower type than the
output's is loaded or computed in the loop (an int8 input dequantized to float), a block is as many lines as fill
one 64-byte vector of that type (`block_lanes`): g++ sizes a loop's vectors by its narrowest type, so 16 int8 lanes
ran the float side in 128-bit registers (dequantize + gelu (4096, 1024), one thread: 8.9 -> 2.9 ms).
"""
from __future__ import annotations

import re
from typing import Callable

import sympy
import torch

from compiler import config
from compiler.codegen.index import cpp_index
from compiler.codegen.plan import FlatBlocks, InnerLoops, KernelPlan, NodeBody, OutputParam, PlanContext
from compiler.codegen.printer import NodePrinter
from compiler.codegen.strategies import size_variants
from compiler.ir.index_functions import FloorDiv
from compiler.ir.nodes import ComputedBuffer, Load, walk
from compiler.ir.size_symbols import is_static

LINE_BYTES = 64

PRELUDE = r"""// whole-line streaming stores and the fence after them (compiler/codegen/strategies/streaming.py)
typedef long long lens_v8di __attribute__((vector_size(64), __may_alias__));
typedef long long lens_v4di __attribute__((vector_size(32), __may_alias__));
typedef long long lens_v2di __attribute__((vector_size(16), __may_alias__));
inline __attribute__((always_inline)) void lens_stream_line(void* dst, const void* line) {
#if defined(__AVX512F__)
  if ((reinterpret_cast<uintptr_t>(dst) & 63) == 0) {
    __builtin_ia32_movntdq512(static_cast<lens_v8di*>(dst), *static_cast<const lens_v8di*>(line));
    return;
  }
#elif defined(__AVX__)
  if ((reinterpret_cast<uintptr_t>(dst) & 31) == 0) {
    for (int i = 0; i < 2; i++)
      __builtin_ia32_movntdq256(static_cast<lens_v4di*>(dst) + i, static_cast<const lens_v4di*>(line)[i]);
    return;
  }
#elif defined(__SSE2__)
  if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    for (int i = 0; i < 4; i++)
      __builtin_ia32_movntdq(static_cast<lens_v2di*>(dst) + i, static_cast<const lens_v2di*>(line)[i]);
    return;
  }
#endif
  __builtin_memcpy(dst, line, 64);
}
template <typename T> inline int64_t lens_line_head(const T* p, int64_t size) {
  // elements of p[0:size] before the first 64-byte boundary (all of them when there is none)
  const int64_t head = ((64 - (reinterpret_cast<uintptr_t>(p) & 63)) & 63) / sizeof(T);
  return head < size ? head : size;
}
inline void lens_sfence() {
#if defined(__SSE__)
  __builtin_ia32_sfence();
#endif
}
"""


def line_lanes(n: ComputedBuffer) -> int:
    return LINE_BYTES // n.dtype.itemsize


def block_lanes(ctx: PlanContext, nodes: list[ComputedBuffer], bodies: list[NodeBody], lanes: int, size) -> int:
    """Lanes of a block of lines that a lane loop printing `nodes` (`bodies`) fills: `lanes` (a line's), or as many as
    fill a 64-byte vector of the narrowest integer type they load or compute when there are `size` elements for them.
    (Not for bool masks, nor half-precision loads: measured the same or slower by blocks, a masked_fill 1.0 -> 1.1x
    Inductor.)"""
    dtypes = [n.dtype for n in nodes] + [ctx.layouts[e.buffer][0] for b in bodies for e in walk(b.body)
                                         if isinstance(e, Load)]
    narrow = [d.itemsize for d in dtypes if not d.is_floating_point and not d.is_complex and d != torch.bool]
    wide = LINE_BYTES // min(narrow) if narrow else lanes
    return wide if wide > lanes and size_variants.holds(ctx, sympy.Ge(size, wide)) else lanes


def line_aligned(store: sympy.Expr, var: sympy.Symbol, lanes: int | None) -> bool:
    """Whether `store` steps by one element along `var` and every other term (loop variables times
    integers, a constant) is a multiple of `lanes` elements: blocks of `lanes` along `var` are lines
    (`lanes` None: any integers, a row starting anywhere in a line)."""
    for term, coeff in sympy.expand(store).as_coefficients_dict().items():
        if not coeff.is_Integer:
            return False
        if term == var:
            if coeff != 1:
                return False
        elif term != 1 and not isinstance(term, sympy.Symbol):
            return False  # floor/mod indexing
        elif lanes is not None and int(coeff) % lanes:
            return False
    return store.coeff(var) == 1


def plan(plan: KernelPlan, ctx: PlanContext) -> None:
    """The nodes of kernel `ctx.kernel` whose stores stream (`plan.streamed`), each decision with its reason. In a
    flat kernel (the last outer loop is the vector loop) they share that loop's blocks: same line size, and no tail
    when it is the only loop. (Symbolic sizes: as the hints make them, in a size variant checked at run time,
    size_variants.holds.)"""
    k, nest, decide = ctx.kernel, plan.nest, plan.decide
    ovars, osizes = nest.vars, nest.sizes
    if not config.cpp.streaming_stores or not nest.parallel or not ovars:
        why = ("off (config.cpp.streaming_stores)" if not config.cpp.streaming_stores else
               "the outer loop does not run on threads" if ovars else "no outer loop")
        decide("streaming", "", "not applied", why)
        return
    out: set[str] = set()
    for n, b in zip(k.nodes, plan.bodies):
        refused = _refusal(n, k, ctx)
        if refused:
            decide("streaming", n.name, "plain stores", refused)
            continue
        ivars, isizes = b.inner
        var, size = (ivars[-1], isizes[-1]) if ivars else (ovars[-1], osizes[-1])
        if ivars and not is_static(size):
            decide("streaming", n.name, "plain stores", f"its row's length {size} is symbolic")
            continue
        nbytes = n.layout.numel * n.dtype.itemsize
        # (a row of its own loop may start anywhere in a line: render_row peels its head)
        if not line_aligned(b.store, var, line_lanes(n) if not ivars else None):
            decide("streaming", n.name, "plain stores", f"its stores along {var} are not whole lines")
        elif not size_variants.holds(ctx, sympy.Ge(size, line_lanes(n))):
            decide("streaming", n.name, "plain stores", f"a row of {size} is shorter than a line")
        elif not size_variants.holds(ctx, sympy.Ge(nbytes, config.cpp.streaming_store_min_bytes)):
            decide("streaming", n.name, "plain stores", f"output {nbytes} bytes is under "
                   f"config.cpp.streaming_store_min_bytes = {config.cpp.streaming_store_min_bytes}")
        else:
            out.add(n.name)
    if nest.flat and out:
        lanes = {line_lanes(n) for n in k.nodes if n.name in out}
        if len(lanes) > 1 or (len(ovars) == 1 and sympy.sympify(osizes[0]) % lanes.pop() != 0):
            decide("streaming", "", "not applied", "the flat loop's outputs differ in line size, or its only "
                   "loop is no whole number of lines")
            return
    for name in sorted(out):
        decide("streaming", name, "streamed", "an unread graph output written in whole lines on threads")
    plan.streamed = out
    plan.stream_out = {name: OutputParam(ctx.params[name].param, ctx.params[name].ctype) for name in sorted(out)}


def _refusal(n: ComputedBuffer, k, ctx: PlanContext) -> str:
    """Why node `n` cannot stream whatever its loops ('' when it may)."""
    if n.name not in k.unread_outputs:
        return "not a graph output, or read again after the kernel"
    if n.reduction_type:
        return "a reduction"
    if n.name in ctx.locals:
        return "kernel-local"
    if n.name in ctx.inplace:
        return "written over its input (in cache)"
    if LINE_BYTES % n.dtype.itemsize:
        return f"{n.dtype} elements do not divide a line"
    return ""


def region(pragmas: list[str | None]) -> tuple[str, list[str | None]]:
    """The parallel region of a streaming kernel, and its outer loops' pragmas in it: the first becomes a worksharing
    `for` (no barrier: each thread fences first, then the region's end waits for all)."""
    first = pragmas[0] or ""
    assert first.startswith("#pragma omp parallel for"), first
    clause = re.search(r" if\(parallel: .*\)$", first)  # (threads chosen at run time: the region's clause)
    if clause:
        first = first[:clause.start()]
    return ("#pragma omp parallel" + (clause.group(0) if clause else ""),
            [first.replace("#pragma omp parallel for", "#pragma omp for", 1) + " nowait", *pragmas[1:]])


def flat_blocks(plan: KernelPlan, ctx: PlanContext, pragma: str | None) -> FlatBlocks:
    """The vector loop of a streamed flat kernel (every node's body sits in it, its pragma `pragma`) over blocks of
    whole lines: streamed nodes fill their staged line, the others store as usual; a plain tail after them."""
    var, size = plan.nest.vars[-1], plan.nest.sizes[-1]
    streamed = [n for n in ctx.kernel.nodes if n.name in plan.streamed]
    lanes = max(line_lanes(n) for n in streamed)
    wide = block_lanes(ctx, ctx.kernel.nodes, plan.bodies, lanes, size)
    if len(plan.nest.vars) > 1 or not is_static(size) or size % wide == 0:  # (a lone loop: whole blocks only)
        lanes = wide
    main = size - size % lanes if is_static(size) else FloorDiv(size, lanes) * lanes
    if pragma is not None:  # the lane loop is the vector loop now
        pragma = None if pragma.startswith("#pragma omp simd") else re.sub(r" simd( simdlen\(\d+\))?", "", pragma)
    # (only inside an outer loop: `plan` keeps a lone loop whole)
    return FlatBlocks(lanes, main, size_variants.tail(main, size), pragma,
                      {n.name: f"{n.name}_line[{var.name}_lane]" for n in streamed})


def open_region(r: NodePrinter, region_pragma: str) -> None:
    r.emit(region_pragma)
    r.open_block()


def close_region(r: NodePrinter) -> None:
    r.emit("lens_sfence();")
    r.close()


def _base(var: sympy.Symbol) -> sympy.Symbol:
    return sympy.Symbol(f"{var.name}_base", integer=True, nonnegative=True)


def _stream_lines(r: NodePrinter, n: ComputedBuffer, out: OutputParam, store: sympy.Expr, var: sympy.Symbol,
                  block: int) -> None:
    """Write node `n`'s staged block (`block` elements, whole lines) to its output."""
    lanes = line_lanes(n)
    start = cpp_index(sympy.expand(store.xreplace({var: _base(var)})))
    for j in range(0, block, lanes):
        off = f" + {j}" if j else ""
        r.statement(f"lens_stream_line({out.param} + {start}{off}, {n.name}_line{off});", n.origin)


def row_layout(n: ComputedBuffer, var: sympy.Symbol, size, store: sympy.Expr) -> str:
    """How node `n`'s streamed innermost loop over `var` stores (planned: plan_passes.inner_loops): "lines" (blocks
    of whole lines streamed, a plain tail), "peeled" (rows starting mid-line: a plain head first), or "" (its store
    along `var` is not made of whole lines: plain stores)."""
    lanes = line_lanes(n)
    if not is_static(size) or size < lanes or not line_aligned(store, var, None):
        return ""
    return "lines" if line_aligned(store, var, lanes) else "peeled"


def plan_row(ctx: PlanContext, loops: InnerLoops, n: ComputedBuffer, b: NodeBody) -> str:
    """A streamed node's innermost loop's lines (`loops.streamed_row` as `row_layout` chose it), by blocks of lines
    where it loads a narrower type (`block_lanes`), and the decision."""
    size = loops.sizes[-1]
    if not loops.streamed_row:
        return "its rows plainly"
    loops.row_lanes = lanes = line_lanes(n)
    if loops.streamed_row == "peeled":
        return f"its rows by lines of {lanes} after a plain head (rows start mid-line), a plain tail"
    loops.row_lanes = block_lanes(ctx, [n], [b], lanes, size)
    loops.row_main = size - size % loops.row_lanes
    blocks = f" in blocks of {loops.row_lanes} lanes" if loops.row_lanes > lanes else ""
    return (f"its rows by lines of {lanes}{blocks} up to {loops.row_main}"
            + (", a plain tail" if loops.row_main < size else ""))


def render_row(r: NodePrinter, n: ComputedBuffer, out: OutputParam, b: NodeBody, var: sympy.Symbol, size: int,
               store: sympy.Expr, loops: InnerLoops) -> None:
    """Node `n`'s innermost loop as `plan_row` plans it ("lines" or "peeled")."""
    if loops.streamed_row == "peeled":
        _render_peeled_row(r, n, out, b, var, size, store, loops.row_lanes, loops.cut_exps)
        return
    lanes, main = loops.row_lanes, loops.row_main
    r.open_loop(_base(var), main, None, n.origins, step=lanes)
    render_line(r, n, out, b, var, store, loops.cut_exps, lanes)
    r.close()
    if main < size:
        r.open_loop(var, size, "#pragma omp simd", n.origins, start=main)
        r.store_body(n, b, store)
        r.close()


def _render_peeled_row(r: NodePrinter, n: ComputedBuffer, out: OutputParam, b: NodeBody, var: sympy.Symbol,
                       size: int, store: sympy.Expr, lanes: int, cut_exps: bool) -> None:
    """A row that starts anywhere in a line (a softmax over 1000 columns: every other row starts mid-line):
    the elements up to its first line boundary stored plainly, then whole lines streamed, then the tail.
    (Streaming the aligned rows only, the others' lines went plainly: (8192, 1000) softmax 4.5 ms against
    eager's 4.2.)"""
    base = _base(var)
    head, last = f"{var.name}_head", f"{var.name}_end"
    start = cpp_index(sympy.expand(store.xreplace({var: 0})))
    r.open_block(n.origins)
    r.statement(f"const int64_t {head} = lens_line_head({out.param} + {start}, {size});", n.origin)
    r.statement(f"const int64_t {last} = {head} + ({size} - {head}) / {lanes} * {lanes};", n.origin)
    for lo, hi in ((0, head), (last, size)):
        r.emit("#pragma omp simd", n.origins)
        r.emit(f"for (int64_t {var.name} = {lo}; {var.name} < {hi}; {var.name}++)", n.origins)
        r.open_block()
        r.store_body(n, b, store)
        r.close()
        if lo == 0:
            r.emit(f"for (int64_t {base.name} = {head}; {base.name} < {last}; {base.name} += {lanes})", n.origins)
            r.open_block()
            render_line(r, n, out, b, var, store, cut_exps)
            r.close()
    r.close()


def render_line(r: NodePrinter, n: ComputedBuffer, out: OutputParam, b: NodeBody, var: sympy.Symbol,
                store: sympy.Expr, cut_exps: bool, lanes: int | None = None) -> None:
    """Inside a loop over `{var}_base` by lines: node `n`'s line there (or block of `lanes`, whole lines), computed
    and streamed out (`cut_exps`: planned, exp_lanes.py)."""
    lanes = lanes or line_lanes(n)
    r.statement(f"alignas(64) {out.ctype} {n.name}_line[{lanes}];", n.origin)
    r.open_lanes(var, lanes, n.origins, cut_exps=cut_exps)
    r.statement(f"{n.name}_line[{var.name}_lane] = {r.stored_body(n, b)};", n.origin)
    r.close()
    _stream_lines(r, n, out, store, var, lanes)


def render_flat(r: NodePrinter, fb: FlatBlocks, var: sympy.Symbol, size,
                streamed: list[tuple[ComputedBuffer, NodeBody]], outs: dict[str, OutputParam], origins: list[str],
                render_bodies: Callable[[dict], None]) -> None:
    """The vector loop of a flat kernel by blocks of whole lines as `fb` plans it (`streamed`: its streamed nodes);
    `render_bodies(stage)` prints the node blocks with the staged line elements the streamed nodes store to."""
    r.open_loop(_base(var), fb.main, fb.pragma, origins, step=fb.lanes)
    for n, _ in streamed:
        r.statement(f"alignas(64) {outs[n.name].ctype} {n.name}_line[{fb.lanes}];", n.origin)
    r.open_lanes(var, fb.lanes, origins)
    render_bodies(fb.stage)
    r.close()
    for n, b in streamed:
        _stream_lines(r, n, outs[n.name], b.store, var, fb.lanes)
    r.close()
    if fb.tail:
        r.open_loop(var, size, "#pragma omp simd", origins, start=fb.main)
        render_bodies({})
        r.close()
