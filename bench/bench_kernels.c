// bench/bench_kernels.c — GEMV weight bandwidth against the machine's read
// bandwidth, and GEMM GFLOP/s, for DeepSeek-V3 decode shapes (run through
// bench/kernels.sh).
//
// GEMV cycles through enough distinct matrices of a shape that the working
// set is at least 4x the last-level cache (and >= 512 MiB), so every call
// streams its weights from DRAM. The read bandwidth is a STREAM-like sum over
// a buffer of the same size, measured by this binary in the same run with
// the same thread count. Memory use stays below ~2.5 GiB.
//
// A second table measures GEMV per weight type: every type of the
// type-traits table (kernels/qtypes.h) that Petrel supports, on the two
// routed-expert shapes, each next to the read bandwidth of its own buffers.
// A type that is not supported yet, or whose pt_gemv does not match a float
// reference on a small matrix (checked in a child process, so a missing
// path cannot take the benchmark down), is listed as skipped.
//
// Usage: bench_kernels [--quick] [--types all|T,T,...] [--types-only]
//   --quick       smaller working set, fewer shapes
//   --types       which types the per-type table measures (default all)
//   --types-only  only the per-type table; its RESULT line is then
//                 RESULT membw_gbs=… <type>_gemv_gbs=… <type>_gemv_ratio=…
//                 <type>_gemv_cpu1_ratio=… … (cpu1: 1 thread, GB per CPU
//                 second of GEMV over that of the read: a figure that a
//                 busy machine's preemption does not distort)
//   --incache [T,T,...]  only the in-cache compute throughput of the block
//                 kernels per path (bench_incache; default: Q4_0, Q8_0,
//                 Q4_K, Q2_K, Q6_K, IQ4_XS, IQ2_XXS), then exit
#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels/matmul.h"
#include "kernels/qtypes.h"
#include "kernels/quant.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// CPU time of the calling thread: time it was preempted does not count,
// time stalled on memory does, so bytes per CPU second is the 1-thread
// bandwidth of a run that other processes share the cores with.
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Big buffers: 2 MiB aligned, transparent huge pages requested, touched now.
static void *big_alloc(size_t bytes)
{
    size_t n = (bytes + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, n) != 0)
        return NULL;
    madvise(p, n, MADV_HUGEPAGE);
    memset(p, 0, n);
    return p;
}

// Largest last-level cache size the system reports (sysfs or sysconf).
static size_t llc_bytes(void)
{
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            double v = strtod(buf, &end);
            size_t mul = (*end == 'K') ? 1024 : (*end == 'M') ? (1u << 20) : 1;
            if ((size_t)(v * (double)mul) > best)
                best = (size_t)(v * (double)mul);
        }
        fclose(f);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    long s = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (s > 0 && (size_t)s > best)
        best = (size_t)s;
#endif
    return best;
}

// ---- read bandwidth --------------------------------------------------------

// Reads [lo, hi) words with four independent sums (wide loads where the
// CPU has AVX2, so that the read is limited by memory, not by the core).
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t lo, size_t hi)
{
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = lo;
    for (; i + 16 <= hi; i += 16) {
        a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_load_si256((const __m256i *)(p + i + 4)));
        c = _mm256_add_epi64(c, _mm256_load_si256((const __m256i *)(p + i + 8)));
        d = _mm256_add_epi64(d, _mm256_load_si256((const __m256i *)(p + i + 12)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    uint64_t t[4];
    _mm256_storeu_si256((__m256i *)t, a);
    uint64_t s = t[0] + t[1] + t[2] + t[3];
    for (; i < hi; i++)
        s += p[i];
    return s;
}
#endif

static uint64_t read_words(const uint64_t *p, size_t lo, size_t hi)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2"))
        return read_avx2(p, lo, hi);
#endif
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < hi; i++)
        s0 += p[i];
    return s0 + s1 + s2 + s3;
}

