// tests/test_synth.c — `petrel synth`: determinism, layout against the
// tiny-dsv3 fixture, FP8 encoding against the OCP E4M3 definition, the
// tokenizer's id space, and routing skew.
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "synth/synth.h"
#include "format/safetensors.h"
#include "tests/testutil.h"
#include "tokenizer/tokenizer.h"

// ---- helpers --------------------------------------------------------------------

// Runs petrel synth into a fresh temp dir (returned, malloc'ed).
static char *make_synth(const char *tag, const char *args)
{
    char *dir = tu_tmpdir(tag);
    cr_assert_not_null(dir);
    char *out = NULL;
    int rc = tu_sh(&out, "%s synth %s -o '%s' --quiet 2>&1", PETREL_BIN, args, dir);
    cr_assert_eq(rc, 0, "petrel synth %s failed: %s", args, out);
    free(out);
    return dir;
}

static json_object *load_json(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    json_object *j = json_object_from_file(p);
    cr_assert_not_null(j, "%s does not parse", p);
    return j;
}

static int64_t jint(json_object *o, const char *key)
{
    json_object *v;
    cr_assert(json_object_object_get_ex(o, key, &v), "missing key %s", key);
    return json_object_get_int64(v);
}

// OCP FP8 E4M3FN decode (bias 7, no infinities, S.1111.111 = NaN).
static float e4m3_ref(uint8_t v)
{
    int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
    if (e == 15 && m == 7)
        return NAN;
    float x = e == 0 ? ldexpf((float)m / 8.0f, -6) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return s ? -x : x;
}

static float bf16_ref(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// All shards of a checkpoint opened with the safetensors reader.
typedef struct ckpt {
    st_file *f[16];
    int n;
} ckpt;

static void ckpt_open(ckpt *c, const char *dir)
{
    memset(c, 0, sizeof *c);
    json_object *idx = load_json(dir, "model.safetensors.index.json"), *wm;
    cr_assert(json_object_object_get_ex(idx, "weight_map", &wm));
    char seen[16][128];
    json_object_object_foreach(wm, k, v)
    {
        (void)k;
        const char *fn = json_object_get_string(v);
        int found = 0;
        for (int i = 0; i < c->n; i++)
            found |= strcmp(seen[i], fn) == 0;
        if (found)
            continue;
        cr_assert_lt(c->n, 16);
        snprintf(seen[c->n], sizeof seen[c->n], "%s", fn);
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, fn);
        pt_err err = {{0}};
        c->f[c->n] = st_open(p, &err);
        cr_assert_not_null(c->f[c->n], "st_open: %s", err.msg);
        c->n++;
    }
    json_object_put(idx);
}

static const st_tensor *ckpt_find(const ckpt *c, const char *name, int *which)
{
    for (int i = 0; i < c->n; i++) {
        const st_tensor *t = st_find(c->f[i], name);
        if (t) {
            if (which)
                *which = i;
            return t;
        }
    }
    return NULL;
}

static void *ckpt_read(const ckpt *c, const char *name, const st_tensor **tp)
{
    int w = 0;
    const st_tensor *t = ckpt_find(c, name, &w);
    cr_assert_not_null(t, "tensor %s missing", name);
    void *buf = malloc(t->end - t->begin);
    pt_err err = {{0}};
    cr_assert_eq(st_read(c->f[w], t, buf, &err), 0, "%s", err.msg);
    if (tp)
        *tp = t;
    return buf;
}

static void ckpt_close(ckpt *c)
{
    for (int i = 0; i < c->n; i++)
        st_close(c->f[i]);
}

// ---- tests -----------------------------------------------------------------------

