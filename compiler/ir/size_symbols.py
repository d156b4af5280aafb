"""Dynamo's size symbols (`s0`, `s77`, `u0`, ...) in the compiler: a fake tensor's sizes and strides as sympy
expressions (plain ints where they are constants), what the ShapeEnv knows of each symbol (where Dynamo read
it, its range, its example value, the guards on it), and the Python text that computes a size at run time."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence, Union

import sympy
import torch
from torch.utils._sympy import functions as torch_sym
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

from lens_format.symbols import ShapeSymbol, SymbolTable

Size = Union[int, sympy.Expr]  # a constant size, or an expression of Dynamo's symbols

# The functions a size expression may use: generated C++ (codegen/index.py `cpp_index`) and Python
# (`py_expr`) both compute them. Anything else (a float, a ceiling, a bitwise op) is not generated.
SIZE_FUNCTIONS = (sympy.Symbol, sympy.Integer, sympy.Add, sympy.Mul, sympy.Pow, sympy.Max, sympy.Min, torch_sym.Max,
                  torch_sym.Min, torch_sym.FloorDiv, torch_sym.ModularIndexing, torch_sym.PythonMod, torch_sym.Mod)


@dataclass(frozen=True)
class FloatSize:
    """A size used as a float (`torch.sym_float(s0)`: a mean's divisor): `expr` computed, then converted. With
    `terms`, a float expression of sizes instead (BatchNorm's unbiased `n / (n - 1.0)` over a symbolic batch):
    `expr` a sympy tree of Float/Integer constants, Add, Mul and Pow by an integer whose other leaves are the
    placeholders of `terms` (placeholder symbol -> size expression, converted to float)."""

    expr: sympy.Expr
    terms: tuple[tuple[sympy.Symbol, sympy.Expr], ...] = ()


_FLOAT_LEAVES = (sympy.Float, sympy.Integer, sympy.Rational)


def _float_size(e: sympy.Expr, terms: dict) -> sympy.Expr:
    """`e` (a SymFloat's expression) with each size it converts to float replaced by a placeholder in `terms`."""
    if isinstance(e, torch_sym.ToFloat):
        size = size_expr(e.args[0])
        key = sympy.Symbol(f"_float{len(terms)}")
        terms[key] = sympy.Integer(size) if isinstance(size, int) else size
        return key
    if isinstance(e, getattr(torch_sym, "IntTrueDiv", ())):
        quotient = sympy.cancel(e.args[0] / e.args[1])  # exact (BatchNorm's numel / channels): a size
        if quotient.is_Integer or (quotient.is_polynomial() and not quotient.is_Rational):
            return _float_size(torch_sym.ToFloat(sympy.expand(quotient)), terms)
        return sympy.Mul(_float_size(torch_sym.ToFloat(e.args[0]), terms),
                         sympy.Pow(_float_size(torch_sym.ToFloat(e.args[1]), terms), -1))
    if isinstance(e, getattr(torch_sym, "FloatTrueDiv", ())):
        return sympy.Mul(_float_size(e.args[0], terms), sympy.Pow(_float_size(e.args[1], terms), -1))
    if isinstance(e, sympy.Pow) and e.exp.is_Integer:
        return sympy.Pow(_float_size(e.base, terms), e.exp)
    if isinstance(e, (sympy.Add, sympy.Mul)):
        return e.func(*[_float_size(a, terms) for a in e.args])
    if isinstance(e, _FLOAT_LEAVES):
        return e
    raise SymbolicSizeError(f"float size {e} uses {type(e).__name__}, which generated code does not compute")


def symbolic_scalar(v: "torch.SymInt | torch.SymFloat | torch.SymBool") -> "Size | FloatSize":
    """A symbolic scalar generated code can compute: a size, a size converted to float, or a float expression of
    sizes."""
    e = sympy.sympify(v.node.expr)
    if isinstance(v, torch.SymInt):
        return size_expr(v)
    if isinstance(v, torch.SymFloat):
        terms: dict = {}
        tree = _float_size(e, terms)
        if set(terms) == {tree}:  # one size as a float (`sym_float(s0)`, an exact quotient)
            return FloatSize(terms[tree])
        return FloatSize(tree, tuple(terms.items()))
    raise SymbolicSizeError(f"{type(v).__name__} {e} is not a size or a size as a float")


def float_size_py(v: FloatSize) -> str:
    """Python source computing a FloatSize from the symbols' variables."""
    if not v.terms:
        return f"float({py_expr(v.expr)})"
    names = {k: sympy.Symbol(f"float({py_expr(size)})") for k, size in v.terms}
    return "(" + str(v.expr.xreplace(names)) + ")"


class SymbolicSizeError(Exception):
    """A size expression generated code cannot compute (it names the expression)."""


def size_expr(v) -> Size:
    """A SymInt, int or sympy expression as an int when it is a constant, else as a sympy expression over
    Dynamo's symbols (the ShapeEnv's replacements applied: `SymNode.expr`)."""
    if isinstance(v, torch.SymInt):
        v = v.node.expr
    if isinstance(v, bool) or not isinstance(v, (int, sympy.Basic)):
        raise SymbolicSizeError(f"{v!r} ({type(v).__name__}) is not an integer size")
    if isinstance(v, int):
        return v
    e = sympy.sympify(v)
    if e.is_Integer:
        return int(e)
    bad = [a for a in sympy.preorder_traversal(e) if not isinstance(a, SIZE_FUNCTIONS)]
    if bad or (isinstance(e, sympy.Pow) and not (e.exp.is_Integer and int(e.exp) > 0)):
        raise SymbolicSizeError(f"size {e} uses {type(bad[0]).__name__ if bad else 'a power'}, which generated "
                                f"code does not compute")
    return e


def shape_of(t: torch.Tensor) -> tuple[Size, ...]:
    return tuple(size_expr(s) for s in t.shape)


def strides_of(t: torch.Tensor) -> tuple[Size, ...]:
    return tuple(size_expr(s) for s in t.stride())


def is_static(value) -> bool:
    """Whether a size, a sequence of sizes (nested) or a sympy expression has no symbol in it."""
    if isinstance(value, (list, tuple)):
        return all(is_static(v) for v in value)
    if isinstance(value, sympy.Basic):
        return not value.free_symbols
    return not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def same_size(a: Size, b: Size) -> bool:
    """Whether two sizes are equal: ints by value, expressions as expressions (never by a guard)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return sympy.expand(a - b) == 0


def free_symbols(values: Iterable) -> set[sympy.Symbol]:
    """The symbols in sizes, sequences of sizes (nested) and sympy expressions."""
    out: set[sympy.Symbol] = set()
    for v in values:
        if isinstance(v, (list, tuple)):
            out |= free_symbols(v)
        elif isinstance(v, sympy.Basic):
            out |= v.free_symbols
    return out


def sorted_symbols(symbols: Iterable[sympy.Symbol]) -> list[sympy.Symbol]:
    """Symbols in a stable order (by name: a kernel's parameters, a graph's list)."""
    return sorted(symbols, key=lambda s: s.name)


_PRINTER = PythonPrinter()


def py_expr(e: Size) -> str:
    """Python source computing a size from the symbols' variables (`(1 + s0) // 2`)."""
    if isinstance(e, int):
        return repr(e)
    e = sympy.sympify(e)
    return str(int(e)) if e.is_Integer else _PRINTER.doprint(e)


def decide(cond, ranges: dict) -> bool | None:
    """A comparison of sizes (a bool, or a sympy relation of Dynamo's symbols) decided over the symbols' value
    ranges (`ranges`: symbol -> ValueRanges; a symbol without one counts as [2, oo), as Dynamo's backed sizes
    are); None where the ranges do not decide it. Adds no guard."""
    if isinstance(cond, bool):
        return cond
    cond = sympy.sympify(cond)
    if cond in (sympy.true, sympy.false):
        return bool(cond)
    if not isinstance(cond, sympy.core.relational.Relational):
        return None
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy
    diff = sympy.expand(cond.lhs - cond.rhs)
    rng = bound_sympy(diff, {v: ranges.get(v, ValueRanges(2, int_oo)) for v in diff.free_symbols})
    lo, hi = rng.lower, rng.upper
    checks = {sympy.StrictGreaterThan: (lo > 0, hi <= 0), sympy.GreaterThan: (lo >= 0, hi < 0),
              sympy.StrictLessThan: (hi < 0, lo >= 0), sympy.LessThan: (hi <= 0, lo > 0),
              sympy.Eq: (lo == hi == 0, lo > 0 or hi < 0), sympy.Ne: (lo > 0 or hi < 0, lo == hi == 0)}
    if type(cond) not in checks:
        return None
    true, false = (bool(sympy.sympify(c)) for c in checks[type(cond)])
    return True if true else False if false else None


def substitute_hints(value, hints: dict[sympy.Symbol, int]):
    """`value` (a size or nested sequence of sizes) with each symbol replaced by its example value."""
    if isinstance(value, (list, tuple)):
        return type(value)(substitute_hints(v, hints) for v in value)
    if isinstance(value, sympy.Basic):
        return int(value.xreplace(hints))
    return value


def shape_env_of(values: Sequence):
    """The ShapeEnv behind any symbolic value among `values` (fake tensors, SymInts), or None."""
    for v in values:
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return v.node.shape_env
        if isinstance(v, torch.Tensor):
            for s in (*v.shape, *v.stride()):
                if isinstance(s, torch.SymInt):
                    return s.node.shape_env
    return None


def _bound(v) -> int | None:
    """An int, or None for int_oo / -int_oo (unbounded) and anything that is not a finite integer."""
    if isinstance(v, int):
        return v
    e = sympy.sympify(v)
    return int(e) if e.is_Integer else None


def _source_name(src) -> str:
    name = src.name
    return name if isinstance(name, str) else name()


def symbol_infos(shape_env, symbols: Iterable[sympy.Symbol]) -> list[ShapeSymbol]:
    """What `shape_env` knows of each of `symbols` (symbols.json's entries), in name order."""
    out = []
    guards = [g.expr for g in getattr(shape_env, "guards", [])] if shape_env is not None else []
    sources = getattr(shape_env, "var_to_sources", {}) if shape_env is not None else {}
    ranges = getattr(shape_env, "var_to_range", {}) if shape_env is not None else {}
    hints = _known_values(shape_env)
    for s in sorted_symbols(symbols):
        rng = ranges.get(s)
        srcs = sources.get(s, [])
        out.append(ShapeSymbol(
            s.name, _source_name(srcs[0]) if srcs else "",
            _bound(rng.lower) if rng is not None else None, _bound(rng.upper) if rng is not None else None,
            _bound(hints[s]) if s in hints else None,
            tuple(str(g) for g in guards if s in getattr(g, "free_symbols", ()))))
    return out


def graph_symbols(gm) -> dict | None:
    """symbols.json's content for an FX graph whose values' sizes use Dynamo's symbols; None when none do."""
    vals = [n.meta.get("val") for n in gm.graph.nodes]
    flat = [x for v in vals for x in (v if isinstance(v, (list, tuple)) else [v])]
    found: set[sympy.Symbol] = set()
    for v in flat:
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            found |= sympy.sympify(v.node.expr).free_symbols
        elif isinstance(v, torch.Tensor):
            for s in (*v.shape, *v.stride()):
                if isinstance(s, torch.SymInt):
                    found |= sympy.sympify(s.node.expr).free_symbols
    if not found:
        return None
    return SymbolTable(symbol_infos(shape_env_of(flat), found)).to_json()


def _known_values(shape_env) -> dict:
    if shape_env is None:
        return {}
    return getattr(shape_env, "backed_var_to_val", None) or getattr(shape_env, "var_to_val", {})


def symbol_hints(shape_env, symbols: Iterable[sympy.Symbol]) -> dict[sympy.Symbol, int]:
    """Each symbol's example value (8 for a symbol without one: an unbacked size)."""
    hints = {}
    known = _known_values(shape_env)
    for s in symbols:
        v = _bound(known.get(s)) if s in known else None
        hints[s] = v if v is not None else 8
    return hints
