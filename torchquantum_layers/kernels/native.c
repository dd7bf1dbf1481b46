/* One-pass CPU kernels for the two operations torch cannot do at memory speed: a 2 x 2 matrix on
 * one wire, and a permutation of amplitudes. Compiled on first use by kernels/native.py (plain C,
 * OpenMP, no torch headers); the torch kernels remain the fallback and the reference.
 * Complex numbers are interleaved (re, im) pairs of T. */
#include <stdint.h>
#include <string.h>

#define LOAD_M(mm) \
    const T ar = (mm)[0], ai = (mm)[1], br = (mm)[2], bi = (mm)[3], \
            cr = (mm)[4], ci = (mm)[5], dr = (mm)[6], di = (mm)[7];
#define PAIR(x0, x1, y0, y1) { \
    const T pr = (x0)[0], pi = (x0)[1], qr = (x1)[0], qi = (x1)[1]; \
    (y0)[0] = ar * pr - ai * pi + br * qr - bi * qi; \
    (y0)[1] = ar * pi + ai * pr + br * qi + bi * qr; \
    (y1)[0] = cr * pr - ci * pi + dr * qr - di * qi; \
    (y1)[1] = cr * pi + ci * pr + dr * qi + di * qr; }

/* The last wire: each (x0, x1) pair is adjacent, so one 256-bit register holds one complex128
 * pair (two complex64 pairs); y = M x as two complex products per element, the real and
 * imaginary halves of the columns broadcast and combined by addsub. Returns the pairs done. */
#ifdef __AVX2__
#include <immintrin.h>
static int64_t last_wire_c128(const double *m, const double *x, double *y, int64_t run, int nthreads) {
    const __m256d are = _mm256_setr_pd(m[0], m[0], m[4], m[4]), aim = _mm256_setr_pd(m[1], m[1], m[5], m[5]);
    const __m256d bre = _mm256_setr_pd(m[2], m[2], m[6], m[6]), bim = _mm256_setr_pd(m[3], m[3], m[7], m[7]);
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(run >= 16384)
    for (int64_t l = 0; l < run; ++l) {
        const __m256d v = _mm256_loadu_pd(x + 4 * l);
        const __m256d x0 = _mm256_permute4x64_pd(v, 0x44), x1 = _mm256_permute4x64_pd(v, 0xEE);
        const __m256d x0s = _mm256_permute4x64_pd(v, 0x11), x1s = _mm256_permute4x64_pd(v, 0xBB);
        const __m256d re = _mm256_fmadd_pd(bre, x1, _mm256_mul_pd(are, x0));
        const __m256d im = _mm256_fmadd_pd(bim, x1s, _mm256_mul_pd(aim, x0s));
        _mm256_storeu_pd(y + 4 * l, _mm256_addsub_pd(re, im));
    }
    return run;
}
static int64_t last_wire_c64(const float *m, const float *x, float *y, int64_t run, int nthreads) {
    const __m256 are = _mm256_setr_ps(m[0], m[0], m[4], m[4], m[0], m[0], m[4], m[4]);
    const __m256 aim = _mm256_setr_ps(m[1], m[1], m[5], m[5], m[1], m[1], m[5], m[5]);
    const __m256 bre = _mm256_setr_ps(m[2], m[2], m[6], m[6], m[2], m[2], m[6], m[6]);
    const __m256 bim = _mm256_setr_ps(m[3], m[3], m[7], m[7], m[3], m[3], m[7], m[7]);
    const int64_t twos = run / 2;
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(run >= 16384)
    for (int64_t l = 0; l < twos; ++l) {
        const __m256 v = _mm256_loadu_ps(x + 8 * l);
        const __m256 x0 = _mm256_permute_ps(v, 0x44), x1 = _mm256_permute_ps(v, 0xEE);
        const __m256 x0s = _mm256_permute_ps(v, 0x11), x1s = _mm256_permute_ps(v, 0xBB);
        const __m256 re = _mm256_fmadd_ps(bre, x1, _mm256_mul_ps(are, x0));
        const __m256 im = _mm256_fmadd_ps(bim, x1s, _mm256_mul_ps(aim, x0s));
        _mm256_storeu_ps(y + 8 * l, _mm256_addsub_ps(re, im));
    }
    return 2 * twos;
}
#define LAST_WIRE_SIMD(mm, x, y, run, nt) _Generic((x), const double *: last_wire_c128, const float *: last_wire_c64)(mm, x, y, run, nt)
#else
#define LAST_WIRE_SIMD(mm, x, y, run, nt) 0
#endif

