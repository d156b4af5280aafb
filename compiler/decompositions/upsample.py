"""Interpolation on bfloat16/float16 as ATen's CPU kernel computes it (the decompositions compiler/decompositions/table.py
puts in its table for upsample ops, and `eager_upsample_kernels`, under which AOTAutograd traces): torch's refs
compute source indices and weights in another order and round differently in half precision."""
from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import torch

aten = torch.ops.aten
HALF = (torch.bfloat16, torch.float16)


# -- interpolation on bfloat16/float16 as ATen's CPU kernel computes it ---------------------------------------------
def _upsample_ratio(in_size: int, out_size: int, align_corners: bool, scale) -> float:
    """area_pixel_compute_scale in float: (in - 1) / (out - 1), 1 / scale or in / out"""
    if align_corners:
        return float(np.float32(in_size - 1) / np.float32(out_size - 1)) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return float(np.float32(1.0 / scale))
    return float(np.float32(in_size) / np.float32(out_size))


def _upsample_source_index(x, ratio: float, out_size: int, align_corners: bool, cubic: bool) -> torch.Tensor:
    """area_pixel_compute_source_index: ratio * i, or fma(ratio, i + 0.5, -0.5) (x86 builds contract it), clamped at
    0 unless cubic"""
    i = torch.arange(out_size, device=x.device).to(torch.float32)
    if align_corners:
        return i * ratio
    src = torch.addcmul(torch.full_like(i, -0.5), i + 0.5, torch.full_like(i, ratio))
    return src if cubic else src.clamp(min=0.0)


def _linear_taps(x, in_size: int, out_size: int, align_corners: bool, scale) -> list:
    """HelperInterpLinear's indices and weights: lambda1 = the source index's fraction, lambda0 = 1 - lambda1, each
    stored in x's dtype (rounded)"""
    if in_size == out_size:  # the kernel copies
        i = torch.arange(out_size, device=x.device)
        return [(i, torch.ones(out_size, device=x.device)), (i, torch.zeros(out_size, device=x.device))]
    src = _upsample_source_index(x, _upsample_ratio(in_size, out_size, align_corners, scale), out_size,
                                 align_corners, cubic=False)
    i0 = src.floor().to(torch.int64).clamp(max=in_size - 1)
    l1 = (src - i0).clamp(0.0, 1.0).to(x.dtype).float()
    return [(i0, (1.0 - l1).to(x.dtype).float()), (torch.where(i0 < in_size - 1, i0 + 1, i0), l1)]


def _cubic_taps(x, in_size: int, out_size: int, align_corners: bool, scale) -> list:
    """HelperInterpCubic's 4 indices and weights (get_cubic_upsample_coefficients in float, with the kernel's
    multiply-adds), the weights stored in x's dtype"""
    src = _upsample_source_index(x, _upsample_ratio(in_size, out_size, align_corners, scale), out_size,
                                 align_corners, cubic=True)
    floor = src.floor()
    t = src - floor
    a = -0.75
    def fma(p, q, c: float):
        return torch.addcmul(torch.full_like(q, c), p if isinstance(p, torch.Tensor) else torch.full_like(q, p), q)
    def conv1(v):  # ((A + 2) * v - (A + 3)) * v * v + 1
        return fma(fma(a + 2, v, -(a + 3)) * v, v, 1.0)
    def conv2(v):  # ((A * v - 5A) * v + 8A) * v - 4A: its last step is not contracted (measured)
        return fma(fma(a, v, -5 * a), v, 8 * a) * v - 4 * a

    weights = [conv2(t + 1.0), conv1(t), conv1(1.0 - t), conv2((1.0 - t) + 1.0)]
    base = floor.to(torch.int64)
    return [((base - 1 + j).clamp(0, in_size - 1), w.to(x.dtype).float()) for j, w in enumerate(weights)]


def _interpolate(x, taps: list) -> torch.Tensor:
    """Interpolate<n, ...>::eval: per dimension, outermost first, the taps' t * w summed in float (two taps:
    fma(t0, w0, t1 * w1); more: t0 * w0, then one fma a tap), rounded once to x's dtype."""
    n, xf = len(taps), x.float()

    def dim(d: int, index: list):
        terms = []
        for i, w in taps[d]:
            i, w = i.view(-1, *[1] * (n - 1 - d)), w.view(-1, *[1] * (n - 1 - d))
            terms.append((aten._unsafe_index(xf, [None, None, *index, i]) if d == n - 1 else dim(d + 1, [*index, i]), w))
        if len(terms) == 2:
            return torch.addcmul(terms[1][0] * terms[1][1], terms[0][0], terms[0][1])
        out = terms[0][0] * terms[0][1]
        for t, w in terms[1:]:
            out = torch.addcmul(out, t, w)
        return out

    from torch._prims_common import suggest_memory_format
    return dim(0, []).to(x.dtype).contiguous(memory_format=suggest_memory_format(x))


