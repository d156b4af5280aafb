"""Which library runs a graph's float32 matrix products: ATen's `mm` (MKL's sgemm in torch's x86 wheels) or
oneDNN's matmul (`torch.ops.mkldnn._linear_pointwise`, the kernel Inductor's freezing path calls).

MKL takes its generic AVX2 code path on CPUs not made by Intel, while oneDNN JITs AVX-512 kernels for whatever
CPU it finds: on an AMD EPYC (AVX-512, 2 threads), (2048,512)x(512,1536) took 16.4 ms in `mm` and 7.1-7.5 ms in
oneDNN, the same 2.2-2.3x on every Linear of the MLP and encoder benchmarks; on Intel Xeons the two were within
about 10% of each other, either way, and oneDNN lost on small products by a fixed ~13 us a call. So the choice
follows that mechanism (`onednn_is_faster`): oneDNN where ATen's BLAS is MKL, the CPU is not Intel's and has
AVX-512, ATen's mm everywhere else (eager's library). It used to be measured (both libraries timed on a 512^3
product at the first product of a process): that cost 65 ms of a cold first call and could flip with a noisy
neighbour. Only products of at least `config.cpp.onednn_min_macs` multiply-adds go to oneDNN, and
`LENS_GEMM=aten|onednn` overrides the rule. Both compute in float32 with no reduced precision (oneDNN follows
`torch.backends.mkldnn`'s fp32 precision, "ieee" unless the user asks otherwise).

oneDNN's op has no `out=` form: its result comes from c10's allocator. glibc serves blocks under its 32 MiB
mmap threshold from its heap once one was freed (no page faults), larger ones by a fresh `mmap` on every call
(a 32 MiB result: ~8,200 page faults, ~10 ms here, a third of the product's time). So results of 32 MiB or
more (`config.cpp.onednn_blocked_min_bytes`) are computed in row blocks of about 8 MiB, each copied into a
buffer of the pool while it is still in the cache.

With `LENS_GEMM_ROWS=1` (config.cpp.gemm_rows) products ATen's mm would run (MKL threading itself) run in one
OpenMP region of row blocks instead (`gemm_rows.py`: fewer waits between threads on shared cores) where they have
enough rows; off by default, since on a quiet machine ATen's threading is as fast or faster.

A bfloat16/float16 product whose weight is a frozen constant runs in oneDNN from that weight's blocked copy where
oneDNN computes in the dtype (gemm_half.py `packs_weights`; not under `LENS_GEMM=aten` or `LENS_GEMM_PACKED=0`):
the same kernel ATen's half `mm` calls, without the per-call weight reorder; every other half product is ATen's.

Generated code calls `mm` and `addmm` below with the output layout the graph expects (dense, contiguous).
"""
from __future__ import annotations

import functools
import logging
import sys

import torch

from compiler import config
from compiler.machine import gemm_half, gemm_packed, gemm_rows
from compiler.machine.memory import empty_strided

log = logging.getLogger(__name__)


def _linear():
    return torch.ops.mkldnn._linear_pointwise.default


def _onednn_ok() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


@functools.lru_cache(maxsize=None)
def cpu_vendor() -> str:
    """The CPU's vendor string as the kernel reports it ("GenuineIntel", "AuthenticAMD", ...; "" if unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _mkl_takes_a_generic_path() -> bool:
    """Whether ATen's float32 GEMM is MKL on a CPU where MKL leaves AVX-512 unused and oneDNN does not."""
    return (torch.backends.mkl.is_available() and cpu_vendor() not in ("", "GenuineIntel")
            and torch.backends.cpu.get_cpu_capability() == "AVX512")


def onednn_is_faster() -> bool:
    """The library choice for large float32 products (`config.cpp.gemm_library`: "auto" takes oneDNN where MKL
    takes a generic path, "aten" or "onednn" decide)."""
    choice = config.cpp.gemm_library
    if choice not in ("auto", "aten", "onednn"):
        raise ValueError(f"config.cpp.gemm_library (LENS_GEMM) is {choice!r}: expected auto, aten or onednn")
    if choice == "aten":
        return False
    if choice == "onednn":
        return _onednn_ok()
    return _auto_choice()


@functools.lru_cache(maxsize=None)
def _auto_choice() -> bool:
    if not _mkl_takes_a_generic_path() or not _onednn_ok():
        return False
    log.info("large float32 products run in oneDNN: MKL takes a generic path on this %s CPU", cpu_vendor())
    return True