/* The state viewed as (blocks, 2, R): y[l, :, r] = M_l x[l, :, r]. M_l = m[l >> shift] (one
 * matrix per 2^shift consecutive blocks: per sample) or m itself when shift < 0 (shared). */
#define DEF_APPLY(NAME, T) \
void NAME(const T *restrict in, T *restrict out, int64_t blocks, int64_t R, const T *restrict m, \
          int64_t shift, int nthreads) { \
    if (R == 1) { \
        /* the last wire: adjacent pairs, in runs that share one matrix */ \
        const int64_t run = shift < 0 ? blocks : ((int64_t)1 << shift); \
        for (int64_t g = 0; g < blocks / run; ++g) { \
            LOAD_M(shift < 0 ? m : m + 8 * g) \
            const T *x = in + 4 * run * g; \
            T *y = out + 4 * run * g; \
            int64_t done = LAST_WIRE_SIMD(shift < 0 ? m : m + 8 * g, x, y, run, nthreads); \
            _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(run - done >= 16384)") \
            for (int64_t l = done; l < run; ++l) PAIR(x + 4 * l, x + 4 * l + 2, y + 4 * l, y + 4 * l + 2) \
        } \
        return; \
    } \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(blocks * R >= 16384)") \
    for (int64_t l = 0; l < blocks; ++l) { \
        LOAD_M(shift < 0 ? m : m + 8 * (l >> shift)) \
        const T *x0 = in + 4 * R * l, *x1 = x0 + 2 * R; \
        T *y0 = out + 4 * R * l, *y1 = y0 + 2 * R; \
        _Pragma("omp simd") for (int64_t r = 0; r < R; ++r) PAIR(x0 + 2 * r, x1 + 2 * r, y0 + 2 * r, y1 + 2 * r) \
    } \
}
#define T float
DEF_APPLY(tql_apply_2x2_c64, float)
#undef T
#define T double
DEF_APPLY(tql_apply_2x2_c128, double)
#undef T

/* The state viewed as (blocks, S, R) of elements of `esize` bytes (8: complex64, 16: complex128):
 * out[l, j, :] = in[l, idx[j], :]. */
void tql_permute(const char *restrict in, char *restrict out, int64_t blocks, int64_t S, int64_t R,
                 const int64_t *restrict idx, int64_t esize, int nthreads) {
    const int64_t row = R * esize;
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(blocks * S * R >= 16384)
    for (int64_t l = 0; l < blocks; ++l) {
        const char *src = in + l * S * row;
        char *dst = out + l * S * row;
        if (R == 1 && esize == 8) {
            const int64_t *s = (const int64_t *)src;
            int64_t *d = (int64_t *)dst;
            for (int64_t j = 0; j < S; ++j) d[j] = s[idx[j]];
        } else if (R == 1 && esize == 16) {
            const int64_t *s = (const int64_t *)src;
            int64_t *d = (int64_t *)dst;
            for (int64_t j = 0; j < S; ++j) {
                d[2 * j] = s[2 * idx[j]];
                d[2 * j + 1] = s[2 * idx[j] + 1];
            }
        } else {
            for (int64_t j = 0; j < S; ++j) memcpy(dst + j * row, src + idx[j] * row, (size_t)row);
        }
    }
}


/* Pauli-sum expectations, all X-mask groups in one call. With c = conj(psi[j]) psi[i]:
 *  - pair groups: for k over the pivot-0 half (pivot: the lowest set bit of the index mask x),
 *    i = k with a 0 inserted at the pivot bit and j = i ^ x; re = 2 Re D, im = -2 Im D are real
 *    (K, n_obs) tables: E[b, o] += Re(c) re[k, o] + Im(c) im[k, o]. x has no bits below the
 *    pivot, so i and j run contiguously for 2^pivot pairs.
 *  - full groups (`full[g]`, for a pivot on the last one or two bits, where those runs are too
 *    short for vector lanes): the same sum over every i, j = i ^ x, with (N,) tables holding
 *    Re F, -Im F for F = D on the pivot-0 half and conj(D) of the partner on the other; x's low
 *    bits only permute lanes within a vector.
 * im is absent (address 0) when D is real, as for every X mask of a real Hamiltonian. The
 * tables are what streams from memory on large registers, hence compact and real. (b, k) run in
 * chunks within one sample, indices from shifts and masks (a division per pair cost more than the
 * arithmetic); chunk sums go to double. */
#ifdef __AVX2__
#include <immintrin.h>
static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}
static inline double hsum4(__m256d v) {
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}
#define DUP4(r) _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(r)), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3))
#define DUP2(r) _mm256_permute4x64_pd(_mm256_castpd128_pd256(_mm_loadu_pd(r)), 0x50)
#endif
#define SCALAR_TERM(a, q, r, m) \
    (((q)[0] * (a)[0] + (q)[1] * (a)[1]) * (r) + ((m) ? ((q)[0] * (a)[1] - (q)[1] * (a)[0]) * *(m) : 0))