// STREAM-like read bandwidth: each thread sums its contiguous share of a
// buffer larger than the last-level cache; best of 5 timed rounds. With 1
// thread (the calling one) and cpu_gbs set, also the best bytes per CPU
// second (cpu_now) into *cpu_gbs.
static double stream_read_gbs(const uint64_t *buf, size_t words, int threads, double min_s, double *cpu_gbs)
{
    assert(!cpu_gbs || threads == 1);
    double best = 0, cbest = 0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now(), c0 = cpu_now(), t;
        int iters = 0;
        do {
            uint64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
            {
                int nt = omp_get_num_threads(), id = omp_get_thread_num();
                size_t per = words / (size_t)nt / 16 * 16;
                size_t lo = per * (size_t)id, hi = id == nt - 1 ? words : lo + per;
                total += read_words(buf, lo, hi);
            }
            sink += total;
            iters++;
            t = now() - t0;
        } while (t < min_s);
        double gbs = (double)iters * (double)words * 8 / t / 1e9;
        double cgbs = (double)iters * (double)words * 8 / (cpu_now() - c0) / 1e9;
        best = gbs > best ? gbs : best;
        cbest = cgbs > cbest ? cgbs : cbest;
    }
    (void)sink;
    if (cpu_gbs)
        *cpu_gbs = cbest;
    return best;
}

// ---- weights ---------------------------------------------------------------

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

// Random but valid contents: block scales are ordinary fp16 numbers, float
// elements are small normal numbers (no NaN / subnormal slow paths).
static void fill_weights(pt_dtype t, uint8_t *p, size_t bytes)
{
    uint64_t *w = (uint64_t *)p;
    for (size_t i = 0; i < bytes / 8; i++)
        w[i] = rnd64();
    size_t bs = t == PT_Q8_0 ? 34 : t == PT_Q4_0 ? 18 : 0;
    if (bs) {
        for (size_t o = 0; o + bs <= bytes; o += bs) {
            uint16_t d = (uint16_t)(0x2000 + (rnd64() & 0x0FFF));
            memcpy(p + o, &d, 2);
        }
    } else if (t == PT_F32) {
        float *f = (float *)p;
        for (size_t i = 0; i < bytes / 4; i++)
            f[i] = (float)(int)(rnd64() % 2001 - 1000) * 1e-3f;
    } else {
        uint16_t *h = (uint16_t *)p;
        for (size_t i = 0; i < bytes / 2; i++)
            h[i] = (uint16_t)(0x3000 + (rnd64() & 0x0FFF)) | (uint16_t)((rnd64() & 1) << 15);
        if (t == PT_BF16)
            for (size_t i = 0; i < bytes / 2; i++)
                h[i] = (uint16_t)(0x3C00 + (h[i] & 0x7F)) | (h[i] & 0x8000);
    }
}