Test(synth, fp8_encoder_matches_ocp_definition)
{
    // every finite code round-trips
    for (int c = 0; c < 256; c++) {
        float v = e4m3_ref((uint8_t)c);
        if (isnan(v))
            continue;
        uint8_t back = synth_fp8_e4m3(v);
        cr_assert_eq(back, c, "code 0x%02x (%g) -> 0x%02x", c, v, back);
    }
    // round to nearest even at midpoints, both in normal and subnormal range
    cr_assert_eq(synth_fp8_e4m3(1.0625f), 0x38);                  // 1 + 1/16: between 1.0 (even) and 1.125
    cr_assert_eq(synth_fp8_e4m3(1.1875f), 0x3A);                  // between 1.125 and 1.25 (even)
    cr_assert_eq(synth_fp8_e4m3(ldexpf(1.0f, -10)), 0x00);        // half of the smallest subnormal
    cr_assert_eq(synth_fp8_e4m3(ldexpf(3.0f, -10)), 0x02);        // 1.5 ulps -> 2
    cr_assert_eq(synth_fp8_e4m3(ldexpf(15.0f, -10)), 0x08);       // 7.5 ulps -> 2^-6 (smallest normal)
    cr_assert_eq(synth_fp8_e4m3(-0.0f), 0x80);
    // saturating, never NaN
    cr_assert_eq(synth_fp8_e4m3(464.0f), 0x7E);
    cr_assert_eq(synth_fp8_e4m3(1e6f), 0x7E);
    cr_assert_eq(synth_fp8_e4m3(-1e6f), 0xFE);
    // nearest value for arbitrary inputs
    for (int i = 1; i < 2000; i++) {
        float x = (float)i * 0.2231f - 200.0f;
        float y = e4m3_ref(synth_fp8_e4m3(x));
        for (int c = 0; c < 256; c++) {
            float v = e4m3_ref((uint8_t)c);
            if (!isnan(v))
                cr_assert_leq(fabsf(y - x), fabsf(v - x), "x=%g -> %g but %g is closer", x, y, v);
        }
    }
}

