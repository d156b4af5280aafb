"""Dense layouts in another dimension order (a permuted or channels-last tensor with no gaps): which order a stride
lays a size out in, so that lowering computes such a value in memory order (compiler/lowering/graph.py)."""
from __future__ import annotations

import torch

from compiler.ir.nodes import contiguous_strides
from compiler.ir.size_symbols import shape_of, strides_of
from compiler.lowering.values import hint


def dense_order(size: tuple[int, ...], stride: tuple[int, ...]) -> list[int] | None:
    """The non-unit dims of `size`, outermost first, when `stride` lays them out densely in that order (no
    gaps, no overlap); None otherwise."""
    order = sorted((d for d in range(len(size)) if size[d] != 1), key=lambda d: (-hint(stride[d]), d))
    expect = contiguous_strides(tuple(size[d] for d in order))
    return order if all(stride[d] == e for d, e in zip(order, expect)) else None


def memory_order(size: tuple[int, ...], stride: tuple[int, ...] | None) -> list[int] | None:
    """The dimension order (outermost first, size-1 dims last) in which `stride` lays out `size` densely, when
    that is not the given order; None otherwise (row-major already, or not a dense layout)."""
    if stride is None or 0 in size:
        return None
    order = dense_order(size, stride)
    if order is None or order == [d for d in range(len(size)) if size[d] != 1]:
        return None
    return order + [d for d in range(len(size)) if size[d] == 1]


def dense_stride(meta, size) -> tuple[int, ...] | None:
    """`meta`'s strides when they lay out `size` densely in some dimension order (no gaps, no overlap);
    None (contiguous) otherwise."""
    if not isinstance(meta, torch.Tensor) or shape_of(meta) != tuple(size) or 0 in tuple(size):
        return None
    stride = strides_of(meta)
    return stride if dense_order(tuple(size), stride) is not None else None


def stride_in_order_of(meta, size) -> tuple[int, ...] | None:
    """Dense strides for `size` in `meta`'s dimension order (by its strides, outermost first), when `meta` is a
    view with gaps (a channel slice of a channels-last tensor: `torch.split` hands convolutions those): what an op
    that makes its input dense keeps (`x.contiguous(memory_format=...)`); `dense_stride` where `meta` is dense;
    None (contiguous) otherwise."""
    dense = dense_stride(meta, size)
    if dense is not None or not isinstance(meta, torch.Tensor) or shape_of(meta) != tuple(size) or 0 in tuple(size):
        return dense
    stride = strides_of(meta)
    if not all(_is_int(s) for s in stride) or not all(_is_int(n) for n in size):
        return None
    order = tuple(sorted(range(len(size)), key=lambda d: (-int(stride[d]), d)))
    return _strides_in_order(tuple(size), order)


def channels_last_stride(meta, size) -> tuple[int, ...] | None:
    """`meta`'s strides when it is a 4-d or 5-d tensor laid out channels-last (densely, channels innermost) and
    not also contiguous: the layout eager's ops keep for a channels-last input (a convolution's, batch norm's and
    ReLU's outputs), which a value realized from such inputs should keep too (read and written in one order);
    None otherwise."""
    if not isinstance(meta, torch.Tensor) or meta.dim() not in (4, 5) or shape_of(meta) != tuple(size):
        return None
    fmt = torch.channels_last if meta.dim() == 4 else torch.channels_last_3d
    if meta.is_contiguous() or not meta.is_contiguous(memory_format=fmt):
        return None
    return dense_stride(meta, size)


def channels_last_dense(size) -> tuple[int, ...] | None:
    """Dense channels-last strides of a 4-d `size` of known extents (None otherwise): what an op that makes its
    input channels-last before reading it (`lens.conv2d_onednn`) would copy a contiguous input into."""
    if len(size) != 4 or not all(_is_int(n) for n in size) or 0 in tuple(size):
        return None
    return _strides_in_order(tuple(int(n) for n in size), (0, 2, 3, 1))


def _is_int(v) -> bool:
    return isinstance(v, int) or getattr(v, "is_Integer", False)


def _strides_in_order(size: tuple[int, ...], order: tuple[int, ...]) -> tuple[int, ...]:
    """Dense strides of `size` laid out in `order` (outermost first), size-1 dims included, as ATen computes them."""
    stride, running = [0] * len(size), 1
    for d in reversed(order):
        stride[d] = running
        running *= max(size[d], 1)
    return tuple(stride)


_FORMAT_ORDERS = {4: ((0, 1, 2, 3), (0, 2, 3, 1)), 5: ((0, 1, 2, 3, 4), (0, 2, 3, 4, 1))}


def eager_strides(size: tuple[int, ...], stride: tuple[int, ...]) -> tuple[int, ...]:
    """`stride` with the strides of its size-1 dims as an eager tensor of that memory format has them.

    A size-1 dim's stride never moves an index, so generated code may give it any value; but ATen's kernels choose
    their memory format from all strides (`suggest_memory_format`): a channels-last (1, 64, 56, 56) buffer with
    stride 1 on its batch dim reads as neither format, and `native_group_norm` then refused it (PoolFormer:
    "Expected X.is_contiguous(memory_format)"). Dense layouts in contiguous or channels-last order get the strides
    `torch.empty(..., memory_format=...)` gives; anything else is returned as it is."""
    if len(size) != len(stride) or not all(_is_int(v) for v in (*size, *stride)):
        return tuple(stride)  # (symbolic sizes: left as they are)
    size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
    if 1 not in size or 0 in size:
        return stride
    orders = _FORMAT_ORDERS.get(len(size), (tuple(range(len(size))),))
    for order in orders:
        candidate = _strides_in_order(size, order)
        if all(s == c for s, c, n in zip(stride, candidate, size) if n != 1):
            return candidate
    return stride