static float pair_block_f32(const float *a, const float *q, const float *r, const float *m, int64_t len) {
    float acc = 0;
    int64_t l = 0;
#ifdef __AVX2__
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    const __m256 sign = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
    for (; l + 4 <= len; l += 4) {
        const __m256 A = _mm256_loadu_ps(a + 2 * l), Q = _mm256_loadu_ps(q + 2 * l);
        s0 = _mm256_fmadd_ps(_mm256_mul_ps(Q, A), DUP4(r + l), s0);
        if (m) s1 = _mm256_fmadd_ps(_mm256_mul_ps(Q, _mm256_permute_ps(A, 0xB1)), _mm256_mul_ps(DUP4(m + l), sign), s1);
    }
    acc = hsum8(_mm256_add_ps(s0, s1));
#endif
    for (; l < len; ++l) acc += SCALAR_TERM(a + 2 * l, q + 2 * l, r[l], m ? m + l : 0);
    return acc;
}
static double pair_block_f64(const double *a, const double *q, const double *r, const double *m, int64_t len) {
    double acc = 0;
    int64_t l = 0;
#ifdef __AVX2__
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    const __m256d sign = _mm256_setr_pd(1, -1, 1, -1);
    for (; l + 2 <= len; l += 2) {
        const __m256d A = _mm256_loadu_pd(a + 2 * l), Q = _mm256_loadu_pd(q + 2 * l);
        s0 = _mm256_fmadd_pd(_mm256_mul_pd(Q, A), DUP2(r + l), s0);
        if (m) s1 = _mm256_fmadd_pd(_mm256_mul_pd(Q, _mm256_permute_pd(A, 0x5)), _mm256_mul_pd(DUP2(m + l), sign), s1);
    }
    acc = hsum4(_mm256_add_pd(s0, s1));
#endif
    for (; l < len; ++l) acc += SCALAR_TERM(a + 2 * l, q + 2 * l, r[l], m ? m + l : 0);
    return acc;
}
/* Σ over i in [i0, i0 + len) with q = psi[i ^ x]; tables indexed by i. */
static float full_block_f32(const float *p, int64_t i0, int64_t len, int64_t x, const float *r, const float *m) {
    float acc = 0;
    int64_t i = i0;
#ifdef __AVX2__
    if ((i0 & 3) == 0) {
        const int64_t xl = x & 3, xh = x & ~(int64_t)3;
        const __m256i lanes = _mm256_setr_epi32(2 * (0 ^ xl), 2 * (0 ^ xl) + 1, 2 * (1 ^ xl), 2 * (1 ^ xl) + 1,
                                                2 * (2 ^ xl), 2 * (2 ^ xl) + 1, 2 * (3 ^ xl), 2 * (3 ^ xl) + 1);
        const __m256 sign = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        for (; i + 4 <= i0 + len; i += 4) {
            const __m256 A = _mm256_loadu_ps(p + 2 * i);
            const __m256 Q = _mm256_permutevar8x32_ps(_mm256_loadu_ps(p + 2 * (i ^ xh)), lanes);
            s0 = _mm256_fmadd_ps(_mm256_mul_ps(Q, A), DUP4(r + i), s0);
            if (m) s1 = _mm256_fmadd_ps(_mm256_mul_ps(Q, _mm256_permute_ps(A, 0xB1)), _mm256_mul_ps(DUP4(m + i), sign), s1);
        }
        acc = hsum8(_mm256_add_ps(s0, s1));
    }
#endif
    for (; i < i0 + len; ++i) acc += SCALAR_TERM(p + 2 * i, p + 2 * (i ^ x), r[i], m ? m + i : 0);
    return acc;
}
static double full_block_f64(const double *p, int64_t i0, int64_t len, int64_t x, const double *r, const double *m) {
    double acc = 0;
    int64_t i = i0;
#ifdef __AVX2__
    if ((i0 & 1) == 0) {
        const int64_t xl = x & 1, xh = x & ~(int64_t)1;
        const __m256d sign = _mm256_setr_pd(1, -1, 1, -1);
        __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
        for (; i + 2 <= i0 + len; i += 2) {
            const __m256d A = _mm256_loadu_pd(p + 2 * i);
            __m256d Q = _mm256_loadu_pd(p + 2 * (i ^ xh));
            if (xl) Q = _mm256_permute2f128_pd(Q, Q, 1);
            s0 = _mm256_fmadd_pd(_mm256_mul_pd(Q, A), DUP2(r + i), s0);
            if (m) s1 = _mm256_fmadd_pd(_mm256_mul_pd(Q, _mm256_permute_pd(A, 0x5)), _mm256_mul_pd(DUP2(m + i), sign), s1);
        }
        acc = hsum4(_mm256_add_pd(s0, s1));
    }
#endif
    for (; i < i0 + len; ++i) acc += SCALAR_TERM(p + 2 * i, p + 2 * (i ^ x), r[i], m ? m + i : 0);
    return acc;
}