Test(synth, deterministic_and_seeded)
{
    char *a = make_synth("synth-a", "--preset tiny --seed 7");
    char *b = make_synth("synth-b", "--preset tiny --seed 7 --threads 1");
    char *c = make_synth("synth-c", "--preset tiny --seed 8");
    cr_assert_eq(tu_sh(NULL, "diff -r '%s' '%s' >/dev/null", a, b), 0, "same seed gave different files");
    // another seed: other weights, same config / index / tokenizer
    cr_assert_neq(tu_sh(NULL, "cmp -s '%s/model-00001-of-000003.safetensors' '%s/model-00001-of-000003.safetensors'",
                        a, c), 0);
    const char *same[] = {"config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(tu_sh(NULL, "cmp -s '%s/%s' '%s/%s'", a, same[i], c, same[i]), 0, "%s differs", same[i]);
    // no temporary files left behind
    char *out = NULL;
    tu_sh(&out, "ls '%s' | grep -c tmp", a);
    cr_assert_eq(atoi(out), 0);
    free(out);
    tu_rmrf(a);
    tu_rmrf(b);
    tu_rmrf(c);
    free(a);
    free(b);
    free(c);
}

// Names, dtypes and shapes equal the fixture's (made by an independent
// generator from the real DeepSeek-V3 layout) except the vocab dimension.
Test(synth, layout_matches_fixture)
{
    char *dir = make_synth("synth-layout", "--preset tiny");
    char *fx = tu_fixture("tiny-dsv3");
    json_object *cfg = load_json(dir, "config.json"), *fcfg = load_json(fx, "config.json");
    // config: same keys as the fixture's, quantization_config identical
    json_object_object_foreach(fcfg, k, v)
    {
        (void)v;
        cr_assert(json_object_object_get_ex(cfg, k, NULL), "config.json lacks %s", k);
    }
    json_object *q1, *q2;
    cr_assert(json_object_object_get_ex(cfg, "quantization_config", &q1));
    cr_assert(json_object_object_get_ex(fcfg, "quantization_config", &q2));
    cr_assert(json_object_equal(q1, q2));
    const int64_t V = jint(cfg, "vocab_size"), FV = jint(fcfg, "vocab_size");
    cr_assert_eq(V, 1024);
    cr_assert_eq(jint(cfg, "max_position_embeddings"), 4096);

    ckpt a, b;
    ckpt_open(&a, dir);
    ckpt_open(&b, fx);
    cr_assert_geq(a.n, 2, "tiny must have several shards");
    uint64_t na = 0, nb = 0, total = 0;
    for (int i = 0; i < a.n; i++) {
        na += a.f[i]->n_tensors;
        // data is contiguous from the header to the end of the file
        uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
        for (uint64_t k = 0; k < a.f[i]->n_tensors; k++) {
            const st_tensor *t = &a.f[i]->tensors[k];
            lo = t->begin < lo ? t->begin : lo;
            hi = t->end > hi ? t->end : hi;
            sum += t->end - t->begin;
        }
        cr_assert_eq(hi, a.f[i]->file_size);
        cr_assert_eq(hi - lo, sum);
        cr_assert_eq(lo % 8, 0, "header not padded to 8 bytes");
        total += sum;
    }
    for (int i = 0; i < b.n; i++)
        nb += b.f[i]->n_tensors;
    cr_assert_eq(na, nb);
    json_object *idx = load_json(dir, "model.safetensors.index.json"), *md;
    cr_assert(json_object_object_get_ex(idx, "metadata", &md));
    cr_assert_eq((uint64_t)jint(md, "total_size"), total);
    for (int i = 0; i < b.n; i++) {
        for (uint64_t k = 0; k < b.f[i]->n_tensors; k++) {
            const st_tensor *ft = &b.f[i]->tensors[k];
            const st_tensor *t = ckpt_find(&a, ft->name, NULL);
            cr_assert_not_null(t, "missing %s", ft->name);
            cr_assert_eq(t->dtype, ft->dtype, "%s dtype", ft->name);
            cr_assert_eq(t->n_dims, ft->n_dims, "%s rank", ft->name);
            int vocab_t = strstr(ft->name, "embed_tokens") || strstr(ft->name, "lm_head") ||
                          strstr(ft->name, "shared_head.head");
            for (uint32_t d = 0; d < ft->n_dims; d++) {
                uint64_t want = (vocab_t && d == 0) ? (uint64_t)V : ft->shape[d];
                if (vocab_t && d == 0)
                    cr_assert_eq(ft->shape[d], (uint64_t)FV);
                cr_assert_eq(t->shape[d], want, "%s dim %u: %llu != %llu", ft->name, d,
                             (unsigned long long)t->shape[d], (unsigned long long)want);
            }
        }
    }
    json_object_put(idx);
    json_object_put(cfg);
    json_object_put(fcfg);
    ckpt_close(&a);
    ckpt_close(&b);
    tu_rmrf(dir);
    free(dir);
    free(fx);
}

Test(synth, fp8_blocks_and_copies)
{
    char *dir = make_synth("synth-fp8", "--preset tiny");
    ckpt c;
    ckpt_open(&c, dir);
    const char *names[] = {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", // 176 rows: partial block
                           "model.layers.0.self_attn.q_b_proj.weight", "model.layers.0.mlp.down_proj.weight",
                           "model.layers.2.mlp.experts.11.up_proj.weight", "model.layers.4.self_attn.o_proj.weight"};
    for (int n = 0; n < 5; n++) {
        const st_tensor *t, *s;
        uint8_t *w = ckpt_read(&c, names[n], &t);
        char sn[256];
        snprintf(sn, sizeof sn, "%s_scale_inv", names[n]);
        float *sc = ckpt_read(&c, sn, &s);
        cr_assert_eq(t->dtype, ST_F8_E4M3);
        cr_assert_eq(s->dtype, ST_F32);
        const uint64_t R = t->shape[0], C = t->shape[1], nbr = (R + 127) / 128, nbc = (C + 127) / 128;
        cr_assert_eq(s->shape[0], nbr);
        cr_assert_eq(s->shape[1], nbc);
        double ss = 0;
        for (uint64_t bi = 0; bi < nbr; bi++)
            for (uint64_t bj = 0; bj < nbc; bj++) {
                float amax = 0;
                for (uint64_t r = bi * 128; r < R && r < bi * 128 + 128; r++)
                    for (uint64_t q = bj * 128; q < C && q < bj * 128 + 128; q++) {
                        float v = e4m3_ref(w[r * C + q]);
                        cr_assert(!isnan(v), "%s: NaN code", names[n]);
                        amax = fabsf(v) > amax ? fabsf(v) : amax;
                        double d = (double)v * sc[bi * nbc + bj];
                        ss += d * d;
                    }
                cr_assert_eq(amax, 448.0f, "%s block (%llu,%llu): amax %g (scale = amax/448)", names[n],
                             (unsigned long long)bi, (unsigned long long)bj, amax);
                cr_assert_gt(sc[bi * nbc + bj], 0.0f);
            }
        // ~N(0,1)/sqrt(in) times block factors in [0.5, 2] (times <= 1 gains)
        double rms_scaled = sqrt(ss / (double)(R * C)) * sqrt((double)C);
        cr_assert(rms_scaled > 0.15 && rms_scaled < 2.5, "%s: rms*sqrt(in) = %g", names[n], rms_scaled);
        free(w);
        free(sc);
    }
    // MTP embedding / head are byte-identical copies; norms ~ 1
    const st_tensor *t1, *t2;
    void *e1 = ckpt_read(&c, "model.embed_tokens.weight", &t1), *e2 = ckpt_read(&c, "model.layers.4.embed_tokens.weight", &t2);
    cr_assert_eq(t1->end - t1->begin, t2->end - t2->begin);
    cr_assert(memcmp(e1, e2, t1->end - t1->begin) == 0);
    free(e1);
    free(e2);
    e1 = ckpt_read(&c, "lm_head.weight", &t1);
    e2 = ckpt_read(&c, "model.layers.4.shared_head.head.weight", &t2);
    cr_assert(memcmp(e1, e2, t1->end - t1->begin) == 0);
    free(e1);
    free(e2);
    uint8_t *nw = ckpt_read(&c, "model.layers.2.input_layernorm.weight", &t1);
    double m = 0;
    for (uint64_t i = 0; i < t1->shape[0]; i++)
        m += bf16_ref(nw + 2 * i);
    m /= (double)t1->shape[0];
    cr_assert(fabs(m - 1.0) < 0.05, "norm mean %g", m);
    free(nw);
    ckpt_close(&c);
    tu_rmrf(dir);
    free(dir);
}

// GPT-2 bytes_to_unicode, written out independently.
static uint32_t b2u(int b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return (uint32_t)b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
            n++;
    return 256u + (uint32_t)n;
}

static uint32_t utf8_one(const char *s, int *len)
{
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80) {
        *len = 1;
        return p[0];
    }
    if ((p[0] & 0xE0) == 0xC0) {
        *len = 2;
        return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    }
    *len = 3;
    return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
}

