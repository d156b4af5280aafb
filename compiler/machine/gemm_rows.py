"""Float32 products split by rows across one OpenMP region of our own: each thread calls MKL's single-threaded
`sgemm_` (exported by libtorch_cpu) on its block of rows, optionally after copying a row bias into them.

Why: ATen's `mm` lets MKL thread the product itself, which costs several fork/join and barrier points per call.
With 2 threads on 2 cores shared with other processes, every one of them waits for the other thread to be
scheduled again: a (128,768)x(768,768) product took p50 60 ms there against 32 ms for one region of row blocks
(p10 30 vs 20; (128,768)x(768,3072) 132 vs 96 ms, (394,768)x(768,3072) 175 vs 148 ms, interleaved, same inputs),
and less CPU time in total (MKL's waiting threads spin). The same call alone and inside a lens graph took the
same time as eager's `F.linear` (docs/performance.md): the wait was the library's threading, not lens's code.
Used for products with at least `MIN_ROWS_PER_THREAD` rows a thread (so each thread's block is a whole GEMM
worth packing its weight for) and more than one thread; `LENS_GEMM=aten` keeps ATen's `mm` (eager's threading).
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os

import torch

from compiler.machine import helper_library

log = logging.getLogger(__name__)

MIN_ROWS_PER_THREAD = 32
MIN_MACS = 1 << 20

SOURCE = r"""
#include <omp.h>
#include <cstdint>
typedef void (*lens_sgemm_t)(const char*, const char*, const int*, const int*, const int*, const float*,
                             const float*, const int*, const float*, const int*, const float*, float*, const int*);
// Rows r0..r1 of C (N wide) set to the bias, if any: the beta (1 or 0) the product then adds to them with.
static inline float lens_bias_rows(const float* bias, float* c, int64_t r0, int64_t r1, int64_t N)
{
    if (!bias)
        return 0.0f;
    for (int64_t r = r0; r < r1; r++) {
        #pragma omp simd
        for (int64_t j = 0; j < N; j++) c[r * N + j] = bias[j];
    }
    return 1.0f;
}
// row-major C[M,N] (contiguous) = A[M,K] @ B[K,N] (+ bias[N] per row): column-major C^T = op(B^T) op(A^T), the
// rows of A and C split evenly over the team; A and B each have one unit stride (flags *_t: 1 when it is the
// first). Each thread's call runs single-threaded: MKL does not open a nested region.
extern "C" void lens_gemm_rows(void* sgemm, const float* a, int64_t lda, int64_t a_t, const float* b, int64_t ldb,
                               int64_t b_t, const float* bias, float* c, int64_t M, int64_t K, int64_t N,
                               int64_t threads)
{
    #pragma omp parallel num_threads(threads)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t r0 = M * t / nt, r1 = M * (t + 1) / nt;
        int rows = (int)(r1 - r0), n = (int)N, k = (int)K, la = (int)lda, lb = (int)ldb;
        if (rows > 0) {
            float one = 1.0f, beta = lens_bias_rows(bias, c, r0, r1, N);
            const float* a_rows = a + (a_t ? r0 : r0 * lda);
            ((lens_sgemm_t)sgemm)(b_t ? "T" : "N", a_t ? "T" : "N", &n, &rows, &k, &one, b, &lb, a_rows, &la,
                                  &beta, c + r0 * N, &n);
        }
    }
}
typedef void (*lens_sgemm_compute_t)(int, int, int, int, int, int, const float*, int, const float*, int, float,
                                     float*, int);
