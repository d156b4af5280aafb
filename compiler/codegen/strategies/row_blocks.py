"""A pass over a row by blocks of a line, asking for the next row's lines one per block (prefetch.py plans
it), with the pending row's deferred output line written in each block (pipeline.py)."""
from __future__ import annotations

import sympy

from compiler.codegen.plan import DeferredPass, NodeBody, ReductionLoop, RowPrefetch
from compiler.codegen.printer import NodePrinter
from compiler.codegen.strategies import deferred_output as pipeline


def open_blocks(r: NodePrinter, pf: RowPrefetch, var: sympy.Symbol, size: int, nodes: list[str],
                cut_exps: bool) -> None:
    """Open `for (var_base ...)` over the row by lines, ask for the next row's lines there (`pf`), and open the
    lanes loop defining `var` (two loops to close; `cut_exps`: planned, exp_lanes.py)."""
    r.open_loop(sympy.Symbol(f"{var.name}_base"), size, None, nodes, step=pf.lanes)
    r.emit(pf.lines(f"{var.name}_base"), nodes[:1])
    r.open_lanes(var, pf.lanes, nodes, cut_exps=cut_exps)


def close_blocks(r: NodePrinter, deferred: DeferredPass | None, var: sympy.Symbol) -> None:
    """Close the lanes loop and the loop by lines that `open_blocks` opened; a row's deferred output pass
    writes its line in between (pipeline.py)."""
    r.close()
    if deferred is not None:
        pipeline.line(r, deferred, var)
    r.close()


def render_blocked_reduction(r: NodePrinter, n, b: NodeBody, loop: ReductionLoop, pf: RowPrefetch,
                             deferred: DeferredPass | None) -> None:
    """A sum/prod over one loop by blocks of a line (the prefetching pass of a row kernel), as `loop` plans it."""
    (v,), (size,) = b.red
    part = r.declare_lanes(n, loop.acc, loop.lanes)
    open_blocks(r, pf, v, size, n.origins, loop.cut_exps)
    r.combine(n, b, loop.acc, f"{part}[{v.name}_lane]")
    close_blocks(r, deferred, v)
    r.fold_lanes(n, loop.acc, loop.lanes)
