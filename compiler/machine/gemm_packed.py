"""Float32 products whose weight is a frozen constant, computed from MKL's packed copy of that weight.

Every `sgemm` call packs its B operand (the weight) into MKL's internal blocked layout before multiplying; for a
transformer's products (128 rows against a 768x3072 weight) that repacking is a pass over the whole weight per
call and per thread. A constant of a frozen inference graph (compiler/graph_passes/freezing.py) is the same matrix on every call,
so it is packed once (`cblas_sgemm_pack`, on its first use as a B operand) and each call's rows are multiplied
against the pack (`cblas_sgemm_compute`), split by rows over one OpenMP region (`gemm_rows.py`'s helper library,
each thread single-threaded MKL). Measured side by side against ATen's `mm` (MKL threading itself), 2 threads of
the AMX Xeon, medians: (128,768)x(768,3072) 2.47 -> 2.09 ms, (128,3072)x(3072,768) 2.43 -> 2.15, (128,768)x(768,
768) 0.69 -> 0.52, (394,768)x(768,3072) 7.01 -> 5.82 (docs/performance.md); the same MKL kernels, so results are
MKL's float32 products (bitwise equal to the row-split `sgemm` on those shapes). Where oneDNN runs the products
(gemm.py: MKL on a CPU not Intel's), the same registry keeps oneDNN's blocked copy of each weight (`onednn_weight`),
and so it does for bfloat16/float16 constants (autocast's weight casts, compiler/graph_passes/freezing_autocast.py)
where oneDNN computes products in that dtype (gemm_half.py `packs_weights`).

Which tensors: `register` is called by freezing (under no_grad, `config.freezing`) with the parameters and buffers of
the graph and the constants it computed; a B operand is served from a pack when it is a view of a registered tensor's
storage (generated code's views share no version counter) that is still alive, packed at that tensor's current
version counter (an in-place change, such as an optimizer step or
`copy_`, makes the next product pack it again; a tensor's packs are freed with it). Writes through `p.data` (its
own version counter) are the one change no counter shows, as for freezing's constants: `LENS_FREEZING=0`. A pack is a
second copy of its weight (MKL asks for ~9 MiB more than the weight, pages it never touches): once the weights of the
packs held (their elements' bytes) reach `config.cpp.gemm_packed_max_bytes` (LENS_GEMM_PACKED_MAX_BYTES, 4 GiB), further weights are not packed. Products with fewer
than `gemm_rows.MIN_ROWS_PER_THREAD` rows a thread (MKL's packed path is slow on a few rows) or fewer than `MIN_MACS`
multiply-adds (MKL's own threading is faster there) stay ATen's, as does everything under `LENS_GEMM=aten` (accuracy checks) or `LENS_GEMM_PACKED=0`.
"""
from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import torch

from compiler import config
from compiler.machine import gemm_rows
from compiler.machine.gemm_half import HALF_DTYPES
from compiler.machine.weight_packs import PackRegistry

# Products below this many multiply-adds stay ATen's: MobileBERT's (128,128)x(128,512)-sized ones ran 1.07-1.24x
# slower from packs split by rows than in MKL's own threading (whole model 1.10x), (128,384)x(384,512) 0.98x, BERT's
# (128,768)x(768,768) 0.92x (measured inside the compiled models, docs/performance.md).
MIN_MACS = 1 << 25
_ROW_MAJOR, _NO_TRANS, _TRANS, _B_MATRIX = 101, 111, 112, 162


class _Key(NamedTuple):
    """Which pack of a registered constant: the B operand it copies and whose layout it is (MKL's; oneDNN's, made for
    products of `rows` rows)."""
    data_ptr: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    element_size: int
    library: str
    rows: int | None


def _data_bytes(key: _Key) -> int:
    """The bytes of the B operand's elements a pack copies (the buffer MKL asks for is ~9 MiB larger whatever the
    weight, pages it never touches): what config.cpp.gemm_packed_max_bytes counts."""
    k, n = key.shape
    return key.element_size * k * n


_PACKED_BYTES = 0  # what the packs held now take (config.cpp.gemm_packed_max_bytes caps it)


def _dropped(packs: dict) -> None:
    global _PACKED_BYTES
    _PACKED_BYTES -= sum(_data_bytes(key) for key in packs)


# frozen constants whose later use as a product's B operand may be packed: float32 CPU matrices (MKL's or oneDNN's
# packs), bfloat16/float16 ones (oneDNN's, where it computes in that dtype: gemm.py asks)
_PACKS = PackRegistry(lambda t: t.dim() == 2 and (t.dtype == torch.float32 or t.dtype in HALF_DTYPES), _dropped)
register = _PACKS.register
packed_count = _PACKS.packed_count



