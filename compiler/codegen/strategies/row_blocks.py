"""A pass over a row by blocks of a line, asking for the next row's lines one per block (prefetch.py plans
it), with the pending row's deferred output line written in each block (pipeline.py)."""
from __future__ import annotations

import sympy

from compiler.codegen.plan import NodeBody
from compiler.codegen.strategies import deferred_output as pipeline


def open_blocks(r, var: sympy.Symbol, size: int, nodes: list[str]) -> None:
    """Open `for (var_base ...)` over the row by lines, ask for the next row's lines there, and open the
    lanes loop defining `var` (two loops to close)."""
    pf = r.row_prefetch
    r.open_loop(sympy.Symbol(f"{var.name}_base"), size, None, nodes, step=pf.lanes)
    r.emit(pf.lines(f"{var.name}_base"), nodes[:1])
    r.open_lanes(var, pf.lanes, nodes)


def close_blocks(r, var: sympy.Symbol) -> None:
    """Close the lanes loop and the loop by lines that `open_blocks` opened; a row's deferred output pass
    writes its line in between (pipeline.py)."""
    r.close()
    if r.deferred is not None:
        pipeline.line(r, var)
    r.close()


def render_blocked_reduction(r, n, b: NodeBody, acc: str) -> None:
    """A sum/prod over one loop by blocks of a line (the prefetching pass of a row kernel)."""
    (v,), (size,) = b.red
    lanes = r.row_prefetch.lanes
    part = r.declare_lanes(n, acc, lanes)
    open_blocks(r, v, size, n.origins)
    r.combine(n, b, acc, f"{part}[{v.name}_lane]")
    close_blocks(r, v)
    r.fold_lanes(n, acc, lanes)