def _eager_upsample(x, output_size, align_corners: bool, scales, cubic: bool):
    """ATen's generic (non-separable) CPU kernel on a bfloat16/float16 input of static sizes, else None: weights
    rounded to the input's dtype, which torch's decompositions keep in float (up to a 2-ulp difference in
    float16). Trilinear on a channels-last input of more than 3 channels takes ATen's channels-last kernel."""
    sizes = [*x.shape, *output_size]
    if x.dtype not in HALF or not all(isinstance(s, int) for s in sizes) or 0 in sizes or (
            x.dim() == 5 and x.size(1) > 3 and x.is_contiguous(memory_format=torch.channels_last_3d)):
        return None
    tap = _cubic_taps if cubic else _linear_taps
    return _interpolate(x, [tap(x, x.shape[2 + d], output_size[d], align_corners, scales[d])
                            for d in range(len(output_size))])


# -- interpolation of float32/float64 outside autograd: one ATen call ----------------------------------------------
# torch decomposes interpolation into `_unsafe_index` gathers (16 for bicubic), which lens runs as ATen `index` calls
# (it generates no indirect loads): CrossViT's one bicubic resize took 8.8 ms that way, ATen's kernel 1.2 ms; HRNet's
# nearest upsamples 8 ms of its 176. Where no gradient flows through the call, the op stays whole and runs as ATen's
# kernel (exactly eager's result); half inputs keep the decomposition above, training graphs torch's.
_WHOLE = {"upsample_nearest2d": aten.upsample_nearest2d.default, "upsample_bilinear2d": aten.upsample_bilinear2d.default,
          "upsample_bicubic2d": aten.upsample_bicubic2d.default}


WHOLE_OPS = tuple(_WHOLE.values())
_HALF_AS_ATEN = ("upsample_linear1d", "upsample_trilinear3d", "upsample_bicubic2d")  # (the half path above)


def keeps_whole(x: torch.Tensor) -> bool:
    """Whether an interpolation of `x` stays one ATen call: float32/float64, static sizes, no gradient to trace."""
    return (x.dtype in (torch.float32, torch.float64) and not (torch.is_grad_enabled() and x.requires_grad)
            and all(isinstance(s, int) for s in x.shape))


def _whole(name: str, x, output_size, *rest):
    """The op's `.default` overload below autograd and past the Python kernels that decompose it (nearest's is one at
    CompositeImplicitAutograd too): traced as one node (decomposition_table() leaves it whole: `whole_or`)."""
    with torch._C._AutoDispatchBelowAutograd(), torch._C._DisablePythonDispatcher():
        return _WHOLE[name](x, list(output_size), *rest)


def whole_or(decomposition: Callable) -> Callable:
    """A decomposition table's entry for an op kept whole where `keeps_whole` (`_WHOLE`'s, and im2col/col2im)."""
    def run(x, *args, **kwargs):
        return NotImplemented if keeps_whole(x) else decomposition(x, *args, **kwargs)

    return run


def _upsample_vec(original: Callable, cubic: bool, name: str) -> Callable:
    def run(x, output_size, *args):
        from torch._decomp.decompositions import upsample_compute_output_size
        scale_factors = args[-1] if args else None
        osize = upsample_compute_output_size(x.size(), output_size, scale_factors)
        if name in _WHOLE and keeps_whole(x):
            scales = list(scale_factors) if scale_factors else [None] * len(osize)
            return _whole(name, x, osize, *args[:-1], *scales)
        if name not in _HALF_AS_ATEN:
            return original(x, output_size, *args)
        out = _eager_upsample(x, osize, args[0], scale_factors or [None] * len(osize), cubic)
        return original(x, output_size, *args) if out is None else out

    return run


def upsample_default(original: Callable, cubic: bool, name: str) -> Callable:
    def run(x, output_size, *args):
        if name in _WHOLE and keeps_whole(x):
            return _whole(name, x, output_size, *args)
        if name not in _HALF_AS_ATEN:
            return original(x, output_size, *args)
        align_corners, scales = args[0], list(args[1:])
        scales = scales + [None] * (len(output_size) - len(scales))
        out = _eager_upsample(x, list(output_size), align_corners, scales, cubic)
        return original(x, output_size, align_corners, *scales) if out is None else out

    return run


@contextlib.contextmanager
def eager_upsample_kernels():
    """While AOTAutograd traces: F.interpolate's linear, trilinear and bicubic overloads on half inputs as ATen's
    kernel computes them. torch decomposes the `.vec` overloads (and bicubic's `.default`) in Python kernels at
    the Autograd keys, before any decomposition table is consulted, so ours replace those kernels for the trace."""
    from torch._C import DispatchKey
    swapped = []
    for op, cubic in ((aten.upsample_linear1d, False), (aten.upsample_trilinear3d, False),
                      (aten.upsample_bicubic2d, True), (aten.upsample_bilinear2d, False),
                      (aten.upsample_nearest2d, False)):
        for overload, wrap in ((op.vec, _upsample_vec), (op.default, upsample_default)):
            for key in (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd):
                if key in overload.py_kernels:
                    swapped.append((overload, key, overload.py_kernels[key]))
                    overload.py_kernels[key] = wrap(overload.py_kernels[key], cubic, op.__name__.split(".")[-1])
                    overload._dispatch_cache.clear()
    try:
        yield
    finally:
        for overload, key, kernel in reversed(swapped):
            overload.py_kernels[key] = kernel
            overload._dispatch_cache.clear()