// Valid contents for any type of the table: the float types, Q4_0 and
// Q8_0 as fill_weights; a type Petrel can quantise gets SAMPLE rows of
// weight-like floats quantised by its own quantiser and repeated over the
// buffer (the bytes only have to be realistic, not distinct); the others
// (i-quants without a quantiser) random bytes with an ordinary fp16 block
// scale where the layout has one. `cols` is the row length in values.
static void fill_typed(pt_dtype t, uint8_t *p, size_t bytes, int64_t cols)
{
    enum { SAMPLE = 16 };
    if (!pt_dtype_is_block(t) || t == PT_Q4_0 || t == PT_Q8_0) {
        fill_weights(t, p, bytes);
        return;
    }
    const size_t rb = pt_row_bytes(t, (uint64_t)cols);
    if (pt_dtype_can_quantize(t)) {
        float *x = malloc(sizeof(float) * (size_t)cols);
        uint8_t *rows = malloc(rb * SAMPLE);
        for (int r = 0; r < SAMPLE; r++) {
            for (int64_t i = 0; i < cols; i++) // a bell-shaped sum of three uniforms
                x[i] = (float)((int)(rnd64() % 2001) + (int)(rnd64() % 2001) + (int)(rnd64() % 2001) - 3000) * 1e-4f;
            pt_quantize_row(t, x, rows + (size_t)r * rb, cols);
        }
        for (size_t o = 0; o < bytes; o += rb * SAMPLE) {
            size_t n = bytes - o < rb * SAMPLE ? bytes - o : rb * SAMPLE;
            memcpy(p + o, rows, n);
        }
        free(rows);
        free(x);
        return;
    }
    uint64_t *w = (uint64_t *)p;
    for (size_t i = 0; i < bytes / 8; i++)
        w[i] = rnd64();
    const pt_qtraits *q = pt_qtraits_of(t);
    for (size_t o = 0; o + (size_t)q->bytes <= bytes; o += (size_t)q->bytes) {
        if (t == PT_IQ1_M) { // fp16 scale in the top nibbles of the 4 scale words
            uint16_t sc[4], d = (uint16_t)(0x2000 + (rnd64() & 0x0FFF));
            memcpy(sc, p + o + 48, 8);
            for (int k = 0; k < 4; k++)
                sc[k] = (uint16_t)((sc[k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12));
            memcpy(p + o + 48, sc, 8);
        } else { // every other i-quant starts its block with the fp16 d
            uint16_t d = (uint16_t)(0x2000 + (rnd64() & 0x0FFF));
            memcpy(p + o, &d, 2);
        }
    }
}

typedef struct {
    int64_t rows, cols; // out x in
    const char *what;
} shape;

static const shape shapes[] = {
    {2048, 7168, "expert gate/up"},  {7168, 2048, "expert down"},  {1536, 7168, "q_a"},
    {24576, 1536, "q_b"},            {18432, 7168, "dense up"},    {129280, 7168, "output"},
};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

// Is this a "large shape" for the RESULT line (>= 14.7 M weights)?
static int is_large(const shape *s) { return (double)s->rows * (double)s->cols >= 2048.0 * 7168; }

typedef struct {
    double bytes, secs;   // GEMV, accumulated over the large shapes
    double rsecs;         // reading the same bytes at the read bandwidth measured alongside
} agg;

// GEMV over a working set of >= ws bytes of distinct matrices, with 1 and
// 2 threads on the same buffers; GB/s into g[1], g[2]. Right before each,
// the read bandwidth of the same buffer with the same thread count goes
// into r[1], r[2]: the bandwidth of this machine drifts over minutes when
// other tenants use the memory, so each ratio gets its own denominator.
// g[0], r[0]: the 1-thread GEMV and read in GB per CPU second (cpu_now),
// a figure that preemption by other processes does not distort.
static void bench_gemv(pt_dtype t, const shape *s, size_t ws, double min_s, double g[3], double r[3])
{
    const size_t mb = pt_row_bytes(t, (uint64_t)s->cols) * (size_t)s->rows;
    size_t nm = (ws + mb - 1) / mb;
    if (nm < 1)
        nm = 1;
    g[0] = g[1] = g[2] = r[0] = r[1] = r[2] = -1;
    uint8_t *buf = big_alloc(nm * mb);
    if (!buf)
        return;
    fill_typed(t, buf, nm * mb, s->cols);
    float *x = malloc(sizeof(float) * (size_t)s->cols), *y = malloc(sizeof(float) * (size_t)s->rows);
    for (int64_t i = 0; i < s->cols; i++)
        x[i] = (float)((int)(rnd64() % 2001) - 1000) * 1e-3f;
    pt_mat m = {.type = t, .rows = s->rows, .cols = s->cols};
    for (int th = 1; th <= 2; th++) {
        r[th] = stream_read_gbs((const uint64_t *)buf, nm * mb / 8, th, min_s, th == 1 ? &r[0] : NULL);
        omp_set_num_threads(th);
        for (size_t i = 0; i < nm; i++) { // warm-up pass (scratch, threads)
            m.data = buf + i * mb;
            pt_gemv(&m, x, y);
        }
        double best = 0, cbest = 0;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now(), c0 = cpu_now(), el;
            size_t calls = 0;
            do {
                for (size_t i = 0; i < nm; i++) {
                    m.data = buf + i * mb;
                    pt_gemv(&m, x, y);
                    calls++;
                }
                el = now() - t0;
            } while (el < min_s);
            double gbs = (double)calls * (double)mb / el / 1e9;
            double cgbs = (double)calls * (double)mb / (cpu_now() - c0) / 1e9; // 1 thread: all in this one
            best = gbs > best ? gbs : best;
            cbest = cgbs > cbest ? cgbs : cbest;
        }
        g[th] = best;
        if (th == 1)
            g[0] = cbest;
    }
    free(x);
    free(y);
    free(buf);
}

