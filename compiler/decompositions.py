"""The decomposition table AOTAutograd traces with: core ATen decompositions, the composite ops we would
rather fuse than call, and our own versions where eager's kernel computes differently from torch's refs."""
from __future__ import annotations

import functools
from typing import Callable

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

aten = torch.ops.aten


def _floating_only(decomposition: Callable) -> Callable:
    """`decomposition` for floating outputs; integer outputs stay the ATen op (an extern call)."""
    def run(*args, **kwargs):
        dtype = kwargs.get("dtype")
        if dtype is not None and not dtype.is_floating_point and not dtype.is_complex:
            return NotImplemented
        return decomposition(*args, **kwargs)

    return run


@functools.lru_cache(maxsize=None)
def decomposition_table() -> dict:
    """Core ATen decompositions plus the composite ops we would rather fuse than call."""
    extra = get_decompositions([
        aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.var, aten.var_mean, aten.std,
        aten.std_mean, aten.gelu, aten.silu, aten.mean, aten.addcmul, aten.addcdiv, aten.hardswish,
        aten.hardsigmoid, aten.softplus, aten.logsumexp, aten.sigmoid, aten.elu, aten.leaky_relu,
        aten.hardtanh, aten.mish, aten.lerp, aten.threshold, aten.masked_fill, aten.linalg_vector_norm,
        aten.ldexp,
    ])
    table = {**core_aten_decompositions(), **extra}
    # The refs compute integer linspace/logspace in floating point and round differently from eager.
    for op in (aten.linspace, aten.logspace):
        for name in op.overloads():
            if getattr(op, name) in table:
                table[getattr(op, name)] = _floating_only(table[getattr(op, name)])
    # Kept whole: reductions we lower natively, and extern ops that are faster as one ATen call.
    # (attention stays ATen's fused CPU kernel: decomposed, it materializes the full score matrix)
    for op in (aten.sum, aten.amax, aten.amin, aten.argmax, aten.argmin, aten.prod, aten.any, aten.all,
               aten.mm, aten.addmm, aten.bmm, aten.convolution, aten._scaled_dot_product_flash_attention_for_cpu):
        for name in op.overloads():
            table.pop(getattr(op, name), None)
    table[aten._softmax.default] = softmax
    return table


def softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    """aten._softmax as ATen's CPU kernel computes it: exp(x - max) once, then a multiply by 1/sum (one
    division per row, not per element)."""
    x = x.contiguous()
    computation_dtype, result_dtype = elementwise_dtypes(x, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    x = x.to(computation_dtype)
    if x.ndim and x.shape[dim] == 0:  # an empty row: torch's own decomposition (no max to take)
        from torch._decomp.decompositions import _softmax
        return _softmax(x, dim, half_to_float)
    unnormalized = torch.exp(x - torch.amax(x, dim, keepdim=True))
    result = unnormalized * torch.reciprocal(torch.sum(unnormalized, dim, keepdim=True))
    return result if half_to_float else result.to(result_dtype)
