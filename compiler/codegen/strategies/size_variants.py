"""Size variants of a kernel over symbolic sizes: the strategies that static kernels choose from concrete sizes
(streaming stores, row prefetch and the deferred output pass, sibling loops, the column split) chosen from the
size hints (the example inputs' sizes), each variant behind a run-time check on the kernel's size arguments that
its choices hold; the generic body (codegen/strategies/symbolic_sizes.py) serves every other size. No guard: one compile still
serves every size.

A variant pins the symbols its indices read as strides (a row's length: `s27` of a (s77, s27) input) to their
hints, so its row loops are the static kernel's, and keeps the others (row counts) symbolic; a decision on those
(`holds`: a 16 MiB output streams, 64 rows split a column reduction) is taken as the hints make it and
recorded. Each recorded decision is then taken the other way in one more variant (at most MAX_VARIANTS), so
sizes on both sides of a threshold get a planned body. Each variant is a function of its own, which the
parallel build compiles beside the others (compiler/machine/build_parts.py), and the kernel calls it:

    k_v0(...) { streaming ... }   k_v1(...) { plain stores ... }
    k(...) { if (s27 == 1024 && s77 >= 4096) k_v0(...); else if (s27 == 1024) k_v1(...); else { generic } }

A variant that differs from the generic body only by its pinned constants is dropped (`_shape`). Without pins,
variants that cover every way the decisions go leave no generic body. `config.cpp.size_variants`
(LENS_SIZE_VARIANTS=0) off keeps the generic body alone.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable

import sympy

from compiler import config
from compiler.codegen.index import cpp_index
from compiler.cpp_text.variant_text import VARIANTS_BEGIN, VARIANTS_END
from compiler.ir.nodes import IndexValue, Layout, Load, substitute, walk
from compiler.ir.size_symbols import Size, free_symbols
from compiler.scheduler import FusedKernel

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


def holds(ctx, cond) -> bool:
    """Whether a comparison of sizes that chooses a strategy holds for the kernel a plan context `ctx` plans
    (plan.PlanContext): a static one as it comes out; a symbolic one as the size hints make it in a size variant
    (recorded there and checked at run time), and False in the generic body, which takes no strategy needing it."""
    if isinstance(cond, bool):
        return cond
    cond = sympy.sympify(cond)
    if cond in (sympy.true, sympy.false):
        return bool(cond)
    assume = getattr(ctx, "assume", None)
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


def checks(assume: Assumptions) -> list[str]:
    """The run-time checks (C++) of the decisions a variant's planning took so far."""
    return [_check(cond, value) for cond, value in assume.taken.items()]


def _body(lines: list) -> list:
    """A rendered function's body: the lines between its opening and closing braces."""
    return lines[2:-1]


_TOKEN = re.compile(r"[A-Za-z_]\w*|[0-9][\w.]*|\S")


def _shape(body: list, pinned_names: set[str]) -> list[list[str]]:
    """A body's lines as their tokens, sorted, with every number and pinned symbol the same token: a variant of
    the generic body's shape differs from it only by constants (a pointwise kernel's rows of 512 plain stores
    against rows of `s75`; `x1 + x0*s75` against `512*x0 + x1`), and is dropped: it cost g++ time and ran as
    fast as the generic body (0.99-1.03 of its time, one thread: docs/performance.md)."""
    return [sorted("#" if t[0].isdigit() or t in pinned_names else t for t in _TOKEN.findall(text))
            for text, _ in body]


def _functions(generic, variants: list, pin_checks: list[str], else_body: list, generic_else: bool) -> list:
    """The lines of the kernel: each variant a function of its own (`<name>_v0`, ...), which the parallel
    build (compiler/machine/build_parts.py) compiles beside the others, then the kernel itself, which calls
    the first whose check holds, else runs `else_body` (with `generic_else`, the generic body: the calls are
    then marked for compiler/cpp_text/variant_text.py). (One function of every body cost a softmax's g++ 1.19 G
    instructions in one process; as functions, the largest of two parts built side by side 0.84 G.)"""
    head, nodes = generic.lines[0]
    call_args = ", ".join([a.param for a in generic.args] + list(generic.sizes))
    lines, declarations, calls = [], [], []
    for i, (ways, body) in enumerate(variants):
        name = f"{generic.name}_v{i}"
        signature = head.replace(f" {generic.name}(", f" {name}(", 1)
        lines += [(signature, nodes), ("{", []), *body, ("}", [])]
        either = " || ".join(f"({' && '.join(c)})" if len(c) > 1 else c[0] for c in ways if c)
        either = "" if not all(ways) else f"({either})" if len(ways) > 1 else either
        cond = " && ".join(pin_checks + ([either] if either else [])) or "true"
        # (declared in the kernel: a block-scope declaration inside `extern "C"` has C linkage, and the
        # kernel's part of the build may not hold the variant's definition)
        declarations.append(("    " + signature.removeprefix('extern "C" ') + ";", []))
        calls.append((f"    {'if' if i == 0 else 'else if'} ({cond}) {name}({call_args});", []))
    # (a generic body serves every size: variant_text.generic_only can build the kernel without the variants)
    begin, end = ([(VARIANTS_BEGIN, [])], [(VARIANTS_END, [])]) if generic_else else ([], [])
    lines += [*generic.lines[:2], *declarations, *begin, *calls, ("    else", []), *end, ("    {", [])]
    lines += [("    " + text, nodes) for text, nodes in else_body]
    return lines + [("    }", []), generic.lines[-1]]


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
    generic_shape = _shape(generic_body, {s.name for s in values})
    kept = [(ways, body) for ways, body in variants if _shape(body, {s.name for s in values}) != generic_shape]
    if not kept:
        return generic
    # (the generic body goes last unless the variants cover every size: no pins, every decision both ways)
    last_is_else = complete and not values and len(kept) == len(variants)
    variants = kept
    if last_is_else and len(variants) == 1:
        return dataclasses.replace(generic, lines=[*generic.lines[:2], *variants[0][1], generic.lines[-1]])
    if last_is_else:
        return dataclasses.replace(generic, lines=_functions(generic, variants[:-1], pin_checks, variants[-1][1],
                                                             False))
    return dataclasses.replace(generic, lines=_functions(generic, variants, pin_checks, generic_body, True))
