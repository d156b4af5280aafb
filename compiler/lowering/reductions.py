"""Reduction lowerings: sum, prod, amax, amin, argmax, argmin, any, all, max/min.dim, and prims.var
(two passes: mean, then the sum of squared deviations). Each reduction becomes a buffer of its own."""
from __future__ import annotations

from typing import Sequence

import sympy
import torch

from compiler.lowering.pointwise import check_dtype, elementwise, to_dtype
from compiler.lowering.registry import register
from compiler.lowering.values import TensorValue, UnsupportedLowering, cast, origin, origin_scope
from compiler.lowering.views import reshape_value

aten, prims = torch.ops.aten, torch.ops.prims


def _dims(dims, ndim: int) -> list[int]:
    if ndim == 0:  # a 0-d tensor reduced over dim 0 or -1 (or all dims): one element, no loop
        return []
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d + ndim if d < 0 else d for d in dims})


def reduce(ctx, x: TensorValue, dims, keepdim: bool, rtype: str, out_dtype: torch.dtype,
           value_dtype: torch.dtype | None = None) -> TensorValue:
    """A realized reduction of `x` over `dims`; the value is cast to `value_dtype` before combining."""
    n = len(x.size)
    dims = _dims(dims, n)
    value_dtype = value_dtype or out_dtype
    check_dtype(x.dtype)
    check_dtype(out_dtype)
    check_dtype(value_dtype)
    kept = [d for d in range(n) if d not in dims]
    out_size = tuple(1 if d in dims else x.size[d] for d in range(n)) if keepdim else tuple(x.size[d] for d in kept)
    ranges = tuple(x.size[d] for d in dims)

    org = origin()

    def loader(index: Sequence[sympy.Expr], rindex: Sequence[sympy.Expr]):
        with origin_scope(org):
            return _value(index, rindex)

    def _value(index, rindex):
        full = [sympy.Integer(0)] * n
        out_pos = [d for d in range(n)] if keepdim else kept
        for pos, d in enumerate(out_pos):
            if d in kept:
                full[d] = index[pos]
        for k, d in enumerate(dims):
            full[d] = rindex[k]
        return cast(x.load(full), value_dtype)

    return ctx.realize_reduction(out_dtype, out_size, ranges, rtype, loader, x.inlined)


@register(aten.sum, prims.sum, aten.prod, prims.prod)
def _sum(ctx, x, dims=None, keepdim=False, *, dtype=None, output_dtype=None):
    rtype = "sum" if ctx.node.target.overloadpacket in (aten.sum, prims.sum) else "prod"
    return reduce(ctx, x, dims, keepdim, rtype, ctx.out_dtype)


@register(aten.amax, aten.amin, prims.amax, prims.amin)
def _amax(ctx, x, dims=None, keepdim=False):
    rtype = "max" if ctx.node.target.overloadpacket in (aten.amax, prims.amax) else "min"
    return reduce(ctx, x, dims, keepdim, rtype, ctx.out_dtype)


@register(aten.any, aten.all)
def _any(ctx, x, dims=None, keepdim=False):
    rtype = "any" if ctx.node.target.overloadpacket is aten.any else "all"
    return reduce(ctx, x, dims, keepdim, rtype, ctx.out_dtype, torch.bool)


@register(aten.argmax, aten.argmin)
def _argmax(ctx, x, dim=None, keepdim=False):
    rtype = "argmax" if ctx.node.target.overloadpacket is aten.argmax else "argmin"
    if dim is None:
        numel = 1
        for s in x.size:
            numel *= s
        out = reduce(ctx, reshape_value(x, (numel,)), [0], False, rtype, torch.int64, x.dtype)
        return reshape_value(out, tuple(ctx.out_size))
    return reduce(ctx, x, [dim], keepdim, rtype, torch.int64, x.dtype)


@register(aten.max, aten.min)
def _max_min(ctx, x, dim=None, keepdim=False):
    is_max = ctx.node.target.overloadpacket is aten.max
    if dim is None or isinstance(dim, TensorValue):
        if isinstance(dim, TensorValue):
            return elementwise("maximum" if is_max else "minimum", [x, dim], ctx.out_dtype)
        return reduce(ctx, x, None, False, "max" if is_max else "min", x.dtype)
    values = reduce(ctx, x, [dim], keepdim, "max" if is_max else "min", x.dtype)
    indices = reduce(ctx, x, [dim], keepdim, "argmax" if is_max else "argmin", torch.int64, x.dtype)
    return (values, indices)


@register(prims.var)
def _var(ctx, x, dims, correction=1.0, *, output_dtype=None):
    out = ctx.out_dtype
    n = 1
    for d in _dims(dims, len(x.size)):
        n *= x.size[d]
    xf = to_dtype(x, out)
    total = reduce(ctx, xf, dims, True, "sum", out)
    if not isinstance(n, int):  # a symbolic count: divided by at run time (integer corrections only)
        if correction != int(correction):
            raise UnsupportedLowering(f"var over a symbolic count {n} with correction {correction}")
        denominator = sympy.Max(n - int(correction), 0)
    else:
        n, denominator = float(n), float(max(n - correction, 0))
    mean = elementwise("div", [total, n], out)
    dev = elementwise("sub", [xf, mean], out)
    sq = reduce(ctx, elementwise("mul", [dev, dev], out), dims, False, "sum", out)
    return elementwise("div", [sq, denominator], out)