// GEMM on one matrix (hot in cache or not: compute-bound at these batches).
static double bench_gemm(pt_dtype t, const shape *s, int64_t batch, int threads, double min_s)
{
    const size_t mb = pt_row_bytes(t, (uint64_t)s->cols) * (size_t)s->rows;
    uint8_t *buf = big_alloc(mb);
    fill_weights(t, buf, mb);
    float *X = malloc(sizeof(float) * (size_t)(s->cols * batch));
    float *Y = malloc(sizeof(float) * (size_t)(s->rows * batch));
    for (int64_t i = 0; i < s->cols * batch; i++)
        X[i] = (float)((int)(rnd64() % 2001) - 1000) * 1e-3f;
    omp_set_num_threads(threads);
    pt_mat m = {.data = buf, .type = t, .rows = s->rows, .cols = s->cols};
    pt_gemm(&m, X, batch, Y);
    double best = 0;
    for (int rep = 0; rep < 2; rep++) {
        double t0 = now(), el;
        int calls = 0;
        do {
            pt_gemm(&m, X, batch, Y);
            calls++;
            el = now() - t0;
        } while (el < min_s);
        double gf = 2.0 * (double)s->rows * (double)s->cols * (double)batch * calls / el / 1e9;
        best = gf > best ? gf : best;
    }
    free(X);
    free(Y);
    free(buf);
    return best;
}

// 1-minute load average (-1 if unknown).
static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

// ---- GEMV per weight type ---------------------------------------------------

// Does pt_gemv of type t agree with a float reference (the type's own
// dequantisation, dotted in double) on a small matrix? Run in a child
// process, before this process starts any OpenMP threads, so that a type
// whose path asserts or crashes is reported as skipped instead of ending
// the benchmark; 60 s alarm against a hang. The tolerance covers the 8-bit
// activation quantisation of the quantised types (far below what a wrong
// layout or a missing path produces).
static bool gemv_agrees(pt_dtype t)
{
    const int64_t rows = 8, cols = 2048;
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        alarm(60);
        const size_t rb = pt_row_bytes(t, (uint64_t)cols);
        uint8_t *w = malloc(rb * (size_t)rows);
        float *x = malloc(sizeof(float) * cols), *y = malloc(sizeof(float) * rows);
        float *d = malloc(sizeof(float) * cols);
        fill_typed(t, w, rb * (size_t)rows, cols);
        for (int64_t i = 0; i < cols; i++)
            x[i] = (float)((int)(rnd64() % 2001) - 1000) * 1e-3f;
        pt_mat m = {.data = w, .type = t, .rows = rows, .cols = cols};
        pt_gemv(&m, x, y);
        for (int64_t r = 0; r < rows; r++) {
            pt_dequantize_row(t, w + (size_t)r * rb, d, cols);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < cols; i++) {
                ref += (double)d[i] * x[i];
                mag += fabs((double)d[i] * x[i]);
            }
            if (!(fabs((double)y[r] - ref) <= 0.02 * mag + 1e-4))
                _exit(2);
        }
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// Is t among the comma-separated names of `list` ("all": every type)?
static bool in_list(const char *list, pt_dtype t)
{
    if (!strcmp(list, "all"))
        return true;
    const char *name = pt_dtype_name(t);
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t k = e ? (size_t)(e - p) : strlen(p);
        if (k == n && !strncasecmp(p, name, n))
            return true;
        p += k + (e ? 1 : 0);
    }
    return false;
}

enum { MAXT = 40 };
typedef struct {
    pt_dtype t[MAXT];     // (n,) the types to measure, in table order
    int n;
    bool ok[MAXT];        // (n,) supported and agreeing with the reference
    const char *why[MAXT]; // (n,) reason for a skip
} type_set;

