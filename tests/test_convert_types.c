// tests/test_convert_types.c — the converter's type options (--expert-type,
// --trunk-type, --type-rule, llama-quantize's fallbacks) and `petrel
// inspect`'s type mix. Reference: llama-quantize itself. For every tensor of
// a mixed conversion of tiny-dsv3, llama-quantize --pure of the type that
// tensor should have (tests/fixtures/llamacpp/manifest.json) gives both the
// type it stores (fallback included) and the sha256 of the bytes; inspect
// is checked against the manifest's tensor list of tiny-dsv3-Q2_K-mix.gguf
// (llama-quantize's Q2_K recipe) and the block sizes of the GGUF types.
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/quant.h"
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

static json_object *jget(json_object *o, const char *key)
{
    json_object *v = NULL;
    cr_assert(json_object_object_get_ex(o, key, &v), "manifest: no key '%s'", key);
    return v;
}

static json_object *file_of(const char *label)
{
    json_object *files = jget(manifest(), "files");
    for (size_t i = 0; i < json_object_array_length(files); i++) {
        json_object *c = json_object_array_get_idx(files, i);
        if (!strcmp(json_object_get_string(jget(c, "label")), label))
            return c;
    }
    cr_assert_fail("manifest: no file %s", label);
    return NULL;
}

// The manifest entry of tensor `name` in the file `label`.
static json_object *tensor_of(const char *label, const char *name)
{
    json_object *ts = jget(file_of(label), "tensors");
    for (size_t i = 0; i < json_object_array_length(ts); i++) {
        json_object *t = json_object_array_get_idx(ts, i);
        if (!strcmp(json_object_get_string(jget(t, "name")), name))
            return t;
    }
    cr_assert_fail("manifest: %s has no tensor %s", label, name);
    return NULL;
}

// The rules of the mixed conversion, and which llama-quantize file each
// tensor's bytes must equal (written out by name, not through a regex).
#define RULES "--type-rule 'blk\\.[24]\\.ffn_down_exps=q2_k' --type-rule 'blk\\.3\\.ffn_(gate|up)_exps=iq4_xs' " \
              "--type-rule '^token_embd=q5_1'"

static const char *label_for(const char *name)
{
    if (!strcmp(name, "blk.2.ffn_down_exps.weight") || !strcmp(name, "blk.4.ffn_down_exps.weight"))
        return "Q2_K"; // falls back to Q4_0 (row length 128)
    if (!strcmp(name, "blk.3.ffn_gate_exps.weight") || !strcmp(name, "blk.3.ffn_up_exps.weight"))
        return "IQ4_XS";
    if (!strcmp(name, "token_embd.weight"))
        return "Q5_1";
    return strstr(name, "_exps.") ? "Q4_K" : "Q6_K"; // norms, router, bias: F32 in every file
}

