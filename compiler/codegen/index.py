"""Index expressions in C++, and loop merging: adjacent loops whose every access is linear with
matching strides become one loop (so small inner dims still vectorize)."""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import sympy
from torch.utils._sympy import functions as torch_sym

from compiler.ir.index_functions import FloorDiv, ModularIndexing, is_zero
from compiler.ir.nodes import Expr, rewrite_leaves


class IndexPrintError(Exception):
    pass


def cpp_index(e: sympy.Expr) -> str:
    """Render an integer index expression (int64 arithmetic; operands of / and % are non-negative)."""
    e = sympy.sympify(e)
    if e.is_Integer:
        v = int(e)
        return f"{v}LL" if abs(v) > 2**31 - 1 else str(v)
    if e.is_Symbol:
        return e.name
    if isinstance(e, sympy.Add):
        terms = sorted(e.args, key=lambda t: (t.is_Integer, sympy.default_sort_key(t)))
        out = cpp_index(terms[0])
        for t in terms[1:]:
            if t.could_extract_minus_sign():
                out += f" - {_atom(-t)}"
            else:
                out += f" + {_atom(t)}"
        return out
    if isinstance(e, sympy.Mul):
        coeff, rest = e.as_coeff_Mul()
        factors = [_atom(f) for f in sympy.Mul.make_args(rest)]
        if coeff == 1:
            return "*".join(factors)
        if coeff == -1:
            return "-" + "*".join(factors)
        return f"{cpp_index(coeff)}*" + "*".join(factors)
    if isinstance(e, torch_sym.FloorDiv):
        return f"({_atom(e.args[0])} / {_operand(e.args[1])})"
    if isinstance(e, torch_sym.ModularIndexing):
        x, div, mod = e.args
        inner = _atom(x) if div == 1 else f"({_atom(x)} / {_operand(div)})"
        return f"({inner} % {_operand(mod)})"
    if isinstance(e, (torch_sym.PythonMod, torch_sym.Mod)):  # (sizes: non-negative operands)
        return f"({_atom(e.args[0])} % {_operand(e.args[1])})"
    if isinstance(e, (sympy.Max, torch_sym.Max)):
        return _fold("lens_max<int64_t>", e.args)
    if isinstance(e, (sympy.Min, torch_sym.Min)):
        return _fold("lens_min<int64_t>", e.args)
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return "*".join([_atom(e.base)] * int(e.exp))
    raise IndexPrintError(f"cannot print index expression {e} ({type(e).__name__})")


def _fold(fn: str, args) -> str:
    args = list(args)
    out = cpp_index(args[0])
    for a in args[1:]:
        out = f"{fn}({out}, {cpp_index(a)})"
    return out


def _operand(e: sympy.Expr) -> str:
    """The right operand of / or %: a product too in parentheses (`x / (s0*s1)`, never `x / s0*s1`)."""
    text = _atom(e)
    return f"({text})" if isinstance(e, sympy.Mul) and not text.startswith("(") else text


def _atom(e: sympy.Expr) -> str:
    text = cpp_index(e)
    if isinstance(e, (sympy.Add,)) or (isinstance(e, sympy.Mul) and text.startswith("-")):
        return f"({text})"
    return text


def _linear_coeff(e: sympy.Expr, v: sympy.Symbol) -> sympy.Expr | None:
    """The coefficient of v when e is linear in v (v only in `c*v` terms), else None."""
    coeff = sympy.Integer(0)
    for term in sympy.Add.make_args(sympy.expand(e)):
        if v not in term.free_symbols:
            continue
        c, rest = term.as_independent(v, as_Add=False)
        if rest != v:
            return None
        coeff += c
    return coeff


def merge_loops(variables: Sequence[sympy.Symbol], sizes: Sequence[int], exprs: Sequence[sympy.Expr]
                ) -> tuple[list[sympy.Symbol], list[int], dict[sympy.Symbol, sympy.Expr]]:
    """Merge adjacent loops (outer a, inner b) when every expr has coeff(a) == coeff(b) * size(b)."""
    vs, ss = list(variables), list(sizes)
    subst: dict[sympy.Symbol, sympy.Expr] = {}
    exprs = [sympy.expand(e) for e in exprs]
    i = len(vs) - 2
    while i >= 0:
        a, b, sb = vs[i], vs[i + 1], ss[i + 1]
        ok = True
        for e in exprs:
            ca, cb = _linear_coeff(e, a), _linear_coeff(e, b)
            if ca is None or cb is None or not is_zero(ca - cb * sb):
                ok = False
                break
        if ok:
            exprs = [sympy.expand(e.xreplace({a: 0})) for e in exprs]
            subst = {k: v.xreplace({a: 0}) for k, v in subst.items()}
            subst[a] = sympy.Integer(0)
            ss[i + 1] = ss[i] * sb
            del vs[i], ss[i]
        i -= 1
    return vs, ss, subst


Bounds = tuple[int, int] | None


