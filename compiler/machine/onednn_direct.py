"""Frozen float32 and bfloat16 convolutions executed as oneDNN primitives made once, called through oneDNN's C API in
torch's own copy of the library, without ATen's and ideep's per-call work.

`mkldnn._convolution_pointwise` (what lens and Inductor's freezing call) spends a fixed ~30-40 us per call before
oneDNN computes: it wraps the tensors as ideep tensors, builds the convolution's primitive descriptor (a primitive
cache lookup), checks formats and allocates. A mobile conv net makes 60-160 such calls per image, most of them
computing for less than that: MobileNetV3-Large's 63 cost ~2.5 ms of a ~13 ms step in overhead alone. A
`Convolution` here is one primitive made for one weight, input size, geometry and post-ops, with the weight
reordered once into the format the primitive asks for; each call only points its memory objects at the tensors and
executes (an 8-channel 4x4 convolution: 41 us through ATen, 6 us here; one thread of a Zen 5 EPYC). The primitive
is oneDNN's own `convolution_forward` (inference, direct algorithm) over the same channels-last memory ATen's op
passes it, so the kernel and the result are ATen's bit for bit (tests/compiler/machine/test_onednn_direct.py).
Bfloat16 (a bfloat16-autocast model's frozen convolutions) only where oneDNN computes it natively (gemm_half.py's
`half_is_native`): source, weight, output and a summed residual in bfloat16, the bias in the dtype it is given
(ATen's op reads a float32 one as it is; its fused sum takes none, nor sums a grouped convolution in one pass, so
neither is made here).

How it reaches oneDNN: through the C API functions inside torch's own library (compiler/machine/onednn_symbols.py
finds them and oneDNN's header), handed as a table to a small helper library of ours built against that header by a
background g++ on first need (pch.py's `background_library`, as gemm_rows.py's). Where any of it is missing (no
header, a stripped library, another major version, a failed build), `available()` is False and convolutions run
ATen's op as before; `LENS_ONEDNN_DIRECT=0` chooses that too.
"""
from __future__ import annotations

import ctypes
import logging

import torch

from compiler import config
from compiler.machine import helper_library, onednn_symbols

log = logging.getLogger(__name__)

# the C API functions the helper calls, in the order of the table it is given
FUNCTIONS = ("dnnl_engine_create", "dnnl_stream_create", "dnnl_memory_desc_create_with_tag",
             "dnnl_memory_desc_create_with_strides", "dnnl_memory_desc_destroy",
             "dnnl_convolution_forward_primitive_desc_create", "dnnl_primitive_desc_destroy",
             "dnnl_primitive_attr_create", "dnnl_primitive_attr_destroy", "dnnl_post_ops_create",
             "dnnl_post_ops_destroy", "dnnl_post_ops_append_eltwise", "dnnl_post_ops_append_binary",
             "dnnl_primitive_attr_set_post_ops", "dnnl_primitive_desc_query_md", "dnnl_primitive_create",
             "dnnl_primitive_destroy", "dnnl_primitive_execute", "dnnl_memory_create", "dnnl_memory_destroy",
             "dnnl_memory_set_data_handle", "dnnl_reorder_primitive_desc_create", "dnnl_memory_desc_get_size",
             "dnnl_version")