Test(convert_types, mixed_types_equal_llama_quantize, .timeout = 300)
{
    char *dir = tu_tmpdir("convtypes"), *fx = tu_fixture("tiny-dsv3"), *log = NULL;
    char out[1024];
    snprintf(out, sizeof out, "%s/mix.gguf", dir);
    int rc = tu_sh(&log, "%s convert '%s' -o '%s' --threads 2 --expert-type q4_k --trunk-type q6_k " RULES " 2>&1",
                   PETREL_BIN, fx, out);
    cr_assert_eq(rc, 0, "convert failed: %s", log);
    // The summary names each fallback and each rule.
    cr_assert(strstr(log, "fallback: blk.1.ffn_down_exps.weight row length 128 is not a multiple of 256: q5_0 "
                          "instead of q4_k"), "%s", log);
    cr_assert(strstr(log, "fallback: blk.2.ffn_down_exps.weight row length 128 is not a multiple of 256: q4_0 "
                          "instead of q2_k"), "%s", log);
    cr_assert(strstr(log, "fallback: blk.0.attn_k_b.weight row length 32 is not a multiple of 256: q8_0 instead "
                          "of q6_k"), "%s", log);
    cr_assert(strstr(log, "type rule blk\\.3\\.ffn_(gate|up)_exps=iq4_xs: 2 tensors"), "%s", log);
    cr_assert(strstr(log, "fallbacks=28"), "%s", log); // the 28 of every 256-block file (README)
    pt_err err = {{0}};
    gguf_file *g = gguf_open(out, &err);
    cr_assert(g, "%s", err.msg);
    cr_assert_eq(g->n_tensors, 92);
    uint32_t ft;
    cr_assert_eq(gguf_get_u32(g, "general.file_type", &ft, &err), 0);
    cr_assert_eq(ft, 15, "general.file_type %u: llama.cpp's Q4_K_M for q4_k experts", ft);
    bool runnable = true;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        const char *label = label_for(t->name);
        json_object *ref = tensor_of(label, t->name);
        const char *want = json_object_get_string(jget(ref, "type"));
        cr_assert_eq((int)t->type, pt_dtype_from_name(want), "%s: %s, llama-quantize (%s file) stores %s", t->name,
                     pt_dtype_name(t->type), label, want);
        uint8_t *data = malloc(t->size);
        cr_assert_eq(gguf_read(g, t->offset, data, t->size, &err), 0, "%s", err.msg);
        char h[65];
        tu_sha256_of(data, t->size, h);
        cr_expect_str_eq(h, json_object_get_string(jget(ref, "data_sha256")), "%s (%s): bytes differ from %s's",
                         t->name, want, label);
        free(data);
        runnable = runnable && pt_dtype_valid(t->type);
    }
    gguf_close(g);
    // The file loads and computes (once every type has its kernels): logits
    // of golden case 1 close to the reference model's (quantisation moves
    // them, so a loose correlation check).
    if (runnable) {
        size_t nt, nl;
        int32_t *ids = tu_golden_i32("case1_tokens.i32.bin", &nt);
        float *gold = tu_golden_f32("case1_logits.f32.bin", &nl);
        char list[512] = "";
        size_t k = 0;
        for (size_t i = 0; i < nt; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", i ? "," : "", ids[i]);
        rc = tu_sh(&log, "%s logits -m '%s' --ids %s -t 2 --usage none -o '%s/logits.f32' 2>&1", PETREL_BIN, out,
                   list, dir);
        cr_assert_eq(rc, 0, "logits failed: %s", log);
        char lp[1100];
        snprintf(lp, sizeof lp, "%s/logits.f32", dir);
        size_t bytes;
        float *got = tu_read(lp, &bytes);
        cr_assert(got && bytes == nl * 4, "logits: %zu bytes, expected %zu", bytes, nl * 4);
        double sxy = 0, sxx = 0, syy = 0, mx = 0, my = 0;
        for (size_t i = 0; i < nl; i++) {
            cr_assert(isfinite(got[i]));
            mx += got[i];
            my += gold[i];
        }
        mx /= (double)nl;
        my /= (double)nl;
        for (size_t i = 0; i < nl; i++) {
            sxy += (got[i] - mx) * (gold[i] - my);
            sxx += (got[i] - mx) * (got[i] - mx);
            syy += (gold[i] - my) * (gold[i] - my);
        }
        double r = sxy / sqrt(sxx * syy);
        cr_assert_gt(r, 0.8, "logits correlate %.3f with the reference model's", r);
        cr_log_info("mixed-type file: logits of case 1 correlate %.4f with the reference model's", r);
        free(got);
        free(ids);
        free(gold);
    } else {
        cr_log_warn("logits not checked: a type of the file has no kernels yet");
    }
    free(log);
    free(fx);
    tu_rmrf(dir);
    free(dir);
}

