// tests/test_kimi.c — Kimi-K2 (`kimi_k2`): its config, `convert --plan` at
// real scale, running without an MTP layer, its chat templates and its
// end-of-generation tokens.
//
// References: the published config.json (tests/fixtures/configs/), figures
// computed here from its shapes; renderings of Kimi-K2's chat templates by
// npm @huggingface/jinja 0.5.11 and, for the template's list.append path,
// Python jinja2 3.1.6 (tests/fixtures/tokenizer/kimi_k2/, with the commands
// that made them).
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hfconfig.h"
#include "format/gguf.h"
#include "tests/test_server_util.h"
#include "template/template.h"
#include "tests/testutil.h"
#include "tokenizer/tokenizer.h"

static char *fixture_text(const char *rel);

// ---- config ------------------------------------------------------------------------

Test(kimi, config)
{
    char *p = tu_fixture("configs/kimi-k2.config.json");
    pt_hf_config cfg;
    pt_err err = {{0}};
    cr_assert_eq(pt_hf_config_load(p, &cfg, &err), 0, "%s", err.msg);
    const pt_hparams *hp = &cfg.hp;
    cr_assert_str_eq(cfg.model_type, "kimi_k2");
    cr_assert_eq(hp->n_expert, 384);
    cr_assert_eq(hp->n_expert_used, 8);
    cr_assert_eq(hp->n_group, 1);
    cr_assert_eq(hp->topk_group, 1);
    cr_assert_eq(hp->n_dense_lead, 1);
    cr_assert_eq(hp->n_layer, 61);
    cr_assert_eq(hp->n_nextn, 0); // no MTP layer
    cr_assert(hp->yarn);
    cr_assert_float_eq(hp->yarn_factor, 32.0f, 0);
    cr_assert_float_eq(hp->yarn_beta_fast, 1.0f, 0); // the config's, not DeepSeek's 32
    cr_assert_float_eq(hp->yarn_beta_slow, 1.0f, 0);
    cr_assert_eq(hp->yarn_orig_ctx, 4096);
    cr_assert_float_eq(hp->rope_theta, 50000.0f, 0);
    cr_assert_float_eq(hp->routed_scale, 2.827f, 1e-6);
    cr_assert(hp->norm_topk);
    cr_assert_eq(hp->n_vocab, 163840);
    cr_assert_eq(cfg.n_unimpl, 0);
    cr_assert_eq(cfg.n_unknown, 0);
    pt_hf_config_free(&cfg);
    free(p);
}

// Reads "key: value" from convert --plan output.
static const char *plan_value(const char *out, const char *key, char *buf, size_t n)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    const char *s = strstr(out, pat);
    cr_assert(s, "no '%s' in the plan", key);
    s += strlen(pat);
    size_t k = strcspn(s, "\n");
    snprintf(buf, n, "%.*s", (int)k, s);
    return buf;
}

// 60 MoE layers (61 - 1 dense, no MTP) x 384 experts; one expert's three
// matrices, 3 x 7168 x 2048 weights, at Q4_0's 18 bytes per 32 weights.
Test(kimi, convert_plan)
{
    char *p = tu_fixture("configs/kimi-k2.config.json"), *out = NULL;
    cr_assert_eq(tu_sh(&out, "%s convert --plan %s --type q4_0", PETREL_BIN, p), 0, "%s", out);
    char v[256];
    cr_assert_str_eq(plan_value(out, "routed_experts", v, sizeof v), "23040");
    const long long expert = 3LL * 7168 * 2048 / 32 * 18;
    cr_assert_eq(expert, 24772608);
    cr_assert_eq(atoll(plan_value(out, "bytes_per_expert", v, sizeof v)), expert);
    cr_assert_str_eq(plan_value(out, "blocks", v, sizeof v), "61 trunk + 0 MTP (1 dense)");
    cr_assert(strstr(plan_value(out, "rope", v, sizeof v), "yarn factor 32 over 4096, beta_fast 1, beta_slow 1"),
              "%s", v);
    cr_assert(strstr(plan_value(out, "routing", v, sizeof v), "8 of 384 experts, groups 1 (top 1), scale 2.827"),
              "%s", v);
    free(out);
    free(p);
}

// ---- no MTP layer ------------------------------------------------------------------

