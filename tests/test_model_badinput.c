// tests/test_model_badinput.c — a GGUF whose tensors disagree with its
// metadata is refused with a message naming the tensor; nothing crashes.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "petrel.h"
#include "tests/testutil.h"

enum edit { DROP_TENSOR, RESHAPE_TENSOR, CHANGE_U32, EXTRA_TENSOR, RETYPE_TENSOR, DROP_PREFIX, EXTRA_F32_KEY, TRAILING_ONE };

// Copies the GGUF at in to out with one edit applied to `name` (a tensor
// or a u32 metadata key).
static void rewrite(const char *in, const char *out, enum edit ed, const char *name, uint32_t value)
{
    pt_err err;
    gguf_file *g = gguf_open(in, &err);
    cr_assert(g, "%s", err.msg);
    gguf_writer *w = gguf_writer_new(4096);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        switch (kv->type) {
        case GGUF_UINT32:
            gguf_w_u32(w, kv->key, (ed == CHANGE_U32 && !strcmp(kv->key, name)) ? value : kv->v.u32);
            break;
        case GGUF_INT32: gguf_w_i32(w, kv->key, kv->v.i32); break;
        case GGUF_UINT64: gguf_w_u64(w, kv->key, kv->v.u64); break;
        case GGUF_FLOAT32: gguf_w_f32(w, kv->key, kv->v.f32); break;
        case GGUF_BOOL: gguf_w_bool(w, kv->key, kv->v.b); break;
        case GGUF_STRING: gguf_w_str(w, kv->key, kv->str.s); break;
        case GGUF_ARRAY:
            if (kv->arr_type == GGUF_INT32)
                gguf_w_arr_i32(w, kv->key, kv->arr, kv->n);
            else if (kv->arr_type == GGUF_UINT32)
                gguf_w_arr_u32(w, kv->key, kv->arr, kv->n);
            else if (kv->arr_type == GGUF_FLOAT32)
                gguf_w_arr_f32(w, kv->key, kv->arr, kv->n);
            else if (kv->arr_type == GGUF_STRING) {
                const char **ss = malloc(sizeof(char *) * (kv->n + 1));
                const gguf_str *gs = kv->arr;
                for (uint64_t j = 0; j < kv->n; j++)
                    ss[j] = gs[j].s;
                gguf_w_arr_str(w, kv->key, ss, kv->n);
                free(ss);
            }
            break;
        default: break;
        }
    }
    if (ed == EXTRA_F32_KEY)
        gguf_w_f32(w, name, (float)value);
    int src[1024], n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor t = g->tensors[i];
        if (ed == DROP_TENSOR && !strcmp(t.name, name))
            continue;
        if (ed == DROP_PREFIX && !strncmp(t.name, name, strlen(name)))
            continue;
        if (ed == RESHAPE_TENSOR && !strcmp(t.name, name)) {
            // Same bytes, another shape: swap the two dimensions.
            uint64_t a = t.ne[0];
            t.ne[0] = t.ne[1];
            t.ne[1] = a;
        }
        if (ed == TRAILING_ONE && !strcmp(t.name, name) && t.n_dims < 4)
            t.ne[t.n_dims++] = 1; // same shape, one more stored dimension
        if (ed == RETYPE_TENSOR && !strcmp(t.name, name))
            t.type = value; // (the data are the first bytes of the old ones: never computed)
        gguf_w_tensor(w, t.name, t.n_dims, t.ne, t.type);
        src[n++] = (int)i;
    }
    if (ed == EXTRA_TENSOR) {
        uint64_t ne[1] = {256};
        gguf_w_tensor(w, name, 1, ne, 0);
        src[n++] = -1;
    }
    uint64_t hl;
    void *h = gguf_writer_header(w, &hl);
    int fd = open(out, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    cr_assert(fd >= 0);
    cr_assert_eq(pwrite(fd, h, hl, 0), (ssize_t)hl);
    for (int k = 0; k < n; k++) {
        uint64_t sz = gguf_writer_tensor_size(w, k);
        void *buf = calloc(1, sz);
        if (src[k] >= 0)
            cr_assert_eq(gguf_read(g, g->tensors[src[k]].offset, buf, sz, &err), 0);
        cr_assert_eq(pwrite(fd, buf, sz, (off_t)gguf_writer_tensor_offset(w, k)), (ssize_t)sz);
        free(buf);
    }
    cr_assert_eq(ftruncate(fd, (off_t)gguf_writer_total_size(w)), 0);
    close(fd);
    free(h);
    gguf_writer_free(w);
    gguf_close(g);
}