#define PAIR_CHUNK 1024
#define DEF_EXPVAL(NAME, T, SUF) \
void NAME(const T *restrict psi, int64_t B, int64_t n, int64_t G, const int64_t *restrict xb, \
          const int64_t *restrict pbit, const int64_t *restrict full, const int64_t *restrict tre, \
          const int64_t *restrict tim, int64_t n_obs, double *restrict E, int nthreads) { \
    const int64_t N = (int64_t)1 << n, K = N >> 1, BO = B * n_obs; \
    const int64_t C = K < PAIR_CHUNK ? K : PAIR_CHUNK, chunks = B * K / C; \
    _Pragma("omp parallel num_threads(nthreads) if(B * N * G >= 65536) reduction(+:E[:BO])") \
    for (int64_t g = 0; g < G; ++g) { \
        const T *restrict tr = (const T *)(intptr_t)tre[g], *restrict ti = (const T *)(intptr_t)tim[g]; \
        const int64_t x = xb[g], run = (int64_t)1 << pbit[g], high = ~(run - 1); \
        if (full[g] && n_obs == 1) { \
            /* the same number of chunks over all N, twice as long */ \
            _Pragma("omp for schedule(static) nowait") \
            for (int64_t c = 0; c < chunks; ++c) { \
                const int64_t b = (c * C) >> (n - 1), i0 = 2 * ((c * C) & (K - 1)); \
                E[b] += (double)full_block_##SUF(psi + 2 * b * N, i0, 2 * C, x, tr, ti); \
            } \
            continue; \
        } \
        _Pragma("omp for schedule(static) nowait") \
        for (int64_t c = 0; c < chunks; ++c) { \
            const int64_t b = (c * C) >> (n - 1), k0 = (c * C) & (K - 1); \
            const T *p = psi + 2 * b * N; \
            if (n_obs == 1) { \
                const int64_t len = run < C ? run : C; \
                T acc = 0; \
                for (int64_t k1 = k0; k1 < k0 + C; k1 += len) { \
                    const int64_t i0 = k1 + (k1 & high); \
                    acc += pair_block_##SUF(p + 2 * i0, p + 2 * (i0 ^ x), tr + k1, ti ? ti + k1 : 0, len); \
                } \
                E[b] += (double)acc; \
            } else { \
                double *e = E + b * n_obs; \
                for (int64_t k = k0; k < k0 + C; ++k) { \
                    const int64_t i = k + (k & high), j = i ^ x; \
                    const T ar = p[2 * i], ai = p[2 * i + 1], qr = p[2 * j], qi = p[2 * j + 1]; \
                    const T re = qr * ar + qi * ai, im = qr * ai - qi * ar; \
                    const T *r0 = tr + k * n_obs; \
                    if (ti) { \
                        const T *r1 = ti + k * n_obs; \
                        for (int64_t o = 0; o < n_obs; ++o) e[o] += (double)(re * r0[o] + im * r1[o]); \
                    } else { \
                        for (int64_t o = 0; o < n_obs; ++o) e[o] += (double)(re * r0[o]); \
                    } \
                } \
            } \
        } \
    } \
}
DEF_EXPVAL(tql_expval_pairs_c64, float, f32)
DEF_EXPVAL(tql_expval_pairs_c128, double, f64)

