"""The C++ of compiler/machine/winograd.py's helper library: F(4x4, 3x3)'s input transform (6x6 input tiles,
channels-last, 16 channels a vector), the 36 products against the weight's transform (a 12-row x 32-column register
panel), and the output transform with the bias, the activation and a fused residual sum applied as it writes."""

SOURCE = r"""
// A 3x3 convolution of stride 1 computes every 4x4 output tile from a 6x6 input tile: V = B^T d B (36 values a
// channel), M = V . U summed over input channels (36 independent matrix products, U = G g G^T the weight's
// transform), Y = A^T M A (16 values an output channel). 36 products of a tile against 9 * 16 = 144 multiply-adds of
// the direct convolution: 4x fewer, paid for by the transforms, which are additions and a few scalings.
#include <cmath>
#include <cstdint>
#include <cstring>

typedef float lens_v16 __attribute__((vector_size(64)));

// `n` (1..16) floats at p: a full vector, else the first n lanes and zeros
static inline lens_v16 lens_load(const float* p, int64_t n)
{
    lens_v16 v = {};
    if (n == 16) std::memcpy(&v, p, sizeof(v));  // (one vector load: the constant size is what makes it one)
    else std::memcpy(&v, p, n * sizeof(float));
    return v;
}

static inline void lens_store(float* p, lens_v16 v, int64_t n)
{
    if (n == 16) std::memcpy(p, &v, sizeof(v));
    else std::memcpy(p, &v, n * sizeof(float));
}

// B^T over one column (or row) of 6: points 0, +-1, +-2 and infinity
static inline void lens_bt(const lens_v16* d, int s, lens_v16* o, int os)
{
    lens_v16 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    o[0] = 4.f * d0 - 5.f * d2 + d4;
    o[os] = d3 + d4 - 4.f * (d1 + d2);
    o[2 * os] = 4.f * (d1 - d2) + d4 - d3;
    o[3 * os] = 2.f * (d3 - d1) + d4 - d2;
    o[4 * os] = 2.f * (d1 - d3) + d4 - d2;
    o[5 * os] = 4.f * d1 - 5.f * d3 + d5;
}

// A^T over one column (or row) of 6, giving 4
static inline void lens_at(const lens_v16* m, int s, lens_v16* o, int os)
{
    lens_v16 a = m[s] + m[2 * s], b = m[s] - m[2 * s], c = m[3 * s] + m[4 * s], d = m[3 * s] - m[4 * s];
    o[0] = m[0] + a + c;
    o[os] = b + 2.f * d;
    o[2 * os] = a + 4.f * c;
    o[3 * os] = b + 8.f * d + m[5 * s];
}

// tile t of T (over n, tile row, tile column) -> its image and top-left corner
static inline void lens_tile(int64_t t, int64_t th, int64_t tw, int64_t* n, int64_t* y, int64_t* x)
{
    *n = t / (th * tw);
    int64_t r = t % (th * tw);
    *y = (r / tw) * 4;
    *x = (r % tw) * 4;
}

// x: (N, H, W, C) channels-last; V: [36][T][C] for the T tiles from tile t0 on (of N * th * tw). Input positions
// outside the image (the padding) are zeros.
extern "C" void lens_winograd_input(const float* x, float* V, int64_t H, int64_t W, int64_t C, int64_t ph, int64_t pw,
                                    int64_t th, int64_t tw, int64_t t0, int64_t T, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        int64_t n, y0, x0;
        lens_tile(t0 + t, th, tw, &n, &y0, &x0);
        y0 -= ph;
        x0 -= pw;
        for (int64_t c = 0; c < C; c += 16) {
            const int64_t width = C - c < 16 ? C - c : 16;
            lens_v16 d[36], tmp[36], v[36];
            for (int i = 0; i < 6; i++)
                for (int j = 0; j < 6; j++) {
                    const int64_t y = y0 + i, xx = x0 + j;
                    d[i * 6 + j] = (y >= 0 && y < H && xx >= 0 && xx < W)
                                       ? lens_load(x + ((n * H + y) * W + xx) * C + c, width)
                                       : lens_v16{};
                }
            for (int j = 0; j < 6; j++) lens_bt(d + j, 6, tmp + j, 6);
            for (int i = 0; i < 6; i++) lens_bt(tmp + i * 6, 1, v + i * 6, 1);
            for (int k = 0; k < 36; k++) lens_store(V + (k * T + t) * C + c, v[k], width);
        }
    }
}

// R rows of one product's V (row stride ldv) times a 32-column panel of U ([C][32]) into M (row stride ldm): the
// R x 32 accumulators in registers, a row's V value broadcast against the panel's two vectors per input channel
template <int R>
static inline void lens_panel(const float* v, int64_t ldv, const float* u, int64_t C, float* m, int64_t ldm)
{
    lens_v16 acc[R][2];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = lens_v16{};
    for (int64_t c = 0; c < C; c++) {
        const lens_v16 u0 = lens_load(u + c * 32, 16), u1 = lens_load(u + c * 32 + 16, 16);
        for (int r = 0; r < R; r++) {
            const float e = v[r * ldv + c];
            acc[r][0] += e * u0;
            acc[r][1] += e * u1;
        }
    }
    for (int r = 0; r < R; r++) {
        lens_store(m + r * ldm, acc[r][0], 16);
        lens_store(m + r * ldm + 16, acc[r][1], 16);
    }
}

// the 36 products M[i] = V[i] . U[i], per group of channels: V [36][T][C] (group g's input channels g * C / G on),
// U packed as [36][P][C / G][32] (P panels of 32 output channels, P / G a group's; zeros past K when G is 1),
// M [36][T][P * 32]
extern "C" void lens_winograd_products(const float* V, const float* U, float* M, int64_t T, int64_t C, int64_t KP,
                                       int64_t G, int threads)
{
    const int64_t panels = KP / 32, cg = C / G, per_group = panels / G;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t i = 0; i < 36; i++)
        for (int64_t p = 0; p < panels; p++) {
            const float* u = U + (i * panels + p) * cg * 32;
            const float* v = V + i * T * C + (p / per_group) * cg;
            float* m = M + i * T * KP + p * 32;
            // rows in panels of as equal a size as 12 at most allows (16 tiles: two of 8, not 12 and a weak 4)
            const int64_t count = (T + 11) / 12, rows = (T + count - 1) / count;
            for (int64_t t = 0; t < T; t += rows) {
                const int64_t r = T - t < rows ? T - t : rows;
                const float* vt = v + t * C;
                float* mt = m + t * KP;
                switch (r) {
                case 12: lens_panel<12>(vt, C, u, cg, mt, KP); break;
                case 11: lens_panel<11>(vt, C, u, cg, mt, KP); break;
                case 10: lens_panel<10>(vt, C, u, cg, mt, KP); break;
                case 9: lens_panel<9>(vt, C, u, cg, mt, KP); break;
                case 8: lens_panel<8>(vt, C, u, cg, mt, KP); break;
                case 7: lens_panel<7>(vt, C, u, cg, mt, KP); break;
                case 6: lens_panel<6>(vt, C, u, cg, mt, KP); break;
                case 5: lens_panel<5>(vt, C, u, cg, mt, KP); break;
                case 4: lens_panel<4>(vt, C, u, cg, mt, KP); break;
                case 3: lens_panel<3>(vt, C, u, cg, mt, KP); break;
                case 2: lens_panel<2>(vt, C, u, cg, mt, KP); break;
                default: lens_panel<1>(vt, C, u, cg, mt, KP); break;
                }
            }
        }
}

// the activation `code` (winograd.py's ACTIVATIONS) of every lane, with its scalars a and b
static inline lens_v16 lens_activation(lens_v16 v, int code, float a, float b)
{
    switch (code) {
    case 0: return v;
    case 1: return v > 0.f ? v : lens_v16{};
    case 2: return v > 0.f ? v : v * a;
    case 3: return v < a ? a + lens_v16{} : (v > b ? b + lens_v16{} : v);
    default: break;
    }
    for (int l = 0; l < 16; l++) {
        const float e = v[l];
        switch (code) {
        case 4: v[l] = 1.f / (1.f + std::exp(-e)); break;
        case 5: v[l] = e / (1.f + std::exp(-e)); break;
        case 6: v[l] = e * std::fmin(std::fmax(e + 3.f, 0.f), 6.f) / 6.f; break;
        case 7: v[l] = std::fmin(std::fmax(e + 3.f, 0.f), 6.f) / 6.f; break;
        case 8: v[l] = std::tanh(e); break;
        case 9: v[l] = 0.5f * e * (1.f + std::erf(e * 0.70710678118654752f)); break;
        case 10: v[l] = 0.5f * e * (1.f + std::tanh(0.79788456080286536f * (e + 0.044715f * e * e * e))); break;
        default: break;
        }
    }
    return v;
}

// M: [36][T][ldm] (K used) of the T tiles from tile t0 on -> their part of out (N, Ho, Wo, K) channels-last:
// act(Y + bias), then (with `other`, the same layout as out) post(that + other).
extern "C" void lens_winograd_output(const float* M, const float* bias, const float* other, float* out, int64_t Ho,
                                     int64_t Wo, int64_t K, int64_t ldm, int64_t th, int64_t tw, int64_t t0, int64_t T,
                                     int act, float a, float b, int post, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < T; t++) {
        int64_t n, y0, x0;
        lens_tile(t0 + t, th, tw, &n, &y0, &x0);
        for (int64_t k = 0; k < K; k += 16) {
            const int64_t width = K - k < 16 ? K - k : 16;
            lens_v16 m[36], tmp[24], o[16];
            for (int i = 0; i < 36; i++) m[i] = lens_load(M + (i * T + t) * ldm + k, width);
            for (int j = 0; j < 6; j++) lens_at(m + j, 6, tmp + j, 6);
            for (int i = 0; i < 4; i++) lens_at(tmp + i * 6, 1, o + i * 4, 1);
            const lens_v16 bv = bias ? lens_load(bias + k, width) : lens_v16{};
            for (int i = 0; i < 4 && y0 + i < Ho; i++)
                for (int j = 0; j < 4 && x0 + j < Wo; j++) {
                    const int64_t at = ((n * Ho + y0 + i) * Wo + x0 + j) * K + k;
                    lens_v16 v = lens_activation(o[i * 4 + j] + bv, act, a, b);
                    if (other) v = lens_activation(v + lens_load(other + at, width), post, 0.f, 0.f);
                    lens_store(out + at, v, width);
                }
        }
    }
}
"""
