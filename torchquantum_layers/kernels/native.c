/* One-pass CPU kernels for what torch cannot do at memory speed: a 2 x 2 matrix on one wire, a
 * permutation of amplitudes, and a Pauli sum's expectation / H psi over all its X masks in one
 * call. Compiled on first use by kernels/native.py (plain C, OpenMP, AVX2 where the CPU has it,
 * no torch headers); the torch kernels remain the fallback and the reference.
 * Complex numbers are interleaved (re, im) pairs of T. */
#include <stdlib.h>
#include "simd.h"

/* the output size from which the one-pass kernels write around the caches (simd.h) */
int64_t tql_stream_bytes(void) { return TQL_STREAM_BYTES; }

/* The last wire: each (x0, x1) pair is adjacent, so one register holds LANES/2 pairs; y = M x as
 * two complex products per element, the real and imaginary halves of the columns broadcast and
 * combined by addsub. Returns the pairs done (the rest are left to the scalar loop). */
#ifdef __AVX2__
#define DEF_LAST_WIRE(SUF, T) \
static int64_t last_wire_##SUF(const T *m, const T *x, T *y, int64_t run, int nthreads) { \
    const VEC_##SUF are = BCAST2_##SUF(m[0], m[4]), aim = BCAST2_##SUF(m[1], m[5]); \
    const VEC_##SUF bre = BCAST2_##SUF(m[2], m[6]), bim = BCAST2_##SUF(m[3], m[7]); \
    const int64_t per = LANES_##SUF / 2, regs = run / per; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(run >= 16384)") \
    for (int64_t l = 0; l < regs; ++l) { \
        const VEC_##SUF v = LOAD_##SUF(x + 2 * LANES_##SUF * l); \
        const VEC_##SUF x0 = PERM_PAIR_##SUF(v, 0x44), x1 = PERM_PAIR_##SUF(v, 0xEE); \
        const VEC_##SUF x0s = PERM_PAIR_##SUF(v, 0x11), x1s = PERM_PAIR_##SUF(v, 0xBB); \
        const VEC_##SUF re = FMA_##SUF(bre, x1, MUL_##SUF(are, x0)); \
        const VEC_##SUF im = FMA_##SUF(bim, x1s, MUL_##SUF(aim, x0s)); \
        STORE_##SUF(y + 2 * LANES_##SUF * l, ADDSUB_##SUF(re, im)); \
    } \
    return per * regs; \
}
DEF_LAST_WIRE(f32, float)
DEF_LAST_WIRE(f64, double)
#define LAST_WIRE_SIMD(mm, x, y, run, nt) _Generic((x), const double *: last_wire_f64, const float *: last_wire_f32)(mm, x, y, run, nt)
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
    /* threads take (block, run of up to 4096 pairs): a high wire of one sample is a single block */ \
    const int64_t C = R < 4096 ? R : 4096, per = R / C; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(blocks * R >= 16384)") \
    for (int64_t t = 0; t < blocks * per; ++t) { \
        const int64_t l = t / per, r0 = t % per * C; \
        LOAD_M(shift < 0 ? m : m + 8 * (l >> shift)) \
        const T *x0 = in + 4 * R * l + 2 * r0, *x1 = x0 + 2 * R; \
        T *y0 = out + 4 * R * l + 2 * r0, *y1 = y0 + 2 * R; \
        _Pragma("omp simd") for (int64_t r = 0; r < C; ++r) PAIR(x0 + 2 * r, x1 + 2 * r, y0 + 2 * r, y1 + 2 * r) \
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
/* dst <- src for rows of a few KiB: glibc's memcpy takes `rep movsb` from 2 KiB, which ran at
 * half a clone's speed on the AMD VM measured (a CNOT in the middle of 20 qubits: 2 clones).
 * `stream`: the stores go around the caches (stream_output's sizes; only for a 32-byte aligned
 * dst, else ordinary stores). */
#define COPY_128(STORE) \
    for (size_t i = 0; i < bytes; i += 128) { \
        const __m256i a = _mm256_loadu_si256((const __m256i *)(src + i)); \
        const __m256i b = _mm256_loadu_si256((const __m256i *)(src + i + 32)); \
        const __m256i c = _mm256_loadu_si256((const __m256i *)(src + i + 64)); \
        const __m256i d = _mm256_loadu_si256((const __m256i *)(src + i + 96)); \
        STORE((__m256i *)(dst + i), a); STORE((__m256i *)(dst + i + 32), b); \
        STORE((__m256i *)(dst + i + 64), c); STORE((__m256i *)(dst + i + 96), d); \
    }
static void copy_row_to(int stream, char *restrict dst, const char *restrict src, size_t bytes) {
    VECTOR_CODE(
    if (!(bytes & 127)) {
        if (stream && !((uintptr_t)dst & 31)) COPY_128(_mm256_stream_si256)
        else COPY_128(_mm256_storeu_si256)
        return;
    })
    (void)stream;
    memcpy(dst, src, bytes);
}

/* rows of a whole number of 128-byte chunks, up to 16 KiB, each chunk's counterpart 4 KiB (or
 * one row) on prefetched (rows of 0.5-4 KiB taken out of order: a CNOT on them ran at 1.1-1.3
 * clones at 2^20 complex64, 0.8-0.95 with; 1.5-2.0 -> 1.1 at 2^20 complex128, 16 MiB; 8 KiB rows,
 * CNOT(9, 10) at 2^21 complex64: 1.2-1.6 -> 1.1). Longer rows are streams the hardware
 * prefetcher follows. Streamed outputs (from 32 MiB) prefetch only the input: CNOT(13, 14) at
 * 2^22 complex64, 1-2 KiB rows, 1.1-1.3 -> 0.7-0.85 clones. */
static void copy_rows(const char *restrict in, char *restrict out, int64_t l0, int64_t l1, int64_t S,
                      const int64_t *restrict idx, size_t row, int stream) {
    const int64_t ahead = row >= 4096 ? 1 : (int64_t)(4096 / row);
    int64_t la = l0 + ahead / S, ja = ahead % S;
    for (int64_t l = l0; l < l1; ++l)
        for (int64_t j = 0; j < S; ++j) {
            const char *src = in + ((size_t)(l * S + idx[j])) * row, *pre = in + ((size_t)(la * S + idx[ja])) * row;
            char *dst = out + ((size_t)(l * S + j)) * row, *prw = out + ((size_t)(la * S + ja)) * row;
            if (++ja == S) { ja = 0; ++la; }
            if (la >= l1) pre = src, prw = dst;       /* no address past this thread's blocks */
            for (size_t i = 0; i < row; i += 128) {
                __builtin_prefetch(pre + i, 0, 3); __builtin_prefetch(pre + i + 64, 0, 3);
                if (!stream) { __builtin_prefetch(prw + i, 1, 3); __builtin_prefetch(prw + i + 64, 1, 3); }
                copy_row_to(stream, dst + i, src + i, 128);
            }
        }
}

