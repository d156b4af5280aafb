"""Training graphs' convolution backward (`aten.convolution_backward`, an extern call of generated code) with the
weight gradient of depthwise convolutions larger than 3x3 computed by a loop of ours instead of ATen's.

oneDNN's jit depthwise backward-weights kernel refuses kernels wider than 3 ("bad param: kw > 3",
jit_uni_dw_conv_kernel_utils.cpp), so ATen's weight gradient of every 5x5 depthwise convolution runs oneDNN's
`gemm:jit` fallback over plain NCHW: 10-20x the layer's forward (MobileNetV3-Large's six: ~8.2 ms of a ~70-90 ms
training step, batch 1, one thread; docs/performance.md "Training convolutions as direct primitives"). Here a
float32 depthwise convolution (one input channel a group, groups = channels) whose kernel is larger than 3x3 in
either dimension has its weight gradient computed over channels-last copies of the input and the output's gradient,
16 channels a vector (a kernel row's accumulators in registers over the output positions), the channel blocks
split over OpenMP threads; the input's and the bias's gradients are still ATen's (the same call with the weight's
left out). The sum runs in another order than oneDNN's gemm: float32 accumulation-order differences (tests/compiler/machine/test_conv_train.py bounds them
against a float64 reference). Everything else, and every call while the helper is being built or where it failed,
runs ATen's op as before; `LENS_DEPTHWISE_GRAD=0` chooses that too. The profiler sees every call, whichever way it
ran, as PROFILER_NAMES' `lens::convolution_backward`.
"""
from __future__ import annotations

import ctypes
import logging

import torch
from torch._prims_common import suggest_memory_format

from compiler import config
from compiler.machine import helper_library

log = logging.getLogger(__name__)

# the kernel's accumulators live on its stack: taps (kh * kw) up to this many
MAX_TAPS = 121

SOURCE = r"""
#include <cstdint>
#include <cstring>

typedef float lens_v16 __attribute__((vector_size(64)));

static inline lens_v16 lens_load16(const float* p)
{
    lens_v16 v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

// One full block of 16 channels, a kernel KW wide: per kernel row, the KW taps' accumulators stay in registers over
// every output position (the positions whose taps are all inside the input row unchecked), then go to `out`.
template <int KW>
static void lens_dw_block(const float* x, const float* go, float* out, int64_t N, int64_t C, int64_t H, int64_t W,
                          int64_t Ho, int64_t Wo, int64_t kh, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                          int64_t dh, int64_t dw, int64_t c0)
{
    const int64_t reach = W - 1 - (KW - 1) * dw + pw;
    int64_t hi = reach < 0 ? 0 : reach / sw + 1, lo = (pw + sw - 1) / sw;
    if (hi > Wo) hi = Wo;
    if (lo > Wo) lo = Wo;
    if (hi < lo) hi = lo;
    for (int64_t i = 0; i < kh; i++) {
        lens_v16 acc[KW];
        for (int j = 0; j < KW; j++) acc[j] = lens_v16{};
        for (int64_t n = 0; n < N; n++)
            for (int64_t oh = 0; oh < Ho; oh++) {
                const int64_t ih = oh * sh + i * dh - ph;
                if (ih < 0 || ih >= H) continue;
                const float* xr = x + (n * H + ih) * W * C + c0;
                const float* gr = go + (n * Ho + oh) * Wo * C + c0;
                auto edge = [&](int64_t ow) {
                    const lens_v16 g = lens_load16(gr + ow * C);
                    for (int j = 0; j < KW; j++) {
                        const int64_t iw = ow * sw + j * dw - pw;
                        if (iw >= 0 && iw < W) acc[j] += g * lens_load16(xr + iw * C);
                    }
                };
                for (int64_t ow = 0; ow < lo; ow++) edge(ow);
                for (int64_t ow = lo; ow < hi; ow++) {
                    const lens_v16 g = lens_load16(gr + ow * C);
                    const float* v = xr + (ow * sw - pw) * C;
                    for (int j = 0; j < KW; j++) acc[j] += g * lens_load16(v + j * dw * C);
                }
                for (int64_t ow = hi; ow < Wo; ow++) edge(ow);
            }
        for (int j = 0; j < KW; j++)
            for (int c = 0; c < 16; c++) out[(c0 + c) * kh * KW + i * KW + j] = acc[j][c];
    }
}

// dw[c][0][i][j] = sum over n, oh, ow of go[n][c][oh][ow] * x[n][c][oh*sh + i*dh - ph][ow*sw + j*dw - pw] (zero
// outside x), x (N, C, H, W) and go (N, C, Ho, Wo) channels-last contiguous, dw (C, 1, kh, kw) contiguous.
extern "C" void lens_depthwise_weight_grad(const float* x, const float* go, float* out, int64_t N, int64_t C,
                                           int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw,
                                           int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw)
{
    const int64_t blocks = (C + 15) / 16, taps = kh * kw;
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        alignas(64) float acc[@MAX_TAPS@ * 16];
        const int64_t c0 = b * 16, width = C - c0 < 16 ? C - c0 : 16;
        if (width == 16 && (kw == 3 || kw == 5 || kw == 7)) {
            auto block = kw == 3 ? lens_dw_block<3> : kw == 5 ? lens_dw_block<5> : lens_dw_block<7>;
            block(x, go, out, N, C, H, W, Ho, Wo, kh, sh, sw, ph, pw, dh, dw, c0);
            continue;
        }
        std::memset(acc, 0, sizeof(float) * 16 * taps);
        for (int64_t n = 0; n < N; n++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    const float* g = go + ((n * Ho + oh) * Wo + ow) * C + c0;
                    for (int64_t i = 0; i < kh; i++) {
                        const int64_t ih = oh * sh + i * dh - ph;
                        if (ih < 0 || ih >= H) continue;
                        for (int64_t j = 0; j < kw; j++) {
                            const int64_t iw = ow * sw + j * dw - pw;
                            if (iw < 0 || iw >= W) continue;
                            const float* v = x + ((n * H + ih) * W + iw) * C + c0;
                            float* a = acc + (i * kw + j) * 16;
                            if (width == 16) {
#pragma omp simd
                                for (int64_t c = 0; c < 16; c++) a[c] += g[c] * v[c];
                            } else {
                                for (int64_t c = 0; c < width; c++) a[c] += g[c] * v[c];
                            }
                        }
                    }
                }
        for (int64_t c = 0; c < width; c++)
            for (int64_t t = 0; t < taps; t++) out[(c0 + c) * taps + t] = acc[t * 16 + c];
    }
}
""".replace("@MAX_TAPS@", str(MAX_TAPS))


