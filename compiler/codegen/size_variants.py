"""Size variants of a kernel over symbolic sizes: the strategies that static kernels choose from concrete sizes
(streaming stores, row prefetch and the deferred output pass, sibling loops, the column split) chosen from the
size hints (the example inputs' sizes), each variant behind a run-time check on the kernel's size arguments that
its choices hold; the generic body (codegen/symbolic.py) serves every other size. No guard: one compile still
serves every size.

A variant pins the symbols its indices read as strides (a row's length: `s27` of a (s77, s27) input) to their
hints, so its row loops are the static kernel's, and keeps the others (row counts) symbolic; a decision on those
(`holds`: a 16 MiB output streams, 64 rows split a column reduction) is taken as the hints make it and
recorded. Each recorded decision is then taken the other way in one more variant (at most MAX_VARIANTS), so
sizes on both sides of a threshold get a planned body:

    if (s27 == 1024 && s77 >= 4096) { streaming ... } else if (s27 == 1024) { plain stores ... } else { generic }

Without pins, variants that cover every way the decisions go leave no generic body. `config.cpp.size_variants`
(LENS_SIZE_VARIANTS=0) off keeps the generic body alone.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

import sympy

from compiler import config
from compiler.codegen.index import cpp_index
from compiler.ir import IndexValue, Layout, Load, substitute, walk
from compiler.scheduler import FusedKernel
from compiler.symbols import Size, free_symbols

MAX_VARIANTS = 3
_RELATIONS = {sympy.GreaterThan: ">=", sympy.StrictGreaterThan: ">", sympy.LessThan: "<=",
              sympy.StrictLessThan: "<", sympy.Equality: "==", sympy.Unequality: "!="}


@dataclass
class Assumptions:
    """A variant's decisions on symbolic sizes: those fixed for it (`forced`), else as the hints make them; every
    decision taken is recorded in order (`taken`), the variant's run-time check."""

    hints: dict
    forced: dict = field(default_factory=dict)
    taken: dict = field(default_factory=dict)

    def holds(self, cond: sympy.Basic) -> bool:
        if type(cond) not in _RELATIONS:
            return False  # (not a comparison generated code can check)
        value = self.forced[cond] if cond in self.forced else bool(cond.xreplace(self.hints))
        self.taken[cond] = value
        return value


def holds(r, cond) -> bool:
    """Whether a comparison of sizes that chooses a strategy holds for renderer `r`'s kernel: a static one as it
    comes out; a symbolic one as the size hints make it in a size variant (recorded there and checked at run
    time), and False in the generic body, which takes no strategy needing it."""
    if isinstance(cond, bool):
        return cond
    cond = sympy.sympify(cond)
    if cond in (sympy.true, sympy.false):
        return bool(cond)
    assume = getattr(r, "assume", None)
    return assume.holds(cond) if assume is not None else False


def tail(main: Size, size: Size) -> bool:
    """Whether a loop of `size` run by blocks up to `main` leaves elements after them (symbolic: unless equal)."""
    return sympy.expand(sympy.sympify(size) - main) != 0


def pins(k: FusedKernel, layouts: dict[str, tuple]) -> dict[sympy.Symbol, int]:
    """The symbols kernel `k` reads as strides or in indices (its rows' lengths), each with its hint; only backed
    sizes (`s...`, with an example value), never a data-dependent `u...`."""
    found = set()
    for n in k.nodes:
        found |= free_symbols(n.layout.stride)
        for e in walk(n.body):
            if isinstance(e, Load):
                found |= free_symbols(e.index) | free_symbols(layouts[e.buffer][1].stride)
            elif isinstance(e, IndexValue):
                found |= e.expr.free_symbols
    found -= {v for n in k.nodes for v in (*n.vars, *n.reduction_vars)}
    return {s: int(k.hints[s]) for s in found if s.name.startswith("s") and s in k.hints}


def _size(e, values: dict):
    if not isinstance(e, sympy.Basic):
        return e
    e = sympy.expand(e.xreplace(values))
    return int(e) if e.is_Integer else e


def _layout(lay: Layout, values: dict) -> Layout:
    return Layout(tuple(_size(s, values) for s in lay.size), tuple(_size(s, values) for s in lay.stride))


