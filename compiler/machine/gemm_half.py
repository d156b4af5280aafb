"""Where bfloat16 and float16 matrix products and convolutions run: in their dtype, in ATen's op (which calls
oneDNN, and oneDNN AMX or the AVX512-BF16/AVX512-FP16 dot products where the CPU has them), or as the float32
product of the same values rounded once to the dtype (`mm(a.float(), b.float()).to(a.dtype)`), whose float32
product then follows compiler/machine/gemm.py's float32 rule (MKL's sgemm or oneDNN).

The float32 form computes what eager computes: ATen's half products accumulate in float32 and round the result
(bias included) once, and every half value is exact in float32, so only the order of the sums can differ. Its
casts are graph ops like any other: the cast of an operand fuses into the kernel that produces it (a float32
buffer holding values rounded to the dtype, never a half copy and a float copy), the cast of the result into
the kernels that read it.

Measured on this project's 2-core AMD EPYC with AVX2 and F16C only (torch 2.13, 2 threads, a machine loaded by
neighbours: benchmarks/half_gemm_bench.py, best of 5, ms): oneDNN refuses bfloat16/float16 without AVX-512, so
eager's products in those dtypes run ATen's own loops: (512,512)x(512,512) bf16 75.6 vs 45.4 for the float32
product with both casts (19.0 MKL alone, 10.4 oneDNN alone), (256,512)x(512,2048) bf16 108.7 vs 22.9, float16
47.4 vs 16.1 and 90.6 vs 32.2, and a (32,64)x(64,128) product 0.11 (bf16) / 5.4 (fp16) vs 0.05. So the rule
(`half_is_native`): a dtype stays in the library only where the CPU has instructions for it (`amx_bf16` /
`avx512_bf16` for bfloat16, `amx_fp16` / `avx512_fp16` for float16 in /proc/cpuinfo) and oneDNN says it
supports the dtype (`torch.ops.mkldnn._is_mkldnn_bf16_supported` / `_fp16_`): an AMX Xeon keeps its bf16
products in oneDNN; AVX2 machines and AVX-512 ones without those dot products compute in float32.
`config.cpp.half_gemm` (LENS_HALF_GEMM=auto|native|float32) overrides; accuracy checks keep eager's library.

A product that stays in its dtype runs in ATen's op, which hands oneDNN the weight in its plain layout, and oneDNN
copies it into its blocked layout on every call. Where the weight is a frozen constant (bfloat16 inference under
autocast: compiler/graph_passes/freezing_autocast.py) and oneDNN really computes in the dtype (`packs_weights`:
the CPU's dot products, not LENS_HALF_GEMM=native alone), gemm.py runs it as `mkldnn._linear_pointwise` from that
weight's blocked copy, made once (gemm_packed.py `onednn_weight`), as Inductor's freezing does: bitwise ATen's
result; against ATen's `addmm`, (128,768)x(768,3072) 3.70 -> 3.21 ms, (197,768)x(768,3072) 5.38 -> 4.88,
(128,768)x(768,30522) 37.3 -> 31.2, (128,3072)x(3072,768) and (128,768)x(768,768) within 3% (one thread of the
2-core AMD EPYC Zen 5 with AVX512-BF16, medians; docs/performance.md, "Packed bf16 weights").
"""
from __future__ import annotations

import functools
import logging

import torch

from compiler import config

log = logging.getLogger(__name__)
aten = torch.ops.aten

HALF_DTYPES = (torch.bfloat16, torch.float16)
# dtype -> the /proc/cpuinfo flags of instructions that compute products in that dtype
NATIVE_FLAGS = {torch.bfloat16: ("amx_bf16", "avx512_bf16"), torch.float16: ("amx_fp16", "avx512_fp16")}


def _onednn_supports(dtype: torch.dtype) -> bool:
    mkldnn = torch.ops.mkldnn
    check = {torch.bfloat16: "_is_mkldnn_bf16_supported", torch.float16: "_is_mkldnn_fp16_supported"}[dtype]
    return torch.backends.mkldnn.is_available() and hasattr(mkldnn, check) and bool(getattr(mkldnn, check)())


@functools.lru_cache(maxsize=None)
def _cpu_has_dot_products(dtype: torch.dtype) -> bool:
    from compiler.machine.build import cpu_flags
    found = [f for f in NATIVE_FLAGS[dtype] if f in cpu_flags()]
    native = bool(found) and _onednn_supports(dtype)
    log.info("%s products run %s (CPU flags %s, capability %s)", dtype, "in oneDNN" if native else "in float32",
             found or "without " + "/".join(NATIVE_FLAGS[dtype]), torch.backends.cpu.get_cpu_capability())
    return native


