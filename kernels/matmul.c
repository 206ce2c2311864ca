// kernels/matmul.c — pt_gemv / pt_gemm / pt_gemm_rows: activation
// quantisation, OpenMP tiling over output rows (and batch vectors), and the
// run-time choice of code path. The arithmetic itself lives in kern_*.c and
// follows the contract in kernels/kern_internal.h, so the result of one
// output row never depends on tiling, threads or path.
#include "kernels/matmul.h"
#include "kernels/kern_internal.h"
#include "kernels/qtypes.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

// ---- path selection ------------------------------------------------------

static _Atomic(const pt_kern *) g_kern;          // NULL until first use
static _Atomic int g_path = PT_PATH_AUTO;         // the requested setting

#if defined(__x86_64__)
#include <cpuid.h>
// CPUID bits that not every compiler's __builtin_cpu_supports knows:
// F16C (leaf 1, ECX bit 29) and AVX-VNNI (leaf 7 subleaf 1, EAX bit 4).
// OS support for the AVX state is covered by the "avx2" check they go with.
static bool cpu_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}

static bool cpu_avxvnni(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_max(0, NULL) >= 7 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}
#endif

bool pt_kernel_path_supported(pt_kernel_path p)
{
    switch (p) {
    case PT_PATH_AUTO:
    case PT_PATH_SCALAR: return true;
#if defined(__x86_64__)
    case PT_PATH_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_f16c();
    case PT_PATH_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
               __builtin_cpu_supports("fma") && cpu_f16c();
    case PT_PATH_AVXVNNI:
        return pt_kernel_path_supported(PT_PATH_AVX2) && cpu_avxvnni();
#else
    default: return false;
#endif
    }
    return false;
}

// The kernel table for a setting; an unsupported request falls back to the
// best supported path below it (order: avx512vnni, avxvnni, avx2, scalar).
static const pt_kern *resolve(pt_kernel_path p)
{
#if defined(__x86_64__)
    const bool auto_ = p == PT_PATH_AUTO;
    if ((auto_ || p == PT_PATH_AVX512) && pt_kernel_path_supported(PT_PATH_AVX512))
        return &pt_kern_avx512;
    if ((auto_ || p == PT_PATH_AVX512 || p == PT_PATH_AVXVNNI) && pt_kernel_path_supported(PT_PATH_AVXVNNI))
        return &pt_kern_avxvnni;
    if (p != PT_PATH_SCALAR && pt_kernel_path_supported(PT_PATH_AVX2))
        return &pt_kern_avx2;
#else
    (void)p;
#endif
    return &pt_kern_scalar;
}

pt_kernel_path pt_kernel_set_path(pt_kernel_path p)
{
    pt_kernel_path prev = (pt_kernel_path)atomic_exchange(&g_path, (int)p);
    atomic_store(&g_kern, resolve(p));
    return prev;
}

// PETREL_KERNELS=scalar|avx2|avxvnni|avx512 in the environment overrides
// the automatic choice (until pt_kernel_set_path is called), e.g. to run a
// whole model on the scalar path and compare outputs bit for bit.
static pt_kernel_path env_path(void)
{
    const char *e = getenv("PETREL_KERNELS");
    if (!e)
        return PT_PATH_AUTO;
    if (!strcmp(e, "scalar"))
        return PT_PATH_SCALAR;
    if (!strcmp(e, "avx2"))
        return PT_PATH_AVX2;
    if (!strcmp(e, "avxvnni"))
        return PT_PATH_AVXVNNI;
    if (!strcmp(e, "avx512") || !strcmp(e, "avx512vnni"))
        return PT_PATH_AVX512;
    return PT_PATH_AUTO;
}

const pt_kern *pt_kern_current(void)
{
    const pt_kern *k = atomic_load_explicit(&g_kern, memory_order_acquire);
    if (!k) {
        pt_kernel_path p = (pt_kernel_path)atomic_load(&g_path);
        k = resolve(p == PT_PATH_AUTO ? env_path() : p);
        atomic_store(&g_kern, k);
    }
    return k;
}

const char *pt_kernel_path_name(void) { return pt_kern_current()->name; }

// ---- activation scratch -----------------------------------------------------

// Scratch owned by the calling thread, grown on demand and never shrunk, so
// the decode loop does not allocate after its first token. It is also held
// under a pthread key whose destructor frees it when the thread exits
// (server workers, and the OpenMP teams they start, come and go; without
// it every exited thread leaked its buffer).
static _Thread_local void *t_scratch;
static _Thread_local size_t t_scratch_cap;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_key_make(void) { pthread_key_create(&scratch_key, free); }

