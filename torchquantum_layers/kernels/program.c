/* Local programs: a sequence of 2 x 2 gates and permutations run on each contiguous chunk of 2^nb
 * amplitudes while it sits in cache, so a whole layered circuit costs one read and one write of
 * the state instead of one pass (or one GEMM) per gate or block; the backward sweep un-computes
 * the chunk gate by gate, the adjoint method's recipe applied inside the cache.
 *
 * code: (kind, a, b) int64 triples. kind 0: the 2 x 2 matrix of shared slot b on bit a (stride
 * 2^a); kind 2: the same with the chunk's own matrix (per sample: one set of `stride` reals per
 * 2^shift consecutive chunks); kinds 3 and 4: the same with a two-wire diagonal slot (its four
 * entries in the slot's place) on bits packed into a as (b0 << 8) | b1; kinds 5 and 6: a 2 x 2
 * matrix on bit a & 255 where the control bits a >> 8 are all set; kind 1: the monomial y[j] = d[j] x[t[j]], t = perms + a (2^nb
 * int32 entries), d = phases + 2 b (2^nb complex; none when b < 0). Matrices are (2, 2)
 * complex, interleaved (re, im). */
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "simd.h"

/* States of at least this many bytes are written with streaming stores: a write-allocating
 * store would first read every output line it misses (one more pass over memory). */
#define STREAM_BYTES ((int64_t)4 << 20)

/* acc (G00, G01, G10, G11 as re, im) += g[a] conj(p[b]) for one pair (a, b in {0, 1}) */
#define GRAM_PAIR(acc, ga, gb, pa, pb) { \
    (acc)[0] += (ga)[0] * (pa)[0] + (ga)[1] * (pa)[1]; (acc)[1] += (ga)[1] * (pa)[0] - (ga)[0] * (pa)[1]; \
    (acc)[2] += (ga)[0] * (pb)[0] + (ga)[1] * (pb)[1]; (acc)[3] += (ga)[1] * (pb)[0] - (ga)[0] * (pb)[1]; \
    (acc)[4] += (gb)[0] * (pa)[0] + (gb)[1] * (pa)[1]; (acc)[5] += (gb)[1] * (pa)[0] - (gb)[0] * (pa)[1]; \
    (acc)[6] += (gb)[0] * (pb)[0] + (gb)[1] * (pb)[1]; (acc)[7] += (gb)[1] * (pb)[0] - (gb)[0] * (pb)[1]; }

/* a 2 x 2 matrix with real entries (RY, H, their products): half the multiply-adds */
#define REAL_M(m) ((m)[1] == 0 && (m)[3] == 0 && (m)[5] == 0 && (m)[7] == 0)

/* d = m^dagger */
#define DAGGER(d, m) { (d)[0] = (m)[0]; (d)[1] = -(m)[1]; (d)[2] = (m)[4]; (d)[3] = -(m)[5]; \
                       (d)[4] = (m)[2]; (d)[5] = -(m)[3]; (d)[6] = (m)[6]; (d)[7] = -(m)[7]; }

#ifdef __AVX2__
#define LOG_LANES_f32 2
#define LOG_LANES_f64 1
/* the partner of each lane for a bit inside the register */
#define NEAR_f32(v, bit) ((bit) == 0 ? _mm256_permute_ps(v, 0x4E) : _mm256_permute2f128_ps(v, v, 1))
#define NEAR_f64(v, bit) _mm256_permute2f128_pd(v, v, 1)
/* (a, b) . (P, Q) per lane, with (re, im) of a and b broadcast and Ps, Qs the swapped P, Q */
#define VMAT(SUF, a_r, a_i, b_r, b_i, P, Ps, Q, Qs) \
    FMA_##SUF(a_r, P, FMADDSUB_##SUF(b_r, Q, FMA_##SUF(b_i, Qs, MUL_##SUF(a_i, Ps))))
#endif

#ifdef __AVX2__
/* The Gram of (U, V) = g's pair and (P, Q) = psi's pair, both after the gate, in eight vector
 * accumulators: Re g conj(p) sums every lane of g*p, Im the (odd - even) lanes of g*swap(p). */
#define GRAM_REGS(SUF) \
    VEC_##SUF s00 = ZERO_##SUF(), x00 = ZERO_##SUF(), s01 = ZERO_##SUF(), x01 = ZERO_##SUF(); \
    VEC_##SUF s10 = ZERO_##SUF(), x10 = ZERO_##SUF(), s11 = ZERO_##SUF(), x11 = ZERO_##SUF();