_HALF_ROUTES: dict[tuple, bool] = {}  # (dtype, the settings `_packs_half` reads) -> its answer


def _packs_half(dtype: torch.dtype) -> bool:
    """Whether products in half `dtype` whose weight is a frozen constant run from its oneDNN pack (the settings
    and this CPU; remembered per settings: asked on every such product, see `_half_from_pack`)."""
    cpp = config.cpp
    key = (dtype, cpp.gemm_library, cpp.gemm_packed, cpp.half_gemm)
    known = _HALF_ROUTES.get(key)
    if known is None:
        known = _HALF_ROUTES[key] = (cpp.gemm_library != "aten" and cpp.gemm_packed and _onednn_ok()
                                     and gemm_half.packs_weights(dtype))
    return known


def _uses_onednn(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, beta, alpha) -> bool:
    if not onednn_is_faster():  # (first: on most machines the answer, and cheaper than the checks below per call)
        return False
    if a.dtype != torch.float32 or b.dtype != torch.float32 or a.dim() != 2 or b.dim() != 2:
        return False
    if a.device.type != "cpu" or b.device.type != "cpu" or beta != 1 or alpha != 1:
        return False
    (m, k), n = a.shape, b.shape[1]
    if m * n * k < config.cpp.onednn_min_macs or min(m, n, k) < 8:
        return False
    if bias is not None and (bias.dtype != torch.float32 or bias.numel() != n or bias.shape[-1] != n):
        return False  # oneDNN adds a row bias only
    if (a.requires_grad or b.requires_grad) and torch.is_grad_enabled():
        return False  # the op has no derivative: generated code never needs one, a stray caller might
    return True


def _half_from_pack(bias, a: torch.Tensor, b: torch.Tensor, beta, alpha, size, stride) -> torch.Tensor | None:
    """a @ b (+ bias) in a half dtype from b's oneDNN pack; None where no pack serves it (ATen's op runs it). The
    checks are the float32 route's, fewer and in one function: Python code right after a product's few ms of
    oneDNN runs from cold caches, ~10x slower than in a loop (ViT-B's 48 products a forward spent 133 us each in
    the float32 route's checks, 18 us of it in a bias reshape no 1-d bias needs)."""
    if beta != 1 or alpha != 1 or b.dtype != a.dtype or a.dim() != 2 or b.dim() != 2:
        return None
    (m, k), n = a.shape, b.shape[1]
    if m * n * k < config.cpp.onednn_min_macs or min(m, n, k) < 8 or not _packs_half(a.dtype):
        return None
    if bias is not None and (bias.dtype != a.dtype or bias.numel() != n or bias.shape[-1] != n):
        return None  # oneDNN adds a row bias only
    if (a.requires_grad or b.requires_grad) and torch.is_grad_enabled():
        return None  # the op has no derivative
    w = gemm_packed.onednn_weight(b, m)  # (None unless b is a view of a registered constant, a CPU tensor)
    return None if w is None else linear_into(a, w, bias, size, stride)


def _onednn(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, size, stride) -> torch.Tensor:
    w = gemm_packed.onednn_weight(b, a.shape[0])  # a frozen weight's blocked copy, else the weight (N, K) as
    return linear_into(a, b.t() if w is None else w, bias, size, stride)  # nn.Linear's