def half_is_native(dtype: torch.dtype) -> bool:
    """Whether products and convolutions in half `dtype` stay in the library in that dtype (else: float32)."""
    choice = config.cpp.half_gemm
    if choice not in ("auto", "native", "float32"):
        raise ValueError(f"config.cpp.half_gemm (LENS_HALF_GEMM) is {choice!r}: expected auto, native or float32")
    return choice == "native" or (choice == "auto" and _cpu_has_dot_products(dtype))


def packs_weights(dtype: torch.dtype) -> bool:
    """Whether a product in half `dtype` may run in oneDNN from its frozen weight's blocked copy: the dtype stays in
    the library and the CPU has the dot products oneDNN's kernels (and its weight reorder) need."""
    return dtype in HALF_DTYPES and half_is_native(dtype) and _cpu_has_dot_products(dtype)


def _upcast_dtype(*tensors) -> torch.dtype | None:
    """The half dtype the float32 form replaces, None where the op keeps its dtype."""
    dtypes = {t.dtype for t in tensors if isinstance(t, torch.Tensor)}
    if len(dtypes) != 1 or not dtypes <= set(HALF_DTYPES):
        return None
    if any(t.device.type != "cpu" for t in tensors if isinstance(t, torch.Tensor)):
        return None
    dtype = dtypes.pop()
    return None if half_is_native(dtype) else dtype


def _f(t):
    return t.float() if isinstance(t, torch.Tensor) else t


def mm(a, b):
    dtype = _upcast_dtype(a, b)
    return NotImplemented if dtype is None else aten.mm(a.float(), b.float()).to(dtype)


def addmm(bias, a, b, *, beta=1, alpha=1):
    dtype = _upcast_dtype(bias, a, b)
    return NotImplemented if dtype is None else \
        aten.addmm(_float_of(bias), a.float(), b.float(), beta=beta, alpha=alpha).to(dtype)


def _float_of(t: torch.Tensor) -> torch.Tensor:
    """t as float32; a dimension broadcast by a zero stride stays broadcast (its one slice converted, then
    expanded), so a weight expanded over a batch is never copied once per batch element."""
    base = t
    for d in range(t.dim()):
        if t.stride(d) == 0 and t.shape[d] > 1:
            base = base.narrow(d, 0, 1)
    return t.float() if base is t else base.float().expand(t.shape)


def bmm(a, b):
    (batch, m, k), n = a.shape, b.shape[2]
    shared_weight = b.stride(0) == 0 and batch > 1  # one weight for every batch element (matmul of a 3-d input
    # by a weight): a single product of batch*m rows, as eager's matmul folds it, the input's copy or cast writing
    # those rows contiguously; never the weight expanded into one copy per batch element (a bfloat16 autocast
    # encoder layer's in-projection wrote 256 copies of its 512x1536 weight: 332 of its 373 ms)
    dtype = _upcast_dtype(a, b)
    if dtype is None:
        if not shared_weight or a.dtype != b.dtype or a.dtype not in HALF_DTYPES or a.device.type != "cpu":
            return NotImplemented
        return aten.mm(a.contiguous().view(batch * m, k), b[0]).view(batch, m, n)
    if shared_weight:
        return aten.mm(a.float().contiguous().view(batch * m, k), b[0].float()).view(batch, m, n).to(dtype)
    return aten.bmm(_float_of(a), _float_of(b)).to(dtype)


def baddbmm(bias, a, b, *, beta=1, alpha=1):
    dtype = _upcast_dtype(bias, a, b)
    return NotImplemented if dtype is None else \
        aten.baddbmm(_float_of(bias), _float_of(a), _float_of(b), beta=beta, alpha=alpha).to(dtype)


def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    dtype = _upcast_dtype(x, weight, bias)
    if dtype is None or transposed:  # (eager's half transposed convolutions sum in the dtype: kept whole)
        return NotImplemented
    return aten.convolution(x.float(), weight.float(), _f(bias), stride, padding, dilation, transposed,
                            output_padding, groups).to(dtype)


def decompositions(table: dict) -> dict:
    """The ops above for `table` (decompositions.decomposition_table): each computes in float32 where its
    operands are of one half dtype this CPU has no products for, else does what `table` did (the op's own
    decomposition, or NotImplemented: the op stays whole)."""
    def or_else(upcast, previous):
        def run(*args, **kwargs):
            out = upcast(*args, **kwargs)
            return previous(*args, **kwargs) if out is NotImplemented and previous is not None else out
        return run

    ops = {aten.mm.default: mm, aten.addmm.default: addmm, aten.bmm.default: bmm,
           aten.baddbmm.default: baddbmm, aten.convolution.default: convolution}
    return {op: or_else(fn, table.get(op)) for op, fn in ops.items()}