void tql_permute(const char *restrict in, char *restrict out, int64_t blocks, int64_t S, int64_t R,
                 const int64_t *restrict idx, int64_t esize, int nthreads) {
    const int64_t row = R * esize;
    int stream = 0;
    VECTOR_CODE(stream = stream_output(out, blocks * S * row);)
    if (row % 128 == 0 && row <= 16384 && (blocks * S * row <= ((int64_t)16 << 20) || stream)) {
        const int64_t parts = nthreads > 1 ? nthreads : 1;     /* one range of blocks a thread */
        #pragma omp parallel for schedule(static) num_threads(nthreads) if(blocks * S * R >= 16384)
        for (int64_t t = 0; t < parts; ++t)
            copy_rows(in, out, blocks * t / parts, blocks * (t + 1) / parts, S, idx, (size_t)row, stream);
        if (stream) end_streams();
        return;
    }
    if (R > 1) {
        /* rows cut into segments of at most 64 KiB, the unit a thread takes: a span from wire 0
         * is one block (CNOT(0, 1) copied on one thread: 1.3-2 clones at 2^22-2^24) */
        const int64_t seg = row < ((int64_t)64 << 10) ? row : ((int64_t)64 << 10), segs = row / seg;
        #pragma omp parallel for schedule(static) num_threads(nthreads) if(blocks * S * R >= 16384)
        for (int64_t t = 0; t < blocks * S * segs; ++t) {
            const int64_t l = t / (S * segs), j = t / segs % S, o = t % segs * seg;
            copy_row_to(stream, out + (l * S + j) * row + o, in + (l * S + idx[j]) * row + o, (size_t)seg);
        }
        if (stream) end_streams();
        return;
    }
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
            /* (R == 1: a 1-amplitude row of another size; none reaches here from torch states) */
            for (int64_t j = 0; j < S; ++j) memcpy(dst + j * row, src + idx[j] * row, (size_t)row);
        }
    }
}


/* Diagonal observables (Z strings): E[b, o] = sum_i |psi[b, i]|^2 w[o, i], and its gradient
 * 2 psi[b, i] sum_o g[b, o] w[o, i]. w is (n_obs, N) real: each observable's row streams against
 * a chunk's |psi|^2 (or gradient weights) held in cache; a (B, 2N) x (2N, n_obs) GEMM with ten
 * columns ran at a few GFLOP/s. Threads split (sample, chunk) pairs, so one sample takes them all
 * (split by sample, a single state's <H> ran on one thread: 2.7 clones at 2^20 with one row, 10
 * with four). Sums go to double every 256 amplitudes. */
#define DIAG_CHUNK 2048
#define DEF_DIAG_EXPVAL(NAME, GRAD, T) \
void NAME(const T *restrict psi, int64_t B, int64_t N, int64_t n_obs, const T *restrict w, \
          double *restrict out, int nthreads) { \
    const int64_t BO = B * n_obs, C = N < DIAG_CHUNK ? N : DIAG_CHUNK, per = N / C; \
    for (int64_t k = 0; k < BO; ++k) out[k] = 0; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(B * N * n_obs >= 65536) reduction(+:out[:BO])") \
    for (int64_t c = 0; c < B * per; ++c) { \
        const int64_t b = c / per, i0 = c % per * C; \
        const T *x = psi + 2 * (N * b + i0); \
        T p[DIAG_CHUNK]; \
        _Pragma("omp simd") for (int64_t i = 0; i < C; ++i) p[i] = x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1]; \
        for (int64_t o = 0; o < n_obs; ++o) { \
            const T *wo = w + N * o + i0; \
            for (int64_t j0 = 0; j0 < C; j0 += 256) { \
                const int64_t j1 = j0 + 256 < C ? j0 + 256 : C; \
                T acc = 0; \
                _Pragma("omp simd reduction(+:acc)") for (int64_t i = j0; i < j1; ++i) acc += p[i] * wo[i]; \
                out[n_obs * b + o] += acc; \
            } \
        } \
    } \
} \
void GRAD(const T *restrict psi, const T *restrict g, int64_t B, int64_t N, int64_t n_obs, \
          const T *restrict w, T *restrict out, int nthreads) { \
    const int64_t C = N < DIAG_CHUNK ? N : DIAG_CHUNK, per = N / C; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(B * N * n_obs >= 65536)") \
    for (int64_t c = 0; c < B * per; ++c) { \
        const int64_t b = c / per, i0 = c % per * C; \
        T d[DIAG_CHUNK]; \
        memset(d, 0, (size_t)C * sizeof(T)); \
        for (int64_t o = 0; o < n_obs; ++o) { \
            const T co = 2 * g[n_obs * b + o], *wo = w + N * o + i0; \
            _Pragma("omp simd") for (int64_t i = 0; i < C; ++i) d[i] += co * wo[i]; \
        } \
        const T *x = psi + 2 * (N * b + i0); \
        T *y = out + 2 * (N * b + i0); \
        _Pragma("omp simd") for (int64_t i = 0; i < C; ++i) { y[2 * i] = x[2 * i] * d[i]; y[2 * i + 1] = x[2 * i + 1] * d[i]; } \
    } \
}
DEF_DIAG_EXPVAL(tql_diag_expval_c64, tql_diag_expval_grad_c64, float)
DEF_DIAG_EXPVAL(tql_diag_expval_c128, tql_diag_expval_grad_c128, double)

/* Single-wire Z observables (<Z_w> on every wire: the usual readout) without a table per wire:
 * S[b, 0] = sum_i |psi[b, i]|^2 and S[b, 1 + k] = the same over the i with index bit k set, one
 * pass. A chunk's |psi|^2 (in cache) is folded in half once per bit inside it, the upper half's sum
 * being that bit's share (2 adds an amplitude); the bits above the chunk take its total. The
 * gradient of sum_b G[b] S[b, 0] + sum_k H[b, k] S[b, 1 + k] is 2 psi (G + sum_{k set} H[b, k]),
 * the chunk's bits summed once per chunk into a table of its 2^c low patterns. */
