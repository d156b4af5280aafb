"""Index expressions in C++, and loop merging: adjacent loops whose every access is linear with
matching strides become one loop (so small inner dims still vectorize)."""
from __future__ import annotations

from typing import Sequence

import sympy
from torch.utils._sympy.functions import FloorDiv, ModularIndexing


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
    if isinstance(e, FloorDiv):
        return f"({_atom(e.args[0])} / {_atom(e.args[1])})"
    if isinstance(e, ModularIndexing):
        x, div, mod = e.args
        inner = _atom(x) if div == 1 else f"({_atom(x)} / {_atom(div)})"
        return f"({inner} % {_atom(mod)})"
    if isinstance(e, sympy.Max):
        return _fold("std::max<int64_t>", e.args)
    if isinstance(e, sympy.Min):
        return _fold("std::min<int64_t>", e.args)
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return "*".join([_atom(e.base)] * int(e.exp))
    raise IndexPrintError(f"cannot print index expression {e} ({type(e).__name__})")


def _fold(fn: str, args) -> str:
    args = list(args)
    out = cpp_index(args[0])
    for a in args[1:]:
        out = f"{fn}({out}, {cpp_index(a)})"
    return out


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
            if ca is None or cb is None or sympy.simplify(ca - cb * sb) != 0:
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