// The types of the table named by `list`, each probed (gemv_agrees).
static void select_types(const char *list, type_set *ts)
{
    ts->n = 0;
    for (uint32_t id = 0; id < MAXT; id++) {
        const pt_qtraits *q = pt_qtraits_of(id);
        if (!q || id == PT_Q8_1 || id == PT_Q8_K || !in_list(list, (pt_dtype)id))
            continue;
        int i = ts->n++;
        ts->t[i] = (pt_dtype)id;
        ts->ok[i] = false;
        if (!pt_dtype_valid(id))
            ts->why[i] = "not supported yet (no dequant / vdot / activation quantiser)";
        else if (!gemv_agrees((pt_dtype)id))
            ts->why[i] = "pt_gemv fails or disagrees with the float reference";
        else
            ts->ok[i] = true, ts->why[i] = NULL;
    }
}

// Per-type GEMV table over the two routed-expert shapes (gate/up 2048x7168,
// down 7168x2048); fills gbs[i] and ratio[i] for 2 threads over both shapes
// together (bytes / time, the read bandwidth of the same bytes alongside:
// each type gets its own denominator), cratio[i] the same for 1 thread in
// bytes per CPU second (robust to other processes on the cores, not to
// their use of the memory), -1 for a skipped type; returns the read
// bandwidth over all the measured bytes.
static double bench_types(const type_set *ts, size_t ws, double min_s, double *gbs, double *ratio, double *cratio)
{
    printf("\nGEMV per weight type, routed-expert shapes, effective weight GB/s; read = read bandwidth\n"
           "of the same buffer just before; \"2 thr both\" = both shapes together, 2 threads;\n"
           "cpu1 = 1 thread in GB per CPU second (preemption excluded), GEMV and read, and ratio\n");
    printf("%-8s %-10s %8s %7s %6s %8s %7s %6s %7s %7s %6s\n", "type", "shape", "1 thread", "read", "ratio",
           "2 thr", "read", "ratio", "cpu1", "read", "ratio");
    double all_bytes = 0, all_rsecs = 0;
    for (int i = 0; i < ts->n; i++) {
        pt_dtype t = ts->t[i];
        gbs[i] = ratio[i] = cratio[i] = -1;
        if (!ts->ok[i]) {
            printf("%-8s skipped: %s\n", pt_dtype_name(t), ts->why[i]);
            continue;
        }
        agg a = {0}, c = {0}; // c: 1 thread, CPU seconds
        for (int si = 0; si < 2; si++) {
            const shape *s = &shapes[si];
            double g[3], r[3];
            bench_gemv(t, s, ws, min_s, g, r);
            if (g[2] <= 0 || r[2] <= 0 || g[0] <= 0 || r[0] <= 0)
                continue;
            double mb = (double)pt_row_bytes(t, (uint64_t)s->cols) * (double)s->rows;
            a.bytes += mb;
            a.secs += mb / (g[2] * 1e9);
            a.rsecs += mb / (r[2] * 1e9);
            c.secs += mb / (g[0] * 1e9);
            c.rsecs += mb / (r[0] * 1e9);
            char name[32];
            snprintf(name, sizeof name, "%ldx%ld", (long)s->rows, (long)s->cols);
            printf("%-8s %-10s %8.2f %7.2f %6.3f %8.2f %7.2f %6.3f %7.2f %7.2f %6.3f\n", pt_dtype_name(t), name,
                   g[1], r[1], g[1] / r[1], g[2], r[2], g[2] / r[2], g[0], r[0], g[0] / r[0]);
            fflush(stdout);
        }
        if (a.secs > 0) {
            gbs[i] = a.bytes / a.secs / 1e9;
            ratio[i] = a.rsecs / a.secs;
            cratio[i] = c.rsecs / c.secs;
            all_bytes += a.bytes;
            all_rsecs += a.rsecs;
            printf("%-8s 2 thr both %6.2f GB/s, read %.2f GB/s, ratio %.3f; cpu1 ratio %.3f\n", pt_dtype_name(t),
                   gbs[i], a.bytes / a.rsecs / 1e9, ratio[i], cratio[i]);
        }
    }
    return all_rsecs > 0 ? all_bytes / all_rsecs / 1e9 : 0;
}

