// tests/test_plan.c — `petrel convert --plan` at real scale (DeepSeek-V3 and
// GLM-5.1 configs, sizes far beyond 4 GiB) against figures computed here
// from the shapes with 64-bit arithmetic; config.json parsing variants
// (rope_parameters, eos lists, missing keys); BF16 fallbacks.
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hfconfig.h"
#include "tests/testutil.h"

// Runs --plan; returns its stdout (stderr discarded).
static char *plan(const char *path, const char *opts)
{
    char *out = NULL;
    int rc = tu_sh(&out, "%s convert --plan '%s' %s 2>/dev/null", PETREL_BIN, path, opts);
    cr_assert_eq(rc, 0, "--plan failed on %s: %s", path, out);
    return out;
}

static uint64_t field(const char *out, const char *key)
{
    char k[96];
    snprintf(k, sizeof k, "\n%s: ", key);
    const char *p = strstr(out, k);
    cr_assert_not_null(p, "no '%s' in plan output:\n%s", key, out);
    return strtoull(p + strlen(k), NULL, 10);
}

static uint64_t q8(uint64_t n) { return n / 32 * 34; }
static uint64_t q4(uint64_t n) { return n / 32 * 18; }

typedef struct shape {
    uint64_t V, E, L, nextn, dense, H, ql, kvl, nope, rope, vh, ff, ffe, X, shared;
    uint64_t Hi, Di; // DSA indexer heads x head dim in every block (0: none)
} shape;

// Trunk bytes with a q8_0 trunk (every matrix row length here is a multiple of 32).
static uint64_t trunk_q8(const shape *s)
{
    uint64_t per_attn = 4 * s->E + s->ql * q8(s->E) + 4 * s->ql + s->H * (s->nope + s->rope) * q8(s->ql) +
                        (s->kvl + s->rope) * q8(s->E) + 4 * s->kvl + s->H * s->kvl * q8(s->nope) +
                        s->H * s->vh * q8(s->kvl) + s->E * q8(s->H * s->vh) + 4 * s->E +
                        s->Hi * s->Di * q8(s->ql) + s->Di * q8(s->E) + 2 * 4 * s->Di + s->Hi * q8(s->E);
    uint64_t dense = 3 * s->ff * q8(s->E); // gate/up: ff rows of E; down: E rows of ff (same bytes)
    uint64_t moe = 4 * s->E * s->X + 4 * s->X + 3 * s->ffe * s->shared * q8(s->E);
    uint64_t mtp = s->E * q8(2 * s->E) + 3 * 4 * s->E;
    uint64_t blocks = s->L + s->nextn;
    return 2 * s->V * q8(s->E) + 4 * s->E + blocks * per_attn + s->dense * dense + (blocks - s->dense) * moe +
           s->nextn * mtp;
}

static void check_scale(const char *cfg, const shape *s, uint64_t want_experts, uint64_t want_per_expert)
{
    char *c = tu_fixture(cfg);
    char *out = plan(c, "");
    uint64_t experts = field(out, "routed_experts"), per = field(out, "bytes_per_expert");
    cr_assert_eq(experts, want_experts);
    cr_assert_eq(per, want_per_expert);
    // Independent: 3 matrices of E x ffe per expert in q4_0.
    cr_assert_eq(per, 3 * s->ffe * q4(s->E));
    uint64_t exp_bytes = field(out, "expert_bytes");
    cr_assert_eq(exp_bytes, want_experts * want_per_expert, "expert bytes %" PRIu64, exp_bytes);
    cr_assert_gt(exp_bytes, 64ull << 30);
    uint64_t trunk = field(out, "trunk_bytes");
    cr_assert_eq(trunk, trunk_q8(s), "trunk %" PRIu64 " vs %" PRIu64, trunk, trunk_q8(s));
    uint64_t file = field(out, "file_bytes"), header = field(out, "header_bytes"), n = field(out, "tensors");
    cr_assert_eq(file % 4096, 0);
    cr_assert_eq(header % 4096, 0);
    cr_assert_geq(file, header + trunk + exp_bytes);
    cr_assert_lt(file, header + trunk + exp_bytes + n * 4096);
    // KV cache per token: (layers + MTP) x (kv_lora + rope [+ indexer key]) x 4.
    cr_assert_eq(field(out, "kv_bytes_per_token_f32"), (s->L + s->nextn) * (s->kvl + s->rope + s->Di) * 4);
    free(out);
    free(c);
}

Test(plan, deepseek_v3_real_scale)
{
    shape s = {.V = 129280, .E = 7168, .L = 61, .nextn = 1, .dense = 3, .H = 128, .ql = 1536, .kvl = 512,
               .nope = 128, .rope = 64, .vh = 128, .ff = 18432, .ffe = 2048, .X = 256, .shared = 1};
    check_scale("configs/deepseek-v3.config.json", &s, 15104, 24772608);
}

