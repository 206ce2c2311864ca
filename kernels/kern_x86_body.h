// kernels/kern_x86_body.h — the block-quantised dot products shared by the
// AVX2 and AVX-512 VNNI paths; included by kern_avx2.c / kern_avx512.c after
// they define:
//   KX_TGT          the target attribute string
//   KX(name)        name mangling (name##_avx2 ...)
//   KX_DOT(u, s)    8 int32 lanes whose sum is the dot of 32 u8 x 32 s8
//   KX_DOT2(u1, s1, u2, s2)   same for two such pairs added together
//
// Contract (kern_internal.h): block b's exact integer dot meets its scale
// d_w * d_x in one fmaf into lane b % 8. Here eight blocks are reduced
// together: their int32 lane vectors are folded by hadd into one vector
// whose lane j is block j's dot, which then takes one fma.
//
// Q4_0 activation layout (pt_kern.q4_paired): within each full group of 8
// blocks, blocks p and p + 4 (p < 4) are interleaved in 64 bytes as
//   [x_p[0..15] | x_{p+4}[0..15] | x_p[16..31] | x_{p+4}[16..31]]
// so that one 256-bit load of nibbles carries two blocks; leftover blocks
// after the last full group keep the natural layout.

// Software prefetch distance in bytes ahead of the weight stream (0: none);
// 1 KiB measured as good as or better than none from DRAM on Zen 3.
#ifndef KX_PREFETCH
#define KX_PREFETCH 1024
#endif

// GEMV two rows at a time (1) or one (0). Two interleaved row streams
// measured slower from DRAM on the development machine (Zen 3), so 0.
#ifndef KX_ROWS2
#define KX_ROWS2 0
#endif

#define KX_FN __attribute__((target(KX_TGT)))
#define KX_IN __attribute__((target(KX_TGT), always_inline)) inline

static KX_IN uint16_t KX(ld16)(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static KX_IN int32_t KX(hsum_i32)(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

// fp16 scales of 8 consecutive blocks as f32. Block k's scale sits at byte
// k * BS = 16k + 2k (Q4_0, BS 18) or 32k + 2k (Q8_0, BS 34): a 16-byte load
// at k * STEP has it in word k, so seven word blends gather all eight.
static KX_IN __m256 KX(scales8)(const uint8_t *w, int step)
{
    __m128i r = _mm_loadu_si128((const __m128i *)w);
    r = _mm_blend_epi16(r, _mm_loadu_si128((const __m128i *)(w + 1 * step)), 0x02);
    r = _mm_blend_epi16(r, _mm_loadu_si128((const __m128i *)(w + 2 * step)), 0x04);
    r = _mm_blend_epi16(r, _mm_loadu_si128((const __m128i *)(w + 3 * step)), 0x08);
    r = _mm_blend_epi16(r, _mm_loadu_si128((const __m128i *)(w + 4 * step)), 0x10);
    r = _mm_blend_epi16(r, _mm_loadu_si128((const __m128i *)(w + 5 * step)), 0x20);
    r = _mm_blend_epi16(r, _mm_loadu_si128((const __m128i *)(w + 6 * step)), 0x40);
    r = _mm_blend_epi16(r, _mm_loadu_si128((const __m128i *)(w + 7 * step)), 0x80);
    return _mm256_cvtph_ps(r);
}

// Q4_0 blocks a and b (paired activation at xp): lanes 0-3 sum to a's
// nibble dot, lanes 4-7 to b's.
static KX_IN __m256i KX(pdot_q4)(const uint8_t *wa, const uint8_t *wb, const int8_t *xp)
{
    const __m256i raw = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(wa + 2))),
        _mm_loadu_si128((const __m128i *)(wb + 2)), 1);
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(raw, m);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m);
    return KX_DOT2(lo, _mm256_load_si256((const __m256i *)xp), hi,
                   _mm256_load_si256((const __m256i *)(xp + 32)));
}

// One Q4_0 block against natural-layout activation: 8 lanes summing to the
// nibble dot.
static KX_IN __m256i KX(bdot_q4)(const uint8_t *wb, const int8_t *xq)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)(wb + 2));
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return KX_DOT(_mm256_and_si256(b, _mm256_set1_epi8(0x0F)), _mm256_load_si256((const __m256i *)xq));
}

