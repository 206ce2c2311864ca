// tests/test_convert_badinput.c — each malformed checkpoint produces an error
// naming the file and the tensor or key, a non-zero exit, and no output file
// (neither MODEL.gguf nor its .partial / .journal).
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

#define SHARD1 "model-00001-of-000002.safetensors"
#define SHARD2 "model-00002-of-000002.safetensors"

static char *g_dir;
static int g_case;

static void setup(void) { g_dir = tu_tmpdir("bad"); }
static void teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
}
TestSuite(bad, .init = setup, .fini = teardown, .timeout = 120);

// A fresh writable copy of tiny-dsv3.
static char *fresh_copy(void)
{
    char *fx = tu_fixture("tiny-dsv3");
    char *dst = malloc(2048);
    snprintf(dst, 2048, "%s/ck%d", g_dir, g_case++);
    cr_assert_eq(tu_sh(NULL, "mkdir -p '%s' && cp '%s'/*.json '%s'/*.safetensors '%s'/ && chmod u+w '%s'/*", dst, fx,
                       fx, dst, dst), 0);
    free(fx);
    return dst;
}

static char *path_in(const char *dir, const char *name)
{
    char *p = malloc(1200);
    snprintf(p, 1200, "%s/%s", dir, name);
    return p;
}

// Rewrites a shard's JSON header through `edit` (the data section is kept).
static void edit_header(const char *shard, void (*edit)(json_object *root))
{
    size_t len;
    uint8_t *buf = tu_read(shard, &len);
    cr_assert_not_null(buf);
    uint64_t hl;
    memcpy(&hl, buf, 8);
    char *js = strndup((char *)buf + 8, hl);
    json_object *root = json_tokener_parse(js);
    cr_assert_not_null(root);
    edit(root);
    const char *nj = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
    uint64_t nl = strlen(nj);
    FILE *f = fopen(shard, "wb");
    cr_assert_not_null(f);
    fwrite(&nl, 8, 1, f);
    fwrite(nj, 1, nl, f);
    fwrite(buf + 8 + hl, 1, len - 8 - hl, f);
    fclose(f);
    json_object_put(root);
    free(js);
    free(buf);
}

// Runs convert on dir; asserts failure, the message pieces, and no output.
static void expect_failure(const char *dir, const char *extra, const char *const *needles)
{
    char out[1024];
    snprintf(out, sizeof out, "%s/out%d.gguf", g_dir, g_case++);
    char *log = NULL;
    int rc = tu_sh(&log, "%s convert '%s' -o '%s' %s 2>&1", PETREL_BIN, dir, out, extra ? extra : "");
    cr_assert(rc > 0, "convert did not fail (rc %d): %s", rc, log);
    for (int i = 0; needles[i]; i++)
        cr_assert(strstr(log, needles[i]), "message lacks '%s': %s", needles[i], log);
    char part[1100], jour[1100];
    snprintf(part, sizeof part, "%s.partial", out);
    snprintf(jour, sizeof jour, "%s.journal", out);
    cr_assert(access(out, F_OK) != 0, "output file left behind");
    cr_assert(access(part, F_OK) != 0, "partial file left behind");
    cr_assert(access(jour, F_OK) != 0, "journal left behind");
    free(log);
}

Test(bad, truncated_shard)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD2);
    cr_assert_eq(tu_sh(NULL, "truncate -s -5000 '%s'", s), 0);
    expect_failure(d, NULL, (const char *[]){SHARD2, "tensor '", "out of range", NULL});
    free(s);
    free(d);
}

Test(bad, header_json_malformed)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD1);
    cr_assert_eq(tu_sh(NULL, "printf 'X' | dd of='%s' bs=1 seek=9 conv=notrunc 2>/dev/null", s), 0);
    expect_failure(d, NULL, (const char *[]){SHARD1, "bad safetensors header JSON", NULL});
    free(s);
    free(d);
}

Test(bad, header_length_past_eof)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD1);
    cr_assert_eq(tu_sh(NULL, "printf '\\377\\377\\377\\000' | dd of='%s' bs=1 seek=0 conv=notrunc 2>/dev/null", s), 0);
    expect_failure(d, NULL, (const char *[]){SHARD1, "header length", "past end of file", NULL});
    free(s);
    free(d);
}

// The tensor with the largest begin offset.
static json_object *last_tensor(json_object *root, const char **name)
{
    json_object *best = NULL;
    int64_t bb = -1;
    json_object_object_foreach(root, k, v) {
        if (!strcmp(k, "__metadata__"))
            continue;
        int64_t b = json_object_get_int64(json_object_array_get_idx(json_object_object_get(v, "data_offsets"), 0));
        if (b > bb) {
            bb = b;
            best = v;
            *name = k;
        }
    }
    return best;
}

static void shift_offsets(json_object *t, int64_t by)
{
    json_object *o = json_object_object_get(t, "data_offsets");
    for (int i = 0; i < 2; i++) {
        int64_t x = json_object_get_int64(json_object_array_get_idx(o, (size_t)i));
        json_object_array_put_idx(o, (size_t)i, json_object_new_int64(x + by));
    }
}

