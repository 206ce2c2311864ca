// engine/model.c — opening a deepseek2 GGUF: validation against the
// hyper-parameters, the trunk read into RAM, the expert layout recorded.
#include "engine/model.h"
#include "engine/stream.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "format/tensors.h"
#include "io/io.h"

static void *model_alloc(petrel_model *m, uint64_t bytes)
{
    void *p = pt_alloc_aligned(bytes);
    if (!p)
        return NULL;
    if (m->n_allocs == m->cap_allocs) {
        m->cap_allocs = m->cap_allocs ? 2 * m->cap_allocs : 64;
        m->allocs = realloc(m->allocs, sizeof(void *) * (size_t)m->cap_allocs);
    }
    m->allocs[m->n_allocs++] = p;
    m->trunk_bytes += pt_align_up(bytes, PT_ALIGN);
    return p;
}

// Rows and columns of a stored matrix: cols = ne[0], rows = the rest.
static void tensor_dims(const gguf_tensor *t, int64_t *rows, int64_t *cols)
{
    *cols = (int64_t)t->ne[0];
    int64_t r = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        r *= (int64_t)t->ne[d];
    *rows = r;
}

// Reads a matrix into RAM in its stored type.
static int load_mat(petrel_model *m, const gguf_tensor *t, pt_mat *out, pt_err *err)
{
    void *buf = model_alloc(m, t->size);
    if (!buf)
        return pt_errf(err, "%s: out of memory loading tensor '%s' (%llu bytes)", m->path, t->name,
                       (unsigned long long)t->size);
    if (gguf_read(m->gguf, t->offset, buf, t->size, err) < 0)
        return -1;
    out->data = buf;
    out->type = (pt_dtype)t->type;
    tensor_dims(t, &out->rows, &out->cols);
    return 0;
}

// Reads a vector (norm weights, bias) converted to f32.
static int load_vec(petrel_model *m, const gguf_tensor *t, float **out, pt_err *err)
{
    int64_t rows, cols;
    tensor_dims(t, &rows, &cols);
    float *v = model_alloc(m, (uint64_t)(rows * cols) * sizeof(float));
    if (!v)
        return pt_errf(err, "%s: out of memory", m->path);
    *out = v;
    if (t->type == PT_F32)
        return gguf_read(m->gguf, t->offset, v, t->size, err);
    void *tmp = malloc(t->size);
    if (!tmp)
        return pt_errf(err, "%s: out of memory", m->path);
    int rc = gguf_read(m->gguf, t->offset, tmp, t->size, err);
    if (rc == 0)
        pt_dequantize_row((pt_dtype)t->type, tmp, v, rows * cols);
    free(tmp);
    return rc;
}

static bool name_is(const char *name, int il, const char *suffix)
{
    char buf[96];
    if (il < 0)
        snprintf(buf, sizeof buf, "%s", suffix);
    else
        snprintf(buf, sizeof buf, "blk.%d.%s", il, suffix);
    return strcmp(name, buf) == 0;
}