static KX_IN __m256i KX(bdot_q8)(const uint8_t *wb, const int8_t *xq)
{
    const __m256i w = _mm256_loadu_si256((const __m256i *)(wb + 2));
    const __m256i y = _mm256_load_si256((const __m256i *)xq);
    return KX_DOT(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
}

// Group of 8 Q4_0 blocks -> lane j = nibble dot of block j.
#ifdef KX_PAIR16
// maddubs path: keep the pair sums in int16 and fold with hadd_epi16 before
// the one madd. No overflow: a pair lane is <= 2 * 2 * 15 * 127 = 7620 in
// magnitude, after two hadds <= 30480 < 32767 (activation quants are in
// [-127, 127]).
static KX_IN __m256i KX(pdot16_q4)(const uint8_t *wa, const uint8_t *wb, const int8_t *xp)
{
    const __m256i raw = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(wa + 2))),
        _mm_loadu_si128((const __m128i *)(wb + 2)), 1);
    const __m256i m = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(raw, m);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m);
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_load_si256((const __m256i *)xp)),
                            _mm256_maddubs_epi16(hi, _mm256_load_si256((const __m256i *)(xp + 32))));
}

static KX_IN __m256i KX(group_q4)(const uint8_t *w, const int8_t *xg)
{
    const __m256i p0 = KX(pdot16_q4)(w, w + 4 * 18, xg);
    const __m256i p1 = KX(pdot16_q4)(w + 18, w + 5 * 18, xg + 64);
    const __m256i p2 = KX(pdot16_q4)(w + 2 * 18, w + 6 * 18, xg + 128);
    const __m256i p3 = KX(pdot16_q4)(w + 3 * 18, w + 7 * 18, xg + 192);
    const __m256i c = _mm256_hadd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_hadd_epi16(p2, p3));
    return _mm256_madd_epi16(c, _mm256_set1_epi16(1));
}
#else
static KX_IN __m256i KX(group_q4)(const uint8_t *w, const int8_t *xg)
{
    const __m256i v0 = KX(pdot_q4)(w, w + 4 * 18, xg);
    const __m256i v1 = KX(pdot_q4)(w + 18, w + 5 * 18, xg + 64);
    const __m256i v2 = KX(pdot_q4)(w + 2 * 18, w + 6 * 18, xg + 128);
    const __m256i v3 = KX(pdot_q4)(w + 3 * 18, w + 7 * 18, xg + 192);
    return _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
}
#endif

static KX_IN __m256i KX(group_q8)(const uint8_t *w, const int8_t *xg)
{
    const __m256i g0 = _mm256_hadd_epi32(
        _mm256_hadd_epi32(KX(bdot_q8)(w, xg), KX(bdot_q8)(w + 34, xg + 32)),
        _mm256_hadd_epi32(KX(bdot_q8)(w + 2 * 34, xg + 64), KX(bdot_q8)(w + 3 * 34, xg + 96)));
    const __m256i g1 = _mm256_hadd_epi32(
        _mm256_hadd_epi32(KX(bdot_q8)(w + 4 * 34, xg + 128), KX(bdot_q8)(w + 5 * 34, xg + 160)),
        _mm256_hadd_epi32(KX(bdot_q8)(w + 6 * 34, xg + 192), KX(bdot_q8)(w + 7 * 34, xg + 224)));
    return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20),
                            _mm256_permute2x128_si256(g0, g1, 0x31));
}

// Leftover blocks (after the last full group of 8): natural layout, one
// block at a time, scalar fmaf into the stored lanes — the same arithmetic.
static KX_IN float KX(tail_q4)(const uint8_t *w, const int8_t *xq, const float *xd, const int32_t *xs,
                               int64_t b, int64_t nb, __m256 acc)
{
    float a[8];
    _mm256_storeu_ps(a, acc);
    for (; b < nb; b++) {
        const uint8_t *wb = w + b * 18;
        const int32_t s = KX(hsum_i32)(KX(bdot_q4)(wb, xq + b * QK)) - xs[b];
        a[b % 8] = fmaf((float)s, _cvtsh_ss(KX(ld16)(wb)) * xd[b], a[b % 8]);
    }
    return pt_reduce8(a);
}