/* Vector bodies of the gradient below (n_obs = 1): g_i += (u + i v) psi_j over `len` contiguous
 * pairs, and g_j += (u - i v) psi_i when gj is given; u, v = w times the tables. */
#define SCALAR_GRAD(gi, pj, u, v) { (gi)[0] += (u) * (pj)[0] - (v) * (pj)[1]; (gi)[1] += (u) * (pj)[1] + (v) * (pj)[0]; }
static void pair_grad_f32(const float *pi, const float *pj, float *gi, float *gj, const float *r, const float *m,
                          float w, int64_t len) {
    int64_t l = 0;
#ifdef __AVX2__
    const __m256 W = _mm256_set1_ps(w), ns = _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1);
    for (; l + 4 <= len; l += 4) {
        const __m256 U = _mm256_mul_ps(DUP4(r + l), W), V = m ? _mm256_mul_ps(DUP4(m + l), W) : _mm256_setzero_ps();
        const __m256 Pi = _mm256_loadu_ps(pi + 2 * l), Pj = _mm256_loadu_ps(pj + 2 * l);
        const __m256 Vs = _mm256_mul_ps(V, ns);
        _mm256_storeu_ps(gi + 2 * l, _mm256_fmadd_ps(Vs, _mm256_permute_ps(Pj, 0xB1),
                                                     _mm256_fmadd_ps(U, Pj, _mm256_loadu_ps(gi + 2 * l))));
        if (gj) _mm256_storeu_ps(gj + 2 * l, _mm256_fnmadd_ps(Vs, _mm256_permute_ps(Pi, 0xB1),
                                                              _mm256_fmadd_ps(U, Pi, _mm256_loadu_ps(gj + 2 * l))));
    }
