// tests/test_qt_quantize.c — Petrel's quantisers against llama-quantize's
// own output. Reference: tests/fixtures/llamacpp/manifest.json holds the
// sha256 of every tensor's data in the files llama-quantize --pure wrote
// from tiny-dsv3's F32 file (no importance matrix). Petrel rebuilds that F32
// file (`petrel convert --type f32`, whose tensor bytes the manifest also
// lists), quantises every tensor with pt_quantize_row and must produce the
// same bytes, fallback tensors (Q4_0, Q5_0, Q5_1, Q8_0, IQ4_NL) included.
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "kernels/qt_quantize_util.h"
#include "kernels/qtypes.h"
#include "tests/testutil.h"
#include "tests/tu_sha256.h"

static json_object *manifest(void)
{
    static json_object *m;
    if (!m) {
        char *p = tu_fixture("llamacpp/manifest.json");
        m = json_object_from_file(p);
        cr_assert(m, "cannot parse %s", p);
        free(p);
    }
    return m;
}

static gguf_file *source_f32(void)
{
    static gguf_file *g;
    if (!g) {
        char *path = tu_tiny_model("f32");
        pt_err err = {{0}};
        g = gguf_open(path, &err);
        cr_assert(g, "%s", err.msg);
        free(path);
    }
    return g;
}

static json_object *jget(json_object *o, const char *key)
{
    json_object *v = NULL;
    cr_assert(json_object_object_get_ex(o, key, &v), "manifest: no key '%s'", key);
    return v;
}

// The data of tensor `name` of the F32 file as floats (malloc'ed).
static float *f32_tensor(const char *name, const gguf_tensor **out)
{
    gguf_file *g = source_f32();
    const gguf_tensor *t = gguf_find_tensor(g, name);
    cr_assert(t, "F32 source: no tensor '%s'", name);
    cr_assert_eq(t->type, PT_F32, "F32 source: '%s' is not F32", name);
    float *x = malloc(t->size);
    pt_err err = {{0}};
    cr_assert(gguf_read(g, t->offset, x, t->size, &err) == 0, "%s", err.msg);
    *out = t;
    return x;
}

Test(sha256, fips_vectors)
{
    char h[65];
    tu_sha256_of("abc", 3, h);
    cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    tu_sha256_of("", 0, h);
    cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    tu_sha256_of(two, strlen(two), h);
    cr_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

// First: Petrel's F32 file holds exactly the data llama-quantize started from.
Test(qt_quantize, source_f32_is_the_fixture_source)
{
    json_object *ts = jget(jget(manifest(), "source_f32"), "tensors");
    size_t n = json_object_array_length(ts);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(ts, i);
        const char *name = json_object_get_string(jget(t, "name"));
        const gguf_tensor *gt;
        float *x = f32_tensor(name, &gt);
        char h[65];
        tu_sha256_of(x, gt->size, h);
        cr_assert_str_eq(h, json_object_get_string(jget(t, "data_sha256")), "F32 source tensor '%s'", name);
        free(x);
    }
}

// Quantises every tensor of the source with the type it has in the pure file
// `label` and compares the digests.
static void check_file(const char *label)
{
    json_object *files = jget(manifest(), "files"), *f = NULL;
    for (size_t i = 0; i < json_object_array_length(files); i++) {
        json_object *c = json_object_array_get_idx(files, i);
        if (!strcmp(json_object_get_string(jget(c, "label")), label))
            f = c;
    }
    cr_assert(f, "manifest: no file labelled %s", label);
    cr_assert(json_object_get_boolean(jget(f, "pure")) && !json_object_get_boolean(jget(f, "imatrix")));
    json_object *ts = jget(f, "tensors");
    size_t n = json_object_array_length(ts), quantised = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(ts, i);
        const char *name = json_object_get_string(jget(t, "name"));
        const char *tname = json_object_get_string(jget(t, "type"));
        int type = pt_dtype_from_name(tname);
        cr_assert(type >= 0 && pt_dtype_can_quantize((pt_dtype)type), "%s: %s: Petrel cannot write type %s",
                  label, name, tname);
        const gguf_tensor *gt;
        float *x = f32_tensor(name, &gt);
        const int64_t cols = (int64_t)gt->ne[0], rows = (int64_t)(gt->size / 4) / cols;
        const size_t rb = pt_row_bytes((pt_dtype)type, (uint64_t)cols);
        cr_assert_gt(rb, 0, "%s: %s: row of %lld values is not whole %s blocks", label, name, (long long)cols, tname);
        uint8_t *q = malloc(rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++)
            pt_quantize_row((pt_dtype)type, x + r * cols, q + (size_t)r * rb, cols);
        char h[65];
        tu_sha256_of(q, rb * (size_t)rows, h);
        cr_expect_str_eq(h, json_object_get_string(jget(t, "data_sha256")), "%s: tensor '%s' (%s, %lld x %lld)",
                         label, name, tname, (long long)rows, (long long)cols);
        if (type != PT_F32)
            quantised++;
        free(q);
        free(x);
    }
    cr_assert_gt(quantised, 0);
}

