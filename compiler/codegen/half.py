"""bfloat16 and float16 in generated kernels: kept in memory as 16-bit patterns, computed in float.

As Inductor's C++ backend does (`legalize_lowp_fp_dtype`): a load of a half buffer becomes a float, every op on
half values computes in float, and a value is rounded to the half dtype only where it is stored (a buffer, a
kernel-local buffer, a streamed line) or where the graph converts to a half dtype (`_to_copy`, autocast's casts).
So `x * 2 + 1` on a bfloat16 tensor rounds once inside a fused kernel where eager rounds after each op: within
torch's own tolerances for the dtype, and closer to the exact result. Reductions accumulate in float (eager's
accumulate type); a half-dtype reduction result is rounded once.

The conversions are branch-free integer code that g++ vectorizes (g++ 12 does not vectorize `_Float16`
conversions without AVX512-FP16): bfloat16 -> float is a 16-bit shift; float -> bfloat16 rounds to nearest even
(c10's `round_to_nearest_even`, NaN -> 0x7FC0); float16 both ways as c10's `fp16_ieee_{to,from}_fp32_value`.
Not F16C: g++ 12 vectorizes neither `_Float16` casts nor `_cvtsh_ss` (scalar vcvtph2ps per element), and F16C
through `omp declare simd` variants of our own (8 lanes, int32 in and out: g++ makes no simd clone call with 16-bit
arguments) was bit-exact (every float, every half) but a float16 add over 16K elements in L1 took 20.8 us
against 16.7 with these conversions (AVX2 EPYC): a call and an int32/int16 repacking per 8 lanes cost more than
the ~11 integer ops each conversion takes inline.
"""
from __future__ import annotations

import torch

HALF_DTYPES = (torch.bfloat16, torch.float16)
STORAGE_CTYPES = {torch.bfloat16: "lens_bf16", torch.float16: "lens_fp16"}
# dtype -> (load: bits -> float, store: float -> bits, round: float -> float holding a value of the dtype)
_CONVERT = {
    torch.bfloat16: ("lens_bf16_to_float", "lens_float_to_bf16", "lens_round_bf16"),
    torch.float16: ("lens_fp16_to_float", "lens_float_to_fp16", "lens_round_fp16"),
}


def is_half(dtype: torch.dtype) -> bool:
    return dtype in _CONVERT


def compute_itemsize(dtype: torch.dtype) -> int:
    """Bytes of one value in a kernel's registers and local arrays (a half value computes as a float)."""
    return 4 if dtype in _CONVERT else dtype.itemsize


def load(dtype: torch.dtype, text: str) -> str:
    """The float value of half element `text` in memory; other dtypes unchanged."""
    return f"{_CONVERT[dtype][0]}({text})" if dtype in _CONVERT else text


def store(dtype: torch.dtype, text: str) -> str:
    """Float `text` as the bits a half buffer holds; other dtypes unchanged."""
    return f"{_CONVERT[dtype][1]}({text})" if dtype in _CONVERT else text


def round_to(dtype: torch.dtype, text: str) -> str:
    """Float `text` rounded to a value of half `dtype`, still a float; other dtypes unchanged."""
    return f"{_CONVERT[dtype][2]}({text})" if dtype in _CONVERT else text


def cast(operand: str, src: torch.dtype, dst: torch.dtype) -> str | None:
    """A conversion from or to a half dtype, None when neither is one (other conversions from a half dtype take
    its float value as a float's). From a half dtype the value is a float already; to one it goes through
    float, as c10's conversions do (a double is rounded to float first: double -> bfloat16 rounds twice, as in
    eager)."""
    if dst in _CONVERT:
        return round_to(dst, operand if src in (torch.float32, *_CONVERT) else f"static_cast<float>({operand})")
    if src in _CONVERT and dst == torch.float32:
        return operand
    return None


PRELUDE = r"""// bfloat16 / float16 kept as bits, computed in float (compiler/codegen/half.py)
typedef uint16_t lens_bf16;
typedef uint16_t lens_fp16;
LENS_INLINE float lens_bf16_to_float(lens_bf16 h) { return __builtin_bit_cast(float, uint32_t(h) << 16); }
LENS_INLINE lens_bf16 lens_float_to_bf16(float f) {  // round to nearest even; NaN -> 0x7FC0 (c10)
  const uint32_t u = __builtin_bit_cast(uint32_t, f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return f != f ? lens_bf16(0x7FC0) : lens_bf16(rounded);
}
LENS_INLINE float lens_round_bf16(float f) { return lens_bf16_to_float(lens_float_to_bf16(f)); }
LENS_INLINE float lens_fp16_to_float(lens_fp16 h) {
  const uint32_t w = uint32_t(h) << 16, sign = w & 0x80000000u, two_w = w + w;
  // normal: exponent rebiased by a multiply; subnormal: the mantissa as a float minus 0.5 (exact)
  const float normal = __builtin_bit_cast(float, (two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormal = __builtin_bit_cast(float, (two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t bits = __builtin_bit_cast(uint32_t, two_w < (1u << 27) ? denormal : normal);
  return __builtin_bit_cast(float, sign | bits);
}
LENS_INLINE lens_fp16 lens_float_to_fp16(float f) {  // round to nearest even; overflow -> inf, NaN -> 0x7E00 (c10)
  const float scaled = (__builtin_fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;  // rounds the mantissa, saturates
  const uint32_t w = __builtin_bit_cast(uint32_t, f), shl1_w = w + w, sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;
  const uint32_t bits = __builtin_bit_cast(uint32_t, __builtin_bit_cast(float, (bias >> 1) + 0x07800000u) + scaled);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return lens_fp16((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}
LENS_INLINE float lens_round_fp16(float f) {  // lens_fp16_to_float(lens_float_to_fp16(f)) in float arithmetic, half the ops
  const float a = __builtin_fabsf(f);
  uint32_t e = __builtin_bit_cast(uint32_t, a) & 0x7F800000u;
  e = e < (113u << 23) ? (113u << 23) : e;  // below float16's normal range its step is 2^-24 throughout
  e = e > (142u << 23) ? (142u << 23) : e;  // past its largest exponent (inf, NaN too): inf below
  const float m = __builtin_bit_cast(float, e + (13u << 23));  // its last bit is float16's last bit at a's exponent
  float r = (a + m) - m;  // a rounded to that bit, to nearest even: the float addition's own rounding
  r = r > 65504.0f ? __builtin_inff() : r;
  return __builtin_copysignf(a != a ? __builtin_bit_cast(float, 0x7FC00000u) : r, f);  // NaN: c10's 0x7E00
}
LENS_INLINE bool lens_signbit(float f) { return (__builtin_bit_cast(uint32_t, f) >> 31) != 0; }
"""