#endif
    for (; l < len; ++l) {
        const float u = w * r[l], v = m ? w * m[l] : 0;
        SCALAR_GRAD(gi + 2 * l, pj + 2 * l, u, v)
        if (gj) SCALAR_GRAD(gj + 2 * l, pi + 2 * l, u, -v)
    }
}
static void pair_grad_f64(const double *pi, const double *pj, double *gi, double *gj, const double *r,
                          const double *m, double w, int64_t len) {
    int64_t l = 0;
#ifdef __AVX2__
    const __m256d W = _mm256_set1_pd(w), ns = _mm256_setr_pd(-1, 1, -1, 1);
    for (; l + 2 <= len; l += 2) {
        const __m256d U = _mm256_mul_pd(DUP2(r + l), W), V = m ? _mm256_mul_pd(DUP2(m + l), W) : _mm256_setzero_pd();
        const __m256d Pi = _mm256_loadu_pd(pi + 2 * l), Pj = _mm256_loadu_pd(pj + 2 * l);
        const __m256d Vs = _mm256_mul_pd(V, ns);
        _mm256_storeu_pd(gi + 2 * l, _mm256_fmadd_pd(Vs, _mm256_permute_pd(Pj, 0x5),
                                                     _mm256_fmadd_pd(U, Pj, _mm256_loadu_pd(gi + 2 * l))));
        if (gj) _mm256_storeu_pd(gj + 2 * l, _mm256_fnmadd_pd(Vs, _mm256_permute_pd(Pi, 0x5),
                                                              _mm256_fmadd_pd(U, Pi, _mm256_loadu_pd(gj + 2 * l))));
    }
#endif
    for (; l < len; ++l) {
        const double u = w * r[l], v = m ? w * m[l] : 0;
        SCALAR_GRAD(gi + 2 * l, pj + 2 * l, u, v)
        if (gj) SCALAR_GRAD(gj + 2 * l, pi + 2 * l, u, -v)
    }
}
/* Full groups: g_i += (u + i v) psi_{i ^ x} for i in [i0, i0 + len). */
static void full_grad_f32(const float *p, float *g, int64_t i0, int64_t len, int64_t x, const float *r,
                          const float *m, float w) {
    int64_t i = i0;
#ifdef __AVX2__
    if ((i0 & 3) == 0) {
        const int64_t xl = x & 3, xh = x & ~(int64_t)3;
        const __m256i lanes = _mm256_setr_epi32(2 * (0 ^ xl), 2 * (0 ^ xl) + 1, 2 * (1 ^ xl), 2 * (1 ^ xl) + 1,
                                                2 * (2 ^ xl), 2 * (2 ^ xl) + 1, 2 * (3 ^ xl), 2 * (3 ^ xl) + 1);
        const __m256 W = _mm256_set1_ps(w), ns = _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1);
        for (; i + 4 <= i0 + len; i += 4) {
            const __m256 U = _mm256_mul_ps(DUP4(r + i), W), V = m ? _mm256_mul_ps(DUP4(m + i), W) : _mm256_setzero_ps();
            const __m256 Pj = _mm256_permutevar8x32_ps(_mm256_loadu_ps(p + 2 * (i ^ xh)), lanes);
            _mm256_storeu_ps(g + 2 * i, _mm256_fmadd_ps(_mm256_mul_ps(V, ns), _mm256_permute_ps(Pj, 0xB1),
                                                        _mm256_fmadd_ps(U, Pj, _mm256_loadu_ps(g + 2 * i))));
        }
    }
#endif
    for (; i < i0 + len; ++i) {
        const float u = w * r[i], v = m ? w * m[i] : 0;
        SCALAR_GRAD(g + 2 * i, p + 2 * (i ^ x), u, v)
    }
}
static void full_grad_f64(const double *p, double *g, int64_t i0, int64_t len, int64_t x, const double *r,
                          const double *m, double w) {
    int64_t i = i0;
#ifdef __AVX2__
    if ((i0 & 1) == 0) {
        const int64_t xl = x & 1, xh = x & ~(int64_t)1;
        const __m256d W = _mm256_set1_pd(w), ns = _mm256_setr_pd(-1, 1, -1, 1);
        for (; i + 2 <= i0 + len; i += 2) {
            const __m256d U = _mm256_mul_pd(DUP2(r + i), W), V = m ? _mm256_mul_pd(DUP2(m + i), W) : _mm256_setzero_pd();
            __m256d Pj = _mm256_loadu_pd(p + 2 * (i ^ xh));
            if (xl) Pj = _mm256_permute2f128_pd(Pj, Pj, 1);
            _mm256_storeu_pd(g + 2 * i, _mm256_fmadd_pd(_mm256_mul_pd(V, ns), _mm256_permute_pd(Pj, 0x5),
                                                        _mm256_fmadd_pd(U, Pj, _mm256_loadu_pd(g + 2 * i))));
        }
    }
#endif
    for (; i < i0 + len; ++i) {
        const double u = w * r[i], v = m ? w * m[i] : 0;
        SCALAR_GRAD(g + 2 * i, p + 2 * (i ^ x), u, v)
    }
}

