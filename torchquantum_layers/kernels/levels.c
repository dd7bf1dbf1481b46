/* One gate on any k wires in one pass: an M x M matrix acting on M of the 2^k local levels of
 * the wires (all of them for a dense gate, two for a Givens rotation such as DoubleExcitation,
 * the controls = 1 block of a controlled gate written on its wires), the other levels copied
 * (or zeroed: a generator, which vanishes off its levels). `cmask` (index bits outside the
 * gate's) adds controls that pick copy or gate per group, as the 2 x 2 kernel's.
 *
 * bits[t]: the index bit of the local index's bit k-1-t (the matrix's first wire is its most
 * significant bit), in any order, so a gate on descending wires needs no reordered matrix.
 * levels: the local indices the matrix's rows and columns stand for. m: (M, M) complex, row
 * major, interleaved; one per sample (m + 2 M^2 b on amplitudes [b per, (b + 1) per)) when
 * per > 0. Returns 0 (nothing done) where it does not apply: more than LEVELS_MAX_WIRES wires,
 * a matrix larger than LEVELS_MAX_MATRIX, repeated or out-of-range bits.
 *
 * The amplitudes below every gate and control bit form runs of `run` contiguous ones; each group
 * (one value of the other bits) copies its untouched levels' runs whole and, per position in the
 * run, gathers the M amplitudes, multiplies, scatters. The product is written over split real
 * and imaginary parts with the matrix transposed, so its inner loop runs along the output rows
 * (the compiler's vectors) and, for M = 2, 4, 8, 16, has a constant length. (Such gates went
 * through a transpose of every axis, or a gather, a product, a clone and a scatter: 5-54 clones
 * at 2^20 amplitudes.) */
#include <stdlib.h>

#include "simd.h"

#define LEVELS_MAX_WIRES 10
typedef float REAL_f32;
typedef double REAL_f64;
#define LEVELS_MAX_MATRIX 64

/* The two limits above, for the caller to decline before it allocates anything. */
void tql_levels_limits(int64_t *out) {
    out[0] = LEVELS_MAX_WIRES;
    out[1] = LEVELS_MAX_MATRIX;
}

typedef struct {
    int64_t k, nlev, ncopy, low, run, cmask, mask;   /* mask: the gate's bits */
    int64_t sorted[LEVELS_MAX_WIRES];           /* the gate's bits, ascending (where zeros are opened) */
    int64_t at[LEVELS_MAX_MATRIX];              /* offsets of the matrix's levels, in its order */
    int64_t copy[1 << LEVELS_MAX_WIRES];        /* offsets of the other levels */
} levels_layout;

static int levels_plan(levels_layout *L, int64_t k, const int64_t *bits, int64_t nlev, const int64_t *levels,
                       int64_t cmask, int64_t span) {
    if (k < 1 || k > LEVELS_MAX_WIRES || nlev < 1 || nlev > LEVELS_MAX_MATRIX || nlev > ((int64_t)1 << k)) return 0;
    int64_t mask = 0;
    for (int64_t t = 0; t < k; ++t) {
        if (bits[t] < 0 || bits[t] > 62 || (mask >> bits[t]) & 1) return 0;
        mask |= (int64_t)1 << bits[t];
    }
    if (cmask & mask || cmask < 0 || (mask | cmask) >= span || span % ((int64_t)1 << k)) return 0;
    const int64_t d = (int64_t)1 << k;
    unsigned char used[1 << LEVELS_MAX_WIRES] = {0};
    for (int64_t i = 0; i < nlev; ++i) {
        if (levels[i] < 0 || levels[i] >= d || used[levels[i]]) return 0;
        used[levels[i]] = 1;
    }
    int64_t off[1 << LEVELS_MAX_WIRES];
    for (int64_t j = 0; j < d; ++j) {
        off[j] = 0;
        for (int64_t t = 0; t < k; ++t)
            if ((j >> (k - 1 - t)) & 1) off[j] += (int64_t)1 << bits[t];
    }
    L->k = k; L->nlev = nlev; L->cmask = cmask; L->mask = mask; L->ncopy = 0;
    for (int64_t i = 0; i < nlev; ++i) L->at[i] = off[levels[i]];
    for (int64_t j = 0; j < d; ++j)
        if (!used[j]) L->copy[L->ncopy++] = off[j];
    int64_t n_sorted = 0;
    for (int64_t b = 0; b < 63; ++b)
        if ((mask >> b) & 1) L->sorted[n_sorted++] = b;
    L->low = __builtin_ctzll((unsigned long long)(mask | cmask));
    L->run = (int64_t)1 << L->low;
    return 1;
}

