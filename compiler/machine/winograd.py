"""Frozen float32 3x3 convolutions of stride 1 by Winograd's F(4x4, 3x3): 4x fewer multiply-adds than the direct
convolution oneDNN computes, where there are enough tiles and channels to pay for the transforms.

Each 4x4 tile of the output is computed from a 6x6 tile of the input: the input's tiles are transformed (V = B^T d B,
36 values a channel), multiplied by the transformed weight (U = G g G^T, made once per frozen weight, in float64 and
rounded once) in 36 independent matrix products over the input channels, and transformed back (Y = A^T M A) as the
output is written, with the bias, the activation and a fused residual sum applied there. A tile's 36 products
replace 144 multiply-adds of the direct convolution. The products are ours too: up to 12 tiles' rows against a
32-channel panel of U, the 12 x 32 accumulators in 24 AVX-512 registers (ATen's bmm is MKL's AVX2 code on AMD
CPUs, ~55-90 GFLOP/s at these sizes). One thread of a Zen 5 EPYC, oneDNN's direct primitive against this: (1,64,56,56)
to 64 channels 2.0 -> 1.0-1.3 ms, (1,128,28,28) 1.9 -> 0.8, (1,256,14,14) 1.9 -> 1.0, (1,384,14,14) 4.4 -> 2.4-2.7;
7x7 outputs (4 tiles, the weight's transform 4x the weight read for them) 0.7-1.5x, so only convolutions with at
least MIN_TILES tiles and MIN_CHANNELS channels a group each way (or NARROW_MIN_TILES tiles of NARROW_CHANNELS
in whole vectors) are taken, a call's tiles in chunks that keep its transforms in cache (docs/performance.md, sessions
17-18; benchmarks/conv_bench.py measures it).

Results: not the direct convolution's bits. The transforms' rounding puts the error against a float64 convolution
at about 4-7x the direct convolution's (RMSE ~1.2e-6 against ~3e-7 on outputs of RMS 0.7), far inside PyTorch's
accuracy rule, as freezing's batch-norm folding also moves the last bits; tests/compiler/machine/test_winograd.py
bounds it, and each such call's why-record says so (compiler/decisions.py). `LENS_WINOGRAD=0` keeps every
convolution direct (oneDNN's, bit for bit ATen's).

The transforms and products are a small C++ library of ours (winograd_source.py's `SOURCE`), built by a background g++ on first need
(helper_library.BackgroundLibrary), 16 channels a vector, tiles (transforms) and panels (products) split over OpenMP threads;
until it is there, or where it failed, convolutions run direct.
"""
from __future__ import annotations

import ctypes
import logging
import threading

import torch

from compiler import config
from compiler.machine import build, helper_library
from compiler.machine.winograd_source import SOURCE

log = logging.getLogger(__name__)

# the fewest 4x4 output tiles (over the batch) and input/output channels a group a convolution needs to be taken; or,
# with NARROW_CHANNELS to MIN_CHANNELS a multiple of 16 (no partial vector), NARROW_MIN_TILES tiles. Measured one
# thread of a Zen 5 EPYC, Winograd / direct: 64 channels at 14x14 (16 tiles) 0.94, 96 0.65, 48 1.10, 32 1.37;
# 32 channels at 28x28 (49 tiles) 0.82, at 56x56-147x147 0.68-0.71, 36 and 40 channels at 56x56 1.02-1.03
MIN_TILES = 16
MIN_CHANNELS = 64
NARROW_CHANNELS = 32
NARROW_MIN_TILES = 49
# more groups than this stay direct: 2-4 groups measured 0.54-0.83x direct, 6-32 groups 0.93-2.04x (ResNeXt-101
# 32x16d's 32 groups of 64 channels at 14x14: 2.04x; the products are many small ones against a large transform)
MAX_GROUPS = 4
# tiles a call transforms and multiplies at a time: as many as keep their V and M within CHUNK_BYTES (L2-sized), at
# least MIN_CHUNK_TILES, all at once where the weight's transform is over MAX_CHUNKED_WEIGHT (chunk_tiles)
CHUNK_BYTES = 2 << 20
MIN_CHUNK_TILES = 96
MAX_CHUNKED_WEIGHT = 4 << 20

# attr (as ATen's _convolution_pointwise names it) -> the helper's activation code (lens_activation)
ACTIVATIONS = {"none": 0, "relu": 1, "leaky_relu": 2, "hardtanh": 3, "sigmoid": 4, "swish": 5, "hardswish": 6,
               "hardsigmoid": 7, "tanh": 8, "gelu": 9}