#define BIT_CHUNK_LOG 11
#define DEF_BIT_SUMS(NAME, GRAD, T) \
void NAME(const T *restrict psi, int64_t B, int64_t n, double *restrict out, int nthreads) { \
    const int64_t N = (int64_t)1 << n, c = n < BIT_CHUNK_LOG ? n : BIT_CHUNK_LOG, C = (int64_t)1 << c; \
    const int64_t per = N >> c, BS = B * (n + 1); \
    for (int64_t k = 0; k < BS; ++k) out[k] = 0; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(B * N >= 65536) reduction(+:out[:BS])") \
    for (int64_t t = 0; t < B * per; ++t) { \
        const int64_t b = t / per, q = t % per; \
        const T *x = psi + 2 * (N * b + C * q); \
        double *o = out + (n + 1) * b; \
        T p[(int64_t)1 << BIT_CHUNK_LOG]; \
        _Pragma("omp simd") for (int64_t i = 0; i < C; ++i) p[i] = x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1]; \
        for (int64_t k = c - 1; k >= 0; --k) { \
            const int64_t h = (int64_t)1 << k; \
            T upper = 0; \
            _Pragma("omp simd reduction(+:upper)") for (int64_t j = 0; j < h; ++j) { upper += p[j + h]; p[j] += p[j + h]; } \
            o[1 + k] += upper; \
        } \
        o[0] += p[0]; \
        for (int64_t k = c; k < n; ++k) if ((q >> (k - c)) & 1) o[1 + k] += p[0]; \
    } \
} \
void GRAD(const T *restrict psi, const double *restrict G, const double *restrict H, int64_t B, int64_t n, \
          T *restrict out, int nthreads) { \
    const int64_t N = (int64_t)1 << n, c = n < BIT_CHUNK_LOG ? n : BIT_CHUNK_LOG, C = (int64_t)1 << c; \
    const int64_t per = N >> c; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(B * N >= 65536)") \
    for (int64_t t = 0; t < B * per; ++t) { \
        const int64_t b = t / per, q = t % per; \
        const double *h = H + n * b; \
        double base = G[b]; \
        for (int64_t k = c; k < n; ++k) if ((q >> (k - c)) & 1) base += h[k]; \
        T d[(int64_t)1 << BIT_CHUNK_LOG]; \
        d[0] = (T)(2 * base); \
        for (int64_t k = 0; k < c; ++k) {          /* patterns with top bit k: those below plus H[k] */ \
            const int64_t w = (int64_t)1 << k; \
            const T add = (T)(2 * h[k]); \
            for (int64_t j = 0; j < w; ++j) d[w + j] = d[j] + add; \
        } \
        const T *x = psi + 2 * (N * b + C * q); \
        T *y = out + 2 * (N * b + C * q); \
        _Pragma("omp simd") for (int64_t i = 0; i < C; ++i) { y[2 * i] = x[2 * i] * d[i]; y[2 * i + 1] = x[2 * i + 1] * d[i]; } \
    } \
}
DEF_BIT_SUMS(tql_bit_sums_c64, tql_bit_sums_grad_c64, float)
DEF_BIT_SUMS(tql_bit_sums_c128, tql_bit_sums_grad_c128, double)

/* |psi|^2 (probabilities) in one pass: torch's real^2 + imag^2 is three (2.3-3.3 clones) */
#define DEF_ABS2(NAME, T) \
void NAME(const T *restrict psi, T *restrict out, int64_t len, int nthreads) { \
    _Pragma("omp parallel for simd schedule(static) num_threads(nthreads) if(len >= 65536)") \
    for (int64_t i = 0; i < len; ++i) out[i] = psi[2 * i] * psi[2 * i] + psi[2 * i + 1] * psi[2 * i + 1]; \
}
DEF_ABS2(tql_abs2_c64, float)
DEF_ABS2(tql_abs2_c128, double)
/* ... and its gradient y = c psi g for a real g (B, N) of strides (gsb, gsi), gsi 0 or 1: the
 * sum's gradient arrives expanded from one number (strides 0), torch's complex-by-real product
 * took 4-5 clones */
#define DEF_SCALE_BY_REAL(NAME, T) \
void NAME(const T *restrict psi, const T *restrict g, int64_t B, int64_t N, int64_t gsb, int64_t gsi, double c, \
          T *restrict out, int nthreads) { \
    const int64_t C = N < 4096 ? N : 4096, per = N / C; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(B * N >= 65536)") \
    for (int64_t t = 0; t < B * per; ++t) { \
        const int64_t b = t / per, i0 = t % per * C; \
        const T *x = psi + 2 * (N * b + i0), *gb = g + gsb * b + gsi * i0; \
        T *y = out + 2 * (N * b + i0); \
        if (gsi == 0) { \
            const T k = (T)c * gb[0]; \
            _Pragma("omp simd") for (int64_t i = 0; i < 2 * C; ++i) y[i] = k * x[i]; \
        } else { \
            _Pragma("omp simd") for (int64_t i = 0; i < C; ++i) { \
                const T k = (T)c * gb[i]; \
                y[2 * i] = k * x[2 * i]; y[2 * i + 1] = k * x[2 * i + 1]; \
            } \
        } \
    } \
}
DEF_SCALE_BY_REAL(tql_scale_by_real_c64, float)
DEF_SCALE_BY_REAL(tql_scale_by_real_c128, double)

/* The running sum of |psi|^2 along each sample (the CDF sampling searches), in double: chunk
 * totals in parallel, their offsets, then each chunk's running sum in parallel (torch's cumsum is
 * one thread: 4 clones at 2^20 with the probabilities and the cast before it). Returns 0 when
 * its scratch cannot be had (the caller falls back). */
#define CDF_CHUNK 4096
#define DEF_CDF(NAME, T) \
int NAME(const T *restrict psi, int64_t B, int64_t N, double *restrict out, int nthreads) { \
    const int64_t C = N < CDF_CHUNK ? N : CDF_CHUNK, per = N / C; \
    double *part = (double *)malloc((size_t)(B * per) * sizeof(double)); \
    if (!part) return 0; \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(B * N >= 65536)") \
    for (int64_t t = 0; t < B * per; ++t) { \
        const T *x = psi + 2 * C * t; \
        double total = 0; \
        _Pragma("omp simd reduction(+:total)") \
        for (int64_t i = 0; i < C; ++i) total += (double)(x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1]); \
        part[t] = total; \
    } \
    for (int64_t b = 0; b < B; ++b) {             /* each chunk's offset: the chunks before it */ \
        double run = 0; \
        for (int64_t q = 0; q < per; ++q) { const double v = part[per * b + q]; part[per * b + q] = run; run += v; } \
    } \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(B * N >= 65536)") \
    for (int64_t t = 0; t < B * per; ++t) { \
        const T *x = psi + 2 * C * t; \
        double *y = out + C * t, run = part[t]; \
        for (int64_t i = 0; i < C; ++i) { run += (double)(x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1]); y[i] = run; } \
    } \
    free(part); \
    return 1; \
}
DEF_CDF(tql_cdf_c64, float)
DEF_CDF(tql_cdf_c128, double)

/* out[b, s] = the first i with cdf[b, i] > u[b, s] (upper bound; N - 1 when none), threads
 * over all draws: torch's searchsorted took 11 ms for 256 x 1000 draws in 4096-long rows, one
 * branch-free binary search at a time 10 ms */