// " q4_k_gemv_gbs=… q4_k_gemv_ratio=… q4_k_gemv_cpu1_ratio=…" for every
// type of the set ("na" for a skipped one).
static void print_type_keys(const type_set *ts, const double *gbs, const double *ratio, const double *cratio)
{
    for (int i = 0; i < ts->n; i++) {
        const char *n = pt_dtype_name(ts->t[i]);
        if (ratio[i] < 0)
            printf(" %s_gemv_gbs=na %s_gemv_ratio=na %s_gemv_cpu1_ratio=na", n, n, n);
        else
            printf(" %s_gemv_gbs=%.2f %s_gemv_ratio=%.3f %s_gemv_cpu1_ratio=%.3f", n, gbs[i], n, ratio[i], n,
                   cratio[i]);
    }
    printf("\n");
}

// ---- in cache (--incache) ---------------------------------------------------

// Best time of one call (seconds) over `rounds` rounds of `inner` calls.
static double best_call_s(const pt_mat *m, const float *X, int64_t batch, float *Y, int rounds, int inner)
{
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        for (int i = 0; i < inner; i++)
            pt_gemm(m, X, batch, Y);
        double el = (now() - t0) / inner;
        best = el < best ? el : best;
    }
    return best;
}

// Compute throughput of the block-type kernels with the weights resident
// in L2, so that DRAM (and other tenants' use of it) does not enter: one
// thread, one matrix of <= 512 KiB called over and over, best of many short
// rounds (a round that another process interrupts is simply not the best).
// GEMV: ns per weight block including the activation quantisation, and the
// marginal cost of a block (R rows minus R/2 rows: the row kernel alone) as
// ns and GB/s of weights; GEMM at batch 8 and 64 in GFLOP/s. Every path the
// CPU supports, the types of `list` ("all": Q4_0, Q8_0 and the K / i types
// the issue names); last line INCACHE <type>_<path>_ns_block=… (marginal,
// on the 7168-column shape; a K / i-quant block is 256 values).
static void bench_incache(const char *list)
{
    const pt_kernel_path paths[] = {PT_PATH_AVX2, PT_PATH_AVXVNNI, PT_PATH_AVX512};
    const pt_dtype types[] = {PT_Q4_0, PT_Q8_0, PT_Q4_K, PT_Q2_K, PT_Q6_K, PT_IQ4_XS, PT_IQ2_XXS};
    const int64_t colss[] = {2048, 7168};
    char keys[2048] = "";
    omp_set_num_threads(1);
    printf("in-cache throughput, 1 thread, weights <= 512 KiB (L2), best of many calls; load average %.2f\n",
           loadavg());
    printf("%-10s %-7s %-10s %11s %11s %9s %9s %9s\n", "path", "type", "shape", "ns/block", "marginal",
           "GB/s", "gemm b8", "gemm b64");
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++) {
        if (!pt_kernel_path_supported(paths[pi]))
            continue;
        pt_kernel_set_path(paths[pi]);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const pt_dtype t = types[ti];
            if (!in_list(list, t))
                continue;
            const int64_t blck = pt_qtraits_of(t)->blck;
            for (int ci = 0; ci < 2; ci++) {
                const int64_t cols = colss[ci], nb = cols / blck;
                const size_t rb = pt_row_bytes(t, (uint64_t)cols);
                int64_t rows = (int64_t)((512u << 10) / rb) & ~(int64_t)15;
                uint8_t *w = big_alloc(rb * (size_t)rows);
                fill_typed(t, w, rb * (size_t)rows, cols);
                float *X = malloc(sizeof(float) * (size_t)(64 * cols));
                float *Y = malloc(sizeof(float) * (size_t)(64 * rows));
                for (int64_t i = 0; i < 64 * cols; i++)
                    X[i] = (float)((int)(rnd64() % 2001) - 1000) * 1e-3f;
                pt_mat full = {.data = w, .type = t, .rows = rows, .cols = cols};
                pt_mat half = full;
                half.rows = rows / 2;
                const double tf = best_call_s(&full, X, 1, Y, 300, 10);
                const double th = best_call_s(&half, X, 1, Y, 300, 10);
                const double blocks = (double)rows * (double)nb;
                const double ns = tf / blocks * 1e9;
                const double marg = (tf - th) / (blocks / 2) * 1e9;
                const double gbs = (double)rb * (double)(rows / 2) / (tf - th) / 1e9;
                double gf[2];
                for (int bi = 0; bi < 2; bi++) {
                    const int64_t batch = bi ? 64 : 8;
                    const double tg = best_call_s(&full, X, batch, Y, bi ? 20 : 60, 2);
                    gf[bi] = 2.0 * (double)rows * (double)cols * (double)batch / tg / 1e9;
                }
                char name[32];
                snprintf(name, sizeof name, "%ldx%ld", (long)rows, (long)cols);
                printf("%-10s %-7s %-10s %11.3f %11.3f %9.2f %9.1f %9.1f\n", pt_kernel_path_name(),
                       pt_dtype_name(t), name, ns, marg, gbs, gf[0], gf[1]);
                fflush(stdout);
                if (ci == 1) {
                    size_t n = strlen(keys);
                    snprintf(keys + n, sizeof keys - n, " %s_%s_ns_block=%.3f", pt_dtype_name(t),
                             pt_kernel_path_name(), marg);
                }
                free(X);
                free(Y);
                free(w);
            }
        }
    }
    pt_kernel_set_path(PT_PATH_AUTO);
    printf("\nINCACHE%s\n", keys);
}