/* The gradient of the above for a real upstream gradient w (B, n_obs). Pair groups: with
 * u = Σ_o w[b, o] re[k, o] and v = Σ_o w[b, o] im[k, o], grad[i] += (u + i v) psi[j] and
 * grad[j] += (u - i v) psi[i]; full groups: grad[i] += 2 w (re[i] + i im[i]) psi[i ^ x]. Within one
 * group every amplitude is written once, so the groups run one after another and the (b, k) of a
 * group in parallel. */
#define DEF_EXPVAL_GRAD(NAME, T, SUF) \
void NAME(const T *restrict psi, T *restrict grad, int64_t B, int64_t n, int64_t G, \
          const int64_t *restrict xb, const int64_t *restrict pbit, const int64_t *restrict full, \
          const int64_t *restrict tre, const int64_t *restrict tim, int64_t n_obs, const T *restrict w, \
          int nthreads) { \
    const int64_t N = (int64_t)1 << n, K = N >> 1; \
    const int64_t C = K < PAIR_CHUNK ? K : PAIR_CHUNK, chunks = B * K / C; \
    _Pragma("omp parallel num_threads(nthreads) if(B * N * G >= 65536)") \
    for (int64_t g = 0; g < G; ++g) { \
        const T *restrict tr = (const T *)(intptr_t)tre[g], *restrict ti = (const T *)(intptr_t)tim[g]; \
        const int64_t x = xb[g], high = ~(((int64_t)1 << pbit[g]) - 1); \
        if (full[g] && n_obs == 1) { \
            _Pragma("omp for schedule(static)") \
            for (int64_t c = 0; c < chunks; ++c) { \
                const int64_t b = (c * C) >> (n - 1), i0 = 2 * ((c * C) & (K - 1)); \
                full_grad_##SUF(psi + 2 * b * N, grad + 2 * b * N, i0, 2 * C, x, tr, ti, 2 * w[b]); \
            } \
            continue; \
        } \
        _Pragma("omp for schedule(static)") \
        for (int64_t c = 0; c < chunks; ++c) { \
            const int64_t b = (c * C) >> (n - 1), k0 = (c * C) & (K - 1); \
            const T *p = psi + 2 * b * N, *wb = w + b * n_obs; \
            T *q = grad + 2 * b * N; \
            if (n_obs == 1) { \
                const int64_t run = ~high + 1, len = run < C ? run : C; \
                for (int64_t k1 = k0; k1 < k0 + C; k1 += len) { \
                    const int64_t i0 = k1 + (k1 & high), j0 = i0 ^ x; \
                    pair_grad_##SUF(p + 2 * i0, p + 2 * j0, q + 2 * i0, q + 2 * j0, tr + k1, ti ? ti + k1 : 0, wb[0], len); \
                } \
                continue; \
            } \
            for (int64_t k = k0; k < k0 + C; ++k) { \
                const int64_t i = k + (k & high), j = i ^ x; \
                T u = 0, v = 0; \
                for (int64_t o = 0; o < n_obs; ++o) { \
                    u += wb[o] * tr[k * n_obs + o]; \
                    if (ti) v += wb[o] * ti[k * n_obs + o]; \
                } \
                q[2 * i] += u * p[2 * j] - v * p[2 * j + 1]; q[2 * i + 1] += u * p[2 * j + 1] + v * p[2 * j]; \
                q[2 * j] += u * p[2 * i] + v * p[2 * i + 1]; q[2 * j + 1] += u * p[2 * i + 1] - v * p[2 * i]; \
            } \
        } \
    } \
}
DEF_EXPVAL_GRAD(tql_expval_grad_c64, float, f32)
DEF_EXPVAL_GRAD(tql_expval_grad_c128, double, f64)


