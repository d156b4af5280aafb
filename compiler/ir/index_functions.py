"""Integer index functions for loop indices: floor division and `(a // b) % c`, with torch's semantics and
printing (they subclass torch's FloorDiv / ModularIndexing, so every isinstance check, printer and reader
of Inductor-style text treats them alike), but with an `eval` that folds only what integer coefficients
decide. torch's own `eval` asks sympy's polynomial gcd (about 1 ms a call): building the reshape indices
of one transformer layer spent 0.4 s there. Range-aware simplification happens later, in codegen/index.py.
"""
from __future__ import annotations

import math

import sympy
from torch.utils._sympy import functions as torch_sym


def is_zero(e: sympy.Expr) -> bool:
    """Whether an index expression is zero by expansion alone. Index expressions are polynomials in the loop
    variables over FloorDiv/ModularIndexing terms, so expanding decides them; sympy.simplify says no more here
    but took ~5 ms a call (~100 ms the first time in a process) in the scheduler's fusion checks."""
    return e == 0 or sympy.expand(e) == 0


def _coeff_gcd(e: sympy.Expr, d: int) -> int:
    """gcd of d and every term's integer coefficient in `e` (1 when a coefficient is not an integer)."""
    g = d
    for term in sympy.Add.make_args(e):
        coeff, _ = term.as_coeff_Mul()
        if not coeff.is_Integer:
            return 1
        g = math.gcd(g, int(coeff))
        if g == 1:
            return 1
    return g


def _divide_coeffs(e: sympy.Expr, g: int) -> sympy.Expr:
    terms = []
    for term in sympy.Add.make_args(e):
        coeff, rest = term.as_coeff_Mul()
        terms.append(sympy.Integer(int(coeff) // g) * rest)
    return sympy.Add(*terms)


def _positive_int(e: sympy.Expr) -> int | None:
    return int(e) if e.is_Integer and int(e) > 0 else None


def _smaller_division(base: sympy.Expr, d: int) -> tuple[sympy.Expr, sympy.Integer] | None:
    """(base', d') with floor(base / d) == floor(base' / d') and a simpler right side, or None: a nested
    floor division merges (floor(floor(a / b) / d) = floor(a / (b d))), a common integer factor cancels
    (floor(g b / (g d')) = floor(b / d'))."""
    if isinstance(base, torch_sym.FloorDiv) and _positive_int(base.args[1]):
        return base.args[0], sympy.Integer(int(base.args[1]) * d)
    g = _coeff_gcd(base, d)
    return (_divide_coeffs(base, g), sympy.Integer(d // g)) if g > 1 else None


class FloorDiv(torch_sym.FloorDiv):
    """floor(base / divisor) for integer operands."""

    @classmethod
    def eval(cls, base: sympy.Expr, divisor: sympy.Expr):  # type: ignore[override]
        if divisor.is_zero:
            raise ZeroDivisionError("division by zero")
        if base.is_zero:
            return sympy.S.Zero
        if divisor == 1:
            return base
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        d = _positive_int(divisor)
        smaller = _smaller_division(base, d) if d is not None else None
        return cls(*smaller) if smaller else None


class ModularIndexing(torch_sym.ModularIndexing):
    """(base // divisor) % modulus for a non-negative base."""

    @classmethod
    def eval(cls, base: sympy.Expr, divisor: sympy.Expr, modulus: sympy.Expr):  # type: ignore[override]
        if base.is_zero or modulus == 1:
            return sympy.S.Zero
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        d = _positive_int(divisor)
        smaller = _smaller_division(base, d) if d is not None else None
        return cls(*smaller, modulus) if smaller else None
