"""bfloat16 and float16 twins of compiler_bench's memory-bound workloads (issue 31): the same functions on
inputs in that dtype, each against the same ATen op moving the same bytes in that dtype (its bound), and
autocast's MLP. Their names start with the dtype (`--only bf16,fp16` runs just these).

Tolerances against eager are the dtype's rounding: lens and Inductor keep float intermediates inside a fused
kernel where eager rounds after each op (compiler/codegen/half.py)."""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

# (name prefix, dtype, atol, rtol against eager)
HALF = (("bf16", torch.bfloat16, 5e-2, 2e-2), ("fp16", torch.float16, 1e-2, 1e-2))


def gelu_layer_norm(x: torch.Tensor) -> torch.Tensor:
    """Issue 31's example: float32 gelu and layer norm around a half-precision `* 2 + 1`."""
    return F.layer_norm(F.gelu(x) * 2 + 1, x.shape[-1:])


def _in_dtype(make_args, dtype: torch.dtype):
    return lambda: [a.to(dtype) for a in make_args()]


def half_variants(workloads: list, extra: list) -> list:
    """bf16 and fp16 copies of the memory-bound `workloads` that have a bound, and of `extra` (workloads run in
    half precision only)."""
    out = []
    for tag, dtype, atol, rtol in HALF:
        for w in [*extra, *workloads]:
            if w.memory_bound and w.bound is not None:
                out.append(dataclasses.replace(w, name=f"{tag} {w.name}", make_args=_in_dtype(w.make_args, dtype),
                                               atol=atol, rtol=rtol, extra={}))
    return out


def autocast_mlps(workload_type, mlp: torch.nn.Sequential, rows: int) -> list:
    """`mlp` under `torch.autocast("cpu", dtype)`: its casts run in lens's kernels, its GEMMs in the library
    (compiler/machine/gemm.py); the bound is the two half-precision addmm(out=) of eager's autocast."""
    out = []
    for tag, dtype, atol, rtol in HALF:
        def run(x, dtype=dtype):
            with torch.autocast("cpu", dtype=dtype):
                return mlp(x)

        def bound(args, dtype=dtype):
            x = args[0].to(dtype)
            l1, l2 = mlp[0], mlp[2]
            w1, b1, w2, b2 = (t.detach().to(dtype) for t in (l1.weight, l1.bias, l2.weight, l2.bias))
            h = torch.empty(x.shape[0], l1.out_features, dtype=dtype)
            y = torch.empty(x.shape[0], l2.out_features, dtype=dtype)
            return lambda: (torch.addmm(b1, x, w1.t(), out=h), torch.addmm(b2, h, w2.t(), out=y))

        out.append(workload_type(f"{tag} autocast mlp 512-2048-512 ({rows})", run, lambda: [torch.randn(rows, 512)],
                                 bound, "2x addmm(out=) in dtype", atol=atol, rtol=rtol, memory_bound=False))
    return out


def autocast_encoders(workload_type, enc: torch.nn.Module, shape: tuple[int, int, int]) -> list:
    """The transformer encoder layer under `torch.autocast("cpu", dtype)` (issue 31): its products in `dtype`
    (or in float32 where the CPU has no dot products for it: compiler/machine/gemm_half.py), layer norms in float32,
    the casts between them in lens's kernels. No bound: compute-bound, judged against eager and Inductor."""
    out = []
    for tag, dtype, atol, rtol in HALF:
        def run(x, dtype=dtype):
            with torch.autocast("cpu", dtype=dtype):
                return enc(x)

        out.append(workload_type(f"{tag} autocast encoder layer {shape}", run, lambda: [torch.randn(*shape)],
                                 None, "-", atol=atol, rtol=rtol, memory_bound=False))
    return out