static KX_IN float KX(tail_q8)(const uint8_t *w, const int8_t *xq, const float *xd, int64_t b, int64_t nb,
                               __m256 acc)
{
    float a[8];
    _mm256_storeu_ps(a, acc);
    for (; b < nb; b++) {
        const uint8_t *wb = w + b * 34;
        const int32_t s = KX(hsum_i32)(KX(bdot_q8)(wb, xq + b * QK));
        a[b % 8] = fmaf((float)s, _cvtsh_ss(KX(ld16)(wb)) * xd[b], a[b % 8]);
    }
    return pt_reduce8(a);
}

// One weight row (nb blocks) · one quantised vector.
static KX_IN float KX(row_q4)(const uint8_t *w, const int8_t *xq, const float *xd, const int32_t *xs,
                              int64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *wg = w + b * 18;
        if (KX_PREFETCH) {
            _mm_prefetch((const char *)wg + KX_PREFETCH, _MM_HINT_T0);
            _mm_prefetch((const char *)wg + KX_PREFETCH + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)wg + KX_PREFETCH + 128, _MM_HINT_T0);
        }
        __m256i s = _mm256_sub_epi32(KX(group_q4)(wg, xq + b * QK),
                                     _mm256_loadu_si256((const __m256i *)(xs + b)));
        const __m256 dd = _mm256_mul_ps(KX(scales8)(wg, 16), _mm256_loadu_ps(xd + b));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc);
    }
    return KX(tail_q4)(w, xq, xd, xs, b, nb, acc);
}

static KX_IN float KX(row_q8)(const uint8_t *w, const int8_t *xq, const float *xd, int64_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *wg = w + b * 34;
        if (KX_PREFETCH) {
            _mm_prefetch((const char *)wg + KX_PREFETCH, _MM_HINT_T0);
            _mm_prefetch((const char *)wg + KX_PREFETCH + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)wg + KX_PREFETCH + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)wg + KX_PREFETCH + 192, _MM_HINT_T0);
            _mm_prefetch((const char *)wg + KX_PREFETCH + 256, _MM_HINT_T0);
        }
        const __m256i s = KX(group_q8)(wg, xq + b * QK);
        const __m256 dd = _mm256_mul_ps(KX(scales8)(wg, 32), _mm256_loadu_ps(xd + b));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc);
    }
    return KX(tail_q8)(w, xq, xd, b, nb, acc);
}

// Two weight rows · one vector (GEMV): the activation loads are shared;
// per row the arithmetic is row_q4's / row_q8's exactly.
static KX_IN void KX(rows2_q4)(const uint8_t *w0, const uint8_t *w1, const int8_t *xq, const float *xd,
                               const int32_t *xs, int64_t nb, float *y0, float *y1)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *g0 = w0 + b * 18, *g1 = w1 + b * 18;
        const __m256i sx = _mm256_loadu_si256((const __m256i *)(xs + b));
        const __m256 dx = _mm256_loadu_ps(xd + b);
        const __m256i s0 = _mm256_sub_epi32(KX(group_q4)(g0, xq + b * QK), sx);
        const __m256i s1 = _mm256_sub_epi32(KX(group_q4)(g1, xq + b * QK), sx);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_mul_ps(KX(scales8)(g0, 16), dx), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_mul_ps(KX(scales8)(g1, 16), dx), acc1);
    }
    *y0 = KX(tail_q4)(w0, xq, xd, xs, b, nb, acc0);
    *y1 = KX(tail_q4)(w1, xq, xd, xs, b, nb, acc1);
}

static KX_IN void KX(rows2_q8)(const uint8_t *w0, const uint8_t *w1, const int8_t *xq, const float *xd,
                               int64_t nb, float *y0, float *y1)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *g0 = w0 + b * 34, *g1 = w1 + b * 34;
        const __m256 dx = _mm256_loadu_ps(xd + b);
        const __m256i s0 = KX(group_q8)(g0, xq + b * QK);
        const __m256i s1 = KX(group_q8)(g1, xq + b * QK);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_mul_ps(KX(scales8)(g0, 32), dx), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_mul_ps(KX(scales8)(g1, 32), dx), acc1);
    }
    *y0 = KX(tail_q8)(w0, xq, xd, b, nb, acc0);
    *y1 = KX(tail_q8)(w1, xq, xd, b, nb, acc1);
}

