"""Reductions over a strided dimension into a contiguous output, like `x.sum(0)` of a (8192, 1024) tensor or
a bias gradient: the natural nest (output outer, reduction inner) reads one column at a time with a
4 KiB stride and cannot vectorize (31 ms against eager's 2.5 ms). This nest keeps a block of contiguous
outputs in per-block accumulators, walks the reduction dims outside and the block inside (a vector loop
over contiguous memory), and gives threads whole blocks, so each output is still summed in order.
"""
from __future__ import annotations

import sympy
import torch

from compiler.codegen.cpp_ops import CTYPES, REDUCTION_COMBINE, REDUCTION_INIT, SIMD_REDUCTION_OPS
from compiler.codegen.index import cpp_index
from compiler.codegen.kernel_locals import LocalBuffer
from compiler.ir import Load, walk

KINDS = ("sum", "prod", "max", "min")
BLOCK_BYTES = 1024  # accumulators per block: 256 floats, 128 doubles (L1-resident)


def _reductions(k, bodies: list[dict], kinds: tuple[str, ...]) -> int:
    """How many leading nodes are reductions of `kinds` (not of bools) when the rest are pointwise epilogue
    nodes and no node has inner loops of its own; 0 when the kernel has another shape."""
    m = 0
    while m < len(k.nodes) and k.nodes[m].reduction_type:
        m += 1
    if any(b["inner"][0] for b in bodies) or any(n.reduction_type for n in k.nodes[m:]):
        return 0
    if any(n.reduction_type not in kinds or n.dtype == torch.bool for n in k.nodes[:m]):
        return 0
    return m


def applies(renderer, ovars: list[sympy.Symbol], bodies: list[dict]) -> bool:
    """Reduction nodes first (e.g. var's sum and sum of squares, or layer-norm backward's weight and bias
    gradients), pointwise epilogue nodes after them (mean's division), one (merged) outer var that every
    reduction reads contiguously, and reduction vars that no load walks contiguously."""
    k = renderer.k
    m = _reductions(k, bodies, KINDS)
    if m == 0 or len(ovars) != 1:
        return False
    if any(renderer.locals.get(n.name) is not None and not renderer.locals[n.name].scalar for n in k.nodes):
        return False
    x = ovars[0]
    for n, b in zip(k.nodes[:m], bodies[:m]):
        rvars = b["red"][0]
        loads = [e for e in walk(b["body"]) if isinstance(e, Load)]
        if not rvars or not loads:
            return False
        for ld in loads:
            flat = sympy.expand(renderer.flat(ld))
            if flat.coeff(x) != 1 or any(abs(flat.coeff(r)) == 1 for r in rvars):
                return False
    return all(sympy.expand(b["store"]).coeff(x) == 1 for b in bodies)


