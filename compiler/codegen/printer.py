"""The printing interface a strategy sees (codegen/strategies/): lines with their FX nodes, blocks, loops and lane
loops (`LinePrinter`), and a node's body printed at the current indices (`NodePrinter`). A strategy prints a planned
piece of a kernel through this interface alone: what to print was decided by the plan passes (plan_passes.py)."""
from __future__ import annotations

from typing import ContextManager, Protocol

import sympy

from compiler.codegen.index import cpp_index
from compiler.codegen.plan import NodeBody
from compiler.codegen.strategies.exp_lanes import LaneLoop
from compiler.ir.nodes import ComputedBuffer


class LinePrinter:
    """Lines of C++, each with the FX nodes it comes from ([] for structure), indented by the blocks open."""

    def init_lines(self, readable_lines: dict[str, int]) -> None:
        self.readable = readable_lines  # FX node -> its line of the readable graph (a comment before its code)
        self.lines: list[tuple[str, list[str]]] = []
        self.indent = 0
        self.last_origin: str | None = None
        self.lane_loops: list[LaneLoop] = []  # the lane loops open now (codegen/strategies/exp_lanes.py)
        self.loops: list[tuple[str, int]] = []  # the loops open now: (the index variable they step, their indent)
        # per open loop: where statements hoisted out of it go (the line before its pragma), or None where nothing is
        # hoisted (a lane loop, a loop of symbolic or no trips, one not `omp simd`): expressions.py's invariant loads
        self.hoist_lines: list[int | None] = []

    def emit(self, text: str, nodes: list[str] | None = None) -> None:
        self.lines.append(("    " * self.indent + text, list(nodes or [])))

    def statement(self, text: str, origin: str | None) -> None:
        """A line of FX node `origin`, after a comment naming its readable line when the node changes."""
        if origin is not None and origin != self.last_origin and origin in self.readable:
            self.emit(f"// Corresponding FX code line: {self.readable[origin]}")
        self.last_origin = origin
        self.emit(text, [origin] if origin else [])

    def open_block(self, nodes: list[str] | None = None) -> None:
        self.emit("{", nodes)
        self.indent += 1

    def open_loop(self, var: sympy.Symbol, size, pragma: str | None, nodes: list[str], start=0, step: int = 1) -> None:
        runs = isinstance(size, (int, sympy.Integer)) and isinstance(start, (int, sympy.Integer)) and size > start
        self.hoist_lines.append(len(self.lines) if runs and pragma and pragma.startswith("#pragma omp simd") else None)
        if pragma:
            self.emit(pragma)
        if isinstance(size, sympy.Basic):
            size = cpp_index(size)
        if isinstance(start, sympy.Basic):  # (a symbolic row's tail starts past its lanes)
            start = cpp_index(start)
        inc = f"{var.name}++" if step == 1 else f"{var.name} += {step}"
        self.emit(f"for (int64_t {var.name} = {start}; {var.name} < {size}; {inc})", nodes)
        self.loops.append((var.name, self.indent))
        self.open_block()

    def open_lanes(self, var: sympy.Symbol, lanes: int, nodes: list[str], count: int | None = None,
                   cut_exps: bool = False) -> None:
        """Inside `for (var_base ...; var_base += lanes)`: the `simd` loop over the block, defining `var`
        (`count`: the first lanes only, a row's tail; `cut_exps`: planned, exps printed directly in it are cut out
        of it, exp_lanes.py)."""
        self.lane_values_end()
        self.open_lanes_named(var.name, lanes, nodes, count, cut_exps)

    def open_lanes_named(self, var: str, lanes: int, nodes: list[str], count: int | None = None,
                         cut_exps: bool = False) -> None:
        self.lane_loops.append(LaneLoop(var, lanes, list(nodes), len(self.lines), self.indent, count, cut_exps))
        self.open_loop(sympy.Symbol(f"{var}_lane"), lanes if count is None else count, "#pragma omp simd", nodes)
        self.loops[-1] = (var, self.loops[-1][1])  # (the indices it steps are `var`'s)
        self.hoist_lines[-1] = None  # (cut around exps: what is hoisted out of it would be out of scope)
        self.emit(f"int64_t {var} = {var}_base + {var}_lane;", nodes[:1])

    def simd_line(self, var: str, size, text: str, nodes: list[str]) -> None:
        """A one-line `simd` loop: `for (var = 0; var < size; var++) text`."""
        self.emit("#pragma omp simd", nodes)
        self.emit(f"for (int64_t {var} = 0; {var} < {size}; {var}++) {text}", nodes)

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
        if self.loops and self.loops[-1][1] == self.indent:
            self.loops.pop()
            self.hoist_lines.pop()
        if self.lane_loops and self.lane_loops[-1].indent == self.indent:
            if not self.lane_loops.pop().cutting:  # the loop ends (not cut around an exp: it opens again)
                self.lane_values_end()

    def can_hoist(self) -> bool:
        """Whether a statement printed now, directly in the innermost open loop's body, may go before that loop."""
        return bool(self.hoist_lines) and self.hoist_lines[-1] is not None and self.indent == self.loops[-1][1] + 1

    def hoist(self, text: str, origin: str | None) -> None:
        """Print statement `text` before the innermost open loop (can_hoist), after what was hoisted there before."""
        at = self.hoist_lines[-1]
        self.lines.insert(at, ("    " * self.loops[-1][1] + text, [origin] if origin else []))
        self.hoist_lines[-1] = at + 1

    def lane_values_end(self) -> None:
        """A lane loop ends or opens: what was kept of the one before is out of scope (expressions.py)."""


class NodePrinter(Protocol):
    """What a strategy's printer may ask of the kernel's printer (KernelRenderer): lines, blocks and loops, and a
    node's values, accumulators and stores at the current indices. Nothing here decides: names, lanes and loops
    come from the plan."""

    def emit(self, text: str, nodes: list[str] | None = None) -> None: ...
    def statement(self, text: str, origin: str | None) -> None: ...
    def open_block(self, nodes: list[str] | None = None) -> None: ...
    def open_loop(self, var: sympy.Symbol, size, pragma: str | None, nodes: list[str], start=0,
                  step: int = 1) -> None: ...
    def open_lanes(self, var: sympy.Symbol, lanes: int, nodes: list[str], count: int | None = None,
                   cut_exps: bool = False) -> None: ...
    def simd_line(self, var: str, size, text: str, nodes: list[str]) -> None: ...
    def fold_tree(self, part: str, lanes: int, combine: str, nodes: list[str], also: str | None = None) -> int: ...
    def close(self) -> None: ...
    def body_value(self, b: NodeBody) -> str: ...
    def combine(self, n: ComputedBuffer, b: NodeBody, acc: str, into: str) -> None: ...
    def declare_lanes(self, n: ComputedBuffer, acc: str, lanes: int) -> str: ...
    def fold_lanes(self, n: ComputedBuffer, acc: str, lanes: int) -> None: ...
    def declare_accumulator(self, n: ComputedBuffer, b: NodeBody) -> None: ...
    def store_reduction(self, n: ComputedBuffer, store: sympy.Expr, acc: str) -> None: ...
    def store_target(self, n: ComputedBuffer, store: sympy.Expr) -> str: ...
    def stored_body(self, n: ComputedBuffer, b: NodeBody) -> str: ...
    def store_body(self, n: ComputedBuffer, b: NodeBody, store: sympy.Expr) -> str: ...
    def node_block(self, n: ComputedBuffer, b: NodeBody, parallel_inner: bool) -> None: ...
    def renamed_locals(self, names: dict[str, str], stores: dict[str, sympy.Expr]) -> ContextManager[None]: ...
