"""Tensor values during lowering: a dtype, a size and a loader (index -> expression), plus the
strided view of a realized buffer when the value is one (so extern calls can take it without a copy).
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Sequence

import sympy
import torch

from compiler.ir.nodes import Cast, Constant, Expr, IndexValue, Load, Loader, Op
from compiler.ir.size_symbols import FloatSize, Size, decide, is_static

# The FX node being lowered: every expression created meanwhile records it as its origin.
current_origin: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_origin", default=None)
# The example value of each of Dynamo's size symbols in the graph being lowered (GraphLowering sets it).
size_hints: contextvars.ContextVar[dict] = contextvars.ContextVar("size_hints", default={})
# Their value ranges (the ShapeEnv's `var_to_range`), which decide comparisons of sizes (`maybe`, `surely`).
size_ranges: contextvars.ContextVar[dict] = contextvars.ContextVar("size_ranges", default={})


def hint(e: Size) -> int:
    """A size's value at the example inputs (a symbol without one counts as 8192). Lowerings order symbolic sizes
    by it only where the result is then checked exactly (a reshape's groups, a dense layout's order)."""
    if is_static(e):
        return int(e)
    hints = size_hints.get()
    try:
        return int(e.xreplace({s: hints.get(s, 8192) for s in e.free_symbols}))
    except (TypeError, ValueError):
        return 8192


def maybe(cond) -> bool:
    """Whether a comparison of sizes may hold (True unless the symbols' ranges say it never does): for
    clamps and bounds checks, which stay correct when applied needlessly."""
    return decide(cond, size_ranges.get()) is not False


def surely(cond) -> bool:
    """Whether a comparison of sizes holds for every value the symbols may take."""
    return decide(cond, size_ranges.get()) is True


def origin() -> str | None:
    return current_origin.get()


class origin_scope:
    """Expressions (and loads) built inside belong to FX node `name`."""

    def __init__(self, name: str | None):
        self.name = name

    def __enter__(self):
        self.token = current_origin.set(self.name)

    def __exit__(self, *exc):
        current_origin.reset(self.token)


class UnsupportedLowering(Exception):
    """This node (or these arguments) cannot be generated; the node becomes an extern ATen call."""


@dataclass(frozen=True)
class StridedView:
    """The value is `as_strided(buffer, size, stride, offset)` of a realized buffer."""

    buffer: str
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int


@dataclass
class TensorValue:
    dtype: torch.dtype
    size: tuple[int, ...]
    loader: Loader
    strided: StridedView | None = None
    # FX nodes whose computation is inlined into this value (for the fusion-size bound)
    inlined: frozenset[str] = frozenset()
    # a lazy value that only reshapes (row-major order kept) another value that is not a plain view of its
    # buffer: realized, it is that value realized in its own shape and read with this one's (the kernel
    # iterates the producer's shape, without divisions in its indices, and fuses with the group computing it)
    reshape_of: TensorValue | None = None

    def load(self, index: Sequence[sympy.Expr]) -> Expr:
        return self.loader(index)


def buffer_value(name: str, dtype: torch.dtype, size: Sequence[int], stride: Sequence[int]) -> TensorValue:
    """A realized buffer read element by element."""
    size = tuple(int(s) if is_static(s) else s for s in size)

    def loader(index: Sequence[sympy.Expr]) -> Expr:
        idx = tuple(sympy.Integer(0) if s == 1 else sympy.sympify(i) for i, s in zip(index, size))
        return Load(dtype, origin(), name, idx)

    return TensorValue(dtype, size, loader, StridedView(name, size, tuple(int(s) if is_static(s) else s
                                                                          for s in stride), 0))


def cast(e: Expr, dtype: torch.dtype) -> Expr:
    if e.dtype == dtype:
        return e
    if isinstance(e, Constant):
        return Constant(dtype, e.origin, _py_cast(e.value, dtype))
    return Cast(dtype, origin(), e)


def _py_cast(v, dtype: torch.dtype):
    if dtype == torch.bool:
        return bool(v)
    if dtype.is_floating_point:
        return float(v)
    return int(v)


def constant(value, dtype: torch.dtype) -> Expr:
    if isinstance(value, FloatSize) and value.terms:  # a float expression of sizes: computed in double, as
        return cast(_float_expr(value.expr, dict(value.terms)), dtype)  # eager's Python scalar is, then converted
    if isinstance(value, FloatSize):  # a size as a float (a mean's divisor): computed as an int, converted
        value = value.expr
    if isinstance(value, sympy.Expr) and not value.is_Number:  # a size symbol's expression (x * s0)
        return cast(IndexValue(torch.int64, origin(), value), dtype)
    return Constant(dtype, origin(), _py_cast(value, dtype))


def _float_expr(e: sympy.Expr, terms: dict) -> Expr:
    """IR computing FloatSize tree `e` in double (symbols.FloatSize: constants, sums, products, integer powers of
    sizes converted to float)."""
    f64 = torch.float64
    if e in terms:
        return constant(terms[e], f64)
    if isinstance(e, sympy.Number):
        return Constant(f64, origin(), float(e))
    if isinstance(e, sympy.Add):
        out = _float_expr(e.args[0], terms)
        for a in e.args[1:]:
            out = Op(f64, origin(), "add", (out, _float_expr(a, terms)))
        return out
    if isinstance(e, sympy.Pow):
        base, n = _float_expr(e.base, terms), int(e.exp)
        out = base
        for _ in range(abs(n) - 1):
            out = Op(f64, origin(), "mul", (out, base))
        return Op(f64, origin(), "div", (Constant(f64, origin(), 1.0), out)) if n < 0 else out
    if isinstance(e, sympy.Mul):
        num = [a for a in e.args if not (isinstance(a, sympy.Pow) and a.exp.is_negative)]
        den = [sympy.Pow(a.base, -a.exp) for a in e.args if isinstance(a, sympy.Pow) and a.exp.is_negative]
        out = _float_expr(num[0], terms) if num else Constant(f64, origin(), 1.0)
        for a in num[1:]:
            out = Op(f64, origin(), "mul", (out, _float_expr(a, terms)))
        for a in den:
            out = Op(f64, origin(), "div", (out, _float_expr(a, terms)))
        return out
    raise TypeError(f"not a float expression of sizes: {e}")


def broadcast_shapes(*sizes: Sequence[Size]) -> tuple[Size, ...]:
    if is_static(sizes):
        return tuple(torch.broadcast_shapes(*[torch.Size(s) for s in sizes]))
    ndim = max(len(s) for s in sizes)
    out: list[Size] = []
    for d in range(ndim):
        dims = {s[d - ndim + len(s)] for s in sizes if d - ndim + len(s) >= 0} - {1}
        if len(dims) > 1:  # (Dynamo guarded them equal, which makes them one expression: not here)
            raise UnsupportedLowering(f"cannot broadcast sizes {list(dims)} symbolically")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_to(v: TensorValue, size: Sequence[int]) -> TensorValue:
    """The value read at `size`-shaped indices (numpy broadcasting)."""
    size = tuple(size)
    if v.size == size:
        return v
    lead = len(size) - len(v.size)
    vsize = v.size

    def loader(index: Sequence[sympy.Expr]) -> Expr:
        idx = [sympy.Integer(0) if s == 1 else i for i, s in zip(list(index)[lead:], vsize)]
        return v.load(idx)

    strided = None
    if v.strided is not None:
        st = v.strided
        stride = [0] * lead + [0 if s == 1 and t != 1 else st.stride[k] for k, (s, t) in
                               enumerate(zip(vsize, size[lead:]))]
        strided = StridedView(st.buffer, size, tuple(stride), st.offset)
    return TensorValue(v.dtype, size, loader, strided, v.inlined)