static char g_name[200];
static void edit_overlap(json_object *root)
{
    const char *n;
    shift_offsets(last_tensor(root, &n), -2);
    snprintf(g_name, sizeof g_name, "%s", n);
}
static void edit_out_of_range(json_object *root)
{
    const char *n;
    shift_offsets(last_tensor(root, &n), 1 << 20);
    snprintf(g_name, sizeof g_name, "%s", n);
}

Test(bad, overlapping_data_offsets)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD2);
    edit_header(s, edit_overlap);
    expect_failure(d, NULL, (const char *[]){SHARD2, g_name, "overlap", NULL});
    free(s);
    free(d);
}

Test(bad, out_of_range_data_offsets)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD2);
    edit_header(s, edit_out_of_range);
    expect_failure(d, NULL, (const char *[]){SHARD2, g_name, "out of range", NULL});
    free(s);
    free(d);
}

static void edit_shape(json_object *root)
{
    json_object *t = json_object_object_get(root, "model.layers.0.input_layernorm.weight");
    cr_assert_not_null(t);
    json_object *sh = json_object_new_array();
    json_object_array_add(sh, json_object_new_int(128));
    json_object_array_add(sh, json_object_new_int(2));
    json_object_object_add(t, "shape", sh);
}

Test(bad, shape_disagrees_with_config)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD1);
    edit_header(s, edit_shape);
    expect_failure(d, NULL,
                   (const char *[]){SHARD1, "model.layers.0.input_layernorm.weight", "config.json", NULL});
    free(s);
    free(d);
}

Test(bad, config_disagrees_with_checkpoint)
{
    char *d = fresh_copy(), *c = path_in(d, "config.json");
    cr_assert_eq(tu_sh(NULL, "sed -i 's/\"moe_intermediate_size\": 128/\"moe_intermediate_size\": 96/' '%s'", c), 0);
    expect_failure(d, NULL, (const char *[]){"model-0000", "mlp.experts.", "disagrees with config.json", NULL});
    free(c);
    free(d);
}

Test(bad, fp8_dtype_without_fp8_config)
{
    char *d = fresh_copy(), *c = path_in(d, "config.json");
    cr_assert_eq(tu_sh(NULL, "sed -i 's/\"quantization_config\"/\"no_quantization_config\"/' '%s'", c), 0);
    expect_failure(d, NULL, (const char *[]){"model-0000", "tensor '", "dtype F8_E4M3 disagrees with config.json", NULL});
    free(c);
    free(d);
}

static void edit_dtype_i8(json_object *root)
{
    json_object *t = json_object_object_get(root, "model.layers.0.mlp.down_proj.weight");
    cr_assert_not_null(t);
    json_object_object_add(t, "dtype", json_object_new_string("I8"));
}

Test(bad, dtype_not_usable)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD1);
    edit_header(s, edit_dtype_i8);
    expect_failure(d, NULL, (const char *[]){SHARD1, "model.layers.0.mlp.down_proj.weight", "dtype I8", NULL});
    free(s);
    free(d);
}

static void edit_dtype_unknown(json_object *root)
{
    json_object *t = json_object_object_get(root, "model.layers.0.mlp.down_proj.weight");
    json_object_object_add(t, "dtype", json_object_new_string("F8_E3M5"));
}

Test(bad, unknown_dtype)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD1);
    edit_header(s, edit_dtype_unknown);
    expect_failure(d, NULL,
                   (const char *[]){SHARD1, "model.layers.0.mlp.down_proj.weight", "unknown dtype 'F8_E3M5'", NULL});
    free(s);
    free(d);
}

Test(bad, missing_shard_without_fetch_cmd)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD2);
    cr_assert_eq(unlink(s), 0);
    expect_failure(d, NULL, (const char *[]){SHARD2, "missing", "--fetch-cmd", NULL});
    free(s);
    free(d);
}

Test(bad, failing_fetch_cmd)
{
    char *d = fresh_copy(), *s = path_in(d, SHARD2);
    cr_assert_eq(unlink(s), 0);
    expect_failure(d, "--fetch-cmd 'false {file}'", (const char *[]){SHARD2, "--fetch-cmd failed", NULL});
    free(s);
    free(d);
}

Test(bad, config_missing_required_key)
{
    char *d = fresh_copy(), *c = path_in(d, "config.json");
    cr_assert_eq(tu_sh(NULL, "sed -i '/\"hidden_size\"/d' '%s'", c), 0);
    expect_failure(d, NULL, (const char *[]){"config.json", "missing required key 'hidden_size'", NULL});
    free(c);
    free(d);
}

Test(bad, index_names_missing_tensor)
{
    char *d = fresh_copy(), *ix = path_in(d, "model.safetensors.index.json");
    cr_assert_eq(tu_sh(NULL, "sed -i '/\"model.layers.2.mlp.experts.7.up_proj.weight\"/d' '%s'", ix), 0);
    expect_failure(d, NULL,
                   (const char *[]){"model.safetensors.index.json", "model.layers.2.mlp.experts.7.up_proj.weight",
                                    NULL});
    free(ix);
    free(d);
}
