"""`lens_erf(float)`: an erf of our own for generated kernels on AVX-512 with g++, whose 16-lane variant g++ calls
from `omp simd` loops by the vector-function ABI name `_ZGVeN16v_lens_erff`, as it calls libmvec's and `lens_exp`'s
(compiler/cpp_text/vector_math.py holds that machinery; this module only the function).

erf is odd, so the kernel works on a = |x| and puts x's sign back. [0, 4) is cut into 16 intervals of width 1/4; on
each, a degree-5 polynomial in t = a - (the interval's middle) approximates erf. The 16 values of each coefficient
(and of the middles) fill one vector register, and `vpermps` picks every lane's interval's value: 7 permutes and 6
fused multiply-adds a vector, no division, no exp, no table gathers. The first interval is centred on 0 and written
erf(a) = a + a * q(a), so that erf(x) ~ 1.128 x keeps its relative accuracy down to the subnormals (2/sqrt(pi)
rounded to float alone costs 0.9 ulp there). From a = 3.9194, erf rounds to 1 in float: 1 is returned (inf too);
NaN stays NaN (its lanes take interval 0, and every step propagates it).

Accuracy, checked over all 2^32 floats once (tests/compiler/cpp_text/test_fast_erf.py checks a spread of them and eager
inside kernels): at most 1.18 ulp from the exact erf, so within one float of the correctly rounded value. Eager's
own vectorized erf (ATen's Vectorized<float>::erf, Abramowitz-Stegun 7.1.26 with exp) is within 1.5e-7 absolute,
which is up to ~3 ulp near 1 and far more in relative terms near 0. Speed, 16,384 floats in L1 here: 0.22 ns an
element against libmvec's `erff` 0.52 (2.35x); libmvec's erff was most of a GELU kernel's time.

Elsewhere (no AVX-512, clang) and for every other type, `lens_erf` is std::erf (glibc/libmvec).

The tables come from `fit()` (least squares on Chebyshev nodes, relative error weighted, float64; run it with
numpy installed to regenerate them); the constants below are its output rounded to float.
"""
from __future__ import annotations

WIDTH = 0.25  # of each of the 16 intervals over [0, 4)
DEGREE = 5
ONE_FROM = 3.9194  # erf(a) rounds to 1.0f from here on

# Each interval's polynomial is c0 + c1 t + ... + c5 t^5 with t = a - OFFSETS[i]. For interval 0, c0 = 0 stands for
# "a": erf(a) = a + a * (c1 + c2 t + ... + c5 t^4).
OFFSETS = (0.0, 0.375, 0.625, 0.875, 1.125, 1.375, 1.625, 1.875, 2.125, 2.375, 2.625, 2.875, 3.125, 3.375, 3.625, 3.875)
COEFFICIENTS = (  # COEFFICIENTS[j][i]: coefficient j of interval i
    (0.0, 0.4041168987751007, 0.6232408881187439, 0.7840750813484192, 0.8883882164955139, 0.9481700658798218,
     0.9784437417984009, 0.9919900298118591, 0.9973459839820862, 0.9992170333862305, 0.999794602394104,
     0.9999521374702454, 0.9999901056289673, 0.9999982118606567, 0.9999997019767761, 0.9999999403953552),
    (0.12837913632392883, 0.9803528785705566, 0.7634995579719543, 0.5247450470924377, 0.31827396154403687,
     0.1703597754240036, 0.08047225326299667, 0.03354582563042641, 0.012340819463133812, 0.004006478004157543,
     0.001147875445894897, 0.0002902284904848784, 6.47587949060835e-05, 1.2751783287967555e-05,
     2.2159335912874667e-06, 3.3982578884206305e-07),
    (6.608207058889093e-06, -0.36762550473213196, -0.4771815538406372, -0.459150493144989, -0.3580603301525116,
     -0.23424771428108215, -0.13076940178871155, -0.06289899349212646, -0.02622399851679802, -0.009514959529042244,
     -0.0030128636863082647, -0.0008342493092641234, -0.00020230839436408132, -4.3016836571041495e-05,
     -8.027214789763093e-06, -1.3155532769815181e-06),
    (-0.3763246536254883, -0.2348940372467041, -0.05568262189626694, 0.09291855990886688, 0.1624511331319809,
     0.157938614487648, 0.11484211683273315, 0.0674421638250351, 0.03303780406713486, 0.013730507344007492,
     0.004890281241387129, 0.0015024230815470219, 0.000399962707888335, 9.256100020138547e-05,
     1.8666954929358326e-05, 3.2867537811398506e-06),
    (0.0019763854797929525, 0.1654171496629715, 0.17549368739128113, 0.11215267330408096, 0.028335031121969223,
     -0.02998286858201027, -0.049381207674741745, -0.042163047939538956, -0.026402929797768593,
     -0.013205946423113346, -0.005466938950121403, -0.0019085382809862494, -0.0005682226037606597,
     -0.00014534294314216822, -3.210366776329465e-05, -6.1464556893042754e-06),
    (0.10604178160429001, 0.04629819095134735, -0.026634443551301956, -0.06665337085723877, -0.061104461550712585,
     -0.03067527897655964, -0.00231269933283329, 0.011326889507472515, 0.0124443881213665, 0.008360679261386395,
     0.004236435517668724, 0.001727710128761828, 0.0005842622485943139, 0.00016657977539580315,
     4.0459570300299674e-05, 8.430391062574927e-06),
)


