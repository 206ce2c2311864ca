// kernels/kern_x86_body.h — the block-quantised dot products shared by the
// AVX2, AVX-VNNI and AVX-512 VNNI paths; included by kern_avx2.c /
// kern_avxvnni.c / kern_avx512.c after they define:
//   KX_TGT          the target attribute string
//   KX(name)        name mangling (name##_avx2 ...)
//   KX_DOT(u, s)    8 int32 lanes, lane l = the sum of the products of
//                   bytes 4l..4l+3 of u (u8) and s (s8)
//
// Contract (kern_internal.h, ggml's x86 ggml_vec_dot_q{4,8}_0_q8_0): block
// b's eight 4-product lane sums meet d_w * d_x in one fma into the eight
// lane accumulators. That is ggml's own arithmetic: signed weights (Q4_0:
// nibble - 8, low nibbles then high ones), |w| x sign(x, w) through
// KX_DOT, one broadcast fma per block. The chain per lane is sequential
// over blocks, so GEMV interleaves four rows and GEMM four vectors to hide
// the fma latency. Activations are in the natural layout (q4_paired false).

// Software prefetch distance in bytes ahead of the weight stream (0: none).
#ifndef KX_PREFETCH
#define KX_PREFETCH 2048
#endif

#define KX_FN __attribute__((target(KX_TGT)))
#define KX_IN __attribute__((target(KX_TGT), always_inline)) inline