// A Kimi-style tiktoken folder for a 512-token model: the 256 bytes as
// ranks 0..255 (rank = byte value), then the special block; Kimi's names
// for the ids it uses, Kimi-K2-Instruct's chat template.
static void write_kimi_tokenizer(const char *dir)
{
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char p[1024];
    snprintf(p, sizeof p, "%s/tiktoken.model", dir);
    FILE *f = fopen(p, "wb");
    cr_assert(f);
    for (int b = 0; b < 256; b++)
        fprintf(f, "%c%c== %d\n", B64[b >> 2], B64[(b & 3) << 4], b);
    fclose(f);
    char *tmpl = fixture_text("tokenizer/kimi_k2/chat_template_k2_instruct.jinja");
    json_object *cfg = json_object_new_object(), *dec = json_object_new_object();
    const char *names[] = {"[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>",
                           "<|im_middle|>"};
    for (int i = 0; i < 7; i++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "content", json_object_new_string(names[i]));
        json_object_object_add(e, "special", json_object_new_boolean(true));
        char id[16];
        snprintf(id, sizeof id, "%d", 256 + i);
        json_object_object_add(dec, id, e);
    }
    json_object_object_add(cfg, "added_tokens_decoder", dec);
    json_object_object_add(cfg, "bos_token", json_object_new_string("[BOS]"));
    json_object_object_add(cfg, "eos_token", json_object_new_string("[EOS]"));
    json_object_object_add(cfg, "chat_template", json_object_new_string(tmpl));
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    cr_assert_eq(json_object_to_file_ext(p, cfg, JSON_C_TO_STRING_PLAIN), 0);
    json_object_put(cfg);
    free(tmpl);
}

// tiny-dsv3's weights under a Kimi-style config (no MTP layer, one group,
// beta_fast = beta_slow = 1, scale 2.827) and a Kimi-style tokenizer,
// converted into a fresh folder. Returns the GGUF's path.
static char *kimi_tiny(void)
{
    char *d = tu_tmpdir("kimitiny"), *src = tu_fixture("tiny-dsv3");
    char *out = NULL;
    write_kimi_tokenizer(d);
    cr_assert_eq(tu_sh(&out,
                       "cd %s && ln -s %s/*.safetensors %s/model.safetensors.index.json . && "
                       "sed -e 's/\"num_nextn_predict_layers\": 1/\"num_nextn_predict_layers\": 0/' "
                       "-e 's/\"n_group\": 4/\"n_group\": 1/' -e 's/\"topk_group\": 2/\"topk_group\": 1/' "
                       "-e 's/\"beta_fast\": 32/\"beta_fast\": 1/' -e 's/\"routed_scaling_factor\": 2.5/"
                       "\"routed_scaling_factor\": 2.827/' -e 's/\"model_type\": \"deepseek_v3\"/\"model_type\": \"kimi_k2\"/' "
                       "%s/config.json > config.json && %s convert . -o model.gguf --type q8_0 2>&1",
                       d, src, src, src, PETREL_BIN),
                 0, "%s", out);
    free(out);
    cr_assert_eq(tu_sh(&out, "grep -c '\"num_nextn_predict_layers\": 0' %s/config.json", d), 0, "config not edited");
    free(out);
    char *m = malloc(strlen(d) + 16);
    sprintf(m, "%s/model.gguf", d);
    free(d);
    free(src);
    return m;
}

// `petrel run --spec` on a model without MTP says so clearly and decodes
// exactly as without --spec.
Test(kimi, run_spec_without_mtp)
{
    char *m = kimi_tiny(), *a = NULL, *b = NULL;
    cr_assert_eq(tu_sh(&a, "%s run -m %s --ids 5,6,7 -n 6 --print-ids 2>/dev/null", PETREL_BIN, m), 0, "%s", a);
    cr_assert_eq(tu_sh(&b, "%s run -m %s --ids 5,6,7 -n 6 --print-ids --spec 2>&1 >/dev/null", PETREL_BIN, m), 0,
                 "%s", b);
    cr_assert(strstr(b, "speculation unavailable") && strstr(b, "has no MTP layer"), "%s", b);
    free(b);
    cr_assert_eq(tu_sh(&b, "%s run -m %s --ids 5,6,7 -n 6 --print-ids --spec 2>/dev/null", PETREL_BIN, m), 0, "%s",
                 b);
    cr_assert_str_eq(a, b);
    cr_assert(strlen(a) > 2);
    free(b);
    cr_assert_eq(tu_sh(&b, "%s bench -m %s -p 8 -n 4 -r 1 --spec 2>&1", PETREL_BIN, m), 0, "%s", b);
    cr_assert(strstr(b, "speculation unavailable"), "%s", b);
    char *ins = NULL;
    cr_assert_eq(tu_sh(&ins, "%s inspect %s", PETREL_BIN, m), 0);
    cr_assert(strstr(ins, "petrel.rope.scaling.beta_fast") && strstr(ins, "nextn_predict_layers"), "%s", ins);
    free(ins);
    free(a);
    free(b);
    free(m);
}

// ---- chat templates ------------------------------------------------------------------

static char *fixture_text(const char *rel)
{
    char *p = tu_fixture(rel);
    size_t n;
    char *s = tu_read(p, &n);
    cr_assert(s, "missing %s", p);
    s = realloc(s, n + 1);
    s[n] = 0;
    free(p);
    return s;
}

