// tests/test_model_badinput.c — a GGUF whose tensors disagree with its
// metadata is refused with a message naming the tensor; nothing crashes.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "petrel.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_gguf.h"

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
        if (ed == CHANGE_U32 && kv->type == GGUF_UINT32 && !strcmp(kv->key, name))
            gguf_w_u32(w, kv->key, value);
        else
            gguf_w_copy_kv(w, kv);
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
    tu_gguf_write(out, w, g, src, n, NULL, NULL); // the extra tensor (src -1): zeros
    gguf_writer_free(w);
    gguf_close(g);
}

// A scratch copy of tiny-dsv3 (F32) with one edit (rewrite) named `file`:
// the original's path, the scratch directory and the copy's path.
typedef struct edited {
    char *model, *dir;
    char path[1024];
} edited;

static edited edit_copy(enum edit ed, const char *name, uint32_t value, const char *file)
{
    edited e = {.model = tu_tiny_model("f32"), .dir = tu_tmpdir("badmodel")};
    cr_assert(e.dir);
    snprintf(e.path, sizeof e.path, "%s/%s", e.dir, file);
    rewrite(e.model, e.path, ed, name, value);
    return e;
}

static void edited_free(edited *e)
{
    tu_rmrf(e->dir);
    free(e->dir);
    free(e->model);
}

static void expect_refused(enum edit ed, const char *name, uint32_t value, const char *needle)
{
    edited e = edit_copy(ed, name, value, "bad.gguf");
    char err[1024] = "";
    petrel_model *m = petrel_model_open(e.path, NULL, err, sizeof err);
    cr_expect_null(m, "a model with an edited '%s' was accepted", name);
    if (m)
        petrel_model_close(m);
    cr_expect(strstr(err, needle) != NULL, "message '%s' does not mention '%s'", err, needle);
    cr_expect(strstr(err, "bad.gguf") != NULL, "message '%s' does not name the file", err);
    edited_free(&e);
}

Test(model_badinput, control_unedited_copy_loads)
{
    edited e = edit_copy(CHANGE_U32, "no.such.key", 0, "same.gguf");
    char err[1024] = "";
    petrel_model *m = petrel_model_open(e.path, NULL, err, sizeof err);
    cr_expect_not_null(m, "an unedited copy failed to load: %s", err);
    petrel_model_close(m);
    edited_free(&e);
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
    edited e = edit_copy(DROP_PREFIX, "blk.4.", 0, "nomtp.gguf");
    char err[1024] = "";
    petrel_model *a = petrel_model_open(e.model, NULL, err, sizeof err);
    petrel_model *b = petrel_model_open(e.path, NULL, err, sizeof err);
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
    edited_free(&e);
}

// A stored trailing dimension of 1 ({256, 176, 1}) is the same shape.
Test(model_badinput, trailing_dimension_of_one_loads)
{
    edited e = edit_copy(TRAILING_ONE, "blk.2.attn_kv_a_mqa.weight", 0, "trail.gguf");
    char err[1024] = "";
    petrel_model *m = petrel_model_open(e.path, NULL, err, sizeof err);
    cr_expect_not_null(m, "%s", err);
    petrel_model_close(m);
    edited_free(&e);
}
Test(model_badinput, attention_temperature_unsupported)
{
    expect_refused(EXTRA_F32_KEY, "deepseek2.attention.temperature_scale", 1, "deepseek2.attention.temperature_scale");
}

// No exp_probs_b (DeepSeek-V2 / V2.5): loads and runs, routing without a bias.
Test(model_badinput, no_routing_bias_loads)
{
    edited e = edit_copy(DROP_TENSOR, "blk.2.exp_probs_b.bias", 0, "nobias.gguf");
    char err[1024] = "";
    petrel_model *m = petrel_model_open(e.path, NULL, err, sizeof err);
    cr_assert_not_null(m, "%s", err);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert(c, "%s", err);
    const int32_t tok[3] = {5, 6, 7};
    cr_expect_eq(petrel_decode(c, tok, NULL, 3, PETREL_LOGITS_ALL), 0, "%s", petrel_context_error(c));
    petrel_context_free(c);
    petrel_model_close(m);
    edited_free(&e);
}
