"""2-d max and average pooling as generated code: each output element combines its window's taps, each tap one load
of the input (clamped into bounds) selected by comparisons of the tap's position with the input's edges (the
comparisons codegen's range splits cut loops at). The taps combine in eager's order (rows, then columns), so the
results are eager's bit for bit: a NaN-propagating max; a sum from zero in float (double for double) divided by
eager's count of the window.

Left to ATen (an extern call, as before): max pooling whose indices something reads (a training graph's backward), a
window of more than MAX_TAPS taps, integer inputs."""
from __future__ import annotations

import operator
from typing import Sequence

import sympy
import torch

from compiler.ir.nodes import IndexValue, Op
from compiler.lowering.pointwise import check_dtype
from compiler.lowering.registry import register
from compiler.lowering.values import TensorValue, UnsupportedLowering, cast, constant, maybe, origin, origin_scope

aten = torch.ops.aten
MAX_TAPS = 25  # the largest window unrolled (5x5); larger ones stay ATen's


def _pair(v, default: Sequence[int] | None = None) -> tuple[int, int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        if default is None:
            raise UnsupportedLowering("pooling without a kernel size")
        return tuple(default)
    if isinstance(v, int):
        return (v, v)
    if len(v) == 1:
        return (int(v[0]), int(v[0]))
    return (int(v[0]), int(v[1]))


def _geometry(ctx, x: TensorValue, kernel, stride, padding, dilation=1):
    if len(x.size) not in (3, 4):
        raise UnsupportedLowering(f"{len(x.size)}-d pooling input")
    if not x.dtype.is_floating_point:
        raise UnsupportedLowering(f"pooling of {x.dtype}")
    check_dtype(x.dtype)
    k = _pair(kernel)
    s, p, d = _pair(stride, k), _pair(padding), _pair(dilation)
    if k[0] * k[1] > MAX_TAPS:
        raise UnsupportedLowering(f"a {k[0]}x{k[1]} window: more than {MAX_TAPS} taps")
    if not all(isinstance(v, int) for v in (*x.size[-2:], *ctx.out_size[-2:])):
        raise UnsupportedLowering("pooling over symbolic spatial sizes")
    return k, s, p, d


def _input(ctx, x: TensorValue) -> TensorValue:
    """`x` as a buffer: a lazy producer would be computed again for every tap."""
    if x.strided is not None:
        return x
    arg = ctx.node.args[0]
    return ctx.graph.realize(x, stride=ctx.graph._layout_of(arg, x), origin=arg.name)


class _Taps:
    """The window of one output element: for each tap, its in-bounds condition (None: always inside) and the
    clamped input index it loads."""

    def __init__(self, x: TensorValue, k, s, p, d, org):
        self.x, self.k, self.s, self.p, self.d, self.org = x, k, s, p, d, org
        self.h, self.w = x.size[-2], x.size[-1]

    def taps(self, index, out_h: int, out_w: int):
        """(in-bounds condition or None, input row, input column) of each tap of the window at `index`, in eager's
        order; whether a tap can fall outside is decided over every output position, not just this one."""
        oh, ow = index[-2], index[-1]
        for i in range(self.k[0]):
            for j in range(self.k[1]):
                ih = oh * self.s[0] - self.p[0] + i * self.d[0]
                iw = ow * self.s[1] - self.p[1] + j * self.d[1]
                conds = [*self._edges(ih, i * self.d[0] - self.p[0], out_h, self.s[0], self.h),
                         *self._edges(iw, j * self.d[1] - self.p[1], out_w, self.s[1], self.w)]
                inside = None
                for c in conds:
                    inside = c if inside is None else Op(torch.bool, self.org, "logical_and", (inside, c))
                yield inside, ih, iw

    def _edges(self, pos, first: int, outs: int, stride: int, length: int) -> list:
        """The comparisons keeping `pos` (= first + stride * output position) inside [0, length)."""
        iv, conds = IndexValue(torch.int64, self.org, pos), []
        if first < 0:
            conds.append(Op(torch.bool, self.org, "ge", (iv, constant(0, torch.int64))))
        if first + stride * (outs - 1) >= length:
            conds.append(Op(torch.bool, self.org, "lt", (iv, constant(length, torch.int64))))
        return conds

    def load(self, index, ih, iw, inside):
        if inside is not None:
            ih, iw = sympy.Max(0, sympy.Min(ih, self.h - 1)), sympy.Max(0, sympy.Min(iw, self.w - 1))
        return self.x.load([*index[:-2], ih, iw])


@register(aten.max_pool2d_with_indices)
def max_pool2d_with_indices(ctx, x: TensorValue, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False) -> tuple[TensorValue, TensorValue]:
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in ctx.node.users):
        raise UnsupportedLowering("max pooling whose indices are read (ATen computes them)")
    k, s, p, d = _geometry(ctx, x, kernel_size, stride, padding, dilation)
    x = _input(ctx, x)
    out_size, org = tuple(ctx.out_size), origin()
    taps = _Taps(x, k, s, p, d, org)
    lowest = constant(float("-inf"), x.dtype)

    def loader(index):
        with origin_scope(org):
            best = None
            for inside, ih, iw in taps.taps(index, out_size[-2], out_size[-1]):
                val = taps.load(index, ih, iw, inside)
                if inside is not None:
                    val = Op(x.dtype, org, "where", (inside, val, lowest))
                best = val if best is None else Op(x.dtype, org, "maximum", (best, val))
            return best

    def no_indices(index):
        raise UnsupportedLowering("max pooling's indices are not generated")

    values = TensorValue(x.dtype, out_size, loader, None, x.inlined | {org})
    return values, TensorValue(torch.int64, out_size, no_indices, None, frozenset({org}))