static void *scratch(size_t bytes)
{
    if (bytes > t_scratch_cap) {
        pthread_once(&scratch_once, scratch_key_make);
        free(t_scratch);
        size_t cap = (bytes + 4095) & ~(size_t)4095;
        t_scratch = aligned_alloc(64, cap);
        assert(t_scratch);
        memset(t_scratch, 0, cap); // fault the pages in now
        t_scratch_cap = cap;
        pthread_setspecific(scratch_key, t_scratch);
    }
    return t_scratch;
}

void pt_matmul_scratch_free(void)
{
    free(t_scratch);
    t_scratch = NULL;
    t_scratch_cap = 0;
    pthread_once(&scratch_once, scratch_key_make);
    pthread_setspecific(scratch_key, NULL);
}

// ---- tiling and threading ------------------------------------------------

enum { SERIAL_WORK = 1 << 16 }; // below this many weights x vectors: one thread
#ifndef PT_SCHED
#define PT_SCHED dynamic, 1 // tiles handed out on demand (results do not depend on it)
#endif

// Rows [r0, r1) of one matrix (row r at W->data + r * rb) and where their
// outputs go: Y[b * ldy + (r - r0)].
typedef struct gemm_part {
    const pt_mat *W;
    size_t rb;
    int64_t r0, r1;
    float *Y;
    int64_t ldy;
} gemm_part;

// A tile of a generic block type: rows outer (a weight row stays in cache
// across the vectors), vectors inner; every output element is one vdot of
// one row with one vector, so tiling cannot change a result.
// With a vdot4 (bit for bit four vdots), vectors go in fours.
static void gtile(pt_vdot_fn vdot, pt_vdot4_fn vdot4, const uint8_t *w, size_t rb, int64_t nrows, int64_t cols,
                  const char *xq, size_t arb, int64_t nvec, float *y, int64_t ldy)
{
    for (int64_t r = 0; r < nrows; r++) {
        int64_t v = 0;
        if (vdot4)
            for (; v + 4 <= nvec; v += 4) {
                float o[4];
                vdot4(w + (size_t)r * rb, xq + (size_t)v * arb, arb, cols, o);
                for (int j = 0; j < 4; j++)
                    y[(v + j) * ldy + r] = o[j];
            }
        for (; v < nvec; v++)
            y[v * ldy + r] = vdot(w + (size_t)r * rb, xq + (size_t)v * arb, cols);
    }
}

// One product's tiles (gemm_parts): tile i of nt0 + nt1 row tiles (of the
// first part, then the second) x nvt vector tiles.
typedef struct tile_job {
    const gemm_part *p;
    int64_t nt0, nvt, rt, vt, batch;
    pt_dtype type;
    int64_t cols;
    const pt_kern *k;
    const pt_q8act *act; // Q4_0 / Q8_0: the quantised vectors; else NULL
    pt_vdot_fn vdot;     // generic block types (gact: their quantised vectors)
    pt_vdot4_fn vdot4;
    const char *gact;
    size_t arb;
    const float *X;      // float types
} tile_job;

static void run_tile(const tile_job *j, int64_t i)
{
    const int64_t t = i / j->nvt, v = (i % j->nvt) * j->vt;
    const gemm_part *q = &j->p[t < j->nt0 ? 0 : 1];
    const int64_t r = (t < j->nt0 ? t : t - j->nt0) * j->rt, n = q->r1 - q->r0;
    const int64_t nr = n - r < j->rt ? n - r : j->rt;
    const int64_t nv = j->batch - v < j->vt ? j->batch - v : j->vt;
    const uint8_t *w = (const uint8_t *)q->W->data + (size_t)(q->r0 + r) * q->rb;
    float *y = q->Y + v * q->ldy + r;
    if (j->act)
        j->k->qtile(j->type, w, q->rb, nr, j->act, v, nv, y, q->ldy);
    else if (j->vdot)
        gtile(j->vdot, j->vdot4, w, q->rb, nr, j->cols, j->gact + (size_t)v * j->arb, j->arb, nv, y, q->ldy);
    else
        j->k->ftile(j->type, w, q->rb, nr, j->cols, j->X + v * j->cols, j->cols, nv, y, q->ldy);
}

