// tests/test_safetensors.c — safetensors reader: round trip of a file built
// here byte by byte, float conversion of each dtype against hand-checked
// values, FP8 block-scale dequantisation with partial edge blocks, and
// rejection of malformed headers.
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/tensorconv.h"
#include "format/safetensors.h"
#include "tests/testutil.h"

static char *g_dir;
static void setup(void) { g_dir = tu_tmpdir("st"); }
static void teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
}
TestSuite(st, .init = setup, .fini = teardown);

// Writes u64 header length + header text + data.
static char *write_st(const char *name, const char *header, const void *data, size_t n)
{
    char *p = malloc(1024);
    snprintf(p, 1024, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    uint64_t hl = strlen(header);
    fwrite(&hl, 8, 1, f);
    fwrite(header, 1, hl, f);
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
    return p;
}

Test(st, round_trip_and_float_values)
{
    // a: BF16 [2] = {1.0, -2.0}; b: F16 [2] = {1.0, 0.5}; c: F8_E4M3 [4] = {1, NaN, -0, 448};
    // d: F32 [1] = {3.25}; e: I32 [] scalar.
    uint8_t data[4 + 4 + 4 + 4 + 4];
    uint16_t a[2] = {0x3F80, 0xC000}, b[2] = {0x3C00, 0x3800};
    uint8_t c[4] = {0x38, 0x7F, 0x80, 0x7E};
    float d = 3.25f;
    int32_t e = 7;
    memcpy(data, a, 4);
    memcpy(data + 4, b, 4);
    memcpy(data + 8, c, 4);
    memcpy(data + 12, &d, 4);
    memcpy(data + 16, &e, 4);
    const char *h = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"F16\",\"shape\":[1,2],\"data_offsets\":[4,8]},"
                    "\"c\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,2],\"data_offsets\":[8,12]},"
                    "\"d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]},"
                    "\"e\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[16,20]}}   ";
    char *p = write_st("ok.safetensors", h, data, sizeof data);
    pt_err err = {{0}};
    st_file *f = st_open(p, &err);
    cr_assert_not_null(f, "%s", err.msg);
    cr_assert_eq(f->n_tensors, 5);
    const st_tensor *ta = st_find(f, "a"), *tb = st_find(f, "b"), *tc = st_find(f, "c"), *td = st_find(f, "d"),
                    *te = st_find(f, "e");
    cr_assert(ta && tb && tc && td && te && !st_find(f, "__metadata__") && !st_find(f, "zz"));
    uint64_t base = 8 + strlen(h);
    cr_assert_eq(ta->begin, base);
    cr_assert_eq(tc->end, base + 12);
    cr_assert_eq(tb->n_dims, 2);
    cr_assert_eq(tb->shape[1], 2);
    cr_assert_eq(te->n_dims, 0);
    cr_assert_eq(tc->dtype, ST_F8_E4M3);
    float v[4];
    cr_assert_eq(st_read_f32(f, ta, v, &err), 0);
    cr_assert(v[0] == 1.0f && v[1] == -2.0f);
    cr_assert_eq(st_read_f32(f, tb, v, &err), 0);
    cr_assert(v[0] == 1.0f && v[1] == 0.5f);
    cr_assert_eq(st_read_f32(f, tc, v, &err), 0);
    cr_assert(v[0] == 1.0f && isnan(v[1]) && v[2] == 0.0f && signbit(v[2]) && v[3] == 448.0f);
    cr_assert_eq(st_read_f32(f, td, v, &err), 0);
    cr_assert_eq(v[0], 3.25f);
    int32_t raw;
    cr_assert_eq(st_read(f, te, &raw, &err), 0);
    cr_assert_eq(raw, 7);
    cr_assert_eq(st_read_f32(f, te, v, &err), -1); // integers are not floats
    st_close(f);
    free(p);
}

Test(st, fp8_block_scales_with_partial_edges)
{
    // F8 [130, 200]: scale blocks [2, 2], the last row block has 2 rows and the
    // last column block 72 columns.
    enum { R = 130, C = 200 };
    static uint8_t w[R * C];
    float s[4] = {0.5f, 2.0f, 0.125f, 3.0f};
    for (int i = 0; i < R * C; i++) {
        uint8_t b = (uint8_t)(i * 37 + 11);
        if ((b & 0x7F) == 0x7F) // avoid NaN codes
            b ^= 1;
        w[i] = b;
    }
    uint8_t *data = malloc(sizeof w + sizeof s);
    memcpy(data, w, sizeof w);
    memcpy(data + sizeof w, s, sizeof s);
    char h[512];
    snprintf(h, sizeof h,
             "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[%d,%d],\"data_offsets\":[0,%d]},"
             "\"w_scale_inv\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[%d,%d]}}",
             R, C, R * C, R * C, R * C + 16);
    char *p = write_st("fp8.safetensors", h, data, sizeof w + sizeof s);
    pt_err err = {{0}};
    st_file *f = st_open(p, &err);
    cr_assert_not_null(f, "%s", err.msg);
    pt_src_view v = {.f = f, .t = st_find(f, "w"), .rows = R, .cols = C, .scale = s, .scale_cols = 2};
    float *got = malloc(sizeof(float) * 40 * C);
    uint8_t *raw = malloc(40 * C);
    cr_assert_eq(pt_src_rows_f32(&v, 100, 30, raw, got, &err), 0, "%s", err.msg); // straddles row 128
    for (int i = 100; i < R; i++)
        for (int j = 0; j < C; j++) {
            uint8_t b = w[i * C + j];
            int e = (b >> 3) & 15, m = b & 7;
            float x = e == 0 ? ldexpf(m / 8.0f, -6) : ldexpf(1 + m / 8.0f, e - 7);
            if (b & 0x80)
                x = -x;
            float want = x * s[(i / 128) * 2 + j / 128];
            cr_assert(memcmp(&got[(i - 100) * C + j], &want, 4) == 0, "(%d,%d): %g vs %g", i, j,
                      got[(i - 100) * C + j], want);
        }
    free(got);
    free(raw);
    st_close(f);
    free(data);
    free(p);
}

static void expect_bad(const char *header, const void *data, size_t n, const char *needle)
{
    static int k;
    char name[64];
    snprintf(name, sizeof name, "bad%d.safetensors", k++);
    char *p = write_st(name, header, data, n);
    pt_err err = {{0}};
    st_file *f = st_open(p, &err);
    cr_assert_null(f, "accepted: %s", header);
    cr_assert(strstr(err.msg, p), "no file name: %s", err.msg);
    cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
    free(p);
}

Test(st, rejects_malformed)
{
    uint8_t d[16] = {0};
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", d, 16, "needs 8");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", d, 16, "begin > end");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", d, 16, "out of range");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", d, 16, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 16, "unknown dtype 'Q4'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", d, 16, "shape[0]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", d, 16, "data_offsets");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", d, 16, "bad safetensors header JSON");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", d, 16, "trailing");
    expect_bad("[1,2]", d, 16, "not an object");
    // Header length beyond the file.
    char *p = malloc(1024);
    snprintf(p, 1024, "%s/huge.safetensors", g_dir);
    FILE *f = fopen(p, "wb");
    uint64_t hl = 1ull << 40;
    fwrite(&hl, 8, 1, f);
    fwrite("{}", 1, 2, f);
    fclose(f);
    pt_err err = {{0}};
    cr_assert_null(st_open(p, &err));
    cr_assert(strstr(err.msg, "past end of file"), "%s", err.msg);
    free(p);
}