SOURCE = r"""
#include "oneapi/dnnl/dnnl.h"
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#define LENS_FUNCTIONS(X) @FUNCTIONS@
#define LENS_DECLARE(n) static decltype(&n) p_##n;
LENS_FUNCTIONS(LENS_DECLARE)
static dnnl_engine_t lens_engine;
static dnnl_stream_t lens_stream;

// The functions' addresses in torch's oneDNN, in FUNCTIONS' order; 0 when the engine and stream were made.
extern "C" int lens_dnnl_init(void** table)
{
    int i = 0;
#define LENS_SET(n) p_##n = (decltype(&n))table[i++];
    LENS_FUNCTIONS(LENS_SET)
    if (p_dnnl_version()->major != DNNL_VERSION_MAJOR) return -1;
    if (p_dnnl_engine_create(&lens_engine, dnnl_cpu, 0) != dnnl_success) return -2;
    return p_dnnl_stream_create(&lens_stream, lens_engine, dnnl_stream_default_flags) == dnnl_success ? 0 : -3;
}

struct LensConv {
    dnnl_primitive_t prim = nullptr;
    dnnl_memory_t src = nullptr, wei = nullptr, bias = nullptr, dst = nullptr, other = nullptr;
    void* wbuf = nullptr;
    int other_arg = 0;
};

extern "C" void lens_conv_destroy(LensConv* c)
{
    if (!c) return;
    if (c->prim) p_dnnl_primitive_destroy(c->prim);
    for (dnnl_memory_t m : {c->src, c->wei, c->bias, c->dst, c->other})
        if (m) p_dnnl_memory_destroy(m);
    free(c->wbuf);
    delete c;
}

// attr (as ATen's _convolution_pointwise names it) -> oneDNN's eltwise algorithm and its alpha/beta; 0 when unknown
static int lens_eltwise(const char* attr, const char* algorithm, float s0, float s1, dnnl_alg_kind_t* alg,
                        float* alpha, float* beta)
{
    *alpha = 0.f; *beta = 0.f;
    if (!strcmp(attr, "relu")) *alg = dnnl_eltwise_relu;
    else if (!strcmp(attr, "leaky_relu")) { *alg = dnnl_eltwise_relu; *alpha = s0; }
    else if (!strcmp(attr, "sigmoid")) *alg = dnnl_eltwise_logistic;
    else if (!strcmp(attr, "tanh")) *alg = dnnl_eltwise_tanh;
    else if (!strcmp(attr, "swish")) { *alg = dnnl_eltwise_swish; *alpha = 1.f; }
    else if (!strcmp(attr, "hardswish")) { *alg = dnnl_eltwise_hardswish; *alpha = 1.f / 6.f; *beta = 0.5f; }
    else if (!strcmp(attr, "hardsigmoid")) { *alg = dnnl_eltwise_hardsigmoid; *alpha = 1.f / 6.f; *beta = 0.5f; }
    else if (!strcmp(attr, "hardtanh")) { *alg = dnnl_eltwise_clip; *alpha = s0; *beta = s1; }
    else if (!strcmp(attr, "gelu") && !strcmp(algorithm, "tanh")) *alg = dnnl_eltwise_gelu_tanh;
    else if (!strcmp(attr, "gelu")) *alg = dnnl_eltwise_gelu_erf;
    else return 0;
    return 1;
}

#define LENS_TRY(call) if ((call) != dnnl_success) goto fail;

// Python's dtype codes (onednn_direct.py's DTYPE_CODES) -> oneDNN's data types: 1 float32, 2 bfloat16
static dnnl_data_type_t lens_data_type(int code)
{
    return code == 1 ? dnnl_f32 : code == 2 ? dnnl_bf16 : dnnl_data_type_undef;
}

// A convolution in `dtype` (a code of lens_data_type: source, weight, output and a summed `other` all of it) over a
// channels-last (N,C,H,W) input `x`, weight of sizes `w` and strides `ws` (OIHW order) at `weight`, into a
// channels-last output `o`, plus a bias of `bias_dtype` (0: none); `attr` applied as it writes (before the sum of a
// channels-last `other` with `add`, and `post_attr` after that sum). The weight is reordered into the primitive's
// format now.
extern "C" LensConv* lens_conv_create(const int64_t* x, const int64_t* w, const int64_t* ws, int64_t groups,
                                      const int64_t* stride, const int64_t* pad, const int64_t* dil,
                                      const int64_t* o, int dtype, int bias_dtype, const char* attr,
                                      const char* algorithm, float s0, float s1, int add, const char* post_attr,
                                      const void* weight)
{
    LensConv* c = new LensConv();
    dnnl_memory_desc_t src_md = nullptr, dst_md = nullptr, w_any = nullptr, w_plain = nullptr, bias_md = nullptr,
                       other_md = nullptr;
    dnnl_primitive_attr_t pattr = nullptr;
    dnnl_post_ops_t ops = nullptr;
    dnnl_primitive_desc_t pd = nullptr, reorder_pd = nullptr;
    dnnl_primitive_t reorder = nullptr;
    dnnl_memory_t w_src = nullptr;
    const_dnnl_memory_desc_t w_md;
    size_t w_bytes;
    dnnl_alg_kind_t alg;
    float alpha, beta;
    int posts = 0, grouped = groups > 1, nd = grouped ? 5 : 4, has_bias = bias_dtype != 0;
    dnnl_data_type_t dt = lens_data_type(dtype), bias_dt = lens_data_type(has_bias ? bias_dtype : dtype);
    dnnl_dims_t src_dims = {x[0], x[1], x[2], x[3]}, dst_dims = {o[0], o[1], o[2], o[3]}, bias_dims = {w[0]};
    dnnl_dims_t w_dims, w_strides, strides = {stride[0], stride[1]}, dilates = {dil[0] - 1, dil[1] - 1},
                pad_l = {pad[0], pad[1]}, pad_r;
    if (grouped) {
        w_dims[0] = groups; w_dims[1] = w[0] / groups; w_strides[0] = ws[0] * (w[0] / groups);
        for (int k = 0; k < 4; k++) { w_dims[1 + k] = k ? w[k] : w[0] / groups; w_strides[1 + k] = ws[k]; }
    } else {
        for (int k = 0; k < 4; k++) { w_dims[k] = w[k]; w_strides[k] = ws[k]; }
    }
    for (int k = 0; k < 2; k++)
        pad_r[k] = (o[2 + k] - 1) * stride[k] + (w[2 + k] - 1) * dil[k] + 1 - x[2 + k] - pad[k];
    if (dt == dnnl_data_type_undef || bias_dt == dnnl_data_type_undef) goto fail;
    LENS_TRY(p_dnnl_memory_desc_create_with_tag(&src_md, 4, src_dims, dt, dnnl_nhwc));
    LENS_TRY(p_dnnl_memory_desc_create_with_tag(&dst_md, 4, dst_dims, dt, dnnl_nhwc));
    LENS_TRY(p_dnnl_memory_desc_create_with_tag(&w_any, nd, w_dims, dt, dnnl_format_tag_any));
    LENS_TRY(p_dnnl_memory_desc_create_with_strides(&w_plain, nd, w_dims, dt, w_strides));
    LENS_TRY(p_dnnl_memory_desc_create_with_tag(&bias_md, 1, bias_dims, bias_dt, dnnl_x));
    LENS_TRY(p_dnnl_primitive_attr_create(&pattr));
    LENS_TRY(p_dnnl_post_ops_create(&ops));
    if (strcmp(attr, "none")) {
        if (!lens_eltwise(attr, algorithm, s0, s1, &alg, &alpha, &beta)) goto fail;
        LENS_TRY(p_dnnl_post_ops_append_eltwise(ops, alg, alpha, beta));
        posts++;
    }
    if (add) {
        LENS_TRY(p_dnnl_memory_desc_create_with_tag(&other_md, 4, dst_dims, dt, dnnl_nhwc));
        LENS_TRY(p_dnnl_post_ops_append_binary(ops, dnnl_binary_add, other_md));
        c->other_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(posts) | DNNL_ARG_SRC_1;
        if (strcmp(post_attr, "none")) {
            if (!lens_eltwise(post_attr, "", 0.f, 0.f, &alg, &alpha, &beta)) goto fail;
            LENS_TRY(p_dnnl_post_ops_append_eltwise(ops, alg, alpha, beta));
        }
    }
    LENS_TRY(p_dnnl_primitive_attr_set_post_ops(pattr, ops));
    LENS_TRY(p_dnnl_convolution_forward_primitive_desc_create(&pd, lens_engine, dnnl_forward_inference,
        dnnl_convolution_direct, src_md, w_any, has_bias ? bias_md : nullptr, dst_md, strides, dilates, pad_l,
        pad_r, pattr));
    LENS_TRY(p_dnnl_primitive_create(&c->prim, pd));
    w_md = p_dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    w_bytes = p_dnnl_memory_desc_get_size(w_md);
    c->wbuf = aligned_alloc(64, (w_bytes + 63) / 64 * 64);
    if (!c->wbuf) goto fail;
    LENS_TRY(p_dnnl_memory_create(&c->wei, w_md, lens_engine, c->wbuf));
    LENS_TRY(p_dnnl_memory_create(&w_src, w_plain, lens_engine, (void*)weight));
    LENS_TRY(p_dnnl_reorder_primitive_desc_create(&reorder_pd, w_plain, lens_engine, w_md, lens_engine, nullptr));
    LENS_TRY(p_dnnl_primitive_create(&reorder, reorder_pd));
    {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, w_src}, {DNNL_ARG_TO, c->wei}};
        LENS_TRY(p_dnnl_primitive_execute(reorder, lens_stream, 2, args));
    }
    LENS_TRY(p_dnnl_memory_create(&c->src, p_dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), lens_engine,
                                  DNNL_MEMORY_NONE));
    LENS_TRY(p_dnnl_memory_create(&c->dst, p_dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), lens_engine,
                                  DNNL_MEMORY_NONE));
    if (has_bias) LENS_TRY(p_dnnl_memory_create(&c->bias, bias_md, lens_engine, DNNL_MEMORY_NONE));
    if (add) LENS_TRY(p_dnnl_memory_create(&c->other, other_md, lens_engine, DNNL_MEMORY_NONE));
    goto done;
fail:
    lens_conv_destroy(c);
    c = nullptr;
done:
    for (dnnl_memory_desc_t md : {src_md, dst_md, w_any, w_plain, bias_md, other_md})
        if (md) p_dnnl_memory_desc_destroy(md);
    if (reorder) p_dnnl_primitive_destroy(reorder);
    if (w_src) p_dnnl_memory_destroy(w_src);
    if (reorder_pd) p_dnnl_primitive_desc_destroy(reorder_pd);
    if (pd) p_dnnl_primitive_desc_destroy(pd);
    if (ops) p_dnnl_post_ops_destroy(ops);
    if (pattr) p_dnnl_primitive_attr_destroy(pattr);
    return c;
}

// One call: the memory objects pointed at this call's tensors, then the primitive; oneDNN's status (0: success).
extern "C" int lens_conv_run(LensConv* c, void* src, void* dst, void* bias, void* other)
{
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei}, {DNNL_ARG_DST, c->dst}};
    int n = 3;
    p_dnnl_memory_set_data_handle(c->src, src);
    p_dnnl_memory_set_data_handle(c->dst, dst);
    if (c->bias) { p_dnnl_memory_set_data_handle(c->bias, bias); args[n++] = {DNNL_ARG_BIAS, c->bias}; }
    if (c->other) { p_dnnl_memory_set_data_handle(c->other, other); args[n++] = {c->other_arg, c->other}; }
    return p_dnnl_primitive_execute(c->prim, lens_stream, n, args);
}
""".replace("@FUNCTIONS@", " ".join(f"X({name})" for name in FUNCTIONS))


