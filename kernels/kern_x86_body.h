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
// over blocks: GEMM takes four vectors per weight row to hide the fma
// latency; GEMV one row at a time (one stream from DRAM, KX(row_q)).
// Activations are in the natural layout (q4_paired false).

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

// One weight row · one vector, eight blocks per step (their d_w * d_x made
// at once by KX(dw8) and broadcast from a small table into each block's
// fma). A GEMV takes its rows one after the other, so each thread reads ONE
// sequential stream, which the core's own prefetchers follow, plus a
// software hint KX_PREFETCH bytes ahead (one per 64-byte line; past the
// row's end it lands in the next rows, which come next). Four rows side by
// side (the scheme before) hid the fma latency but made four streams whose
// DRAM reads did not overlap the compute: on Zen 3 the GEMV ran at about
// the in-cache compute time plus the read time, 0.57-0.64 of the read
// bandwidth for Q4_0, 0.72-0.77 for Q8_0; this loop 0.66-0.89 and
// 0.73-0.92 in the same runs (docs/kernels.md). The lane chain is the
// contract's, sequential over blocks: one fma latency per block, about a
// block's DRAM time, so the compute hides behind the stream.
static KX_IN float KX(row_q)(bool q8, const uint8_t *w, const int8_t *xq, const float *xd, int64_t nb)
{
    const int bs = q8 ? 34 : 18;
    __m256 acc = _mm256_setzero_ps();
    float ddt[8] __attribute__((aligned(32))); // (8,) d_w * d_x of blocks b .. b + 7
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *wb = w + (size_t)b * bs;
        if (KX_PREFETCH)
            for (int o = 0; o < 8 * bs; o += 64)
                _mm_prefetch((const char *)wb + KX_PREFETCH + o, _MM_HINT_T0);
        _mm256_store_ps(ddt, _mm256_mul_ps(KX(dw8)(wb, bs), _mm256_loadu_ps(xd + b)));
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m256i xv = _mm256_load_si256((const __m256i *)(xq + (b + k) * QK));
            const __m256i off = q8 ? _mm256_setzero_si256() : KX_DOT(_mm256_set1_epi8(8), xv);
            acc = KX(rblk)(q8, wb + k * bs, xv, off, _mm256_broadcast_ss(&ddt[k]), acc);
        }
    }
    for (; b < nb; b++) {
        const uint8_t *wb = w + (size_t)b * bs;
        const __m256i xv = _mm256_load_si256((const __m256i *)(xq + b * QK));
        const __m256i off = q8 ? _mm256_setzero_si256() : KX_DOT(_mm256_set1_epi8(8), xv);
        acc = KX(rblk)(q8, wb, xv, off, _mm256_set1_ps(_cvtsh_ss(KX(ld16)(wb)) * xd[b]), acc);
    }
    return KX(hsum8)(acc);
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
// the remaining vectors one at a time, row after row.
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
        if (q8)
            for (int64_t r = 0; r < nrows; r++)
                yv[r] = KX(row_q)(true, w + r * rb, xq, xd, nb);
        else
            for (int64_t r = 0; r < nrows; r++)
                yv[r] = KX(row_q)(false, w + r * rb, xq, xd, nb);
    }
}
#endif