// The one implementation behind every product: the parts share the input X
// (batch, cols) and the weight type, so the input is quantised once (Q8_0
// activations for block types) and the tiles of all parts are handed out
// in one parallel region.
static void gemm_parts(const gemm_part *p, int np, const float *X, int64_t batch)
{
    assert(np >= 1 && X && batch >= 0);
    const pt_dtype type = p[0].W->type;
    const int64_t cols = p[0].W->cols;
    int64_t nrows = 0;
    for (int j = 0; j < np; j++) {
        assert(p[j].W->type == type && p[j].W->cols == cols && p[j].Y);
        assert(0 <= p[j].r0 && p[j].r0 <= p[j].r1 && p[j].r1 <= p[j].W->rows);
        assert(p[j].ldy >= p[j].r1 - p[j].r0 || batch <= 1);
        assert(p[j].rb >= pt_row_bytes(type, (uint64_t)cols) && (p[j].rb > 0 || cols == 0));
        nrows += p[j].r1 - p[j].r0;
    }
    if (nrows == 0 || batch == 0)
        return;
    const pt_kern *k = pt_kern_current();
    // Inside a parallel region (an expert computed whole by one thread of a
    // team, a head's absorption product) the product runs on the calling
    // thread, and no OpenMP construct is entered at all: a nested region,
    // even of one thread, costs a team set-up each time (libgomp allocates
    // one), which for decode's small products was most of their time.
    const bool nested = omp_in_parallel();
    const bool par_act = !nested && batch > 1 && batch * cols >= SERIAL_WORK;
    // Q4_0 / Q8_0 take the tuned kern_* tiles; every other block type goes
    // through its qtypes.h row (activations in ggml's block layout, one
    // vdot per row and vector); float types through ftile.
    const bool quant = type == PT_Q4_0 || type == PT_Q8_0;
    const pt_qtraits *qt = pt_qtraits_of(type);
    assert(qt);
    const bool generic = !quant && qt->blck > 1;
    pt_vdot_fn vdot = NULL;
    pt_vdot4_fn vdot4 = NULL;
    const char *gact = NULL; // generic: quantised activations, `arb` bytes per vector
    size_t arb = 0;
    if (generic) {
        vdot = pt_vdot_of(qt, k->qpath);
        vdot4 = pt_vdot4_of(qt, k->qpath);
        const pt_actq_fn aq = pt_actq_of(qt->act);
        assert(vdot && aq && cols % qt->blck == 0);
        arb = pt_act_row_bytes(qt->act, cols);
        char *s = scratch((size_t)batch * arb + 64);
        if (par_act) {
#pragma omp parallel for schedule(static)
            for (int64_t v = 0; v < batch; v++)
                aq(X + v * cols, s + (size_t)v * arb, cols);
        } else {
            for (int64_t v = 0; v < batch; v++)
                aq(X + v * cols, s + (size_t)v * arb, cols);
        }
        gact = s;
    }

    pt_q8act act = {0};
    if (quant) {
        const int64_t nb = cols / QK;
        const bool paired = type == PT_Q4_0 && k->q4_paired;
        size_t qbytes = (size_t)(batch * nb * QK + 63) & ~(size_t)63;
        size_t dbytes = (size_t)(batch * nb) * sizeof(float);
        // the path's GEMM-tile layout of the same quants, if it takes one
        const int64_t tmin = k->tile_act_min ? k->tile_act_min(type) : 0;
        const bool tiles = tmin > 0 && batch >= tmin && nb > 0;
        const size_t toff = (qbytes + 2 * dbytes + 63) & ~(size_t)63;
        const size_t tbytes = tiles ? k->tile_act_bytes(nb, batch) : 0;
        char *s = scratch(toff + tbytes + 64);
        int8_t *qs = (int8_t *)s;
        float *d = (float *)(s + qbytes);
        int32_t *s8 = (int32_t *)(s + qbytes + dbytes);
        if (par_act) {
#pragma omp parallel for schedule(static)
            for (int64_t v = 0; v < batch; v++)
                k->quant_act(X + v * cols, nb, paired, qs + v * nb * QK, d + v * nb, s8 + v * nb);
        } else {
            for (int64_t v = 0; v < batch; v++)
                k->quant_act(X + v * cols, nb, paired, qs + v * nb * QK, d + v * nb, s8 + v * nb);
        }
        act = (pt_q8act){.qs = qs, .d = d, .s8 = s8, .nb = nb};
        if (tiles)
            k->tile_act(type, &act, batch, s + toff); // sets act.tq / act.tq_d
    }

    // Tiles: row chunks x vector chunks, handed out dynamically. Every
    // output element is computed by exactly one kernel call, whose result
    // does not depend on the tile it belongs to (kern_internal.h).
    const bool serial = nested || (double)nrows * (double)cols * (double)batch < SERIAL_WORK;
    const int nth = serial ? 1 : omp_get_max_threads();
    int64_t rt, vt;
    if (batch == 1) {
        // ~8 chunks per thread, handed out dynamically: a thread that the OS
        // preempts does not hold the others at the final barrier
        rt = (nrows + 8 * nth - 1) / (8 * nth);
        rt = rt < 16 ? 16 : (rt + 3) & ~(int64_t)3;
        vt = 1;
    } else {
        // Up to 64 vectors in one tile: each row tile's weights are then
        // unpacked once (kern_avx512_qgemm's pair / row preparation is per
        // tile call) and only the last nvec % 4 vectors go to the small
        // tile. A prefill expert group of 33-64 rows was split 32 + 1-32
        // before (engine/moe.c: 32 rows per expert on average at pp512 on
        // bench16), the second part often under the big tile's minimum.
        // Larger batches (the trunk's prefill products) keep tiles of 32:
        // their vectors' layout, 32 x 28 KB at 7168 columns, already fills
        // most of an L2.
        rt = 16;
        vt = batch <= 64 ? batch : 32;
    }
    int64_t nrt[2] = {0, 0}; // row tiles of each part (at most two parts)
    assert(np <= 2);
    for (int j = 0; j < np; j++)
        nrt[j] = (p[j].r1 - p[j].r0 + rt - 1) / rt;
    const int64_t nvt = (batch + vt - 1) / vt;
    const tile_job job = {p, nrt[0], nvt, rt, vt, batch, type, cols, k, quant ? &act : NULL, vdot, vdot4, gact, arb, X};
    const int64_t ntiles = (nrt[0] + nrt[1]) * nvt;
    if (nth > 1) {
#pragma omp parallel for schedule(PT_SCHED) num_threads(nth)
        for (int64_t i = 0; i < ntiles; i++)
            run_tile(&job, i);
    } else {
        for (int64_t i = 0; i < ntiles; i++)
            run_tile(&job, i);
    }
}

