// kernels/qt_quantize_x8.c — the scale searches of the K and IQ4
// quantisers run on eight groups at once, one group per SIMD lane, for speed
// (the searches are nearly all of their quantisation time; ~10x for Q4_K).
//
// Bit-exactness: each lane performs exactly the scalar search's sequence of
// f32 operations (qt_quantize_k.c / qt_quantize_iq4.c, themselves ggml's),
// in the same order: only independent groups run side by side, every
// reduction stays sequential within its lane, branches become per-lane
// selects, and nothing is fused (ISO C: no fp contraction; no FMA in the
// vectors). GCC vector extensions
// keep the code portable; on x86-64 an AVX2 clone is picked at run time.
#include "kernels/qt_quantize_util.h"

// The helpers are always inlined; the AVX ABI note is about nothing here.
#pragma GCC diagnostic ignored "-Wpsabi"
// X/W/L* are filled for i < n, the only entries read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

// QZ_PORTABLE_BUILD: no AVX2 clone (tests/test_qt_quantize_portable.c
// builds this file so, to check the code non-AVX2 machines run).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(QZ_PORTABLE_BUILD)
#define QZ_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define QZ_CLONES
#endif

static inline v8f sel_f(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }
static inline v8i sel_i(v8i m, v8i a, v8i b) { return (a & m) | (b & ~m); }
static inline v8f vabs(v8f v) { return (v8f)((v8i)v & 0x7fffffff); }
static inline v8i vclamp(v8i v, int lo, int hi)
{
    v = sel_i(v < lo, (v8i){0} + lo, v);
    return sel_i(v > hi, (v8i){0} + hi, v);
}
static inline v8f vfl(v8i v) { return __builtin_convertvector(v, v8f); }

// qz_nearest_int per lane (the same magic-number rounding).
static inline v8i vnearest(v8f v)
{
    v8i i = (v8i)(v + 12582912.f);
    return (i & 0x007fffff) - 0x00400000;
}

QZ_CLONES
void qz_make_qkx2_x8(int n, int nmax, const float *x, const float *w, uint8_t *L, float *scale_out, float *min_out,
                     float rmin, float rdelta, int nstep, bool use_mad)
{
    assert(n <= 32 && nstep >= 1);
    v8f X[32], W[32];
    v8i Lb[32], La[32];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 8; k++) {
            X[i][k] = x[k * n + i];
            W[i][k] = w[k * n + i];
        }
    v8f mn = X[0], mx = X[0], sum_w = W[0], sum_x = sum_w * X[0];
    for (int i = 1; i < n; i++) {
        mn = sel_f(X[i] < mn, X[i], mn);
        mx = sel_f(X[i] > mx, X[i], mx);
        sum_w += W[i];
        sum_x += W[i] * X[i];
    }
    mn = sel_f(mn > 0, (v8f){0}, mn);
    const v8f mn0 = mn;
    const v8i flat = mx == mn; // lanes that return at once: levels 0, scale 0
    v8f iscale = (float)nmax / (mx - mn);
    v8f scale = 1 / iscale;
    v8f best_error = {0};
    for (int i = 0; i < n; i++) {
        Lb[i] = vclamp(vnearest(iscale * (X[i] - mn)), 0, nmax);
        v8f diff = scale * vfl(Lb[i]) + mn - X[i];
        diff = use_mad ? vabs(diff) : diff * diff;
        best_error += W[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        // (ggml: min here is the best fit so far, updated below)
        iscale = (rmin + rdelta * is + nmax) / (mx - mn);
        v8f sum_l = {0}, sum_l2 = {0}, sum_xl = {0};
        for (int i = 0; i < n; i++) {
            La[i] = vclamp(vnearest(iscale * (X[i] - mn)), 0, nmax);
            v8f l = vfl(La[i]);
            sum_l += W[i] * l;
            sum_l2 += W[i] * l * l;
            sum_xl += W[i] * l * X[i];
        }
        v8f D = sum_w * sum_l2 - sum_l * sum_l;
        v8f this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        v8f this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        v8i pos = this_min > 0;
        this_min = sel_f(pos, (v8f){0}, this_min);
        this_scale = sel_f(pos, sum_xl / sum_l2, this_scale);
        v8f cur_error = {0};
        for (int i = 0; i < n; i++) {
            v8f diff = this_scale * vfl(La[i]) + this_min - X[i];
            diff = use_mad ? vabs(diff) : diff * diff;
            cur_error += W[i] * diff;
        }
        v8i take = (D > 0) & (cur_error < best_error);
        for (int i = 0; i < n; i++)
            Lb[i] = sel_i(take, La[i], Lb[i]);
        best_error = sel_f(take, cur_error, best_error);
        scale = sel_f(take, this_scale, scale);
        mn = sel_f(take, this_min, mn);
    }
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < n; i++)
            L[k * n + i] = flat[k] ? 0 : (uint8_t)Lb[i][k];
        scale_out[k] = flat[k] ? 0.f : scale[k];
        min_out[k] = flat[k] ? -mn0[k] : -mn[k];
    }
}