static KX_IN uint16_t KX(ld16)(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

// A block's 32 weights as signed bytes in ggml's order (Q4_0: the 16 low
// nibbles, then the 16 high ones, each minus 8).
static KX_IN __m256i KX(wq)(bool q8, const uint8_t *wb)
{
    if (q8)
        return _mm256_loadu_si256((const __m256i *)(wb + 2));
    const __m128i t = _mm_loadu_si128((const __m128i *)(wb + 2));
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_sub_epi8(_mm256_and_si256(b, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}

// acc = fma(d_w * d_x, lanes(|w| . sign(x, w)), acc): one block of one
// (row, vector) pair; aw = |q| computed once per weight block.
static KX_IN __m256 KX(bfma)(__m256i q, __m256i aw, float dw, const int8_t *xb, float dx, __m256 acc)
{
    const __m256i s = KX_DOT(aw, _mm256_sign_epi8(_mm256_load_si256((const __m256i *)xb), q));
    return _mm256_fmadd_ps(_mm256_set1_ps(dw * dx), _mm256_cvtepi32_ps(s), acc);
}

// ggml's hsum_float_8: ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)).
static KX_IN float KX(hsum8)(__m256 a)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

// One block of one row: acc = fma(dd, lanes, acc); off = 8 x the lane sums
// of the activation block xv (Q4_0), dd the broadcast d_w * d_x.
static KX_IN __m256 KX(rblk)(bool q8, const uint8_t *wb, __m256i xv, __m256i off, __m256 dd, __m256 acc)
{
    __m256i s;
    if (q8) {
        const __m256i q = KX(wq)(true, wb);
        s = KX_DOT(_mm256_sign_epi8(q, q), _mm256_sign_epi8(xv, q));
    } else {
        // raw nibbles (0..15) x activation, minus 8 x the lane's activation
        // sum (once for the rows): the signed product's exact ints, cheaper
        // the 16 bytes in both halves (one broadcast load), the high half
        // shifted by 4: low nibbles then high ones, as in KX(wq)
        const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
        const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(t, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                                             _mm256_set1_epi8(0x0F));
        s = _mm256_sub_epi32(KX_DOT(nib, xv), off);
    }
    return _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(s), acc);
}

// d_w of 8 consecutive blocks (bs bytes apart from p) as f32: the eight
// fp16 words inserted into one register, F16C.
static KX_IN __m256 KX(dw8)(const uint8_t *p, int bs)
{
    __m128i h = _mm_cvtsi32_si128(KX(ld16)(p));
    h = _mm_insert_epi16(h, KX(ld16)(p + bs), 1);
    h = _mm_insert_epi16(h, KX(ld16)(p + 2 * bs), 2);
    h = _mm_insert_epi16(h, KX(ld16)(p + 3 * bs), 3);
    h = _mm_insert_epi16(h, KX(ld16)(p + 4 * bs), 4);
    h = _mm_insert_epi16(h, KX(ld16)(p + 5 * bs), 5);
    h = _mm_insert_epi16(h, KX(ld16)(p + 6 * bs), 6);
    h = _mm_insert_epi16(h, KX(ld16)(p + 7 * bs), 7);
    return _mm256_cvtph_ps(h);
}

// NR (1..4) weight rows (row r at w + r * rb) · one vector -> y[0..NR).
// The products d_w * d_x (exact in f32) of 8 blocks are made at once per
// row (KX(dw8)) and broadcast from a small table into each block's fma.
static KX_IN void KX(rows_q)(bool q8, int nr, const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                             int64_t nb, float *y)
{
    const int bs = q8 ? 34 : 18;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float ddt[4][8] __attribute__((aligned(32))); // (nr, 8) d_w * d_x of blocks b & ~7 ..
    // Prefetch KX_PREFETCH bytes ahead in each row's own progress: position
    // p + KX_PREFETCH of a row lies k = (p + KX_PREFETCH) / rb groups of nr
    // rows further on (the rows of a group are consumed side by side), at
    // wb + KX_PREFETCH + k * (nr - 1) * rb; k is kept incrementally.
    size_t pfo = KX_PREFETCH, wrap = rb; // wrap: where k next grows, + KX_PREFETCH
    for (int64_t b = 0; b < nb; b++) {
        if ((b & 7) == 0) {
            if (b + 8 <= nb) {
                const __m256 xd8 = _mm256_loadu_ps(xd + b);
#pragma GCC unroll 4
                for (int r = 0; r < nr; r++)
                    _mm256_store_ps(ddt[r], _mm256_mul_ps(KX(dw8)(w + r * rb + (size_t)b * bs, bs), xd8));
            } else {
                for (int r = 0; r < nr; r++)
                    for (int64_t k = b; k < nb; k++)
                        ddt[r][k - b] = _cvtsh_ss(KX(ld16)(w + r * rb + (size_t)k * bs)) * xd[k];
            }
        }
        const __m256i xv = _mm256_load_si256((const __m256i *)(xq + b * QK));
        const __m256i off = q8 ? _mm256_setzero_si256() : KX_DOT(_mm256_set1_epi8(8), xv);
        const size_t pos = (size_t)b * bs;
        while (KX_PREFETCH && pos + KX_PREFETCH >= wrap) {
            pfo += (size_t)(nr - 1) * rb;
            wrap += rb;
        }
        const bool pf = KX_PREFETCH && (pos & 63) < (size_t)bs; // once per 64-byte line
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            const uint8_t *wb = w + r * rb + pos;
            if (pf)
                _mm_prefetch((const char *)wb + pfo, _MM_HINT_T0);
            acc[r] = KX(rblk)(q8, wb, xv, off, _mm256_broadcast_ss(&ddt[r][b & 7]), acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < nr; r++)
        y[r] = KX(hsum8)(acc[r]);
}

// One weight row · four vectors (v .. v+3) -> y[j * ldy]: each weight block
// is loaded and unpacked once for the four.
static KX_IN void KX(row_x4)(bool q8, const uint8_t *w, const pt_q8act *x, int64_t v, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    const size_t bs = q8 ? 34 : 18;
    const int8_t *xq[4];
    const float *xd[4];
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        xq[j] = x->qs + (v + j) * nb * QK;
        xd[j] = x->d + (v + j) * nb;
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bs;
        const __m256i q = KX(wq)(q8, wb);
        const __m256i aw = _mm256_sign_epi8(q, q);
        const float dw = _cvtsh_ss(KX(ld16)(wb));
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[j] = KX(bfma)(q, aw, dw, xq[j] + b * QK, xd[j][b], acc[j]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        y[j * ldy] = KX(hsum8)(acc[j]);
}

#ifndef KX_NO_QTILE // (a file that only wants the pieces above)
// Rows x vectors: vectors in fours (weights reused from registers), then
// the remaining vectors one at a time, rows in fours.
static KX_FN void KX(qtile)(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x,
                            int64_t v0, int64_t nvec, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    const bool q8 = t == PT_Q8_0;
    int64_t v = 0;
    for (; v + 4 <= nvec; v += 4) {
        if (q8)
            for (int64_t r = 0; r < nrows; r++)
                KX(row_x4)(true, w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
        else
            for (int64_t r = 0; r < nrows; r++)
                KX(row_x4)(false, w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
    }
    for (; v < nvec; v++) {
        const int8_t *xq = x->qs + (v0 + v) * nb * QK;
        const float *xd = x->d + (v0 + v) * nb;
        float *yv = y + v * ldy;
        int64_t r = 0;
        if (q8) {
            for (; r + 4 <= nrows; r += 4)
                KX(rows_q)(true, 4, w + r * rb, rb, xq, xd, nb, yv + r);
            for (; r < nrows; r++)
                KX(rows_q)(true, 1, w + r * rb, rb, xq, xd, nb, yv + r);
        } else {
            for (; r + 4 <= nrows; r += 4)
                KX(rows_q)(false, 4, w + r * rb, rb, xq, xd, nb, yv + r);
            for (; r < nrows; r++)
                KX(rows_q)(false, 1, w + r * rb, rb, xq, xd, nb, yv + r);
        }
    }
}
#endif
