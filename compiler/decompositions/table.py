"""The decomposition table AOTAutograd traces with: core ATen decompositions, the composite ops we would
rather fuse than call, and our own versions where eager's kernel computes differently from torch's refs."""
from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np
import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from compiler import config
from compiler.decompositions.upsample import WHOLE_OPS, upsample_default, whole_or
from compiler.machine import gemm_half

aten = torch.ops.aten


def _floating_only(decomposition: Callable) -> Callable:
    """`decomposition` for floating outputs; integer outputs stay the ATen op (an extern call)."""
    def run(*args, **kwargs):
        dtype = kwargs.get("dtype")
        if dtype is not None and not dtype.is_floating_point and not dtype.is_complex:
            return NotImplemented
        return decomposition(*args, **kwargs)

    return run


def _not_in_half(decomposition: Callable) -> Callable:
    """`decomposition` except on bfloat16/float16 (tensors or `dtype=`): there the ATen op stays whole, because its
    kernel rounds where the decomposition cannot follow (addr's alpha * vec1 first, linspace's halves)."""
    def run(*args, **kwargs):
        values = [*args, kwargs.get("dtype")]
        if any(getattr(v, "dtype", v) in (torch.bfloat16, torch.float16) for v in values):
            return NotImplemented
        return decomposition(*args, **kwargs)

    return run


def _integers_only(decomposition: Callable) -> Callable:
    """`decomposition` for integer results; floating ones keep the ATen op (a lowering of ours computes it)."""
    def run(x, *args, **kwargs):
        return NotImplemented if x.dtype.is_floating_point else decomposition(x, *args, **kwargs)

    return run


@functools.lru_cache(maxsize=None)
def decomposition_table() -> dict:
    """Core ATen decompositions plus the composite ops we would rather fuse than call."""
    extra = get_decompositions([
        aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.var, aten.var_mean, aten.std,
        aten.std_mean, aten.gelu, aten.silu, aten.mean, aten.addcmul, aten.addcdiv, aten.hardswish,
        aten.hardsigmoid, aten.softplus, aten.logsumexp, aten.sigmoid, aten.elu, aten.leaky_relu,
        aten.hardtanh, aten.mish, aten.lerp, aten.threshold, aten.masked_fill, aten.linalg_vector_norm,
        aten.ldexp, aten._native_batch_norm_legit_functional, aten._native_batch_norm_legit,
        aten._native_batch_norm_legit_no_training, aten.native_batch_norm,
    ])
    table = {**core_aten_decompositions(), **extra}
    # The refs compute integer linspace/logspace in floating point and round differently from eager.
    for op in (aten.linspace, aten.logspace):
        for name in op.overloads():
            if getattr(op, name) in table:
                table[getattr(op, name)] = _floating_only(table[getattr(op, name)])
    # (batch norm's all-half kernels round their scale and shift to the dtype where the decomposition cannot
    # follow; nll_loss2d's keeps its cascade sum's partial sums in the dtype)
    for op in (aten.linspace, aten.logspace, aten.addr, aten.linalg_cross, aten._native_batch_norm_legit,
               aten.native_batch_norm, aten.nll_loss2d_forward):
        for name in op.overloads():
            if getattr(op, name) in table:
                table[getattr(op, name)] = _not_in_half(table[getattr(op, name)])
    # Kept whole: reductions we lower natively, and extern ops that are faster as one ATen call.
    for op in (aten.sum, aten.amax, aten.amin, aten.argmax, aten.argmin, aten.prod, aten.any, aten.all,
               aten.mm, aten.addmm, aten.bmm, aten.convolution, aten._scaled_dot_product_flash_attention_for_cpu):
        for name in op.overloads():
            table.pop(getattr(op, name), None)
    # addcmul on floats is lowered whole (one fma, as eager's kernel computes it: lowering/pointwise.py)
    table[aten.addcmul.default] = _integers_only(table[aten.addcmul.default])
    for op in (aten._native_batch_norm_legit_functional.default, aten._native_batch_norm_legit_no_training.default):
        table[op] = _mixed_half_batch_norm(table[op])
    op = aten._native_batch_norm_legit_functional.default
    table[op] = _float_training_batch_norm(table[op])
    table[aten.native_layer_norm.default] = _half_layer_norm(table[aten.native_layer_norm.default])
    table[aten.soft_margin_loss.default] = _half_soft_margin_loss(table[aten.soft_margin_loss.default])
    table[aten._log_softmax.default] = _half_log_softmax(table[aten._log_softmax.default])
    table[aten.logit.default] = _half_logit(table[aten.logit.default])
    table[aten.logsumexp.default] = _half_logsumexp(table[aten.logsumexp.default])
    table[aten.mse_loss.default] = _half_mse_loss(table[aten.mse_loss.default])
    table[aten.unique_consecutive.default] = unique_consecutive_nonnegative_dim
    table[aten._softmax.default] = softmax
    table[aten.native_group_norm.default] = group_norm
    table[aten.pow.Tensor_Scalar] = pow_by_multiplication
    table[aten._scaled_dot_product_flash_attention_for_cpu.default] = flash_attention_for_cpu
    for op in (aten.upsample_linear1d.default, aten.upsample_trilinear3d.default):  # (their .vec: eager_upsample_kernels)
        table[op] = upsample_default(table.get(op, lambda *args: NotImplemented), False, op._opname)
    # (float32 interpolation outside autograd: one ATen call, upsample.py; unfold/fold alike: their decompositions
    # gather and scatter through ATen index/index_put calls, VOLO-D1's outlook attention 5% of its step)
    for op in (*WHOLE_OPS, aten.im2col.default, aten.col2im.default):
        if op in table:
            table[op] = whole_or(table[op])
    table.update(gemm_half.decompositions(table))  # half products in float32 where the CPU has none (gemm_half.py)
    return table


def softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    """aten._softmax as ATen's CPU kernel computes it: exp(x - max) once, then a multiply by 1/sum (one
    division per row, not per element)."""
    x = x.contiguous()
    if x.ndim and x.shape[dim] == 0:  # an empty row: torch's own decomposition (no max to take)
        from torch._decomp.decompositions import _softmax
        return _softmax(x, dim, half_to_float)
    computation_dtype, result_dtype = elementwise_dtypes(x, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    x = x.to(computation_dtype)
    unnormalized = torch.exp(x - torch.amax(x, dim, keepdim=True))
    result = unnormalized * torch.reciprocal(torch.sum(unnormalized, dim, keepdim=True))
    return result if half_to_float else result.to(result_dtype)


HALF = (torch.bfloat16, torch.float16)


def group_norm(x: torch.Tensor, weight, bias, n: int, c: int, inner: int, groups: int, eps: float):
    """native_group_norm on float32/float64 as fusable reductions over a *view* of the input (its channels split
    into (groups, channels a group), after the spatial dims for a channels-last input, so the sums run in memory order
    and the input is read as it is): torch's own decomposition reshapes to (N, G, C/G * HW), a copy for channels-last,
    and left whole ATen's kernel wants its input contiguous in some format (PoolFormer-M36: 72 group norms a call, each
    behind a copy). The output as ATen's CPU kernel forms it:
    x * (rstd * weight) + (bias - mean * rstd * weight). Half dtypes, and any under LENS_DECOMPOSE_GROUP_NORM=0, keep
    ATen's kernel (NotImplemented)."""
    if not config.decompose_group_norm or x.dtype not in (torch.float32, torch.float64) or x.dim() < 2 or c % groups:
        return NotImplemented
    if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        grouped = x.permute(0, 2, 3, 1).unflatten(3, (groups, c // groups))  # (N, H, W, G, C/G): memory order
        dims = [1, 2, 4]
    else:
        grouped = x.unflatten(1, (groups, c // groups))  # (N, G, C/G, ...)
        dims = list(range(2, grouped.dim()))
    var, mean = torch.var_mean(grouped, dim=dims, unbiased=False)  # (N, G)
    rstd = torch.rsqrt(var + eps)
    per_channel = [n, groups, c // groups]
    scale = rstd.reshape(n, groups, 1).expand(per_channel)
    if weight is not None:
        scale = scale * weight.reshape(1, groups, c // groups)
    shift = -mean.reshape(n, groups, 1) * scale
    if bias is not None:
        shift = shift + bias.reshape(1, groups, c // groups)
    trailing = [1] * (x.dim() - 2)
    out = x * scale.reshape(n, c, *trailing) + shift.reshape(n, c, *trailing)
    return out, mean, rstd


def _half_layer_norm(decomposition: Callable) -> Callable:
    """native_layer_norm on bfloat16/float16 as ATen's CPU kernel computes it (layer_norm_kernel_mixed_type):
    in float, y = (x * rstd + (-rstd * mean)) * weight + bias with each multiply-add one fma (the kernel is built
    with -mfma), rounded once; `(x - mean) * rstd` differs where x is near the mean (a row of one element gives
    eager's x * rstd - rstd * x, not 0). Other dtypes: `decomposition`."""
    def run(x, normalized_shape, weight, bias, eps):
        if x.dtype not in HALF or 0 in x.shape:
            return decomposition(x, normalized_shape, weight, bias, eps)
        dims = list(range(x.dim() - len(normalized_shape), x.dim()))
        xf = x.contiguous().float()
        var, mean = torch.var_mean(xf, dims, unbiased=False, keepdim=True)
        rstd = torch.rsqrt(var + eps)
        out = torch.addcmul(-rstd * mean, xf, rstd)
        if weight is not None and bias is not None:
            out = torch.addcmul(bias.float(), out, weight.float())
        elif weight is not None:
            out = out * weight.float()
        elif bias is not None:
            out = out + bias.float()
        return out.to(x.dtype), mean.to(x.dtype), rstd.to(x.dtype)

    return run


def _mixed_half_batch_norm(decomposition: Callable) -> Callable:
    """Batch norm of a bfloat16/float16 input whose parameters and running statistics are float32 (autocast's
    convolution outputs and BatchNorm modules): ATen's mixed-type kernel computes in float and rounds the output
    once, as the decomposition of the float32 input does, and keeps the saved mean and inverse std in float32
    (its meta says the input's dtype: the backward then reads float32 statistics, as eager's does). All-half
    batch norm keeps ATen's op: that kernel rounds its per-channel scale and shift to the dtype."""
    def run(x, weight, bias, running_mean, running_var, *rest):
        if x.dtype not in HALF:
            return decomposition(x, weight, bias, running_mean, running_var, *rest)
        params = [t for t in (weight, bias, running_mean, running_var) if t is not None]
        if not params or any(t.dtype != torch.float32 for t in params):
            return NotImplemented
        out, mean, rstd, *running = decomposition(x.float(), weight, bias, running_mean, running_var, *rest)
        if mean.numel() == 0:  # (evaluation mode saves nothing on CPU)
            mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)
        return (out.to(x.dtype), mean, rstd, *running)

    return run


def _float_training_batch_norm(decomposition: Callable) -> Callable:
    """Training batch norm of float32 as ATen's CPU kernel computes it (batch_norm_cpu_collect_stats_contiguous_impl,
    batch_norm_cpu_update_stats_template, batch_norm_cpu_contiguous_impl): the mean a double sum rounded to float, the
    sum of float squares (x - mean)^2 in double rounded to float and divided by N in float, invstd 1/sqrt in double;
    the output fma(x, alpha, fma(-mean, alpha, bias)) with alpha = invstd * weight. torch's decomposition (var_mean
    in float, (x - mean) * invstd * weight + bias) rounds elsewhere: deep nets of batch-1 BatchNorms amplify that to
    ~1e-4 before the last ReLUs, which then flip mask elements eager does not (spnasnet_100's training step, issue
    49). That kernel serves contiguous inputs of more than one value per channel and sample; channels-last or (N, C)
    inputs (ATen's channels-last kernel, which sums in float), evaluation mode, other dtypes and BatchNorms without
    an affine weight and bias: `decomposition`."""
    def run(x, weight, bias, running_mean, running_var, training, momentum, eps):
        if not (training and x.dtype == torch.float32 and weight is not None and bias is not None and x.numel()
                and math.prod(x.shape[2:]) > 1 and x.is_contiguous()):
            return decomposition(x, weight, bias, running_mean, running_var, training, momentum, eps)
        dims = [0, *range(2, x.dim())]
        n = x.numel() // x.shape[1]
        shape = [1, -1] + [1] * (x.dim() - 2)
        mean = (torch.sum(x.double(), dims) / n).float()
        centered = x - mean.view(shape)
        var_sum = torch.sum((centered * centered).double(), dims).float()
        invstd = torch.reciprocal(torch.sqrt((var_sum / n).double() + eps)).float()
        alpha = invstd * weight
        out = torch.addcmul(torch.addcmul(bias, -mean, alpha).view(shape), x, alpha.view(shape))
        new_mean = momentum * mean + (1 - momentum) * running_mean
        new_var = (momentum * (var_sum.double() / (n - 1)) + (1 - momentum) * running_var).float()
        return out, mean, invstd, new_mean, new_var

    return run


def _half_log_softmax(decomposition: Callable) -> Callable:
    """_log_softmax over the last dimension of a bfloat16/float16 tensor as ATen's CPU kernel computes it
    (serial_vec_log_softmax_lastdim_range): max, sum(exp(x - max)) in float, but the sum and its log each stored in
    the tensor's dtype (rounded) before x - max - log_sum in float. Other dimensions (whose kernel keeps both in
    float), half_to_float and other dtypes: `decomposition`."""
    def run(x, dim, half_to_float):
        if x.dtype not in HALF or half_to_float or x.dim() == 0 or dim % x.dim() != x.dim() - 1 or 0 in x.shape:
            return decomposition(x, dim, half_to_float)
        shifted = x.float() - torch.amax(x.float(), dim, keepdim=True)
        total = torch.sum(torch.exp(shifted), dim, keepdim=True).to(x.dtype).float()
        return (shifted - torch.log(total).to(x.dtype).float()).to(x.dtype)

    return run


def _to_half(value: float, dtype: torch.dtype) -> float:
    """A Python float as c10 converts it to bfloat16/float16 (through float, rounding to nearest even)."""
    if dtype == torch.float16:
        return float(np.float16(np.float32(value)))
    bits = int(np.float32(value).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(np.uint32(bits).view(np.float32))


def _half_logit(decomposition: Callable) -> Callable:
    """logit on bfloat16/float16 as ATen's CPU kernel computes it: x clamped to [lo, hi] with lo = eps and
    hi = 1 - lo in the tensor's dtype, then 1 - x, x / (1 - x) and the log each rounded to the dtype (its
    Vectorized ops); torch's decomposition computes all in float. Other dtypes: `decomposition`."""
    def run(x, eps=None):
        if x.dtype not in HALF:
            return decomposition(x, eps)
        xf = x.float()
        if eps is not None and eps >= 0:
            lo = _to_half(eps, x.dtype)
            hi = _to_half(1.0 - lo, x.dtype)
            xf = torch.where(xf < lo, lo, torch.where(xf > hi, hi, xf))
        return torch.log((xf / (1.0 - xf).to(x.dtype).float()).to(x.dtype).float()).to(x.dtype)

    return run


def _half_logsumexp(decomposition: Callable) -> Callable:
    """logsumexp of a bfloat16/float16 tensor as ATen computes it (logsumexp_out_impl: one op after another in the
    tensor's dtype): x - max, its exp, the sum (accumulated in float) and its log each rounded to the dtype, then
    the max added; torch's decomposition computes all in float (3 bfloat16 steps from eager's result on OpInfo's
    masked.logsumexp samples: more exact, but not eager's). Other dtypes, empty or 0-d inputs: `decomposition`."""
    def run(x, dim, keepdim=False):
        if x.dtype not in HALF or x.dim() == 0 or 0 in x.shape or not dim:
            return decomposition(x, dim, keepdim)
        xf = x.float()
        maxes = torch.amax(xf, dim, keepdim=True)  # (exact in the dtype)
        maxes = torch.where(maxes.abs() == float("inf"), 0.0, maxes)
        exps = torch.exp((xf - maxes).to(x.dtype).float()).to(x.dtype).float()
        total = torch.sum(exps, dim, keepdim=keepdim).to(x.dtype).float()
        shift = maxes if keepdim else torch.squeeze(maxes, dim)
        return (torch.log(total).to(x.dtype).float() + shift).to(x.dtype)

    return run


def unique_consecutive_nonnegative_dim(x, return_inverse=False, return_counts=False, dim=None):
    """unique_consecutive with a negative `dim` as the same op over `dim + x.dim()`: torch's fake kernel
    (fake_impls._unique) slices the shape with the negative dim, so dim=-1 of a (5, 5, 5) tensor claimed a
    (5, 5, u0, 5, 5, 5) result and its generated layout was wrong. Other calls: the op itself."""
    return NotImplemented if dim is None or dim >= 0 or x.dim() == 0 else aten.unique_consecutive.default(
        x, return_inverse, return_counts, dim + x.dim())


def _half_mse_loss(decomposition: Callable) -> Callable:
    """mse_loss on bfloat16/float16 as ATen's kernel computes it: diff = x - target and diff * diff each rounded to the
    dtype, then the reduction of that half tensor; torch's decomposition squares the float difference. Other dtypes
    (and mixed ones): `decomposition`."""
    def run(x, target, reduction=1):
        if x.dtype not in HALF or target.dtype != x.dtype:
            return decomposition(x, target, reduction)
        diff = (x.float() - target.float()).to(x.dtype).float()
        loss = (diff * diff).to(x.dtype)
        return loss if reduction == 0 else loss.mean() if reduction == 1 else loss.sum()

    return run


def _half_soft_margin_loss(decomposition: Callable) -> Callable:
    """soft_margin_loss on bfloat16/float16 in the input's dtype, op by op as eager's kernel computes it
    (neg, mul_, exp_, log1p_ on the output tensor: exp overflows float16 to inf where eager's does); torch's
    decomposition upcasts to float first. Other dtypes: `decomposition`."""
    def run(x, target, reduction=1):
        if x.dtype not in HALF:
            return decomposition(x, target, reduction)
        loss = torch.log1p(torch.exp(torch.mul(torch.neg(x), target).to(x.dtype)))
        return loss if reduction == 0 else loss.mean() if reduction == 1 else loss.sum()

    return run


def pow_by_multiplication(x: torch.Tensor, exponent):
    """x ** 2 and x ** 3 of a floating tensor as ATen's CPU kernel computes them, x * x and x * x * x, not a
    vector powf per element (GPT-2's tanh GELU: its fused kernel took 4.2 ms a call on (128, 3072) with powf,
    eager's whole GELU 1.5 ms); other exponents and dtypes stay pow."""
    if not x.dtype.is_floating_point or isinstance(exponent, bool) or exponent not in (2, 3):
        return NotImplemented
    square = x * x
    return square * x if exponent == 3 else square


def flash_attention_for_cpu(query, key, value, dropout_p: float = 0.0, is_causal: bool = False, *,
                            attn_mask=None, scale=None):
    """ATen's CPU flash attention as bmm(q, k^T), a softmax our row kernel computes in one pass over each row
    of scores (scale, mask, max, exp, sum and normalize fused), and bmm(p, v); the output in the query's
    layout, as ATen's kernel returns it. Only for short key sequences (`config.attention_max_keys`), where
    ATen's kernel spends its time on many small blocked products (2 cores, 8 heads of 64: 0.84-0.97x its time
    at 32-128 keys); from 256 keys on its blocks amortize and it keeps the score matrix in cache, where ours
    streams it through memory (1.08-1.17x its time at 256 keys, 1.1-1.6x at 512-1024 across runs). And only
    where the score matrix fits `config.attention_scores_max_bytes`, for float32 and float64 without dropout;
    otherwise the ATen op stays (NotImplemented), as it does for symbolic sizes whose ranges do not bound them
(one graph for every sequence length, not a guard that recompiles past the limit)."""
    if dropout_p != 0.0 or query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return NotImplemented
    if query.dtype not in (torch.float32, torch.float64) or not (query.dtype == key.dtype == value.dtype):
        return NotImplemented
    B, H, L, E = query.shape
    S, Ev = key.shape[2], value.shape[3]
    if tuple(key.shape[:2]) != (B, H) or tuple(value.shape[:3]) != (B, H, S) or key.shape[3] != E:
        return NotImplemented
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    # (symbolic sizes: only where their ranges already decide it, so no guard makes another size recompile)
    if not statically_known_true(S <= config.attention_max_keys) or not statically_known_true(
            B * H * L * S * query.element_size() <= config.attention_scores_max_bytes):
        return NotImplemented
    if 0 in (B, H, L, S, E, Ev):
        return NotImplemented
    scores = torch.bmm(query.reshape(B * H, L, E), key.reshape(B * H, S, E).transpose(1, 2)).view(B, H, L, S)
    scores = scores * (1.0 / math.sqrt(E) if scale is None else scale)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    if is_causal:
        future = torch.ones(L, S, dtype=torch.bool, device=query.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    # a row whose every score is -inf (masked out whole) gives zeros, as ATen's kernel gives, not NaN
    row_max = torch.amax(scores, -1, keepdim=True)
    row_max = torch.where(row_max == float("-inf"), 0.0, row_max)
    unnormalized = torch.exp(scores - row_max)
    row_sum = torch.sum(unnormalized, -1, keepdim=True)
    empty = row_sum == 0
    probs = unnormalized * torch.where(empty, 0.0, torch.reciprocal(row_sum))
    out = torch.bmm(probs.view(B * H, L, S), value.reshape(B * H, S, Ev)).view(B, H, L, Ev)
    order = sorted(range(4), key=lambda d: (-query.stride(d), d))  # the query's dimensions, outermost first
    if order != [0, 1, 2, 3]:
        out = aten.copy.default(torch.empty_permuted((B, H, L, Ev), order, dtype=out.dtype, device=out.device), out)
    logsumexp = torch.where(empty, 0.0, row_max + torch.log(row_sum)).squeeze(-1)
    return out, logsumexp