/* Any permutation of the local basis of k wires, in blocks of W = 2^b consecutive amplitudes
 * (one 64-byte line): for every i with its low b bits and its high-wire bits (`maskH`) zero, and
 * every pattern jh of the high wires, out[i + dstoff[jh] + lane] = in[i + srcoff[jh][lane]]. The
 * offsets hold what the wires among the low b bits do (they only move amplitudes within or between
 * a few lines), so a gate on the last wires costs one pass, not one scalar gather per amplitude. */
typedef struct { int64_t re, im; } tql_pair16;
#define BLOCK_LOOP(TT, WW) \
    for (int64_t c = c0; c < c1; ++c) { \
        for (int64_t jh = 0; jh < KH; ++jh) { \
            const TT *s = (const TT *)sb + i; \
            TT *d = (TT *)db + i + dstoff[jh]; \
            const int64_t *o = srcoff + jh * WW; \
            for (int l = 0; l < WW; ++l) d[l] = s[o[l]]; \
        } \
        i = ((i | fixed) + 1) & ~fixed; \
    }
void tql_permute_blocks(const char *restrict in, char *restrict out, int64_t batch, int64_t n, int64_t b,
                        int64_t maskH, int64_t KH, const int64_t *restrict dstoff, const int64_t *restrict srcoff,
                        int64_t esize, int nthreads) {
    const int64_t N = (int64_t)1 << n, W = (int64_t)1 << b, fixed = maskH | (W - 1);
    int64_t free_bits = 0;
    for (int64_t pos = 0; pos < n; ++pos) free_bits += !((fixed >> pos) & 1);
    const int64_t outer = (int64_t)1 << free_bits, chunk = 1024, chunks = (outer + chunk - 1) / chunk;
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(batch * N >= 16384)
    for (int64_t t = 0; t < batch * chunks; ++t) {
        const int64_t bt = t / chunks, c0 = (t % chunks) * chunk;
        const int64_t c1 = c0 + chunk < outer ? c0 + chunk : outer;
        int64_t i = 0;
        for (int64_t bit = 0, pos = 0; pos < n; ++pos) {
            if ((fixed >> pos) & 1) continue;
            i |= ((c0 >> bit) & 1) << pos;
            ++bit;
        }
        const char *sb = in + bt * N * esize;
        char *db = out + bt * N * esize;
        if (esize == 8 && W == 8 && KH == 1) {
            /* every wire in the low bits (a gate on the last three wires): offsets in registers */
            int64_t o[8];
            for (int l = 0; l < 8; ++l) o[l] = srcoff[l];
            const int64_t *restrict s = (const int64_t *)sb;
            int64_t *restrict d = (int64_t *)db;
            for (int64_t c = c0; c < c1; ++c, i += 8)
                for (int l = 0; l < 8; ++l) d[i + l] = s[i + o[l]];
        }
        else if (esize == 16 && W == 4 && KH == 1) {
            int64_t o[4];
            for (int l = 0; l < 4; ++l) o[l] = srcoff[l];
            const tql_pair16 *restrict s = (const tql_pair16 *)sb;
            tql_pair16 *restrict d = (tql_pair16 *)db;
            for (int64_t c = c0; c < c1; ++c, i += 4)
                for (int l = 0; l < 4; ++l) d[i + l] = s[i + o[l]];
        }
        else if (esize == 8 && W == 8) { BLOCK_LOOP(int64_t, 8) }
        else if (esize == 16 && W == 4) { BLOCK_LOOP(tql_pair16, 4) }
        else if (esize == 8) { BLOCK_LOOP(int64_t, W) }
        else { BLOCK_LOOP(tql_pair16, W) }
    }
}