Test(plan, glm_5_1_real_scale)
{
    shape s = {.V = 154880, .E = 6144, .L = 78, .nextn = 1, .dense = 3, .H = 64, .ql = 2048, .kvl = 512,
               .nope = 192, .rope = 64, .vh = 256, .ff = 12288, .ffe = 2048, .X = 256, .shared = 1,
               .Hi = 32, .Di = 128};
    check_scale("configs/glm-5.1.config.json", &s, 19456, 21233664);
    char *c = tu_fixture("configs/glm-5.1.config.json");
    char *out = NULL;
    cr_assert_eq(tu_sh(&out, "%s convert --plan '%s' 2>&1", PETREL_BIN, c), 0);
    // rope_parameters form, eos list, the DSA indexer's keys read.
    cr_assert(strstr(out, "rope: theta 1e+06, no scaling"), "%s", out);
    cr_assert(strstr(out, "eos_token_ids: 154820,154827,154829"), "%s", out);
    cr_assert(strstr(out, "unimplemented_config_keys: 0"), "%s", out);
    cr_assert(strstr(out, "dsa: indexer 32 heads x 128, top 2048 keys, interleaved RoPE, 78 of 78 layers full"),
              "%s", out);
    free(out);
    free(c);
}

Test(plan, other_types_q8_experts)
{
    char *c = tu_fixture("configs/deepseek-v3.config.json");
    char *out = plan(c, "--expert-type q8_0 --trunk-type bf16");
    cr_assert_eq(field(out, "bytes_per_expert"), 3ull * 2048 * q8(7168));
    cr_assert_eq(field(out, "fallbacks"), 0);
    free(out);
    out = plan(c, "--type f32");
    cr_assert_eq(field(out, "bytes_per_expert"), 3ull * 2048 * 7168 * 4);
    free(out);
    free(c);
}

Test(plan, config_alone_equals_config_with_index)
{
    char *fx = tu_fixture("tiny-dsv3");
    char *dir = tu_tmpdir("plan");
    cr_assert_eq(tu_sh(NULL, "cp '%s/config.json' '%s/'", fx, dir), 0);
    char *a = plan(fx, ""), *b = plan(dir, "");
    cr_assert(strstr(b, "config.json only"));
    cr_assert(strstr(a, "model.safetensors.index.json"));
    cr_assert_eq(field(a, "file_bytes"), field(b, "file_bytes"));
    cr_assert_eq(field(a, "tensors"), field(b, "tensors"));
    cr_assert_eq(field(a, "unused_checkpoint_tensors"), 0);
    cr_assert_eq(field(a, "routed_experts"), 4 * 16); // MoE blocks 1-3 + MTP
    free(a);
    free(b);
    tu_rmrf(dir);
    free(dir);
    free(fx);
}

Test(plan, row_length_fallback_listed)
{
    char *fx = tu_fixture("tiny-dsv3/config.json");
    char *dir = tu_tmpdir("plan");
    cr_assert_eq(tu_sh(NULL, "sed 's/\"qk_nope_head_dim\": 32/\"qk_nope_head_dim\": 48/' '%s' > '%s/config.json'", fx,
                       dir), 0);
    char *out = plan(dir, "");
    cr_assert_eq(field(out, "fallbacks"), 5, "%s", out); // attn_k_b of 4 blocks + MTP
    cr_assert(strstr(out, "fallback: blk.0.attn_k_b.weight row length 48 is not a multiple of 32: bf16 instead of q8_0"),
              "%s", out);
    free(out);
    out = plan(dir, "--type f32");
    cr_assert_eq(field(out, "fallbacks"), 0);
    free(out);
    tu_rmrf(dir);
    free(dir);
    free(fx);
}

