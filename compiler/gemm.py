"""Which library runs a graph's float32 matrix products: ATen's `mm` (MKL's sgemm in torch's x86 wheels) or
oneDNN's matmul (`torch.ops.mkldnn._linear_pointwise`, the kernel Inductor's freezing path calls).

MKL takes its AVX2 code path on AMD CPUs while oneDNN JITs AVX-512 kernels: on the AMD EPYC this project
runs on (2 threads), (2048,512)x(512,1536) took 16.4 ms in `mm` and 7.1-7.5 ms in oneDNN, the same 2.2-2.3x
on every Linear of the MLP and encoder benchmarks; on the device's Xeon the two were within about 10% of
each other, either way, and oneDNN lost on small products by a fixed ~13 us a call. So the choice is measured
once per process (`onednn_is_faster`: a 512^3 product timed both ways), only products of at least
`config.cpp.onednn_min_macs` multiply-adds go to oneDNN, and `LENS_GEMM=aten|onednn` overrides the probe.
Both compute in float32 with no reduced precision (oneDNN follows `torch.backends.mkldnn`'s fp32 precision,
"ieee" unless the user asks otherwise).

oneDNN's op has no `out=` form: its result comes from c10's allocator. glibc serves blocks under its 32 MiB
mmap threshold from its heap once one was freed (no page faults), larger ones by a fresh `mmap` on every call
(a 32 MiB result: ~8,200 page faults, ~10 ms here, a third of the product's time). So results of 32 MiB or
more (`config.cpp.onednn_blocked_min_bytes`) are computed in row blocks of about 8 MiB, each copied into a
buffer of the pool while it is still in the cache.

Generated code calls `mm` and `addmm` below with the output layout the graph expects (dense, contiguous).
"""
from __future__ import annotations

import contextlib
import functools
import logging
import time

import torch

from compiler import config
from compiler.memory import empty_strided

log = logging.getLogger(__name__)

_PROBE_SIZE = 512  # the probe's product: (512, 512) x (512, 512), ~1 ms in MKL on 2 threads
_PROBE_MARGIN = 1.25  # oneDNN must beat ATen by this factor: within noise, keep eager's library


def _linear():
    return torch.ops.mkldnn._linear_pointwise.default


def _onednn_ok() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


@functools.lru_cache(maxsize=None)
def _probe(threads: int) -> bool:
    """Whether oneDNN ran the probe's product `_PROBE_MARGIN` times faster than ATen's mm (best of 5 each,
    interleaved)."""
    if not _onednn_ok():
        return False
    n = _PROBE_SIZE
    with torch.no_grad():
        a, w, out = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
        best = {"aten": float("inf"), "onednn": float("inf")}
        runs = {"aten": lambda: torch.mm(a, w.t(), out=out), "onednn": lambda: _linear()(a, w, None, "none", [], "")}
        try:
            for fn in runs.values():
                fn()  # oneDNN builds its kernel on the first call
            for _ in range(5):
                for key, fn in runs.items():
                    t0 = time.perf_counter()
                    fn()
                    best[key] = min(best[key], time.perf_counter() - t0)
        except RuntimeError as e:
            log.warning("oneDNN matmul unavailable, using ATen's mm: %s", e)
            return False
    faster = best["onednn"] * _PROBE_MARGIN < best["aten"]
    log.info("GEMM probe (%d threads, %d^3): ATen %.3f ms, oneDNN %.3f ms -> %s", threads, n,
             best["aten"] * 1e3, best["onednn"] * 1e3, "oneDNN" if faster else "ATen")
    return faster


def onednn_is_faster() -> bool:
    """The library choice for large float32 products in this process (`config.cpp.gemm_library`: "auto"
    measures once per thread count, "aten" or "onednn" decide)."""
    choice = config.cpp.gemm_library
    if choice not in ("auto", "aten", "onednn"):
        raise ValueError(f"config.cpp.gemm_library (LENS_GEMM) is {choice!r}: expected auto, aten or onednn")
    if choice == "aten":
        return False
    if choice == "onednn":
        return _onednn_ok()
    return _probe(torch.get_num_threads())


def _uses_onednn(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, beta, alpha) -> bool:
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
    return onednn_is_faster()


def _onednn(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, size, stride) -> torch.Tensor:
    w = b.t()  # oneDNN takes the weight as (N, K), like nn.Linear's
    if bias is not None:
        bias = bias.reshape(-1)
    m, n = a.shape[0], b.shape[1]
    if m * n * a.element_size() < config.cpp.onednn_blocked_min_bytes:
        return _linear()(a, w, bias, "none", [], "")
    rows = max(1, config.cpp.onednn_block_bytes // max(1, n * a.element_size()))
    out = empty_strided(size, stride, dtype=a.dtype)
    for r in range(0, m, rows):
        out[r:r + rows].copy_(_linear()(a[r:r + rows], w, bias, "none", [], ""))
    return out


# What torch.profiler calls each helper's call, whichever library ran it (compiler/profiling.py times an
# extern mm/addmm of the generated code by this name; the library's own op is nested inside).
PROFILER_NAMES = {"aten.mm.default": "lens::mm", "aten.addmm.default": "lens::addmm"}


def _recorded(name: str):
    return torch.profiler.record_function(name) if torch._C._autograd._profiler_enabled() \
        else contextlib.nullcontext()


def mm(a: torch.Tensor, b: torch.Tensor, *, size, stride) -> torch.Tensor:
    """a @ b into a new dense tensor of `size`/`stride` (contiguous)."""
    with _recorded(PROFILER_NAMES["aten.mm.default"]):
        if _uses_onednn(a, b, None, 1, 1):
            return _onednn(a, b, None, size, stride)
        out = empty_strided(size, stride, dtype=a.dtype)
        return torch.ops.aten.mm.out(a, b, out=out)


def addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1, size, stride) -> torch.Tensor:
    """beta * bias + alpha * (a @ b) into a new dense tensor of `size`/`stride` (contiguous)."""
    with _recorded(PROFILER_NAMES["aten.addmm.default"]):
        if _uses_onednn(a, b, bias, beta, alpha):
            return _onednn(a, b, bias, size, stride)
        out = empty_strided(size, stride, dtype=a.dtype)
        return torch.ops.aten.addmm.out(bias, a, b, beta=beta, alpha=alpha, out=out)