// One weight row · four vectors (GEMM): each weight block is loaded and
// unpacked once for the four; per vector the arithmetic is row_q4's exactly.
#define KX_V4(X) X(0) X(1) X(2) X(3)

static KX_IN void KX(row_q4_x4)(const uint8_t *w, const pt_q8act *x, int64_t v, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
#define DECL(j)                                                                                    \
    const int8_t *xq##j = x->qs + (v + j) * nb * QK;                                               \
    const float *xd##j = x->d + (v + j) * nb;                                                      \
    const int32_t *xs##j = x->s8 + (v + j) * nb;                                                   \
    __m256 acc##j = _mm256_setzero_ps();                                                           \
    __m256i a##j, h##j;
    KX_V4(DECL)
#undef DECL
    const __m256i m = _mm256_set1_epi8(0x0F);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *wg = w + b * 18;
        __m256i raw, lo, hi;
#define UNPACK(P)                                                                                  \
    raw = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(wg + (P) * 18 + 2))), \
                                  _mm_loadu_si128((const __m128i *)(wg + ((P) + 4) * 18 + 2)), 1); \
    lo = _mm256_and_si256(raw, m);                                                                 \
    hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m);
#ifdef KX_PAIR16 // int16 pair sums folded by hadd_epi16, one madd (see group_q4)
#define PD(j, P)                                                                                   \
    _mm256_add_epi16(                                                                              \
        _mm256_maddubs_epi16(lo, _mm256_load_si256((const __m256i *)(xq##j + b * QK + (P) * 64))), \
        _mm256_maddubs_epi16(hi, _mm256_load_si256((const __m256i *)(xq##j + b * QK + (P) * 64 + 32))))
#define HADD _mm256_hadd_epi16
#define S3(j)                                                                                      \
    a##j = _mm256_madd_epi16(_mm256_hadd_epi16(h##j, _mm256_hadd_epi16(a##j, PD(j, 3))),          \
                             _mm256_set1_epi16(1));
#else
#define PD(j, P)                                                                                   \
    KX_DOT2(lo, _mm256_load_si256((const __m256i *)(xq##j + b * QK + (P) * 64)), hi,              \
            _mm256_load_si256((const __m256i *)(xq##j + b * QK + (P) * 64 + 32)))
#define HADD _mm256_hadd_epi32
#define S3(j) a##j = _mm256_hadd_epi32(h##j, _mm256_hadd_epi32(a##j, PD(j, 3)));
#endif
        UNPACK(0)
#define S0(j) a##j = PD(j, 0);
        KX_V4(S0)
        UNPACK(1)
#define S1(j) h##j = HADD(a##j, PD(j, 1));
        KX_V4(S1)
        UNPACK(2)
#define S2(j) a##j = PD(j, 2);
        KX_V4(S2)
        UNPACK(3)
        KX_V4(S3)
        const __m256 dw = KX(scales8)(wg, 16);
#define FIN(j)                                                                                     \
    acc##j = _mm256_fmadd_ps(                                                                      \
        _mm256_cvtepi32_ps(_mm256_sub_epi32(a##j, _mm256_loadu_si256((const __m256i *)(xs##j + b)))), \
        _mm256_mul_ps(dw, _mm256_loadu_ps(xd##j + b)), acc##j);
        KX_V4(FIN)
#undef UNPACK
#undef PD
#undef HADD
#undef S0
#undef S1
#undef S2
#undef S3
#undef FIN
    }
#define TAIL(j) y[j * ldy] = KX(tail_q4)(w, xq##j, xd##j, xs##j, b, nb, acc##j);
    KX_V4(TAIL)
#undef TAIL
}

static KX_IN void KX(row_q8_x4)(const uint8_t *w, const pt_q8act *x, int64_t v, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
#define DECL(j)                                                                                    \
    const int8_t *xq##j = x->qs + (v + j) * nb * QK;                                               \
    const float *xd##j = x->d + (v + j) * nb;                                                      \
    __m256 acc##j = _mm256_setzero_ps();                                                           \
    __m256i a##j, h##j, g##j;
    KX_V4(DECL)
#undef DECL
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const uint8_t *wg = w + b * 34;
        __m256i wv, aw;
#define LOAD(k)                                                                                    \
    wv = _mm256_loadu_si256((const __m256i *)(wg + (k) * 34 + 2));                                 \
    aw = _mm256_sign_epi8(wv, wv);
#define BD(j, k)                                                                                   \
    KX_DOT(aw, _mm256_sign_epi8(_mm256_load_si256((const __m256i *)(xq##j + b * QK + (k) * 32)), wv))
#define E(j, k) a##j = BD(j, k);
#define O1(j, k) h##j = _mm256_hadd_epi32(a##j, BD(j, k));
#define O2(j, k) a##j = _mm256_hadd_epi32(h##j, _mm256_hadd_epi32(a##j, BD(j, k)));
#define STEP(M, k)                                                                                 \
    LOAD(k) M(0, k) M(1, k) M(2, k) M(3, k)
        STEP(E, 0)
        STEP(O1, 1)
        STEP(E, 2)
        // after block 3: a_j = hadd tree of blocks 0..3 (g0 of group_q8)
#define O2G(j, k) g##j = _mm256_hadd_epi32(h##j, _mm256_hadd_epi32(a##j, BD(j, k)));
        STEP(O2G, 3)
        STEP(E, 4)
        STEP(O1, 5)
        STEP(E, 6)
        STEP(O2, 7)
        const __m256 dw = KX(scales8)(wg, 32);
#define FIN(j)                                                                                     \
    acc##j = _mm256_fmadd_ps(                                                                      \
        _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_permute2x128_si256(g##j, a##j, 0x20),          \
                                            _mm256_permute2x128_si256(g##j, a##j, 0x31))),         \
        _mm256_mul_ps(dw, _mm256_loadu_ps(xd##j + b)), acc##j);
        KX_V4(FIN)
#undef LOAD
#undef BD
#undef E
#undef O1
#undef O2
#undef O2G
#undef STEP
#undef FIN
    }
#define TAIL(j) y[j * ldy] = KX(tail_q8)(w, xq##j, xd##j, b, nb, acc##j);
    KX_V4(TAIL)
#undef TAIL
}

#ifndef KX_NO_QTILE // (a file that only wants the pieces above)
// Rows x vectors: vectors in fours (weights reused from registers), then
// the remaining vectors one at a time.
static KX_FN void KX(qtile)(pt_dtype t, const uint8_t *w, size_t rb, int64_t nrows, const pt_q8act *x,
                            int64_t v0, int64_t nvec, float *y, int64_t ldy)
{
    const int64_t nb = x->nb;
    int64_t v = 0;
    for (; v + 4 <= nvec; v += 4) {
        if (t == PT_Q4_0)
            for (int64_t r = 0; r < nrows; r++)
                KX(row_q4_x4)(w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
        else
            for (int64_t r = 0; r < nrows; r++)
                KX(row_q8_x4)(w + r * rb, x, v0 + v, y + v * ldy + r, ldy);
    }
    for (; v < nvec; v++) {
        const int8_t *xq = x->qs + (v0 + v) * nb * QK;
        const float *xd = x->d + (v0 + v) * nb;
        const int32_t *xs = x->s8 + (v0 + v) * nb;
        float *yv = y + v * ldy;
        int64_t r = 0;
        if (KX_ROWS2) {
            if (t == PT_Q4_0)
                for (; r + 2 <= nrows; r += 2)
                    KX(rows2_q4)(w + r * rb, w + (r + 1) * rb, xq, xd, xs, nb, yv + r, yv + r + 1);
            else
                for (; r + 2 <= nrows; r += 2)
                    KX(rows2_q8)(w + r * rb, w + (r + 1) * rb, xq, xd, nb, yv + r, yv + r + 1);
        }
        if (t == PT_Q4_0)
            for (; r < nrows; r++)
                yv[r] = KX(row_q4)(w + r * rb, xq, xd, xs, nb);
        else
            for (; r < nrows; r++)
                yv[r] = KX(row_q8)(w + r * rb, xq, xd, nb);
    }
}
#endif
