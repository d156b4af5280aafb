"""C++ for torch.special's orthogonal polynomials (`chebyshev_polynomial_t` ... `legendre_polynomial_p`),
part of the prelude. They follow eager's CPU kernels branch for branch (the closed forms at the interval's
ends, the trigonometric form for large n inside it, else the three-term recurrence, stopped at NaN), so
results match eager's, not just the mathematical polynomial. n arrives in the computation dtype and is
truncated to an integer as eager does.
"""
from __future__ import annotations

# op name (compiler.ir.nodes.POLYNOMIAL_OPS) -> C++ format over the operands {x} (the point) and {y} (the degree n)
POLYNOMIAL_OPS = {
    "chebyshev_polynomial_t": "lens_chebyshev<0, false>({x}, {y})",
    "chebyshev_polynomial_u": "lens_chebyshev<1, false>({x}, {y})",
    "chebyshev_polynomial_v": "lens_chebyshev<2, false>({x}, {y})",
    "chebyshev_polynomial_w": "lens_chebyshev<3, false>({x}, {y})",
    "shifted_chebyshev_polynomial_t": "lens_chebyshev<0, true>({x}, {y})",
    "shifted_chebyshev_polynomial_u": "lens_chebyshev<1, true>({x}, {y})",
    "shifted_chebyshev_polynomial_v": "lens_chebyshev<2, true>({x}, {y})",
    "shifted_chebyshev_polynomial_w": "lens_chebyshev<3, true>({x}, {y})",
    "hermite_polynomial_h": "lens_hermite_h({x}, {y})",
    "hermite_polynomial_he": "lens_hermite_he({x}, {y})",
    "laguerre_polynomial_l": "lens_laguerre({x}, {y})",
    "legendre_polynomial_p": "lens_legendre({x}, {y})",
}

PRELUDE = r"""
// K: 0 = T (first kind), 1 = U (second), 2 = V (third), 3 = W (fourth); S: shifted to [0, 1] (y = 2x - 1)
template <int K, bool S, typename T> inline T lens_chebyshev(T x, T degree) {
  const int64_t n = static_cast<int64_t>(degree);
  if (n < 0) return T(0);
  const T y = S ? x + x - T(1) : x;
  const T sign = n % 2 == 0 ? T(1) : T(-1);
  const bool hi = S ? x == T(1) : std::abs(x) == T(1) && x > T(0);
  const bool lo = S ? x == T(0) : std::abs(x) == T(1) && !(x > T(0));
  if (hi) return K == 1 ? T(n + 1) : K == 3 ? T(n + n + 1) : T(1);
  if (lo) return K == 0 || K == 3 ? sign : K == 1 ? sign * T(n + 1) : sign * T(n + n + 1);
  const int64_t trig_from = S ? (K == 3 ? 4 : 6) : (K == 0 ? 6 : 8);
  if (n > trig_from && std::abs(y) < T(1)) {
    const T t = std::acos(y);
    if (K == 0) return std::cos(T(n) * t);
    if (K == 1) return std::sin(t) != T(0) ? std::sin(T(n + 1) * t) / std::sin(t)
                                           : T(n + 1) * std::cos(T(n + 1) * t) / y;
    if (K == 2) return std::sin(t / T(2)) != T(1) ? std::cos((T(n) + T(0.5)) * t) / std::cos(t / T(2))
                                                  : sign * T(n + n + 1);
    if (std::cos(t / T(2)) != T(1)) return std::sin((T(n) + T(0.5)) * t) / std::sin(t / T(2));
    return !S && x > T(0) ? T(n + n + 1) : sign;
  }
  const T q0 = K == 0 ? y : K == 1 ? y + y : K == 2 ? y + y - T(1) : y + y + T(1);
  if (n == 0) return T(1);
  T p = T(1), q = q0, r = q0;
  for (int64_t k = 2; k <= n && !std::isnan(q); k++) { r = (y + y) * q - p; p = q; q = r; }
  return r;
}
template <typename T> constexpr int64_t lens_hermite_limit() { return std::is_same_v<T, float> ? 128 : 512; }
template <typename T> inline T lens_hermite_h(T x, T degree) {
  const int64_t n = std::isinf(degree) || std::isnan(degree) ? -1 : static_cast<int64_t>(degree);
  if (n < 0) return T(0);
  if (n == 0) return T(1);
  if (n == 1) return x + x;
  if (n > lens_hermite_limit<T>()) return std::numeric_limits<T>::quiet_NaN();
  T p = T(1), q = x + x, r = T(0);
  for (int64_t k = 2; k < n + n; k += 2) { r = (x + x) * q - T(k) * p; p = q; q = r; }
  return r;
}
template <typename T> inline T lens_hermite_he(T x, T degree) {
  const int64_t n = static_cast<int64_t>(degree);
  if (n < 0) return T(0);
  if (n == 0) return T(1);
  if (n == 1) return x;
  if (n > lens_hermite_limit<T>()) return std::numeric_limits<T>::quiet_NaN();
  T p = T(1), q = x, r = x;
  for (int64_t k = 1; k < n; k++) { r = x * q - T(k) * p; p = q; q = r; }
  return r;
}
template <typename T> inline T lens_laguerre(T x, T degree) {
  const int64_t n = static_cast<int64_t>(degree);
  if (n < 0) return T(0);
  if (std::abs(x) == T(0) || n == 0) return T(1);
  T p = T(1), q = T(1) - x, r = q;
  for (int64_t k = 1; k < n && !std::isnan(q); k++) {
    r = ((T(k + k) + (T(1) - x)) * q - T(k) * p) / T(k + 1); p = q; q = r;
  }
  return r;
}
template <typename T> inline T lens_legendre(T x, T degree) {
  const int64_t n = static_cast<int64_t>(degree);
  if (n < 0) return T(0);
  if (std::abs(x) == T(1)) return x > T(0) || n % 2 == 0 ? T(1) : T(-1);
  if (n == 0) return T(1);
  T p = T(1), q = x, r = x;
  for (int64_t k = 1; k < n && !std::isnan(q); k++) { r = (T(k + k + 1) * x * q - T(k) * p) / T(k + 1); p = q; q = r; }
  return r;
}
"""