_GELU_TANH = 10
# Winograd's weight transform G for F(4x4, 3x3) (points 0, +-1, +-2, infinity)
_G = torch.tensor([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                   [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=torch.float64)


def _load(path: str):
    """The transforms' library at `path` with its functions' argument types, or None (logged) where it won't load."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        log.warning("kernel-lens: Winograd helper unloadable (%s): convolutions run direct", e)
        return None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.lens_winograd_input.argtypes = [ptr, ptr, *[i64] * 9, ctypes.c_int]
    lib.lens_winograd_products.argtypes = [ptr, ptr, ptr, i64, i64, i64, i64, ctypes.c_int]
    lib.lens_winograd_output.argtypes = [ptr, ptr, ptr, ptr, *[i64] * 8, ctypes.c_int, ctypes.c_float,
                                         ctypes.c_float, ctypes.c_int, ctypes.c_int]
    lib.lens_winograd_input.restype = lib.lens_winograd_output.restype = lib.lens_winograd_products.restype = None
    return lib


def library() -> helper_library.BackgroundLibrary:
    """A holder of the transforms' library: built once per toolchain in `<cache>/winograd/<key>/` by a background
    g++ started at the first frozen convolution weight (oneDNN's direct convolution serves calls until it is
    there)."""
    return helper_library.BackgroundLibrary("winograd", lambda: config.cpp.winograd, lambda: (SOURCE, []), _load)


HELPER = library()


def available(wait: bool = False) -> bool:
    """Whether the transforms' library is loaded (`wait`: build it now if it is not there)."""
    return HELPER.get(wait) is not None


def pending() -> bool:
    """Whether the library is still being built (neither loaded nor given up on)."""
    return HELPER.pending()


def tiles(out_size) -> int:
    """The 4x4 output tiles of an (N, K, Ho, Wo) output."""
    n, _k, ho, wo = out_size
    return n * ((ho + 3) // 4) * ((wo + 3) // 4)


def chunk_tiles(t: int, c: int, kp: int, u_bytes: int) -> int:
    """How many of a call's `t` tiles go through the three steps at a time: all where their transformed input and
    products (36 * (C + KP) floats a tile) fit CHUNK_BYTES or the weight's transform (`u_bytes`, read again for each
    chunk) is over MAX_CHUNKED_WEIGHT, else as many as fit but at least MIN_CHUNK_TILES (fewer rows would starve the
    products), the chunks of a call made equal (196 tiles as two of 98, not 192 and a tail of 4)."""
    if u_bytes > MAX_CHUNKED_WEIGHT:
        return t
    size = max(CHUNK_BYTES // (36 * 4 * (c + kp)), MIN_CHUNK_TILES)
    chunks = -(-t // size)
    return -(-t // chunks)


def supported() -> bool:
    """Whether this CPU runs the products well: AVX-512 (their 24 accumulators of 16 floats stay in registers; on
    AVX2's 16 registers of 8 they would spill), else every convolution stays direct."""
    return "avx512f" in build.cpu_flags()


def takes(x_size, weight: torch.Tensor, stride, dilation, groups: int, out_size) -> bool:
    """Whether a convolution is Winograd's here: float32, a 3x3 kernel, stride and dilation 1, at least MIN_CHANNELS
    input and output channels a group (at most MAX_GROUPS groups, each's output channels a multiple of 32) and
    MIN_TILES output tiles (or fewer channels, from NARROW_CHANNELS in 16s, and NARROW_MIN_TILES tiles), on a CPU with
    AVX-512 (the products keep 24 vectors of 16 floats in registers)."""
    return weight.dim() == 4 and takes_sizes(weight.dtype, x_size, weight.shape, stride, dilation, groups, out_size)


def takes_sizes(dtype: torch.dtype, x_size, w_size, stride, dilation, groups: int, out_size) -> bool:
    """`takes` from the sizes alone (what the debug directory's why-record says of a convolution)."""
    if dtype != torch.float32 or len(w_size) != 4 or tuple(w_size[2:]) != (3, 3) or len(x_size) != 4:
        return False
    k, cg = w_size[:2]
    if tuple(stride) != (1, 1) or tuple(dilation) != (1, 1) or k % groups or (groups > 1 and (k // groups) % 32) \
            or groups > MAX_GROUPS:
        return False
    c, t = min(k // groups, cg), tiles(out_size)
    enough = (c >= MIN_CHANNELS and t >= MIN_TILES) or (c >= NARROW_CHANNELS and c % 16 == 0 and t >= NARROW_MIN_TILES)
    return enough and supported()


def transformed_weight(weight: torch.Tensor, groups: int = 1) -> torch.Tensor:
    """U = G g G^T for every (output, input) channel pair (computed in float64, rounded once), packed as the
    products read it: [36, P, C / groups, 32] float32, P panels of 32 output channels (a group's P / groups in a
    row; one group's rounded up to 32, zeros past the channels)."""
    u = torch.einsum("ai,kcij,bj->abkc", _G, weight.detach().double(), _G).reshape(36, *weight.shape[:2])
    k, cg = weight.shape[:2]
    kp = (k + 31) // 32 * 32 if groups == 1 else k
    u = torch.nn.functional.pad(u, (0, 0, 0, kp - k))  # [36, KP, C / groups]
    return u.reshape(36, kp // 32, 32, cg).transpose(2, 3).float().contiguous()


class _Workspace(threading.local):
    """The transformed input and the products of this thread's calls, grown to the largest asked for."""

    def __init__(self):
        self.buffer = torch.empty(0)

    def take(self, count: int) -> torch.Tensor:
        if self.buffer.numel() < count:
            self.buffer = torch.empty(count)
        return self.buffer[:count]


_WORKSPACE = _Workspace()


class Convolution:
    """One frozen float32 3x3 convolution by Winograd's F(4x4, 3x3), with onednn_direct.Convolution's `fits` and
    `run`: its bias (or none), activation and residual sum applied as the output is written, channels-last."""

    __slots__ = ("_lib", "act", "add", "bias_dtype", "groups", "out_size", "out_stride", "padding", "post",
                 "scalars", "u")

    def __init__(self, u: torch.Tensor, groups: int, padding, out_size, bias_dtype, act: int, scalars, add: bool,
                 post: int, lib):
        _n, k, ho, wo = out_size
        self.u, self.padding, self.out_size, self.out_stride = u, tuple(padding), tuple(out_size), (k * ho * wo, 1,
                                                                                                    wo * k, k)
        self.bias_dtype, self.act, self.scalars, self.add, self.post, self._lib = bias_dtype, act, scalars, add, \
            post, lib
        self.groups = groups

    @classmethod
    def make(cls, x_size, weight: torch.Tensor, bias_dtype: torch.dtype | None, padding, stride, dilation,
             groups: int, attr: str, scalars, algorithm: str, out_size: list[int], add: bool = False,
             post_attr: str = "none") -> Convolution | None:
        """The convolution for these arguments (onednn_direct.Convolution.make's), or None where this path does not
        take them."""
        lib = HELPER.get()
        if lib is None or not takes(x_size, weight, stride, dilation, groups, out_size):
            return None
        if bias_dtype not in (None, torch.float32) or attr not in ACTIVATIONS or post_attr not in ("none", "relu"):
            return None
        act = _GELU_TANH if attr == "gelu" and algorithm == "tanh" else ACTIVATIONS[attr]
        if any(not isinstance(s, (int, float)) for s in scalars) or len(scalars) > 2:
            return None
        s = [float(v) for v in scalars] + [0.0] * (2 - len(scalars))
        if attr == "leaky_relu" and not scalars:
            s[0] = 0.01
        return cls(transformed_weight(weight, groups), groups, padding, out_size, bias_dtype, act, tuple(s), add,
                   ACTIVATIONS[post_attr], lib)

    def fits(self, x: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor | None = None) -> bool:
        """Whether `run` takes these tensors as they are (onednn_direct.Convolution.fits's rule)."""
        if x.dtype != torch.float32 or (other is not None and other.dtype != torch.float32) \
                or self.add != (other is not None):
            return False
        if bias is None:
            return self.bias_dtype is None
        return bias.dtype == self.bias_dtype and bias.is_contiguous()

    def run(self, x: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor | None = None) -> torch.Tensor:
        """The convolution of channels-last contiguous `x` (plus channels-last `other` for a fused sum)."""
        n, c, h, w = x.shape
        _n, k, ho, wo = self.out_size
        th, tw = (ho + 3) // 4, (wo + 3) // 4
        t = n * th * tw
        threads = torch.get_num_threads()
        kp = self.u.shape[1] * 32
        chunk = chunk_tiles(t, c, kp, self.u.numel() * 4)
        space = _WORKSPACE.take(36 * chunk * (c + kp))
        v, m = space[:36 * chunk * c], space[36 * chunk * c:]
        lib, out = self._lib, torch.empty_strided(self.out_size, self.out_stride, dtype=torch.float32)
        b_ptr = bias.data_ptr() if bias is not None else None
        o_ptr = other.data_ptr() if other is not None else None
        for t0 in range(0, t, chunk):  # (tiles in chunks whose transforms stay in cache: chunk_tiles)
            count = min(chunk, t - t0)
            lib.lens_winograd_input(x.data_ptr(), v.data_ptr(), h, w, c, self.padding[0], self.padding[1], th, tw, t0,
                                    count, threads)
            lib.lens_winograd_products(v.data_ptr(), self.u.data_ptr(), m.data_ptr(), count, c, kp, self.groups,
                                       threads)
            lib.lens_winograd_output(m.data_ptr(), b_ptr, o_ptr, out.data_ptr(), ho, wo, k, kp, th, tw, t0, count,
                                     self.act, self.scalars[0], self.scalars[1], self.post, threads)
        return out
