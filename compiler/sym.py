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
        if d is None:
            return None
        if isinstance(base, torch_sym.FloorDiv) and _positive_int(base.args[1]):
            return cls(base.args[0], sympy.Integer(int(base.args[1]) * d))
        g = _coeff_gcd(base, d)
        if g > 1:  # floor(g*b / (g*d')) = floor(b / d')
            return cls(_divide_coeffs(base, g), sympy.Integer(d // g))
        return None


class ModularIndexing(torch_sym.ModularIndexing):
    """(base // divisor) % modulus for a non-negative base."""

    @classmethod
    def eval(cls, base: sympy.Expr, divisor: sympy.Expr, modulus: sympy.Expr):  # type: ignore[override]
        if base.is_zero or modulus == 1:
            return sympy.S.Zero
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        d = _positive_int(divisor)
        if d is None:
            return None
        if isinstance(base, torch_sym.FloorDiv) and _positive_int(base.args[1]):
            return cls(base.args[0], sympy.Integer(int(base.args[1]) * d), modulus)
        g = _coeff_gcd(base, d) if d > 1 else 1
        if g > 1:
            return cls(_divide_coeffs(base, g), sympy.Integer(d // g), modulus)
        return None