int main(int argc, char **argv)
{
    int quick = 0, types_only = 0;
    const char *types_list = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--types-only"))
            types_only = 1;
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            types_list = argv[++i];
        else if (!strcmp(argv[i], "--incache")) {
            bench_incache(i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1] : "all");
            return 0;
        } else {
            fprintf(stderr, "usage: bench_kernels [--quick] [--types all|T,T,...] [--types-only] [--incache [T,T,...]]\n");
            return 2;
        }
    }
    // probed before anything here starts OpenMP threads (gemv_agrees forks)
    static type_set ts;
    select_types(types_list, &ts);
    size_t llc = llc_bytes();
    size_t ws = 4 * llc;
    if (ws < (512u << 20))
        ws = 512u << 20;
    if (ws > (1536u << 20))
        ws = 1536u << 20;
    if (quick)
        ws = 256u << 20;
    const double min_s = quick ? 0.15 : 0.3;
    printf("kernel path: %s  (avx2 %s, avx512vnni %s)  cpus: %d\n", pt_kernel_path_name(),
           pt_kernel_path_supported(PT_PATH_AVX2) ? "yes" : "no",
           pt_kernel_path_supported(PT_PATH_AVX512) ? "yes" : "no", omp_get_num_procs());
    printf("last-level cache: %.0f MiB, working set: %.0f MiB\n", (double)llc / 1048576.0,
           (double)ws / 1048576.0);
    const char *wp = getenv("OMP_WAIT_POLICY");
    printf("OMP_WAIT_POLICY=%s, load average at start: %.2f\n", wp ? wp : "(default)", loadavg());
    if (loadavg() > 0.5 * omp_get_num_procs())
        printf("WARNING: the machine is busy; GEMV (one fork/join per call) suffers more from\n"
               "         preempted threads than the streaming read: ratios are understated.\n"
               "         OMP_WAIT_POLICY=passive helps on a shared machine.\n");

    double membw[3] = {0};
    {
        uint64_t *buf = big_alloc(ws);
        for (size_t i = 0; i < ws / 8; i++)
            buf[i] = i;
        for (int th = 1; th <= 2; th++) {
            membw[th] = stream_read_gbs(buf, ws / 8, th, min_s, NULL);
            printf("read bandwidth (%d thread%s): %.2f GB/s\n", th, th > 1 ? "s" : "", membw[th]);
        }
        free(buf);
    }

    static double tgbs[MAXT], tratio[MAXT], tcratio[MAXT];
    if (types_only) {
        double bw = bench_types(&ts, ws, min_s, tgbs, tratio, tcratio);
        printf("\nload average at end: %.2f\n", loadavg());
        printf("\nRESULT membw_gbs=%.2f", bw > 0 ? bw : membw[2]);
        print_type_keys(&ts, tgbs, tratio, tcratio);
        return 0;
    }

    const pt_dtype types[] = {PT_Q4_0, PT_Q8_0, PT_BF16, PT_F32};
    agg large[3][4] = {{{0}}};
    printf("\nGEMV (rows x cols = out x in), effective weight GB/s; read = read bandwidth of the\n"
           "same working set measured just before with the same threads; ratio = GEMV / read\n");
    printf("%-12s %-15s %-5s %8s %7s %6s %8s %7s %6s\n", "shape", "", "type", "1 thread", "read", "ratio",
           "2 thr", "read", "ratio");
    for (int si = 0; si < NSHAPES; si++) {
        const shape *s = &shapes[si];
        if (quick && si >= 2)
            break;
        for (int ti = 0; ti < 4; ti++) {
            pt_dtype t = types[ti];
            size_t mb = pt_row_bytes(t, (uint64_t)s->cols) * (size_t)s->rows;
            if (mb > (1536u << 20) || (quick && t == PT_F32))
                continue;
            double g[3], r[3];
            bench_gemv(t, s, ws, min_s, g, r);
            for (int th = 1; th <= 2; th++) {
                if (is_large(s)) {
                    // time for this shape's bytes at the measured rates
                    large[th][ti].bytes += (double)mb;
                    large[th][ti].secs += (double)mb / (g[th] * 1e9);
                    large[th][ti].rsecs += (double)mb / (r[th] * 1e9);
                }
            }
            char name[32];
            snprintf(name, sizeof name, "%ldx%ld", (long)s->rows, (long)s->cols);
            printf("%-12s %-15s %-5s %8.2f %7.2f %6.3f %8.2f %7.2f %6.3f\n", name, s->what, pt_dtype_name(t),
                   g[1], r[1], g[1] / r[1], g[2], r[2], g[2] / r[2]);
            fflush(stdout);
        }
    }

    printf("\nGEMM GFLOP/s (2*rows*cols*batch per call)\n");
    printf("%-16s %-5s %6s %10s %10s\n", "shape", "type", "batch", "1 thread", "2 threads");
    const shape *gs[] = {&shapes[0], &shapes[1]};
    const int64_t batches[] = {8, 64, 512};
    for (int si = 0; si < (quick ? 1 : 2); si++)
        for (int ti = 0; ti < 3; ti++)
            for (int bi = 0; bi < 3; bi++) {
                double g1 = bench_gemm(types[ti], gs[si], batches[bi], 1, min_s / 2);
                double g2 = bench_gemm(types[ti], gs[si], batches[bi], 2, min_s / 2);
                char name[32];
                snprintf(name, sizeof name, "%ldx%ld", (long)gs[si]->rows, (long)gs[si]->cols);
                printf("%-16s %-5s %6ld %10.1f %10.1f\n", name, pt_dtype_name(types[ti]),
                       (long)batches[bi], g1, g2);
                fflush(stdout);
            }

    bench_types(&ts, ws, min_s, tgbs, tratio, tcratio);

    // RESULT: 2 threads, the large shapes together; the read bandwidth is
    // the one measured alongside those GEMV runs (same buffers, same time)
    double q4 = large[2][0].bytes / large[2][0].secs / 1e9;
    double q8 = large[2][1].bytes / large[2][1].secs / 1e9;
    double r4 = large[2][0].bytes / large[2][0].rsecs / 1e9;
    double r8 = large[2][1].bytes / large[2][1].rsecs / 1e9;
    double bw = (large[2][0].bytes + large[2][1].bytes) / (large[2][0].rsecs + large[2][1].rsecs) / 1e9;
    printf("\nload average at end: %.2f\n", loadavg());
    printf("2 threads, large shapes: read bandwidth alongside q4_0 runs %.2f GB/s, alongside q8_0 runs "
           "%.2f GB/s; at the start %.2f GB/s\n", r4, r8, membw[2]);
    printf("\nRESULT membw_gbs=%.2f gemv_q4_0_gbs=%.2f gemv_q4_0_ratio=%.3f gemv_q8_0_gbs=%.2f "
           "gemv_q8_0_ratio=%.3f",
           bw, q4, q4 / r4, q8, q8 / r8);
    print_type_keys(&ts, tgbs, tratio, tcratio);
    return 0;
}