// Assigns one validated tensor to its place in the model.
static int place_tensor(petrel_model *m, const pt_tensor_spec *s, const gguf_tensor *t, pt_err *err)
{
    const char *n = s->name;
    if (s->layer < 0) {
        if (!strcmp(n, "token_embd.weight"))
            return load_mat(m, t, &m->tok_embd, err);
        if (!strcmp(n, "output_norm.weight"))
            return load_vec(m, t, &m->output_norm, err);
        if (!strcmp(n, "output.weight"))
            return load_mat(m, t, &m->output, err);
        return pt_errf(err, "%s: unexpected global tensor '%s'", m->path, n);
    }
    const int il = s->layer;
    pt_layer *L = &m->layers[il];
    struct { const char *suffix; pt_mat *mat; float **vec; } map[] = {
        {"attn_norm.weight", NULL, &L->attn_norm},
        {"attn_q_a.weight", &L->q_a, NULL},
        {"attn_q_a_norm.weight", NULL, &L->q_a_norm},
        {"attn_q_b.weight", &L->q_b, NULL},
        {"attn_q.weight", &L->q, NULL},
        {"attn_kv_a_mqa.weight", &L->kv_a, NULL},
        {"attn_kv_a_norm.weight", NULL, &L->kv_a_norm},
        {"attn_k_b.weight", &L->k_b, NULL},
        {"attn_v_b.weight", &L->v_b, NULL},
        {"attn_output.weight", &L->o, NULL},
        {"indexer.attn_q_b.weight", &L->idx_q_b, NULL},
        {"indexer.attn_k.weight", &L->idx_k, NULL},
        {"indexer.k_norm.weight", NULL, &L->idx_k_norm},
        {"indexer.k_norm.bias", NULL, &L->idx_k_bias},
        {"indexer.proj.weight", &L->idx_proj, NULL},
        {"ffn_norm.weight", NULL, &L->ffn_norm},
        {"ffn_gate.weight", &L->ffn_gate, NULL},
        {"ffn_up.weight", &L->ffn_up, NULL},
        {"ffn_down.weight", &L->ffn_down, NULL},
        {"ffn_gate_inp.weight", &L->gate_inp, NULL},
        {"exp_probs_b.bias", NULL, &L->exp_bias},
        {"ffn_gate_shexp.weight", &L->sh_gate, NULL},
        {"ffn_up_shexp.weight", &L->sh_up, NULL},
        {"ffn_down_shexp.weight", &L->sh_down, NULL},
        {"nextn.eh_proj.weight", &L->eh_proj, NULL},
        {"nextn.enorm.weight", NULL, &L->enorm},
        {"nextn.hnorm.weight", NULL, &L->hnorm},
        {"nextn.shared_head_norm.weight", NULL, &L->head_norm},
        {"nextn.embed_tokens.weight", &L->own_embed, NULL},
        {"nextn.shared_head_head.weight", &L->own_head, NULL},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (!name_is(n, il, map[i].suffix))
            continue;
        if (map[i].mat)
            return load_mat(m, t, map[i].mat, err);
        return load_vec(m, t, map[i].vec, err);
    }
    // Routed experts stay in the file: record where expert 0's slice lies.
    const char *exps[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    for (int k = 0; k < 3; k++) {
        if (!name_is(n, il, exps[k]))
            continue;
        pt_ecache_layer_src *src = &m->exp_src[il];
        src->n_expert = (int)t->ne[2];
        src->off[k] = t->offset;
        src->bytes[k] = t->size / t->ne[2];
        L->exps_type[k] = (pt_dtype)t->type;
        return 0;
    }
    return pt_errf(err, "%s: unexpected tensor '%s'", m->path, n);
}

// Does the file hold any tensor of block il?
static bool has_block(const gguf_file *g, uint32_t il)
{
    char prefix[32];
    const int n = snprintf(prefix, sizeof prefix, "blk.%u.", il);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strncmp(g->tensors[i].name, prefix, (size_t)n))
            return true;
    return false;
}