def fit(nodes: int = 400) -> tuple[tuple[float, ...], tuple[tuple[float, ...], ...]]:
    """(OFFSETS, COEFFICIENTS) recomputed in float64 (before rounding to float): needs numpy."""
    import math

    import numpy as np

    erf = np.vectorize(math.erf)
    cheb = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes)
    offsets, columns = [], []
    for i in range(16):
        middle = (i + 0.5) * WIDTH
        offset = 0.0 if i == 0 else middle
        a = middle + cheb * WIDTH / 2
        t, y = a - offset, erf(a)
        if i == 0:  # q(t) = erf(t)/t - 1, relative to erf
            basis = np.stack([t ** (j + 1) for j in range(DEGREE)], 1)
            c, *_ = np.linalg.lstsq(basis / y[:, None], (y - t) / y, rcond=None)
            c = np.concatenate([[0.0], c])
        else:
            basis = np.stack([t ** j for j in range(DEGREE + 1)], 1)
            c, *_ = np.linalg.lstsq(basis / y[:, None], np.ones_like(y), rcond=None)
        offsets.append(offset)
        columns.append(c)
    return tuple(offsets), tuple(tuple(float(col[j]) for col in columns) for j in range(DEGREE + 1))


def _table(values) -> str:
    return "{" + ", ".join(f"{v!r}f" for v in values) + "}"


# Declarations, after lens_exp's (vector_math.py: the same `#if` and the lens_v16sf typedef).
DECLARATIONS = r"""#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
extern "C" {
#pragma omp declare simd notinbranch simdlen(16)
__attribute__((const)) float lens_erff(float) noexcept;
}
inline float lens_erf(float x) noexcept { return lens_erff(x); }
#else
inline float lens_erf(float x) noexcept { return std::erf(x); }
#endif
template <typename T> inline auto lens_erf(T x) { return std::erf(x); }
"""

# The definitions (compiled only into sources that call lens_erf, or linked from compiler/machine/prebuilt.py's
# object): the 16-lane variant and a scalar symbol bound to it by assembler alias (vector_math.py says why).
DEFINITIONS = r"""#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
typedef int lens_v16si __attribute__((vector_size(64)));
alignas(64) static const float lens_erf_offsets[16] = """ + _table(OFFSETS) + r""";
alignas(64) static const float lens_erf_c[""" + str(DEGREE + 1) + "][16] = {\n" + "".join(
    f"  {_table(row)},\n" for row in COEFFICIENTS) + r"""};
static inline __attribute__((always_inline)) lens_v16sf lens_erf_pick(const float* table, lens_v16si i) noexcept {
  lens_v16sf t;
  __builtin_memcpy(&t, table, 64);
  return __builtin_shuffle(t, i);  // vpermps: every lane's interval's value
}
extern "C" {
__attribute__((visibility("hidden"))) lens_v16sf _ZGVeN16v_lens_erff(lens_v16sf x) noexcept {
  const lens_v16si bits = (lens_v16si)x, sign = bits & (int)0x80000000;
  const lens_v16sf a = (lens_v16sf)(bits & 0x7fffffff);
  lens_v16si i = __builtin_convertvector(a * """ + f"{1 / WIDTH!r}f" + r""", lens_v16si);  // NaN: INT_MIN, interval 0
  i = (i < 15 ? i : 15) & 15;
  const lens_v16sf t = a - lens_erf_pick(lens_erf_offsets, i);
  lens_v16sf p = lens_erf_pick(lens_erf_c[""" + str(DEGREE) + r"""], i);
  #pragma GCC unroll 8
  for (int j = """ + str(DEGREE - 1) + r"""; j >= 1; j--)
    p = __builtin_ia32_vfmaddps512_mask(p, t, lens_erf_pick(lens_erf_c[j], i), (unsigned short)-1, 4);
  p = __builtin_ia32_vfmaddps512_mask(p, t, i == 0 ? t : lens_erf_pick(lens_erf_c[0], i), (unsigned short)-1, 4);
  p = a > """ + f"{ONE_FROM!r}f" + r""" ? lens_v16sf{} + 1.0f : p;
  return (lens_v16sf)((lens_v16si)p | sign);
}
__attribute__((visibility("hidden"), used, noinline)) float lens_erff_scalar(float x) noexcept {
  return _ZGVeN16v_lens_erff(x - lens_v16sf{})[0];  // (x - 0, not 0 + x: -0 stays -0)
}
}
asm(".globl lens_erff\n\t.hidden lens_erff\n\t.set lens_erff, lens_erff_scalar");
#endif
"""
