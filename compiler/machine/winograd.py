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
least MIN_TILES tiles and MIN_CHANNELS channels a group each way are taken (docs/performance.md, session 17;
benchmarks/conv_bench.py measures it).

Results: not the direct convolution's bits. The transforms' rounding puts the error against a float64 convolution
at about 4-7x the direct convolution's (RMSE ~1.2e-6 against ~3e-7 on outputs of RMS 0.7), far inside PyTorch's
accuracy rule, as freezing's batch-norm folding also moves the last bits; tests/compiler/machine/test_winograd.py
bounds it, and each such call's why-record says so (compiler/decisions.py). `LENS_WINOGRAD=0` keeps every
convolution direct (oneDNN's, bit for bit ATen's).

The transforms and products are a small C++ library of ours (`SOURCE`), built by a background g++ on first need
(build.BackgroundLibrary), 16 channels a vector, tiles (transforms) and panels (products) split over OpenMP threads;
until it is there, or where it failed, convolutions run direct.
"""
from __future__ import annotations

import ctypes
import logging
import threading

import torch

from compiler import config
from compiler.machine import build

log = logging.getLogger(__name__)

# the fewest 4x4 output tiles (over the batch) and input/output channels a convolution needs to be taken
MIN_TILES = 16
MIN_CHANNELS = 48

SOURCE = r"""
// A 3x3 convolution of stride 1 computes every 4x4 output tile from a 6x6 input tile: V = B^T d B (36 values a
// channel), M = V . U summed over input channels (36 independent matrix products, U = G g G^T the weight's
// transform), Y = A^T M A (16 values an output channel). 36 products of a tile against 9 * 16 = 144 multiply-adds of
// the direct convolution: 4x fewer, paid for by the transforms, which are additions and a few scalings.
#include <cmath>
#include <cstdint>
#include <cstring>

typedef float lens_v16 __attribute__((vector_size(64)));

// `n` (1..16) floats at p: a full vector, else the first n lanes and zeros
static inline lens_v16 lens_load(const float* p, int64_t n)
{
    lens_v16 v = {};
    if (n == 16) std::memcpy(&v, p, sizeof(v));  // (one vector load: the constant size is what makes it one)
    else std::memcpy(&v, p, n * sizeof(float));
    return v;
}

static inline void lens_store(float* p, lens_v16 v, int64_t n)
{
    if (n == 16) std::memcpy(p, &v, sizeof(v));
    else std::memcpy(p, &v, n * sizeof(float));
}

// B^T over one column (or row) of 6: points 0, +-1, +-2 and infinity
static inline void lens_bt(const lens_v16* d, int s, lens_v16* o, int os)
{
    lens_v16 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    o[0] = 4.f * d0 - 5.f * d2 + d4;
    o[os] = d3 + d4 - 4.f * (d1 + d2);
    o[2 * os] = 4.f * (d1 - d2) + d4 - d3;
    o[3 * os] = 2.f * (d3 - d1) + d4 - d2;
    o[4 * os] = 2.f * (d1 - d3) + d4 - d2;
    o[5 * os] = 4.f * d1 - 5.f * d3 + d5;
}

// A^T over one column (or row) of 6, giving 4
static inline void lens_at(const lens_v16* m, int s, lens_v16* o, int os)
{
    lens_v16 a = m[s] + m[2 * s], b = m[s] - m[2 * s], c = m[3 * s] + m[4 * s], d = m[3 * s] - m[4 * s];
    o[0] = m[0] + a + c;
    o[os] = b + 2.f * d;
    o[2 * os] = a + 4.f * c;
    o[3 * os] = b + 8.f * d + m[5 * s];
}

// tile t of T (over n, tile row, tile column) -> its image and top-left corner
static inline void lens_tile(int64_t t, int64_t th, int64_t tw, int64_t* n, int64_t* y, int64_t* x)
{
    *n = t / (th * tw);
    int64_t r = t % (th * tw);
    *y = (r / tw) * 4;
    *x = (r % tw) * 4;
}

// x: (N, H, W, C) channels-last; V: [36][T][C]. Input positions outside the image (the padding) are zeros.
extern "C" void lens_winograd_input(const float* x, float* V, int64_t N, int64_t H, int64_t W, int64_t C,
                                    int64_t ph, int64_t pw, int64_t th, int64_t tw, int threads)
{
    const int64_t T = N * th * tw;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        int64_t n, y0, x0;
        lens_tile(t, th, tw, &n, &y0, &x0);
        y0 -= ph;
        x0 -= pw;
        for (int64_t c = 0; c < C; c += 16) {
            const int64_t width = C - c < 16 ? C - c : 16;
            lens_v16 d[36], tmp[36], v[36];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++) {
                    const int64_t y = y0 + i, xx = x0 + j;
                    d[i * 6 + j] = (y >= 0 && y < H && xx >= 0 && xx < W)
                                       ? lens_load(x + ((n * H + y) * W + xx) * C + c, width)
                                       : lens_v16{};
                }
            for (int j = 0; j < 6; j++) lens_bt(d + j, 6, tmp + j, 6);
            for (int i = 0; i < 6; i++) lens_bt(tmp + i * 6, 1, v + i * 6, 1);
            for (int k = 0; k < 36; k++) lens_store(V + (k * T + t) * C + c, v[k], width);
        }
    }
}

