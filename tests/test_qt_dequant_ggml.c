// tests/test_qt_dequant_ggml.c — Petrel's dequantisation of every weight
// type it supports against ggml's own, bit for bit. Reference: the
// fixtures in tests/fixtures/llamacpp (README there): for each quantised
// file, samples/<LABEL>.rows.f32 holds ggml's dequantize_row_* output for
// sampled rows of every tensor and qrows/<LABEL>.qrows.bin the stored bytes
// of exactly those rows. Table-driven: every file, every tensor whose type
// pt_dtype_valid accepts; types that become supported later are checked
// without touching this file.
#include <criterion/criterion.h>
#include <dirent.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "testutil.h"

static json_object *load_json(const char *path)
{
    json_object *j = json_object_from_file(path);
    cr_assert(j, "cannot parse %s", path);
    return j;
}

static int64_t jint(json_object *o, const char *key)
{
    json_object *v;
    cr_assert(json_object_object_get_ex(o, key, &v), "missing key %s", key);
    return json_object_get_int64(v);
}

typedef struct {
    int64_t tensors, rows; // checked
} tally;

// Checks one sample file; adds what it checked per type id to t[].
static void check_file(const char *dir, const char *label, tally t[64], int *skipped)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/samples/%s.rows.json", dir, label);
    json_object *rows = load_json(p);
    snprintf(p, sizeof p, "%s/samples/%s.rows.f32", dir, label);
    size_t flen = 0;
    uint8_t *ref = tu_read(p, &flen);
    cr_assert(ref, "cannot read %s", p);
    snprintf(p, sizeof p, "%s/qrows/%s.qrows.json", dir, label);
    json_object *qidx = load_json(p);
    snprintf(p, sizeof p, "%s/qrows/%s.qrows.bin", dir, label);
    size_t qlen = 0;
    uint8_t *qbin = tu_read(p, &qlen);
    cr_assert(qbin, "cannot read %s", p);

    json_object *tens;
    cr_assert(json_object_object_get_ex(rows, "tensors", &tens));
    for (size_t k = 0; k < json_object_array_length(tens); k++) {
        json_object *te = json_object_array_get_idx(tens, k), *v;
        cr_assert(json_object_object_get_ex(te, "name", &v));
        const char *name = json_object_get_string(v);
        cr_assert(json_object_object_get_ex(te, "type", &v));
        const char *tname = json_object_get_string(v);
        const int type = pt_dtype_from_name(tname);
        if (type < 0 || !pt_dtype_valid((uint32_t)type)) {
            (*skipped)++;
            continue;
        }
        const int64_t n = jint(te, "n_per_row");
        const int64_t off = jint(te, "offset_bytes"), nbytes = jint(te, "n_bytes");
        json_object *rl;
        cr_assert(json_object_object_get_ex(te, "rows", &rl));
        const int64_t nrows = (int64_t)json_object_array_length(rl);
        cr_assert_eq(nbytes, nrows * n * 4, "%s %s: sample size", label, name);
        cr_assert_leq((size_t)(off + nbytes), flen);

        json_object *qe;
        cr_assert(json_object_object_get_ex(qidx, name, &qe), "%s: %s not in qrows", label, name);
        const int64_t qoff = json_object_get_int64(json_object_array_get_idx(qe, 0));
        const int64_t rb = json_object_get_int64(json_object_array_get_idx(qe, 1));
        cr_assert_eq((size_t)rb, pt_row_bytes((pt_dtype)type, (uint64_t)n), "%s %s (%s): row bytes", label,
                     name, tname);
        cr_assert_leq((size_t)(qoff + nrows * rb), qlen);

        float *got = malloc((size_t)n * 4);
        for (int64_t r = 0; r < nrows; r++) {
            // poison: a dequantiser that skips a value cannot pass by luck
            memset(got, 0xA5, (size_t)n * 4);
            pt_dequantize_row((pt_dtype)type, qbin + qoff + r * rb, got, n);
            const float *want = (const float *)(ref + off) + r * n;
            if (memcmp(got, want, (size_t)n * 4) != 0) {
                int64_t i = 0;
                while (memcmp(&got[i], &want[i], 4) == 0)
                    i++;
                cr_assert_fail("%s %s (%s) row %lld value %lld: %.9g, ggml %.9g", label, name, tname,
                               (long long)r, (long long)i, got[i], want[i]);
            }
        }
        free(got);
        t[type].tensors++;
        t[type].rows += nrows;
    }
    free(ref);
    free(qbin);
    json_object_put(rows);
    json_object_put(qidx);
}

Test(dequant_ggml, every_supported_tensor_bit_exact)
{
    char *dir = tu_fixture("llamacpp");
    char sdir[1024];
    snprintf(sdir, sizeof sdir, "%s/samples", dir);
    DIR *d = opendir(sdir);
    cr_assert(d, "no %s", sdir);
    tally t[64] = {{0}};
    int files = 0, skipped = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *suf = ".rows.json";
        const size_t len = strlen(e->d_name), sl = strlen(suf);
        if (len <= sl || strcmp(e->d_name + len - sl, suf) != 0)
            continue;
        char label[512];
        snprintf(label, sizeof label, "%.*s", (int)(len - sl), e->d_name);
        check_file(dir, label, t, &skipped);
        files++;
    }
    closedir(d);
    cr_assert_geq(files, 20, "expected the 20 sample files, found %d", files);
    int64_t total = 0;
    for (int k = 0; k < 64; k++)
        if (t[k].tensors) {
            cr_log_info("%-8s %5lld tensors %6lld rows bit-exact", pt_dtype_name((pt_dtype)k),
                        (long long)t[k].tensors, (long long)t[k].rows);
            total += t[k].tensors;
        }
    cr_log_info("%d files, %lld tensors checked, %d of unsupported types skipped", files, (long long)total,
                skipped);
    // every supported type that the fixtures hold was met (the fixtures have
    // all 20 file types, so a supported type with no tensor means the loop
    // missed it)
    const int fixture_types[] = {PT_F32, PT_Q4_0, PT_Q4_1, PT_Q5_0, PT_Q5_1, PT_Q8_0, PT_Q2_K, PT_Q3_K,
                                 PT_Q4_K, PT_Q5_K, PT_Q6_K, PT_IQ2_XXS, PT_IQ2_XS, PT_IQ3_XXS, PT_IQ1_S,
                                 PT_IQ4_NL, PT_IQ3_S, PT_IQ2_S, PT_IQ4_XS, PT_IQ1_M};
    for (size_t k = 0; k < sizeof fixture_types / sizeof fixture_types[0]; k++)
        if (pt_dtype_valid((uint32_t)fixture_types[k]))
            cr_expect_gt(t[fixture_types[k]].tensors, 0, "type %s supported but never checked",
                         pt_dtype_name((pt_dtype)fixture_types[k]));
    free(dir);
}