static void expect_refused(enum edit ed, const char *name, uint32_t value, const char *needle)
{
    char *model = tu_tiny_model("f32");
    char *dir = tu_tmpdir("badmodel");
    char out[1024];
    snprintf(out, sizeof out, "%s/bad.gguf", dir);
    rewrite(model, out, ed, name, value);
    char err[1024] = "";
    petrel_model *m = petrel_model_open(out, NULL, err, sizeof err);
    cr_expect_null(m, "a model with an edited '%s' was accepted", name);
    if (m)
        petrel_model_close(m);
    cr_expect(strstr(err, needle) != NULL, "message '%s' does not mention '%s'", err, needle);
    cr_expect(strstr(err, "bad.gguf") != NULL, "message '%s' does not name the file", err);
    tu_rmrf(dir);
    free(dir);
    free(model);
}

Test(model_badinput, control_unedited_copy_loads)
{
    char *model = tu_tiny_model("f32");
    char *dir = tu_tmpdir("badmodel");
    char out[1024];
    snprintf(out, sizeof out, "%s/same.gguf", dir);
    rewrite(model, out, CHANGE_U32, "no.such.key", 0);
    char err[1024] = "";
    petrel_model *m = petrel_model_open(out, NULL, err, sizeof err);
    cr_expect_not_null(m, "an unedited copy failed to load: %s", err);
    petrel_model_close(m);
    tu_rmrf(dir);
    free(dir);
    free(model);
}

Test(model_badinput, missing_tensor) { expect_refused(DROP_TENSOR, "blk.2.attn_kv_a_mqa.weight", 0, "blk.2.attn_kv_a_mqa.weight"); }
Test(model_badinput, missing_expert_tensor) { expect_refused(DROP_TENSOR, "blk.3.ffn_down_exps.weight", 0, "blk.3.ffn_down_exps.weight"); }
Test(model_badinput, missing_mtp_tensor) { expect_refused(DROP_TENSOR, "blk.4.nextn.eh_proj.weight", 0, "blk.4.nextn.eh_proj.weight"); }
Test(model_badinput, wrong_shape) { expect_refused(RESHAPE_TENSOR, "blk.1.attn_output.weight", 0, "blk.1.attn_output.weight"); }
Test(model_badinput, metadata_contradicts_tensors)
{
    // 8 heads claimed, tensors sized for 4: the first per-head tensor is named.
    expect_refused(CHANGE_U32, "deepseek2.attention.head_count", 8, "blk.0.attn_q_b.weight");
}
Test(model_badinput, unexpected_tensor) { expect_refused(EXTRA_TENSOR, "blk.1.attn_kv_b.weight", 0, "blk.1.attn_kv_b.weight"); }

// A type ggml has and Petrel cannot compute: the tensor and the type are named.
Test(model_badinput, type_petrel_cannot_compute)
{
    expect_refused(RETYPE_TENSOR, "blk.3.ffn_gate_exps.weight", 35 /* TQ2_0 */,
                   "tensor 'blk.3.ffn_gate_exps.weight' has type tq2_0, which Petrel cannot compute yet");
}
Test(model_badinput, type_petrel_cannot_compute_trunk)
{
    expect_refused(RETYPE_TENSOR, "blk.1.attn_norm.weight", 26 /* I32 */, "'blk.1.attn_norm.weight' has type i32");
}

