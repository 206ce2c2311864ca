// kernels/ops.c — per-token element-wise work. Every reduction uses the
// 16-lane fmaf order of kernels/kern_internal.h (through the current path's
// pt_dot_f32), so the results are identical on every path. Transcendentals
// use libm's expf / sqrtf on every path.
#include "kernels/ops.h"
#include "kernels/kern_internal.h"

#include <assert.h>
#include <math.h>

float pt_dot_f32(const float *a, const float *b, int64_t n)
{
    assert(n >= 0);
    return pt_kern_current()->dot_f32(a, b, n);
}

void pt_axpy(float *y, float a, const float *x, int64_t n)
{
    assert(n >= 0);
    pt_kern_current()->axpy(y, a, x, n);
}

void pt_dot_rows_f32(float *out, const float *q, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    assert(n >= 0 && d >= 0 && (n <= 1 || ld >= d));
    pt_kern_current()->dot_rows(out, q, rows, n, d, ld);
}

void pt_axpy_rows_f32(float *out, const float *p, const float *rows, int64_t n, int64_t d, int64_t ld)
{
    assert(n >= 0 && d >= 0 && (n <= 1 || ld >= d));
    pt_kern_current()->axpy_rows(out, p, rows, n, d, ld);
}

// scale = 1 / sqrtf(sum(x^2) / n + eps), y_i = (x_i * scale) * w_i.
void pt_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    assert(n > 0);
    const float ss = pt_dot_f32(x, x, n);
    const float scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * scale) * w[i];
}

// x_i = expf(x_i - max) / sum, the sum taken in the 16-lane order.
void pt_softmax(float *x, int64_t n)
{
    assert(n > 0);
    float m = x[0];
    for (int64_t i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    float acc[16] = {0};
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        acc[i % 16] += x[i];
    }
    const float sum = pt_reduce16(acc);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] / sum;
}

// out_i = gate_i / (1 + expf(-gate_i)) * up_i
void pt_swiglu(float *out, const float *gate, const float *up, int64_t n)
{
    assert(n >= 0);
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