Test(convert_types, plan_shows_types_and_rejects_bad_options)
{
    char *fx = tu_fixture("tiny-dsv3"), *log = NULL;
    int rc = tu_sh(&log, "%s convert --plan '%s' --expert-type q4_k --trunk-type q6_k " RULES " 2>&1", PETREL_BIN,
                   fx);
    cr_assert_eq(rc, 0, "%s", log);
    char want[64];
    cr_assert(strstr(log, "type_rule: blk\\.[24]\\.ffn_down_exps=q2_k matches 2 tensors"), "%s", log);
    cr_assert(strstr(log, "rule_tensor: blk.4.ffn_down_exps.weight q4_0 "), "%s", log);
    cr_assert(strstr(log, "rule_tensor: token_embd.weight q5_1 "), "%s", log);
    cr_assert(strstr(log, "fallbacks: 28"), "%s", log);
    cr_assert(strstr(log, "type_mix: f32 32 "), "%s", log);
    // Blocks 2 and 4 hold Q4_0 down experts, block 3 IQ4_XS gate/up: one expert
    // is 128 x 256 values per matrix (Q4_K 144, Q5_0 22 x 8, Q4_0 18 x 8,
    // IQ4_XS 136 bytes per 256 values).
    snprintf(want, sizeof want, "  block 1: %d\n", 128 * (144 + 144 + 176));
    cr_assert(strstr(log, want), "want %s in %s", want, log);
    snprintf(want, sizeof want, "  block 2: %d\n", 128 * (144 + 144 + 144));
    cr_assert(strstr(log, want), "want %s in %s", want, log);
    snprintf(want, sizeof want, "  block 3: %d\n", 128 * (136 + 136 + 176));
    cr_assert(strstr(log, want), "want %s in %s", want, log);
    // bytes of the Q4_K type: the gate/up experts of blocks 1, 2, 4 and the
    // MTP block, 16 experts of 128 x 256 values, 144 bytes per 256.
    snprintf(want, sizeof want, "bytes_q4_k: %d\n", 6 * 16 * 128 * 256 / 256 * 144);
    cr_assert(strstr(log, want), "want %s in %s", want, log);
    free(log);
    cr_assert_neq(tu_sh(&log, "%s convert --plan '%s' --expert-type iq2_xxs 2>&1", PETREL_BIN, fx), 0);
    cr_assert(strstr(log, "Petrel cannot write type 'iq2_xxs'"), "%s", log);
    free(log);
    cr_assert_neq(tu_sh(&log, "%s convert --plan '%s' --type-rule '(=q4_k' 2>&1", PETREL_BIN, fx), 0);
    cr_assert(strstr(log, "--type-rule '(': not a regular expression"), "%s", log);
    free(log);
    cr_assert_neq(tu_sh(&log, "%s convert --plan '%s' --type-rule 'attn' 2>&1", PETREL_BIN, fx), 0);
    cr_assert(strstr(log, "expected REGEX=TYPE"), "%s", log);
    free(log);
    free(fx);
}

// Values per block and bytes per block of the types in the Q2_K-mix file
// (the GGUF format's block layouts).
static uint64_t type_bytes(const char *type, uint64_t n)
{
    static const struct { const char *name; uint64_t blck, bytes; } tab[] = {
        {"F32", 1, 4}, {"Q4_0", 32, 18}, {"Q2_K", 256, 84}, {"Q3_K", 256, 110}, {"Q6_K", 256, 210},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(tab[i].name, type))
            return n / tab[i].blck * tab[i].bytes;
    cr_assert_fail("no block size for %s", type);
    return 0;
}

