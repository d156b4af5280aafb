"""Frozen float32 and bfloat16 2-d convolutions through oneDNN with the weight prepacked once, and a unary post-op fused.

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

import torch

from compiler.machine import conv_train, onednn_direct, winograd
from compiler.machine.weight_packs import PackRegistry, RecentPack

_LIB = torch.library.Library("lens", "DEF")
_LIB.define("conv2d_onednn(Tensor x, Tensor weight, Tensor? bias, int[] padding, int[] stride, int[] dilation, "
            "int groups, str attr, Scalar[] scalars, str algorithm) -> Tensor")
_LIB.define("conv2d_onednn_add(Tensor x, Tensor other, Tensor weight, Tensor? bias, int[] padding, int[] stride, "
            "int[] dilation, int groups, str attr) -> Tensor")
# the activations oneDNN applies after a binary post-op (ATen's `_convolution_pointwise.binary` refuses the others)
ADD_POST_OPS = ("none", "relu")


_PACKS = PackRegistry(lambda t: t.dim() == 4 and t.dtype in (torch.float32, torch.bfloat16))


def register(tensors) -> None:
    """Marks frozen 4-d float32/bfloat16 CPU weights as ones whose convolutions may keep a pack of them (and, given
    one, starts building onednn_direct.py's helper, so that it is there by the first call; a graph without
    convolution weights builds nothing)."""
    tensors = list(tensors)
    _PACKS.register(tensors)
    if any(isinstance(t, torch.Tensor) and t.dim() == 4 for t in tensors):
        onednn_direct.available()
        winograd.available()


packed_count = _PACKS.packed_count


def _pack(weight, padding, stride, dilation, groups, x_size) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_convolution_weight(weight, padding, stride, dilation, groups, x_size)


_POINTWISE = torch.ops.mkldnn._convolution_pointwise.default
_BINARY = torch.ops.mkldnn._convolution_pointwise.binary
_CHANNELS_LAST = torch.channels_last
_profiling = torch._C._autograd._profiler_enabled


_RECENT: dict[tuple, RecentPack] = {}  # (id(weight), input size) -> the pack that call site used last


def _pack_of_call(x, weight, padding, stride, dilation, groups, post: tuple):
    """The pack a call of `weight` over input `x` uses: the one its call site used last while the registered weight is
    the same tensor at the same version counter (an in-place change packs again); an unregistered weight is packed
    on each call. A registered weight's pack is a whole primitive where onednn_direct.py can make one (its post-ops
    and dtypes `post`, (attr, scalars, algorithm, x's dtype, the bias's dtype or None, add, attr after the sum),
    are part of it and of its key)."""
    key = (id(weight), x.shape)
    recent = _RECENT.get(key)
    geometry = (padding, stride, dilation, groups, post)
    if recent is not None and recent.serves(weight, geometry):
        return recent.packed
    packs = _PACKS.packs_of(weight)
    if packs is None:
        return _pack(weight, padding, stride, dilation, groups, list(x.shape))
    pack_key = (weight.data_ptr(), tuple(weight.shape), tuple(weight.stride()), tuple(padding), tuple(stride),
                tuple(dilation), groups, tuple(x.shape), post)
    packed = packs.get(pack_key)
    if packed is None:
        packed = _make(x, weight, padding, stride, dilation, groups, post)
        if (type(packed) not in _PRIMITIVES and onednn_direct.pending()) or (
                type(packed) is not winograd.Convolution and winograd.pending()
                and winograd.takes(x.shape, weight, stride, dilation, groups, _output_size(x, weight, padding, stride,
                                                                                          dilation))):
            return packed  # (the helper that would make it is still being built: this call's pack, none kept)
        packs[pack_key] = packed
    if len(_RECENT) > 4096:
        _RECENT.clear()
    _RECENT[key] = RecentPack(weight, geometry, packed)
    return packed


def _make(x, weight, padding, stride, dilation, groups, post: tuple):
    """Winograd's convolution (winograd.py) or a primitive of onednn_direct.py for these arguments where either takes
    them, else oneDNN's reordered weight."""
    attr, scalars, algorithm, dtype, bias_dtype, add, post_attr = post
    if dtype == weight.dtype and onednn_direct.takes(dtype):
        arguments = (list(x.shape), weight, bias_dtype, padding, stride, dilation, groups, attr, scalars, algorithm,
                     _output_size(x, weight, padding, stride, dilation), add, post_attr)
        for kind in _PRIMITIVES:
            made = kind.make(*arguments)
            if made is not None:
                return made
    return _pack(weight, padding, stride, dilation, groups, list(x.shape))


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    return t if t.is_contiguous(memory_format=_CHANNELS_LAST) else t.contiguous(memory_format=_CHANNELS_LAST)


