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


def declarations() -> str:
    """C++ declarations to put after the prelude's includes ('' when libmvec is unavailable). An inline
    Cephes-style expf measured 1.4-1.6x slower than libmvec's here, so libm calls stay calls."""
    fns = vectorizable_functions()
    if not fns:
        return ""
    lines = ['extern "C" {  // libmvec vector variants (see compiler/codegen/vector_math.py)']
    for name, arity in fns:
        for suffix, t in (("f", "float"), ("", "double")):
            lines.append("#pragma omp declare simd notinbranch")
            lines.append(f"{t} {name}{suffix}({', '.join([t] * arity)}) noexcept;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def link_flags() -> list[str]:
    """Flags that must follow the source on the g++ command line."""
    return ["-lmvec"] if vectorizable_functions() else []