Test(qt_quantize, q4_k, .timeout = 600) { check_file("Q4_K"); }
Test(qt_quantize, q2_k, .timeout = 600) { check_file("Q2_K"); }
Test(qt_quantize, q6_k, .timeout = 600) { check_file("Q6_K"); }
Test(qt_quantize, q3_k, .timeout = 600) { check_file("Q3_K"); }
Test(qt_quantize, q5_k, .timeout = 600) { check_file("Q5_K"); }
Test(qt_quantize, iq4_nl, .timeout = 600) { check_file("IQ4_NL"); }
Test(qt_quantize, iq4_xs, .timeout = 600) { check_file("IQ4_XS"); }
Test(qt_quantize, q4_1, .timeout = 600) { check_file("Q4_1"); }
Test(qt_quantize, q5_0, .timeout = 600) { check_file("Q5_0"); }
Test(qt_quantize, q5_1, .timeout = 600) { check_file("Q5_1"); }

// ---- the 8-lane scale searches against the scalar ones ---------------------
// qt_quantize_x8.c must give bit-identical results to the scalar searches
// (which the fixture tests above tie to ggml) on the corner cases a random
// model rarely hits: flat and all-zero groups, all-positive groups (min
// clamped to 0), tiny groups below ggml's zero threshold, a lone value,
// signed zeros, huge and mixed magnitudes.
static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rndf(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 11) & 0xFFFFFF) / 16777216.0f;
}

static void corner_groups(float *x, int n, int round)
{
    for (int k = 0; k < 8; k++) {
        float *g = x + k * n;
        int kind = (k + round) % 10;
        for (int i = 0; i < n; i++) {
            float r = rndf(-1.f, 1.f);
            switch (kind) {
            case 0: g[i] = 0.f; break;
            case 1: g[i] = 0.37f; break;                       // flat
            case 2: g[i] = 1.f + fabsf(r); break;              // all positive
            case 3: g[i] = r * 1e-20f; break;                  // below GROUP_MAX_EPS
            case 4: g[i] = i == n / 2 ? r : 0.f; break;        // lone value
            case 5: g[i] = i % 2 ? -0.f : 0.f; break;          // signed zeros
            case 6: g[i] = r * 3e4f; break;                    // large
            case 7: g[i] = i % 3 ? r * 1e-3f : r * 10.f; break; // mixed magnitudes
            case 8: g[i] = -1.f - fabsf(r); break;             // all negative
            default: g[i] = r; break;
            }
        }
    }
}

Test(qt_quantize, x8_searches_equal_scalar)
{
    float x[256], w[256], s1, m1, s8[8], m8[8];
    uint8_t L1[32], L8[256], Laux[32];
    int8_t Q1[32], Q8[256];
    static const struct { int n, nmax; float rmin; int nstep; bool mad; } cfg[] = {
        {16, 3, -0.5f, 15, true},   // Q2_K
        {32, 15, -1.f, 20, false},  // Q4_K
        {32, 31, -0.5f, 15, false}, // Q5_K
    };
    for (int round = 0; round < 200; round++) {
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
            const int n = cfg[c].n;
            corner_groups(x, n, round);
            for (int i = 0; i < 8 * n; i++)
                w[i] = cfg[c].mad ? fabsf(x[i]) : 0.25f + fabsf(x[i]);
            qz_make_qkx2_x8(n, cfg[c].nmax, x, w, L8, s8, m8, cfg[c].rmin, 0.1f, cfg[c].nstep, cfg[c].mad);
            for (int k = 0; k < 8; k++) {
                s1 = qz_make_qkx2(n, cfg[c].nmax, x + k * n, w + k * n, L1, &m1, Laux, cfg[c].rmin, 0.1f,
                                  cfg[c].nstep, cfg[c].mad);
                cr_assert(fbits(s1) == fbits(s8[k]) && fbits(m1) == fbits(m8[k]) && !memcmp(L1, L8 + k * n, n),
                          "qkx2 cfg %zu round %d lane %d: scale %a / %a, min %a / %a", c, round, k, s1, s8[k], m1,
                          m8[k]);
            }
        }
        static const int8_t iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        corner_groups(x, 32, round);
        qz_iq4_scales_x8(x, iq4, 7, s8);
        for (int k = 0; k < 8; k++) {
            s1 = qz_iq4_block_scale(x + 32 * k);
            cr_assert(fbits(s1) == fbits(s8[k]), "iq4 round %d lane %d: %a / %a", round, k, s1, s8[k]);
        }
        corner_groups(x, 16, round);
        qz_make_q3_x8(16, 4, x, Q8, s8);
        for (int k = 0; k < 8; k++) {
            s1 = qz_make_q3(16, 4, x + 16 * k, Q1);
            cr_assert(fbits(s1) == fbits(s8[k]) && !memcmp(Q1, Q8 + 16 * k, 16), "q3 round %d lane %d: %a / %a",
                      round, k, s1, s8[k]);
        }
        qz_make_qx_x8(16, 32, x, Q8, s8);
        for (int k = 0; k < 8; k++) {
            s1 = qz_make_qx(16, 32, x + 16 * k, Q1);
            cr_assert(fbits(s1) == fbits(s8[k]) && !memcmp(Q1, Q8 + 16 * k, 16), "qx round %d lane %d: %a / %a",
                      round, k, s1, s8[k]);
        }
    }
}
