"""Values assembled from pieces: `cat` and `constant_pad_nd` read each output element from the input (or the pad value)
its index falls in, selected by comparisons of that index with constants (the comparisons codegen's range splits cut
loops at: compiler/codegen/range_splits.py)."""
from __future__ import annotations

from typing import Sequence

import sympy
import torch

from compiler.ir.nodes import Op
from compiler.lowering.pointwise import check_dtype
from compiler.lowering.registry import register
from compiler.lowering.values import TensorValue, cast, constant, maybe, origin, origin_scope, surely
from compiler.lowering.views import norm_dim

aten, prims = torch.ops.aten, torch.ops.prims


@register(aten.cat, prims.cat)
def cat(ctx, tensors: list, dim: int = 0) -> TensorValue:
    size = tuple(ctx.out_size)
    dim = norm_dim(dim, len(size))
    # empty inputs (legacy 1-D empties, or 0 rows along dim) add nothing, and must not be loaded
    parts = [t for t in tensors if isinstance(t, TensorValue) and maybe(_numel(t.size) > 0)]
    out, org = ctx.out_dtype, origin()
    check_dtype(out)
    if not parts or surely(sympy.Eq(_numel(size), 0)):
        zero = constant(0, out)
        return TensorValue(out, size, lambda idx: zero, None, frozenset({org}))
    if len(parts) == 1:
        return parts[0] if parts[0].dtype == out else _cast_value(parts[0], out, org)
    offsets, acc = [], 0
    for p in parts:
        offsets.append(acc)
        acc += p.size[dim]

    def loader(index):
        with origin_scope(org):
            return _cat_value(index)

    def _cat_value(index):
        i = index[dim]
        result = None
        for p, off in reversed(list(zip(parts, offsets))):
            idx = list(index)
            # clamped: both sides of the select are evaluated, so every load must stay in bounds
            local = i - off
            if maybe(off > 0):
                local = sympy.Max(0, local)
            if maybe(off + p.size[dim] < size[dim]):
                local = sympy.Min(local, p.size[dim] - 1)
            idx[dim] = local
            val = cast(p.load(idx), out)
            if result is None:
                result = val
            else:
                cond = Op(torch.bool, org, "lt", (_index_value(i, org), constant(off + p.size[dim], torch.int64)))
                result = Op(out, org, "where", (cond, val, result))
        return result

    inlined = frozenset().union(*[p.inlined for p in parts]) | {org}
    return TensorValue(out, size, loader, None, inlined)


def _numel(size: Sequence[int]) -> int:
    n = 1
    for s in size:
        n *= s
    return n


def _cast_value(v: TensorValue, dtype: torch.dtype, org) -> TensorValue:
    def loader(index):
        with origin_scope(org):
            return cast(v.load(index), dtype)

    return TensorValue(dtype, v.size, loader, None, v.inlined | {org})


def _index_value(expr, org):
    from compiler.ir.nodes import IndexValue
    return IndexValue(torch.int64, org, expr)


@register(aten.constant_pad_nd)
def constant_pad_nd(ctx, x: TensorValue, pad: Sequence[int], value=0) -> TensorValue:
    size = tuple(ctx.out_size)
    n = len(size)
    lows = [0] * n
    for k in range(len(pad) // 2):
        lows[n - 1 - k] = pad[2 * k]
    out, org = ctx.out_dtype, origin()
    check_dtype(out)
    fill = constant(value, out)
    if _numel(x.size) == 0:  # nothing to load: all padding
        return TensorValue(out, size, lambda idx: fill, None, frozenset({org}))

    def loader(index):
        with origin_scope(org):
            return _pad_value(index)

    def _pad_value(index):
        idx = [i - lo for i, lo in zip(index, lows)]
        conds = []
        for d, (i, lo) in enumerate(zip(index, lows)):
            if size[d] != x.size[d] or lo:
                iv = _index_value(i, org)
                conds.append(Op(torch.bool, org, "ge", (iv, constant(lo, torch.int64))))
                conds.append(Op(torch.bool, org, "lt", (iv, constant(lo + x.size[d], torch.int64))))
        if not conds:
            return cast(x.load(idx), out)
        cond = conds[0]
        for c in conds[1:]:
            cond = Op(torch.bool, org, "logical_and", (cond, c))
        safe = [sympy.Max(0, sympy.Min(i, s - 1)) if maybe(s > 1) else sympy.Integer(0) for i, s in zip(idx, x.size)]
        return Op(out, org, "where", (cond, cast(x.load(safe), out), fill))

    return TensorValue(out, size, loader, None, x.inlined | {org})
