"""Frozen bfloat16 Linear layers as one oneDNN call over the weight's blocked copy, the activation after them
fused.

`torch.ops.lens.linear_onednn(x, weight, bias, attr, scalars, algorithm)` is the op compiler/graph_passes/
linear_onednn.py puts in frozen inference graphs for a Linear layer computed in bfloat16 where oneDNN computes it
natively (gemm_half.py `packs_weights`: a bfloat16 autocast model on a CPU with AVX512-BF16 or AMX). Generated code
calls `linear` below directly: oneDNN's `_linear_pointwise` (the kernel Inductor's freezing path calls) from the
weight's blocked copy (gemm_packed.py `onednn_weight`, made on its first use), with an activation that was the Linear's
only reader (`attr`: gelu, relu, swish, ...) applied by oneDNN as it writes the product, where it was a kernel of its
own reading the product back (ConvNeXt-B's 36 GELUs, a transformer's MLP). The activation then reads the float32
accumulator rather than the product rounded to bfloat16, as Inductor's fused call does: within a rounding of eager's
result, never further. The call skips gemm.py's per-product checks, which the graph pass made once.
"""
from __future__ import annotations

import torch

from compiler.machine import gemm, gemm_packed
from compiler.machine.weight_packs import RecentPack

_LIB = torch.library.Library("lens", "FRAGMENT")
_LIB.define("linear_onednn(Tensor x, Tensor weight, Tensor? bias, str attr, Scalar[] scalars, str algorithm) "
            "-> Tensor")
_profiling = torch._C._autograd._profiler_enabled


def linear(x, weight, bias, attr, scalars, algorithm):
    """`lens.linear_onednn`'s kernel, which output_code.py calls directly: `attr(x @ weight.T + bias)` in x's dtype,
    of shape (*x.shape[:-1], weight.shape[0]), contiguous. The profiler sees each call as PROFILER_NAMES'."""
    if _profiling():
        with torch.profiler.record_function(PROFILER_NAMES[LINEAR_ONEDNN]):
            return _linear(x, weight, bias, attr, scalars, algorithm)
    return _linear(x, weight, bias, attr, scalars, algorithm)


# (id(weight), rows) -> the oneDNN weight that call site's products used last, without gemm_packed's lookup (a
# transformer makes ~50-100 of these calls a forward, each a few us of Python); an entry goes with its weight
_RECENT: dict[tuple[int, int], RecentPack] = {}


def _weight_for(weight: torch.Tensor, m: int) -> torch.Tensor:
    """The oneDNN weight for products of `m` rows: the pack gemm_packed.py keeps for a registered weight (made again
    after an in-place change), else the weight itself (oneDNN reorders it on each call)."""
    key = (id(weight), m)
    recent = _RECENT.get(key)
    if recent is not None and recent.serves(weight, None):
        return recent.packed
    packed = gemm_packed.onednn_weight(weight.t(), m)
    if packed is None:
        return weight
    if len(_RECENT) > 4096:
        _RECENT.clear()
    _RECENT[key] = RecentPack(weight, None, packed, lambda _, key=key: _RECENT.pop(key, None))
    return packed


def _linear(x, weight, bias, attr, scalars, algorithm):
    n, k = weight.shape
    a = x if x.dim() == 2 else x.reshape(-1, k)
    if not a.is_contiguous():
        a = a.contiguous()
    m = a.shape[0]
    if m == 0:
        return x.new_empty((*x.shape[:-1], n))
    out = gemm.linear_into(a, _weight_for(weight, m), bias, (m, n), (n, 1), attr, scalars, algorithm)
    return out if x.dim() == 2 else out.view(*x.shape[:-1], n)


def _linear_onednn_fake(x, weight, bias, attr, scalars, algorithm):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


_LIB.impl("linear_onednn", _linear, "CPU")
torch.library.register_fake("lens::linear_onednn", _linear_onednn_fake, lib=_LIB)
LINEAR_ONEDNN = torch.ops.lens.linear_onednn.default
# what torch.profiler calls the op's calls (compiler/tools/profiling.py times an extern call by it)
PROFILER_NAMES = {LINEAR_ONEDNN: "lens::linear_onednn"}