// Renders every case of one template and compares with the expected lines
// whose "template" is `name` in `expected_rel`; returns the count checked.
static int check_template(const char *name, const char *cases_key, const char *expected_rel)
{
    char path[256];
    snprintf(path, sizeof path, "tokenizer/kimi_k2/chat_template_%s.jinja", name);
    char *tmpl = fixture_text(path), *cases_s = fixture_text("tokenizer/kimi_k2/cases.json");
    char *exp_s = fixture_text(expected_rel);
    json_object *cases = json_tokener_parse(cases_s), *list;
    cr_assert(cases && json_object_object_get_ex(cases, cases_key, &list));
    int checked = 0;
    char *save = NULL;
    for (char *line = strtok_r(exp_s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_object *e = json_tokener_parse(line), *tn, *ci, *want;
        cr_assert(e && json_object_object_get_ex(e, "template", &tn) && json_object_object_get_ex(e, "case", &ci) &&
                  json_object_object_get_ex(e, "rendered", &want));
        if (strcmp(json_object_get_string(tn), name)) {
            json_object_put(e);
            continue;
        }
        json_object *c = json_object_array_get_idx(list, (size_t)json_object_get_int(ci)), *msgs, *agp, *tools;
        cr_assert(c && json_object_object_get_ex(c, "messages", &msgs));
        json_object_object_get_ex(c, "add_generation_prompt", &agp);
        json_object *extra = NULL;
        if (json_object_object_get_ex(c, "tools", &tools)) {
            extra = json_object_new_object();
            json_object_object_add(extra, "tools", json_object_get(tools));
        }
        char *got;
        size_t gl;
        pt_err err = {{0}};
        int rc = pt_chat_render(tmpl, msgs, json_object_get_boolean(agp), "[BOS]", "[EOS]", extra, &got, &gl, &err);
        cr_assert_eq(rc, 0, "%s case %d: %s", name, json_object_get_int(ci), err.msg);
        const char *w = json_object_get_string(want);
        size_t wl = (size_t)json_object_get_string_len(want);
        cr_assert(gl == wl && !memcmp(got, w, wl), "%s case %d differs:\n got  %s\n want %s", name,
                  json_object_get_int(ci), got, w);
        free(got);
        json_object_put(extra);
        json_object_put(e);
        checked++;
    }
    json_object_put(cases);
    free(tmpl);
    free(cases_s);
    free(exp_s);
    return checked;
}

Test(kimi, template_k2_instruct)
{
    cr_assert_eq(check_template("k2_instruct", "k2_instruct", "tokenizer/kimi_k2/expected.jsonl"), 4);
}

Test(kimi, template_k2_instruct_tool_calls)
{
    cr_assert_eq(check_template("k2_instruct", "k2_original", "tokenizer/kimi_k2/expected_jinja2.jsonl"), 5);
}

Test(kimi, template_k2_original)
{
    cr_assert_eq(check_template("k2_original", "k2_original", "tokenizer/kimi_k2/expected.jsonl"), 5);
}

// ---- stop tokens ---------------------------------------------------------------------

// A Kimi tokenizer folder: generation ends on <|im_end|> as well as [EOS]
// (ids as in Kimi-K2: [BOS] 163584, [EOS] 163585, <|im_end|> 163586 follow
// the ranks; here the rank table is 3 tokens long).
Test(kimi, stop_on_im_end_and_eos)
{
    char *d = tu_tmpdir("kimistop"), p[1024];
    snprintf(p, sizeof p, "%s/tiktoken.model", d);
    FILE *f = fopen(p, "wb");
    fputs("YQ== 0\nYg== 1\nYw== 2\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", d);
    f = fopen(p, "wb");
    fputs("{\"added_tokens_decoder\": {\"3\": {\"content\": \"[BOS]\", \"special\": true},"
          " \"4\": {\"content\": \"[EOS]\", \"special\": true}, \"5\": {\"content\": \"<|im_end|>\", \"special\": true},"
          " \"6\": {\"content\": \"<|im_user|>\", \"special\": true}},"
          " \"bos_token\": \"[BOS]\", \"eos_token\": \"[EOS]\"}",
          f);
    fclose(f);
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_load_tiktoken(d, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_eq(pt_tokenizer_eos(t), 4);
    cr_assert(pt_tokenizer_is_eog(t, 4));
    cr_assert(pt_tokenizer_is_eog(t, 5));
    cr_assert(!pt_tokenizer_is_eog(t, 6));
    cr_assert(!pt_tokenizer_is_eog(t, 0));
    pt_tokenizer_free(t);
    tu_rmrf(d);
    free(d);
}

// ---- the converted model: tokenizer, CLI, server -------------------------------------

// The converter takes the tiktoken folder; the GGUF's tokenizer encodes by
// the ranks (here rank = byte value) with specials recognised.
Test(kimi, converted_tokenizer)
{
    char *m = kimi_tiny(), *out = NULL;
    cr_assert_eq(tu_sh(&out, "%s tokenize -m %s 'Hi<|im_end|>'", PETREL_BIN, m), 0, "%s", out);
    cr_assert_str_eq(out, "72,105,258\n");
    free(out);
    cr_assert_eq(tu_sh(&out, "%s inspect %s", PETREL_BIN, m), 0);
    cr_assert(strstr(out, "\"kimi-k2\""), "pre-tokenizer not kimi-k2:\n%s", out);
    cr_assert(strstr(out, "petrel.tokenizer.tiktoken_pattern"), "%s", out);
    free(out);
    cr_assert_eq(tu_sh(&out, "%s detokenize -m %s 72,105,258", PETREL_BIN, m), 0, "%s", out);
    cr_assert_str_eq(out, "Hi<|im_end|>");
    free(out);
    // 256 ranks + 258 specials = 514 ids, but the token list has the
    // model's 512 (as llama.cpp writes Kimi-K2's 163,840)
    pt_err err = {{0}};
    gguf_file *g = gguf_open(m, &err);
    cr_assert(g, "%s", err.msg);
    pt_tokenizer *t = pt_tokenizer_from_gguf(g, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_eq(pt_tokenizer_vocab_size(t), 512);
    cr_assert_eq(pt_tokenizer_token_id(t, "<|reserved_token_511|>"), 511);
    cr_assert_eq(pt_tokenizer_token_id(t, "<|reserved_token_512|>"), -1);
    cr_assert_eq(pt_tokenizer_eos(t), 257);
    cr_assert(pt_tokenizer_is_eog(t, 258)); // <|im_end|> after the GGUF round trip too
    pt_tokenizer_free(t);
    uint32_t eot = 0;
    cr_assert_eq(gguf_get_u32(g, "tokenizer.ggml.eot_token_id", &eot, &err), 0, "%s", err.msg);
    cr_assert_eq(eot, 258); // llama.cpp's key for the end of a turn
    gguf_close(g);
    free(m);
}

// The server runs a model without MTP (and with the Kimi template).
Test(kimi, server_without_mtp, .fini = st_cleanup)
{
    char *m = kimi_tiny();
    st_server s = st_start(m, NULL);
    json_object *r = st_post_json(&s, "/v1/chat/completions",
                                  "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 4}", 200);
    json_object *fin = st_path(r, "choices", 0, "finish_reason");
    cr_assert(fin && (!strcmp(json_object_get_string(fin), "length") || !strcmp(json_object_get_string(fin), "stop")),
              "%s", json_object_to_json_string(r));
    json_object *u = st_path(r, "usage", -1, "prompt_tokens");
    // the Kimi template's default system turn, the "Hi" turn and the
    // generation prompt: 8 special tokens and, with rank = byte here, one
    // token per byte of the text between them
    const char *text = "system" "You are Kimi, an AI assistant created by Moonshot AI." "\n" "user" "Hi" "assistant";
    cr_assert_eq(json_object_get_int(u), 8 + (int)strlen(text));
    json_object_put(r);
    st_stop(&s);
    free(m);
}

// `petrel convert --tokenizer DIR` takes the tokenizer from another folder
// (here a Kimi-style tiktoken folder for tiny-dsv3's own checkpoint); a
// path with no tokenizer is an error naming it.
Test(kimi, convert_tokenizer_option)
{
    char *d = tu_tmpdir("kimitokopt"), *src = tu_fixture("tiny-dsv3"), *out = NULL;
    write_kimi_tokenizer(d);
    cr_assert_eq(tu_sh(&out, "%s convert %s -o %s/m.gguf --type q8_0 --tokenizer %s 2>&1", PETREL_BIN, src, d, d), 0,
                 "%s", out);
    free(out);
    cr_assert_eq(tu_sh(&out, "%s tokenize -m %s/m.gguf 'Hi<|im_end|>'", PETREL_BIN, d), 0, "%s", out);
    cr_assert_str_eq(out, "72,105,258\n");
    free(out);
    cr_assert_eq(tu_sh(&out, "%s convert --plan %s --tokenizer %s/tiktoken.model 2>&1", PETREL_BIN, src, d), 0, "%s",
                 out);
    free(out);
    cr_assert_neq(tu_sh(&out, "%s convert %s -o %s/n.gguf --tokenizer %s/nothing 2>&1", PETREL_BIN, src, d, d), 0);
    cr_assert(strstr(out, "--tokenizer") && strstr(out, "nothing"), "%s", out);
    free(out);
    tu_rmrf(d);
    free(d);
    free(src);
}
