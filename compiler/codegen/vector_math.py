"""Vector math for generated kernels: `omp declare simd` declarations of the libm functions that glibc's
libmvec implements, so g++ calls e.g. `_ZGVeN16v_expf` (16 floats at once) inside `omp simd` loops
instead of scalar `expf` per element. glibc only declares them under -ffast-math, which we do not use:
libmvec's results stay within the few-ulp accuracy of eager's vectorized (Sleef) math.
"""
from __future__ import annotations

import functools
import os

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


# float exp inlined into vector loops (libmvec's call costs ~3x more per element): exp(x) = 2^n exp(r) with
# n = rint(x / ln 2), r by Cody-Waite reduction, exp(r) by Cephes' degree-6 polynomial (≈1 ulp, like the
# Sleef u10 exp eager uses); 2^n applied in two halves so n up to 128 and down to -150 stay exact.
INLINE_FUNCTIONS = r"""#pragma omp declare simd notinbranch
static inline float lens_expf(float x) {
  float c = x < -104.0f ? -104.0f : x;
  c = c > 89.0f ? 89.0f : c;
  c = x != x ? 0.0f : c;
  float n = __builtin_rintf(c * 1.44269504088896341f);
  float r = __builtin_fmaf(n, -0.693359375f, c);
  r = __builtin_fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  float y = __builtin_fmaf(p * r, r, r) + 1.0f;
  int32_t ni = static_cast<int32_t>(n);
  int32_t h = ni / 2;
  float s1 = __builtin_bit_cast(float, (h + 127) << 23);
  float s2 = __builtin_bit_cast(float, (ni - h + 127) << 23);
  y = y * s1 * s2;
  y = x < -103.97208f ? 0.0f : y;
  return x != x ? x : y;
}
"""

# IR op -> (operand dtype, inline function) rendered instead of the op table's text (unless overridden).
INLINE_OPS = {("exp", "torch.float32"): "lens_expf"}


def inline_op(name: str, dtype) -> str | None:
    return INLINE_OPS.get((name, str(dtype)))


def declarations() -> str:
    """C++ declarations to put after the prelude's includes: the inline functions, and libmvec's vector
    variants where glibc has them."""
    fns = vectorizable_functions()
    if not fns:
        return INLINE_FUNCTIONS
    lines = [INLINE_FUNCTIONS.rstrip("\n"),
             'extern "C" {  // libmvec vector variants (see compiler/codegen/vector_math.py)']
    for name, arity in fns:
        for suffix, t in (("f", "float"), ("", "double")):
            lines.append("#pragma omp declare simd notinbranch")
            lines.append(f"{t} {name}{suffix}({', '.join([t] * arity)}) noexcept;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def link_flags() -> list[str]:
    """Flags that must follow the source on the g++ command line."""
    return ["-lmvec"] if vectorizable_functions() else []