// R rows of one product's V (row stride ldv) times a 32-column panel of U ([C][32]) into M (row stride ldm): the
// R x 32 accumulators in registers, a row's V value broadcast against the panel's two vectors per input channel
template <int R>
static inline void lens_panel(const float* v, int64_t ldv, const float* u, int64_t C, float* m, int64_t ldm)
{
    lens_v16 acc[R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = lens_v16{};
    for (int64_t c = 0; c < C; c++) {
        const lens_v16 u0 = lens_load(u + c * 32, 16), u1 = lens_load(u + c * 32 + 16, 16);
        for (int r = 0; r < R; r++) {
            const float e = v[r * ldv + c];
            acc[r][0] += e * u0;
            acc[r][1] += e * u1;
        }
    }
    for (int r = 0; r < R; r++) {
        lens_store(m + r * ldm, acc[r][0], 16);
        lens_store(m + r * ldm + 16, acc[r][1], 16);
    }
}

// the 36 products M[i] = V[i] . U[i], per group of channels: V [36][T][C] (group g's input channels g * C / G on),
// U packed as [36][P][C / G][32] (P panels of 32 output channels, P / G a group's; zeros past K when G is 1),
// M [36][T][P * 32]
extern "C" void lens_winograd_products(const float* V, const float* U, float* M, int64_t T, int64_t C, int64_t KP,
                                       int64_t G, int threads)
{
    const int64_t panels = KP / 32, cg = C / G, per_group = panels / G;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t i = 0; i < 36; i++)
        for (int64_t p = 0; p < panels; p++) {
            const float* u = U + (i * panels + p) * cg * 32;
            const float* v = V + i * T * C + (p / per_group) * cg;
            float* m = M + i * T * KP + p * 32;
            // rows in panels of as equal a size as 12 at most allows (16 tiles: two of 8, not 12 and a weak 4)
            const int64_t count = (T + 11) / 12, rows = (T + count - 1) / count;
            for (int64_t t = 0; t < T; t += rows) {
                const int64_t r = T - t < rows ? T - t : rows;
                const float* vt = v + t * C;
                float* mt = m + t * KP;
                switch (r) {
                case 12: lens_panel<12>(vt, C, u, cg, mt, KP); break;
                case 11: lens_panel<11>(vt, C, u, cg, mt, KP); break;
                case 10: lens_panel<10>(vt, C, u, cg, mt, KP); break;
                case 9: lens_panel<9>(vt, C, u, cg, mt, KP); break;
                case 8: lens_panel<8>(vt, C, u, cg, mt, KP); break;
                case 7: lens_panel<7>(vt, C, u, cg, mt, KP); break;
                case 6: lens_panel<6>(vt, C, u, cg, mt, KP); break;
                case 5: lens_panel<5>(vt, C, u, cg, mt, KP); break;
                case 4: lens_panel<4>(vt, C, u, cg, mt, KP); break;
                case 3: lens_panel<3>(vt, C, u, cg, mt, KP); break;
                case 2: lens_panel<2>(vt, C, u, cg, mt, KP); break;
                default: lens_panel<1>(vt, C, u, cg, mt, KP); break;
                }
            }
        }
}

// the activation `code` (winograd.py's ACTIVATIONS) of every lane, with its scalars a and b
static inline lens_v16 lens_activation(lens_v16 v, int code, float a, float b)
{
    switch (code) {
    case 0: return v;
    case 1: return v > 0.f ? v : lens_v16{};
    case 2: return v > 0.f ? v : v * a;
    case 3: return v < a ? a + lens_v16{} : (v > b ? b + lens_v16{} : v);
    default: break;
    }
    for (int l = 0; l < 16; l++) {
        const float e = v[l];
        switch (code) {
        case 4: v[l] = 1.f / (1.f + std::exp(-e)); break;
        case 5: v[l] = e / (1.f + std::exp(-e)); break;
        case 6: v[l] = e * std::fmin(std::fmax(e + 3.f, 0.f), 6.f) / 6.f; break;
        case 7: v[l] = std::fmin(std::fmax(e + 3.f, 0.f), 6.f) / 6.f; break;
        case 8: v[l] = std::tanh(e); break;
        case 9: v[l] = 0.5f * e * (1.f + std::erf(e * 0.70710678118654752f)); break;
        case 10: v[l] = 0.5f * e * (1.f + std::tanh(0.79788456080286536f * (e + 0.044715f * e * e * e))); break;
        default: break;
        }
    }
    return v;
}