def _enabled() -> bool:
    return config.cpp.onednn_direct and torch.backends.mkldnn.is_available()


def _recipe() -> tuple[str, list[str]] | None:
    include = onednn_symbols.include_dir()
    if include is None:
        log.info("kernel-lens: no oneDNN header (pip install --no-deps onednn-devel): convolutions run ATen's op")
        return None
    return SOURCE, [f"-I{include}"]


def _load(path: str):
    addresses = onednn_symbols.torch_functions(FUNCTIONS)
    if addresses is None:
        return None
    try:
        lib = ctypes.PyDLL(path)  # (the GIL stays held: one call at a time uses a primitive's memory objects)
    except OSError as e:
        log.warning("kernel-lens: oneDNN helper unloadable (%s): convolutions run ATen's op", e)
        return None
    table = (ctypes.c_void_p * len(FUNCTIONS))(*addresses)
    status = lib.lens_dnnl_init(table)
    if status != 0:
        log.warning("kernel-lens: torch's oneDNN refused the helper (status %d): convolutions run ATen's op", status)
        return None
    ptr, i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
    lib.lens_conv_create.restype = ptr
    lib.lens_conv_create.argtypes = [i64p, i64p, i64p, ctypes.c_int64, i64p, i64p, i64p, i64p, ctypes.c_int,
                                     ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_float, ctypes.c_float,
                                     ctypes.c_int, ctypes.c_char_p, ptr]
    lib.lens_conv_run.argtypes = [ptr, ptr, ptr, ptr, ptr]
    lib.lens_conv_run.restype = ctypes.c_int
    lib.lens_conv_destroy.argtypes = [ptr]
    lib.lens_conv_destroy.restype = None
    return lib