def linear_into(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, size, stride, attr: str = "none",
                scalars=(), algorithm: str = "") -> torch.Tensor:
    """oneDNN's attr(a @ w.T (+ bias)) of `size`/`stride` (`attr` an activation oneDNN applies as it writes, with its
    `scalars` and `algorithm`; "none"), in row blocks where the result is large."""
    m, n = a.shape[0], size[1]
    if bias is not None and bias.dim() != 1:
        bias = bias.reshape(-1)
    if m * n * a.element_size() < config.cpp.onednn_blocked_min_bytes:
        return _linear()(a, w, bias, attr, list(scalars), algorithm)
    rows = max(1, config.cpp.onednn_block_bytes // max(1, n * a.element_size()))
    out = empty_strided(size, stride, dtype=a.dtype)
    for r in range(0, m, rows):
        out[r:r + rows].copy_(_linear()(a[r:r + rows], w, bias, attr, list(scalars), algorithm))
    return out


def _rows(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, beta, alpha) -> bool:
    """Whether the row-split helper runs this product (config.cpp.gemm_rows, and not under LENS_GEMM=aten: eager's
    library and threading)."""
    return (config.cpp.gemm_rows and config.cpp.gemm_library == "auto" and beta == 1 and alpha == 1
            and gemm_rows.applies(a, b, bias))


def _row_blocks(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, beta, alpha) -> bool:
    """out = a @ b (+ bias) by our row split where it takes the product: from the weight's pack when b is a frozen
    constant (gemm_packed.py), else with `LENS_GEMM_ROWS=1` (gemm_rows.py); False where ATen runs it."""
    if beta != 1 or alpha != 1:
        return False
    return gemm_packed.mm_into(out, a, b, bias) or (_rows(a, b, bias, beta, alpha)
                                                     and gemm_rows.mm_into(out, a, b, bias))


# What torch.profiler calls each helper's call, whichever library ran it (compiler/tools/profiling.py times an
# extern mm/addmm of the generated code by this name; the library's own op is nested inside).
PROFILER_NAMES = {"aten.mm.default": "lens::mm", "aten.addmm.default": "lens::addmm"}
_profiling = torch._C._autograd._profiler_enabled


def fewest_routed_macs(dtype: torch.dtype = torch.float32) -> int:
    """The fewest multiply-adds of a product in `dtype` a route the settings and this CPU enable (float32: oneDNN,
    the row split, a packed weight; a half dtype: a packed weight in oneDNN) may take instead of ATen's mm: smaller
    ones skip every check (a model of small products, MobileBERT at a few tokens, calls this helper ~60 times a
    forward), and generated code calls ATen directly for those whose sizes it knows and for every product no route
    takes (sys.maxsize; codegen/wrapper.py: `_through_helper`)."""
    if dtype != torch.float32:
        return config.cpp.onednn_min_macs if dtype in gemm_half.HALF_DTYPES and _packs_half(dtype) else sys.maxsize
    ours = config.cpp.gemm_library == "auto"
    routes = [config.cpp.onednn_min_macs if onednn_is_faster() else None,
              gemm_rows.MIN_MACS if ours and config.cpp.gemm_rows else None,
              gemm_packed.MIN_MACS if ours and config.cpp.gemm_packed else None]
    return min((r for r in routes if r is not None), default=sys.maxsize)


def mm(a: torch.Tensor, b: torch.Tensor, *, size, stride) -> torch.Tensor:
    """a @ b into a new dense tensor of `size`/`stride` (contiguous)."""
    if _profiling():
        with torch.profiler.record_function(PROFILER_NAMES["aten.mm.default"]):
            return _product(None, a, b, 1, 1, size, stride)
    return _product(None, a, b, 1, 1, size, stride)


def addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1, size, stride) -> torch.Tensor:
    """beta * bias + alpha * (a @ b) into a new dense tensor of `size`/`stride` (contiguous)."""
    if _profiling():
        with torch.profiler.record_function(PROFILER_NAMES["aten.addmm.default"]):
            return _product(bias, a, b, beta, alpha, size, stride)
    return _product(bias, a, b, beta, alpha, size, stride)


def _product(bias, a, b, beta, alpha, size, stride) -> torch.Tensor:
    if a.dtype != torch.float32:  # (generated code calls the helper for a half product where a pack may serve it)
        packed = _half_from_pack(bias, a, b, beta, alpha, size, stride)
        return packed if packed is not None else _aten(bias, a, b, beta, alpha, empty_strided(size, stride,
                                                                                             dtype=a.dtype))
    routed = size[0] * size[1] * a.shape[1] >= fewest_routed_macs()
    if routed and _uses_onednn(a, b, bias, beta, alpha):
        return _onednn(a, b, bias, size, stride)
    out = empty_strided(size, stride, dtype=a.dtype)
    if routed and _row_blocks(out, a, b, bias, beta, alpha):
        return out
    return _aten(bias, a, b, beta, alpha, out)


def _aten(bias, a, b, beta, alpha, out: torch.Tensor) -> torch.Tensor:
    if bias is None:  # (torch's Python bindings: ~2 us a call less than torch.ops.aten.mm.out's dispatcher entry)
        return torch.mm(a, b, out=out)
    return torch.addmm(bias, a, b, beta=beta, alpha=alpha, out=out)