_DIRECT = onednn_direct.Convolution
# what a pack may be besides oneDNN's reordered weight: a whole convolution with `fits` and `run`, the first to take
# a call's arguments
_PRIMITIVES = (winograd.Convolution, _DIRECT)


def _dtype(bias) -> torch.dtype | None:
    return None if bias is None else bias.dtype


def _weight_of(packed, weight, padding, stride, dilation, groups, x) -> torch.Tensor:
    """The oneDNN weight ATen's op takes: the pack, or (a primitive's arguments it cannot take) one packed now."""
    return _pack(weight, padding, stride, dilation, groups, list(x.shape)) if type(packed) in _PRIMITIVES else packed


def conv2d(x, weight, bias, padding, stride, dilation, groups, attr, scalars, algorithm):
    """`lens.conv2d_onednn`'s kernel, which output_code.py also calls directly, without the dispatcher's trip into
    Python (~8 us less a call: a conv net makes 60-160 of them); the pack found by the weight's identity. The
    profiler sees each call as PROFILER_NAMES' (compiler/tools/profiling.py times it by that name)."""
    if _profiling():
        with torch.profiler.record_function(PROFILER_NAMES[CONV2D_ONEDNN]):
            return _conv2d(x, weight, bias, padding, stride, dilation, groups, attr, scalars, algorithm)
    return _conv2d(x, weight, bias, padding, stride, dilation, groups, attr, scalars, algorithm)


def _conv2d(x, weight, bias, padding, stride, dilation, groups, attr, scalars, algorithm):
    x = _channels_last(x)
    packed = _pack_of_call(x, weight, padding, stride, dilation, groups,
                           (attr, tuple(scalars), algorithm, x.dtype, _dtype(bias), False, "none"))
    if type(packed) in _PRIMITIVES and packed.fits(x, bias):
        return packed.run(x, bias)
    return _POINTWISE(x, _weight_of(packed, weight, padding, stride, dilation, groups, x), bias, padding, stride,
                      dilation, groups, attr, scalars, algorithm)


def conv2d_add(x, other, weight, bias, padding, stride, dilation, groups, attr):
    """`lens.conv2d_onednn_add`'s kernel: `attr(conv2d(x) + other)` (attr "none" or "relu", the activations oneDNN
    applies after a binary post-op) in one pass, `other` read as the convolution writes its output (a residual
    block's sum: Inductor's freezing fuses the same); `other` is left as it is. Float32: the sum of the same
    float32 accumulator and `other` as a separate add's, so the result is the unfused pair's bit for bit; bfloat16:
    `other` joins the float32 accumulator before the one rounding to bfloat16."""
    if _profiling():
        with torch.profiler.record_function(PROFILER_NAMES[CONV2D_ONEDNN_ADD]):
            return _conv2d_add(x, other, weight, bias, padding, stride, dilation, groups, attr)
    return _conv2d_add(x, other, weight, bias, padding, stride, dilation, groups, attr)


def _conv2d_add(x, other, weight, bias, padding, stride, dilation, groups, attr):
    x, other = _channels_last(x), _channels_last(other)
    packed = _pack_of_call(x, weight, padding, stride, dilation, groups,
                           ("none", (), "", x.dtype, _dtype(bias), True, attr))
    if type(packed) in _PRIMITIVES and packed.fits(x, bias, other):
        return packed.run(x, bias, other)
    return _BINARY(x, other, _weight_of(packed, weight, padding, stride, dilation, groups, x), bias, padding,
                   stride, dilation, groups, "add", None, None if attr == "none" else attr, [], "")


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


_LIB.impl("conv2d_onednn", _conv2d, "CPU")  # (the dispatcher records the op under its name itself)
torch.library.register_fake("lens::conv2d_onednn", _conv2d_onednn_fake, lib=_LIB)
_LIB.impl("conv2d_onednn_add", _conv2d_add, "CPU")
torch.library.register_fake("lens::conv2d_onednn_add", _conv2d_onednn_add_fake, lib=_LIB)
CONV2D_ONEDNN = torch.ops.lens.conv2d_onednn.default
CONV2D_ONEDNN_ADD = torch.ops.lens.conv2d_onednn_add.default
# what torch.profiler calls each op's calls, whichever way they ran (a primitive of onednn_direct.py, or ATen's op)
# (and training graphs' convolution_backward, which generated code calls through conv_train.py)
PROFILER_NAMES = {CONV2D_ONEDNN: "lens::conv2d_onednn", CONV2D_ONEDNN_ADD: "lens::conv2d_onednn_add",
                  **conv_train.PROFILER_NAMES}


def available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_convolution_pointwise") \
        and hasattr(torch.ops.mkldnn, "_reorder_convolution_weight")