QZ_CLONES
void qz_make_qx_x8(int n, int nmax, const float *x, int8_t *L, float *scale_out)
{
    assert(n <= 32);
    v8f X[32];
    v8i Lb[32], La[32];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            X[i][k] = x[k * n + i];
    v8f mx = {0}, amax = {0};
    for (int i = 0; i < n; i++) {
        v8f ax = vabs(X[i]);
        v8i m = ax > amax;
        amax = sel_f(m, ax, amax);
        mx = sel_f(m, X[i], mx);
    }
    const v8i zero = amax < GROUP_MAX_EPS;
    v8f iscale = (float)-nmax / mx;
    v8f sumlx = {0}, suml2 = {0};
    for (int i = 0; i < n; i++) {
        v8i l = vclamp(vnearest(iscale * X[i]), -nmax, nmax - 1);
        Lb[i] = l + nmax;
        v8f w = X[i] * X[i], fl = vfl(l);
        sumlx += w * X[i] * fl;
        suml2 += w * fl * fl;
    }
    v8f scale = sel_f(suml2 != 0, sumlx / suml2, (v8f){0});
    v8f best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / mx;
        sumlx = suml2 = (v8f){0};
        for (int i = 0; i < n; i++) {
            v8i l = vclamp(vnearest(iscale * X[i]), -nmax, nmax - 1);
            La[i] = l + nmax;
            v8f w = X[i] * X[i], fl = vfl(l);
            sumlx += w * X[i] * fl;
            suml2 += w * fl * fl;
        }
        v8i take = (suml2 > 0) & (sumlx * sumlx > best * suml2);
        for (int i = 0; i < n; i++)
            Lb[i] = sel_i(take, La[i], Lb[i]);
        scale = sel_f(take, sumlx / suml2, scale);
        best = sel_f(take, scale * sumlx, best);
    }
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < n; i++)
            L[k * n + i] = zero[k] ? 0 : (int8_t)Lb[i][k];
        scale_out[k] = zero[k] ? 0.f : scale[k];
    }
}

// The IQ4 level chosen for each lane's v (as a float), as ggml's
// best_index_int8 chooses it: up to the first level the first; from the
// last level up (and for NaN, where its binary search ends there) the last;
// otherwise, with lo <= v < hi the two levels around v, lo iff
// v - lo < hi - v (a tie goes to hi). lo and hi come from a 16-entry table
// lookup (t_lo, t_hi: levels 0-7, 8-15).
static inline v8f vlevel(v8f v, v8f t_lo, v8f t_hi, const float *lv)
{
    v8i idx = {0}; // lo's index: how many of levels 1..14 are <= v
    for (int k = 1; k < 15; k++)
        idx -= (v8f){0} + lv[k] <= v;
#ifdef __clang__
    // clang has no two-vector shuffle by variable indices: the same lookup lane by lane.
    v8f lo, hi;
    for (int i = 0; i < 8; i++) {
        lo[i] = idx[i] < 8 ? t_lo[idx[i]] : t_hi[idx[i] - 8];
        hi[i] = idx[i] + 1 < 8 ? t_lo[idx[i] + 1] : t_hi[idx[i] - 7];
    }
#else
    v8f lo = __builtin_shuffle(t_lo, t_hi, idx), hi = __builtin_shuffle(t_lo, t_hi, idx + 1);
#endif
    v8f q = sel_f(v - lo < hi - v, lo, hi);
    q = sel_f(v <= lv[0], (v8f){0} + lv[0], q);
    return sel_f((v >= lv[15]) | (v != v), (v8f){0} + lv[15], q);
}

