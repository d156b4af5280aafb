"""C++ for each IR op, as data: op name -> format string over operands {x}, {y}, {z}.

An entry may be a dict keyed by the operand's dtype class ("float", "int", "bool"; "half" for bfloat16 and
float16 values, which are floats in the kernel: a "half" entry where they need other code, else "float") when C++
needs different code per type. `config.cpp.op_overrides` replaces entries (to reproduce codegen bugs).
"""
from __future__ import annotations

import math

import torch

from compiler import config
from compiler.codegen import half
from compiler.codegen.strategies import half_lanes, streaming
from compiler.cpp_text import math_prelude, special_math

CTYPES = {
    torch.float32: "float", torch.float64: "double", torch.int8: "int8_t", torch.int16: "int16_t",
    torch.int32: "int32_t", torch.int64: "int64_t", torch.uint8: "uint8_t", torch.bool: "bool",
    # a half value in a register or a kernel-local buffer is a float (its buffers' type: half.STORAGE_CTYPES)
    torch.bfloat16: "float", torch.float16: "float",
}

# Same-type arithmetic is wrapped in decltype(x)(...) so small integers wrap like eager (C++ would
# promote uint8 + uint8 to int); this is also why the seed's `-{x}` override fails to compile.
CPP_OPS: dict[str, str | dict[str, str]] = {
    "identity": "{x}",
    "add": "decltype({x})({x} + {y})",
    "sub": {"bool": "decltype({x})({x} ^ {y})", "default": "decltype({x})({x} - {y})"},
    "mul": {"bool": "decltype({x})({x} && {y})", "default": "decltype({x})({x} * {y})"},
    "div": "{x} / {y}",
    "truncdiv": {"float": "std::trunc({x} / {y})", "default": "lens_truncdiv({x}, {y})"},
    "floordiv": "lens_floordiv({x}, {y})",
    "remainder": "lens_remainder({x}, {y})",
    "fmod": {"float": "std::fmod({x}, {y})", "default": "lens_truncmod({x}, {y})"},
    "neg": {"bool": "{x}", "default": "decltype({x})(-{x})"},
    "abs": {"float": "std::abs({x})", "bool": "{x}", "default": "decltype({x})({x} < 0 ? -{x} : {x})"},
    "exp": "lens_exp({x})", "exp2": "std::exp2({x})", "expm1": "std::expm1({x})",
    "log": "std::log({x})", "log2": "std::log2({x})", "log10": "std::log10({x})", "log1p": "std::log1p({x})",
    "sqrt": "std::sqrt({x})", "rsqrt": "decltype({x})(1) / std::sqrt({x})",
    "sin": "std::sin({x})", "cos": "std::cos({x})", "tan": "std::tan({x})", "asin": "std::asin({x})",
    "acos": "std::acos({x})", "atan": "std::atan({x})", "sinh": "std::sinh({x})", "cosh": "std::cosh({x})",
    "tanh": "std::tanh({x})", "asinh": "std::asinh({x})", "acosh": "std::acosh({x})",
    "atanh": "std::atanh({x})", "erf": "lens_erf({x})", "erfc": "std::erfc({x})", "lgamma": "lens_lgamma({x})",
    "floor": {"float": "std::floor({x})", "default": "{x}"},
    "ceil": {"float": "std::ceil({x})", "default": "{x}"},
    "trunc": {"float": "std::trunc({x})", "default": "{x}"},
    "round": {"float": "std::nearbyint({x})", "default": "{x}"},
    "frac": {"float": "{x} - std::trunc({x})", "default": "decltype({x})(0)"},
    "reciprocal": "decltype({x})(1) / {x}",
    "sigmoid": "decltype({x})(1) / (decltype({x})(1) + lens_exp(-{x}))",
    "sign": {"bool": "{x}", "default": "lens_sign({x})"},
    "relu": {"bool": "{x}", "default": "lens_relu({x})"},
    "maximum": {"bool": "decltype({x})({x} || {y})", "default": "max_propagate_nan({x}, {y})"},
    "minimum": {"bool": "decltype({x})({x} && {y})", "default": "min_propagate_nan({x}, {y})"},
    "fmax": {"float": "std::fmax({x}, {y})", "default": "lens_max({x}, {y})"},
    "fmin": {"float": "std::fmin({x}, {y})", "default": "lens_min({x}, {y})"},
    "atan2": "std::atan2({x}, {y})", "hypot": "std::hypot({x}, {y})",
    "copysign": "std::copysign({x}, {y})", "nextafter": "std::nextafter({x}, {y})",
    "pow": {"float": "std::pow({x}, {y})", "default": "lens_ipow({x}, {y})"},
    "bitwise_and": "decltype({x})({x} & {y})", "bitwise_or": "decltype({x})({x} | {y})",
    "bitwise_xor": "decltype({x})({x} ^ {y})",
    "bitwise_not": {"bool": "!{x}", "default": "decltype({x})(~{x})"},
    "lshift": "lens_lshift({x}, {y})", "rshift": "lens_rshift({x}, {y})",
    "eq": "{x} == {y}", "ne": "{x} != {y}", "lt": "{x} < {y}", "le": "{x} <= {y}", "gt": "{x} > {y}",
    "ge": "{x} >= {y}",
    "logical_and": "{x} && {y}", "logical_or": "{x} || {y}", "logical_xor": "{x} != {y}",
    "logical_not": "!{x}",
    "isnan": {"float": "std::isnan({x})", "default": "false"},
    "isinf": {"float": "std::isinf({x})", "default": "false"},
    "isfinite": {"float": "std::isfinite({x})", "default": "true"},
    # (g++ 12 fails with an internal error vectorizing __builtin_signbit of a float made from half bits)
    "signbit": {"half": "lens_signbit({x})", "float": "std::signbit({x})", "bool": "false", "default": "({x} < 0)"},
    "where": "{x} ? {y} : {z}",
    # x * y + z rounded once where the CPU has FMA, as in eager's kernels (built with -mfma; g++ contracts them)
    "fma": "lens_fma({x}, {y}, {z})",
}
CPP_OPS.update(special_math.POLYNOMIAL_OPS)