def library() -> helper_library.BackgroundLibrary:
    """A holder of the helper library: built once per toolchain and header in `<cache>/onednn_direct/<key>/` (in
    the background unless a caller waits), loaded and given the functions' addresses."""
    return helper_library.BackgroundLibrary("onednn_direct", _enabled, _recipe, _load)


HELPER = library()


def available(wait: bool = False) -> bool:
    """Whether convolutions can run as direct primitives (`wait`: build the helper now if it is not there)."""
    return HELPER.get(wait) is not None


def pending() -> bool:
    """Whether the helper is still being built (neither loaded nor given up on)."""
    return HELPER.pending()


def _int64s(values) -> ctypes.Array:
    return (ctypes.c_int64 * len(values))(*values)


# the dtypes a primitive computes in, as the helper's lens_data_type names them
DTYPE_CODES = {torch.float32: 1, torch.bfloat16: 2}


def takes(dtype: torch.dtype) -> bool:
    """Whether primitives compute in `dtype`: float32, or bfloat16 where oneDNN computes it natively
    (gemm_half.py's choice: elsewhere bfloat16 convolutions are left to ATen's op)."""
    if dtype == torch.bfloat16:
        from compiler.machine.gemm_half import half_is_native
        return half_is_native(dtype)
    return dtype == torch.float32