QZ_CLONES
void qz_iq4_scales_x8(const float *x, const int8_t *levels, int ntry, float *d_out)
{
    assert(ntry > 0);
    v8f X[32];
    float lv[16];
    for (int k = 0; k < 16; k++)
        lv[k] = levels[k];
    v8f t_lo, t_hi; // the levels as a 16-entry table for the lookups
    for (int k = 0; k < 8; k++) {
        t_lo[k] = lv[k];
        t_hi[k] = lv[8 + k];
    }
    for (int i = 0; i < 32; i++)
        for (int k = 0; k < 8; k++)
            X[i][k] = x[32 * k + i];
    v8f amax = {0}, mx = {0};
    for (int i = 0; i < 32; i++) {
        v8f ax = vabs(X[i]);
        v8i m = ax > amax;
        amax = sel_f(m, ax, amax);
        mx = sel_f(m, X[i], mx);
    }
    const v8i zero = amax < GROUP_MAX_EPS;
    v8f d = -mx / lv[0];
    v8f id = 1 / d;
    v8f sumqx = {0}, sumq2 = {0};
    for (int i = 0; i < 32; i++) {
        v8f q = vlevel(id * X[i], t_lo, t_hi, lv), w = X[i] * X[i];
        sumqx += w * q * X[i];
        sumq2 += w * q * q;
    }
    d = sel_f(sumq2 > 0, sumqx / sumq2, (v8f){0});
    v8f best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; itry++) {
        id = (float)(itry + levels[0]) / mx;
        sumqx = sumq2 = (v8f){0};
        for (int i = 0; i < 32; i++) {
            v8f q = vlevel(id * X[i], t_lo, t_hi, lv), w = X[i] * X[i];
            sumqx += w * q * X[i];
            sumq2 += w * q * q;
        }
        v8i take = (sumq2 > 0) & (sumqx * sumqx > best * sumq2);
        d = sel_f(take, sumqx / sumq2, d);
        best = sel_f(take, d * sumqx, best);
    }
    for (int k = 0; k < 8; k++)
        d_out[k] = zero[k] ? 0.f : d[k];
}

QZ_CLONES
void qz_make_q3_x8(int n, int nmax, const float *x, int8_t *L, float *scale_out)
{
    assert(n <= 32);
    v8f X[32];
    v8i Li[32];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            X[i][k] = x[k * n + i];
    v8f mx = {0}, amax = {0};
    for (int i = 0; i < n; i++) {
        v8f ax = vabs(X[i]);
        v8i m = ax > amax;
        amax = sel_f(m, ax, amax);
        mx = sel_f(m, X[i], mx);
    }
    const v8i zero = amax < GROUP_MAX_EPS;
    v8f iscale = (float)-nmax / mx;
    v8f sumlx = {0}, suml2 = {0};
    for (int i = 0; i < n; i++) {
        Li[i] = vclamp(vnearest(iscale * X[i]), -nmax, nmax - 1);
        v8f w = X[i] * X[i], fl = vfl(Li[i]);
        sumlx += w * X[i] * fl;
        suml2 += w * fl * fl;
    }
    // Up to 5 sweeps; a lane whose sweep changed nothing would change
    // nothing in another one (same state), so sweeping on while any lane
    // still changes equals the scalar early exit.
    for (int itry = 0; itry < 5; itry++) {
        v8i changed = {0};
        for (int i = 0; i < n; i++) {
            v8f w = X[i] * X[i], fl = vfl(Li[i]);
            v8f slx = sumlx - w * X[i] * fl;
            v8f sl2 = suml2 - w * fl * fl;
            v8i new_l = vclamp(vnearest(X[i] * sl2 / slx), -nmax, nmax - 1);
            v8f fn = vfl(new_l);
            v8f slx2 = slx + w * X[i] * fn;
            v8f sl2b = sl2 + w * fn * fn;
            v8i take = (slx > 0) & (new_l != Li[i]) & (sl2b > 0) & (slx2 * slx2 * suml2 > sumlx * sumlx * sl2b);
            Li[i] = sel_i(take, new_l, Li[i]);
            sumlx = sel_f(take, slx2, sumlx);
            suml2 = sel_f(take, sl2b, suml2);
            changed |= take;
        }
        int any = 0;
        for (int k = 0; k < 8; k++)
            any |= changed[k];
        if (!any)
            break;
    }
    v8f scale = sel_f(suml2 > 0, sumlx / suml2, (v8f){0});
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < n; i++)
            L[k * n + i] = zero[k] ? 0 : (int8_t)(Li[i][k] + nmax);
        scale_out[k] = zero[k] ? 0.f : scale[k];
    }
}