#define GRAM_ACCUMULATE(SUF, U, V, P, Ps, Q, Qs) \
    if (!ah) { s00 = FMA_##SUF(U, P, s00); s11 = FMA_##SUF(V, Q, s11); } \
    x00 = FMA_##SUF(U, Ps, x00); \
    s01 = FMA_##SUF(U, Q, s01); x01 = FMA_##SUF(U, Qs, x01); \
    s10 = FMA_##SUF(V, P, s10); x10 = FMA_##SUF(V, Ps, x10); \
    x11 = FMA_##SUF(V, Qs, x11);
#define GRAM_TOTALS(SUF, M) \
    const VEC_##SUF sign = SIGNS_##SUF(); \
    double M[8] = {HSUM_##SUF(s00), HSUM_##SUF(MUL_##SUF(x00, sign)), HSUM_##SUF(s01), \
                         HSUM_##SUF(MUL_##SUF(x01, sign)), HSUM_##SUF(s10), HSUM_##SUF(MUL_##SUF(x10, sign)), \
                         HSUM_##SUF(s11), HSUM_##SUF(MUL_##SUF(x11, sign))};
#endif

/* ah ("anti-Hermitian"): the slot matrices are unitary functions of real angles, U(t), so
 * dL/dt = 2 Re tr(M^dagger dU U^dagger) sees only the anti-Hermitian part of the Gram M (dU U^dagger
 * is anti-Hermitian): (M - M^dagger) / 2 needs neither Re M00 nor Re M11, 6 multiply-adds a pair
 * instead of 8. The sums without them are turned into that part here. */
#ifdef __AVX2__
static void anti_hermitian(double *M) {
    const double re = (M[2] - M[4]) / 2, im = (M[3] + M[5]) / 2;
    M[0] = 0; M[6] = 0;
    M[2] = re; M[3] = im; M[4] = -re; M[5] = im;
}
#endif

#define DEF_PROGRAM_KERNELS(SUF, T) \
/* acc += M u: the gradient of a gate from the Gram M of g and psi after it (psi before = u^dagger */ \
/* psi after, so sum g conj(psi before) = M u) */ \
static void add_product_##SUF(double *acc, const double *M, const T *u) { \
    for (int a = 0; a < 2; ++a) \
        for (int b = 0; b < 2; ++b) \
            for (int c = 0; c < 2; ++c) { \
                const double mr = M[4 * a + 2 * c], mi = M[4 * a + 2 * c + 1]; \
                const double ur = u[4 * c + 2 * b], ui = u[4 * c + 2 * b + 1]; \
                acc[4 * a + 2 * b] += mr * ur - mi * ui; \
                acc[4 * a + 2 * b + 1] += mr * ui + mi * ur; \
            } \
} \
static void gate_scalar_##SUF(T *x, int64_t len, int bit, const T *m, int64_t cmask) { \
    LOAD_M(m) \
    const int64_t s = (int64_t)1 << bit; \
    for (int64_t base = 0; base < len; base += 2 * s) \
        for (int64_t r = base; r < base + s; ++r) \
            if ((r & cmask) == cmask) PAIR(x + 2 * r, x + 2 * (r + s), x + 2 * r, x + 2 * (r + s)) \
} \
/* psi <- d psi and g <- d g (d = U^dagger: psi after the gate becomes psi before it), and */ \
/* acc += sum of g_after[a] conj(psi_before[b]): the gate matrix's gradient */ \
static void back_scalar_##SUF(T *x, T *g, int64_t len, int bit, const T *d, double *acc, int64_t cmask) { \
    LOAD_M(d) \
    const int64_t s = (int64_t)1 << bit; \
    double sum[8] = {0}; \
    for (int64_t base = 0; base < len; base += 2 * s) \
        for (int64_t r = base; r < base + s; ++r) { \
            if ((r & cmask) != cmask) continue; \
            T *pa = x + 2 * r, *pb = x + 2 * (r + s), *ga = g + 2 * r, *gb = g + 2 * (r + s); \
            PAIR(pa, pb, pa, pb) \
            GRAM_PAIR(sum, ga, gb, pa, pb) \
            PAIR(ga, gb, ga, gb) \
        } \
    for (int k = 0; k < 8; ++k) acc[k] += sum[k]; \
} \
/* acc += (sum of g[a] conj(x[c]) over the pairs) u: a gate's gradient from the states after it */ \
static void gram_scalar_##SUF(const T *x, const T *g, int64_t len, int bit, const T *u, double *acc, int64_t cmask) { \
    const int64_t s = (int64_t)1 << bit; \
    double M[8] = {0}; \
    for (int64_t base = 0; base < len; base += 2 * s) \
        for (int64_t r = base; r < base + s; ++r) \
            if ((r & cmask) == cmask) GRAM_PAIR(M, g + 2 * r, g + 2 * (r + s), x + 2 * r, x + 2 * (r + s)) \
    add_product_##SUF(acc, M, u); \
} \
VECTOR_CODE( \
static void gram_wide_##SUF(const T *x, const T *g, int64_t len, int bit, const T *u, double *acc, int64_t cmask, \
                            int ah) { \
    GRAM_REGS(SUF) \
    const int64_t s = (int64_t)1 << bit; \
    for (int64_t base = 0; base < len; base += 2 * s) \
        for (int64_t r = base; r < base + s; r += LANES_##SUF) { \
            if ((r & cmask) != cmask) continue;   /* whole registers share the control bits */ \
            const VEC_##SUF P = LOAD_##SUF(x + 2 * r), Q = LOAD_##SUF(x + 2 * (r + s)); \
            const VEC_##SUF Ps = SWAP_##SUF(P), Qs = SWAP_##SUF(Q); \
            const VEC_##SUF U = LOAD_##SUF(g + 2 * r), V = LOAD_##SUF(g + 2 * (r + s)); \
            GRAM_ACCUMULATE(SUF, U, V, P, Ps, Q, Qs) \
        } \
    GRAM_TOTALS(SUF, M) \
    if (ah) anti_hermitian(M); \
    add_product_##SUF(acc, M, u); \
} \
/* stride >= LANES: the pair members fill whole registers */ \
static void gate_wide_##SUF(T *x, int64_t len, int bit, const T *m, int64_t cmask) { \
    const VEC_##SUF ar = SET1_##SUF(m[0]), ai = SET1_##SUF(m[1]), br = SET1_##SUF(m[2]), bi = SET1_##SUF(m[3]); \
    const VEC_##SUF cr = SET1_##SUF(m[4]), ci = SET1_##SUF(m[5]), dr = SET1_##SUF(m[6]), di = SET1_##SUF(m[7]); \
    const int64_t s = (int64_t)1 << bit; \
    if (REAL_M(m)) { \
        for (int64_t base = 0; base < len; base += 2 * s) \
            for (int64_t r = base; r < base + s; r += LANES_##SUF) { \
                if ((r & cmask) != cmask) continue; \
                T *p = x + 2 * r, *q = p + 2 * s; \
                const VEC_##SUF P = LOAD_##SUF(p), Q = LOAD_##SUF(q); \
                STORE_##SUF(p, FMA_##SUF(ar, P, MUL_##SUF(br, Q))); \
                STORE_##SUF(q, FMA_##SUF(cr, P, MUL_##SUF(dr, Q))); \
            } \
        return; \
    } \
    for (int64_t base = 0; base < len; base += 2 * s) \
        for (int64_t r = base; r < base + s; r += LANES_##SUF) { \
            if ((r & cmask) != cmask) continue;   /* whole registers share the control bits */ \
            T *p = x + 2 * r, *q = p + 2 * s; \
            const VEC_##SUF P = LOAD_##SUF(p), Q = LOAD_##SUF(q), Ps = SWAP_##SUF(P), Qs = SWAP_##SUF(Q); \
            STORE_##SUF(p, VMAT(SUF, ar, ai, br, bi, P, Ps, Q, Qs)); \
            STORE_##SUF(q, VMAT(SUF, cr, ci, dr, di, P, Ps, Q, Qs)); \
        } \
} \
static void back_wide_##SUF(T *x, T *g, int64_t len, int bit, const T *d, const T *m, double *acc, int64_t cmask, \
                            int ah) { \
    const VEC_##SUF ar = SET1_##SUF(d[0]), ai = SET1_##SUF(d[1]), br = SET1_##SUF(d[2]), bi = SET1_##SUF(d[3]); \
    const VEC_##SUF cr = SET1_##SUF(d[4]), ci = SET1_##SUF(d[5]), dr = SET1_##SUF(d[6]), di = SET1_##SUF(d[7]); \
    GRAM_REGS(SUF) \
    const int64_t s = (int64_t)1 << bit; \
    const int real = REAL_M(d); \
    for (int64_t base = 0; base < len; base += 2 * s) \
        for (int64_t r = base; r < base + s; r += LANES_##SUF) { \
            if ((r & cmask) != cmask) continue;   /* whole registers share the control bits */ \
            T *p = x + 2 * r, *q = p + 2 * s, *u = g + 2 * r, *v = u + 2 * s; \
            const VEC_##SUF P = LOAD_##SUF(p), Q = LOAD_##SUF(q), Ps = SWAP_##SUF(P), Qs = SWAP_##SUF(Q); \
            const VEC_##SUF U = LOAD_##SUF(u), V = LOAD_##SUF(v); \
            GRAM_ACCUMULATE(SUF, U, V, P, Ps, Q, Qs) \
            if (real) { \
                STORE_##SUF(p, FMA_##SUF(ar, P, MUL_##SUF(br, Q))); \
                STORE_##SUF(q, FMA_##SUF(cr, P, MUL_##SUF(dr, Q))); \
                STORE_##SUF(u, FMA_##SUF(ar, U, MUL_##SUF(br, V))); \
                STORE_##SUF(v, FMA_##SUF(cr, U, MUL_##SUF(dr, V))); \
                continue; \
            } \
            const VEC_##SUF Us = SWAP_##SUF(U), Vs = SWAP_##SUF(V); \
            STORE_##SUF(p, VMAT(SUF, ar, ai, br, bi, P, Ps, Q, Qs)); \
            STORE_##SUF(q, VMAT(SUF, cr, ci, dr, di, P, Ps, Q, Qs)); \
            STORE_##SUF(u, VMAT(SUF, ar, ai, br, bi, U, Us, V, Vs)); \
            STORE_##SUF(v, VMAT(SUF, cr, ci, dr, di, U, Us, V, Vs)); \
        } \
    GRAM_TOTALS(SUF, M) \
    if (ah) anti_hermitian(M); \
    add_product_##SUF(acc, M, m); \
} \
/* a bit inside the register: lane l holds member (l >> bit) & 1 of its pair, its partner comes */ \
/* from a lane permutation; coefs (4, 2 LANES): the own and the partner's coefficient, re and im */ \
static void lane_coefs_##SUF(const T *m, int bit, T coefs[4][2 * LANES_##SUF]) { \
    for (int l = 0; l < LANES_##SUF; ++l) { \
        const int a = (l >> bit) & 1; \
        const T *own = m + (a ? 6 : 0), *other = m + (a ? 4 : 2); \
        for (int h = 0; h < 2; ++h) { \
            coefs[0][2 * l + h] = own[0]; coefs[1][2 * l + h] = own[1]; \
            coefs[2][2 * l + h] = other[0]; coefs[3][2 * l + h] = other[1]; \
        } \
    } \
} \
/* the lane accumulators of a bit inside the register -> the Gram M; acc += M u */ \
static void lane_gram_##SUF(VEC_##SUF sD, VEC_##SUF sX, VEC_##SUF pD, VEC_##SUF pX, int bit, const T *u, double *acc, \
                            int ah) { \
    T own_d[2 * LANES_##SUF], own_x[2 * LANES_##SUF], part_d[2 * LANES_##SUF], part_x[2 * LANES_##SUF]; \
    STORE_##SUF(own_d, sD); STORE_##SUF(own_x, sX); STORE_##SUF(part_d, pD); STORE_##SUF(part_x, pX); \
    double M[8] = {0}; \
    for (int l = 0; l < LANES_##SUF; ++l) { \
        const int a = (l >> bit) & 1; \
        double *self = M + 6 * a, *cross = M + (a ? 4 : 2);  /* M[a][a], M[a][1 - a] */ \
        self[0] += own_d[2 * l] + own_d[2 * l + 1]; self[1] += own_x[2 * l + 1] - own_x[2 * l]; \
        cross[0] += part_d[2 * l] + part_d[2 * l + 1]; cross[1] += part_x[2 * l + 1] - part_x[2 * l]; \
    } \
    if (ah) anti_hermitian(M); \
    add_product_##SUF(acc, M, u); \
} \
static void gram_narrow_##SUF(const T *x, const T *g, int64_t len, int bit, const T *u, double *acc, int ah) { \
    VEC_##SUF sD = ZERO_##SUF(), sX = ZERO_##SUF(), pD = ZERO_##SUF(), pX = ZERO_##SUF(); \
    for (int64_t i = 0; i < len; i += LANES_##SUF) { \
        const VEC_##SUF X = LOAD_##SUF(x + 2 * i), P = NEAR_##SUF(X, bit), G = LOAD_##SUF(g + 2 * i); \
        if (!ah) sD = FMA_##SUF(G, X, sD); \
        sX = FMA_##SUF(G, SWAP_##SUF(X), sX); \
        pD = FMA_##SUF(G, P, pD); pX = FMA_##SUF(G, SWAP_##SUF(P), pX); \
    } \
    lane_gram_##SUF(sD, sX, pD, pX, bit, u, acc, ah); \
} \
static void gate_narrow_##SUF(T *x, int64_t len, int bit, const T *m) { \
    T coefs[4][2 * LANES_##SUF]; \
    lane_coefs_##SUF(m, bit, coefs); \
    const VEC_##SUF sr = LOAD_##SUF(coefs[0]), si = LOAD_##SUF(coefs[1]); \
    const VEC_##SUF pr = LOAD_##SUF(coefs[2]), pi = LOAD_##SUF(coefs[3]); \
    if (REAL_M(m)) { \
        for (int64_t i = 0; i < len; i += LANES_##SUF) { \
            const VEC_##SUF X = LOAD_##SUF(x + 2 * i); \
            STORE_##SUF(x + 2 * i, FMA_##SUF(sr, X, MUL_##SUF(pr, NEAR_##SUF(X, bit)))); \
        } \
        return; \
    } \
    for (int64_t i = 0; i < len; i += LANES_##SUF) { \
        const VEC_##SUF X = LOAD_##SUF(x + 2 * i), P = NEAR_##SUF(X, bit); \
        STORE_##SUF(x + 2 * i, VMAT(SUF, sr, si, pr, pi, X, SWAP_##SUF(X), P, SWAP_##SUF(P))); \
    } \
} \
static void back_narrow_##SUF(T *x, T *g, int64_t len, int bit, const T *d, const T *m, double *acc, int ah) { \
    T coefs[4][2 * LANES_##SUF]; \
    lane_coefs_##SUF(d, bit, coefs); \
    const VEC_##SUF sr = LOAD_##SUF(coefs[0]), si = LOAD_##SUF(coefs[1]); \
    const VEC_##SUF pr = LOAD_##SUF(coefs[2]), pi = LOAD_##SUF(coefs[3]); \
    VEC_##SUF sD = ZERO_##SUF(), sX = ZERO_##SUF(), pD = ZERO_##SUF(), pX = ZERO_##SUF(); \
    const int real = REAL_M(d); \
    for (int64_t i = 0; i < len; i += LANES_##SUF) { \
        const VEC_##SUF X = LOAD_##SUF(x + 2 * i), P = NEAR_##SUF(X, bit), Xs = SWAP_##SUF(X), Ps = SWAP_##SUF(P); \
        const VEC_##SUF G = LOAD_##SUF(g + 2 * i), Gp = NEAR_##SUF(G, bit); \
        if (!ah) sD = FMA_##SUF(G, X, sD); \
        sX = FMA_##SUF(G, Xs, sX); \
        pD = FMA_##SUF(G, P, pD); pX = FMA_##SUF(G, Ps, pX); \
        if (real) { \
            STORE_##SUF(x + 2 * i, FMA_##SUF(sr, X, MUL_##SUF(pr, P))); \
            STORE_##SUF(g + 2 * i, FMA_##SUF(sr, G, MUL_##SUF(pr, Gp))); \
            continue; \
        } \
        STORE_##SUF(x + 2 * i, VMAT(SUF, sr, si, pr, pi, X, Xs, P, Ps)); \
        STORE_##SUF(g + 2 * i, VMAT(SUF, sr, si, pr, pi, G, SWAP_##SUF(G), Gp, SWAP_##SUF(Gp))); \
    } \
    lane_gram_##SUF(sD, sX, pD, pX, bit, m, acc, ah); \
} \
) \
/* cmask: the control bits (a controlled gate acts where all are set): the wide loops skip whole */ \
/* registers when no control bit lies inside one, the scalar loops do the rest */ \
static void gate_##SUF(T *x, int64_t len, int bit, const T *m, int64_t cmask) { \
    VECTOR_CODE( \
    if (!(cmask & (LANES_##SUF - 1)) && bit >= LOG_LANES_##SUF) { gate_wide_##SUF(x, len, bit, m, cmask); return; } \
    if (!cmask && len >= LANES_##SUF) { gate_narrow_##SUF(x, len, bit, m); return; } ) \
    gate_scalar_##SUF(x, len, bit, m, cmask); \
} \
static void back_##SUF(T *x, T *g, int64_t len, int bit, const T *d, const T *m, double *acc, int64_t cmask, int ah) { \
    (void)m; (void)ah;   /* the scalar path takes the whole Gram, of the states before the gate */ \
    VECTOR_CODE( \
    if (!(cmask & (LANES_##SUF - 1)) && bit >= LOG_LANES_##SUF) { back_wide_##SUF(x, g, len, bit, d, m, acc, cmask, ah); return; } \
    if (!cmask && len >= LANES_##SUF) { back_narrow_##SUF(x, g, len, bit, d, m, acc, ah); return; } ) \
    back_scalar_##SUF(x, g, len, bit, d, acc, cmask); \
} \
static void gram_##SUF(const T *x, const T *g, int64_t len, int bit, const T *u, double *acc, int64_t cmask, int ah) { \
    (void)ah; \
    VECTOR_CODE( \
    if (!(cmask & (LANES_##SUF - 1)) && bit >= LOG_LANES_##SUF) { gram_wide_##SUF(x, g, len, bit, u, acc, cmask, ah); return; } \
    if (!cmask && len >= LANES_##SUF) { gram_narrow_##SUF(x, g, len, bit, u, acc, ah); return; } ) \
    gram_scalar_##SUF(x, g, len, bit, u, acc, cmask); \
} \
/* y[j] = x[t[j]], times the phase d[j] when d is given (a monomial: permutations and fixed */ \
/* diagonal gates merged) */ \
static void gather_##SUF(T *restrict y, const T *restrict x, const int32_t *restrict t, const T *restrict d, \
                         int64_t len) { \
    if (!d) { \
        for (int64_t j = 0; j < len; ++j) memcpy(y + 2 * j, x + 2 * (int64_t)t[j], 2 * sizeof(T)); \
        return; \
    } \
    for (int64_t j = 0; j < len; ++j) { \
        const T *v = x + 2 * (int64_t)t[j]; \
        y[2 * j] = d[2 * j] * v[0] - d[2 * j + 1] * v[1]; \
        y[2 * j + 1] = d[2 * j] * v[1] + d[2 * j + 1] * v[0]; \
    } \
}
#define DIAG_KIND(k) ((k) == 3 || (k) == 4)
#define DIAG_INDEX(i, b0, b1) (((((i) >> (b0)) & 1) << 1) | (((i) >> (b1)) & 1))
/* Two-wire diagonal slots (RZZ, CP, CRZ, ...): bits packed as (b0 << 8) | b1, b0 the local */
/* index's high bit; d: the four diagonal entries. x[i] *= d[k(i)] (conj(d) when conj). The */
/* vector loops run over stretches where the packed bits above the register are constant (h): */
/* the entry of each lane is then fixed, and one pair of Gram accumulators per h suffices. */
#define DEF_DIAG_KERNELS(SUF, T) \
VECTOR_CODE( \
/* the stretch length and the masks of the packed bits above the register */ \
static int64_t diag_run_##SUF(int b0, int b1, int64_t len, int64_t *m0, int64_t *m1) { \
    *m0 = b0 >= LOG_LANES_##SUF ? (int64_t)1 << b0 : 0; \
    *m1 = b1 >= LOG_LANES_##SUF ? (int64_t)1 << b1 : 0; \
    if (*m0 && *m1) return *m0 < *m1 ? *m0 : *m1; \
    return (*m0 | *m1) ? (*m0 | *m1) : len; \
} \
/* the lanes' entries for each h: (re, re) and (im, im) per complex, conjugated when conj */ \
static void diag_lanes_##SUF(const T *d, int b0, int b1, int conj, T cr[4][2 * LANES_##SUF], \
                             T ci[4][2 * LANES_##SUF]) { \
    const T sgn = conj ? -1 : 1; \
    for (int h = 0; h < 4; ++h) \
        for (int l = 0; l < LANES_##SUF; ++l) { \
            const int64_t i = (((int64_t)(h >> 1) << b0) | ((int64_t)(h & 1) << b1)) & ~(int64_t)(LANES_##SUF - 1); \
            const T *c = d + 2 * DIAG_INDEX(i | l, b0, b1); \
            cr[h][2 * l] = cr[h][2 * l + 1] = c[0]; \
            ci[h][2 * l] = ci[h][2 * l + 1] = sgn * c[1]; \
        } \
} \
/* S[k] += the lane sums of h's accumulators: Re g conj(x) from g*x, Im from g*swap(x) */ \
static void diag_lane_totals_##SUF(const VEC_##SUF sD[4], const VEC_##SUF sX[4], int b0, int b1, double S[8]) { \
    for (int h = 0; h < 4; ++h) { \
        T dv[2 * LANES_##SUF], xv[2 * LANES_##SUF]; \
        STORE_##SUF(dv, sD[h]); STORE_##SUF(xv, sX[h]); \
        const int64_t i = (((int64_t)(h >> 1) << b0) | ((int64_t)(h & 1) << b1)) & ~(int64_t)(LANES_##SUF - 1); \
        for (int l = 0; l < LANES_##SUF; ++l) { \
            const int k = DIAG_INDEX(i | l, b0, b1); \
            S[2 * k] += (double)dv[2 * l] + dv[2 * l + 1]; \
            S[2 * k + 1] += (double)xv[2 * l + 1] - xv[2 * l]; \
        } \
    } \
} ) \
static void diag_##SUF(T *x, int64_t len, int64_t packed, const T *d, int conj) { \
    const int b0 = (int)(packed >> 8), b1 = (int)(packed & 255); \
    const T sgn = conj ? -1 : 1; \
    int64_t done = 0; \
    VECTOR_CODE( \
    if (len >= LANES_##SUF) { \
        T cr[4][2 * LANES_##SUF], ci[4][2 * LANES_##SUF]; \
        diag_lanes_##SUF(d, b0, b1, conj, cr, ci); \
        int64_t m0, m1; \
        const int64_t run = diag_run_##SUF(b0, b1, len, &m0, &m1); \
        for (int64_t base = 0; base < len; base += run) { \
            const int h = ((base & m0) ? 2 : 0) | ((base & m1) ? 1 : 0); \
            const VEC_##SUF R = LOAD_##SUF(cr[h]), I = LOAD_##SUF(ci[h]); \
            for (int64_t i = base; i < base + run; i += LANES_##SUF) { \
                const VEC_##SUF X = LOAD_##SUF(x + 2 * i); \
                STORE_##SUF(x + 2 * i, FMADDSUB_##SUF(R, X, MUL_##SUF(I, SWAP_##SUF(X)))); \
            } \
        } \
        done = len; \
    } ) \
    for (int64_t i = done; i < len; ++i) { \
        const T *c = d + 2 * DIAG_INDEX(i, b0, b1); \
        const T cr = c[0], ci = sgn * c[1], xr = x[2 * i], xi = x[2 * i + 1]; \
        x[2 * i] = cr * xr - ci * xi; \
        x[2 * i + 1] = cr * xi + ci * xr; \
    } \
} \
/* acc[k] += d[k] S[k], S[k] = sum over k(i) = k of g[i] conj(x[i]) (x, g after the gate) */ \
static void diag_acc_##SUF(const double S[8], const T *d, double *acc) { \
    for (int k = 0; k < 4; ++k) { \
        acc[2 * k] += S[2 * k] * d[2 * k] - S[2 * k + 1] * d[2 * k + 1]; \
        acc[2 * k + 1] += S[2 * k] * d[2 * k + 1] + S[2 * k + 1] * d[2 * k]; \
    } \
} \
static void gram_diag_##SUF(const T *x, const T *g, int64_t len, int64_t packed, const T *d, double *acc) { \
    const int b0 = (int)(packed >> 8), b1 = (int)(packed & 255); \
    double S[8] = {0}; \
    VECTOR_CODE( \
    if (len >= LANES_##SUF) { \
        int64_t m0, m1; \
        const int64_t run = diag_run_##SUF(b0, b1, len, &m0, &m1); \
        VEC_##SUF sD[4], sX[4]; \
        for (int h = 0; h < 4; ++h) sD[h] = sX[h] = ZERO_##SUF(); \
        for (int64_t base = 0; base < len; base += run) { \
            VEC_##SUF D = ZERO_##SUF(), E = ZERO_##SUF(); \
            for (int64_t i = base; i < base + run; i += LANES_##SUF) { \
                const VEC_##SUF X = LOAD_##SUF(x + 2 * i), G = LOAD_##SUF(g + 2 * i); \
                D = FMA_##SUF(G, X, D); \
                E = FMA_##SUF(G, SWAP_##SUF(X), E); \
            } \
            const int h = ((base & m0) ? 2 : 0) | ((base & m1) ? 1 : 0); \
            sD[h] = ADD_##SUF(sD[h], D); \
            sX[h] = ADD_##SUF(sX[h], E); \
        } \
        diag_lane_totals_##SUF(sD, sX, b0, b1, S); \
        diag_acc_##SUF(S, d, acc); \
        return; \
    } ) \
    for (int64_t i = 0; i < len; ++i) { \
        const int k = DIAG_INDEX(i, b0, b1); \
        S[2 * k] += g[2 * i] * x[2 * i] + g[2 * i + 1] * x[2 * i + 1]; \
        S[2 * k + 1] += g[2 * i + 1] * x[2 * i] - g[2 * i] * x[2 * i + 1]; \
    } \
    diag_acc_##SUF(S, d, acc); \
} \
/* the backward step of a diagonal slot in one sweep: its Gram from x, g after the gate, then */ \
/* both un-computed (times conj(d)) */ \
static void back_diag_##SUF(T *x, T *g, int64_t len, int64_t packed, const T *d, double *acc) { \
    VECTOR_CODE( \
    if (len >= LANES_##SUF) { \
        const int b0 = (int)(packed >> 8), b1 = (int)(packed & 255); \
        T cr[4][2 * LANES_##SUF], ci[4][2 * LANES_##SUF]; \
        diag_lanes_##SUF(d, b0, b1, 1, cr, ci); \
        int64_t m0, m1; \
        const int64_t run = diag_run_##SUF(b0, b1, len, &m0, &m1); \
        VEC_##SUF sD[4], sX[4]; \
        for (int h = 0; h < 4; ++h) sD[h] = sX[h] = ZERO_##SUF(); \
        for (int64_t base = 0; base < len; base += run) { \
            const int h = ((base & m0) ? 2 : 0) | ((base & m1) ? 1 : 0); \
            const VEC_##SUF R = LOAD_##SUF(cr[h]), I = LOAD_##SUF(ci[h]); \
            VEC_##SUF D = ZERO_##SUF(), E = ZERO_##SUF(); \
            for (int64_t i = base; i < base + run; i += LANES_##SUF) { \
                const VEC_##SUF X = LOAD_##SUF(x + 2 * i), G = LOAD_##SUF(g + 2 * i), Xs = SWAP_##SUF(X); \
                D = FMA_##SUF(G, X, D); \
                E = FMA_##SUF(G, Xs, E); \
                STORE_##SUF(x + 2 * i, FMADDSUB_##SUF(R, X, MUL_##SUF(I, Xs))); \
                STORE_##SUF(g + 2 * i, FMADDSUB_##SUF(R, G, MUL_##SUF(I, SWAP_##SUF(G)))); \
            } \
            sD[h] = ADD_##SUF(sD[h], D); \
            sX[h] = ADD_##SUF(sX[h], E); \
        } \
        double S[8] = {0}; \
        diag_lane_totals_##SUF(sD, sX, b0, b1, S); \
        diag_acc_##SUF(S, d, acc); \
        return; \
    } ) \
    gram_diag_##SUF(x, g, len, packed, d, acc); \
    diag_##SUF(x, len, packed, d, 1); \
    diag_##SUF(g, len, packed, d, 1); \
} \
/* one slot op: kinds 0 / 2 a 2 x 2 matrix on bit a; 3 / 4 a diagonal on packed bits a; 5 / 6 a */ \
/* controlled 2 x 2 matrix, a = (control mask << 8) | target bit */ \
static void apply_op_##SUF(T *x, int64_t len, const int64_t *op, const T *m) { \
    if (DIAG_KIND(op[0])) diag_##SUF(x, len, op[1], m, 0); \
    else gate_##SUF(x, len, (int)(op[1] & 255), m, op[1] >> 8); \
} \
static void undo_op_##SUF(T *x, int64_t len, const int64_t *op, const T *m) { \
    if (DIAG_KIND(op[0])) { diag_##SUF(x, len, op[1], m, 1); return; } \
    T d[8]; \
    DAGGER(d, m) \
    gate_##SUF(x, len, (int)(op[1] & 255), d, op[1] >> 8); \
} \
static void gram_op_##SUF(const T *x, const T *g, int64_t len, const int64_t *op, const T *m, double *acc, int ah) { \
    if (DIAG_KIND(op[0])) gram_diag_##SUF(x, g, len, op[1], m, acc); \
    else gram_##SUF(x, g, len, (int)(op[1] & 255), m, acc, op[1] >> 8, ah); \
} \
static void back_op_##SUF(T *x, T *g, int64_t len, const int64_t *op, const T *m, double *acc, int ah) { \
    if (DIAG_KIND(op[0])) { back_diag_##SUF(x, g, len, op[1], m, acc); return; } \
    T d[8]; \
    DAGGER(d, m) \
    back_##SUF(x, g, len, (int)(op[1] & 255), d, m, acc, op[1] >> 8, ah); \
}
/* slot kinds 0, 3 and 5 read the shared matrices, 2, 4 and 6 the sample's own */
#define SHARED_KIND(k) ((k) == 0 || (k) == 3 || (k) == 5)
#define T float
DEF_PROGRAM_KERNELS(f32, float)
DEF_DIAG_KERNELS(f32, float)
#undef T
#define T double
DEF_PROGRAM_KERNELS(f64, double)
DEF_DIAG_KERNELS(f64, double)
#undef T

/* One 2 x 2 gate on index bit `bit` of len amplitudes, out of place, with the programs' vector
 * bodies: pairs of whole registers for bits above the register, lane permutations inside it;
 * threads split the pairs. Outputs of TQL_STREAM_BYTES and more are written with streaming stores
 * (simd.h), except in the short interleaved runs of the middle bits; an earlier try that streamed
 * every output made it 5 x slower for high bits at 2^20 complex64 amplitudes, an output L3 would
 * have held (2^22-2^24: 1.1-1.3 -> 0.7-0.9 clones for the mean over wires). The matrix is shared
 * when per == 0, else matrix b (m + 8 b) acts on amplitudes [b per, (b + 1) per): one per sample,
 * the samples split among threads when there are enough of them. `cmask` (index bits, 0: none)
 * makes it a controlled gate: amplitudes whose index lacks any of those bits are copied; the bits inside a register
 * give its lanes the identity's coefficients, those above it pick copy or gate per register.
 * Without AVX2, or where a register would hold amplitudes of two samples or run past the end (tiny
 * states), a controlled gate is a copy and the programs' scalar loop; an uncontrolled one returns
 * 0 (nothing done) for the caller's portable kernel.
 * A step of the pair loop is one cache line of each half; for runs of up to 4 KiB, which
 * alternate between the halves, the lines two blocks on are prefetched, the output's for writing
 * (0.5-4 KiB runs took 1.6-1.9 clones without at 2^20 complex64: the hardware prefetcher loses
 * the interleaved streams; it follows longer runs, where prefetches only cost). */
#define GATE_PAIR_STEP(SUF, CTRL) { \
    const int64_t r = ((p >> bit) << (bit + 1)) | (p & (s - 1)); \
    if (prefetch) { \
        __builtin_prefetch(in + 2 * (r + ahead), 0, 3); __builtin_prefetch(in + 2 * (r + s + ahead), 0, 3); \
        __builtin_prefetch(out + 2 * (r + ahead), 1, 3); __builtin_prefetch(out + 2 * (r + s + ahead), 1, 3); \
    } \
    for (int64_t h = r; h < r + step; h += LANES_##SUF) { \
        const VEC_##SUF P = LOAD_##SUF(in + 2 * h), Q = LOAD_##SUF(in + 2 * (h + s)); \
        if (CTRL && (h & high) != high) { PUT_##SUF(pair_stream, out + 2 * h, P); PUT_##SUF(pair_stream, out + 2 * (h + s), Q); continue; } \
        VEC_##SUF y0, y1; \
        if (real) { \
            y0 = FMA_##SUF(ar, P, MUL_##SUF(br, Q)); y1 = FMA_##SUF(cr, P, MUL_##SUF(dr, Q)); \
        } else { \
            const VEC_##SUF Ps = SWAP_##SUF(P), Qs = SWAP_##SUF(Q); \
            y0 = VMAT(SUF, ar, ai, br, bi, P, Ps, Q, Qs); y1 = VMAT(SUF, cr, ci, dr, di, P, Ps, Q, Qs); \
        } \
        PUT_##SUF(pair_stream, out + 2 * h, y0); \
        PUT_##SUF(pair_stream, out + 2 * (h + s), y1); \
    } }
#define GATE_LANE_STEP(SUF, CTRL) { \
    const VEC_##SUF X = LOAD_##SUF(in + 2 * i), P = NEAR_##SUF(X, bit); \
    PUT_##SUF(stream, out + 2 * i, CTRL && (i & high) != high ? X \
                             : real ? FMA_##SUF(sr, X, MUL_##SUF(pr, P)) \
                                    : VMAT(SUF, sr, si, pr, pi, X, SWAP_##SUF(X), P, SWAP_##SUF(P))); }
#define DEF_GATE(NAME, T, SUF) \
/* lane l of a register gets m's entry when its index has the control bits `low`, else the */ \
/* identity's: coefs[k] (2 LANES) holds entry k / 2's re (k even) or im in both halves of a lane */ \
VECTOR_CODE( \
static inline void NAME##_entries(const T *m, int64_t low, T coefs[8][2 * LANES_##SUF]) { \
    static const T eye[8] = {1, 0, 0, 0, 0, 0, 1, 0}; \
    for (int l = 0; l < LANES_##SUF; ++l) \
        for (int k = 0; k < 8; ++k) coefs[k][2 * l] = coefs[k][2 * l + 1] = ((l & low) == low ? m : eye)[k]; \
} ) \
static inline void NAME##_span(const T *restrict in, T *restrict out, int64_t len, int64_t bit, const T *restrict m, \
                               int64_t cmask, int nthreads) { \
    VECTOR_CODE( \
    const int real = REAL_M(m), parallel = nthreads > 1 && len >= 32768; \
    const int stream = stream_output(out, 2 * len * (int64_t)sizeof(T)); \
    const int64_t low = cmask & (LANES_##SUF - 1), high = cmask & ~(int64_t)(LANES_##SUF - 1); \
    if (bit >= LOG_LANES_##SUF) { \
        T e[8][2 * LANES_##SUF]; \
        NAME##_entries(m, low, e); \
        const VEC_##SUF ar = LOAD_##SUF(e[0]), ai = LOAD_##SUF(e[1]), br = LOAD_##SUF(e[2]), bi = LOAD_##SUF(e[3]); \
        const VEC_##SUF cr = LOAD_##SUF(e[4]), ci = LOAD_##SUF(e[5]), dr = LOAD_##SUF(e[6]), di = LOAD_##SUF(e[7]); \
        const int64_t s = (int64_t)1 << bit, step = bit > LOG_LANES_##SUF ? 2 * LANES_##SUF : LANES_##SUF; \
        /* 8 KiB runs too in states of 16 MiB not streamed, which in and out fill L3 with: wire 10 \
         * at 2^20 complex128 / 2^21 complex64, 1.45-1.75 -> 1.3-1.5 clones (no gain at 8 MiB) */ \
        const int long_runs = !stream && 2 * len * (int64_t)sizeof(T) >= ((int64_t)16 << 20); \
        const int prefetch = s * (int64_t)sizeof(T) <= (long_runs ? 4096 : 2048); \
        /* the short interleaved runs (prefetched) lost with streaming stores: 1.0-1.1 -> 1.05-1.2 clones */ \
        const int pair_stream = stream && !prefetch; \
        const int64_t ahead = 4 * s; \
        if (high) GATE_LOOP(p, len / 2, step, GATE_PAIR_STEP(SUF, 1)) \
        else GATE_LOOP(p, len / 2, step, GATE_PAIR_STEP(SUF, 0)) \
    } else { \
        T coefs[4][2 * LANES_##SUF]; \
        lane_coefs_##SUF(m, (int)bit, coefs); \
        for (int l = 0; l < LANES_##SUF; ++l) \
            if ((l & low) != low) \
                for (int h = 0; h < 2; ++h) { coefs[0][2 * l + h] = 1; coefs[1][2 * l + h] = coefs[2][2 * l + h] = coefs[3][2 * l + h] = 0; } \
        const VEC_##SUF sr = LOAD_##SUF(coefs[0]), si = LOAD_##SUF(coefs[1]); \
        const VEC_##SUF pr = LOAD_##SUF(coefs[2]), pi = LOAD_##SUF(coefs[3]); \
        if (high) GATE_LOOP(i, len, LANES_##SUF, GATE_LANE_STEP(SUF, 1)) \
        else GATE_LOOP(i, len, LANES_##SUF, GATE_LANE_STEP(SUF, 0)) \
    } \
    if (stream) end_streams(); \
    ) \
    (void)in; (void)out; (void)len; (void)bit; (void)m; (void)cmask; (void)nthreads; \
} \
int NAME(const T *restrict in, T *restrict out, int64_t len, int64_t bit, const T *restrict m, int64_t per, \
         int64_t cmask, int nthreads) { \
    VECTOR_CODE( \
    if (!(per ? per < LANES_##SUF : len % LANES_##SUF)) {   /* else registers would straddle samples or the end */ \
        if (!per) { NAME##_span(in, out, len, bit, m, cmask, nthreads); return 1; } \
        FOR_SAMPLES(NAME##_span(in + 2 * per * b, out + 2 * per * b, per, bit, m + 8 * b, cmask, nt)) \
        return 1; \
    } ) \
    (void)nthreads; \
    if (!cmask) return 0; \
    /* controlled, without the vector bodies: a copy, then the scalar gate in place where the controls are set */ \
    memcpy(out, in, 2 * (size_t)len * sizeof(T)); \
    if (!per) gate_scalar_##SUF(out, len, (int)bit, m, cmask); \
    else for (int64_t b = 0; b < len / per; ++b) gate_scalar_##SUF(out + 2 * per * b, per, (int)bit, m + 8 * b, cmask); \
    return 1; \
}
DEF_GATE(tql_gate_2x2_c64, float, f32)
DEF_GATE(tql_gate_2x2_c128, double, f64)

/* One 4 x 4 gate on index bits hi > lo, out of place: each quad (the four amplitudes that differ
 * in those bits; local index 2 b_hi + b_lo) becomes M times itself. m: (4, 4) complex, row-major,
 * interleaved; one per sample (m + 32 b on amplitudes [b per, (b + 1) per)) when per > 0. With AVX2:
 * lo above the register bits, four whole registers per step (one per member of the quad, the
 * matrix entries broadcast); lo inside a register and hi above it, two registers and their
 * lane-partner permutations, each lane with its own entries; both inside (complex64, the last two
 * wires), one register per quad and its three lane permutations. Without AVX2, or for spans
 * shorter than a register, a plain loop over quads. Threads split the quads, or the samples when
 * there are enough. (A dense two-wire gate went through an einsum or a transpose of every axis:
 * 5-47 clones at 2^20 amplitudes.) */
#define QUAD_BASE(q, lo, hi) insert_zero(insert_zero((q), (lo)), (hi))
#define QUAD_SCALAR(T) { \
    const int64_t r = QUAD_BASE(q, lo, hi); \
    const int64_t at[4] = {r, r + slo, r + shi, r + shi + slo}; \
    T xr[4], xi[4]; \
    for (int j = 0; j < 4; ++j) { xr[j] = in[2 * at[j]]; xi[j] = in[2 * at[j] + 1]; } \
    for (int i = 0; i < 4; ++i) { \
        T yr = 0, yi = 0; \
        for (int j = 0; j < 4; ++j) { \
            const T ar = m[8 * i + 2 * j], ai = m[8 * i + 2 * j + 1]; \
            yr += ar * xr[j] - ai * xi[j]; yi += ar * xi[j] + ai * xr[j]; \
        } \
        out[2 * at[i]] = yr; out[2 * at[i] + 1] = yi; \
    } }
#define QUAD_VECTOR(SUF) { \
    const int64_t r = QUAD_BASE(q, lo, hi); \
    if (prefetch && !(q & line_mask)) { \
        const int64_t f = r + ahead; \
        __builtin_prefetch(in + 2 * f, 0, 3); __builtin_prefetch(in + 2 * (f + slo), 0, 3); \
        __builtin_prefetch(in + 2 * (f + shi), 0, 3); __builtin_prefetch(in + 2 * (f + shi + slo), 0, 3); \
        __builtin_prefetch(out + 2 * f, 1, 3); __builtin_prefetch(out + 2 * (f + slo), 1, 3); \
        __builtin_prefetch(out + 2 * (f + shi), 1, 3); __builtin_prefetch(out + 2 * (f + shi + slo), 1, 3); \
    } \
    const VEC_##SUF X0 = LOAD_##SUF(in + 2 * r), X1 = LOAD_##SUF(in + 2 * (r + slo)); \
    const VEC_##SUF X2 = LOAD_##SUF(in + 2 * (r + shi)), X3 = LOAD_##SUF(in + 2 * (r + shi + slo)); \
    const VEC_##SUF S0 = SWAP_##SUF(X0), S1 = SWAP_##SUF(X1), S2 = SWAP_##SUF(X2), S3 = SWAP_##SUF(X3); \
    const int64_t at[4] = {r, r + slo, r + shi, r + shi + slo}; \
    for (int i = 0; i < 4; ++i) { \
        const VEC_##SUF *e = E + 8 * i; \
        VEC_##SUF im = MUL_##SUF(e[1], S0); \
        im = FMA_##SUF(e[3], S1, im); im = FMA_##SUF(e[5], S2, im); im = FMA_##SUF(e[7], S3, im); \
        VEC_##SUF re = MUL_##SUF(e[2], X1); \
        re = FMA_##SUF(e[4], X2, re); re = FMA_##SUF(e[6], X3, re); \
        PUT_##SUF(stream, out + 2 * at[i], ADD_##SUF(FMADDSUB_##SUF(e[0], X0, im), re)); \
    } }
/* sum over terms t of coefficient (lane-varying re, im) times V_t, as addsub(sum re V, sum im swap V) */
#define LANE_TERM(SUF, R, I, CR, CI, V) R = FMA_##SUF(CR, V, R); I = FMA_##SUF(CI, SWAP_##SUF(V), I);
#define QUAD_HALF_LANES(SUF) { \
    const int64_t r = insert_zero(p, hi); \
    const VEC_##SUF X = LOAD_##SUF(in + 2 * r), Y = LOAD_##SUF(in + 2 * (r + shi)); \
    const VEC_##SUF V[4] = {X, NEAR_##SUF(X, lo), Y, NEAR_##SUF(Y, lo)}; \
    for (int h = 0; h < 2; ++h) { \
        VEC_##SUF re = ZERO_##SUF(), im = ZERO_##SUF(); \
        for (int t = 0; t < 4; ++t) { LANE_TERM(SUF, re, im, C[h][t][0], C[h][t][1], V[t]) } \
        STORE_##SUF(out + 2 * (r + h * shi), ADDSUB_##SUF(re, im)); \
    } }
#define QUAD_IN_LANES(SUF) { \
    const VEC_##SUF X = LOAD_##SUF(in + 2 * i), X1 = NEAR_##SUF(X, 0); \
    const VEC_##SUF V[4] = {X, X1, NEAR_##SUF(X, 1), NEAR_##SUF(X1, 1)}; \
    VEC_##SUF re = ZERO_##SUF(), im = ZERO_##SUF(); \
    for (int t = 0; t < 4; ++t) { LANE_TERM(SUF, re, im, C[0][t][0], C[0][t][1], V[t]) } \
    STORE_##SUF(out + 2 * i, ADDSUB_##SUF(re, im)); }
#define DEF_GATE4(NAME, T, SUF) \
/* C[h][t]: (re, im) per lane of term t of output half h: lo inside the register, hi above it (terms: */ \
/* own X, partner X, own Y, partner Y; X the hi = 0 register) or both inside (h = 0; terms: lane l ^ t) */ \
VECTOR_CODE( \
static void NAME##_lane_entries(const T *m, int64_t hi, int64_t lo, VEC_##SUF C[2][4][2]) { \
    T c[2 * LANES_##SUF]; \
    for (int h = 0; h < 2; ++h) \
        for (int t = 0; t < 4; ++t) \
            for (int part = 0; part < 2; ++part) { \
                for (int l = 0; l < LANES_##SUF; ++l) { \
                    int row, col; \
                    if (hi >= LOG_LANES_##SUF) { \
                        const int a = (l >> lo) & 1; \
                        row = 2 * h + a; col = (t >> 1) * 2 + (a ^ (t & 1)); \
                    } else { \
                        row = l; col = l ^ t; \
                    } \
                    c[2 * l] = c[2 * l + 1] = m[8 * row + 2 * col + part]; \
                } \
                C[h][t][part] = LOAD_##SUF(c); \
            } \
} ) \
static void NAME##_span(const T *restrict in, T *restrict out, int64_t len, int64_t hi, int64_t lo, const T *restrict m, \
                        int nthreads) { \
    const int64_t slo = (int64_t)1 << lo, shi = (int64_t)1 << hi, quads = len / 4; \
    const int parallel = nthreads > 1 && len >= 32768; \
    VECTOR_CODE( \
    if (lo >= LOG_LANES_##SUF) { \
        VEC_##SUF E[32]; \
        for (int k = 0; k < 32; ++k) E[k] = SET1_##SUF(m[k]); \
        /* runs of up to 4 KiB: the lines two lo-blocks on prefetched, once per line (as the 2 x 2 kernel) */ \
        const int prefetch = slo * (int64_t)sizeof(T) <= 2048; \
        /* streaming stores as the 2 x 2 kernel's: large outputs, not the short prefetched runs */ \
        const int stream = !prefetch && stream_output(out, 2 * len * (int64_t)sizeof(T)); \
        const int64_t ahead = 4 * slo, line_mask = 64 / (2 * (int64_t)sizeof(T)) - 1; \
        GATE_LOOP(q, quads, LANES_##SUF, QUAD_VECTOR(SUF)) \
        if (stream) end_streams(); \
        return; \
    } \
    if (len >= LANES_##SUF) { \
        VEC_##SUF C[2][4][2]; \
        NAME##_lane_entries(m, hi, lo, C); \
        if (hi >= LOG_LANES_##SUF) GATE_LOOP(p, len / 2, LANES_##SUF, QUAD_HALF_LANES(SUF)) \
        else GATE_LOOP(i, len, LANES_##SUF, QUAD_IN_LANES(SUF)) \
        return; \
    } ) \
    GATE_LOOP(q, quads, 1, QUAD_SCALAR(T)) \
} \
void NAME(const T *restrict in, T *restrict out, int64_t len, int64_t hi, int64_t lo, const T *restrict m, int64_t per, \
          int nthreads) { \
    if (!per) { NAME##_span(in, out, len, hi, lo, m, nthreads); return; } \
    FOR_SAMPLES(NAME##_span(in + 2 * per * b, out + 2 * per * b, per, hi, lo, m + 32 * b, nt)) \
}
DEF_GATE4(tql_gate_4x4_c64, float, f32)
DEF_GATE4(tql_gate_4x4_c128, double, f64)

/* the first op whose slot gradient is asked for (n_code when none): the sweeps stop there */
static int64_t first_gram_op(const int64_t *code, int64_t n_code, int shared, int own) {
    for (int64_t k = 0; k < n_code; ++k)
        if (code[3 * k] != 1 && (SHARED_KIND(code[3 * k]) ? shared : own)) return k;
    return n_code;
}

/* Tiles: a program acts on nb of the state's n_total index bits, the ascending physical bit
 * positions active[0..nb); chunk c is row c / n_tiles, tile c % n_tiles of it (one value of the
 * other bits), and local index j of the chunk sits at physical offset deposit(j, active) there.
 * The active bits 0..L-1 (the lowest, when present) make runs of 2^L contiguous amplitudes:
 * a tile is n_seg such runs, gathered into a cache-resident row and scattered back. A program on
 * all bits is one tile per row, one run. */
typedef struct {
    int64_t row_len, seg_len, n_seg, n_tiles;
    int64_t *seg_off, *tile_base;     /* amplitude offsets of a tile's runs, and of each tile in its row */
    int stream;   /* the state is large enough for streaming stores (STREAM_BYTES) */
    int runs;     /* chunks go through a row of their own: several runs, or a streamed output */
} tiles_t;

static int64_t deposit(int64_t v, const int64_t *bits, int64_t n_bits) {
    int64_t out = 0;
    for (int64_t i = 0; i < n_bits; ++i)
        if (v >> i & 1) out |= (int64_t)1 << bits[i];
    return out;
}

static void tiles_init(tiles_t *tl, int64_t n_total, int64_t nb, const int64_t *active, int64_t chunks,
                       size_t elem) {
    int64_t low = 0, inactive[64], n_in = 0;
    while (low < nb && active[low] == low) ++low;
    for (int64_t b = 0, i = 0; b < n_total; ++b) {
        if (i < nb && active[i] == b) ++i;
        else inactive[n_in++] = b;
    }
    tl->row_len = (int64_t)1 << n_total;
    tl->seg_len = (int64_t)1 << low;
    tl->n_seg = (int64_t)1 << (nb - low);
    tl->n_tiles = (int64_t)1 << n_in;
    tl->seg_off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(tl->n_seg + tl->n_tiles));
    tl->tile_base = tl->seg_off + tl->n_seg;
    for (int64_t g = 0; g < tl->n_seg; ++g) tl->seg_off[g] = deposit(g, active + low, nb - low);
    for (int64_t t = 0; t < tl->n_tiles; ++t) tl->tile_base[t] = deposit(t, inactive, n_in);
    tl->stream = chunks * ((int64_t)1 << nb) * (int64_t)elem >= STREAM_BYTES;
    tl->runs = tl->n_seg > 1 || tl->stream;
}

/* the amplitude offset of chunk c in a state */
static int64_t tile_offset(const tiles_t *tl, int64_t c) {
    return (c / tl->n_tiles) * tl->row_len + tl->tile_base[c % tl->n_tiles];
}

/* dst <- src (bytes), bypassing the cache when stream and dst is 32-byte aligned */
static void copy_out(void *dst, const void *src, size_t bytes, int stream) {
    (void)stream;
#ifdef __AVX2__
    if (stream && !((uintptr_t)dst & 31) && !(bytes & 31)) {
        for (size_t i = 0; i < bytes; i += 32)
            _mm256_stream_ps((float *)((char *)dst + i), _mm256_loadu_ps((const float *)((const char *)src + i)));
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

/* row <- the tile at src (load), or the tile at dst <- row (store); elem: bytes per amplitude */
static void tile_load(void *row, const void *src, const tiles_t *tl, size_t elem) {
    const size_t run = elem * (size_t)tl->seg_len;
    for (int64_t g = 0; g < tl->n_seg; ++g)
        memcpy((char *)row + run * (size_t)g, (const char *)src + elem * (size_t)tl->seg_off[g], run);
}

static void tile_store(void *dst, const void *row, const tiles_t *tl, size_t elem, int stream) {
    const size_t run = elem * (size_t)tl->seg_len;
    for (int64_t g = 0; g < tl->n_seg; ++g)
        copy_out((char *)dst + elem * (size_t)tl->seg_off[g], (const char *)row + run * (size_t)g, run, stream);
}

/* one thread's shared-slot sums into the total, and its buffer freed. Every thread of the team
 * calls it (gram is NULL on all or none): the threads add in the order of their numbers, so
 * that with the static schedule's fixed chunks a result does not depend on the threads' timing
 * (a critical section added them in arrival order: gradients differed between identical calls) */
static void add_thread_grams(double *gram, double *acc, int64_t n_slots) {
    if (!gram) { free(acc); return; }
#ifdef _OPENMP
    const int team = omp_get_num_threads(), me = omp_get_thread_num();
    for (int t = 0; t < team; ++t) {
        #pragma omp barrier
        if (t == me && acc)
            for (int64_t k = 0; k < 8 * n_slots; ++k) gram[k] += acc[k];
    }
#else
    if (acc)
        for (int64_t k = 0; k < 8 * n_slots; ++k) gram[k] += acc[k];
#endif
    free(acc);
}

/* the end of a kernel's parallel region, on each thread: its streaming stores done, its shared
 * slots' sums (if any) added into gram, its scratch row freed */
static void end_thread(void *scratch, double *gram, double *acc, int64_t n_slots) {
    end_streams();
    add_thread_grams(gram, acc, n_slots);
    free(scratch);
}

/* out = the program applied to every chunk (tile) of in; in holds in_rows rows, repeated (a state
 * of one sample broadcast over per-sample matrices is read in place, not copied B times).
 * out may be in itself (in_rows then the rows of out): each chunk is read whole before any of it
 * is written, and chunks are disjoint (hence no restrict on the two).
 * ckpt (optional): the state after op k is kept in checkpoint save[k] (>= 0), laid out as
 * (checkpoints, chunks, 2^nb), for the checkpointed backward below. */
#define DEF_PROGRAM(NAME, T, SUF) \
void NAME(const T *in, int64_t in_rows, T *out, int64_t chunks, int64_t nb, int64_t n_total, \
          const int64_t *restrict active, int64_t n_code, \
          const int64_t *restrict code, const T *restrict shared, const T *restrict batched, int64_t stride, \
          int64_t shift, const int32_t *restrict perms, const T *restrict phases, T *restrict ckpt, \
          const int64_t *restrict save, int nthreads) { \
    const int64_t len = (int64_t)1 << nb; \
    tiles_t tl; \
    tiles_init(&tl, n_total, nb, active, chunks, 2 * sizeof(T)); \
    const int stream = tl.stream, runs = tl.runs; \
    _Pragma("omp parallel num_threads(nthreads) if(chunks > 1 && chunks * len >= 8192)") \
    { \
        T *scratch = (T *)malloc(4 * len * sizeof(T)); \
        _Pragma("omp for schedule(static)") \
        for (int64_t c = 0; c < chunks; ++c) { \
            const int64_t at = tile_offset(&tl, c); \
            const int64_t row = c / tl.n_tiles, src = (row % in_rows) * tl.row_len + (at - row * tl.row_len); \
            T *home = runs ? scratch + 2 * len : out + 2 * at, *cur = home, *spare = scratch; \
            if (cur != in + 2 * src) tile_load(cur, in + 2 * src, &tl, 2 * sizeof(T)); \
            const T *own = batched + (c >> shift) * stride; \
            for (int64_t k = 0; k < n_code; ++k) { \
                const int64_t *op = code + 3 * k; \
                if (op[0] == 1) { \
                    gather_##SUF(spare, cur, perms + op[1], op[2] < 0 ? NULL : phases + 2 * op[2], len); \
                    T *t = cur; cur = spare; spare = t; \
                } else { \
                    apply_op_##SUF(cur, len, op, (SHARED_KIND(op[0]) ? shared : own) + 8 * op[2]); \
                } \
                if (ckpt && save[k] >= 0) memcpy(ckpt + 2 * len * (save[k] * chunks + c), cur, 2 * len * sizeof(T)); \
            } \
            if (runs) tile_store(out + 2 * at, cur, &tl, 2 * sizeof(T), stream); \
            else if (cur != home) memcpy(home, cur, 2 * len * sizeof(T)); \
        } \
        end_thread(scratch, NULL, NULL, 0); \
    } \
    free(tl.seg_off); \
}
DEF_PROGRAM(tql_program_c64, float, f32)
DEF_PROGRAM(tql_program_c128, double, f64)

/* The reverse sweep of one chunk: psi_home and g_home, psi after the program and the gradient
 * there, are un-computed op by op (to what they were before the program), and each
 * gate's sum of g_after conj(psi_before) is added to its slot's 8 doubles in acc_shared or
 * acc_own. inv: the inverse tables. */
/* A group of commuting gates, ops first..k: every Gram asked for, from psi and g at the group's
 * end; and x un-computed through the group. */
#define DEF_GROUP_KERNELS(SUF, T) \
static void group_grams_##SUF(const T *psi, const T *g, int64_t len, const int64_t *code, int64_t first, int64_t k, \
                              const T *shared, const T *own, double *acc_shared, double *acc_own, int ah) { \
    for (int64_t j = k; j >= first; --j) { \
        const int64_t *o = code + 3 * j; \
        double *a = SHARED_KIND(o[0]) ? acc_shared : acc_own; \
        if (a) gram_op_##SUF(psi, g, len, o, (SHARED_KIND(o[0]) ? shared : own) + 8 * o[2], a + 8 * o[2], ah); \
    } \
} \
static void undo_group_##SUF(T *x, int64_t len, const int64_t *code, int64_t first, int64_t k, const T *shared, \
                             const T *own) { \
    for (int64_t j = k; j >= first; --j) { \
        const int64_t *o = code + 3 * j; \
        undo_op_##SUF(x, len, o, (SHARED_KIND(o[0]) ? shared : own) + 8 * o[2]); \
    } \
}
DEF_GROUP_KERNELS(f32, float)
DEF_GROUP_KERNELS(f64, double)

#define DEF_BACK_CHUNK(SUF, T) \
static void back_chunk_##SUF(T *psi_home, T *g_home, T *spare_p, T *spare_g, \
                             int64_t len, int64_t n_code, const int64_t *code, const T *shared, const T *own, \
                             const int32_t *inv, const T *inv_phases, double *acc_shared, double *acc_own, int64_t stop, \
                             int64_t psi_from, const int64_t *group, int64_t first_gram, int below, int ah) { \
    T *cp = psi_home, *cg = g_home; \
    for (int64_t k = n_code - 1; k >= stop; --k) { \
        const int64_t *op = code + 3 * k; \
        const int keep_psi = k > psi_from;   /* psi before op k is still needed */ \
        if (op[0] != 1 && group[k] <= first_gram && first_gram <= k) { \
            /* the group of the first gate with a gradient: its gates commute, so every Gram comes */ \
            /* from the states at the group's end, and nothing below needs psi or (unless asked) g */ \
            group_grams_##SUF(cp, cg, len, code, group[k], k, shared, own, acc_shared, acc_own, ah); \
            if (!below) break; \
            if (psi_from < 0) undo_group_##SUF(cp, len, code, group[k], k, shared, own); \
            undo_group_##SUF(cg, len, code, group[k], k, shared, own); \
            k = group[k]; \
            continue; \
        } \
        if (op[0] == 1) { \
            if (keep_psi) { \
                gather_##SUF(spare_p, cp, inv + op[1], op[2] < 0 ? NULL : inv_phases + 2 * op[2], len); \
                T *t = cp; cp = spare_p; spare_p = t; \
            } \
            gather_##SUF(spare_g, cg, inv + op[1], op[2] < 0 ? NULL : inv_phases + 2 * op[2], len); \
            T *t = cg; cg = spare_g; spare_g = t; \
        } else { \
            const T *m = (SHARED_KIND(op[0]) ? shared : own) + 8 * op[2]; \
            double *acc = SHARED_KIND(op[0]) ? acc_shared : acc_own; \
            if (acc) { \
                back_op_##SUF(cp, cg, len, op, m, acc + 8 * op[2], ah); \
            } else { \
                if (keep_psi) undo_op_##SUF(cp, len, op, m); \
                undo_op_##SUF(cg, len, op, m); \
            } \
        } \
    } \
    if (cp != psi_home) memcpy(psi_home, cp, 2 * len * sizeof(T)); \
    if (cg != g_home) memcpy(g_home, cg, 2 * len * sizeof(T)); \
}
DEF_BACK_CHUNK(f32, float)
DEF_BACK_CHUNK(f64, double)

/* psi_in and g_in: psi and g before the program, each only where asked (non-NULL); gram_shared:
 * (G, 2, 2) complex doubles summed over all chunks; gram_own: (S, Gb, 2, 2), one set per sample
 * (2^shift chunks; each sample's chunks run on one thread, so no two threads add to one set);
 * either NULL when not asked. The sweep stops where nothing before is asked for, and stops
 * un-computing psi after the first gate whose Gram is asked for. */
#define DEF_PROGRAM_GRAD(NAME, T, SUF) \
void NAME(const T *restrict psi, const T *restrict g, T *restrict psi_in, T *restrict g_in, int64_t chunks, \
          int64_t nb, int64_t n_total, const int64_t *restrict active, int64_t n_code, \
          const int64_t *restrict code, const T *restrict shared, \
          const T *restrict batched, int64_t stride, int64_t shift, const int32_t *restrict inv, \
          const T *restrict inv_phases, const int64_t *restrict group, int64_t n_shared, double *restrict gram_shared, \
          int64_t n_own, double *restrict gram_own, int ah, int nthreads) { \
    const int64_t len = (int64_t)1 << nb, per = (int64_t)1 << shift; \
    const int64_t first_gram = first_gram_op(code, n_code, gram_shared != NULL, gram_own != NULL); \
    const int64_t psi_from = psi_in ? -1 : first_gram; \
    const int64_t stop = (psi_in || g_in) ? 0 : first_gram; \
    tiles_t tl; \
    tiles_init(&tl, n_total, nb, active, chunks, 2 * sizeof(T)); \
    const int stream = tl.stream, runs = tl.runs; \
    _Pragma("omp parallel num_threads(nthreads) if(chunks > 1 && chunks * len >= 8192)") \
    { \
        T *scratch = (T *)malloc(4 * 2 * len * sizeof(T)); \
        T *own_psi = scratch + 4 * len, *own_g = scratch + 6 * len; \
        double *acc = gram_shared ? (double *)calloc((size_t)(8 * n_shared + 1), sizeof(double)) : NULL; \
        _Pragma("omp for schedule(static)") \
        for (int64_t s = 0; s < chunks / per; ++s) \
            for (int64_t c = s * per; c < (s + 1) * per; ++c) { \
                const int64_t at = 2 * tile_offset(&tl, c); \
                T *hp = psi_in && !runs ? psi_in + at : own_psi, *hg = g_in && !runs ? g_in + at : own_g; \
                tile_load(hp, psi + at, &tl, 2 * sizeof(T)); \
                tile_load(hg, g + at, &tl, 2 * sizeof(T)); \
                back_chunk_##SUF(hp, hg, scratch, scratch + 2 * len, len, n_code, code, shared, \
                                 batched + s * stride, inv, inv_phases, acc, gram_own ? gram_own + s * 8 * n_own : NULL, \
                                 stop, psi_from, group, first_gram, psi_in || g_in, ah); \
                if (runs && psi_in) tile_store(psi_in + at, hp, &tl, 2 * sizeof(T), stream); \
                if (runs && g_in) tile_store(g_in + at, hg, &tl, 2 * sizeof(T), stream); \
            } \
        end_thread(scratch, gram_shared, acc, n_shared); \
    } \
    free(tl.seg_off); \
}
DEF_PROGRAM_GRAD(tql_program_grad_c64, float, f32)
DEF_PROGRAM_GRAD(tql_program_grad_c128, double, f64)

/* The backward sweep from checkpoints (backprop, where memory allows): the ops form groups of
 * consecutive gates on distinct bits, which commute, so each gate's gradient is (Gram of g and
 * psi at the group's end) U, from the checkpoint kept there: psi is never un-computed, only g.
 * group[k]: the first op of k's group (gates), save[k]: the checkpoint after op k (group ends). */
#define DEF_PROGRAM_GRAD_CKPT(NAME, T, SUF) \
void NAME(const T *restrict g, T *restrict g_in, int64_t chunks, int64_t nb, int64_t n_total, \
          const int64_t *restrict active, int64_t n_code, \
          const int64_t *restrict code, const T *restrict shared, const T *restrict batched, int64_t stride, \
          int64_t shift, const int32_t *restrict inv, const T *restrict inv_phases, const T *restrict ckpt, \
          const int64_t *restrict save, \
          const int64_t *restrict group, int64_t n_shared, double *restrict gram_shared, int64_t n_own, \
          double *restrict gram_own, int ah, int nthreads) { \
    const int64_t len = (int64_t)1 << nb, per = (int64_t)1 << shift; \
    const int64_t first_gram = first_gram_op(code, n_code, gram_shared != NULL, gram_own != NULL); \
    const int64_t stop = g_in ? 0 : first_gram; \
    tiles_t tl; \
    tiles_init(&tl, n_total, nb, active, chunks, 2 * sizeof(T)); \
    const int stream = tl.stream, runs = tl.runs; \
    _Pragma("omp parallel num_threads(nthreads) if(chunks > 1 && chunks * len >= 8192)") \
    { \
        T *scratch = (T *)malloc(2 * 2 * len * sizeof(T)); \
        double *acc = gram_shared ? (double *)calloc((size_t)(8 * n_shared + 1), sizeof(double)) : NULL; \
        _Pragma("omp for schedule(static)") \
        for (int64_t s = 0; s < chunks / per; ++s) \
            for (int64_t c = s * per; c < (s + 1) * per; ++c) { \
                const int64_t at = 2 * tile_offset(&tl, c); \
                T *home = g_in && !runs ? g_in + at : scratch + 2 * len, *cg = home, *spare = scratch; \
                const T *own = batched + s * stride; \
                double *acc_own = gram_own ? gram_own + s * 8 * n_own : NULL; \
                tile_load(cg, g + at, &tl, 2 * sizeof(T)); \
                for (int64_t k = n_code - 1; k >= stop; --k) { \
                    const int64_t *op = code + 3 * k; \
                    if (op[0] == 1) { \
                        gather_##SUF(spare, cg, inv + op[1], op[2] < 0 ? NULL : inv_phases + 2 * op[2], len); \
                        T *t = cg; cg = spare; spare = t; \
                        continue; \
                    } \
                    const T *psi = ckpt + 2 * len * (save[k] * chunks + c); \
                    group_grams_##SUF(psi, cg, len, code, group[k], k, shared, own, acc, acc_own, ah); \
                    if (!g_in && group[k] <= first_gram) break;   /* nothing below needs g */ \
                    undo_group_##SUF(cg, len, code, group[k], k, shared, own); \
                    k = group[k]; \
                } \
                if (g_in && runs) tile_store(g_in + at, cg, &tl, 2 * sizeof(T), stream); \
                else if (g_in && cg != home) memcpy(home, cg, 2 * len * sizeof(T)); \
            } \
        end_thread(scratch, gram_shared, acc, n_shared); \
    } \
    free(tl.seg_off); \
}
DEF_PROGRAM_GRAD_CKPT(tql_program_grad_ckpt_c64, float, f32)
DEF_PROGRAM_GRAD_CKPT(tql_program_grad_ckpt_c128, double, f64)