def render(renderer, size: int, x: sympy.Symbol, bodies: list[dict], parallel: bool) -> None:
    k = renderer.k
    m = _reductions(k, bodies, KINDS)
    block = max(1, min(size, BLOCK_BYTES // max(n.dtype.itemsize for n in k.nodes[:m])))
    if parallel and size > block:
        renderer.emit("#pragma omp parallel for", list(k.origins))
    renderer.emit(f"for (int64_t {x.name}_base = 0; {x.name}_base < {size}; {x.name}_base += {block})",
                  list(k.origins))
    renderer.emit("{")
    renderer.indent += 1
    width = f"lens_min<int64_t>({block}, {size} - {x.name}_base)"
    accs = []
    for i, (n, b) in enumerate(zip(k.nodes[:m], bodies[:m])):
        acc, t = f"acc{i}_lanes", CTYPES[n.dtype]
        accs.append(acc)
        renderer.statement(f"alignas(64) {t} {acc}[{block}];", n.origin)
        renderer.emit(f"for (int64_t lane = 0; lane < {block}; lane++) {acc}[lane] = "
                      f"{REDUCTION_INIT[n.reduction_type].format(t=t)};", [n.origin])
        rvars, rsizes = b["red"]
        for v, sz in zip(rvars, rsizes):
            renderer.open_loop(v, sz, None, n.origins)
        renderer.emit("#pragma omp simd", [n.origin])
        _lane_loop(renderer, x, width, n.origins)
        renderer.combine(n, b, acc, f"{acc}[{x.name}_lane]")
        renderer.close()
        for _ in rvars:
            renderer.close()
        if n.name in renderer.locals:  # later reductions and the epilogue read this lane's value
            renderer.locals[n.name] = LocalBuffer(f"static_cast<{t}>({acc}[{x.name}_lane])", True, 1)
            renderer.local_stores[n.name] = sympy.expand(b["store"])
        else:  # stored before the next reduction, which may read it
            _lane_loop(renderer, x, width, n.origins)
            renderer.statement(f"{renderer.params[n.name].param}[{cpp_index(sympy.expand(b['store']))}] = "
                               f"{acc}[{x.name}_lane];", n.origin)
            renderer.close()
    if m == len(k.nodes):
        renderer.close()
        return
    _lane_loop(renderer, x, width, list(k.origins))
    for node, nb in zip(k.nodes[m:], bodies[m:]):
        renderer._render_node_block(node, nb, parallel_inner=False)
    renderer.close()
    renderer.close()


def _lane_loop(renderer, x: sympy.Symbol, width: str, origins: list[str]) -> None:
    renderer.emit(f"for (int64_t {x.name}_lane = 0; {x.name}_lane < {width}; {x.name}_lane++)", origins)
    renderer.emit("{")
    renderer.indent += 1
    renderer.emit(f"int64_t {x.name} = {x.name}_base + {x.name}_lane;", origins)


# -- reductions to one value (x.sum(), mse_loss's mean) ----------------------------------------------------
PARALLEL_SUM_MIN_WORK = 1 << 15  # below this a single thread is faster than waking the team
MAX_PARTIALS = 256


def applies_to_total(renderer, ovars: list, bodies: list[dict]) -> bool:
    """No outer loop, a sum/prod reduction node first (its own loops), pointwise epilogue nodes after."""
    if ovars or _reductions(renderer.k, bodies, ("sum", "prod")) != 1:
        return False
    b = bodies[0]
    work = 1
    for s in b["red"][1]:
        work *= s
    return bool(b["red"][0]) and work >= PARALLEL_SUM_MIN_WORK


def render_total(renderer, bodies: list[dict]) -> None:
    """Each thread sums a contiguous share of the first reduction dim into its own partial; the partials
    are added in thread order (the same bits on every run with the same thread count)."""
    n, b = renderer.k.nodes[0], bodies[0]
    t = CTYPES[n.dtype]
    init = REDUCTION_INIT[n.reduction_type].format(t=t)
    op = SIMD_REDUCTION_OPS[n.reduction_type]
    acc = renderer.accumulator(n)
    part = f"{acc}_part"
    renderer.declare_accumulator(n, b)
    renderer.emit("{")
    renderer.indent += 1
    renderer.emit(f"const int lens_threads = lens_min<int>(omp_get_max_threads(), {MAX_PARTIALS});", [n.origin])
    renderer.emit(f"{t} lens_partials[{MAX_PARTIALS}];", [n.origin])
    renderer.emit(f"for (int i = 0; i < lens_threads; i++) lens_partials[i] = {init};", [n.origin])
    renderer.emit("#pragma omp parallel num_threads(lens_threads)", [n.origin])
    renderer.emit("{")
    renderer.indent += 1
    renderer.emit("const int64_t lens_team = omp_get_num_threads(), lens_tid = omp_get_thread_num();", [n.origin])
    renderer.statement(f"{t} {part} = {init};", n.origin)
    rvars, rsizes = b["red"]
    v, s = rvars[0], rsizes[0]
    last = len(rvars) == 1
    if last:
        renderer.emit(f"#pragma omp simd reduction({op}:{part})", [n.origin])
    renderer.emit(f"for (int64_t {v.name} = {s} * lens_tid / lens_team; {v.name} < {s} * (lens_tid + 1) / lens_team; "
                  f"{v.name}++)", n.origins)
    renderer.emit("{")
    renderer.indent += 1
    for depth, (w, size) in enumerate(zip(rvars[1:], rsizes[1:])):
        pragma = f"#pragma omp simd reduction({op}:{part})" if depth == len(rvars) - 2 else None
        renderer.open_loop(w, size, pragma, n.origins)
    renderer.combine(n, b, part, part)
    for _ in rvars[1:]:
        renderer.close()
    renderer.close()
    renderer.emit(f"lens_partials[lens_tid] = {part};", [n.origin])
    renderer.close()
    renderer.emit("for (int i = 0; i < lens_threads; i++)", [n.origin])
    renderer.emit("{")
    renderer.indent += 1
    renderer.statement(f"{acc} = {REDUCTION_COMBINE[n.reduction_type].format(acc=acc, v='lens_partials[i]')};",
                       n.origin)
    renderer.close()
    store = sympy.expand(b["store"])
    if n.name in renderer.locals:
        renderer.local_stores[n.name] = store
    else:
        renderer.statement(f"{renderer.params[n.name].param}[{cpp_index(store)}] = {acc};", n.origin)
    renderer.close()
    for node, nb in zip(renderer.k.nodes[1:], bodies[1:]):
        renderer._render_node_block(node, nb, parallel_inner=False)