static void write_cfg(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

#define BASE_KEYS                                                                                             \
    "\"vocab_size\": 64, \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "          \
    "\"kv_lora_rank\": 32, \"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"v_head_dim\": 32, "            \
    "\"intermediate_size\": 64, \"first_k_dense_replace\": 1, \"moe_intermediate_size\": 32, "                 \
    "\"n_routed_experts\": 4, \"num_experts_per_tok\": 2, \"max_position_embeddings\": 128, "                  \
    "\"rms_norm_eps\": 1e-6"

Test(plan, config_parsing_variants)
{
    char *dir = tu_tmpdir("cfg");
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    pt_hf_config c;
    pt_err err = {{0}};
    // transformers-5 rope_parameters with YaRN, eos list, q_lora null.
    write_cfg(path, "{" BASE_KEYS ", \"q_lora_rank\": null, \"eos_token_id\": [5, 6], \"bos_token_id\": 1, "
                    "\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 50000, \"factor\": 8, "
                    "\"original_max_position_embeddings\": 16, \"mscale\": 0.5, \"mscale_all_dim\": 0.707}, "
                    "\"my_new_key\": 3}");
    cr_assert_eq(pt_hf_config_load(path, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.hp.q_lora_rank, 0);
    cr_assert_eq(c.hp.rope_theta, 50000.0f);
    cr_assert(c.hp.yarn);
    cr_assert_eq(c.hp.yarn_factor, 8.0f);
    cr_assert_eq(c.hp.yarn_orig_ctx, 16);
    cr_assert_eq(c.hp.yarn_beta_fast, 32.0f);
    cr_assert_eq(c.hp.yarn_mscale, 0.5f);
    cr_assert_eq(c.hp.yarn_mscale_all_dim, 0.707f);
    cr_assert_eq(c.hp.n_eos, 2);
    cr_assert_eq(c.hp.eos_ids[1], 6);
    cr_assert_eq(c.hp.bos_id, 1);
    cr_assert_eq(c.n_unknown, 1);
    cr_assert(strstr(c.unknown[0], "my_new_key"));
    pt_hf_config_free(&c);
    // Classic rope_theta + rope_scaling with "type".
    write_cfg(path, "{" BASE_KEYS ", \"eos_token_id\": 2, \"rope_theta\": 10000, \"rope_scaling\": {\"type\": "
                    "\"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 4096, \"beta_fast\": 16}}");
    cr_assert_eq(pt_hf_config_load(path, &c, &err), 0, "%s", err.msg);
    cr_assert(c.hp.yarn && c.hp.yarn_factor == 40.0f && c.hp.yarn_beta_fast == 16.0f && c.hp.n_eos == 1);
    pt_hf_config_free(&c);
    // Errors name the file and the key.
    write_cfg(path, "{" BASE_KEYS ", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4}}");
    cr_assert_eq(pt_hf_config_load(path, &c, &err), -1);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "original_max_position_embeddings"), "%s", err.msg);
    write_cfg(path, "{" BASE_KEYS ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 4}}");
    cr_assert_eq(pt_hf_config_load(path, &c, &err), -1);
    cr_assert(strstr(err.msg, "linear"), "%s", err.msg);
    write_cfg(path, "{\"vocab_size\": 64}");
    cr_assert_eq(pt_hf_config_load(path, &c, &err), -1);
    cr_assert(strstr(err.msg, "config.json") && strstr(err.msg, "missing required key 'hidden_size'"), "%s", err.msg);
    write_cfg(path, "{" BASE_KEYS ", \"n_group\": 3}");
    cr_assert_eq(pt_hf_config_load(path, &c, &err), -1);
    cr_assert(strstr(err.msg, "n_group"), "%s", err.msg);
    write_cfg(path, "{" BASE_KEYS ", \"num_experts_per_tok\": \"two\"}");
    cr_assert_eq(pt_hf_config_load(path, &c, &err), -1);
    cr_assert(strstr(err.msg, "num_experts_per_tok"), "%s", err.msg);
    tu_rmrf(dir);
    free(dir);
}

Test(plan, figures_match_an_actual_conversion, .timeout = 60)
{
    char *fx = tu_fixture("tiny-dsv3");
    char *dir = tu_tmpdir("plan");
    char *p = plan(fx, "--expert-type q8_0 --trunk-type bf16");
    char *log = NULL;
    cr_assert_eq(tu_sh(&log, "%s convert '%s' -o '%s/t.gguf' --expert-type q8_0 --trunk-type bf16 >/dev/null 2>&1 && "
                       "stat -c %%s '%s/t.gguf' && %s inspect '%s/t.gguf' --no-tensors",
                       PETREL_BIN, fx, dir, dir, PETREL_BIN, dir), 0, "%s", log);
    cr_assert_eq(strtoull(log, NULL, 10), field(p, "file_bytes"), "plan %" PRIu64 " vs file %s",
                 field(p, "file_bytes"), log);
    char want[128];
    snprintf(want, sizeof want, "expert bytes:     %16" PRIu64, field(p, "expert_bytes"));
    cr_assert(strstr(log, want), "inspect disagrees with the plan (%s): %s", want, log);
    snprintf(want, sizeof want, "bytes per expert: %16" PRIu64, field(p, "bytes_per_expert"));
    cr_assert(strstr(log, want), "%s", log);
    free(log);
    free(p);
    tu_rmrf(dir);
    free(dir);
    free(fx);
}
