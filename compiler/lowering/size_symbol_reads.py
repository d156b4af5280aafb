"""The size symbols of a graph being lowered: where the generated `call()` reads each one (a SymInt input, an
input tensor's size or stride, an extern call's result for a data-dependent size), their example values, and
the check that every symbol the IR uses is read somewhere before generated code may use it."""
from __future__ import annotations

import sympy
import torch
import torch.fx

from compiler.ir.nodes import ComputedBuffer, ExternArg, ExternCall, GraphIR, IndexValue, Load, walk
from compiler.ir.size_symbols import (
    free_symbols,
    shape_env_of,
    shape_of,
    size_expr,
    sorted_symbols,
    strides_of,
    symbol_hints,
)


class UnboundSymbol(Exception):
    """The IR uses a size symbol that call() cannot read from anything (it names the symbol)."""


class SizeSymbols:
    """Where call() reads each symbol: SymInt inputs first, then input sizes, then input strides (the first
    placeholder of each kind, in graph order); an unbacked symbol from the extern call that produces it."""

    def __init__(self, gm: torch.fx.GraphModule):
        vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        self.shape_env = shape_env_of(vals)
        self.sources: dict[sympy.Symbol, tuple[int, str]] = {}  # symbol -> (priority, Python reading it)
        self.after_call: set[sympy.Symbol] = set()  # read after an extern call (data-dependent sizes)
        symbols = set()
        for v in vals:
            if isinstance(v, torch.SymInt):
                symbols |= sympy.sympify(v.node.expr).free_symbols
            elif isinstance(v, torch.Tensor):
                symbols |= free_symbols([size_expr(s) for s in (*v.shape, *v.stride()) if isinstance(s, torch.SymInt)])
        self.hints = symbol_hints(self.shape_env, symbols)

    @property
    def any(self) -> bool:
        return bool(self.hints) or bool(self.sources)

    def _offer(self, e, priority: int, code: str) -> None:
        if isinstance(e, sympy.Symbol) and (e not in self.sources or self.sources[e][0] > priority):
            self.sources[e] = (priority, code)

    def placeholder(self, name: str, val) -> None:
        """Offer what input `name` says of the symbols."""
        if isinstance(val, torch.SymInt):
            self._offer(size_expr(val), 0, name)
            return
        for d, s in enumerate(shape_of(val)):
            self._offer(s, 1, f"{name}.size({d})")
        for d, s in enumerate(strides_of(val)):
            self._offer(s, 2, f"{name}.stride({d})")

    def extern_result(self, buffer: str, val) -> list[tuple[sympy.Symbol, str]]:
        """The new symbols an extern call's result (a tensor, or an int: `.item()`) defines, each with the
        Python reading it after the call."""
        new: list[tuple[sympy.Symbol, str]] = []
        if isinstance(val, torch.SymInt):
            found = [(size_expr(val), buffer)]
        elif isinstance(val, torch.Tensor):
            found = [(s, f"{buffer}.size({d})") for d, s in enumerate(shape_of(val))]
        else:
            found = []
        for e, code in found:
            if isinstance(e, sympy.Symbol) and e not in self.sources:
                self.sources[e] = (3, code)
                self.after_call.add(e)
                new.append((e, code))
        return new

    def new_in(self, val) -> list[sympy.Symbol]:
        """The symbols of a node's result (tensors' sizes and strides) that nothing read yet: data-dependent
        sizes an extern call's result defines."""
        vals = val if isinstance(val, (list, tuple)) else [val]
        found = set()
        for v in vals:
            if isinstance(v, torch.Tensor):
                found |= free_symbols([*shape_of(v), *strides_of(v)])
        return sorted_symbols(found - set(self.sources))

    def known(self, e) -> bool:
        """Whether every symbol of `e` is read by call() before this point."""
        return all(s in self.sources for s in sympy.sympify(e).free_symbols)

    def bindings(self) -> list[tuple[sympy.Symbol, str]]:
        """The symbols call() reads from its inputs at the top, by name."""
        return [(s, self.sources[s][1]) for s in sorted_symbols(self.sources) if s not in self.after_call]

    def check(self, ir: GraphIR) -> None:
        """Raise UnboundSymbol when the IR uses a symbol that nothing binds."""
        used = set()
        for _, lay in ir.buffer_layouts().values():
            used |= free_symbols([lay.size, lay.stride])
        for n in ir.nodes:
            if isinstance(n, ComputedBuffer):
                used |= free_symbols(n.reduction_ranges)
                for e in walk(n.body):
                    if isinstance(e, Load):
                        used |= free_symbols(e.index)
                    elif isinstance(e, IndexValue):
                        used |= e.expr.free_symbols
            else:
                used |= _extern_symbols(n)
        used |= free_symbols([v for kind, v in ir.outputs if kind == "value" and isinstance(v, sympy.Basic)])
        used |= free_symbols([(v.size, v.stride, v.offset) for kind, v in ir.outputs if kind == "view"])
        index_vars = {s for s in used if s.name[:1] in "xr" and s.name[1:2].isdigit()}
        missing = sorted_symbols(used - index_vars - set(self.sources))
        if missing:
            raise UnboundSymbol(f"size symbol {missing[0]} is read from none of the graph's inputs")


def _extern_symbols(call: ExternCall) -> set[sympy.Symbol]:
    def of(a: ExternArg) -> set[sympy.Symbol]:
        if a.items is not None:
            return set().union(*[of(x) for x in a.items]) if a.items else set()
        if a.view is not None:
            return free_symbols(a.view)
        return free_symbols([a.value]) if isinstance(a.value, (sympy.Basic, list, tuple)) else set()

    return set().union(*[of(a) for a in [*call.args, *call.kwargs.values()]], set())
