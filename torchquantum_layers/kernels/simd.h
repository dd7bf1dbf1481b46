/* The macro layer shared by native.c, program.c and levels.c: scalar 2 x 2 products, and the AVX2 vector
 * vocabulary written once for both precisions (empty without __AVX2__, where the scalar loops
 * do all the work). Complex numbers are interleaved (re, im) pairs of T. */
#ifndef TQL_SIMD_H
#define TQL_SIMD_H
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

/* The loops the gate kernels (program.c, levels.c) share. */
/* The loop twice, threaded and serial (an OpenMP region that the if clause turns off still cost
 * ~1 us a call, which one call per sample of 2^10 amplitudes multiplied by three); the step
 * bodies take CTRL as a constant so that gates without controls test nothing per register. */
#define GATE_LOOP(I, END, INC, BODY) { \
    if (parallel) { \
        _Pragma("omp parallel for schedule(static) num_threads(nthreads)") \
        for (int64_t I = 0; I < (END); I += (INC)) BODY \
    } else \
        for (int64_t I = 0; I < (END); I += (INC)) BODY }
/* CALL on each sample b of `per` amplitudes with nt threads: the samples split among the threads
 * when there are enough of them (nt = 1 each), else one after another with all of them */
#define FOR_SAMPLES(CALL) { \
    const int64_t samples = len / per; \
    if (samples >= nthreads && nthreads > 1 && len >= 32768) { \
        _Pragma("omp parallel for schedule(static) num_threads(nthreads)") \
        for (int64_t b = 0; b < samples; ++b) { const int nt = 1; CALL; } \
    } else \
        for (int64_t b = 0; b < samples; ++b) { const int nt = nthreads; CALL; } }
/* v with a zero bit inserted at `bit` (the bits from it up move one place up) */
static inline int64_t insert_zero(int64_t v, int64_t bit) {
    return ((v >> bit) << (bit + 1)) | (v & (((int64_t)1 << bit) - 1));
}

/* Outputs at least this large are written around the caches (non-temporal stores: no read for
 * ownership of lines about to be overwritten, the third of the traffic a pass otherwise moves).
 * Measured on the 2-core EPYC VMs (32 MiB L3), 2 threads: from 32 MiB (2^22 complex64) a diagonal
 * 1.0-1.2 -> 0.8-1.0 clones and a 1-qubit gate 1.0-1.4 -> 0.7-1.0 (mean over wires); at 8-16 MiB,
 * where input and output fit L3 beside each other, 1.0-1.2 -> 1.4-1.8. Only 32-byte aligned
 * outputs (the stores require it); visible to the other threads at the OpenMP barrier (a locked
 * instruction drains the write-combining buffers) and _mm_sfence after. */
#define TQL_STREAM_BYTES ((int64_t)32 << 20)

/* The vector bodies below are written once for both precisions: a 256-bit register holds
 * LANES complex numbers (4 complex64, 2 complex128); OP_SUF names that precision's intrinsic. */
#ifdef __AVX2__
#include <immintrin.h>
#define VEC_f32 __m256
#define VEC_f64 __m256d
#define LANES_f32 4
#define LANES_f64 2
#define LOAD_f32 _mm256_loadu_ps
#define LOAD_f64 _mm256_loadu_pd
#define STORE_f32 _mm256_storeu_ps
#define STORE_f64 _mm256_storeu_pd
#define MUL_f32 _mm256_mul_ps
#define MUL_f64 _mm256_mul_pd
#define ADD_f32 _mm256_add_ps
#define ADD_f64 _mm256_add_pd
#define FMA_f32 _mm256_fmadd_ps
#define FMA_f64 _mm256_fmadd_pd
#define FNMA_f32 _mm256_fnmadd_ps
#define FNMA_f64 _mm256_fnmadd_pd
#define SET1_f32 _mm256_set1_ps
#define SET1_f64 _mm256_set1_pd
#define ZERO_f32 _mm256_setzero_ps
#define ZERO_f64 _mm256_setzero_pd
#define SIGNS_f32() _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1)        /* (-1, +1) per complex */
#define SIGNS_f64() _mm256_setr_pd(-1, 1, -1, 1)
#define SWAP_f32(v) _mm256_permute_ps(v, 0xB1)                          /* (re, im) -> (im, re) */
#define SWAP_f64(v) _mm256_permute_pd(v, 0x5)
/* each of LANES reals twice: a real table entry against a (re, im) pair */
#define DUP_f32(r) _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(r)), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3))
#define DUP_f64(r) _mm256_permute4x64_pd(_mm256_castpd128_pd256(_mm_loadu_pd(r)), 0x50)
static inline float HSUM_f32(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
}
static inline double HSUM_f64(__m256d v) {
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}
/* The register of the LANES partners psi[i ^ x], i = i0..i0+LANES-1 (i0 aligned): x's bits above
 * the register pick the load, its low bits permute the lanes. */
#define PARTNER_SETUP_f32(x) const int64_t xh_ = (x) & ~(int64_t)3, xl_ = (x) & 3; \
    const __m256i lanes_ = _mm256_setr_epi32(2 * (0 ^ xl_), 2 * (0 ^ xl_) + 1, 2 * (1 ^ xl_), 2 * (1 ^ xl_) + 1, \
                                             2 * (2 ^ xl_), 2 * (2 ^ xl_) + 1, 2 * (3 ^ xl_), 2 * (3 ^ xl_) + 1);
#define PARTNER_f32(p, i) _mm256_permutevar8x32_ps(_mm256_loadu_ps((p) + 2 * ((i) ^ xh_)), lanes_)
#define PARTNER_SETUP_f64(x) const int64_t xh_ = (x) & ~(int64_t)1, xl_ = (x) & 1;
#define PARTNER_f64(p, i) (xl_ ? _mm256_permute2f128_pd(_mm256_loadu_pd((p) + 2 * ((i) ^ xh_)), \
                                                      _mm256_loadu_pd((p) + 2 * ((i) ^ xh_)), 1) \
                               : _mm256_loadu_pd((p) + 2 * ((i) ^ xh_)))
#define BCAST2_f32(a, c) _mm256_setr_ps(a, a, c, c, a, a, c, c)             /* (a, a, c, c) per pair */
#define BCAST2_f64(a, c) _mm256_setr_pd(a, a, c, c)
#define PERM_PAIR_f32 _mm256_permute_ps                                   /* within each complex pair */
#define PERM_PAIR_f64 _mm256_permute4x64_pd
#define ADDSUB_f32 _mm256_addsub_ps
#define ADDSUB_f64 _mm256_addsub_pd
#define FMADDSUB_f32 _mm256_fmaddsub_ps
#define FMADDSUB_f64 _mm256_fmaddsub_pd

static inline int stream_output(const void *out, int64_t bytes) {
    return bytes >= TQL_STREAM_BYTES && ((uintptr_t)out & 31) == 0;
}
#define PUT_f32(stream, p, v) ((stream) ? _mm256_stream_ps((p), (v)) : _mm256_storeu_ps((p), (v)))
#define PUT_f64(stream, p, v) ((stream) ? _mm256_stream_pd((p), (v)) : _mm256_storeu_pd((p), (v)))
#define VECTOR_CODE(...) __VA_ARGS__
#else
#define VECTOR_CODE(...)
#endif

/* this thread's streaming stores are done before the caller reads the output */
static inline void end_streams(void) {
    VECTOR_CODE(_mm_sfence();)
}
#endif