Test(synth, tokenizer_ids_match_vocab_size)
{
    char *dir = make_synth("synth-tok", "--preset tiny");
    json_object *cfg = load_json(dir, "config.json");
    json_object *tok = load_json(dir, "tokenizer.json"), *tc = load_json(dir, "tokenizer_config.json");
    const int64_t V = jint(cfg, "vocab_size");
    const char **str = calloc((size_t)V, sizeof *str);
    json_object *model, *vocab, *added, *merges;
    cr_assert(json_object_object_get_ex(tok, "model", &model));
    cr_assert(json_object_object_get_ex(model, "vocab", &vocab));
    cr_assert(json_object_object_get_ex(model, "merges", &merges));
    cr_assert(json_object_object_get_ex(tok, "added_tokens", &added));
    int64_t n_ids = 0;
    json_object_object_foreach(vocab, k, v)
    {
        int64_t id = json_object_get_int64(v);
        cr_assert(id >= 0 && id < V, "vocab id %lld out of range", (long long)id);
        cr_assert_null(str[id], "id %lld used twice", (long long)id);
        str[id] = k;
        n_ids++;
    }
    for (size_t i = 0; i < json_object_array_length(added); i++) {
        json_object *a = json_object_array_get_idx(added, i);
        int64_t id = jint(a, "id");
        json_object *content;
        cr_assert(json_object_object_get_ex(a, "content", &content));
        cr_assert(id >= 0 && id < V);
        if (str[id])
            cr_assert_str_eq(str[id], json_object_get_string(content), "added id %lld", (long long)id);
        else {
            str[id] = json_object_get_string(content);
            n_ids++;
        }
    }
    cr_assert_eq(n_ids, V, "ids %lld != vocab_size %lld", (long long)n_ids, (long long)V);
    // the 256 byte tokens are all there
    int have[256] = {0};
    for (int64_t id = 0; id < V; id++) {
        int l;
        uint32_t cp = utf8_one(str[id], &l);
        if (str[id][l] == 0)
            for (int b = 0; b < 256; b++)
                have[b] |= b2u(b) == cp;
    }
    for (int b = 0; b < 256; b++)
        cr_assert(have[b], "byte %d has no token", b);
    // every merge joins two tokens into a third
    for (size_t i = 0; i < json_object_array_length(merges); i++) {
        const char *m = json_object_get_string(json_object_array_get_idx(merges, i));
        const char *sp = strchr(m, ' ');
        cr_assert_not_null(sp);
        char l[256], r[256], lr[512];
        snprintf(l, sizeof l, "%.*s", (int)(sp - m), m);
        snprintf(r, sizeof r, "%s", sp + 1);
        snprintf(lr, sizeof lr, "%s%s", l, r);
        cr_assert(json_object_object_get_ex(vocab, l, NULL) && json_object_object_get_ex(vocab, r, NULL) &&
                      json_object_object_get_ex(vocab, lr, NULL),
                  "merge '%s'", m);
    }
    cr_assert_gt(json_object_array_length(merges), 500);
    // bos / eos agree with config.json; DeepSeek-V3's template and pre-tokenizer
    json_object *bos, *eos, *content;
    cr_assert(json_object_object_get_ex(tc, "bos_token", &bos) && json_object_object_get_ex(bos, "content", &content));
    cr_assert_str_eq(str[jint(cfg, "bos_token_id")], json_object_get_string(content));
    cr_assert(json_object_object_get_ex(tc, "eos_token", &eos) && json_object_object_get_ex(eos, "content", &content));
    cr_assert_str_eq(str[jint(cfg, "eos_token_id")], json_object_get_string(content));
    char *fxd = tu_fixture("tokenizer/deepseek_v3");
    json_object *ftc = load_json(fxd, "tokenizer_config.json"), *t1, *t2;
    cr_assert(json_object_object_get_ex(tc, "chat_template", &t1) && json_object_object_get_ex(ftc, "chat_template", &t2));
    cr_assert_str_eq(json_object_get_string(t1), json_object_get_string(t2));
    json_object_put(ftc);
    free(fxd);

    // the team's tokenizer loads it: vocab size, specials and a round trip
    char p[4096], pc[4096];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    snprintf(pc, sizeof pc, "%s/tokenizer_config.json", dir);
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_load(p, &err);
    cr_assert_not_null(t, "%s", err.msg);
    cr_assert_eq(pt_tokenizer_load_config(t, pc, &err), 0, "%s", err.msg);
    cr_assert_eq(pt_tokenizer_vocab_size(t), V);
    cr_assert_eq(pt_tokenizer_bos(t), jint(cfg, "bos_token_id"));
    cr_assert_eq(pt_tokenizer_eos(t), jint(cfg, "eos_token_id"));
    const char *text = "<｜User｜>Hello world, the quick brown fox! 道可道 12345 <｜Assistant｜>";
    int32_t *ids = NULL;
    int64_t n = pt_tokenizer_encode(t, text, strlen(text), true, false, &ids, &err);
    cr_assert_gt(n, 0, "%s", err.msg);
    cr_assert_lt(n, (int64_t)strlen(text) / 2, "BPE should compress English text (%lld ids)", (long long)n);
    for (int64_t i = 0; i < n; i++)
        cr_assert(ids[i] >= 0 && ids[i] < V);
    char *back = pt_tokenizer_decode(t, ids, (size_t)n, false, NULL);
    cr_assert_str_eq(back, text);
    free(back);
    free(ids);
    pt_tokenizer_free(t);

    free(str);
    json_object_put(cfg);
    json_object_put(tok);
    json_object_put(tc);
    tu_rmrf(dir);
    free(dir);
}

