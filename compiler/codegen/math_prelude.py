"""The `std::` math functions generated kernels call, declared without <cmath>.

Why: <cmath> is most of the prelude's parse time (~30 ms of a ~100 ms cold g++ build here, even with the
C++17 special functions skipped), and a build on a fresh cache parses it before the precompiled prelude
exists. Kernels use a few dozen functions on float and double: each is the C library function (which g++
knows as a builtin, so constant folding, inlining of `fabs`/`floor`/... and libmvec's vector variants work
as with <cmath>), overloaded in `std` for float the way <cmath> does it.
"""
from __future__ import annotations

UNARY = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos", "tan", "asin", "acos",
         "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "floor", "ceil", "trunc",
         "nearbyint", "cbrt", "lgamma", "tgamma")
BINARY = ("fmod", "fmax", "fmin", "atan2", "hypot", "copysign", "nextafter", "pow")
CLASSIFY = ("isnan", "isinf", "isfinite", "signbit")


def math_prelude() -> str:
    c_decls, std_defs = [], []
    for name in UNARY:
        c_decls.append(f"double {name}(double) noexcept; float {name}f(float) noexcept;")
        std_defs.append(f"using ::{name}; inline float {name}(float x) noexcept {{ return ::{name}f(x); }}")
    for name in BINARY:
        c_decls.append(f"double {name}(double, double) noexcept; float {name}f(float, float) noexcept;")
        std_defs.append(f"using ::{name}; inline float {name}(float x, float y) noexcept {{ return ::{name}f(x, y); }}")
    c_decls.append("double lgamma_r(double, int*) noexcept; float lgammaf_r(float, int*) noexcept;")
    std_defs.append("inline float abs(float x) noexcept { return __builtin_fabsf(x); }")
    std_defs.append("inline double abs(double x) noexcept { return __builtin_fabs(x); }")
    for name in CLASSIFY:
        std_defs.append(f"template <typename T> inline bool {name}(T x) noexcept {{ return __builtin_{name}(x); }}")
    return ("// <cmath>'s functions that kernels call, without its parse time (compiler/codegen/math_prelude.py)\n"
            'extern "C" {\n' + "\n".join(c_decls) + "\n}\nnamespace std {\n" + "\n".join(std_defs) + "\n}\n")


PRELUDE = math_prelude()
