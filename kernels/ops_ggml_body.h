// kernels/ops_ggml_body.h — the bodies of kernels/ops.c's ggml-order ops,
// included once per code path with OPS_FN (the name's suffix) and OPS_ATTR
// (the target ISA) defined: the same C, so the same IEEE operations and the
// same bits on every path; the wider ISAs only let the compiler use FMA
// instructions and vectors for them. Not a header to include elsewhere.

// ggml_compute_forward_rms_norm_f32 then the weight multiply:
// sum = double sum of (float)(x_i * x_i) in order, mean = (float)(sum / n),
// scale = 1 / sqrtf(mean + eps), y_i = x_i * scale * w_i.
static OPS_ATTR void OPS_FN(rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps)
{
    assert(n > 0);
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

// ggml_soft_max_ext over key positions: x[j] is the (already scaled)
// score of position pos[j] (ascending; pos NULL: position j), every other
// position is masked (-inf, exp 0). The exps of each aligned 16-position
// chunk (v_expf) are reduced as one register and the chunk sums added in
// double; the probabilities are exp * (float)(1 / sum).
static OPS_ATTR void OPS_FN(softmax_at)(float *x, const int32_t *pos, int64_t n)
{
    assert(n > 0);
    float m = x[0];
    for (int64_t i = 1; i < n; i++)
        m = x[i] > m ? x[i] : m;
    double sum = 0;
    if (!pos) { // positions 0..n-1: whole chunks, the last one zero-padded
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            x[i] = v_expf(x[i] - m);
        for (int64_t i0 = 0; i0 < n; i0 += 16) {
            float lane[16];
            memset(lane, 0, sizeof lane);
            memcpy(lane, x + i0, sizeof(float) * (size_t)(n - i0 < 16 ? n - i0 : 16));
            sum += (double)reduce16(lane);
        }
        const float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            x[i] *= inv;
        return;
    }
    float lane[16];
    memset(lane, 0, sizeof lane);
    int64_t chunk = pos[0] / 16;
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = pos[i];
        assert(i == 0 || pos[i] > pos[i - 1]);
        if (p / 16 != chunk) {
            sum += (double)reduce16(lane);
            memset(lane, 0, sizeof lane);
            chunk = p / 16;
        }
        x[i] = v_expf(x[i] - m);
        lane[p % 16] = x[i];
    }
    sum += (double)reduce16(lane);
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

// ggml_vec_swiglu_f32: full 16-chunks silu(g) = g / (1 + v_expf(0 - g)),
// the tail with libm's expf; times up (each rounded separately).
static OPS_ATTR void OPS_FN(swiglu)(float *out, const float *gate, const float *up, int64_t n)
{
    assert(n >= 0);
    const int64_t nv = n / 16 * 16;
#pragma omp simd
    for (int64_t i = 0; i < nv; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + v_expf(0.0f - g)) * up[i];
    }
    for (int64_t i = nv; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

// ggml_vec_dot_f32 (AVX-512 build): 4 accumulators of 16 lanes over each
// 64-value chunk (fused), acc0 + acc2, acc1 + acc3, then those two, the
// register reduced, then the tail's products added one by one unfused.
static OPS_ATTR float OPS_FN(dot_f32_ggml)(const float *a, const float *b, int64_t n)
{
    assert(n >= 0);
    float acc[4][16];
    memset(acc, 0, sizeof acc);
    const int64_t np = n / 64 * 64;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++)
                acc[j][l] = fmaf(a[i + j * 16 + l], b[i + j * 16 + l], acc[j][l]);
    for (int l = 0; l < 16; l++) {
        acc[0][l] += acc[2][l];
        acc[1][l] += acc[3][l];
    }
    for (int l = 0; l < 16; l++)
        acc[0][l] += acc[1][l];
    float s = reduce16(acc[0]);
    for (int64_t i = np; i < n; i++) {
        const float p = a[i] * b[i];
        s += p;
    }
    return s;
}

// tinyBLAS (llamafile sgemm, AVX-512) for V^T p over the key positions:
// out[i] = reduce16(lanes), lane L accumulating fmaf(p[j], row_j[i], .) over
// the keys whose position is L mod 16, in position order (masked positions
// add exact zeros). Rows: row j at rows + (pos ? pos[j] : j) * ld. The 16
// lanes of WC columns at a time live in a stack block (16 KiB), each key's
// row added to its lane's vector (an axpy), then the lanes reduced.
static OPS_ATTR void OPS_FN(wsum_rows)(float *out, const float *p, const int32_t *pos, const float *rows, int64_t n, int64_t d,
                          int64_t ld)
{
    assert(n >= 0 && d >= 0);
    enum { WC = 256 };
    float acc[16][WC]; // (lane, column)
    for (int64_t i0 = 0; i0 < d; i0 += WC) {
        const int w = d - i0 < WC ? (int)(d - i0) : WC;
        for (int k = 0; k < 16; k++)
            memset(acc[k], 0, sizeof(float) * (size_t)w);
        for (int64_t j = 0; j < n; j++) {
            const int64_t t = pos ? pos[j] : j;
            const float *r = rows + (size_t)t * (size_t)ld + i0;
            float *a = acc[t % 16];
            const float pj = p[j];
#pragma omp simd
            for (int c = 0; c < w; c++)
                a[c] = fmaf(pj, r[c], a[c]);
        }
        // reduce16 per column: t_k = a_k + a_{k+8}, ((t0+t4)+(t2+t6)) + ((t1+t5)+(t3+t7))
#pragma omp simd
        for (int c = 0; c < w; c++) {
            const float t0 = acc[0][c] + acc[8][c], t1 = acc[1][c] + acc[9][c];
            const float t2 = acc[2][c] + acc[10][c], t3 = acc[3][c] + acc[11][c];
            const float t4 = acc[4][c] + acc[12][c], t5 = acc[5][c] + acc[13][c];
            const float t6 = acc[6][c] + acc[14][c], t7 = acc[7][c] + acc[15][c];
            out[i0 + c] = ((t0 + t4) + (t2 + t6)) + ((t1 + t5) + (t3 + t7));
        }
    }
}
