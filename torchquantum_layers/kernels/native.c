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
            _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(run >= 16384)") \
            for (int64_t l = 0; l < run; ++l) PAIR(x + 4 * l, x + 4 * l + 2, y + 4 * l, y + 4 * l + 2) \
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


/* A permutation of the local basis of k (scattered) wires with no index over the register:
 * for every i whose wire bits (`mask`) are zero and every local state j,
 * new[i | off[j]] = old[i | src[j]] (off[j]: j's bits placed on the wires; src[j] = off[perm[j]]).
 * The i run in increasing order, so the 2^k streams are sequential. n: wires per sample. */
void tql_permute_local(const char *restrict in, char *restrict out, int64_t batch, int64_t n,
                       const int64_t *restrict off, const int64_t *restrict src, int64_t k, int64_t mask,
                       int64_t esize, int nthreads) {
    const int64_t N = (int64_t)1 << n, K = (int64_t)1 << k, outer = N >> k;
    const int64_t chunk = 4096, chunks = (outer + chunk - 1) / chunk;
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(batch * N >= 16384)
    for (int64_t t = 0; t < batch * chunks; ++t) {
        const int64_t b = t / chunks, c0 = (t % chunks) * chunk;
        const int64_t c1 = c0 + chunk < outer ? c0 + chunk : outer;
        /* i = c0 with its bits spread over the non-wire positions */
        int64_t i = 0;
        for (int64_t bit = 0, pos = 0; pos < n; ++pos) {
            if ((mask >> pos) & 1) continue;
            i |= ((c0 >> bit) & 1) << pos;
            ++bit;
        }
        const char *sb = in + b * N * esize;
        char *db = out + b * N * esize;
        for (int64_t c = c0; c < c1; ++c) {
            if (esize == 8) {
                const int64_t *s = (const int64_t *)sb;
                int64_t *d = (int64_t *)db;
                for (int64_t j = 0; j < K; ++j) d[i | off[j]] = s[i | src[j]];
            } else {
                for (int64_t j = 0; j < K; ++j) memcpy(db + (i | off[j]) * esize, sb + (i | src[j]) * esize, 16);
            }
            i = ((i | mask) + 1) & ~mask;
        }
    }
}