/* the per-lane stores of a register of output rows (only the first `valid` lanes are rows) */
VECTOR_CODE(
static inline void scatter_f32(float *out, const int64_t *at, int64_t pos, __m256 y, int valid) {
    const __m128 lo = _mm256_castps256_ps128(y), hi = _mm256_extractf128_ps(y, 1);
    _mm_storel_pi((__m64 *)(out + 2 * (pos + at[0])), lo);
    if (valid > 1) _mm_storeh_pi((__m64 *)(out + 2 * (pos + at[1])), lo);
    if (valid > 2) _mm_storel_pi((__m64 *)(out + 2 * (pos + at[2])), hi);
    if (valid > 3) _mm_storeh_pi((__m64 *)(out + 2 * (pos + at[3])), hi);
}
static inline void scatter_f64(double *out, const int64_t *at, int64_t pos, __m256d y, int valid) {
    _mm_storeu_pd(out + 2 * (pos + at[0]), _mm256_castpd256_pd128(y));
    if (valid > 1) _mm_storeu_pd(out + 2 * (pos + at[1]), _mm256_extractf128_pd(y, 1));
}
)
/* The threads share units of this many positions (free values of the other index bits); a
 * unit moves the untouched levels in chunks of min(run, unit) contiguous amplitudes */
#define LEVELS_UNIT_POSITIONS 1024
/* the largest matrix the register-per-level path takes (its broadcast entries: 16 KiB in complex64) */
#define LEVELS_LANE_MATRIX 16