static void gemm_rows(const pt_mat *W, size_t rb, int64_t r0, int64_t r1, const float *X, int64_t batch,
                      float *Y, int64_t ldy)
{
    assert(W);
    const gemm_part p = {W, rb, r0, r1, Y, ldy};
    gemm_parts(&p, 1, X, batch);
}

// Two products of the same input in one parallel region (see matmul.h).
// Every output element is still computed by one kernel call on the same
// inputs as pt_gemm would use, so the bits match.
void pt_gemm_pair(const pt_mat *A, const pt_mat *B, const float *X, int64_t batch, float *YA, float *YB)
{
    assert(A && B);
    if (A->type != B->type || A->cols != B->cols) {
        pt_gemm(A, X, batch, YA);
        pt_gemm(B, X, batch, YB);
        return;
    }
    const size_t rb = pt_row_bytes(A->type, (uint64_t)A->cols);
    const gemm_part p[2] = {{A, rb, 0, A->rows, YA, A->rows}, {B, rb, 0, B->rows, YB, B->rows}};
    gemm_parts(p, 2, X, batch);
}

void pt_gemm_rows(const pt_mat *W, int64_t r0, int64_t r1, const float *X, int64_t batch,
                  float *Y, int64_t ldy)
{
    gemm_rows(W, pt_row_bytes(W->type, (uint64_t)W->cols), r0, r1, X, batch, Y, ldy);
}

void pt_gemm_strided(const pt_mat *W, size_t ld_bytes, const float *X, int64_t batch, float *Y, int64_t ldy)
{
    gemm_rows(W, ld_bytes, 0, W->rows, X, batch, Y, ldy);
}

void pt_gemv(const pt_mat *W, const float *x, float *y)
{
    pt_gemm_rows(W, 0, W->rows, x, 1, y, W->rows);
}

void pt_gemm(const pt_mat *W, const float *X, int64_t batch, float *Y)
{
    pt_gemm_rows(W, 0, W->rows, X, batch, Y, W->rows);
}
