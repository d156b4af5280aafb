"""Frozen float32 2-d convolutions through oneDNN with the weight prepacked once, and a unary post-op fused.

`torch.ops.lens.conv2d_onednn(x, weight, bias, padding, stride, dilation, groups, attr, scalars, algorithm)` is
the op compiler/graph_passes/conv_onednn.py puts in frozen inference graphs (generated code calls it as an extern
call): oneDNN's `_convolution_pointwise` (the kernel Inductor's freezing path calls) over a channels-last input,
with the weight reordered into oneDNN's blocked format (`_reorder_convolution_weight`) on its first use instead of on
every call, as ATen's `mkldnn_convolution` does for a plain weight, and an activation (`attr`: relu, hardswish,
swish, gelu, ...) applied by the convolution as it writes its output. The output is channels-last.
`torch.ops.lens.conv2d_onednn_add(x, other, weight, bias, padding, stride, dilation, groups, attr)` is the same
convolution with a residual sum fused: `attr(conv(x) + other)`, attr "none" or "relu".

Which weights are packed: those `register`ed by freezing (its constants); a pack is kept per registered tensor
(weakly: freed with it), input size and geometry, and made again when the tensor's version counter moves (an in-place
change). An unregistered weight is packed on each call (correct, slower). Writes through `p.data` are the one change
no counter shows, as for every frozen constant (`LENS_FREEZING=0`).
"""
from __future__ import annotations

import weakref

import torch

from compiler.machine.weight_packs import PackRegistry

_LIB = torch.library.Library("lens", "DEF")
_LIB.define("conv2d_onednn(Tensor x, Tensor weight, Tensor? bias, int[] padding, int[] stride, int[] dilation, "
            "int groups, str attr, Scalar[] scalars, str algorithm) -> Tensor")
_LIB.define("conv2d_onednn_add(Tensor x, Tensor other, Tensor weight, Tensor? bias, int[] padding, int[] stride, "
            "int[] dilation, int groups, str attr) -> Tensor")
# the activations oneDNN applies after a binary post-op (ATen's `_convolution_pointwise.binary` refuses the others)
ADD_POST_OPS = ("none", "relu")


_PACKS = PackRegistry(lambda t: t.dim() == 4 and t.dtype in (torch.float32, torch.bfloat16))
register = _PACKS.register  # frozen 4-d float32/bfloat16 CPU weights whose convolutions may keep a pack of them
packed_count = _PACKS.packed_count


def _pack(weight, padding, stride, dilation, groups, x_size) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups, x_size)


def _packed(weight: torch.Tensor, padding, stride, dilation, groups: int, x_size: list[int]) -> torch.Tensor:
    packs = _PACKS.packs_of(weight)
    if packs is None:
        return _pack(weight, padding, stride, dilation, groups, x_size)
    key = (weight.data_ptr(), tuple(weight.shape), tuple(weight.stride()), tuple(padding), tuple(stride),
           tuple(dilation), groups, tuple(x_size))
    packed = packs.get(key)
    if packed is None:
        packed = packs[key] = _pack(weight, padding, stride, dilation, groups, x_size)
    return packed


_POINTWISE = torch.ops.mkldnn._convolution_pointwise.default
_BINARY = torch.ops.mkldnn._convolution_pointwise.binary
_CHANNELS_LAST = torch.channels_last


class _Recent:
    """The pack a call site used last: its weight (weakly), version counter, input size and geometry."""
    __slots__ = ("ref", "version", "geometry", "packed")

    def __init__(self, weight, geometry, packed):
        self.ref, self.version, self.geometry, self.packed = weakref.ref(weight), weight._version, geometry, packed


_RECENT: dict[tuple, _Recent] = {}


def _pack_of_call(x, weight, padding, stride, dilation, groups) -> torch.Tensor:
    """The pack a call of `weight` over input `x` uses: the one its call site used last while the registered weight is
    the same tensor at the same version counter (an in-place change packs again); an unregistered weight is packed
    on each call."""
    key = (id(weight), x.shape)
    recent = _RECENT.get(key)
    geometry = (padding, stride, dilation, groups)
    if recent is not None and recent.ref() is weight and recent.version == weight._version \
            and recent.geometry == geometry:
        return recent.packed
    packed = _packed(weight, padding, stride, dilation, groups, list(x.shape))
    if _PACKS.packs_of(weight) is not None:
        if len(_RECENT) > 4096:
            _RECENT.clear()
        _RECENT[key] = _Recent(weight, geometry, packed)
    return packed


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous(memory_format=_CHANNELS_LAST) else t.contiguous(memory_format=_CHANNELS_LAST)


def conv2d(x, weight, bias, padding, stride, dilation, groups, attr, scalars, algorithm):
    """`lens.conv2d_onednn`'s kernel, which output_code.py also calls directly, without the dispatcher's trip into
    Python (~8 us less a call: a conv net makes 60-160 of them); the pack found by the weight's identity."""
    x = _channels_last(x)
    packed = _pack_of_call(x, weight, padding, stride, dilation, groups)
    return _POINTWISE(x, packed, bias, padding, stride, dilation, groups, attr, scalars, algorithm)


def conv2d_add(x, other, weight, bias, padding, stride, dilation, groups, attr):
    """`lens.conv2d_onednn_add`'s kernel: `attr(conv2d(x) + other)` (attr "none" or "relu", the activations oneDNN
    applies after a binary post-op) in one pass, `other` read as the convolution writes its output (a residual
    block's sum: Inductor's freezing fuses the same); `other` is left as it is. Float32: the sum of the same
    float32 accumulator and `other` as a separate add's, so the result is the unfused pair's bit for bit."""
    x, other = _channels_last(x), _channels_last(other)
    packed = _pack_of_call(x, weight, padding, stride, dilation, groups)
    return _BINARY(x, other, packed, bias, padding, stride, dilation, groups, "add", None,
                   None if attr == "none" else attr, [], "")


def _output_size(x, weight, padding, stride, dilation) -> list:
    size = [x.shape[0], weight.shape[0]]
    for d in range(2):
        span = dilation[d] * (weight.shape[2 + d] - 1) + 1
        size.append((x.shape[2 + d] + 2 * padding[d] - span) // stride[d] + 1)
    return size


def _conv2d_onednn_fake(x, weight, bias, padding, stride, dilation, groups, attr, scalars, algorithm):
    return torch.empty(_output_size(x, weight, padding, stride, dilation), dtype=x.dtype, device=x.device,
                       memory_format=torch.channels_last)


def _conv2d_onednn_add_fake(x, other, weight, bias, padding, stride, dilation, groups, attr):
    return _conv2d_onednn_fake(x, weight, bias, padding, stride, dilation, groups, attr, [], "")


_LIB.impl("conv2d_onednn", conv2d, "CPU")  # (the op and output_code.py's direct call: one function)
torch.library.register_fake("lens::conv2d_onednn", _conv2d_onednn_fake, lib=_LIB)
_LIB.impl("conv2d_onednn_add", conv2d_add, "CPU")
torch.library.register_fake("lens::conv2d_onednn_add", _conv2d_onednn_add_fake, lib=_LIB)
CONV2D_ONEDNN = torch.ops.lens.conv2d_onednn.default
CONV2D_ONEDNN_ADD = torch.ops.lens.conv2d_onednn_add.default


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_convolution_pointwise") \
        and hasattr(torch.ops.mkldnn, "_reorder_convolution_weight")