// Reference noaux_tc selection: sigmoid scores + bias, groups by the sum of
// their top-2 biased scores, top-k among the kept groups.
static void route_ref(const float *logit, const float *bias, int E, int G, int TG, int K, int *sel)
{
    float s[4096];
    int gs = E / G, gok[64] = {0};
    for (int e = 0; e < E; e++)
        s[e] = 1.0f / (1.0f + expf(-logit[e])) + bias[e];
    float gscore[64];
    for (int g = 0; g < G; g++) {
        float a = -1e30f, b = -1e30f;
        for (int e = g * gs; e < (g + 1) * gs; e++) {
            if (s[e] > a) {
                b = a;
                a = s[e];
            } else if (s[e] > b)
                b = s[e];
        }
        gscore[g] = a + b;
    }
    for (int k = 0; k < TG; k++) {
        int best = -1;
        for (int g = 0; g < G; g++)
            if (!gok[g] && (best < 0 || gscore[g] > gscore[best]))
                best = g;
        gok[best] = 1;
    }
    int used[4096] = {0};
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (gok[e / gs] && !used[e] && (best < 0 || s[e] > s[best]))
                best = e;
        used[best] = 1;
        sel[k] = best;
    }
}

static int cmp_int_desc(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }

Test(synth, routing_is_skewed_and_input_dependent)
{
    char *dir = make_synth("synth-route", "--preset tiny --experts 64");
    json_object *cfg = load_json(dir, "config.json");
    const int E = (int)jint(cfg, "n_routed_experts"), H = (int)jint(cfg, "hidden_size");
    const int G = (int)jint(cfg, "n_group"), TG = (int)jint(cfg, "topk_group"), K = (int)jint(cfg, "num_experts_per_tok");
    cr_assert_eq(E, 64);
    ckpt c;
    ckpt_open(&c, dir);
    float *gate[2], *bias[2];
    for (int l = 0; l < 2; l++) {
        char n[128];
        snprintf(n, sizeof n, "model.layers.%d.mlp.gate.weight", l + 1);
        const st_tensor *t;
        uint8_t *g = ckpt_read(&c, n, &t);
        cr_assert_eq(t->dtype, ST_BF16);
        cr_assert_eq(t->shape[0], (uint64_t)E);
        gate[l] = malloc((size_t)E * H * sizeof(float));
        for (int i = 0; i < E * H; i++)
            gate[l][i] = bf16_ref(g + 2 * i);
        free(g);
        snprintf(n, sizeof n, "model.layers.%d.mlp.gate.e_score_correction_bias", l + 1);
        bias[l] = ckpt_read(&c, n, &t);
        cr_assert_eq(t->dtype, ST_F32);
    }
    // unit-RMS random hidden states (what post_attention_layernorm feeds the gate)
    const int T = 3000;
    int count[64] = {0}, distinct = 0;
    uint64_t rs = 12345, prev_set = 0;
    float *x = malloc(H * sizeof *x), logit[64];
    for (int tkn = 0; tkn < T; tkn++) {
        for (int h = 0; h < H; h++) { // Box-Muller from an LCG: independent of synth's PRNG
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            double u1 = ((rs >> 11) + 1.0) / 9007199254740993.0;
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            double u2 = (rs >> 11) / 9007199254740992.0;
            x[h] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
        }
        for (int e = 0; e < E; e++) {
            float acc = 0;
            for (int h = 0; h < H; h++)
                acc += gate[0][e * H + h] * x[h];
            logit[e] = acc;
        }
        int sel[16];
        route_ref(logit, bias[0], E, G, TG, K, sel);
        uint64_t set = 0;
        for (int k = 0; k < K; k++) {
            count[sel[k]]++;
            set |= 1ull << sel[k];
        }
        distinct += set != prev_set;
        prev_set = set;
    }
    qsort(count, E, sizeof count[0], cmp_int_desc);
    double median = 0.5 * (count[E / 2 - 1] + count[E / 2]);
    cr_assert_geq(count[0], 3.0 * median, "no skew: max %d, median %g", count[0], median);
    cr_assert_gt(count[E - 1], 0, "an expert is never used");
    cr_assert_gt(distinct, T * 9 / 10, "routing barely depends on the hidden state (%d changes)", distinct);
    // consecutive layers' gates share a component: each row of layer 2 has a
    // strongly correlated row in layer 1 (random rows: |cos| ~ 1/sqrt(H))
    double mean_best = 0;
    for (int e = 0; e < E; e++) {
        double best = 0;
        for (int f = 0; f < E; f++) {
            double d = 0, na = 0, nb = 0;
            for (int h = 0; h < H; h++) {
                d += gate[1][e * H + h] * gate[0][f * H + h];
                na += gate[1][e * H + h] * gate[1][e * H + h];
                nb += gate[0][f * H + h] * gate[0][f * H + h];
            }
            double cs = fabs(d) / sqrt(na * nb);
            best = cs > best ? cs : best;
        }
        mean_best += best / E;
    }
    cr_assert_gt(mean_best, 0.4, "layer gates uncorrelated (%g)", mean_best);
    for (int l = 0; l < 2; l++) {
        free(gate[l]);
        free(bias[l]);
    }
    free(x);
    json_object_put(cfg);
    ckpt_close(&c);
    tu_rmrf(dir);
    free(dir);
}

// A killed run never leaves a complete-looking checkpoint: whenever the
// index exists, every shard it names is complete.
Test(synth, killed_run_is_not_complete_looking)
{
    char *dir = tu_tmpdir("synth-kill");
    const char *delays[] = {"0.05", "0.3", "1.0"};
    for (int i = 0; i < 3; i++) {
        tu_sh(NULL, "rm -rf '%s'/*; timeout -s KILL %s %s synth --preset small -o '%s' --quiet >/dev/null 2>&1", dir,
              delays[i], PETREL_BIN, dir);
        char p[4096];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        struct stat st;
        if (stat(p, &st) != 0)
            continue; // not complete, and does not look complete
        ckpt c;
        ckpt_open(&c, dir); // st_open validates sizes against the headers
        ckpt_close(&c);
    }
    int rc = tu_sh(NULL, "%s synth --preset nosuch -o '%s/x' --quiet 2>/dev/null", PETREL_BIN, dir);
    cr_assert_neq(rc, 0);
    tu_rmrf(dir);
    free(dir);
}
