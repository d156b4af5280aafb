"""Compiler settings, named like Inductor's (`torch._inductor.config`) so users find them where they expect.

Read at compile time, so `compiler.config.cpp.op_overrides = {...}` before `torch.compile` takes effect.
"""
from __future__ import annotations

import json
import os


def _env_flag(*names: str) -> bool:
    return any(os.environ.get(n, "") not in ("", "0") for n in names)


def _json_env(name: str) -> dict:
    text = os.environ.get(name)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{name} must be a JSON object such as {{\"neg\": \"-{{x}}\"}}: {e}") from None
    return dict(value)


# Write the debug directory (also on with LENS_DEBUG=1 or TORCH_COMPILE_DEBUG=1).
debug: bool = _env_flag("LENS_DEBUG", "TORCH_COMPILE_DEBUG")
# Root of the debug directories; None means `<cwd>/torch_compile_debug`.
debug_dir_root: str | None = os.environ.get("LENS_DEBUG_DIR") or None
# Check every kernel's plan after each planning pass (compiler/codegen/plan_verify.py): a plan that contradicts itself
# raises a PlanError naming the pass (also LENS_VERIFY_PLAN=1; on in the tests).
verify_plan: bool = _env_flag("LENS_VERIFY_PLAN")
# Most FX nodes fused into one kernel (also LENS_MAX_FUSION_SIZE).
max_fusion_size: int = int(os.environ.get("LENS_MAX_FUSION_SIZE") or 64)
# A pointwise node reading a reduction kernel's per-channel results joins that kernel in a loop order led by
# those dims (BatchNorm's backward by channel: scheduler.py's _loop_order_for; LENS_LOOP_REORDER=0 turns it off).
loop_reorder: bool = os.environ.get("LENS_LOOP_REORDER", "1") not in ("", "0")
# Save each graph's and kernel's inputs/outputs in its debug folder (tensors/), up to this many bytes
# per process (also LENS_SAVE_TENSORS=1, LENS_SAVE_TENSORS_MAX_BYTES).
save_tensors: bool = _env_flag("LENS_SAVE_TENSORS")
save_tensors_max_bytes: int = int(os.environ.get("LENS_SAVE_TENSORS_MAX_BYTES") or 256 * 2**20)
# Under no_grad, call an inference graph's generated code without AOTAutograd's runtime wrappers when they
# have nothing to do (compiler/frontend/direct_call.py; also LENS_DIRECT_CALLS=0 to turn off).
direct_inference_calls: bool = os.environ.get("LENS_DIRECT_CALLS", "1") not in ("", "0")
# addmm whose users all lower into kernels runs as mm, its bias added in those kernels
# (compiler/lowering/graph.py; also LENS_UNFUSE_BIAS=0 to turn off).
unfuse_addmm_bias: bool = os.environ.get("LENS_UNFUSE_BIAS", "1") not in ("", "0")
# Inference graphs called directly are cached on disk by their Dynamo graph and input layouts, so a warm start
# skips AOTAutograd's tracing (compiler/frontend/graph_cache.py; also LENS_GRAPH_CACHE=0 to turn off).
graph_cache: bool = os.environ.get("LENS_GRAPH_CACHE", "1") not in ("", "0")
# Dynamo wraps the bytecode that calls a compiled graph in two calls recording a "Pregraph bytecode" event for
# torch.profiler (torch._dynamo.config.record_runtime_overhead), whether or not a profiler runs. Frames whose graphs lens compiles are generated without them unless
# this is set (also LENS_PREGRAPH_MARKERS=1); other frames keep Dynamo's setting (compiler/frontend/direct_call.py).
pregraph_markers: bool = _env_flag("LENS_PREGRAPH_MARKERS")
# After tracing a frame Dynamo checks that its guards pass on that frame and times them once, flushing the
# caches first (for TORCH_LOGS=guards' latency line), a flush the size of the L3 per compiled frame. Frames whose graphs lens compiles skip both unless this is set (also
# LENS_GUARD_CHECK=1); a guard that failed on its own frame, a Dynamo bug, would then show as a recompile
# instead of an AssertionError (compiler/frontend/direct_call.py).
guard_check: bool = _env_flag("LENS_GUARD_CHECK")
# CPU attention over at most `attention_max_keys` keys whose score matrix (batch * heads * queries * keys,
# float32 or float64) is at most `attention_scores_max_bytes` runs as two batched GEMMs around a fused softmax
# kernel instead of ATen's flash attention, which is slower there (many small blocked products) and faster
# over longer key sequences (compiler/decompositions/table.py); either 0 turns it off (also LENS_ATTENTION_MAX_KEYS,
# LENS_ATTENTION_SCORES_MAX_BYTES).
attention_max_keys: int = int(os.environ.get("LENS_ATTENTION_MAX_KEYS") or 128)
attention_scores_max_bytes: int = int(os.environ.get("LENS_ATTENTION_SCORES_MAX_BYTES") or 32 * 2**20)
# Under no_grad, parameters and buffers are constants of the graph (compiler/graph_passes/freezing.py): BatchNorm folded into
# the convolution before it, subgraphs of parameters alone computed once; guarded by each parameter's identity,
# data pointer and version counter (also LENS_FREEZING=0 to turn off). The layouts frozen weights are kept in:
# convolution weights channels-last (on; LENS_FREEZE_CONV_CL=0 keeps them as they are), Linear weights K-major
# (LENS_FREEZE_LINEAR_T).
freezing: bool = os.environ.get("LENS_FREEZING", "1") not in ("", "0")
freezing_conv_channels_last: bool = os.environ.get("LENS_FREEZE_CONV_CL", "1") not in ("", "0")
freezing_linear_transposed: bool = _env_flag("LENS_FREEZE_LINEAR_T")
# Frozen Linear layers reading one input (an attention's query/key/value) as one product over their concatenated
# weights, each output a column slice (compiler/graph_passes/freezing_concat.py; LENS_FREEZE_CONCAT_LINEARS=0 keeps them apart).
freezing_concat_linears: bool = os.environ.get("LENS_FREEZE_CONCAT_LINEARS", "1") not in ("", "0")
# Frozen float32 conv2d as oneDNN's convolution over a weight prepacked once, channels-last, the activation after it fused
# (compiler/graph_passes/conv_onednn.py; LENS_FREEZE_CONV_ONEDNN=0 leaves them to ATen's convolution).
freezing_conv_onednn: bool = os.environ.get("LENS_FREEZE_CONV_ONEDNN", "1") not in ("", "0")
# ... and a residual sum after such a convolution (and a ReLU after the sum) as its binary post-op: one pass instead
# of the convolution's and the add's (LENS_FREEZE_CONV_ADD=0 keeps the add a kernel of its own).
freezing_conv_onednn_add: bool = os.environ.get("LENS_FREEZE_CONV_ADD", "1") not in ("", "0")
# Frozen bfloat16 Linear layers (autocast) whose products oneDNN computes in the dtype as one oneDNN call over
# the prepacked weight, the activation after them fused (compiler/graph_passes/linear_onednn.py;
# LENS_FREEZE_LINEAR_ONEDNN=0 leaves them products of the lowering).
freezing_linear_onednn: bool = os.environ.get("LENS_FREEZE_LINEAR_ONEDNN", "1") not in ("", "0")
# Frozen eval-mode float32 batch norms that fold into no convolution as a constant per-channel scale and shift
# (compiler/graph_passes/freezing.py; LENS_FREEZE_BN_AFFINE=0 leaves them to the decomposition).
freezing_batch_norm_affine: bool = os.environ.get("LENS_FREEZE_BN_AFFINE", "1") not in ("", "0")
# Nodes computing what an earlier node computes (autocast's repeated casts of one input) fold into it before lowering
# (compiler/lowering/cse.py; LENS_FOLD_DUPLICATES=0 lowers each).
fold_duplicates: bool = os.environ.get("LENS_FOLD_DUPLICATES", "1") not in ("", "0")
# float32/float64 group norms as generated reductions over a view of their input, channels-last read as it is
# (compiler/decompositions/table.py `group_norm`; LENS_DECOMPOSE_GROUP_NORM=0 keeps ATen's native_group_norm).
decompose_group_norm: bool = os.environ.get("LENS_DECOMPOSE_GROUP_NORM", "1") not in ("", "0")
# Training graphs' 2-d convolutions read their input and weight channels-last, so the activations between them
# are channels-last too (compiler/graph_passes/conv_layout.py; LENS_TRAIN_CONV_CL=0 keeps eager's layouts).
train_conv_channels_last: bool = os.environ.get("LENS_TRAIN_CONV_CL", "1") not in ("", "0")


class cpp:
    """C++ code generation and build settings."""

    # Vector width hint for `#pragma omp simd simdlen(N)`; None lets g++ choose.
    simdlen: int | None = None
    # Below this many elements of work a kernel runs on one thread (no OpenMP region).
    min_chunk_size: int = 4096
    # Record each kernel call in torch.profiler under the kernel's name.
    enable_kernel_profile: bool = _env_flag("LENS_KERNEL_PROFILE")
    # op name -> C++ format string ({x}, {y}, {z} are the operands), replacing the emitted expression.
    # Exists to reproduce codegen bugs on purpose, e.g. {"neg": "decltype({x})(2 * {x})"}.
    op_overrides: dict[str, str] = _json_env("LENS_OP_OVERRIDES")
    # The C++ compiler and its flags: no exceptions (kernels throw none; links faster), -O2 with -O3's vectorizer
    # cost model and -fpeel-loops, the one -O3 pass that mattered (row reductions' lane accumulators stay in
    # registers). Measurements: docs/performance.md, "Why the settings are what they are".
    cxx: str = os.environ.get("CXX", "g++")
    flags: tuple[str, ...] = ("-O2", "-fpeel-loops", "-fvect-cost-model=dynamic", "-march=native", "-fopenmp",
                              "-shared", "-fPIC", "-std=c++17", "-fno-math-errno", "-fno-trapping-math",
                              "-fno-exceptions")
    # Serve large generated-code buffers from a pool whose blocks return when the last user's
    # reference goes (LENS_BUFFER_POOL=0 turns it off); smaller buffers come from torch directly.
    buffer_pool: bool = os.environ.get("LENS_BUFFER_POOL", "1") not in ("", "0")
    min_pool_bytes: int = 256 * 1024
    # Most blocks kept per (bytes, dtype); beyond that, allocations bypass the pool.
    max_blocks_per_size: int = 4
    # Frozen float32 convolutions run as oneDNN primitives made once and called through oneDNN's C API in torch's
    # library (compiler/machine/onednn_direct.py); LENS_ONEDNN_DIRECT=0 keeps ATen's `_convolution_pointwise`.
    onednn_direct: bool = os.environ.get("LENS_ONEDNN_DIRECT", "1") not in ("", "0")
    # Training graphs' depthwise weight gradients of kernels larger than 3x3 by a loop of ours instead of oneDNN's
    # gemm fallback (compiler/machine/conv_train.py); LENS_DEPTHWISE_GRAD=0 keeps ATen's convolution_backward.
    depthwise_grad: bool = os.environ.get("LENS_DEPTHWISE_GRAD", "1") not in ("", "0")
    # Frozen float32 3x3 convolutions of stride 1 with enough tiles and channels by Winograd's F(4x4, 3x3)
    # (compiler/machine/winograd.py); LENS_WINOGRAD=0 keeps them oneDNN's direct convolution.
    winograd: bool = os.environ.get("LENS_WINOGRAD", "1") not in ("", "0")
    # Build the prelude once as a precompiled header (compiler/machine/pch.py); LENS_PCH=0 turns it off.
    precompiled_header: bool = os.environ.get("LENS_PCH", "1") not in ("", "0")
    # How many g++ build one graph's kernels side by side (compiler/machine/build_parts.py); 0: one per core this
    # process may run on, 1: one g++ for the whole source (also LENS_BUILD_JOBS).
    build_jobs: int = int(os.environ.get("LENS_BUILD_JOBS") or 0)
    # Support code (the fast expf) is compiled once per toolchain into an object that kernels link
    # (compiler/machine/prebuilt.py); LENS_PREBUILT=0 compiles it into every kernel source instead.
    prebuilt_objects: bool = os.environ.get("LENS_PREBUILT", "1") not in ("", "0")
    # A float exp inside a loop over one vector's lanes is computed by an inline vector function between two
    # halves of that loop (compiler/codegen/strategies/exp_lanes.py) instead of g++ calling the 16-lane variant per
    # vector; LENS_INLINE_EXP=0 keeps the call.
    inline_exp: bool = os.environ.get("LENS_INLINE_EXP", "1") not in ("", "0")
    # Row kernels prefetch their inputs' next row (compiler/codegen/strategies/prefetch.py); LENS_PREFETCH=0 turns it off.
    prefetch_rows: bool = os.environ.get("LENS_PREFETCH", "1") not in ("", "0")
    # A row kernel's output pass runs in the next row's compute pass (compiler/codegen/strategies/deferred_output.py);
    # LENS_PIPELINE_ROWS=0 turns it off.
    pipeline_rows: bool = os.environ.get("LENS_PIPELINE_ROWS", "1") not in ("", "0")
    # Graph outputs no step reads, of at least this many bytes, are written in whole 64-byte lines with
    # streaming (non-temporal) stores (compiler/codegen/strategies/streaming.py); LENS_STREAMING_STORES=0 turns it off.
    streaming_stores: bool = os.environ.get("LENS_STREAMING_STORES", "1") not in ("", "0")
    streaming_store_min_bytes: int = int(os.environ.get("LENS_STREAMING_STORE_MIN_BYTES", 16 * 1024 * 1024))
    # Kernels over symbolic sizes plan the strategies above from the size hints in variants of their body, each behind
    # a run-time check of its sizes (compiler/codegen/strategies/size_variants.py); LENS_SIZE_VARIANTS=0: the generic body alone.
    size_variants: bool = os.environ.get("LENS_SIZE_VARIANTS", "1") not in ("", "0")
    # float16 loads and stores of lane loops converted 16 values at a time before and after the loop
    # (compiler/codegen/strategies/half_lanes.py); LENS_HALF_LANES=0 keeps the per-value conversions.
    half_lanes: bool = os.environ.get("LENS_HALF_LANES", "1") not in ("", "0")
    # A cold build of kernels with size variants first builds their generic bodies, which the first calls run, and
    # the variants in the background, swapped in when built (compiler/machine/runtime.py; not in debug mode or
    # profiles, which want the kernels they report on); LENS_DEFER_SIZE_VARIANTS=0 builds them all before the call.
    deferred_size_variants: bool = os.environ.get("LENS_DEFER_SIZE_VARIANTS", "1") not in ("", "0")
    # A pointwise kernel output written over an input buffer that dies in that kernel (codegen/strategies/inplace.py;
    # LENS_INPLACE=0 turns it off).
    inplace_buffers: bool = os.environ.get("LENS_INPLACE", "1") not in ("", "0")
    # A flat kernel's last loop cut where its variable is compared with constants (a concatenation's or a pad's
    # selects: codegen/range_splits.py); LENS_RANGE_SPLITS=0 keeps one loop.
    range_splits: bool = os.environ.get("LENS_RANGE_SPLITS", "1") not in ("", "0")
    # Library for float32 matrix products of at least `onednn_min_macs` multiply-adds (compiler/machine/gemm.py):
    # "auto" takes oneDNN where ATen's BLAS is MKL on an AVX-512 CPU not made by Intel (MKL runs generic AVX2
    # code there: 2.2x slower than oneDNN on an AMD EPYC), "aten" or "onednn" decide (also LENS_GEMM). oneDNN's results of at least
    # `onednn_blocked_min_bytes` (glibc's largest mmap threshold: bigger blocks are fresh mmaps, page faults on
    # every call) are computed in row blocks of about `onednn_block_bytes`, copied into a pool buffer.
    # Accuracy checks (LENS_CHECK_ACCURACY) run products in eager's library, so that what they report is the
    # compiler's kernels, not two libraries' rounding of the same float32 product.
    # Float32 products split by rows over one OpenMP region of our own (compiler/machine/gemm_rows.py;
    # LENS_GEMM_ROWS=1): fewer waits between threads on cores shared with other processes, but on a quiet machine
    # ATen's own threading is as fast or faster (docs/performance.md, "Why the settings are what they are").
    gemm_rows: bool = os.environ.get("LENS_GEMM_ROWS", "") not in ("", "0")
    # Products whose weight is a frozen constant computed from MKL's packed copy of it, made once
    # (compiler/machine/gemm_packed.py; LENS_GEMM_PACKED=0 keeps ATen's mm).
    gemm_packed: bool = os.environ.get("LENS_GEMM_PACKED", "1") not in ("", "0")
    gemm_packed_max_bytes: int = int(os.environ.get("LENS_GEMM_PACKED_MAX_BYTES") or 4 * 2**30)
    gemm_library: str = os.environ.get("LENS_GEMM") or ("aten" if os.environ.get("LENS_CHECK_ACCURACY") else "auto")
    onednn_min_macs: int = 1 << 22
    onednn_blocked_min_bytes: int = 32 * 1024 * 1024
    onednn_block_bytes: int = 8 * 1024 * 1024
    # bfloat16/float16 products and convolutions (compiler/machine/gemm_half.py): "auto" keeps them in their dtype where
    # the CPU has AMX/AVX512 dot products for it, else computes them in float32; "native" or "float32" decide
    # (LENS_HALF_GEMM). Accuracy checks keep eager's library.
    half_gemm: str = os.environ.get("LENS_HALF_GEMM") or ("native" if os.environ.get("LENS_CHECK_ACCURACY") else "auto")
    # Threads used by kernels; None means torch.get_num_threads().
    threads: int | None = None


def cache_dir() -> str:
    """Where built kernels are cached (LENS_CACHE_DIR, else the user cache dir)."""
    root = os.environ.get("LENS_CACHE_DIR")
    if root:
        return root
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kernel-lens")


# Round every bfloat16/float16 op's result to its dtype, as eager materializes it, instead of keeping float
# intermediates inside a fused kernel (Inductor's `emulate_precision_casts`; compiler/codegen/half.py; also
# LENS_EMULATE_PRECISION_CASTS=1).
emulate_precision_casts: bool = _env_flag("LENS_EMULATE_PRECISION_CASTS")