class Convolution:
    """One primitive: a float32 or bfloat16 convolution of a fixed input size, geometry, post-ops and dtypes over a
    weight reordered once (a copy: the weight may change afterwards only through a new Convolution, as conv_packed.py
    keys them by the weight's version counter). `run` allocates the channels-last output, of `dtype`; its input (and
    a summed `other`) must be of `dtype`, its bias of `bias_dtype` (None: no bias), which `fits` checks."""

    __slots__ = ("_lib", "add", "bias_dtype", "dtype", "handle", "out_size", "out_stride")

    def __init__(self, handle: int, out_size: list[int], dtype: torch.dtype, bias_dtype: torch.dtype | None,
                 add: bool, lib):
        _n, c, h, w = out_size
        self.handle, self.out_size, self.out_stride = handle, tuple(out_size), (c * h * w, 1, w * c, c)
        self.dtype, self.bias_dtype, self.add, self._lib = dtype, bias_dtype, add, lib

    @classmethod
    def make(cls, x_size, weight: torch.Tensor, bias_dtype: torch.dtype | None, padding, stride, dilation,
             groups: int, attr: str, scalars, algorithm: str, out_size: list[int], add: bool = False,
             post_attr: str = "none") -> Convolution | None:
        """The primitive for these arguments, in the weight's dtype (which the input and a summed `other` must have),
        or None where this path does not take them (then ATen's op runs)."""
        lib = HELPER.get()
        if lib is None or not takes(weight.dtype) or weight.dim() != 4 or len(x_size) != 4:
            return None
        if bias_dtype is not None and bias_dtype not in (weight.dtype, torch.float32):
            return None
        if add and weight.dtype != torch.float32 and (groups > 1 or bias_dtype not in (None, weight.dtype)):
            return None  # (ATen's binary op refuses such a bias, and sums a grouped one after rounding its output)
        if any(not isinstance(s, (int, float)) for s in scalars) or len(scalars) > 2:
            return None
        s = [float(v) for v in scalars] + [0.0] * (2 - len(scalars))
        handle = lib.lens_conv_create(_int64s(x_size), _int64s(weight.shape), _int64s(weight.stride()), groups,
                                      _int64s(stride), _int64s(padding), _int64s(dilation), _int64s(out_size),
                                      DTYPE_CODES[weight.dtype], DTYPE_CODES.get(bias_dtype, 0), attr.encode(),
                                      (algorithm or "").encode(), s[0], s[1], int(add), post_attr.encode(),
                                      weight.data_ptr())
        return cls(handle, out_size, weight.dtype, bias_dtype, add, lib) if handle else None

    def fits(self, x: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor | None = None) -> bool:
        """Whether `run` takes these tensors as they are: the dtypes it was made for, a contiguous bias (the input
        and `other` channels-last contiguous are the caller's to ensure)."""
        if x.dtype != self.dtype or (other is not None and other.dtype != self.dtype) or self.add != (other is not None):
            return False
        if bias is None:
            return self.bias_dtype is None
        return bias.dtype == self.bias_dtype and bias.is_contiguous()

    def run(self, x: torch.Tensor, bias: torch.Tensor | None, other: torch.Tensor | None = None) -> torch.Tensor:
        """The convolution of channels-last contiguous `x` (plus channels-last `other` for a fused sum), tensors
        that `fits` takes."""
        out = torch.empty_strided(self.out_size, self.out_stride, dtype=self.dtype)
        status = self._lib.lens_conv_run(self.handle, x.data_ptr(), out.data_ptr(),
                                         bias.data_ptr() if self.bias_dtype is not None else None,
                                         other.data_ptr() if self.add else None)
        if status != 0:
            raise RuntimeError(f"kernel-lens: oneDNN's convolution primitive failed (status {status})")
        return out

    def __del__(self):
        lib = getattr(self, "_lib", None)
        if lib is not None and self.handle:
            lib.lens_conv_destroy(self.handle)
            self.handle = 0