# Reductions: (initial accumulator, combine "acc = f(acc, v)").
REDUCTION_INIT = {
    "sum": "0", "prod": "1", "any": "false", "all": "true",
    "max": "lens_lowest<{t}>()", "min": "lens_highest<{t}>()",
}
REDUCTION_COMBINE = {
    "sum": "{acc} + {v}", "prod": "{acc} * {v}", "max": "max_propagate_nan({acc}, {v})",
    "min": "min_propagate_nan({acc}, {v})", "any": "{acc} || {v}", "all": "{acc} && {v}",
}


def dtype_class(dtype: torch.dtype) -> str:
    if dtype.is_floating_point:
        return "float"
    return "bool" if dtype == torch.bool else "int"


class UnknownOpError(Exception):
    """The renderer has no C++ for this op and dtype: a bug in the lowering tables."""


def render_op(name: str, operands: list[str], dtypes: list[torch.dtype]) -> str:
    """The C++ expression for `name` applied to the operand expressions."""
    template = config.cpp.op_overrides.get(name) or CPP_OPS.get(name)
    if template is None:
        raise UnknownOpError(f"no C++ for op {name!r} with operand dtypes {dtypes} ({operands})")
    if isinstance(template, dict):
        dtype = (dtypes[-1] if name == "where" else dtypes[0]) if dtypes else None
        cls = dtype_class(dtype) if dtype is not None else "default"
        if half.is_half(dtype) and "half" in template:
            cls = "half"
        template = template.get(cls, template.get("default"))
        if template is None:
            raise UnknownOpError(f"no C++ for op {name!r} on {cls} operands {dtypes}")
    names = dict(zip("xyz", operands))
    return template.format(**names)


def render_cast(operand: str, src: torch.dtype, dst: torch.dtype) -> str:
    converted = half.cast(operand, src, dst)
    if converted is not None:
        return converted
    if half.is_half(src) and not dst.is_floating_point:  # the half value eager converts, not a float near it
        operand = half.round_to(src, operand)
    # Float -> small int goes through int64 like c10::convert, so out-of-range values wrap the same way.
    if src.is_floating_point and not dst.is_floating_point and dst not in (torch.bool, torch.int64):
        return f"static_cast<{CTYPES[dst]}>(static_cast<int64_t>({operand}))"
    return f"static_cast<{CTYPES[dst]}>({operand})"


