// bench/bench_qt.c — single-thread speed of each weight type's row dot
// product (pt_vdot_fn) on every available path: 7168-long rows, a weight
// set that stays in L2 (so the figure is the kernel's, not the memory's),
// reported as ns per row and GB/s of weight bytes.
// usage: bench_qt [rows_in_set (64)] [seconds per case (0.3)]
// Figure: the fastest pass over the set (robust to a busy machine), the
// vector paths' passes interleaved so that they compare fairly. A set
// of 2048 rows (a 7168 x 2048 matrix, beyond the caches) measures one
// core streaming the weights from memory instead.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/qtypes.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool path_ok(int p)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (p == PT_QPATH_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (p == PT_QPATH_AVX512)
        return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("avx512vl");
#endif
    return p == PT_QPATH_SCALAR;
}

int main(int argc, char **argv)
{
    const int nrows = argc > 1 ? atoi(argv[1]) : 64;
    const double secs = argc > 2 ? atof(argv[2]) : 0.3;
    const int64_t n = 7168;
    static const char *names[] = {"p", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
                                  "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq1_m", "iq4_nl", "iq3_s",
                                  "iq2_s", "iq4_xs"};
    float *x = malloc((size_t)n * 4);
    unsigned s = 1;
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((s = s * 1103515245u + 12345u) >> 8 & 0xFFFF) / 32768.0f - 1.0f;
    printf("%-8s %-7s %10s %8s\n", "type", "path", "ns/row", "GB/s");
    for (size_t k = 1; k < sizeof names / sizeof names[0]; k++) {
        const int t = pt_dtype_from_name(names[k]);
        const pt_qtraits *q = t >= 0 ? pt_qtraits_of((uint32_t)t) : NULL;
        if (!q || !q->vdot[0] || !pt_actq_of(q->act))
            continue;
        const size_t rb = (size_t)(n / q->blck) * (size_t)q->bytes;
        uint8_t *w = malloc(rb * (size_t)nrows);
        // real quantised rows where Petrel has the quantiser (random bytes
        // give random fp16 scales: subnormal products slow the f32 steps)
        float *wf = malloc((size_t)n * 4);
        for (int r = 0; r < nrows; r++) {
            for (int64_t i = 0; i < n; i++)
                wf[i] = (float)((s = s * 1103515245u + 12345u) >> 8 & 0xFFFF) / 32768.0f - 1.0f;
            if (q->quant)
                q->quant(wf, w + rb * (size_t)r, n);
            else
                for (size_t i = 0; i < rb; i++)
                    w[rb * (size_t)r + i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 16);
        }
        free(wf);
        void *xq = malloc(pt_act_row_bytes(q->act, n));
        pt_actq_of(q->act)(x, xq, n);
        // the fastest pass over the set per path, the paths' passes taken
        // in turn (round robin), so that a busy spell of a shared machine
        // slows every path alike instead of whichever ran during it; the
        // scalar path (~50x slower) gets its own time, the others share
        // `secs` x their number
        double best[PT_QPATH_N];
        bool on[PT_QPATH_N];
        int non = 0;
        for (int p = 0; p < PT_QPATH_N; p++) {
            best[p] = 1e30;
            on[p] = q->vdot[p] && path_ok(p);
            non += on[p] && p > 0;
        }
        volatile float sink = 0;
        for (int round = 0; round < 2; round++) { // 0: scalar alone, 1: the vector paths
            const double t0 = now();
            do {
                for (int p = 0; p < PT_QPATH_N; p++) {
                    if (!on[p] || (p == 0) != (round == 0))
                        continue;
                    const double a = now();
                    for (int r = 0; r < nrows; r++)
                        sink += q->vdot[p](w + rb * (size_t)r, xq, n);
                    const double e = now() - a;
                    best[p] = e < best[p] ? e : best[p];
                }
            } while (now() - t0 < secs * (round == 0 ? 1 : non));
        }
        for (int p = 0; p < PT_QPATH_N; p++) {
            if (!on[p])
                continue;
            const double ns = best[p] * 1e9 / nrows;
            printf("%-8s %-7s %10.1f %8.1f\n", q->name, p == 0 ? "scalar" : p == 1 ? "avx2" : "avx512", ns,
                   (double)rb / ns);
        }
        free(w);
        free(xq);
    }
    free(x);
    return 0;
}