#define SEARCH_GROUP 16
void tql_upper_bound(const double *restrict cdf, int64_t B, int64_t N, const double *restrict u, int64_t shots,
                     int64_t *restrict out, int nthreads) {
    const int64_t total = B * shots, groups = (total + SEARCH_GROUP - 1) / SEARCH_GROUP;
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(total >= 4096)
    for (int64_t g = 0; g < groups; ++g) {
        /* SEARCH_GROUP searches in lockstep, each step a conditional move: one search is a chain
         * of dependent loads (and its branches coin flips); side by side their loads overlap */
        const int64_t t0 = g * SEARCH_GROUP, m = total - t0 < SEARCH_GROUP ? total - t0 : SEARCH_GROUP;
        const double *row[SEARCH_GROUP], *base[SEARCH_GROUP];
        double v[SEARCH_GROUP];
        for (int64_t j = 0; j < m; ++j) { row[j] = base[j] = cdf + N * ((t0 + j) / shots); v[j] = u[t0 + j]; }
        for (int64_t len = N; len > 1; ) {
            const int64_t half = len >> 1;
            for (int64_t j = 0; j < m; ++j) base[j] = base[j][half - 1] <= v[j] ? base[j] + half : base[j];
            len -= half;
        }
        for (int64_t j = 0; j < m; ++j) {
            const int64_t i = (base[j] - row[j]) + (base[j][0] <= v[j]);
            out[t0 + j] = i < N ? i : N - 1;
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
#define SCALAR_TERM(a, q, r, m) \
    (((q)[0] * (a)[0] + (q)[1] * (a)[1]) * (r) + ((m) ? ((q)[0] * (a)[1] - (q)[1] * (a)[0]) * *(m) : 0))
#define SCALAR_GRAD(gi, pj, u, v) { (gi)[0] += (u) * (pj)[0] - (v) * (pj)[1]; (gi)[1] += (u) * (pj)[1] + (v) * (pj)[0]; }

/* Σ Re(conj q a) r + Im(conj q a) m over `len` contiguous pairs (a, q); and over i in [i0, i0 + len)
 * with q = psi[i ^ x] and the tables indexed by i. */
#define DEF_PAIR_SUMS(SUF, T) \
static T pair_block_##SUF(const T *a, const T *q, const T *r, const T *m, int64_t len) { \
    T acc = 0; \
    int64_t l = 0; \
    VECTOR_CODE( \
    VEC_##SUF s0 = ZERO_##SUF(), s1 = ZERO_##SUF(); \
    const VEC_##SUF sign = MUL_##SUF(SIGNS_##SUF(), SET1_##SUF(-1)); \
    for (; l + LANES_##SUF <= len; l += LANES_##SUF) { \
        const VEC_##SUF A = LOAD_##SUF(a + 2 * l), Q = LOAD_##SUF(q + 2 * l); \
        s0 = FMA_##SUF(MUL_##SUF(Q, A), DUP_##SUF(r + l), s0); \
        if (m) s1 = FMA_##SUF(MUL_##SUF(Q, SWAP_##SUF(A)), MUL_##SUF(DUP_##SUF(m + l), sign), s1); \
    } \
    acc = HSUM_##SUF(ADD_##SUF(s0, s1)); ) \
    for (; l < len; ++l) acc += SCALAR_TERM(a + 2 * l, q + 2 * l, r[l], m ? m + l : 0); \
    return acc; \
} \
static T full_block_##SUF(const T *p, int64_t i0, int64_t len, int64_t x, const T *r, const T *m) { \
    T acc = 0; \
    int64_t i = i0; \
    VECTOR_CODE( \
    if ((i0 & (LANES_##SUF - 1)) == 0) { \
        PARTNER_SETUP_##SUF(x) \
        const VEC_##SUF sign = MUL_##SUF(SIGNS_##SUF(), SET1_##SUF(-1)); \
        VEC_##SUF s0 = ZERO_##SUF(), s1 = ZERO_##SUF(); \
        for (; i + LANES_##SUF <= i0 + len; i += LANES_##SUF) { \
            const VEC_##SUF A = LOAD_##SUF(p + 2 * i), Q = PARTNER_##SUF(p, i); \
            s0 = FMA_##SUF(MUL_##SUF(Q, A), DUP_##SUF(r + i), s0); \
            if (m) s1 = FMA_##SUF(MUL_##SUF(Q, SWAP_##SUF(A)), MUL_##SUF(DUP_##SUF(m + i), sign), s1); \
        } \
        acc = HSUM_##SUF(ADD_##SUF(s0, s1)); \
    } ) \
    for (; i < i0 + len; ++i) acc += SCALAR_TERM(p + 2 * i, p + 2 * (i ^ x), r[i], m ? m + i : 0); \
    return acc; \
}
DEF_PAIR_SUMS(f32, float)
DEF_PAIR_SUMS(f64, double)

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
 * pairs, and g_j += (u - i v) psi_i when gj is given; and the full groups' g_i += (u + i v)
 * psi_{i ^ x} for i in [i0, i0 + len). u, v = w times the tables. */
#define DEF_PAIR_GRADS(SUF, T) \
static void pair_grad_##SUF(const T *pi, const T *pj, T *gi, T *gj, const T *r, const T *m, T w, int64_t len) { \
    int64_t l = 0; \
    VECTOR_CODE( \
    const VEC_##SUF W = SET1_##SUF(w), ns = SIGNS_##SUF(); \
    for (; l + LANES_##SUF <= len; l += LANES_##SUF) { \
        const VEC_##SUF U = MUL_##SUF(DUP_##SUF(r + l), W); \
        const VEC_##SUF Vs = m ? MUL_##SUF(MUL_##SUF(DUP_##SUF(m + l), W), ns) : ZERO_##SUF(); \
        const VEC_##SUF Pi = LOAD_##SUF(pi + 2 * l), Pj = LOAD_##SUF(pj + 2 * l); \
        STORE_##SUF(gi + 2 * l, FMA_##SUF(Vs, SWAP_##SUF(Pj), FMA_##SUF(U, Pj, LOAD_##SUF(gi + 2 * l)))); \
        if (gj) STORE_##SUF(gj + 2 * l, FNMA_##SUF(Vs, SWAP_##SUF(Pi), FMA_##SUF(U, Pi, LOAD_##SUF(gj + 2 * l)))); \
    } ) \
    for (; l < len; ++l) { \
        const T u = w * r[l], v = m ? w * m[l] : 0; \
        SCALAR_GRAD(gi + 2 * l, pj + 2 * l, u, v) \
        if (gj) SCALAR_GRAD(gj + 2 * l, pi + 2 * l, u, -v) \
    } \
} \
static void full_grad_##SUF(const T *p, T *g, int64_t i0, int64_t len, int64_t x, const T *r, const T *m, T w) { \
    int64_t i = i0; \
    VECTOR_CODE( \
    if ((i0 & (LANES_##SUF - 1)) == 0) { \
        PARTNER_SETUP_##SUF(x) \
        const VEC_##SUF W = SET1_##SUF(w), ns = SIGNS_##SUF(); \
        for (; i + LANES_##SUF <= i0 + len; i += LANES_##SUF) { \
            const VEC_##SUF U = MUL_##SUF(DUP_##SUF(r + i), W); \
            const VEC_##SUF Vs = m ? MUL_##SUF(MUL_##SUF(DUP_##SUF(m + i), W), ns) : ZERO_##SUF(); \
            const VEC_##SUF Pj = PARTNER_##SUF(p, i); \
            STORE_##SUF(g + 2 * i, FMA_##SUF(Vs, SWAP_##SUF(Pj), FMA_##SUF(U, Pj, LOAD_##SUF(g + 2 * i)))); \
        } \
    } ) \
    for (; i < i0 + len; ++i) { \
        const T u = w * r[i], v = m ? w * m[i] : 0; \
        SCALAR_GRAD(g + 2 * i, p + 2 * (i ^ x), u, v) \
    } \
}
DEF_PAIR_GRADS(f32, float)
DEF_PAIR_GRADS(f64, double)

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
/* (PF: a constant, so that the loop without prefetches carries none of their bookkeeping) */
#define BLOCK_LOOP_PF(TT, WW, PF) \
    for (int64_t c = c0; c < c1; ++c) { \
        for (int64_t jh = 0; jh < KH; ++jh) { \
            const TT *s = (const TT *)sb + i; \
            TT *d = (TT *)db + i + dstoff[jh]; \
            const int64_t *o = srcoff + jh * WW; \
            if (PF) PREFETCH_LINES((const TT *)sb + ia + o[0], (TT *)db + ia + dstoff[jh]) \
            for (int l = 0; l < WW; ++l) d[l] = s[o[l]]; \
        } \
        i = ((i | fixed) + 1) & ~fixed; \
        if (PF) ia = ((ia | fixed) + 1) & ~fixed; \
    }
#define BLOCK_LOOP(TT, WW) if (prefetch) BLOCK_LOOP_PF(TT, WW, 1) else BLOCK_LOOP_PF(TT, WW, 0)
/* The line blocks of one sample: `outer` of them, the c-th starting at spread(c) (c's bits placed on
 * the positions outside `fixed`); worked in chunks of 1024 blocks, (sample, chunk) in parallel. */
static int64_t block_count(int64_t n, int64_t fixed) {
    int64_t free_bits = 0;
    for (int64_t pos = 0; pos < n; ++pos) free_bits += !((fixed >> pos) & 1);
    return (int64_t)1 << free_bits;
}
static int64_t spread(int64_t c, int64_t fixed, int64_t n) {
    int64_t i = 0;
    for (int64_t bit = 0, pos = 0; pos < n; ++pos) {
        if ((fixed >> pos) & 1) continue;
        i |= ((c >> bit) & 1) << pos;
        ++bit;
    }
    return i;
}
/* When the KH lines of a block lie at most 4 KiB apart (the lowest high wire's stride), each
 * step also prefetches the lines of the block `ahead` steps on (128 lines, 8 KiB, of work ahead),
 * the output's for writing: runs that short, interleaved, are streams the hardware prefetcher
 * loses (RZZ or CNOT between wire 10 and the last wire at 2^20 complex64: 1.6-1.7 -> 1.1-1.3
 * clones, with the register paths below); farther apart it follows them, and prefetches only
 * cost (CNOT(0, 23) at 2^24 complex128: 1.08 -> 1.27 with them) -- except in states of up to
 * 16 MiB, which L3 holds beside their output (CNOT(0, n-1) at 2^20-2^21: 0.93-1.18 -> 0.70-1.04,
 * CNOT(n-1, 0) 1.53-1.72 -> 1.19-1.44). Past the end of a chunk the addresses are those of the
 * next one; past the state's end prefetches are dropped. */
#define PREFETCH_LINES(src, dst) if (prefetch) { __builtin_prefetch(src, 0, 3); __builtin_prefetch(dst, 1, 3); }
#define BLOCK_CHUNKS(ESIZE, ...) { \
    const int64_t N = (int64_t)1 << n, W = (int64_t)1 << b, fixed = maskH | (W - 1); \
    const int64_t outer = block_count(n, fixed), chunk = 1024, chunks = (outer + chunk - 1) / chunk; \
    const int64_t ahead = KH >= 128 ? 1 : 128 / KH; \
    const int prefetch = maskH && ((maskH & -maskH) * (int64_t)(ESIZE) <= 4096 \
                                   || batch * N * (int64_t)(ESIZE) <= ((int64_t)16 << 20)); \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(batch * N >= 16384)") \
    for (int64_t t = 0; t < batch * chunks; ++t) { \
        const int64_t bt = t / chunks, c0 = (t % chunks) * chunk; \
        const int64_t c1 = c0 + chunk < outer ? c0 + chunk : outer; \
        int64_t i = spread(c0, fixed, n), ia = spread(c0 + ahead < outer ? c0 + ahead : outer - 1, fixed, n); \
        __VA_ARGS__ \
    } }
/* Lines of eight 8-byte lanes (complex64 amplitudes, or the halves of complex128 ones) whose every
 * pattern jh takes its lanes from one source line (CNOT, SWAP, any gate whose low wires only move
 * amplitudes within a line): per pattern, the line's base and the lane permutation of each of its
 * two registers with the blend mask choosing the register */
typedef struct {
    int64_t base[64];
    int64_t one[64][2];   /* the float offset (0 or 8) of the register all lanes of an output come from */
    int single;           /* every output register comes from one source register: no blend */
    /* some pattern takes lanes from other lines (a control on the last wires of a gate whose target
     * is above them: CNOT(n-1, 0)): each output register blends two registers anywhere, whose
     * 8-byte-unit offsets from the block's base are reg[jh][h]; `from` picks the second */
    int anywhere;
    int blend_only;       /* ... and every lane keeps its place: a blend alone (a control low, the targets high) */
    int64_t reg[64][2][2];
    VECTOR_CODE(__m256i lane[64][2]; __m256 from[64][2];)
} tql_line_perms;

static int line_perms(const int64_t *srcoff, int64_t KH, tql_line_perms *lp) {
    VECTOR_CODE(
    if (KH > 64) return 0;
    lp->single = 1;
    lp->anywhere = 0;
    for (int64_t j = 0; j < 8 * KH; ++j) {
        const int64_t src = srcoff[j] - (srcoff[j & ~(int64_t)7] & ~(int64_t)7);
        lp->anywhere |= src < 0 || src >= 8;
    }
    lp->single = !lp->anywhere;
    lp->blend_only = lp->anywhere;
    for (int64_t jh = 0; jh < KH; ++jh) {
        const int64_t *o = srcoff + 8 * jh, base = o[0] & ~(int64_t)7;
        int32_t lane[8], from[8];
        for (int h = 0; h < 2; ++h) {
            int regs = 0;     /* bit r set: lanes come from source register r */
            const int64_t r0 = o[4 * h] & ~(int64_t)3;
            int64_t r1 = -1;
            for (int l = 0; l < 4; ++l) {
                const int64_t src = lp->anywhere ? o[4 * h + l] : o[4 * h + l] - base;
                int second = src >= 4;
                if (lp->anywhere) {
                    const int64_t reg = src & ~(int64_t)3;
                    if (reg != r0 && r1 < 0) r1 = reg;
                    if (reg != r0 && reg != r1) return 0;          /* three source registers */
                    second = reg != r0;
                }
                lp->blend_only &= (src & 3) == l;
                lane[2 * l] = (int32_t)(2 * (src & 3));
                lane[2 * l + 1] = (int32_t)(2 * (src & 3) + 1);
                from[2 * l] = from[2 * l + 1] = second ? -1 : 0;
                regs |= 1 << second;
            }
            lp->reg[jh][h][0] = r0;
            lp->reg[jh][h][1] = r1 < 0 ? r0 : r1;
            lp->one[jh][h] = regs == 2 ? 8 : 0;
            lp->single &= regs != 3;
            lp->lane[jh][h] = _mm256_loadu_si256((const __m256i *)lane);
            lp->from[jh][h] = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)from));
        }
        lp->base[jh] = base;
    }
    return 1; )
    (void)srcoff; (void)KH; (void)lp;
    return 0;
}

void tql_permute_blocks(const char *restrict in, char *restrict out, int64_t batch, int64_t n, int64_t b,
                        int64_t maskH, int64_t KH, const int64_t *restrict dstoff, const int64_t *restrict srcoff,
                        int64_t esize, int nthreads) {
    tql_line_perms lp;
    /* complex128 lines are permuted as eight 8-byte halves, u = 2 of them an amplitude */
    const int64_t u = esize / 8;
    int by_registers = 0;
    (void)u;      /* (read by the AVX2 loops only) */
    int stream = 0;
    VECTOR_CODE(stream = stream_output(out, batch * ((int64_t)1 << n) * esize);)
    if (esize == 8 && b == 3) by_registers = line_perms(srcoff, KH, &lp);
    else if (esize == 16 && b == 2 && KH <= 64) {
        int64_t halves[64 * 8];
        for (int64_t j = 0; j < KH * 8; ++j) halves[j] = 2 * srcoff[j / 2] + (j & 1);
        by_registers = line_perms(halves, KH, &lp);
    }
    /* lanes from two lines: the registers' blends only where they can stream (CNOT(n-1, 0), (n-1, 3),
     * (n-2, 1) at 2^22-2^24, interleaved in one process, two runs: 1.15-1.84 -> 0.84-1.57 clones);
     * in smaller states they lost to the scalar loop (2^20 complex128: 1.2-1.4 -> 1.8-1.9) */
    /* ... except blends alone (every lane in place: a control low, the targets above the line),
     * complex64 at any size: CNOT(n-1, 0), CNOT(n-2, n/2), CCX(n-1, n-2, 0) at 2^20, interleaved
     * in one process, 2.2-2.6 -> 1.25-1.5 clones; CCX(n-1, 3, 0), CSWAP(n-1, 0, 1) 2.1-2.6 -> 1.5 (at
     * 2^18 2.9 -> 2.1; complex128's scalar loop below 32 MiB won against them, 1.1-1.3 vs 1.2-2.3) */
    const int blend = by_registers && lp.blend_only && KH <= 8 && (esize == 8 || stream);
    if (by_registers && lp.anywhere && !stream && !blend) by_registers = 0;
    BLOCK_CHUNKS(esize,
        const char *sb = in + bt * N * esize;
        char *db = out + bt * N * esize;
        if (by_registers) {
            /* permute both registers of the source line and blend: the scalar loop moved one
             * amplitude at a time (1.6-2.3 clones for a CNOT on the last wires at 2^20);
             * pointers count 8-byte units, u of them an amplitude */
            VECTOR_CODE(
            const int64_t *restrict s = (const int64_t *)sb;
            int64_t *restrict d = (int64_t *)db;
            if (blend && KH == 2) {
                /* (one high wire: every offset and mask in a register; the loop below, which
                 * reads them per line, took 1.5 clones here against 1.25) */
                const int64_t r000 = lp.reg[0][0][0], r001 = lp.reg[0][0][1], r010 = lp.reg[0][1][0], r011 = lp.reg[0][1][1];
                const int64_t r100 = lp.reg[1][0][0], r101 = lp.reg[1][0][1], r110 = lp.reg[1][1][0], r111 = lp.reg[1][1][1];
                const int64_t d1 = u * dstoff[1];
                const __m256 f00 = lp.from[0][0], f01 = lp.from[0][1], f10 = lp.from[1][0], f11 = lp.from[1][1];
                for (int64_t c = c0; c < c1; ++c) {
                    const int64_t *x = s + u * i;
                    int64_t *y = d + u * i;
                    if (prefetch) {
                        const int64_t *xa = s + u * ia;
                        __builtin_prefetch(xa + r000, 0, 3); __builtin_prefetch(xa + r001, 0, 3);
                        __builtin_prefetch(d + u * ia, 1, 3); __builtin_prefetch(d + u * ia + d1, 1, 3);
                    }
                    const __m256 y00 = _mm256_blendv_ps(_mm256_loadu_ps((const float *)(x + r000)), _mm256_loadu_ps((const float *)(x + r001)), f00);
                    const __m256 y01 = _mm256_blendv_ps(_mm256_loadu_ps((const float *)(x + r010)), _mm256_loadu_ps((const float *)(x + r011)), f01);
                    const __m256 y10 = _mm256_blendv_ps(_mm256_loadu_ps((const float *)(x + r100)), _mm256_loadu_ps((const float *)(x + r101)), f10);
                    const __m256 y11 = _mm256_blendv_ps(_mm256_loadu_ps((const float *)(x + r110)), _mm256_loadu_ps((const float *)(x + r111)), f11);
                    PUT_f32(stream, (float *)y, y00);
                    PUT_f32(stream, (float *)(y + 4), y01);
                    PUT_f32(stream, (float *)(y + d1), y10);
                    PUT_f32(stream, (float *)(y + d1 + 4), y11);
                    i = ((i | fixed) + 1) & ~fixed;
                    ia = ((ia | fixed) + 1) & ~fixed;
                }
            } else if (blend) {
                /* offsets and masks copied out of lp, compact: the permute-and-blend loop below
                 * reading them there took 2.1-2.6 clones */
                int64_t off[8][4], dst8[8];
                __m256 msk[8][2];
                for (int64_t jh = 0; jh < KH; ++jh) {
                    for (int h = 0; h < 2; ++h) {
                        off[jh][2 * h] = lp.reg[jh][h][0]; off[jh][2 * h + 1] = lp.reg[jh][h][1];
                        msk[jh][h] = lp.from[jh][h];
                    }
                    dst8[jh] = u * dstoff[jh];
                }
                for (int64_t c = c0; c < c1; ++c) {
                    const int64_t *x = s + u * i;
                    int64_t *y = d + u * i;
                    if (prefetch) {
                        const int64_t *xa = s + u * ia;
                        for (int64_t jh = 0; jh < KH; ++jh) {
                            __builtin_prefetch(xa + dst8[jh], 0, 3);
                            __builtin_prefetch(d + u * ia + dst8[jh], 1, 3);
                        }
                    }
                    for (int64_t jh = 0; jh < KH; ++jh) {
                        const int64_t *o = off[jh];
                        const __m256 y0 = _mm256_blendv_ps(_mm256_loadu_ps((const float *)(x + o[0])), _mm256_loadu_ps((const float *)(x + o[1])), msk[jh][0]);
                        const __m256 y1 = _mm256_blendv_ps(_mm256_loadu_ps((const float *)(x + o[2])), _mm256_loadu_ps((const float *)(x + o[3])), msk[jh][1]);
                        PUT_f32(stream, (float *)(y + dst8[jh]), y0);
                        PUT_f32(stream, (float *)(y + dst8[jh] + 4), y1);
                    }
                    i = ((i | fixed) + 1) & ~fixed;
                    ia = ((ia | fixed) + 1) & ~fixed;
                }
            } else if (lp.anywhere) {
                for (int64_t c = c0; c < c1; ++c) {
                    for (int64_t jh = 0; jh < KH; ++jh) {
                        PREFETCH_LINES(s + u * ia + lp.reg[jh][0][0], d + u * (ia + dstoff[jh]))
                        if (prefetch) __builtin_prefetch(s + u * ia + lp.reg[jh][0][1], 0, 3);
                        float *dst = (float *)(d + u * (i + dstoff[jh]));
                        for (int h = 0; h < 2; ++h) {
                            const __m256 x0 = _mm256_loadu_ps((const float *)(s + u * i + lp.reg[jh][h][0]));
                            const __m256 x1 = _mm256_loadu_ps((const float *)(s + u * i + lp.reg[jh][h][1]));
                            PUT_f32(stream, dst + 8 * h, _mm256_blendv_ps(_mm256_permutevar8x32_ps(x0, lp.lane[jh][h]),
                                                                       _mm256_permutevar8x32_ps(x1, lp.lane[jh][h]),
                                                                       lp.from[jh][h]));
                        }
                    }
                    i = ((i | fixed) + 1) & ~fixed;
                    ia = ((ia | fixed) + 1) & ~fixed;
                }
            } else if (lp.single && KH == 1) {
                /* every wire inside the line: one stream, which the hardware prefetcher follows, */
                /* the permutations held in registers (1.2-1.5 -> 0.9-1.1 clones at 2^20) */
                const __m256i p0 = lp.lane[0][0], p1 = lp.lane[0][1];
                const int64_t o0 = lp.one[0][0], o1 = lp.one[0][1];
                const float *src = (const float *)(s + u * i + lp.base[0]);
                float *dst = (float *)(d + u * (i + dstoff[0]));
                for (int64_t c = 0; c < c1 - c0; ++c) {
                    PUT_f32(stream, dst + 16 * c, _mm256_permutevar8x32_ps(_mm256_loadu_ps(src + 16 * c + o0), p0));
                    PUT_f32(stream, dst + 16 * c + 8, _mm256_permutevar8x32_ps(_mm256_loadu_ps(src + 16 * c + o1), p1));
                }
            } else if (lp.single && KH == 2) {
                /* one wire above the line (a CNOT between it and the last wires): both patterns' */
                /* permutations in registers */
                const __m256i p00 = lp.lane[0][0], p01 = lp.lane[0][1], p10 = lp.lane[1][0], p11 = lp.lane[1][1];
                const int64_t s0 = lp.base[0], s1 = lp.base[1], d1 = dstoff[1];
                const int64_t o00 = lp.one[0][0], o01 = lp.one[0][1], o10 = lp.one[1][0], o11 = lp.one[1][1];
                for (int64_t c = c0; c < c1; ++c) {
                    PREFETCH_LINES(s + u * ia + s0, d + u * ia)
                    PREFETCH_LINES(s + u * ia + s1, d + u * (ia + d1))
                    const float *x0 = (const float *)(s + u * i + s0), *x1 = (const float *)(s + u * i + s1);
                    float *y0 = (float *)(d + u * i), *y1 = (float *)(d + u * (i + d1));
                    PUT_f32(stream, y0, _mm256_permutevar8x32_ps(_mm256_loadu_ps(x0 + o00), p00));
                    PUT_f32(stream, y0 + 8, _mm256_permutevar8x32_ps(_mm256_loadu_ps(x0 + o01), p01));
                    PUT_f32(stream, y1, _mm256_permutevar8x32_ps(_mm256_loadu_ps(x1 + o10), p10));
                    PUT_f32(stream, y1 + 8, _mm256_permutevar8x32_ps(_mm256_loadu_ps(x1 + o11), p11));
                    i = ((i | fixed) + 1) & ~fixed;
                    ia = ((ia | fixed) + 1) & ~fixed;
                }
            } else if (lp.single) {
                /* (CNOTs, controlled gates: each output register is one register's permutation) */
                for (int64_t c = c0; c < c1; ++c) {
                    for (int64_t jh = 0; jh < KH; ++jh) {
                        PREFETCH_LINES(s + u * ia + lp.base[jh], d + u * (ia + dstoff[jh]))
                        const float *src = (const float *)(s + u * i + lp.base[jh]);
                        float *dst = (float *)(d + u * (i + dstoff[jh]));
                        PUT_f32(stream, dst, _mm256_permutevar8x32_ps(_mm256_loadu_ps(src + lp.one[jh][0]), lp.lane[jh][0]));
                        PUT_f32(stream, dst + 8, _mm256_permutevar8x32_ps(_mm256_loadu_ps(src + lp.one[jh][1]), lp.lane[jh][1]));
                    }
                    i = ((i | fixed) + 1) & ~fixed;
                    ia = ((ia | fixed) + 1) & ~fixed;
                }
            } else
            for (int64_t c = c0; c < c1; ++c) {
                for (int64_t jh = 0; jh < KH; ++jh) {
                    PREFETCH_LINES(s + u * ia + lp.base[jh], d + u * (ia + dstoff[jh]))
                    const float *src = (const float *)(s + u * i + lp.base[jh]);
                    const __m256 x0 = _mm256_loadu_ps(src), x1 = _mm256_loadu_ps(src + 8);
                    float *dst = (float *)(d + u * (i + dstoff[jh]));
                    PUT_f32(stream, dst, _mm256_blendv_ps(_mm256_permutevar8x32_ps(x0, lp.lane[jh][0]),
                                                           _mm256_permutevar8x32_ps(x1, lp.lane[jh][0]), lp.from[jh][0]));
                    PUT_f32(stream, dst + 8, _mm256_blendv_ps(_mm256_permutevar8x32_ps(x0, lp.lane[jh][1]),
                                                               _mm256_permutevar8x32_ps(x1, lp.lane[jh][1]), lp.from[jh][1]));
                }
                i = ((i | fixed) + 1) & ~fixed;
                ia = ((ia | fixed) + 1) & ~fixed;
            } )
        }
        else if (esize == 16 && W == 4 && KH == 1) {
            int64_t o[4];
            for (int l = 0; l < 4; ++l) o[l] = srcoff[l];
            const tql_pair16 *restrict s = (const tql_pair16 *)sb;
            tql_pair16 *restrict d = (tql_pair16 *)db;
            for (int64_t c = c0; c < c1; ++c, i += 4)     /* (one stream: never prefetched) */
                for (int l = 0; l < 4; ++l) d[i + l] = s[i + o[l]];
        }
        else if (esize == 8 && W == 8) { BLOCK_LOOP(int64_t, 8) }
        else if (esize == 16 && W == 4) { BLOCK_LOOP(tql_pair16, 4) }
        else if (esize == 8) { BLOCK_LOOP(int64_t, W) }
        else { BLOCK_LOOP(tql_pair16, W) }
    )
    if (stream) end_streams();
}

/* A diagonal on k wires in the same line blocks: out[j] = dl[jh][lane] in[j] at j = i + dstoff[jh]
 * + lane (dl: the diagonal entry of each lane's local state, complex, KH x W; W = WW, the lanes of
 * one 64-byte line, which native.py always uses). With AVX2 the lines go in memory order, one
 * stream in and one out, each line's pattern jh read off its high bits (visiting the KH lines of a
 * block together made KH streams 2^bit apart: RZ on a middle wire took 1.6-2.6 clones against 1.0
 * on the last), a line two registers, each times its lanes' (re, re) and (im, im) entries (the
 * scalar loop below compiled to shuffles: an RZZ at 2^20 amplitudes took 3 clones). */
#define DEF_DIAG_BLOCKS(NAME, T, WW, SUF) \
static void NAME##_blocks(const T *restrict in, T *restrict out, int64_t batch, int64_t n, int64_t b, \
                          int64_t maskH, int64_t KH, const int64_t *restrict dstoff, const T *restrict dl, \
                          int nthreads) BLOCK_CHUNKS(2 * sizeof(T), \
    const T *restrict src = in + 2 * bt * N; \
    T *restrict dst = out + 2 * bt * N; \
    for (int64_t c = c0; c < c1; ++c) { \
        for (int64_t jh = 0; jh < KH; ++jh) { \
            const T *restrict x = src + 2 * (i + dstoff[jh]), *restrict m = dl + 2 * WW * jh; \
            T *restrict y = dst + 2 * (i + dstoff[jh]); \
            PREFETCH_LINES(src + 2 * (ia + dstoff[jh]), dst + 2 * (ia + dstoff[jh])) \
            _Pragma("omp simd") for (int64_t l = 0; l < WW; ++l) { \
                y[2 * l] = m[2 * l] * x[2 * l] - m[2 * l + 1] * x[2 * l + 1]; \
                y[2 * l + 1] = m[2 * l] * x[2 * l + 1] + m[2 * l + 1] * x[2 * l]; \
            } \
        } \
        i = ((i | fixed) + 1) & ~fixed; \
        ia = ((ia | fixed) + 1) & ~fixed; \
    } ) \