// What llama.cpp's converter may write and Petrel does not run: refused
// naming the key.
Test(model_badinput, gating_func_unsupported)
{
    expect_refused(CHANGE_U32, "deepseek2.expert_gating_func", 3, "deepseek2.expert_gating_func");
}
Test(model_badinput, yarn_ext_factor_unsupported)
{
    expect_refused(EXTRA_F32_KEY, "deepseek2.rope.scaling.yarn_ext_factor", 2, "deepseek2.rope.scaling.yarn_ext_factor");
}

// MTP declared (nextn_predict_layers 1) but no tensor of the MTP block
// stored, as llama.cpp's converter writes DeepSeek-V3 (it skips the MTP
// layer): the trunk loads without MTP and gives the same logits.
Test(model_badinput, mtp_block_absent_runs_without_mtp)
{
    char *model = tu_tiny_model("f32");
    char *dir = tu_tmpdir("badmodel");
    char out[1024];
    snprintf(out, sizeof out, "%s/nomtp.gguf", dir);
    rewrite(model, out, DROP_PREFIX, "blk.4.", 0);
    char err[1024] = "";
    petrel_model *a = petrel_model_open(model, NULL, err, sizeof err);
    petrel_model *b = petrel_model_open(out, NULL, err, sizeof err);
    cr_assert(a && b, "%s", err);
    cr_expect(petrel_model_has_mtp(a) && !petrel_model_has_mtp(b));
    size_t n;
    int32_t *tok = tu_golden_i32("case1_tokens.i32.bin", &n);
    petrel_context *ca = petrel_context_new(a, NULL, err, sizeof err), *cb = petrel_context_new(b, NULL, err, sizeof err);
    cr_assert(ca && cb, "%s", err);
    cr_assert_eq(petrel_decode(ca, tok, NULL, (int)n, PETREL_LOGITS_ALL), 0);
    cr_assert_eq(petrel_decode(cb, tok, NULL, (int)n, PETREL_LOGITS_ALL), 0);
    for (size_t t = 0; t < n; t++)
        cr_expect(memcmp(petrel_get_logits(ca, (int)t), petrel_get_logits(cb, (int)t), 512 * sizeof(float)) == 0,
                  "row %zu differs", t);
    petrel_context_free(ca);
    petrel_context_free(cb);
    petrel_model_close(a);
    petrel_model_close(b);
    free(tok);
    tu_rmrf(dir);
    free(dir);
    free(model);
}

// A stored trailing dimension of 1 ({256, 176, 1}) is the same shape.
Test(model_badinput, trailing_dimension_of_one_loads)
{
    char *model = tu_tiny_model("f32");
    char *dir = tu_tmpdir("badmodel");
    char out[1024];
    snprintf(out, sizeof out, "%s/trail.gguf", dir);
    rewrite(model, out, TRAILING_ONE, "blk.2.attn_kv_a_mqa.weight", 0);
    char err[1024] = "";
    petrel_model *m = petrel_model_open(out, NULL, err, sizeof err);
    cr_expect_not_null(m, "%s", err);
    petrel_model_close(m);
    tu_rmrf(dir);
    free(dir);
    free(model);
}
Test(model_badinput, attention_temperature_unsupported)
{
    expect_refused(EXTRA_F32_KEY, "deepseek2.attention.temperature_scale", 1, "deepseek2.attention.temperature_scale");
}

// No exp_probs_b (DeepSeek-V2 / V2.5): loads and runs, routing without a bias.
Test(model_badinput, no_routing_bias_loads)
{
    char *model = tu_tiny_model("f32");
    char *dir = tu_tmpdir("badmodel");
    char out[1024];
    snprintf(out, sizeof out, "%s/nobias.gguf", dir);
    rewrite(model, out, DROP_TENSOR, "blk.2.exp_probs_b.bias", 0);
    char err[1024] = "";
    petrel_model *m = petrel_model_open(out, NULL, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "%s", err);
    const int32_t tok[3] = {5, 6, 7};
    cr_expect_eq(petrel_decode(c, tok, NULL, 3, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    petrel_context_free(c);
    petrel_model_close(m);
    tu_rmrf(dir);
    free(dir);
    free(model);
}