#define DEF_LEVELS(NAME, T, SUF) \
/* level `at`'s runs of `run` amplitudes at starts[0..n) copied from in, or zeroed (one amplitude */ \
/* per start: a gate on the last wire; per-amplitude moves of constant size, no call) */ \
static inline void NAME##_move(const T *restrict in, T *restrict out, const int64_t *starts, int64_t n, int64_t at, \
                               int64_t run, int keep) { \
    if (run >= 8) { \
        for (int64_t h = 0; h < n; ++h) { \
            T *q = out + 2 * (starts[h] + at); \
            if (keep) memcpy(q, in + 2 * (starts[h] + at), 2 * (size_t)run * sizeof(T)); \
            else memset(q, 0, 2 * (size_t)run * sizeof(T)); \
        } \
        return; \
    } \
    /* runs of 1, 2 or 4 (a power of two): constant-size copies, which the compiler inlines (a loop */ \
    /* it turns into a memcpy call per amplitude: 11-13 clones for a DoubleExcitation on the last wires) */ \
    static const T zeros[8] = {0}; \
    for (int64_t h = 0; h < n; ++h) { \
        T *q = out + 2 * (starts[h] + at); \
        const T *p = keep ? in + 2 * (starts[h] + at) : zeros; \
        if (run == 1) memcpy(q, p, 2 * sizeof(T)); \
        else if (run == 2) memcpy(q, p, 4 * sizeof(T)); \
        else memcpy(q, p, 8 * sizeof(T)); \
    } \
} \
/* the product at one position, without vectors: split real and imaginary parts, m transposed */ \
static inline void NAME##_scalar(const T *restrict in, T *restrict out, const int64_t *at, int64_t pos, \
                                 const T *restrict mt, int64_t M) { \
    T xr[LEVELS_MAX_MATRIX], xi[LEVELS_MAX_MATRIX], yr[LEVELS_MAX_MATRIX] = {0}, yi[LEVELS_MAX_MATRIX] = {0}; \
    for (int64_t i = 0; i < M; ++i) { xr[i] = in[2 * (pos + at[i])]; xi[i] = in[2 * (pos + at[i]) + 1]; } \
    for (int64_t j = 0; j < M; ++j) { \
        const T a = xr[j], b = xi[j], *cr = mt + j * M, *ci = mt + M * M + j * M; \
        for (int64_t i = 0; i < M; ++i) { yr[i] += cr[i] * a - ci[i] * b; yi[i] += cr[i] * b + ci[i] * a; } \
    } \
    for (int64_t i = 0; i < M; ++i) { out[2 * (pos + at[i])] = yr[i]; out[2 * (pos + at[i]) + 1] = yi[i]; } \
} \
/* the columns of m as registers of LANES rows (zero past row M): A[j V + v] its entries, S the */ \
/* same with (re, im) swapped, so that y = addsub(Σ_j A x_re, Σ_j S x_im) */ \
VECTOR_CODE( \
static void NAME##_columns(const T *m, int64_t M, int64_t V, VEC_##SUF *A, VEC_##SUF *S) { \
    T a[2 * LANES_##SUF], s[2 * LANES_##SUF]; \
    for (int64_t j = 0; j < M; ++j) \
        for (int64_t v = 0; v < V; ++v) { \
            for (int l = 0; l < LANES_##SUF; ++l) { \
                const int64_t i = v * LANES_##SUF + l; \
                const T re = i < M ? m[2 * (i * M + j)] : 0, im = i < M ? m[2 * (i * M + j) + 1] : 0; \
                a[2 * l] = re; a[2 * l + 1] = im; s[2 * l] = im; s[2 * l + 1] = re; \
            } \
            A[j * V + v] = LOAD_##SUF(a); S[j * V + v] = LOAD_##SUF(s); \
        } \
} ) \
static void NAME##_span(const T *restrict in, T *restrict out, int64_t len, const levels_layout *L, const T *restrict m, \
                        int keep, int nthreads) { \
    const int64_t M = L->nlev, free_positions = len >> L->k; \
    /* units of a power of two that divides the positions: a batch of B rows of 2^(n-k) positions \
     * has B 2^(n-k) of them, not always a multiple of LEVELS_UNIT_POSITIONS (B = 129 at n - k = 3 \
     * left the last row unwritten) */ \
    const int64_t low = free_positions & -free_positions; \
    const int64_t unit = low < LEVELS_UNIT_POSITIONS ? low : LEVELS_UNIT_POSITIONS; \
    const int64_t chunk = L->run < unit ? L->run : unit, units = free_positions / unit; \
    const int parallel = nthreads > 1 && len >= 32768; \
    VECTOR_CODE( \
    if (M <= LEVELS_LANE_MATRIX) { \
        VEC_##SUF Er[LEVELS_LANE_MATRIX * LEVELS_LANE_MATRIX], Ei[LEVELS_LANE_MATRIX * LEVELS_LANE_MATRIX]; \
        for (int64_t e = 0; e < M * M; ++e) { Er[e] = SET1_##SUF(m[2 * e]); Ei[e] = SET1_##SUF(m[2 * e + 1]); } \
        switch (M) {    /* constant sizes: the levels' registers and the loops unrolled */ \
        case 2: GATE_LOOP(u, units, 1, LEVELS_UNIT(NAME, LEVELS_LANE_PRODUCTS(SUF, 2))) break; \
        case 4: GATE_LOOP(u, units, 1, LEVELS_UNIT(NAME, LEVELS_LANE_PRODUCTS(SUF, 4))) break; \
        case 8: GATE_LOOP(u, units, 1, LEVELS_UNIT(NAME, LEVELS_LANE_PRODUCTS(SUF, 8))) break; \
        default: GATE_LOOP(u, units, 1, LEVELS_UNIT(NAME, LEVELS_LANE_PRODUCTS(SUF, M))) \
        } \
        return; \
    } \
    const int64_t V = (M + LANES_##SUF - 1) / LANES_##SUF; \
    VEC_##SUF A[LEVELS_MAX_MATRIX * LEVELS_MAX_MATRIX / LANES_##SUF], S[LEVELS_MAX_MATRIX * LEVELS_MAX_MATRIX / LANES_##SUF]; \
    NAME##_columns(m, M, V, A, S); \
    GATE_LOOP(u, units, 1, LEVELS_UNIT(NAME, LEVELS_VECTOR_PRODUCTS(SUF))) \
    return; ) \
    T mt[2 * LEVELS_MAX_MATRIX * LEVELS_MAX_MATRIX];    /* mt[j M + i] = Re m[i][j], then the Im parts */ \
    for (int64_t i = 0; i < M; ++i) \
        for (int64_t j = 0; j < M; ++j) { \
            mt[j * M + i] = m[2 * (i * M + j)]; \
            mt[M * M + j * M + i] = m[2 * (i * M + j) + 1]; \
        } \
    GATE_LOOP(u, units, 1, LEVELS_UNIT(NAME, LEVELS_SCALAR_PRODUCTS(NAME))) \
} \
int NAME(const T *restrict in, T *restrict out, int64_t len, int64_t k, const int64_t *bits, int64_t nlev, \
         const int64_t *levels, const T *restrict m, int64_t per, int64_t cmask, int keep, int nthreads) { \
    levels_layout L; \
    if (!levels_plan(&L, k, bits, nlev, levels, cmask, per ? per : len)) return 0; \
    if (!per) { NAME##_span(in, out, len, &L, m, keep, nthreads); return 1; } \
    FOR_SAMPLES(NAME##_span(in + 2 * per * b, out + 2 * per * b, per, &L, m + 2 * nlev * nlev * b, keep, nt)) \
    return 1; \
}
/* one unit u: from its first position (the unit's first free index with zeros opened at the
 * gate's bits), its chunks (contiguous, inside one run, so one value of the controls; the next
 * starts at the next free index past the last) and the list of positions where PRODUCTS then
 * applies the matrix. The untouched levels are moved level by level over the whole unit: chunk by
 * chunk, all levels of a gate on far bits are lines 2^bit apart, that share cache sets (a
 * DoubleExcitation on wires 0, 5, 10, 19 of 20: 16 lines of each state per position, 8-way
 * sets; 9-10 clones) */
#define LEVELS_UNIT(NAME, PRODUCTS) { \
    int64_t first = u * unit, pl[LEVELS_UNIT_POSITIONS], starts[LEVELS_UNIT_POSITIONS], count = 0, n_off = 0; \
    for (int64_t t = 0; t < L->k; ++t) first = insert_zero(first, L->sorted[t]); \
    const int64_t n_chunks = unit / chunk; \
    for (int64_t h = 0; h < n_chunks; ++h) { \
        if ((first & L->cmask) != L->cmask) starts[n_off++] = first;  /* off chunks first, on ones last */ \
        else { \
            starts[n_chunks - 1 - (h - n_off)] = first; \
            for (int64_t pos = first; pos < first + chunk; ++pos) pl[count++] = pos; \
        } \
        first = (((first + chunk - 1) | L->mask) + 1) & ~L->mask; \
    } \
    for (int64_t c = 0; c < M; ++c) NAME##_move(in, out, starts, n_off, L->at[c], chunk, keep); \
    for (int64_t c = 0; c < L->ncopy; ++c) NAME##_move(in, out, starts, n_chunks, L->copy[c], chunk, keep); \
    PRODUCTS }
/* VB registers of rows (from row register v on) at NP positions pl[q..]: the 2 VB NP accumulators
 * stay in registers and each column's amplitude is broadcast once per block. Several positions
 * at once for small matrices: one position's sums are chains of M dependent FMAs (latency bound;
 * 4 x 4 at one position: ~4 cycles per amplitude) */
#define LEVELS_ROWS(SUF, VB, NP) { \
    VEC_##SUF P[NP][VB], Q[NP][VB]; \
    for (int e = 0; e < (NP); ++e) \
        for (int w = 0; w < (VB); ++w) { P[e][w] = ZERO_##SUF(); Q[e][w] = ZERO_##SUF(); } \
    for (int64_t j = 0; j < M; ++j) \
        for (int e = 0; e < (NP); ++e) { \
            const int64_t x = 2 * (pl[q + e] + L->at[j]); \
            const VEC_##SUF xr = SET1_##SUF(in[x]), xi = SET1_##SUF(in[x + 1]); \
            for (int w = 0; w < (VB); ++w) { \
                P[e][w] = FMA_##SUF(A[j * V + v + w], xr, P[e][w]); Q[e][w] = FMA_##SUF(S[j * V + v + w], xi, Q[e][w]); \
            } \
        } \
    for (int e = 0; e < (NP); ++e) \
        for (int w = 0; w < (VB); ++w) { \
            const int64_t row = (v + w) * LANES_##SUF; \
            scatter_##SUF(out, L->at + row, pl[q + e], ADDSUB_##SUF(P[e][w], Q[e][w]), \
                          (int)(M - row < LANES_##SUF ? M - row : LANES_##SUF)); \
        } \
    v += (VB); }
#define LEVELS_VECTOR_PRODUCTS(SUF) { \
    int64_t q = 0; \
    if (V == 1) \
        for (; q + 4 <= count; q += 4) { int64_t v = 0; LEVELS_ROWS(SUF, 1, 4) } \
    else if (V < 4) \
        for (; q + 2 <= count; q += 2) { int64_t v = 0; LEVELS_ROWS(SUF, 2, 2) if (V - v) LEVELS_ROWS(SUF, 1, 2) } \
    for (; q < count; ++q) { \
        int64_t v = 0; \
        while (V - v >= 4) LEVELS_ROWS(SUF, 4, 1) \
        if (V - v >= 2) LEVELS_ROWS(SUF, 2, 1) \
        if (V - v >= 1) LEVELS_ROWS(SUF, 1, 1) \
    } }
/* runs of at least a register: LANES consecutive positions per step, one register per level
 * (loaded whole, no scatter), the matrix entries broadcast; rows four at a time */
#define LEVELS_LANE_ROWS(SUF, MM, NR, STORE) { \
    VEC_##SUF P[NR], Q[NR]; \
    for (int e = 0; e < (NR); ++e) { P[e] = ZERO_##SUF(); Q[e] = ZERO_##SUF(); } \
    for (int64_t j = 0; j < (MM); ++j) \
        for (int e = 0; e < (NR); ++e) { \
            P[e] = FMA_##SUF(Er[(i + e) * (MM) + j], X[j], P[e]); Q[e] = FMA_##SUF(Ei[(i + e) * (MM) + j], Xs[j], Q[e]); \
        } \
    for (int r = 0; r < (NR); ++r) STORE(SUF, i + r, ADDSUB_##SUF(P[r], Q[r])) \
    i += (NR); }
#define LEVELS_LANE_PRODUCTS(SUF, MM) \
    if (chunk >= LANES_##SUF) \
        for (int64_t q = 0; q < count; q += LANES_##SUF) { \
            const int64_t pos = pl[q]; \
            VEC_##SUF X[LEVELS_LANE_MATRIX], Xs[LEVELS_LANE_MATRIX]; \
            for (int64_t j = 0; j < (MM); ++j) { X[j] = LOAD_##SUF(in + 2 * (pos + L->at[j])); Xs[j] = SWAP_##SUF(X[j]); } \
            int64_t i = 0; \
            while ((MM) - i >= 4) LEVELS_LANE_ROWS(SUF, MM, 4, LEVELS_STORE_RUN) \
            while ((MM) - i >= 1) LEVELS_LANE_ROWS(SUF, MM, 1, LEVELS_STORE_RUN) \
        } \
    else \
        for (int64_t q = 0; q < count; q += LANES_##SUF) { \
            /* LANES positions not in one run: their amplitudes gathered into registers through a */ \
            /* buffer (the last position repeated past the end: it writes the same values twice) */ \
            int64_t ps[LANES_##SUF]; \
            for (int e = 0; e < LANES_##SUF; ++e) ps[e] = pl[q + e < count ? q + e : count - 1]; \
            VEC_##SUF X[LEVELS_LANE_MATRIX], Xs[LEVELS_LANE_MATRIX]; \
            for (int64_t j = 0; j < (MM); ++j) { \
                REAL_##SUF buf[2 * LANES_##SUF]; \
                for (int e = 0; e < LANES_##SUF; ++e) memcpy(buf + 2 * e, in + 2 * (ps[e] + L->at[j]), sizeof buf / LANES_##SUF); \
                X[j] = LOAD_##SUF(buf); Xs[j] = SWAP_##SUF(X[j]); \
            } \
            int64_t i = 0; \
            while ((MM) - i >= 4) LEVELS_LANE_ROWS(SUF, MM, 4, LEVELS_STORE_SPREAD) \
            while ((MM) - i >= 1) LEVELS_LANE_ROWS(SUF, MM, 1, LEVELS_STORE_SPREAD) \
        }
#define LEVELS_STORE_RUN(SUF, row, Y) STORE_##SUF(out + 2 * (pos + L->at[row]), Y);
#define LEVELS_STORE_SPREAD(SUF, row, Y) { \
    REAL_##SUF buf[2 * LANES_##SUF]; \
    STORE_##SUF(buf, Y); \
    for (int lane = 0; lane < LANES_##SUF; ++lane) memcpy(out + 2 * (ps[lane] + L->at[row]), buf + 2 * lane, sizeof buf / LANES_##SUF); }
#define LEVELS_SCALAR_PRODUCTS(NAME) \
    for (int64_t q = 0; q < count; ++q) NAME##_scalar(in, out, L->at, pl[q], mt, M);
DEF_LEVELS(tql_gate_levels_c64, float, f32)
DEF_LEVELS(tql_gate_levels_c128, double, f64)

/* The matrix gradient of tql_gate_levels (torch's convention for out = m in on the levels):
 * acc[i][j] += sum over the groups where every control is 1 of g[pos + at[i]] conj(x[pos + at[j]]),
 * accumulated in double precision; acc is (M, M) complex, interleaved, summed over the batch, or
 * one per sample (acc + 2 M^2 b) when per > 0. The groups split into nthreads contiguous parts,
 * each summed apart and added in order, so a result does not depend on the threads' timing.
 * diag: the diagonal entries only (a diagonal gate's gradient), the rest left as they were.
 * Returns 0 where tql_gate_levels would. (Torch's way: the wires' axes moved together for both
 * states, then a GEMM: two extra passes over each.) */
#define LEVELS_GRAM_VECTOR_MATRIX 8    /* up to 8 levels: 2 x 64 register accumulators */
VECTOR_CODE(
/* the register of v's amplitudes at lanes l ^ p (p < LANES) */
static inline __m256 xor_lanes_f32(__m256 v, int64_t p) {
    if (p & 2) v = _mm256_permute2f128_ps(v, v, 1);
    return (p & 1) ? _mm256_permute_ps(v, 0x4E) : v;
}
static inline __m256d xor_lanes_f64(__m256d v, int64_t p) {
    return (p & 1) ? _mm256_permute2f128_pd(v, v, 1) : v;
}
/* all bits set in the lanes l where every bit of `low` (< LANES) is set in l, zero elsewhere */
static inline __m256 lanes_where_f32(int64_t low) {
    int32_t m[8];
    for (int l = 0; l < 4; ++l) m[2 * l] = m[2 * l + 1] = ((l & low) == low) ? -1 : 0;
    return _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)m));
}
static inline __m256d lanes_where_f64(int64_t low) {
    int64_t m[4];
    for (int l = 0; l < 2; ++l) m[2 * l] = m[2 * l + 1] = ((l & low) == low) ? -1 : 0;
    return _mm256_castsi256_pd(_mm256_loadu_si256((const __m256i *)m));
}
#define AND_f32 _mm256_and_ps
#define AND_f64 _mm256_and_pd
)
#define LANES_MAX 4
/* Where a lane-stepped gram finds each level: the gate's bits at or above the register
 * (high_bits, kh of them: H = 2^kh high levels, high_at[h] the offset of high level h), the xor
 * patterns of its bits inside the register (P of them), and the level of lane l at high level h. */
typedef struct {
    int64_t kh, H, P, high_bits[LEVELS_MAX_WIRES], high_at[LEVELS_GRAM_VECTOR_MATRIX], patterns[LANES_MAX];
    int64_t level_of[LEVELS_GRAM_VECTOR_MATRIX][LANES_MAX];
} lane_plan;

static inline void lane_plan_make(const levels_layout *L, int64_t lanes, lane_plan *LP) {
    const int64_t lg = __builtin_ctzll((unsigned long long)lanes), low_mask = L->mask & (lanes - 1);
    LP->kh = 0;
    for (int64_t t = 0; t < L->k; ++t)
        if (L->sorted[t] >= lg) LP->high_bits[LP->kh++] = L->sorted[t];
    LP->H = (int64_t)1 << LP->kh;
    LP->P = 0;
    for (int64_t q = 0; q < lanes; ++q)
        if (!(q & ~low_mask)) LP->patterns[LP->P++] = q;
    for (int64_t h = 0; h < LP->H; ++h) {
        LP->high_at[h] = 0;
        for (int64_t u = 0; u < LP->kh; ++u)
            if ((h >> u) & 1) LP->high_at[h] |= (int64_t)1 << LP->high_bits[u];
        for (int64_t l = 0; l < lanes; ++l) {
            LP->level_of[h][l] = 0;
            for (int64_t v = 0; v < L->nlev; ++v)
                if (L->at[v] == (LP->high_at[h] | (l & low_mask))) LP->level_of[h][l] = v;
        }
    }
}
#define LEVELS_GRAM_FLUSH 64           /* positions a float accumulator sums before it is added in double */
#define DEF_LEVELS_GRAM(NAME, T, SUF) \
static void NAME##_part(const T *restrict x, const T *restrict g, const levels_layout *L, int64_t lo, int64_t hi, \
                        double *restrict p, int diag) { \
    const int64_t M = L->nlev; \
    double xr[LEVELS_MAX_MATRIX], xi[LEVELS_MAX_MATRIX], gr[LEVELS_MAX_MATRIX], gi[LEVELS_MAX_MATRIX]; \
    for (int64_t r = lo; r < hi; ++r) { \
        int64_t pos = r; \
        for (int64_t t = 0; t < L->k; ++t) pos = insert_zero(pos, L->sorted[t]); \
        if ((pos & L->cmask) != L->cmask) continue; \
        for (int64_t i = 0; i < M; ++i) { \
            const int64_t a = 2 * (pos + L->at[i]); \
            xr[i] = x[a]; xi[i] = x[a + 1]; gr[i] = g[a]; gi[i] = g[a + 1]; \
        } \
        for (int64_t i = 0; i < M; ++i) \
            for (int64_t j = diag ? i : 0; j < (diag ? i + 1 : M); ++j) { \
                p[2 * (i * M + j)] += gr[i] * xr[j] + gi[i] * xi[j]; \
                p[2 * (i * M + j) + 1] += gi[i] * xr[j] - gr[i] * xi[j]; \
            } \
    } \
} \
VECTOR_CODE( \
/* LANES consecutive positions per step (every gate and control bit above them): per pair (i, j) \
 * one register sums g_i x_j lane-wise (its reals add up to Re g_i conj(x_j)) and one g_i times \
 * x_j swapped (odd minus even reals: Im), added into p in double every LEVELS_GRAM_FLUSH steps */ \
static void NAME##_flush(VEC_##SUF *A, VEC_##SUF *S, int64_t MM, double *restrict p) { \
    T a[2 * LANES_##SUF], b[2 * LANES_##SUF]; \
    for (int64_t e = 0; e < MM; ++e) { \
        STORE_##SUF(a, A[e]); STORE_##SUF(b, S[e]); \
        double re = 0, im = 0; \
        for (int l = 0; l < LANES_##SUF; ++l) { re += (double)a[2 * l] + a[2 * l + 1]; im += (double)b[2 * l + 1] - b[2 * l]; } \
        p[2 * e] += re; p[2 * e + 1] += im; \
        A[e] = ZERO_##SUF(); S[e] = ZERO_##SUF(); \
    } \
} \
static void NAME##_part_lanes(const T *restrict x, const T *restrict g, const levels_layout *L, int64_t lo, \
                              int64_t hi, double *restrict p, int diag) { \
    const int64_t M = L->nlev, MM = M * M; \
    VEC_##SUF A[LEVELS_GRAM_VECTOR_MATRIX * LEVELS_GRAM_VECTOR_MATRIX], S[LEVELS_GRAM_VECTOR_MATRIX * LEVELS_GRAM_VECTOR_MATRIX]; \
    VEC_##SUF X[LEVELS_GRAM_VECTOR_MATRIX], XS[LEVELS_GRAM_VECTOR_MATRIX]; \
    for (int64_t e = 0; e < MM; ++e) { A[e] = ZERO_##SUF(); S[e] = ZERO_##SUF(); } \
    int64_t since = 0; \
    for (int64_t r = lo; r < hi; r += LANES_##SUF) { \
        int64_t pos = r; \
        for (int64_t t = 0; t < L->k; ++t) pos = insert_zero(pos, L->sorted[t]); \
        if ((pos & L->cmask) != L->cmask) continue; \
        for (int64_t j = 0; j < M; ++j) { X[j] = LOAD_##SUF(x + 2 * (pos + L->at[j])); XS[j] = SWAP_##SUF(X[j]); } \
        for (int64_t i = 0; i < M; ++i) { \
            const VEC_##SUF G = LOAD_##SUF(g + 2 * (pos + L->at[i])); \
            for (int64_t j = diag ? i : 0; j < (diag ? i + 1 : M); ++j) { \
                A[i * M + j] = FMA_##SUF(G, X[j], A[i * M + j]); \
                S[i * M + j] = FMA_##SUF(G, XS[j], S[i * M + j]); \
            } \
        } \
        if (++since == LEVELS_GRAM_FLUSH) { NAME##_flush(A, S, MM, p); since = 0; } \
    } \
    NAME##_flush(A, S, MM, p); \
} \
/* Both lane-stepped grams below step LANES amplitudes at a time whatever the gate's bits: the bits \
 * at or above the register are a load away (high_at), those below it fixed per lane; an \
 * accumulator register sums g times some register of x lane-wise, and at each flush its lane l \
 * goes to entry at[e][l] of the gram (interleaved re, im in p). */ \
static void NAME##_flush_lanes(VEC_##SUF *A, VEC_##SUF *S, int64_t count, const int64_t (*at)[LANES_MAX], \
                               double *restrict p) { \
    for (int64_t e = 0; e < count; ++e) { \
        T a[2 * LANES_##SUF], b[2 * LANES_##SUF]; \
        STORE_##SUF(a, A[e]); STORE_##SUF(b, S[e]); \
        for (int64_t l = 0; l < LANES_##SUF; ++l) { \
            p[at[e][l]] += (double)a[2 * l] + a[2 * l + 1]; \
            p[at[e][l] + 1] += (double)b[2 * l + 1] - b[2 * l]; \
        } \
        A[e] = ZERO_##SUF(); S[e] = ZERO_##SUF(); \
    } \
} \
/* A diagonal's gram (all 2^k levels, no control) as one stream over both states: the chunk's \
 * high level picks the accumulator. The gathered path read M scattered streams, and a gate on \
 * the last wires (run < LANES) fell back to one position at a time. */ \
static void NAME##_part_diagonal(const T *restrict x, const T *restrict g, const levels_layout *L, int64_t lo, \
                                 int64_t hi, double *restrict p) { \
    lane_plan LP; \
    lane_plan_make(L, LANES_##SUF, &LP); \
    int64_t at[LEVELS_GRAM_VECTOR_MATRIX][LANES_MAX]; \
    for (int64_t h = 0; h < LP.H; ++h) \
        for (int64_t l = 0; l < LANES_##SUF; ++l) at[h][l] = 2 * LP.level_of[h][l] * (L->nlev + 1); \
    VEC_##SUF A[LEVELS_GRAM_VECTOR_MATRIX], S[LEVELS_GRAM_VECTOR_MATRIX]; \
    for (int64_t h = 0; h < LP.H; ++h) { A[h] = ZERO_##SUF(); S[h] = ZERO_##SUF(); } \
    int64_t since = 0; \
    for (int64_t c = lo; c < hi; ++c) { \
        const int64_t i = c * LANES_##SUF; \
        int64_t h = 0; \
        for (int64_t u = 0; u < LP.kh; ++u) h |= ((i >> LP.high_bits[u]) & 1) << u; \
        const VEC_##SUF X = LOAD_##SUF(x + 2 * i), G = LOAD_##SUF(g + 2 * i); \
        A[h] = FMA_##SUF(G, X, A[h]); \
        S[h] = FMA_##SUF(G, SWAP_##SUF(X), S[h]); \
        if (++since == LEVELS_GRAM_FLUSH) { NAME##_flush_lanes(A, S, LP.H, at, p); since = 0; } \
    } \
    NAME##_flush_lanes(A, S, LP.H, at, p); \
} \
/* The full gram of a gate with bits inside the register (the last wire; in complex64 also the \
 * one before), which went position by position: the partners of a low gate bit are a lane \
 * permutation away (xor_lanes); accumulator (hg, hx, q) sums g at high level hg times x at high \
 * level hx with lanes xored by pattern q. All 2^k levels, any controls. */ \
static void NAME##_part_low_bits(const T *restrict x, const T *restrict g, const levels_layout *L, int64_t lo, \
                                 int64_t hi, double *restrict p) { \
    lane_plan LP; \
    lane_plan_make(L, LANES_##SUF, &LP); \
    const int64_t H = LP.H, P = LP.P, count = H * H * P; \
    int64_t at[LEVELS_GRAM_VECTOR_MATRIX * LEVELS_GRAM_VECTOR_MATRIX][LANES_MAX]; \
    for (int64_t e = 0; e < count; ++e) \
        for (int64_t l = 0; l < LANES_##SUF; ++l) \
            at[e][l] = 2 * (LP.level_of[e / (H * P)][l] * L->nlev \
                            + LP.level_of[(e / P) % H][l ^ LP.patterns[e % P]]); \
    VEC_##SUF A[LEVELS_GRAM_VECTOR_MATRIX * LEVELS_GRAM_VECTOR_MATRIX], S[LEVELS_GRAM_VECTOR_MATRIX * LEVELS_GRAM_VECTOR_MATRIX]; \
    VEC_##SUF XP[LEVELS_GRAM_VECTOR_MATRIX * LANES_##SUF], XS[LEVELS_GRAM_VECTOR_MATRIX * LANES_##SUF]; \
    for (int64_t e = 0; e < count; ++e) { A[e] = ZERO_##SUF(); S[e] = ZERO_##SUF(); } \
    /* controls above the register skip whole steps, those inside it zero g's lanes where they are 0 */ \
    const int64_t control_high = L->cmask & ~(int64_t)(LANES_##SUF - 1); \
    const VEC_##SUF controlled = lanes_where_##SUF(L->cmask & (LANES_##SUF - 1)); \
    int64_t since = 0; \
    for (int64_t c = lo; c < hi; ++c) { \
        int64_t i = c * LANES_##SUF; \
        for (int64_t u = 0; u < LP.kh; ++u) i = insert_zero(i, LP.high_bits[u]); \
        if ((i & control_high) != control_high) continue; \
        for (int64_t hx = 0; hx < H; ++hx) { \
            const VEC_##SUF X = LOAD_##SUF(x + 2 * (i + LP.high_at[hx])); \
            for (int64_t q = 0; q < P; ++q) { \
                XP[hx * P + q] = xor_lanes_##SUF(X, LP.patterns[q]); \
                XS[hx * P + q] = SWAP_##SUF(XP[hx * P + q]); \
            } \
        } \
        for (int64_t hg = 0; hg < H; ++hg) { \
            const VEC_##SUF G = AND_##SUF(LOAD_##SUF(g + 2 * (i + LP.high_at[hg])), controlled); \
            for (int64_t e = 0; e < H * P; ++e) { \
                A[hg * H * P + e] = FMA_##SUF(G, XP[e], A[hg * H * P + e]); \
                S[hg * H * P + e] = FMA_##SUF(G, XS[e], S[hg * H * P + e]); \
            } \
        } \
        if (++since == LEVELS_GRAM_FLUSH) { NAME##_flush_lanes(A, S, count, at, p); since = 0; } \
    } \
    NAME##_flush_lanes(A, S, count, at, p); \
} ) \
static void NAME##_span(const T *restrict x, const T *restrict g, int64_t len, const levels_layout *L, \
                        double *restrict acc, int diag, int nthreads) { \
    const int64_t M = L->nlev, groups = len >> L->k, MM2 = 2 * M * M; \
    int64_t step = 1; \
    VECTOR_CODE(if (L->run >= LANES_##SUF && M <= LEVELS_GRAM_VECTOR_MATRIX) step = LANES_##SUF; \
                /* the lane-stepped grams: all 2^k levels, few enough, whole registers */ \
                const int lane_stepped = M == ((int64_t)1 << L->k) && M <= LEVELS_GRAM_VECTOR_MATRIX \
                                         && len % LANES_##SUF == 0; \
                const int stream = lane_stepped && diag && !L->cmask; \
                const int low_bits = lane_stepped && !stream && step == 1;) \
    int64_t parts = (nthreads > 1 && len >= 32768) ? nthreads : 1; \
    double *part = parts > 1 ? (double *)calloc((size_t)(parts * MM2), sizeof(double)) : NULL; \
    if (!part) parts = 1;                           /* one part sums into acc itself */ \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(parts > 1)") \
    for (int64_t c = 0; c < parts; ++c) { \
        double *p = part ? part + c * MM2 : acc; \
        const int64_t lo = groups / step * c / parts * step, hi = groups / step * (c + 1) / parts * step; \
        VECTOR_CODE(if (stream) { \
            const int64_t chunks = len / LANES_##SUF; \
            NAME##_part_diagonal(x, g, L, chunks * c / parts, chunks * (c + 1) / parts, p); \
        } else if (low_bits) { \
            const int64_t chunks = (len / LANES_##SUF) >> (L->k - __builtin_popcountll( \
                (unsigned long long)(L->mask & (LANES_##SUF - 1)))); \
            NAME##_part_low_bits(x, g, L, chunks * c / parts, chunks * (c + 1) / parts, p); \
        } else) \
        if (step == 1) NAME##_part(x, g, L, lo, hi, p, diag); \
        VECTOR_CODE(else NAME##_part_lanes(x, g, L, lo, hi, p, diag);) \
    } \
    if (part) { \
        for (int64_t c = 0; c < parts; ++c) \
            for (int64_t e = 0; e < MM2; ++e) acc[e] += part[c * MM2 + e]; \
        free(part); \
    } \
} \
int NAME(const T *restrict x, const T *restrict g, int64_t len, int64_t k, const int64_t *bits, int64_t nlev, \
         const int64_t *levels, int64_t per, int64_t cmask, double *restrict acc, int diag, int nthreads) { \
    levels_layout L; \
    if (!levels_plan(&L, k, bits, nlev, levels, cmask, per ? per : len)) return 0; \
    if (!per) { NAME##_span(x, g, len, &L, acc, diag, nthreads); return 1; } \
    FOR_SAMPLES(NAME##_span(x + 2 * per * b, g + 2 * per * b, per, &L, acc + 2 * nlev * nlev * b, diag, nt)) \
    return 1; \
}
DEF_LEVELS_GRAM(tql_gram_levels_c64, float, f32)
DEF_LEVELS_GRAM(tql_gram_levels_c128, double, f64)