static const char *lower(const char *s, char *buf)
{
    size_t i = 0;
    for (; s[i]; i++)
        buf[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    buf[i] = 0;
    return buf;
}

Test(inspect, type_mix_of_llama_quantize_q2_k_recipe)
{
    char *path = tu_fixture("llamacpp/models/tiny-dsv3-Q2_K-mix.gguf"), *log = NULL;
    cr_assert_eq(tu_sh(&log, "%s inspect '%s' --no-tensors 2>&1", PETREL_BIN, path), 0, "%s", log);
    json_object *f = file_of("Q2_K-mix"), *ts = jget(f, "tensors");
    // Per type: count and bytes, all / trunk / experts, from the manifest.
    const char *types[] = {"F32", "Q4_0", "Q2_K", "Q3_K", "Q6_K"};
    uint64_t expert_bytes[5][5] = {{0}}; // [layer][part] one expert's slice
    char buf[16], want[256];
    for (size_t k = 0; k < 5; k++) {
        uint64_t n[2] = {0}, b[2] = {0};
        for (size_t i = 0; i < json_object_array_length(ts); i++) {
            json_object *t = json_object_array_get_idx(ts, i), *ne = jget(t, "ne");
            if (strcmp(json_object_get_string(jget(t, "type")), types[k]))
                continue;
            const char *name = json_object_get_string(jget(t, "name"));
            uint64_t ne0 = (uint64_t)json_object_get_int64(json_object_array_get_idx(ne, 0)), rows = 1;
            for (size_t d = 1; d < json_object_array_length(ne); d++)
                rows *= (uint64_t)json_object_get_int64(json_object_array_get_idx(ne, d));
            int e = strstr(name, "_exps.") != NULL;
            n[e]++;
            b[e] += type_bytes(types[k], ne0) * rows;
            int L;
            if (e && sscanf(name, "blk.%d.", &L) == 1) {
                uint64_t ne2 = (uint64_t)json_object_get_int64(json_object_array_get_idx(ne, 2));
                int part = strstr(name, "gate") ? 0 : strstr(name, "up") ? 1 : 2;
                expert_bytes[L][part] = type_bytes(types[k], ne0) * rows / ne2;
            }
        }
        cr_assert_eq((int64_t)(n[0] + n[1]),
                     json_object_get_int64(jget(jget(f, "tensor_type_counts"), types[k])));
        snprintf(want, sizeof want, "  %-8s %8llu %14llu   %8llu %14llu   %8llu %14llu\n", lower(types[k], buf),
                 (unsigned long long)(n[0] + n[1]), (unsigned long long)(b[0] + b[1]), (unsigned long long)n[0],
                 (unsigned long long)b[0], (unsigned long long)n[1], (unsigned long long)b[1]);
        cr_assert(strstr(log, want), "expected '%s' in:\n%s", want, log);
    }
    // One expert's bytes per MoE block (blocks 1-4; block 0 is dense).
    for (int L = 1; L <= 4; L++) {
        snprintf(want, sizeof want, "  blk.%-3d  16 experts  gate_exps q2_k %llu  up_exps q2_k %llu  down_exps q4_0 "
                 "%llu  = %llu bytes per expert\n", L, (unsigned long long)expert_bytes[L][0],
                 (unsigned long long)expert_bytes[L][1], (unsigned long long)expert_bytes[L][2],
                 (unsigned long long)(expert_bytes[L][0] + expert_bytes[L][1] + expert_bytes[L][2]));
        cr_assert(strstr(log, want), "expected '%s' in:\n%s", want, log);
    }
    // Fallbacks: exactly llama-quantize's list.
    json_object *fb = jget(f, "fallbacks");
    char *sec = strstr(log, "\nfallbacks");
    cr_assert(sec, "%s", log);
    size_t listed = 0;
    for (char *p = strchr(sec + 1, '\n'); p && p[1] == ' '; p = strchr(p + 1, '\n'))
        listed++;
    cr_assert_eq(listed, json_object_array_length(fb), "%s", sec);
    for (size_t i = 0; i < json_object_array_length(fb); i++) {
        json_object *e = json_object_array_get_idx(fb, i);
        snprintf(want, sizeof want, "  %s  %s  row length %lld\n", json_object_get_string(jget(e, "tensor")),
                 lower(json_object_get_string(jget(e, "got")), buf), (long long)json_object_get_int64(jget(e, "ncols")));
        cr_assert(strstr(sec, want), "expected '%s' in:\n%s", want, sec);
    }
    free(log);
    free(path);
}

// llama-quantize's mixed recipes written as --type-rules give llama.cpp's
// file: every tensor has the type and the bytes of the manifest's, and
// general.file_type is the recipe's ftype.
static void check_recipe(const char *label, const char *opts)
{
    char *dir = tu_tmpdir("recipe"), *fx = tu_fixture("tiny-dsv3"), *log = NULL;
    char out[1024];
    snprintf(out, sizeof out, "%s/r.gguf", dir);
    int rc = tu_sh(&log, "%s convert '%s' -o '%s' --threads 2 %s 2>&1", PETREL_BIN, fx, out, opts);
    cr_assert_eq(rc, 0, "convert failed: %s", log);
    json_object *f = file_of(label), *ts = jget(f, "tensors");
    pt_err err = {{0}};
    gguf_file *g = gguf_open(out, &err);
    cr_assert(g, "%s", err.msg);
    cr_assert_eq(g->n_tensors, json_object_array_length(ts));
    uint32_t ft;
    cr_assert_eq(gguf_get_u32(g, "general.file_type", &ft, &err), 0);
    cr_assert_eq((int64_t)ft, json_object_get_int64(jget(f, "general_file_type")));
    for (size_t i = 0; i < json_object_array_length(ts); i++) {
        json_object *ref = json_object_array_get_idx(ts, i);
        const char *name = json_object_get_string(jget(ref, "name"));
        const char *want = json_object_get_string(jget(ref, "type"));
        const gguf_tensor *t = gguf_find_tensor(g, name);
        cr_assert(t, "%s: no tensor %s", label, name);
        cr_assert_eq((int)t->type, pt_dtype_from_name(want), "%s: %s is %s, llama-quantize's is %s", label, name,
                     pt_dtype_name(t->type), want);
        uint8_t *data = malloc(t->size);
        cr_assert_eq(gguf_read(g, t->offset, data, t->size, &err), 0, "%s", err.msg);
        char h[65];
        tu_sha256_of(data, t->size, h);
        cr_expect_str_eq(h, json_object_get_string(jget(ref, "data_sha256")), "%s: %s (%s) bytes differ", label,
                         name, want);
        free(data);
    }
    gguf_close(g);
    free(log);
    free(fx);
    tu_rmrf(dir);
    free(dir);
}

Test(convert_types, q4_k_m_recipe_as_rules, .timeout = 300)
{
    check_recipe("Q4_K_M", "--type q4_k --type-rule '^output\\.weight$=q6_k' "
                           "--type-rule 'blk\\.[24]\\.ffn_down_(exps|shexp)\\.=q6_k'");
}

Test(convert_types, q2_k_recipe_as_rules, .timeout = 300)
{
    // \d as llama-quantize's std::regex writes it; only block 0 has a dense ffn_down
    check_recipe("Q2_K-mix", "--type q2_k --tensor-type '^output\\.weight$=q6_k' --type-rule '^blk\\.\\d+\\.ffn_down\\.=q3_k'");
}

// `petrel convert --type T` is llama-quantize --pure T: every tensor (the
// fallbacks included) and general.file_type, for every type both write.
Test(convert_types, pure_types_equal_llama_quantize_pure, .timeout = 600)
{
    static const char *const labels[] = {"Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
                                         "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        char opts[64], buf[16];
        snprintf(opts, sizeof opts, "--type %s", lower(labels[i], buf));
        check_recipe(labels[i], opts);
    }
}

// The rules are part of a conversion's identity: the same command finds the
// file up to date, another rule refuses to overwrite it without --force.
Test(convert_types, rules_are_part_of_the_identity, .timeout = 120)
{
    char *dir = tu_tmpdir("convrules"), *fx = tu_fixture("tiny-dsv3"), *log = NULL;
    const char *cmd = "%s convert '%s' -o '%s/r.gguf' --expert-type q4_k --type-rule '%s' 2>&1";
    cr_assert_eq(tu_sh(&log, cmd, PETREL_BIN, fx, dir, "blk\\.2\\.=q6_k"), 0, "%s", log);
    free(log);
    cr_assert_eq(tu_sh(&log, cmd, PETREL_BIN, fx, dir, "blk\\.2\\.=q6_k"), 0, "%s", log);
    cr_assert(strstr(log, "is complete and up to date"), "%s", log);
    free(log);
    cr_assert_neq(tu_sh(&log, cmd, PETREL_BIN, fx, dir, "blk\\.3\\.=q6_k"), 0, "%s", log);
    cr_assert(strstr(log, "differs from what this command would write"), "%s", log);
    free(log);
    free(fx);
    tu_rmrf(dir);
    free(dir);
}