VECTOR_CODE( \
static void NAME##_lines(const T *restrict in, T *restrict out, int64_t batch, int64_t n, int64_t KH, \
                         const int64_t *restrict dstoff, const T *restrict dl, int nthreads) { \
    VEC_##SUF cr[64][2], ci[64][2]; \
    for (int64_t jh = 0; jh < KH; ++jh) \
        for (int h = 0; h < 2; ++h) { \
            T re[2 * LANES_##SUF], im[2 * LANES_##SUF]; \
            const T *m = dl + 2 * WW * jh + 2 * LANES_##SUF * h; \
            for (int l = 0; l < LANES_##SUF; ++l) { \
                re[2 * l] = re[2 * l + 1] = m[2 * l]; \
                im[2 * l] = im[2 * l + 1] = m[2 * l + 1]; \
            } \
            cr[jh][h] = LOAD_##SUF(re); ci[jh][h] = LOAD_##SUF(im); \
        } \
    /* bit u of jh is set where the line has high bit hb[u] (dstoff[1 << u] is that bit alone) */ \
    int64_t hb[6], kh = 0; \
    for (int64_t u = 0; (int64_t)1 << u < KH; ++u) hb[kh++] = __builtin_ctzll((unsigned long long)dstoff[(int64_t)1 << u]); \
    const int64_t amplitudes = batch * ((int64_t)1 << n), lines = amplitudes / WW, chunk = 1024; \
    const int stream = stream_output(out, amplitudes * 2 * (int64_t)sizeof(T)); \
    _Pragma("omp parallel for schedule(static) num_threads(nthreads) if(amplitudes >= 16384)") \
    for (int64_t c0 = 0; c0 < lines; c0 += chunk) { \
        const int64_t c1 = c0 + chunk < lines ? c0 + chunk : lines; \
        for (int64_t line = c0; line < c1; ++line) { \
            const int64_t i = line * WW; \
            int64_t jh = 0; \
            for (int64_t u = 0; u < kh; ++u) jh |= ((i >> hb[u]) & 1) << u; \
            const VEC_##SUF X0 = LOAD_##SUF(in + 2 * i), X1 = LOAD_##SUF(in + 2 * i + 2 * LANES_##SUF); \
            PUT_##SUF(stream, out + 2 * i, FMADDSUB_##SUF(cr[jh][0], X0, MUL_##SUF(ci[jh][0], SWAP_##SUF(X0)))); \
            PUT_##SUF(stream, out + 2 * i + 2 * LANES_##SUF, FMADDSUB_##SUF(cr[jh][1], X1, MUL_##SUF(ci[jh][1], SWAP_##SUF(X1)))); \
        } \
    } \
} ) \
void NAME(const T *restrict in, T *restrict out, int64_t batch, int64_t n, int64_t b, int64_t maskH, int64_t KH, \
          const int64_t *restrict dstoff, const T *restrict dl, int nthreads) { \
    VECTOR_CODE(if (KH <= 64 && WW == 2 * LANES_##SUF && ((int64_t)1 << n) % WW == 0) { \
        NAME##_lines(in, out, batch, n, KH, dstoff, dl, nthreads); \
        end_streams(); \
        return; \
    }) \
    NAME##_blocks(in, out, batch, n, b, maskH, KH, dstoff, dl, nthreads); \
}
DEF_DIAG_BLOCKS(tql_diag_blocks_c64, float, 8, f32)
DEF_DIAG_BLOCKS(tql_diag_blocks_c128, double, 4, f64)