@register(aten.avg_pool2d)
def avg_pool2d(ctx, x: TensorValue, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None) -> TensorValue:
    k, s, p, d = _geometry(ctx, x, kernel_size, stride, padding)
    x = _input(ctx, x)
    out_size, org, out = tuple(ctx.out_size), origin(), x.dtype
    acc = torch.float64 if out == torch.float64 else torch.float32
    taps = _Taps(x, k, s, p, d, org)
    zero = constant(0, acc)

    def loader(index):
        with origin_scope(org):
            total = zero
            for inside, ih, iw in taps.taps(index, out_size[-2], out_size[-1]):
                val = cast(taps.load(index, ih, iw, inside), acc)
                if inside is not None:
                    val = Op(acc, org, "where", (inside, val, zero))
                total = Op(acc, org, "add", (total, val))
            return cast(Op(acc, org, "div", (total, _divisor(index, x, k, s, p, count_include_pad,
                                                               divisor_override, acc, org))), out)

    return TensorValue(out, out_size, loader, None, x.inlined | {org})


def _divisor(index, x: TensorValue, k, s, p, count_include_pad: bool, divisor_override, acc, org):
    """Eager's count for the window at `index`: the override; else the window clipped to the padded input
    (count_include_pad) or to the input itself."""
    if divisor_override:
        return constant(divisor_override, acc)
    extents = []
    for pos, kk, ss, pp, n in ((index[-2], k[0], s[0], p[0], x.size[-2]), (index[-1], k[1], s[1], p[1], x.size[-1])):
        start = pos * ss - pp
        end = sympy.Min(start + kk, n + pp)
        if not count_include_pad:
            start, end = sympy.Max(start, 0), sympy.Min(end, n)
        extents.append(end - start)
    count = sympy.expand(extents[0] * extents[1])
    if count.is_Number:
        return constant(int(count), acc)
    if not maybe(count != 0):
        raise UnsupportedLowering("an empty pooling window")
    return cast(IndexValue(torch.int64, org, count), acc)
