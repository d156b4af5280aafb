"""The `std::` math functions and the few traits generated kernels use, declared without <cmath>,
<limits> and <type_traits>.

Why: <cmath> is most of the prelude's parse time (~30 ms of a ~100 ms cold g++ build here, even with the
C++17 special functions skipped), and a build on a fresh cache parses it before the precompiled prelude
exists. Kernels use a few dozen functions on float and double: each is the C library function (which g++
knows as a builtin, so constant folding, inlining of `fabs`/`floor`/... and libmvec's vector variants work
as with <cmath>), overloaded in `std` for float the way <cmath> does it. <limits> and <type_traits> cost
another ~15 ms a build (4,500 preprocessed lines) for `numeric_limits` of the eight kernel types and three
traits, defined here from g++'s predefined macros and builtins.
"""
from __future__ import annotations

# Ends the part of every C++ source that is the same for all graphs (compiler/machine/pch.py precompiles it).
PRELUDE_END = "// ---- end of the Kernel Lens prelude ----"

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
    return ("// <cmath>'s functions that kernels call, without its parse time (compiler/cpp_text/math_prelude.py)\n"
            'extern "C" {\n' + "\n".join(c_decls) + "\n}\nnamespace std {\n" + "\n".join(std_defs) + "\n}\n")


TRAITS = r"""// <limits> and <type_traits>: what kernels use of them (compiler/cpp_text/math_prelude.py)
namespace std {
template <typename T, typename U> inline constexpr bool is_same_v = false;
template <typename T> inline constexpr bool is_same_v<T, T> = true;
template <typename T> inline constexpr bool is_floating_point_v =
    is_same_v<T, float> || is_same_v<T, double> || is_same_v<T, long double>;
template <typename T> struct make_unsigned { using type = T; };
template <> struct make_unsigned<signed char> { using type = unsigned char; };
template <> struct make_unsigned<short> { using type = unsigned short; };
template <> struct make_unsigned<int> { using type = unsigned int; };
template <> struct make_unsigned<long> { using type = unsigned long; };
template <> struct make_unsigned<long long> { using type = unsigned long long; };
template <typename T> using make_unsigned_t = typename make_unsigned<T>::type;
template <typename T> struct numeric_limits;
#define LENS_LIMITS(T, LO, HI, EXTRA) template <> struct numeric_limits<T> { \
  static constexpr T min() noexcept { return LO; } static constexpr T max() noexcept { return HI; } EXTRA };
#define LENS_INT(T, LO, HI) LENS_LIMITS(T, LO, HI, static constexpr T lowest() noexcept { return LO; })
LENS_INT(bool, false, true)
LENS_INT(signed char, -__SCHAR_MAX__ - 1, __SCHAR_MAX__)
LENS_INT(short, -__SHRT_MAX__ - 1, __SHRT_MAX__)
LENS_INT(int, -__INT_MAX__ - 1, __INT_MAX__)
LENS_INT(long, -__LONG_MAX__ - 1L, __LONG_MAX__)
LENS_INT(long long, -__LONG_LONG_MAX__ - 1LL, __LONG_LONG_MAX__)
LENS_INT(unsigned char, 0, __SCHAR_MAX__ * 2U + 1U)
LENS_INT(unsigned short, 0, __SHRT_MAX__ * 2U + 1U)
LENS_INT(unsigned int, 0, __INT_MAX__ * 2U + 1U)
LENS_INT(unsigned long, 0, __LONG_MAX__ * 2UL + 1UL)
LENS_INT(unsigned long long, 0, __LONG_LONG_MAX__ * 2ULL + 1ULL)
#define LENS_FLOAT(T, P, S) LENS_LIMITS(T, P##_MIN__, P##_MAX__, \
  static constexpr T lowest() noexcept { return -P##_MAX__; } \
  static constexpr T epsilon() noexcept { return P##_EPSILON__; } \
  static constexpr T denorm_min() noexcept { return P##_DENORM_MIN__; } \
  static constexpr T infinity() noexcept { return __builtin_huge_val##S(); } \
  static constexpr T quiet_NaN() noexcept { return __builtin_nan##S(""); })
LENS_FLOAT(float, __FLT, f)
LENS_FLOAT(double, __DBL, )
#undef LENS_FLOAT
#undef LENS_INT
#undef LENS_LIMITS
}
"""

PRELUDE = math_prelude() + TRAITS
