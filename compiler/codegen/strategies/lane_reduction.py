"""max/min (and wide sums) over a kernel's innermost reduction loop in vector registers of per-lane
partials, a scalar tail, then the horizontal step: g++ vectorizes this where a scalar `acc = max(acc, v)`
chain does not (NaN propagation has no OpenMP reduction operator).

For floating values the lanes take a plain `v > acc ? v : acc` (one `vmaxps`, which drops NaN) and a second
set of lanes sums the values: that sum is NaN only when a NaN went by (or +inf and -inf both did), and then
the reduction runs again with NaN-propagating steps, so the result is NaN where eager's is. Rows holding
-inf (masked attention) keep the fast path. Measured on the device's Xeon, softmax (8192,1024): remembering
NaN in flag lanes instead of a NaN-propagating max per element made the kernel 8% faster (2.95 -> 2.73 ms,
3.28 -> 3.01 ms); the sum lanes instead of the flags another 3-8% (kernel alone, data in cache 4.28 -> 3.95
ms, from DRAM 4.84 -> 4.67 ms).

Rows that are a whole number of four lines keep four registers of lanes (four independent `vmaxps`
chains instead of one, whose 4-cycle latency bounds the pass), folded into one register by a `simd`
step and then into the scalar. That scalar fold takes the plain select too: the lanes never hold NaN
(a NaN element is dropped by the select and caught by the sums), and a NaN that the tail loop left in
the accumulator survives `v > acc ? v : acc`. With the NaN-propagating step there, each lane cost a
data-dependent branch, half of them mispredicted on random rows. Both together, on the device (medians
of 75 through the generated `call()`): softmax (8192,1024) 3.89 -> 3.64 ms, masked softmax 4.42 -> 3.87.

Floating sums over a whole number of four lines take the same four registers of lanes (`wide_sum`), where
`omp simd reduction` keeps one register and its chain of dependent adds: x.mean(-1) on (8192,1024) 1.50 ->
1.24 ms on the device (the rows come from L3 faster than one chain adds them). The partials are folded
in a fixed order, so results are the same at every run, and no less accurate (more partials).
"""
from __future__ import annotations

import sympy
import torch

from compiler.codegen import half
from compiler.codegen.cpp_ops import CTYPES, REDUCTION_COMBINE, REDUCTION_INIT, simd_reduction_op
from compiler.codegen.plan import NodeBody, ReductionLoop, RowPrefetch, sizes_text
from compiler.codegen.printer import NodePrinter
from compiler.ir.index_functions import FloorDiv
from compiler.ir.size_symbols import is_static

# The per-element step on floating lanes (NaN is noticed through the sum lanes).
_FAST_SELECT = {"max": "{v} > {acc} ? {v} : {acc}", "min": "{v} < {acc} ? {v} : {acc}"}


# Registers of lanes kept where the row is a whole number of that many lines.
WIDE = 4


def _wide(rsizes: list[int], line: int) -> bool:
    """Whether the innermost reduction loop is a whole number of WIDE registers of `line` lanes, or of symbolic
    length (then WIDE registers and a tail)."""
    return bool(rsizes) and (not isinstance(rsizes[-1], int) or rsizes[-1] % (WIDE * line) == 0)


def wide_sum(n, rsizes: list[int], line: int) -> bool:
    """Whether a floating sum takes four registers of lanes here rather than `omp simd reduction`."""
    return n.reduction_type == "sum" and n.dtype.is_floating_point and _wide(rsizes, line)


def plan_loop(n, red: tuple[list, list], acc: str, pf: RowPrefetch) -> tuple[ReductionLoop, str]:
    """(how node `n`'s reduction loop over `red` runs into `acc`, why): per-lane partials, by lines of the
    prefetching pass (`pf`), four registers of lanes, `omp simd reduction`, or scalar."""
    rvars, rsizes = red
    line = 64 // half.compute_itemsize(n.dtype)
    if (n.reduction_type in ("max", "min") and n.dtype != torch.bool and rvars  # (a symbolic row: lanes and a tail)
            and (not is_static(rsizes) or rsizes[-1] >= 2 * line)):
        return (_lanes("lanes", n, rsizes, acc, line),
                f"{n.reduction_type} in per-lane partials (NaN-propagating), rows of {sizes_text(rsizes)}")
    if pf.into == n.name:
        return ReductionLoop("blocked", acc, pf.lanes), "by lines, asking for the next row's lines (row prefetch)"
    if rvars and wide_sum(n, rsizes, line):
        return _lanes("wide_sum", n, rsizes, acc, line), "a floating sum in four registers of lanes"
    if not rvars:
        return ReductionLoop("none", acc), "no reduction loop"
    op = simd_reduction_op(n.dtype, n.reduction_type)
    if op is not None:
        return ReductionLoop("simd", acc, op=op), f"omp simd reduction({op})"
    dtype = str(n.dtype).replace("torch.", "")
    return ReductionLoop("scalar", acc), (f"inner loop not vectorized: OpenMP's simd reduction has no operator "
                                          f"keeping {n.reduction_type}'s semantics for {dtype}")