def pinned(k: FusedKernel, layouts: dict[str, tuple], values: dict) -> tuple[FusedKernel, dict]:
    """Kernel `k` and the layouts with the symbols of `values` replaced by them."""
    if not values:
        return k, layouts
    values = {s: sympy.Integer(v) for s, v in values.items()}
    nodes = [dataclasses.replace(n, layout=_layout(n.layout, values), body=substitute(n.body, values),
                                 reduction_ranges=tuple(_size(s, values) for s in n.reduction_ranges))
             for n in k.nodes]
    kernel = dataclasses.replace(k, nodes=nodes, outer=tuple(_size(s, values) for s in k.outer))
    return kernel, {name: (dtype, _layout(lay, values)) for name, (dtype, lay) in layouts.items()}


def _check(cond: sympy.Basic, value: bool) -> str:
    text = f"{cpp_index(sympy.expand(cond.lhs))} {_RELATIONS[type(cond)]} {cpp_index(sympy.expand(cond.rhs))}"
    return text if value else f"!({text})"


def _body(lines: list) -> list:
    """A rendered function's body: the lines between its opening and closing braces."""
    return lines[2:-1]


def render(k: FusedKernel, layouts: dict[str, tuple], generic, render_one: Callable):
    """Kernel `k` (rendered generically as `generic`, a RenderedKernel) with its size variants in front of the
    generic body; `render_one(kernel, layouts, assumptions)` renders one variant."""
    if not config.cpp.size_variants or not k.hints:
        return generic
    values = pins(k, layouts)
    kernel, lays = pinned(k, layouts, values)
    pin_checks = [f"{s.name} == {v}" for s, v in sorted(values.items(), key=lambda sv: sv[0].name)]
    variants: list[tuple[list[list[str]], list]] = []  # (each way to it: its checks, body)
    queue, seen, complete = [{}], set(), True
    while queue:
        if len(variants) == MAX_VARIANTS:
            complete = False
            break
        forced = queue.pop(0)
        assume = Assumptions(k.hints, forced)
        try:
            v = render_one(kernel, lays, assume)
        except TypeError:  # (a size comparison not routed through symbolic.holds: the generic body alone)
            return generic
        if v.args != generic.args:
            return generic
        decisions, body = list(assume.taken.items()), _body(v.lines)
        checks = [_check(c, val) for c, val in decisions]
        same = next((ways for ways, b in variants if b == body), None)
        if same is not None:  # (decided otherwise, planned the same: one body, either check)
            same.append(checks)
        else:
            variants.append(([checks], body))
        for i, (cond, val) in enumerate(decisions):  # the other way of each decision taken after the forced ones
            other = dict(decisions[:i]) | {cond: not val}
            key = frozenset(other.items())
            if cond not in forced and key not in seen:
                seen.add(key)
                queue.append(other)
    if complete and len(variants) == 1:  # (every way the decisions go planned the same: no need to check them)
        variants = [([[]], variants[0][1])]
    generic_body = _body(generic.lines)
    kept = [(ways, body) for ways, body in variants if body != generic_body]
    if not kept:
        return generic
    # (the generic body goes last unless the variants cover every size: no pins, every decision both ways)
    last_is_else = complete and not values and len(kept) == len(variants)
    variants = kept
    if last_is_else and len(variants) == 1:
        return dataclasses.replace(generic, lines=[*generic.lines[:2], *variants[0][1], generic.lines[-1]])
    lines = list(generic.lines[:2])
    for i, (ways, body) in enumerate(variants):
        if last_is_else and i == len(variants) - 1:
            lines.append(("    else", []))
        else:
            either = " || ".join(f"({' && '.join(c)})" if len(c) > 1 else c[0] for c in ways if c)
            either = "" if not all(ways) else f"({either})" if len(ways) > 1 else either
            cond = " && ".join(pin_checks + ([either] if either else [])) or "true"
            lines.append((f"    {'if' if i == 0 else 'else if'} ({cond})", []))
        lines.append(("    {", []))
        lines += [("    " + text, nodes) for text, nodes in body]
        lines.append(("    }", []))
    if not last_is_else:
        lines += [("    else", []), ("    {", [])]
        lines += [("    " + text, nodes) for text, nodes in generic_body]
        lines.append(("    }", []))
    lines.append(generic.lines[-1])
    return dataclasses.replace(generic, lines=lines)