// The same row split with B packed once by MKL (cblas_sgemm_pack, compiler/machine/gemm_packed.py): each thread's
// cblas_sgemm_compute reads the pack instead of packing B again for its rows.
extern "C" void lens_gemm_packed_rows(void* compute, const float* a, int64_t lda, int64_t a_t, const float* packed,
                                      const float* bias, float* c, int64_t M, int64_t K, int64_t N, int64_t threads)
{
    #pragma omp parallel num_threads(threads)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t r0 = M * t / nt, r1 = M * (t + 1) / nt;
        if (r1 > r0) {
            const float beta = lens_bias_rows(bias, c, r0, r1, N);
            // CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112, CblasPacked 151
            ((lens_sgemm_compute_t)compute)(101, a_t ? 112 : 111, 151, (int)(r1 - r0), (int)N, (int)K,
                                            a + (a_t ? r0 : r0 * lda), (int)lda, packed, (int)N, beta, c + r0 * N,
                                            (int)N);
        }
    }
}
"""


@functools.lru_cache(maxsize=None)
def mkl_symbol(name: str) -> int | None:
    """The address of MKL's function `name` exported by libtorch_cpu (None where torch's BLAS is not MKL or hides
    it)."""
    if not torch.backends.mkl.is_available():
        return None
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


def sgemm_address() -> int | None:
    """The address of MKL's LP64 `sgemm_` in libtorch_cpu."""
    return mkl_symbol("sgemm_")


def _load(path: str):
    try:
        lib = ctypes.CDLL(path)
        fn, packed = lib.lens_gemm_rows, lib.lens_gemm_packed_rows
    except (OSError, AttributeError) as e:
        log.warning("row-split GEMM helper unloadable (%s): products use ATen's mm", e)
        return None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [ptr, ptr, i64, i64, ptr, i64, i64, ptr, ptr, i64, i64, i64, i64]
    packed.argtypes = [ptr, ptr, i64, i64, ptr, ptr, ptr, i64, i64, i64, i64]
    fn.restype = packed.restype = None
    return lib


# The helper's library (lens_gemm_rows; lens_gemm_packed_rows for compiler/machine/gemm_packed.py): built once per
# toolchain in `<cache>/gemm_rows/<key>/` by a detached background g++ started at the first product that could use
# it (like the precompiled header: no compile waits for it; ATen's mm serves products until it is there).
HELPER = helper_library.BackgroundLibrary("gemm_rows", lambda: True, lambda: (SOURCE, []), _load)


def operand_layout(t: torch.Tensor, rows: int, cols: int) -> tuple[int, int] | None:
    """(leading dimension, transposed flag) of a (rows, cols) matrix with one unit stride, as BLAS takes it."""
    s0, s1 = t.stride()
    if s1 == 1 and s0 >= max(1, cols):
        return s0, 0
    if s0 == 1 and s1 >= max(1, rows):
        return s1, 1
    return None


def applies(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether the row-split product serves a @ b (+ bias): float32 2-D CPU operands with a unit stride each,
    enough rows for every thread, MKL's sgemm found, no autograd to record."""
    if a.dtype != torch.float32 or b.dtype != torch.float32 or a.dim() != 2 or b.dim() != 2:
        return False
    if a.device.type != "cpu" or b.device.type != "cpu":
        return False
    (m, k), n = a.shape, b.shape[1]
    threads = torch.get_num_threads()
    if threads < 2 or m < MIN_ROWS_PER_THREAD * threads or m * n * k < MIN_MACS or max(m, n, k) >= 2**31:
        return False
    if bias is not None and (bias.dtype != torch.float32 or bias.numel() != n or bias.stride()[-1] != 1
                             or (bias.dim() == 2 and bias.shape[0] != 1) or bias.dim() > 2):
        return False
    if (a.requires_grad or b.requires_grad) and torch.is_grad_enabled():
        return False
    return operand_layout(a, m, k) is not None and operand_layout(b, k, n) is not None and sgemm_address() is not None


def mm_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> bool:
    """out (contiguous (M, N)) = a @ b (+ bias), False (out untouched) where the helper cannot run it."""
    lib = HELPER.get()
    if lib is None:
        return False
    (m, k), n = a.shape, b.shape[1]
    lda, a_t = operand_layout(a, m, k)
    ldb, b_t = operand_layout(b, k, n)
    lib.lens_gemm_rows(sgemm_address(), a.data_ptr(), lda, a_t, b.data_ptr(), ldb, b_t,
           bias.data_ptr() if bias is not None else None, out.data_ptr(), m, k, n, torch.get_num_threads())
    return True