def _load(path: str):
    try:
        fn = ctypes.CDLL(path).lens_depthwise_weight_grad
    except (OSError, AttributeError) as e:
        log.warning("kernel-lens: depthwise weight-gradient helper unloadable (%s): ATen's op computes it", e)
        return None
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 14
    fn.restype = None
    return fn


def library() -> helper_library.BackgroundLibrary:
    """A holder of the kernel's function: its library built once per toolchain in `<cache>/conv_train/<key>/` by a
    background g++ started at the first call that could use it (ATen's op serves calls until it is there)."""
    return helper_library.BackgroundLibrary("conv_train", lambda: config.cpp.depthwise_grad, lambda: (SOURCE, []), _load)


HELPER = library()


def available(wait: bool = False) -> bool:
    """Whether the weight-gradient kernel is loaded (`wait`: build it now if it is not there)."""
    return HELPER.get(wait) is not None


_ATEN = torch.ops.aten.convolution_backward.default
_CHANNELS_LAST = torch.channels_last
_profiling = torch._C._autograd._profiler_enabled
# what torch.profiler calls convolution_backward's calls from generated code, whichever way they ran
PROFILER_NAMES = {_ATEN: "lens::convolution_backward"}
calls = 0  # weight gradients computed here (tests assert the path was taken)


def takes(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, transposed: bool, groups: int,
          output_mask) -> bool:
    """Whether the weight gradient is this module's: float32 CPU tensors, a 2-d depthwise convolution (groups =
    input channels = output channels) with a kernel larger than 3x3 (what oneDNN's jit kernel refuses) and at most
    MAX_TAPS taps, the weight's gradient asked for."""
    return bool(output_mask[1]) and not transposed and input.dim() == 4 and weight.dim() == 4 \
        and input.dtype == weight.dtype == grad_output.dtype == torch.float32 \
        and input.device.type == "cpu" and groups > 1 and weight.shape[0] == groups == input.shape[1] \
        and weight.shape[1] == 1 and max(weight.shape[2], weight.shape[3]) > 3 \
        and weight.shape[2] * weight.shape[3] <= MAX_TAPS


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    """`aten.convolution_backward`'s results, which generated code calls this for (compiler/codegen/wrapper.py's
    DIRECT_CALLS)."""
    if _profiling():
        with torch.profiler.record_function(PROFILER_NAMES[_ATEN]):
            return _backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                             output_padding, groups, output_mask)
    return _backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                     groups, output_mask)


def _backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
              output_mask):
    fn = HELPER.get() if takes(grad_output, input, weight, transposed, groups, output_mask) else None
    if fn is None:
        return _ATEN(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                     groups, output_mask)
    grad_input = grad_bias = None
    if output_mask[0] or output_mask[2]:
        grad_input, _, grad_bias = _ATEN(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                                         transposed, output_padding, groups, [output_mask[0], False, output_mask[2]])
    return grad_input, _weight_grad(fn, grad_output, input, weight, stride, padding, dilation), grad_bias


def _weight_grad(fn, grad_output, input, weight, stride, padding, dilation) -> torch.Tensor:
    """The depthwise weight gradient, in the memory format ATen's mkldnn path gives it (channels-last where the
    input or the weight is)."""
    global calls
    x = input.contiguous(memory_format=_CHANNELS_LAST)
    go = grad_output.contiguous(memory_format=_CHANNELS_LAST)
    channels_last = _channels_last(input) or _channels_last(weight)  # (one input channel: the same memory either way)
    out = torch.empty(weight.shape, dtype=torch.float32,
                      memory_format=_CHANNELS_LAST if channels_last else torch.contiguous_format)
    n, c, h, w = x.shape
    fn(x.data_ptr(), go.data_ptr(), out.data_ptr(), n, c, h, w, go.shape[2], go.shape[3], weight.shape[2],
       weight.shape[3], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1])
    calls += 1
    return out


def _channels_last(t: torch.Tensor) -> bool:
    return suggest_memory_format(t) == _CHANNELS_LAST