def _lanes(how: str, n, rsizes: list, acc: str, line: int) -> ReductionLoop:
    registers = WIDE if _wide(rsizes, line) else 1
    lanes, size = line * registers, rsizes[-1]
    main = size - size % lanes if isinstance(size, int) else FloorDiv(size, lanes) * lanes  # (a symbolic row)
    return ReductionLoop(how, acc, line, registers, main, not isinstance(main, int) or main < size,
                         n.dtype.is_floating_point and n.reduction_type in _FAST_SELECT)



def render(r: NodePrinter, n, b: NodeBody, loop: ReductionLoop) -> None:
    """Print the lane reduction of node `n` (body/loops in `b`) as `loop` plans it."""
    rvars, rsizes = b.red
    acc, line, lanes, main = loop.acc, loop.lanes, loop.partials, loop.main
    t = CTYPES[n.dtype]
    init = REDUCTION_INIT[n.reduction_type].format(t=t)
    part = r.declare_lanes(n, acc, lanes)
    sums = f"{acc}_sum" if loop.nan_sums else None
    if sums:
        r.statement(f"alignas(64) {t} {sums}[{lanes}] = {{0}};", n.origin)
    for v, s in zip(rvars[:-1], rsizes[:-1]):
        r.open_loop(v, s, None, n.origins)
    v, size = rvars[-1], rsizes[-1]
    r.open_loop(sympy.Symbol(f"{v.name}_base"), main, None, n.origins, step=lanes)
    r.open_lanes(v, lanes, [n.origin], cut_exps=loop.cut_exps)
    into = f"{part}[{v.name}_lane]"
    if sums:
        val = r.body_value(b)
        r.statement(f"{into} = {_FAST_SELECT[n.reduction_type].format(v=val, acc=into)};", n.origin)
        r.statement(f"{sums}[{v.name}_lane] += {val};", n.origin)
    else:
        r.combine(n, b, acc, into)
    r.close()
    r.close()
    if loop.tail:
        _exact_loop(r, n, b, acc, v, main, size)
    for _ in rvars[:-1]:
        r.close()
    select = _FAST_SELECT[n.reduction_type] if sums else REDUCTION_COMBINE[n.reduction_type]
    if lanes > line:  # the registers of lanes folded into the first
        r.emit("#pragma omp simd", n.origins)
        r.emit(f"for (int64_t lane = 0; lane < {line}; lane++)", n.origins)
        r.open_block()
        for k in range(line, lanes, line):
            r.statement(f"{part}[lane] = {select.format(acc=f'{part}[lane]', v=f'{part}[lane + {k}]')};", n.origin)
            if sums:
                r.statement(f"{sums}[lane] += {sums}[lane + {k}];", n.origin)
        r.close()
    line = r.fold_tree(part, line, select, n.origins, also=sums)
    if sums:
        r.statement(f"{t} {sums}_all = 0;", n.origin)
    r.emit(f"for (int64_t lane = 0; lane < {line}; lane++)", n.origins)
    r.open_block()
    r.statement(f"{acc} = {select.format(acc=acc, v=f'{part}[lane]')};", n.origin)
    if sums:
        r.statement(f"{sums}_all += {sums}[lane];", n.origin)
    r.close()
    if sums:  # a NaN went by (or +inf and -inf): again, NaN-propagating
        r.emit(f"if ({sums}_all != {sums}_all)", n.origins)
        r.open_block()
        r.statement(f"{acc} = {init};", n.origin)
        for w, s in zip(rvars[:-1], rsizes[:-1]):
            r.open_loop(w, s, None, n.origins)
        _exact_loop(r, n, b, acc, v, 0, size)
        for _ in rvars[:-1]:
            r.close()
        r.close()


def _exact_loop(r: NodePrinter, n, b: NodeBody, acc: str, v: sympy.Symbol, start: int, stop: int) -> None:
    """`acc` combined with the body at v = start..stop-1, one element at a time."""
    r.open_loop(v, stop, None, n.origins, start=start)
    r.combine(n, b, acc, acc)
    r.close()
