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