def index_bounds(e: sympy.Expr, ranges: dict) -> Bounds:
    """Inclusive [lo, hi] of an index expression over 0 <= v < ranges[v] (start <= v < end where ranges[v] is
    (start, end)), or None when unknown."""
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:  # (a loop over a symbolic size: unknown)
        r = ranges.get(e)
        if isinstance(r, tuple):  # (one range of a split loop: [start, end))
            return int(r[0]), int(r[1]) - 1
        return (0, int(r) - 1) if isinstance(r, (int, sympy.Integer)) else None
    if isinstance(e, sympy.Add):
        lo = hi = 0
        for t in e.args:
            b = index_bounds(t, ranges)
            if b is None:
                return None
            lo, hi = lo + b[0], hi + b[1]
        return lo, hi
    if isinstance(e, sympy.Mul):
        lo = hi = 1
        for f in e.args:
            b = index_bounds(f, ranges)
            if b is None:
                return None
            products = [lo * b[0], lo * b[1], hi * b[0], hi * b[1]]
            lo, hi = min(products), max(products)
        return lo, hi
    if isinstance(e, torch_sym.FloorDiv) and e.args[1].is_Integer and int(e.args[1]) > 0:
        b, d = index_bounds(e.args[0], ranges), int(e.args[1])
        return None if b is None else (b[0] // d, b[1] // d)
    if isinstance(e, torch_sym.ModularIndexing) and e.args[2].is_Integer:
        return 0, int(e.args[2]) - 1
    if isinstance(e, _MIN_MAX):
        bounds = [index_bounds(a, ranges) for a in e.args]
        if any(b is None for b in bounds):
            return None
        pick = min if isinstance(e, _MIN) else max
        return pick(b[0] for b in bounds), pick(b[1] for b in bounds)
    return None


_MIN = (sympy.Min, torch_sym.Min)
_MIN_MAX = (sympy.Min, torch_sym.Min, sympy.Max, torch_sym.Max)


def _min_max(e: sympy.Expr, ranges: dict[sympy.Symbol, int]) -> sympy.Expr:
    """A min/max with the arguments the loop ranges show never decide it dropped: with 0 <= x2 < 64,
    `min(63, x2)` (a pad's or concatenation's in-bounds clamp) is `x2`, an affine index that vectorizes."""
    args = [simplify_index(a, ranges) for a in e.args]
    bounds = [index_bounds(a, ranges) for a in args]
    is_min = isinstance(e, _MIN)
    for i, (a, b) in enumerate(zip(args, bounds)):
        others = bounds[:i] + bounds[i + 1:]
        if b is not None and all(o is not None and (b[1] <= o[0] if is_min else b[0] >= o[1]) for o in others):
            return a
    return e.func(*args)


def _split_multiples(e: sympy.Expr, d: int) -> tuple[sympy.Expr, sympy.Expr]:
    """e = d * q + r where q collects the terms whose integer coefficient is a multiple of d."""
    q, r = sympy.Integer(0), sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(e)):
        coeff, rest = t.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) % d == 0:
            q += sympy.Integer(int(coeff) // d) * rest
        else:
            r += t
    return q, r


def _floordiv(a: sympy.Expr, d: int, ranges: dict[sympy.Symbol, int]) -> sympy.Expr:
    q, r = _split_multiples(a, d)  # floor((d*q + r) / d) = q + floor(r / d) for integer q
    b = index_bounds(r, ranges)
    if b is not None and 0 <= b[0] and b[1] < d:
        return q
    # r = g*s + t with g | d and 0 <= t < g: floor(r / d) = floor(s / (d/g)) (e.g. (512*x0 + x1) / 4096
    # is x0 / 8 when x1 < 512)
    split = _split_below(r, d, ranges)
    if split is not None:
        g, s, _ = split
        return q + _floordiv(s, d // g, ranges)
    return q + FloorDiv(r, sympy.Integer(d))


def _mod(q: sympy.Expr, m: int, ranges: dict[sympy.Symbol, int], original: sympy.Expr) -> sympy.Expr:
    _, r = _split_multiples(q, m)  # (m*k + r) mod m = r mod m
    b = index_bounds(r, ranges)
    if b is None or b[0] < 0:
        return original
    if b[1] < m:
        return r
    # r = g*s + t with g | m and 0 <= t < g: r mod m = g*(s mod (m/g)) + t (e.g. (64*x1 + x2) % 512 is
    # 64*(x1 % 8) + x2 when x2 < 64: an attention head's columns, contiguous in x2)
    split = _split_below(r, m, ranges)
    if split is not None:
        g, s, t = split
        return g * _mod(s, m // g, ranges, ModularIndexing(s, sympy.Integer(1), sympy.Integer(m // g))) + t
    return ModularIndexing(r, sympy.Integer(1), sympy.Integer(m))


def _split_below(r: sympy.Expr, d: int, ranges: dict[sympy.Symbol, int]) -> tuple[int, sympy.Expr, sympy.Expr] | None:
    """(g, s, t) with r = g*s + t, 1 < g dividing d, the terms of s having integer coefficients that g divides,
    and 0 <= t < g over the loop ranges; None when there is no such split."""
    terms = sympy.Add.make_args(r)
    coeffs = [t.as_coeff_Mul()[0] for t in terms]
    g = 0
    for c in coeffs:
        if c.is_Integer and math.gcd(int(c), d) > 1:
            g = math.gcd(g, int(c))
    g = math.gcd(g, d)
    if g <= 1:
        return None
    big = [t for t, c in zip(terms, coeffs) if c.is_Integer and int(c) % g == 0]
    rest = sympy.Add(*[t for t in terms if t not in big])
    rb = index_bounds(rest, ranges)
    if rb is None or rb[0] < 0 or rb[1] >= g:
        return None
    return g, sympy.expand(sympy.Add(*big) / g), rest


def simplify_index(e: sympy.Expr, ranges: dict[sympy.Symbol, int]) -> sympy.Expr:
    """Remove floor divisions and modulos that the loop ranges make trivial: with 0 <= x1 < 512,
    `(512*x0 + x1) / 512` is `x0` and `x1 % 512` is `x1`; a contiguous inner index then vectorizes."""
    e = sympy.sympify(e)
    if not e.has(torch_sym.FloorDiv, torch_sym.ModularIndexing, *_MIN_MAX):
        return e
    if isinstance(e, _MIN_MAX):
        return _min_max(e, ranges)
    if isinstance(e, torch_sym.FloorDiv):
        a, d = simplify_index(e.args[0], ranges), e.args[1]
        return _floordiv(a, int(d), ranges) if d.is_Integer and int(d) > 0 else FloorDiv(a, d)
    if isinstance(e, torch_sym.ModularIndexing):
        x, div, mod = (simplify_index(a, ranges) for a in e.args)
        if not (div.is_Integer and mod.is_Integer and int(div) > 0 and int(mod) > 0):
            return ModularIndexing(x, div, mod)
        b = index_bounds(x, ranges)
        if b is None or b[0] < 0:
            return ModularIndexing(x, div, mod)
        q = _floordiv(x, int(div), ranges)
        return _mod(q, int(mod), ranges, ModularIndexing(x, div, mod))
    if isinstance(e, (sympy.Add, sympy.Mul)):
        return _rejoin(sympy.expand(e.func(*(simplify_index(a, ranges) for a in e.args))))
    return e


def flat_load_index(layout, index) -> sympy.Expr:
    """The flat element index of a load at `index` (one expression a dim) in a buffer of `layout`, with the
    dimensions a view split in two read back whole (`_rejoin`): each dim is simplified alone, and only the flat sum
    shows `151296*(r / 197) + 768*(r % 197)` to be `768*r` (a (2, 197, 12, 64) view of a (394, 768) gradient
    summed over rows: as split, no column strategy and no vector loop took it)."""
    flat = layout.flat_index(index)
    return _rejoin(flat) if flat.has(torch_sym.ModularIndexing) else flat


def _rejoin(e: sympy.Expr) -> sympy.Expr:
    """`c*m*(X / (d*m)) + c*((X / d) % m)` is `c*(X / d)` (`c*X` when d is 1): a dimension a view split in two,
    read back whole (relu over a Linear's output viewed (b, s, n) and back: 2048*x0, not
    524288*(x0 / 256) + 2048*(x0 % 256)), so the index is linear again for loop merging, prefetch and streaming."""
    while isinstance(e, sympy.Add):
        terms = e.as_coefficients_dict()
        for mod, b in terms.items():
            if not (isinstance(mod, torch_sym.ModularIndexing) and b.is_Integer
                    and mod.args[1].is_Integer and mod.args[2].is_Integer):
                continue
            x, d, m = mod.args
            div = FloorDiv(x, d * m)
            if isinstance(div, torch_sym.FloorDiv) and terms.get(div) == b * m:
                whole = x if d == 1 else FloorDiv(x, d)
                e = sympy.expand(e - b * mod - b * m * div + b * whole)
                break
        else:
            return e
    return e


def simplify_indices(e: Expr, ranges: dict[sympy.Symbol, int]) -> Expr:
    """The tree with every load index and index value simplified for these loop ranges (before loops merge,
    so merging sees the linear forms)."""
    simplified: dict[sympy.Expr, sympy.Expr] = {}

    def simplify(i: sympy.Expr) -> sympy.Expr:
        got = simplified.get(i)
        if got is None:
            got = simplified[i] = simplify_index(i, ranges)  # returns `i` itself when it has no / or %
        return got

    return rewrite_leaves(e, lambda ld: dataclasses.replace(ld, index=tuple(simplify(i) for i in ld.index)),
                          lambda iv: dataclasses.replace(iv, expr=simplify(iv.expr)))