// M: [36][T][ldm] (K used) -> out (N, Ho, Wo, K) channels-last: act(Y + bias), then (with `other`, the same layout as out)
// post(that + other).
extern "C" void lens_winograd_output(const float* M, const float* bias, const float* other, float* out, int64_t N,
                                     int64_t Ho, int64_t Wo, int64_t K, int64_t ldm, int64_t th, int64_t tw, int act, float a,
                                     float b, int post, int threads)
{
    const int64_t T = N * th * tw;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        int64_t n, y0, x0;
        lens_tile(t, th, tw, &n, &y0, &x0);
        for (int64_t k = 0; k < K; k += 16) {
            const int64_t width = K - k < 16 ? K - k : 16;
            lens_v16 m[36], tmp[24], o[16];
            for (int i = 0; i < 36; i++) m[i] = lens_load(M + (i * T + t) * ldm + k, width);
            for (int j = 0; j < 6; j++) lens_at(m + j, 6, tmp + j, 6);
            for (int i = 0; i < 4; i++) lens_at(tmp + i * 6, 1, o + i * 4, 1);
            const lens_v16 bv = bias ? lens_load(bias + k, width) : lens_v16{};
            for (int i = 0; i < 4 && y0 + i < Ho; i++)
                for (int j = 0; j < 4 && x0 + j < Wo; j++) {
                    const int64_t at = ((n * Ho + y0 + i) * Wo + x0 + j) * K + k;
                    lens_v16 v = lens_activation(o[i * 4 + j] + bv, act, a, b);
                    if (other) v = lens_activation(v + lens_load(other + at, width), post, 0.f, 0.f);
                    lens_store(out + at, v, width);
                }
        }
    }
}
"""


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
    lib.lens_winograd_input.argtypes = [ptr, ptr, *[i64] * 8, ctypes.c_int]
    lib.lens_winograd_products.argtypes = [ptr, ptr, ptr, i64, i64, i64, i64, ctypes.c_int]
    lib.lens_winograd_output.argtypes = [ptr, ptr, ptr, ptr, *[i64] * 7, ctypes.c_int, ctypes.c_float,
                                         ctypes.c_float, ctypes.c_int, ctypes.c_int]
    lib.lens_winograd_input.restype = lib.lens_winograd_output.restype = lib.lens_winograd_products.restype = None
    return lib


def library() -> build.BackgroundLibrary:
    """A holder of the transforms' library: built once per toolchain in `<cache>/winograd/<key>/` by a background
    g++ started at the first frozen convolution weight (oneDNN's direct convolution serves calls until it is
    there)."""
    return build.BackgroundLibrary("winograd", lambda: config.cpp.winograd, lambda: (SOURCE, []), _load)


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


def supported() -> bool:
    """Whether this CPU runs the products well: AVX-512 (their 24 accumulators of 16 floats stay in registers; on
    AVX2's 16 registers of 8 they would spill), else every convolution stays direct."""
    return "avx512f" in build.cpu_flags()


def takes(x_size, weight: torch.Tensor, stride, dilation, groups: int, out_size) -> bool:
    """Whether a convolution is Winograd's here: float32, a 3x3 kernel, stride and dilation 1, at least MIN_CHANNELS
    input and output channels a group (a group's output channels a multiple of 32 where there are groups) and
    MIN_TILES output tiles, on a CPU with AVX-512 (the products keep 24 vectors of 16 floats in registers)."""
    return weight.dim() == 4 and takes_sizes(weight.dtype, x_size, weight.shape, stride, dilation, groups, out_size)


def takes_sizes(dtype: torch.dtype, x_size, w_size, stride, dilation, groups: int, out_size) -> bool:
    """`takes` from the sizes alone (what the debug directory's why-record says of a convolution)."""
    if dtype != torch.float32 or len(w_size) != 4 or tuple(w_size[2:]) != (3, 3) or len(x_size) != 4:
        return False
    k, cg = w_size[:2]
    if tuple(stride) != (1, 1) or tuple(dilation) != (1, 1) or k % groups or (groups > 1 and (k // groups) % 32):
        return False
    return min(k // groups, cg) >= MIN_CHANNELS and tiles(out_size) >= MIN_TILES and supported()


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
        space = _WORKSPACE.take(36 * t * (c + kp))
        v, m = space[:36 * t * c], space[36 * t * c:]
        lib = self._lib
        lib.lens_winograd_input(x.data_ptr(), v.data_ptr(), n, h, w, c, self.padding[0], self.padding[1], th, tw,
                                threads)
        lib.lens_winograd_products(v.data_ptr(), self.u.data_ptr(), m.data_ptr(), t, c, kp, self.groups, threads)
        out = torch.empty_strided(self.out_size, self.out_stride, dtype=torch.float32)
        lib.lens_winograd_output(m.data_ptr(), bias.data_ptr() if bias is not None else None,
                                 other.data_ptr() if other is not None else None, out.data_ptr(), n, ho, wo, k, kp,
                                 th, tw, self.act, self.scalars[0], self.scalars[1], self.post, threads)
        return out