petrel_model_params petrel_model_default_params(void)
{
    petrel_model_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static float yarn_get_mscale(float scale, float mscale)
{
    if (scale <= 1.0f)
        return 1.0f;
    return 0.1f * mscale * logf(scale) + 1.0f;
}

static bool yarn_active(const pt_hparams *hp)
{
    return hp->yarn && hp->yarn_factor > 1.0f && hp->n_ctx_train > hp->yarn_orig_ctx;
}

// Checks one present tensor against its spec: shape, and a type Petrel computes.
static int check_tensor(const petrel_model *m, const pt_tensor_spec *s, const gguf_tensor *t, pt_err *err)
{
    // Dimensions past n_dims are 1 on both sides: a writer that stores a
    // trailing 1 ({256, 512, 1}) describes the same shape (as for ggml).
    bool same = true;
    for (uint32_t d = 0; same && d < GGUF_MAX_DIMS; d++)
        same = t->ne[d] == s->ne[d];
    if (!same) {
        char want[96], got[96];
        int w = 0, h = 0;
        for (uint32_t d = 0; d < s->n_dims; d++)
            w += snprintf(want + w, sizeof want - (size_t)w, "%s%llu", d ? "," : "", (unsigned long long)s->ne[d]);
        for (uint32_t d = 0; d < t->n_dims; d++)
            h += snprintf(got + h, sizeof got - (size_t)h, "%s%llu", d ? "," : "", (unsigned long long)t->ne[d]);
        return pt_errf(err, "%s: tensor '%s' has shape {%s}, the metadata implies {%s}", m->path, s->name, got,
                       want);
    }
    if (!pt_dtype_valid(t->type)) {
        char tn[16];
        const char *gn = gguf_type_name(t->type);
        size_t k = 0;
        for (; gn[k] && k + 1 < sizeof tn; k++) // ggml's name in Petrel's lower case
            tn[k] = (char)(gn[k] >= 'A' && gn[k] <= 'Z' ? gn[k] + 32 : gn[k]);
        tn[k] = 0;
        return pt_errf(err, "%s: tensor '%s' has type %s, which Petrel cannot compute yet", m->path, s->name, tn);
    }
    return 0;
}

// Is spec s replaced by an alternative layout found in the file?
static bool replaced(const petrel_model *m, const pt_tensor_spec *s)
{
    if (s->layer < 0)
        return false;
    const pt_layer *L = &m->layers[s->layer];
    if (L->kv_b_legacy && (strstr(s->name, ".attn_k_b.weight") || strstr(s->name, ".attn_v_b.weight")))
        return true;
    return L->gate_up_fused && (strstr(s->name, ".ffn_gate_exps.weight") || strstr(s->name, ".ffn_up_exps.weight"));
}

// Finds an alternative layout of block il (spec alt, replacing tensors
// named a and b): 1 when present and valid, 0 when absent, -1 + err when
// it has a bad shape / type or stands beside a or b.
static int find_alt(const petrel_model *m, const pt_tensor_spec *alt, const char *a, const char *b, pt_err *err)
{
    const gguf_file *g = m->gguf;
    const gguf_tensor *t = gguf_find_tensor(g, alt->name);
    if (!t)
        return 0;
    if (gguf_find_tensor(g, a) || gguf_find_tensor(g, b))
        return pt_errf(err, "%s: tensor '%s' next to '%s' / '%s': a block has one layout or the other", m->path,
                       alt->name, a, b);
    return check_tensor(m, alt, t, err) < 0 ? -1 : 1;
}

// Checks the file's tensors against what the hyper-parameters require:
// every required tensor present with the expected shape and a computable
// type, nothing unknown. Two alternative layouts llama.cpp writes are
// accepted per block (never beside what they replace; format/tensors.h):
// the legacy attn_kv_b instead of attn_k_b + attn_v_b (kv_b_legacy), and
// the fused ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps
// (gate_up_fused).
static int validate_tensors(petrel_model *m, pt_tensor_spec *specs, int n_specs, pt_err *err)
{
    const gguf_file *g = m->gguf;
    const uint32_t n_blocks = pt_hp_n_blocks(&m->hp);
    for (uint32_t il = 0; il < n_blocks; il++) {
        pt_tensor_spec alt;
        char a[64], b[64];
        pt_tensor_kv_b_spec(&m->hp, il, &alt);
        snprintf(a, sizeof a, "blk.%u.attn_k_b.weight", il);
        snprintf(b, sizeof b, "blk.%u.attn_v_b.weight", il);
        int rc = find_alt(m, &alt, a, b, err);
        if (rc < 0)
            return -1;
        m->layers[il].kv_b_legacy = rc > 0;
        if (!pt_hp_is_moe(&m->hp, il))
            continue;
        pt_tensor_gate_up_exps_spec(&m->hp, il, &alt);
        snprintf(a, sizeof a, "blk.%u.ffn_gate_exps.weight", il);
        snprintf(b, sizeof b, "blk.%u.ffn_up_exps.weight", il);
        rc = find_alt(m, &alt, a, b, err);
        if (rc < 0)
            return -1;
        m->layers[il].gate_up_fused = rc > 0;
    }
    for (int i = 0; i < n_specs; i++) {
        const pt_tensor_spec *s = &specs[i];
        const gguf_tensor *t = gguf_find_tensor(g, s->name);
        if (!t) {
            // exp_probs_b: DeepSeek-V2 / V2.5 have no routing bias (llama.cpp:
            // not required); the router then ranks the plain scores.
            if (s->optional || replaced(m, s) || (s->role == PT_ROLE_BIAS && s->layer >= 0))
                continue;
            return pt_errf(err, "%s: missing tensor '%s'", m->path, s->name);
        }
        if (check_tensor(m, s, t, err) < 0)
            return -1;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        bool known = false;
        for (int j = 0; j < n_specs && !known; j++)
            known = !strcmp(name, specs[j].name);
        unsigned il;
        int end = 0;
        if (!known && sscanf(name, "blk.%u.attn_kv_b.weight%n", &il, &end) == 1 && name[end] == 0)
            known = il < n_blocks && m->layers[il].kv_b_legacy;
        end = 0;
        if (!known && sscanf(name, "blk.%u.ffn_gate_up_exps.weight%n", &il, &end) == 1 && name[end] == 0)
            known = il < n_blocks && m->layers[il].gate_up_fused;
        if (!known)
            return pt_errf(err, "%s: unexpected tensor '%s' (not part of a deepseek2 model with this metadata)",
                           m->path, name);
    }
    return 0;
}

// Makes block il's k_b and v_b from the legacy attn_kv_b t (ggml ne
// {kv_lora, H*(nope+v)}, format/tensors.h has the row layout):
//   v_b row (h, i) = kv_b row h*(nope+v) + nope + i, bytes copied in the
//     stored type (the same product as llama.cpp's wv_b);
//   k_b row (h, c), element j = kv_b row h*(nope+v) + j, element c: the k
//     rows of each head transposed to Petrel's (kv_lora x nope) per head.
//     A transposed row is no longer whole blocks of the stored type, so k_b
//     is F32 (dequantised exactly), or F16 / BF16 when the file is
//     (values moved unchanged). Costs H*kv_lora*nope*4 bytes per block
//     (DeepSeek-V3: 32 MiB, 2 GiB over 61 blocks) instead of the stored type.
static int load_kv_b(petrel_model *m, uint32_t il, const gguf_tensor *t, pt_err *err)
{
    const pt_hparams *hp = &m->hp;
    const int64_t H = hp->n_head, nope = hp->qk_nope, vd = hp->v_head, kvl = hp->kv_lora_rank;
    const int64_t per_head = nope + vd;
    const size_t rb = pt_row_bytes((pt_dtype)t->type, (uint64_t)kvl);
    assert(rb > 0 && (uint64_t)rb * (uint64_t)(H * per_head) == t->size);
    const bool half = t->type == PT_F16 || t->type == PT_BF16;
    const size_t es = half ? 2 : 4;
    unsigned char *raw = malloc(t->size);
    float *row = malloc(sizeof(float) * (size_t)kvl);
    unsigned char *v = model_alloc(m, (uint64_t)(H * vd) * rb);
    unsigned char *k = model_alloc(m, (uint64_t)(H * kvl * nope) * es);
    int rc = 0;
    if (!raw || !row || !v || !k)
        rc = pt_errf(err, "%s: out of memory splitting tensor '%s'", m->path, t->name);
    else
        rc = gguf_read(m->gguf, t->offset, raw, t->size, err);
    for (int64_t h = 0; rc == 0 && h < H; h++) {
        const unsigned char *head = raw + (size_t)(h * per_head) * rb;
        for (int64_t i = 0; i < vd; i++)
            memcpy(v + (size_t)(h * vd + i) * rb, head + (size_t)(nope + i) * rb, rb);
        for (int64_t j = 0; j < nope; j++) {
            const unsigned char *src = head + (size_t)j * rb;
            if (half) {
                uint16_t *kh = (uint16_t *)k;
                for (int64_t c = 0; c < kvl; c++)
                    memcpy(&kh[(size_t)((h * kvl + c) * nope + j)], src + 2 * (size_t)c, 2);
                continue;
            }
            if (t->type == PT_F32)
                memcpy(row, src, rb);
            else
                pt_dequantize_row((pt_dtype)t->type, src, row, kvl);
            float *kf = (float *)k;
            for (int64_t c = 0; c < kvl; c++)
                kf[(size_t)((h * kvl + c) * nope + j)] = row[c];
        }
    }
    free(raw);
    free(row);
    if (rc < 0)
        return -1;
    pt_layer *L = &m->layers[il];
    L->v_b = (pt_mat){.data = v, .type = (pt_dtype)t->type, .rows = H * vd, .cols = kvl};
    L->k_b = (pt_mat){.data = k, .type = half ? (pt_dtype)t->type : PT_F32, .rows = H * kvl, .cols = nope};
    return 0;
}

// RoPE tables (cos, sin) per position and pair, computed as ggml's CPU
// rope (ggml_rope_cache_init / rope_yarn, x86 build with FMA contraction)
// so that the rotated values equal llama.cpp's bit for bit: theta_p,i =
// p * theta_scale^i by repeated float multiplication, theta_scale =
// powf(base, -2 / n_dims); with YaRN the interpolated and extrapolated
// angles mixed by ggml's ramp over its corr dims, and the magnitude
// attn_factor * (1 + 0.1 ln factor) with llama.cpp's attn_factor (the
// mscale ratio divided by that same 1 + 0.1 ln factor).
static float rope_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

int pt_model_rope_prepare(petrel_model *m, int n)
{
    if (n <= m->rope_len)
        return 0;
    const pt_hparams *hp = &m->hp;
    const int half = (int)hp->qk_rope / 2, n_dims = (int)hp->qk_rope;
    const bool yarn = yarn_active(hp);
    const float base = hp->rope_theta;
    const float freq_scale = yarn ? 1.0f / hp->yarn_factor : 1.0f;
    const float theta_scale = powf(base, -2.0f / (float)n_dims);
    float lo = 0, hi = 0, mscale = 1.0f;
    if (yarn) {
        lo = floorf(rope_corr_dim(n_dims, (int)hp->yarn_orig_ctx, hp->yarn_beta_fast, base));
        hi = ceilf(rope_corr_dim(n_dims, (int)hp->yarn_orig_ctx, hp->yarn_beta_slow, base));
        lo = lo > 0 ? lo : 0;
        hi = hi < (float)(n_dims - 1) ? hi : (float)(n_dims - 1);
        const float factor = 1.0f / freq_scale;
        float attn_factor = yarn_get_mscale(hp->yarn_factor, hp->yarn_mscale) /
                            yarn_get_mscale(hp->yarn_factor, hp->yarn_mscale_all_dim);
        attn_factor *= 1.0f / (1.0f + 0.1f * logf(factor));
        mscale = attn_factor * fmaf(0.1f, logf(1.0f / freq_scale), 1.0f);
    }
    float *c = realloc(m->rope_cos, sizeof(float) * (size_t)n * (size_t)half);
    float *s = realloc(m->rope_sin, sizeof(float) * (size_t)n * (size_t)half);
    if (c)
        m->rope_cos = c; // (a grown table is still valid for rope_len)
    if (s)
        m->rope_sin = s;
    if (!c || !s)
        return -1;
    for (int p = 0; p < n; p++) {
        float theta = (float)p;
        for (int i = 0; i < half; i++) {
            float th = freq_scale * theta;
            if (yarn) {
                const float y = ((float)i - lo) / (hi - lo > 0.001f ? hi - lo : 0.001f);
                const float ramp = 1 - (y < 0 ? 0 : y > 1 ? 1 : y); // ext_factor 1
                th = fmaf(th, 1 - ramp, theta * ramp);
            }
            c[(size_t)p * half + i] = cosf(th) * mscale;
            s[(size_t)p * half + i] = sinf(th) * mscale;
            theta *= theta_scale;
        }
    }
    m->rope_cos = c;
    m->rope_sin = s;
    m->rope_len = n;
    return 0;
}

petrel_model *petrel_model_open(const char *path, const petrel_model_params *params, char *errbuf,
                                size_t errlen)
{
    pt_err err = {{0}};
    pt_tensor_spec *specs = NULL;
    petrel_model *m = calloc(1, sizeof *m);
    if (!m) {
        pt_errf(&err, "out of memory");
        goto fail;
    }
    pt_spec_prior_init(&m->spec_prior);
    m->params = params ? *params : petrel_model_default_params();
    m->path = strdup(path);
    m->gguf = gguf_open(path, &err);
    if (!m->gguf)
        goto fail;
    if (m->gguf->n_parts > 1 && strcmp(m->path, m->gguf->path) != 0) {
        // A split model opened by a later part is named by part 1 (messages,
        // the usage file MODEL.usage): the same model whichever part was given.
        free(m->path);
        m->path = strdup(m->gguf->path);
        path = m->path;
    }
    const char *arch = gguf_get_str(m->gguf, "general.architecture", NULL);
    if (arch && strcmp(arch, "deepseek2") != 0 && strcmp(arch, "glm-dsa") != 0) {
        pt_errf(&err, "%s: general.architecture is '%s', Petrel runs 'deepseek2' and 'glm-dsa'", path, arch);
        goto fail;
    }
    if (pt_hparams_from_gguf(m->gguf, &m->hp, &err) < 0)
        goto fail;
    if (m->hp.n_nextn > 0 && !has_block(m->gguf, m->hp.n_layer)) {
        // MTP blocks declared but none of their tensors stored (a converter
        // that skips them, or a trunk-only copy): run without MTP, as
        // llama.cpp does. A block present in part is still refused below.
        if (m->params.verbose)
            fprintf(stderr, "petrel: %s declares %u MTP block(s) but holds no blk.%u.* tensor: running without MTP\n",
                    path, m->hp.n_nextn, m->hp.n_layer);
        m->hp.n_nextn = 0;
    }
    const pt_hparams *hp = &m->hp;
    const uint32_t n_blocks = pt_hp_n_blocks(hp);
    m->layers = calloc(n_blocks, sizeof *m->layers);
    m->exp_src = calloc(n_blocks, sizeof *m->exp_src);
    int n_specs = pt_tensor_specs(hp, &specs);
    if (n_specs < 0) {
        pt_errf(&err, "out of memory");
        goto fail;
    }
    if (validate_tensors(m, specs, n_specs, &err) < 0)
        goto fail;
    if (pt_stream_check_trunk(m, &err) < 0) // before reading it: say clearly when it cannot fit
        goto fail;
    double t0 = pt_now();
    for (int i = 0; i < n_specs; i++) {
        const gguf_tensor *t = gguf_find_tensor(m->gguf, specs[i].name);
        if (t && place_tensor(m, &specs[i], t, &err) < 0)
            goto fail;
    }
    for (uint32_t il = 0; il < n_blocks; il++) {
        char name[64];
        if (m->layers[il].gate_up_fused) {
            // Expert e's gate and up: the two halves of its slice of the fused tensor.
            snprintf(name, sizeof name, "blk.%u.ffn_gate_up_exps.weight", il);
            const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
            pt_ecache_layer_src *src = &m->exp_src[il];
            const uint64_t half = t->size / t->ne[2] / 2;
            src->n_expert = (int)t->ne[2];
            for (int k = 0; k < 2; k++) {
                src->off[k] = t->offset + (uint64_t)k * half;
                src->bytes[k] = half;
                src->stride[k] = 2 * half;
                m->layers[il].exps_type[k] = (pt_dtype)t->type;
            }
        }
        if (!m->layers[il].kv_b_legacy)
            continue;
        snprintf(name, sizeof name, "blk.%u.attn_kv_b.weight", il);
        if (load_kv_b(m, il, gguf_find_tensor(m->gguf, name), &err) < 0)
            goto fail;
    }
    if (!m->output.data)
        m->output = m->tok_embd; // output falls back to token_embd
    for (uint32_t il = 0; il < n_blocks; il++) {
        pt_layer *L = &m->layers[il];
        L->moe = pt_hp_is_moe(hp, il);
        L->embed = L->own_embed.data ? &L->own_embed : &m->tok_embd;
        L->head = L->own_head.data ? &L->own_head : &m->output;
        // An indexer is all five tensors or none (an MTP block may lack it).
        const int n_idx = !!L->idx_q_b.data + !!L->idx_k.data + !!L->idx_k_norm + !!L->idx_k_bias + !!L->idx_proj.data;
        if (n_idx != 0 && n_idx != 5) {
            pt_errf(&err, "%s: block %u holds %d of the 5 indexer tensors (blk.%u.indexer.*)", path, il, n_idx, il);
            goto fail;
        }
        L->has_idx = n_idx == 5;
        if (il >= hp->n_layer && !L->head_norm) {
            pt_errf(&err, "%s: missing tensor 'blk.%u.nextn.shared_head_norm.weight'", path, il);
            goto fail;
        }
    }
    const float qk_dim = (float)(hp->qk_nope + hp->qk_rope);
    m->softmax_scale = 1.0f / sqrtf(qk_dim);
    if (yarn_active(hp)) {
        float ms = yarn_get_mscale(hp->yarn_factor, hp->yarn_mscale_all_dim);
        m->softmax_scale *= ms * ms;
    }
    if (m->params.verbose)
        fprintf(stderr, "petrel: loaded %s: trunk %.2f GB in RAM (%.1fs), %u layers + %u MTP, %u experts/layer\n",
                path, (double)m->trunk_bytes / 1e9, pt_now() - t0, hp->n_layer, hp->n_nextn,
                hp->n_expert);
    free(specs);
    return m;
fail:
    free(specs);
    if (errbuf && errlen)
        snprintf(errbuf, errlen, "%s", err.msg);
    petrel_model_close(m);
    return NULL;
}

void petrel_model_close(petrel_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_allocs; i++)
        pt_free_aligned(m->allocs[i]);
    free(m->allocs);
    free(m->layers);
    free(m->exp_src);
    free(m->rope_cos);
    free(m->rope_sin);
    if (m->gguf)
        gguf_close(m->gguf);
    free(m->path);
    pt_spec_prior_destroy(&m->spec_prior);
    free(m);
}

int32_t petrel_model_n_vocab(const petrel_model *m) { return (int32_t)m->hp.n_vocab; }
int32_t petrel_model_n_ctx_train(const petrel_model *m) { return (int32_t)m->hp.n_ctx_train; }
int32_t petrel_model_n_embd(const petrel_model *m) { return (int32_t)m->hp.n_embd; }
bool petrel_model_has_mtp(const petrel_model *m) { return m->hp.n_nextn > 0; }
uint64_t petrel_model_trunk_bytes(const petrel_model *m) { return m->trunk_bytes; }
int32_t petrel_model_bos(const petrel_model *m) { return m->hp.bos_id; }
const char *petrel_model_path(const petrel_model *m) { return m->path; }

int petrel_model_eos(const petrel_model *m, petrel_token *out, int max)
{
    int n = 0;
    for (uint32_t i = 0; i < m->hp.n_eos && n < max; i++)
        out[n++] = m->hp.eos_ids[i];
    return n;
}