def render_constant(value, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        v = float(value)
        if math.isnan(v):
            return f"std::numeric_limits<{CTYPES[dtype]}>::quiet_NaN()"
        if math.isinf(v):
            return f"{'-' if v < 0 else ''}std::numeric_limits<{CTYPES[dtype]}>::infinity()"
        text = repr(v)
        return f"{text}f" if CTYPES[dtype] == "float" else text
    v = int(value)
    if dtype == torch.int64:
        return f"static_cast<int64_t>({v}LL)" if v >= -2**63 + 1 else "std::numeric_limits<int64_t>::min()"
    return f"static_cast<{CTYPES[dtype]}>({v})"


# OpenMP reduction operators for reductions whose combine step is that operator.
SIMD_REDUCTION_OPS = {"sum": "+", "prod": "*", "any": "||", "all": "&&"}


def simd_reduction_op(dtype: torch.dtype, reduction_type: str) -> str | None:
    """The `omp simd reduction` operator of a reduction to `dtype`, if it has one (bool results only for
    any/all, which are the bool ones)."""
    if (dtype == torch.bool) != (reduction_type in ("any", "all")):
        return None
    return SIMD_REDUCTION_OPS.get(reduction_type)



PRELUDE = r"""#include <cstdint>
#include <omp.h>
// The helpers a kernel's inner loop calls: always inlined, since a call g++ leaves out of line (its size
// heuristics, several calls in one loop) keeps that loop from vectorizing
#define LENS_INLINE static inline __attribute__((always_inline))
""" + math_prelude.PRELUDE + half.PRELUDE + half_lanes.PRELUDE + r"""template <typename T> LENS_INLINE T lens_min(T a, T b) { return b < a ? b : a; }  // std::min without <algorithm>
template <typename T> LENS_INLINE T lens_max(T a, T b) { return a < b ? b : a; }  // (which costs g++ ~40 ms a build)
// One select, as ATen's vectorized pooling takes a tap: `b` where it is larger (ties too) or NaN, else `a` (a NaN
// `a` stays: no comparison with it holds). g++ vectorizes this to 2 compares, a mask or and a blend; early returns
// for each NaN vectorized to twice that (a 3x3 max pool 2x slower). Where both are NaN, `b`'s NaN is returned.
template <typename T> LENS_INLINE T max_propagate_nan(T a, T b) { return (b >= a || b != b) ? b : a; }
template <typename T> LENS_INLINE T min_propagate_nan(T a, T b) { return (b <= a || b != b) ? b : a; }
template <typename T> inline T lens_lowest() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <typename T> inline T lens_highest() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}
template <typename T> inline T lens_floordiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == 0) return a / b;
    T mod = std::fmod(a, b); T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
    T floordiv;
    if (div != 0) { floordiv = std::floor(div); if (div - floordiv > T(0.5)) floordiv += T(1); }
    else floordiv = std::copysign(T(0), a / b);
    return floordiv;
  } else {
    if (b == 0) return T(0);
    T q = a / b; if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1; return q;
  }
}
template <typename T> LENS_INLINE T lens_fma(T a, T b, T c) {  // eager's contracted a * b + c (ATen builds with -mfma)
#ifdef __FMA__
  if constexpr (std::is_same_v<T, float>) return __builtin_fmaf(a, b, c); else return __builtin_fma(a, b, c);
#else
  return a * b + c;
#endif
}
// `c ? a : b` for a condition the innermost loop does not change (a pad's row test in a channels-last loop): g++
// vectorizes no `?:` on a scalar bool beside vector values; as bits it does (a 64-channel pad: 1.8 -> 0.28 ms)
template <typename U, typename T> LENS_INLINE T lens_select_as(bool c, T a, T b) {
  U m = U(0) - static_cast<U>(c);
  return __builtin_bit_cast(T, static_cast<U>((__builtin_bit_cast(U, a) & m) | (__builtin_bit_cast(U, b) & ~m)));
}
template <typename T> LENS_INLINE T lens_select_bits(bool c, T a, T b) {
  if constexpr (sizeof(T) == 4) return lens_select_as<uint32_t>(c, a, b); else return lens_select_as<uint64_t>(c, a, b);
}
template <typename T> LENS_INLINE T lens_truncdiv(T a, T b) { return b == 0 ? T(0) : T(a / b); }
template <typename T> LENS_INLINE T lens_truncmod(T a, T b) { return b == 0 ? T(0) : T(a % b); }
template <typename T> inline T lens_remainder(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b); if (r != 0 && ((b < 0) != (r < 0))) r += b; return r;
  } else {
    if (b == 0) return T(0);
    T r = a % b; if (r != 0 && ((b < 0) != (r < 0))) r += b; return r;
  }
}
template <typename T> LENS_INLINE T lens_sign(T a) {  // sign(nan) is 0, as in eager
  return T((T(0) < a) - (a < T(0)));
}
template <typename T> LENS_INLINE T lens_relu(T a) {
  if constexpr (std::is_floating_point_v<T>) { if (a != a) return a; }
  return a < T(0) ? T(0) : a;
}
template <typename T> inline T lens_ipow(T base, T exp) {
  if (exp < 0) { if (base == 1) return 1; if (base == -1) return (exp % 2) ? -1 : 1; return 0; }
  T result = 1;
  while (exp) { if (exp & 1) result = T(result * base); exp >>= 1; base = T(base * base); }
  return result;
}
template <typename T> inline T lens_lgamma(T x) {  // the reentrant lgamma: std::lgamma writes signgam
  int sign;
  if constexpr (std::is_same_v<T, float>) return lgammaf_r(x, &sign); else return lgamma_r(x, &sign);
}
template <typename T> inline T lens_lshift(T a, T b) {
  if (b < 0 || b >= T(sizeof(T) * 8)) return T(0);
  return T(static_cast<std::make_unsigned_t<T>>(a) << b);
}
template <typename T> inline T lens_rshift(T a, T b) {
  if (b < 0 || b >= T(sizeof(T) * 8)) return a < 0 ? T(-1) : T(0);
  return T(a >> b);
}
""" + special_math.PRELUDE + streaming.PRELUDE