@functools.lru_cache(maxsize=None)
def _functions():
    """(pack size, pack, compute address) of MKL's packed GEMM in libtorch_cpu, None where it is not there."""
    names = ("cblas_sgemm_pack_get_size", "cblas_sgemm_pack", "cblas_sgemm_compute")
    addresses = [gemm_rows.mkl_symbol(n) for n in names]
    if None in addresses:
        return None
    int_ = ctypes.c_int
    size_fn = ctypes.CFUNCTYPE(ctypes.c_size_t, int_, int_, int_, int_)(addresses[0])
    pack_fn = ctypes.CFUNCTYPE(None, *[int_] * 6, ctypes.c_float, ctypes.c_void_p, int_, ctypes.c_void_p)(addresses[1])
    return size_fn, pack_fn, addresses[2]


def _pack(b: torch.Tensor, m: int) -> torch.Tensor:
    """MKL's packed copy of B operand `b` (k, n) (mm_into checked that MKL's packing is there)."""
    size_fn, pack_fn, _ = _functions()
    (k, n), (ldb, b_t) = b.shape, gemm_rows.operand_layout(b, *b.shape)
    packed = torch.empty(size_fn(_B_MATRIX, m, n, k), dtype=torch.uint8)  # (64-byte aligned: c10's allocator)
    pack_fn(_ROW_MAJOR, _B_MATRIX, _TRANS if b_t else _NO_TRANS, m, n, k, 1.0, b.data_ptr(), ldb, packed.data_ptr())
    return packed


def _lookup(b: torch.Tensor, m: int) -> torch.Tensor | None:
    global _PACKED_BYTES
    packs = _PACKS.packs_of(b)
    if packs is None:
        return None
    key = _Key(b.data_ptr(), b.shape, b.stride(), b.element_size(), "mkl", None)
    packed = packs.get(key)
    if packed is None:
        if _PACKED_BYTES + _data_bytes(key) > config.cpp.gemm_packed_max_bytes:
            return None  # (a second copy of every weight: past the cap, products read the weight itself)
        packed = packs[key] = _pack(b, m)
        _PACKED_BYTES += _data_bytes(key)
    return packed


def onednn_weight(b: torch.Tensor, m: int) -> torch.Tensor | None:
    """oneDNN's blocked copy of the B operand `b` (k, n) as the weight (n, k) of `mkldnn._linear_pointwise` for
    products of `m` rows (`_reorder_linear_weight`, made on its first use), None unless `b` is a view of a registered
    constant (and under the byte cap). Given a plain weight, oneDNN copies its blocks into its own layout on every
    call: from the pack, (128,768)x(768,3072) 6.30 -> 5.80 ms, (128,512)x(512,32128) 43.2 -> 38.8 (one thread of the
    AMD EPYC, medians; every transformer shape 6-11% faster, results bitwise equal; docs/performance.md). A
    bfloat16 weight's pack is oneDNN's bfloat16 blocked layout (`_reorder_linear_weight` keeps the dtype)."""
    global _PACKED_BYTES
    packs = _PACKS.packs_of(b) if _PACKS and config.cpp.gemm_packed else None
    if packs is None:
        return None
    key = _Key(b.data_ptr(), b.shape, b.stride(), b.element_size(), "onednn", m)  # (inline: a product's hot path)
    packed = packs.get(key)
    if packed is None:
        if _PACKED_BYTES + _data_bytes(key) > config.cpp.gemm_packed_max_bytes:
            return None
        packed = packs[key] = torch.ops.mkldnn._reorder_linear_weight(b.t(), m)
        _PACKED_BYTES += _data_bytes(key)
    return packed


def mm_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> bool:
    """out (contiguous (M, N)) = a @ b (+ bias) from b's pack; False (out untouched) unless b is a registered
    constant and the product is one the row split takes."""
    if not _PACKS or not config.cpp.gemm_packed or config.cpp.gemm_library != "auto":
        return False
    if a.shape[0] * b.shape[0] * b.shape[1] < MIN_MACS or not gemm_rows.applies(a, b, bias):
        return False
    functions = _functions()
    lib = gemm_rows.HELPER.get()
    if functions is None or lib is None:
        return False
    (m, k), n = a.shape, b.shape[1]
    packed = _lookup(b, m)
    if packed is None:
        return False
    lda, a_t = gemm_rows.operand_layout(a, m, k)
    lib.lens_gemm_packed_rows(functions[2], a.data_ptr(), lda, a_t, packed.data_ptr(),
                              bias.data_ptr() if bias is not None else None, out.data_ptr(), m, k, n,
                              torch.get_num_threads())
    return True
