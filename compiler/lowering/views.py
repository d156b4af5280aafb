"""View lowerings as index rewrites (no copies): view/reshape, permute, expand, (un)squeeze, slice,
select, cat, constant_pad_nd, broadcast_in_dim. The strided view of the base is kept when there is one.
"""
from __future__ import annotations

from typing import Sequence

import sympy
import torch

from compiler.ir.index_functions import FloorDiv, ModularIndexing
from compiler.ir.nodes import contiguous_strides
from compiler.ir.size_symbols import is_static, same_size
from compiler.lowering.registry import register
from compiler.lowering.values import (
    StridedView,
    TensorValue,
    UnsupportedLowering,
    broadcast_to,
    hint,
    maybe,
    surely,
)

aten, prims = torch.ops.aten, torch.ops.prims


def norm_dim(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


def _view(v: TensorValue, size: tuple[int, ...], loader, strided: StridedView | None) -> TensorValue:
    return TensorValue(v.dtype, size, loader, strided, v.inlined)


@register(aten.view, aten.reshape, aten._unsafe_view, prims.reshape, aten.view_copy, aten._reshape_alias)
def reshape(ctx, x: TensorValue, *args, **kwargs) -> TensorValue:
    return reshape_value(x, tuple(ctx.out_size))


def reshape_value(x: TensorValue, new: tuple[int, ...]) -> TensorValue:
    """The same elements in row-major order, seen with shape `new`."""
    old = x.size
    if new == old:
        return x
    new_strides = contiguous_strides(new)
    # each run of dims with its strides inside the run: only dims that merge or split need division
    groups = [(old_dims, contiguous_strides(tuple(old[d] for d in old_dims)),
               new_dims, contiguous_strides(tuple(new[d] for d in new_dims)))
              for old_dims, new_dims in _reshape_groups(old, new)]

    def loader(index):
        base: list[sympy.Expr] = [sympy.Integer(0)] * len(old)
        for old_dims, old_inner, new_dims, inner in groups:
            flat = sum((index[d] * s for d, s in zip(new_dims, inner)), sympy.Integer(0))
            for k, (d, st) in enumerate(zip(old_dims, old_inner)):
                base[d] = flat if len(old_dims) == 1 else (
                    FloorDiv(flat, st) if k == 0 else ModularIndexing(flat, st, old[d]))
        return x.load(base)

    strided = None
    if x.strided is not None:
        stride = new_strides if _is_contiguous(x.strided) else view_strides(old, x.strided.stride, new)
        if stride is not None:
            strided = StridedView(x.strided.buffer, new, stride, x.strided.offset)
    view = _view(x, new, loader, strided)
    if strided is None:  # not a view of a buffer: realized, the source is computed in its own shape
        view.reshape_of = x.reshape_of or x
    return view


def view_strides(old: tuple[int, ...], stride: Sequence[int], new: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides that show `old` (with `stride`) as `new` without a copy, as `Tensor.view` finds them; None when
    the reshape must copy. Each run of old dims that lies in memory as one block (every dim's stride the next
    one's times its size) may be split and merged freely; a new dim must not straddle two runs."""
    if 0 in old or 0 in new:
        return contiguous_strides(new)
    out = [0] * len(new)
    v = len(new) - 1
    block_stride, block_numel, view_numel = stride[-1] if old else 1, 1, 1
    for d in range(len(old) - 1, -1, -1):
        block_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and not same_size(stride[d - 1], block_numel * block_stride)):
            while v >= 0 and (hint(view_numel) < hint(block_numel) or new[v] == 1):
                out[v] = view_numel * block_stride
                view_numel *= new[v]
                v -= 1
            if not same_size(view_numel, block_numel):
                return None
            if d > 0:
                block_stride, block_numel, view_numel = stride[d - 1], 1, 1
    return tuple(out) if v == -1 else None


def _reshape_groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """Runs of old and new dims with equal products (size-1 dims left out: an old one reads index 0, a new
    one adds nothing). (8, 256, 512) -> (2048, 512) gives [([0, 1], [0]), ([2], [1])]."""
    o = [d for d, s in enumerate(old) if s != 1]
    n = [d for d, s in enumerate(new) if s != 1]
    if 0 in old or 0 in new or not o or not n:
        return [(o, n)] if o and n else []
    groups, i, j = [], 0, 0
    while i < len(o) and j < len(n):
        gi, gj = [o[i]], [n[j]]
        po, pn = old[o[i]], new[n[j]]
        while not same_size(po, pn):  # (symbolic sizes: by their example values; the groups' products
            if hint(po) < hint(pn):  # are equal expressions, or the loop runs out of dims: IndexError)
                i += 1
                gi.append(o[i])
                po *= old[o[i]]
            else:
                j += 1
                gj.append(n[j])
                pn *= new[n[j]]
        groups.append((gi, gj))
        i, j = i + 1, j + 1
    return groups


def _is_contiguous(st: StridedView) -> bool:
    return all(a == b for a, b, s in zip(st.stride, contiguous_strides(st.size), st.size) if s != 1)


@register(aten.permute, prims.transpose)
def permute(ctx, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    return permute_value(x, dims)


def permute_value(x: TensorValue, dims: Sequence[int]) -> TensorValue:
    n = len(x.size)
    dims = [norm_dim(d, n) for d in dims]
    size = tuple(x.size[d] for d in dims)

    def loader(index):
        base = [sympy.Integer(0)] * n
        for out_pos, d in enumerate(dims):
            base[d] = index[out_pos]
        return x.load(base)

    strided = None
    if x.strided is not None:
        strided = StridedView(x.strided.buffer, size, tuple(x.strided.stride[d] for d in dims), x.strided.offset)
    return _view(x, size, loader, strided)


@register(aten.transpose)
def transpose(ctx, x: TensorValue, d0: int, d1: int) -> TensorValue:
    n = len(x.size)
    dims = list(range(n))
    if n:
        d0, d1 = norm_dim(d0, n), norm_dim(d1, n)
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(ctx, x, dims)


@register(aten.t)
def t(ctx, x: TensorValue) -> TensorValue:
    return transpose(ctx, x, 0, 1) if len(x.size) == 2 else x


@register(aten.expand, aten.expand_copy, prims.broadcast_in_dim)
def expand(ctx, x: TensorValue, *args, **kwargs) -> TensorValue:
    size = tuple(ctx.out_size)
    if ctx.node.target.overloadpacket is prims.broadcast_in_dim:
        dims = list(args[1])
        inner = [1] * len(size)
        for k, d in enumerate(dims):
            inner[d] = x.size[k]
        x = reshape_to(x, tuple(inner))
    return broadcast_to(x, size)


def reshape_to(x: TensorValue, size: tuple[int, ...]) -> TensorValue:
    """Insert/remove size-1 dims only (same elements in the same order)."""
    if size == x.size:
        return x
    keep_in = [i for i, s in enumerate(x.size) if s != 1]
    keep_out = [i for i, s in enumerate(size) if s != 1]
    assert [x.size[i] for i in keep_in] == [size[i] for i in keep_out], (x.size, size)

    def loader(index):
        base = [sympy.Integer(0)] * len(x.size)
        for i, o in zip(keep_in, keep_out):
            base[i] = index[o]
        return x.load(base)

    strided = None
    if x.strided is not None:
        stride = [0] * len(size)
        for i, o in zip(keep_in, keep_out):
            stride[o] = x.strided.stride[i]
        strided = StridedView(x.strided.buffer, size, tuple(stride), x.strided.offset)
    return _view(x, size, loader, strided)


@register(aten.unsqueeze, aten.squeeze, prims.squeeze)
def squeeze_unsqueeze(ctx, x: TensorValue, *args) -> TensorValue:
    return reshape_to(x, tuple(ctx.out_size))


@register(aten.slice, aten.slice_copy)
def slice_(ctx, x: TensorValue, dim: int = 0, start=None, end=None, step: int = 1) -> TensorValue:
    n = len(x.size)
    dim = norm_dim(dim, n)
    size = tuple(ctx.out_size)
    length = x.size[dim]
    start = 0 if start is None else start
    if isinstance(start, int) and isinstance(length, int):
        start = max(0, min(length, start + length if start < 0 else start))
    elif isinstance(start, int) and start >= 0:
        pass  # (a start past a symbolic length leaves no elements: the output's size says so, nothing is read)
    else:
        start = _slice_start(start, end, step, length, size[dim])
    return _narrow(x, dim, start, size, step)


def _narrow(x: TensorValue, dim: int, start, size: tuple, step: int = 1) -> TensorValue:
    """`x`'s elements start, start + step, ... along `dim` (`size` the result's): a view, read in place."""
    def loader(index):
        idx = list(index)
        idx[dim] = start + step * idx[dim]
        return x.load(idx)

    strided = None
    if x.strided is not None:
        st = x.strided
        stride = list(st.stride)
        stride[dim] *= step
        strided = StridedView(st.buffer, size, tuple(stride), st.offset + start * st.stride[dim])
    return _view(x, size, loader, strided)


@register(aten.split_with_sizes, aten.split_with_sizes_copy, aten.split.Tensor, aten.split_copy.Tensor)
def split(ctx, x: TensorValue, sizes, dim: int = 0) -> tuple[TensorValue, ...]:
    """`torch.split`'s pieces as views of `x` (an ATen call would make `x` a buffer of its own first; as views, a
    piece a convolution needs dense is computed into a buffer of its own from what `x` is computed from)."""
    dim = norm_dim(dim, len(x.size))
    length = x.size[dim]
    if isinstance(sizes, int):  # (split.Tensor: pieces of `sizes` each, the last one shorter)
        if not isinstance(length, int) or sizes <= 0:
            raise UnsupportedLowering("split of a symbolic length")
        sizes = [min(sizes, length - s) for s in range(0, length, sizes)] or [0]
    if not all(isinstance(n, int) for n in sizes) or not isinstance(length, int) or sum(sizes) != length:
        raise UnsupportedLowering("split into symbolic sizes")
    pieces, start = [], 0
    for n in sizes:
        size = tuple(n if d == dim else s for d, s in enumerate(x.size))
        pieces.append(_narrow(x, dim, start, size))
        start += n
    return tuple(pieces)


@register(aten.select, aten.select_copy)
def select(ctx, x: TensorValue, dim: int, i: int) -> TensorValue:
    n = len(x.size)
    dim = norm_dim(dim, n)
    i = _position(i, x.size[dim])
    if i is None:
        raise UnsupportedLowering("select at a symbolic index whose sign the sizes' ranges do not decide")
    size = x.size[:dim] + x.size[dim + 1:]

    def loader(index):
        idx = list(index)
        idx.insert(dim, sympy.sympify(i))
        return x.load(idx)

    strided = None
    if x.strided is not None:
        st = x.strided
        strided = StridedView(st.buffer, size, st.stride[:dim] + st.stride[dim + 1:],
                              st.offset + i * st.stride[dim])
    return _view(x, size, loader, strided)


def _position(i, length):
    """Index `i` of a dim of `length` counted from its start (a negative one counts from the end), decided
    without a guard: None where `i` is symbolic and its sign is not known from the symbols' ranges."""
    if is_static(i) and is_static(length):
        return int(i) + int(length) if int(i) < 0 else int(i)
    i = sympy.sympify(i)
    if surely(i >= 0):
        return i
    return i + length if surely(i < 0) else None


def _slice_start(start, end, step: int, length, out):
    """Where a slice from a symbolic `start` begins in its dim of `length` (a negative start counts from the end,
    then it is clamped to [0, length]): from the start's sign where the ranges decide it, else, for a slice by
    one element, as its end less its output size `out` (torch's own count of its elements)."""
    pos = _position(start, length)
    if pos is not None:
        return sympy.Max(0, pos) if maybe(sympy.sympify(pos) < 0) else pos
    if step == 1:
        stop = length if end is None or (is_static(end) and int(end) >= 2 ** 62) else _position(end, length)
        if stop is not None:
            stop = sympy.Min(length, stop) if maybe(sympy.sympify(stop) > length) else stop
            return sympy.expand(stop - out)
    raise UnsupportedLowering("slice from a symbolic start whose sign the sizes' ranges do not decide")
