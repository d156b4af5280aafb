"""Software prefetch of the next row in row kernels (an outer loop over rows, inner or reduction loops over
each row: softmax, layer norm, row reductions).

Why: a row of 1024 floats is one 4 KiB page, and the hardware's L2 streamer stops at page boundaries, so
every row starts with demand misses that the kernel's arithmetic then waits on. In kernels that pass over
each row more than once, after the first pass we ask for the lines of the next row of every input read as
a dense block, so that DRAM streams while the later passes compute. Measured on the device's Xeon (2
threads, one process, medians of 40): softmax (8192,1024) 4.88 -> 4.23 ms and 5.94 -> 5.16 ms in two runs;
issued before the first pass it gained nothing (5.14, 6.17), nor did prefetching output rows for writing;
in a one-pass row reduction (x.mean(-1)) a prefetch before or after the pass cost ~8% (0.68 -> 0.74 ms),
so those stream on their own. g++ drops `__builtin_prefetch` from loops it vectorizes, hence a separate
scalar loop, one prefetch per 64-byte line.
"""
from __future__ import annotations

import sympy

from compiler import config
from compiler.codegen.index import cpp_index
from compiler.ir import Load, walk

LINE_BYTES = 64
# Rows smaller than this stream fine without help (several rows per page); larger ones would evict the
# current row from L1 before it is used (48 KiB L1 on the machines we measured).
MIN_ROW_BYTES = 1024
MAX_ROW_BYTES = 16 * 1024


def row_prefetches(r, ovars: list[sympy.Symbol], osizes: list[int], bodies: list[dict]) -> tuple[list[str], int]:
    """C++ statements for the body of the innermost outer loop of renderer `r`'s kernel, and the index of
    the body (node) after whose loops they go; ([], -1) when the kernel gets none."""
    passes = [i for i, b in enumerate(bodies) if b["inner"][0] or b["red"][0]]
    if not config.cpp.prefetch_rows or not ovars or osizes[-1] < 2 or len(passes) < 2:
        return [], -1  # (a kernel without loops inside its outer loops is flat: that loop is the vector one)
    row, rows = ovars[-1], osizes[-1]
    outer = set(ovars)
    targets: dict[tuple[str, str], str] = {}
    for b in bodies:
        ranges = dict(zip(*b["inner"])) | dict(zip(*b["red"]))
        for ld in walk(b["body"]):
            arg = r.params.get(ld.buffer) if isinstance(ld, Load) else None
            if arg is None or arg.is_output or ld.buffer in r.locals:
                continue
            span = _dense_row(sympy.expand(r.flat(ld)), row, outer, ranges)
            itemsize = r.layouts[ld.buffer][0].itemsize
            if span is None or not MIN_ROW_BYTES <= span[1] * itemsize <= MAX_ROW_BYTES:
                continue
            start, length = span
            key = (arg.param, cpp_index(start))
            if key not in targets:
                targets[key] = (f"for (int64_t pf = 0; pf < {length}; pf += {LINE_BYTES // itemsize}) "
                                f"__builtin_prefetch({arg.param} + {cpp_index(start)} + pf, 0, 3);")
    if not targets:
        return [], -1
    return [f"if ({row.name} + 1 < {rows})", "{", *("    " + t for t in targets.values()), "}"], passes[0]


def _dense_row(index: sympy.Expr, row: sympy.Symbol, outer: set, ranges: dict) -> tuple[sympy.Expr, int] | None:
    """(flat index where the next row starts, row length) when one row's accesses are a dense block."""
    terms = index.as_coefficients_dict()
    inner = []
    for term, coeff in terms.items():
        if term == 1:
            continue
        if not isinstance(term, sympy.Symbol) or not coeff.is_Integer:
            return None  # floor/mod indexing, products of variables
        if term in outer:
            continue
        if term not in ranges or coeff <= 0:
            return None
        inner.append((int(coeff), ranges[term]))
    if not inner or terms.get(row, 0) == 0:
        return None  # no row to stream, or every row reads the same block
    length = 1
    for coeff, size in sorted(inner):
        if coeff != length:
            return None
        length *= size
    start = index.xreplace({sym: 0 for sym in index.free_symbols if sym not in outer})
    return sympy.expand(start.xreplace({row: row + 1})), length
