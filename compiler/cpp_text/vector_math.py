"""Vector math for generated kernels: `omp declare simd` declarations of the libm functions that glibc's
libmvec implements, so g++ calls e.g. `_ZGVeN16v_expf` (16 floats at once) inside `omp simd` loops
instead of scalar `expf` per element. glibc only declares them under -ffast-math, which we do not use:
libmvec's results stay within the few-ulp accuracy of eager's vectorized (Sleef) math.
"""
from __future__ import annotations

import functools
import os

from compiler.cpp_text import fast_erf

# (glibc version that added the function to libmvec, [(name, arity)]); float and double variants both.
_LIBMVEC: list[tuple[tuple[int, int], list[tuple[str, int]]]] = [
    ((2, 22), [("exp", 1), ("log", 1), ("sin", 1), ("cos", 1), ("pow", 2)]),
    ((2, 35), [("acos", 1), ("acosh", 1), ("asin", 1), ("asinh", 1), ("atan", 1), ("atanh", 1), ("cbrt", 1),
               ("cosh", 1), ("erf", 1), ("erfc", 1), ("exp10", 1), ("exp2", 1), ("expm1", 1), ("log10", 1),
               ("log1p", 1), ("log2", 1), ("sinh", 1), ("tan", 1), ("tanh", 1), ("atan2", 2), ("hypot", 2)]),
]


@functools.lru_cache(maxsize=None)
def glibc_version() -> tuple[int, int] | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    if not text.startswith("glibc "):
        return None
    major, minor = text.split()[1].split(".")[:2]
    return int(major), int(minor)


@functools.lru_cache(maxsize=None)
def vectorizable_functions() -> list[tuple[str, int]]:
    """libm functions (double names; float ones add `f`) that have libmvec variants on this machine."""
    version = glibc_version()
    if version is None or not _has_libmvec():
        return []
    return [fn for since, fns in _LIBMVEC if version >= since for fn in fns]


def _has_libmvec() -> bool:
    dirs = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
    return any(os.path.exists(os.path.join(d, "libmvec.so.1")) for d in dirs)


def declarations() -> str:
    """C++ to put after the prelude's includes: libmvec's vector variants (none when libmvec is
    unavailable), then `lens_exp` and `lens_erf` (compiler/cpp_text/fast_erf.py)."""
    return _libmvec_declarations() + FAST_EXP + EXP_LANES + fast_erf.DECLARATIONS


def _libmvec_declarations() -> str:
    fns = vectorizable_functions()
    if not fns:
        return ""
    lines = ['extern "C" {  // libmvec vector variants (see compiler/cpp_text/vector_math.py)']
    for name, arity in fns:
        for suffix, t in (("f", "float"), ("", "double")):
            lines.append("#pragma omp declare simd notinbranch")
            lines.append(f"{t} {name}{suffix}({', '.join([t] * arity)}) noexcept;")
    lines.append("}")
    return "\n".join(lines) + "\n"


# `lens_exp(float)`: on AVX-512 with g++, an expf of our own whose 16-lane variant g++ calls from `omp simd`
# loops by the vector-function ABI name `_ZGVeN16v_lens_expf`, as it calls libmvec's. Cody-Waite reduction
# by ln 2, Cephes' degree-7 polynomial, `vscalefps` for 2^n (overflow to inf, gradual underflow): at most
# 1 ulp from the correctly rounded result, as eager's Sleef expf (tests/compiler/cpp_text/test_vector_math.py), and
# ~1.5x libmvec's throughput on the AMD machine (the same on the device's Xeon).
# GCC builtins, not <immintrin.h>: that header costs ~0.3 s of parsing per cold build. The scalar symbol
# `lens_expf` (tails, loops g++ does not vectorize) is bound by assembler alias so that g++ sees only a
# declaration: a definition in the unit would make g++ build its own clones and inline the scalar one.
# `const` (a function of its argument alone): without it g++ takes the call for a store to memory, and a loop that
# also needs if-conversion (a bfloat16 store's NaN test) stays scalar ("control flow in loop").
# Elsewhere (no AVX-512, clang) `lens_exp` is std::exp (glibc/libmvec: within 4 ulp, 3 seen on AVX2); double and
# other types always are.
_FAST_EXP_IF = "#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
_V16SF = "typedef float lens_v16sf __attribute__((vector_size(64)));\n"
FAST_EXP = _FAST_EXP_IF + _V16SF + r"""extern "C" {
#pragma omp declare simd notinbranch simdlen(16)
__attribute__((const)) float lens_expf(float) noexcept;
}
inline float lens_exp(float x) noexcept { return lens_expf(x); }
#else
// libmvec's expf runs the scalar expf for each lane whose |x| > ~87.3; below -104 exp rounds to +0, so those lanes
// (an attention mask's -inf) compute exp(+0) and are zeroed: 7x faster on AVX2. Bit masks, not selects, which
// g++ moves past the call (it computes exp(x) and blends exp(0) in afterwards, keeping the slow lanes).
inline float lens_exp(float x) noexcept {
  const uint32_t keep = 0u - uint32_t(!(x < -104.0f));  // NaN kept
  const float e = std::exp(__builtin_bit_cast(float, __builtin_bit_cast(uint32_t, x) & keep));
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, e) & keep);
}
#endif
template <typename T> inline auto lens_exp(T x) { return std::exp(x); }
"""

# The 16-lane exp's body (on `x`, a lens_v16sf), shared by the out-of-line variant g++ calls from vectorized
# loops and the inline one that split lane loops call (compiler/codegen/strategies/exp_lanes.py): the same bits either way.
_EXP_BODY = r"""  const lens_v16sf hi = lens_v16sf{} + 88.8f, lo = lens_v16sf{} - 104.0f, ones = lens_v16sf{} + 1.0f;
  x = hi < x ? hi : x;  // clamped so that n*ln2 never meets inf; NaN passes both
  const auto zero = x < lo;  // exp rounds to +0 there: computed on 0 and replaced, as an underflowing
  x = zero ? lens_v16sf{} : x;  // scalef costs a microcode assist per vector (masked softmax: 5x slower)
  lens_v16sf n = __builtin_ia32_rndscaleps_mask(x * 1.44269504088896341f, 8, x, (unsigned short)-1, 4);
  lens_v16sf r = __builtin_ia32_vfnmaddps512_mask(n, lens_v16sf{} + 0.693359375f, x, (unsigned short)-1, 4);
  r = __builtin_ia32_vfnmaddps512_mask(n, lens_v16sf{} - 2.12194440e-4f, r, (unsigned short)-1, 4);
  lens_v16sf p = lens_v16sf{} + 1.9875691500e-4f;
  const float c[5] = {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  #pragma GCC unroll 5  // (-O2 kept a loop over c[]: a scalar add and broadcast per coefficient; softmax 15% slower)
  for (float ci : c) p = __builtin_ia32_vfmaddps512_mask(p, r, lens_v16sf{} + ci, (unsigned short)-1, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, r * r, r + ones, (unsigned short)-1, 4);
  p = __builtin_ia32_scalefps512_mask(p, n, p, (unsigned short)-1, 4);
  return zero ? lens_v16sf{} : p;
"""

# The definitions, compiled only into sources that call lens_exp (they cost ~25 ms of g++ per build).
FAST_EXP_DEFINITIONS = _FAST_EXP_IF + r"""extern "C" {
__attribute__((visibility("hidden"))) lens_v16sf _ZGVeN16v_lens_expf(lens_v16sf x) noexcept {
""" + _EXP_BODY + r"""}
__attribute__((visibility("hidden"), used, noinline)) float lens_expf_scalar(float x) noexcept {
  return _ZGVeN16v_lens_expf(lens_v16sf{} + x)[0];
}
}
asm(".globl lens_expf\n\t.hidden lens_expf\n\t.set lens_expf, lens_expf_scalar");
#endif
"""

# `lens_exp_lanes<N>(v)`: v[0:N] = exp(v[0:N]) in place, for N a multiple of 16, inlined into the kernel (its
# vector registers stay live across it, where the vector-function ABI's call clobbers them all: a masked
# softmax row kernel 6-12% faster here). Elsewhere, a loop of lens_exp. In the prelude: every part of a source
# cut into parts (compiler/machine/build_parts.py) may call it, and an uncalled template costs g++ nothing to speak of.
EXP_LANES = _FAST_EXP_IF + r"""static inline __attribute__((always_inline)) lens_v16sf lens_exp_v16(lens_v16sf x) noexcept {
""" + _EXP_BODY + r"""}
template <int N> static inline __attribute__((always_inline)) void lens_exp_lanes(float* __restrict__ v) noexcept {
  for (int i = 0; i < N; i += 16) {
    lens_v16sf x;
    __builtin_memcpy(&x, v + i, 64);
    x = lens_exp_v16(x);
    __builtin_memcpy(v + i, &x, 64);
  }
}
#else
template <int N> inline void lens_exp_lanes(float* v) noexcept {
  for (int i = 0; i < N; i++) v[i] = lens_exp(v[i]);
}
#endif
"""


# The definitions as translation units of their own (compiler/machine/prebuilt.py builds each once per toolchain).
FAST_EXP_OBJECT = _FAST_EXP_IF + _V16SF + "#endif\n" + FAST_EXP_DEFINITIONS
FAST_ERF_OBJECT = _FAST_EXP_IF + _V16SF + "#endif\n" + fast_erf.DEFINITIONS


def definitions(kernel_code: str) -> str:
    """What the kernels in `kernel_code` need defined after the prelude."""
    return ((FAST_EXP_DEFINITIONS if "lens_exp(" in kernel_code else "")
            + (fast_erf.DEFINITIONS if "lens_erf(" in kernel_code else ""))


def link_flags() -> list[str]:
    """Flags that must follow the source on the g++ command line."""
    return ["-lmvec"] if vectorizable_functions() else []
