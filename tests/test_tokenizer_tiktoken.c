// tests/test_tokenizer_tiktoken.c — the tiktoken tokenizer kind.
//
// References:
//   tests/fixtures/tokenizer/tiktoken/cl100k/: OpenAI's cl100k_base rank
//   file, its pattern in Rust syntax (pat_str.txt) and special tokens, and
//   492 texts with the ids OpenAI's tokenizer libraries give, with special
//   tokens as text (`ids`) and recognised (`ids_special`), plus 10 probes
//   where JavaScript and Rust regexes differ (Rust's ids are the reference;
//   see the README there).
//   Kimi-K2's pattern: the expected pieces below are worked out by hand from
//   the regex semantics (leftmost-first alternation, greedy quantifiers with
//   backtracking, Script=Han, Rust's White_Space), each case says why.
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_json.h"
#include "tokenizer/tokenizer.h"

static pt_tokenizer *tok;

static void setup(void)
{
    char *p = tu_fixture("tokenizer/tiktoken/cl100k");
    pt_err err = {{0}};
    tok = pt_tokenizer_load_tiktoken(p, &err);
    cr_assert(tok, "load: %s", err.msg);
    free(p);
}

static void teardown(void) { pt_tokenizer_free(tok); }

// Encodes the case's text and compares with want_key; checks that the ids
// decode back to the text byte for byte.
static void check(const pt_tokenizer *t, json_object *c, size_t line, const char *want_key, bool special,
                  int *fails)
{
    json_object *jt, *ji;
    cr_assert(json_object_object_get_ex(c, "text", &jt) && json_object_object_get_ex(c, want_key, &ji));
    const char *text = json_object_get_string(jt);
    size_t tl = (size_t)json_object_get_string_len(jt);
    int32_t *ids;
    pt_err err = {{0}};
    int64_t n = pt_tokenizer_encode(t, text, tl, special, false, &ids, &err);
    cr_assert(n >= 0, "%s", err.msg);
    long d = tu_ids_diff(ids, n, ji);
    if (d >= 0) {
        (*fails)++;
        cr_log_error("line %zu %s: mismatch at id %ld (got %lld ids, want %zu): %.60s", line + 1, want_key, d,
                     (long long)n, json_object_array_length(ji), text);
    }
    size_t dl;
    char *dec = pt_tokenizer_decode(t, ids, (size_t)n, false, &dl);
    if (dl != tl || memcmp(dec, text, tl)) {
        (*fails)++;
        cr_log_error("line %zu %s: decodes to other text: %.60s", line + 1, want_key, text);
    }
    free(dec);
    free(ids);
}

static void check_all_cases(const pt_tokenizer *t)
{
    size_t n;
    json_object **cases = tu_read_jsonl("tokenizer/tiktoken/cl100k/cl100k_cases.jsonl", &n);
    cr_assert_eq(n, 492);
    int fails = 0, differ = 0;
    for (size_t i = 0; i < n; i++) {
        check(t, cases[i], i, "ids", false, &fails);
        check(t, cases[i], i, "ids_special", true, &fails);
        json_object *a, *b;
        json_object_object_get_ex(cases[i], "ids", &a);
        json_object_object_get_ex(cases[i], "ids_special", &b);
        differ += !json_object_equal(a, b);
        json_object_put(cases[i]);
    }
    free(cases);
    cr_expect_eq(differ, 17); // as the README says: the fixture has the lines it should
    cr_assert_eq(fails, 0, "%d mismatches (see log)", fails);
}

Test(tiktoken, cl100k_cases, .init = setup, .fini = teardown) { check_all_cases(tok); }

Test(tiktoken, cl100k_rust_probes, .init = setup, .fini = teardown)
{
    size_t n;
    json_object **cases = tu_read_jsonl("tokenizer/tiktoken/cl100k/cl100k_js_vs_rust.jsonl", &n);
    cr_assert_eq(n, 10);
    int fails = 0;
    for (size_t i = 0; i < n; i++) {
        check(tok, cases[i], i, "ids_tiktoken_rust", false, &fails);
        json_object_put(cases[i]);
    }
    free(cases);
    cr_assert_eq(fails, 0, "%d mismatches (see log)", fails);
}

Test(tiktoken, cl100k_vocab_and_specials, .init = setup, .fini = teardown)
{
    // 100256 ranks and the listed specials (the last is 100276); a folder
    // with its own pat_str.txt gets no Kimi reserved block
    cr_assert_eq(pt_tokenizer_vocab_size(tok), 100277);
    cr_assert_eq(pt_tokenizer_token_id(tok, "<|endoftext|>"), 100257);
    cr_assert_eq(pt_tokenizer_token_id(tok, "<|endofprompt|>"), 100276);
    cr_assert_eq(pt_tokenizer_token_id(tok, "<|reserved_token_100256|>"), -1);
    cr_assert(pt_tokenizer_is_special(tok, 100257));
    cr_assert(!pt_tokenizer_is_special(tok, 100255));
    cr_assert_eq(pt_tokenizer_eos(tok), 100257);
    // rank 0 is "!" (the first line of the rank file, "IQ== 0")
    size_t l;
    const char *p = pt_tokenizer_piece(tok, 0, &l);
    cr_assert(l == 1 && p[0] == '!');
}

// ---- Kimi-K2's pattern -----------------------------------------------------------

typedef struct split_case {
    const char *text;
    const char *pieces[12]; // NULL-terminated
    const char *why;
} split_case;

static const split_case KIMI_SPLITS[] = {
    {"Hello World", {"Hello", " World"}, "Lu then Ll+; the space is the optional prefix of the next word"},
    {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88",
     {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88"},
     "Han run alone; hiragana and katakana are Lo outside Han: one word"},
    {"\xe4\xb8\xad\xe6\x96\x87\xe3\x80\x81\xe6\x97\xa5\xe6\x9c\xac",
     {"\xe4\xb8\xad\xe6\x96\x87", "\xe3\x80\x81", "\xe6\x97\xa5\xe6\x9c\xac"},
     "U+3001 is Script=Common (its Script_Extensions include Han): not in [\\p{Han}]+"},
    {"abc\xe4\xb8\xad", {"abc", "\xe4\xb8\xad"}, "Lo && [^Han]: a Han char does not join a Latin word"},
    {"\xe6\x99\x82\xe3\x80\x85ok", {"\xe6\x99\x82\xe3\x80\x85", "ok"}, "U+3005 is Lm with Script=Han"},
    {"\xe3\x82\xab\xe3\x83\xbc", {"\xe3\x82\xab\xe3\x83\xbc"}, "U+30FC is Lm, Script=Common: part of the kana word"},
    {"Kimi\xe4\xb8\xad\xe6\x96\x87K2", {"Kimi", "\xe4\xb8\xad\xe6\x96\x87", "K", "2"},
     "a lone capital is the third alternative; the digit is \\p{N}{1,3}"},
    {"HTTPServer CamelCase ABC ABCdef", {"HTTPServer", " Camel", "Case", " ABC", " ABCdef"},
     "[Upper]* is greedy and gives back nothing while a lowercase run follows"},
    {"1234567 x12", {"123", "456", "7", " x", "12"}, "digits in threes; the space prefixes the word"},
    {"I'm don't THEY'RE we'LL", {"I'm", " don't", " THEY'RE", " we'LL"}, "(?i:...) contractions"},
    {"it'\xc5\xbf", {"it'\xc5\xbf"}, "(?i:'s) matches 's' with U+017F by simple case folding"},
    {"a  \n\nb", {"a", "  \n\n", "b"}, "\\s*[\\r\\n]+ backtracks to end on the last newline"},
    {"a   b", {"a", "  ", " b"}, "\\s+(?!\\S) leaves the last space to the word"},
    {"a\xe1\xa0\x8e\xe1\xa0\x8e" "b", {"a", "\xe1\xa0\x8e\xe1\xa0\x8e", "b"},
     "U+180E is not White_Space in Rust: punctuation-like run"},
    {"Hello, world!", {"Hello", ",", " world", "!"}, "punctuation runs"},
    {"\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x81", {"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x81"}, "full-width '!' is Po"},
    {"\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 Caf\xc3\xa9 e\xcc\x81", {"\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4", " Caf\xc3\xa9", " e\xcc\x81"},
     "Hangul is Lo outside Han; a combining mark (M) joins its letter"},
    {"x\xf0\xa0\x80\x80y", {"x", "\xf0\xa0\x80\x80", "y"}, "CJK Extension B is Han"},
};

Test(tiktoken, kimi_pattern_splits)
{
    int fails = 0;
    for (size_t c = 0; c < sizeof KIMI_SPLITS / sizeof *KIMI_SPLITS; c++) {
        const split_case *k = &KIMI_SPLITS[c];
        size_t *sp;
        pt_err err = {{0}};
        int64_t n = pt_tiktoken_split(NULL, k->text, strlen(k->text), &sp, &err);
        cr_assert(n >= 0, "%s", err.msg);
        int64_t want = 0;
        while (k->pieces[want])
            want++;
        bool ok = n == want;
        for (int64_t i = 0; ok && i < n; i++)
            ok = sp[2 * i + 1] - sp[2 * i] == strlen(k->pieces[i]) &&
                 !memcmp(k->text + sp[2 * i], k->pieces[i], strlen(k->pieces[i]));
        if (!ok) {
            fails++;
            cr_log_error("case %zu (%s): %lld pieces, want %lld", c, k->why, (long long)n, (long long)want);
            for (int64_t i = 0; i < n; i++)
                cr_log_error("  got '%.*s'", (int)(sp[2 * i + 1] - sp[2 * i]), k->text + sp[2 * i]);
        }
        free(sp);
    }
    cr_assert_eq(fails, 0);
}

// Kimi's pattern as OpenAI's Rust core runs it (npm tiktoken 1.0.22, Rust
// fancy-regex with native && intersections) over cl100k's ranks: 577
// texts (cl100k's, Kimi-specific ones, seeded mixes of Han, kana, Hangul,
// Latin, digits and contractions), ids both ways.
Test(tiktoken, kimi_pattern_vs_rust)
{
    char *d = tu_tmpdir("tikkimipat"), *c = tu_fixture("tokenizer/tiktoken/cl100k"),
         *k = tu_fixture("tokenizer/tiktoken/kimi_pattern"), *out = NULL;
    cr_assert_eq(tu_sh(&out, "ln -s %s/tiktoken.model %s/tokenizer_config.json %s/pat_str.txt %s/", c, c, k, d), 0);
    free(out);
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_load_tiktoken(d, &err);
    cr_assert(t, "%s", err.msg);
    // the fixture's pattern is the built-in one
    size_t pl;
    char *pf = malloc(strlen(k) + 16);
    sprintf(pf, "%s/pat_str.txt", k);
    char *pat = tu_read(pf, &pl);
    cr_assert(pat && pl == strlen(pt_tiktoken_kimi_pattern()) + 1 &&
              !memcmp(pat, pt_tiktoken_kimi_pattern(), pl - 1));
    free(pat);
    free(pf);
    size_t n;
    json_object **cases = tu_read_jsonl("tokenizer/tiktoken/kimi_pattern/cases.jsonl", &n);
    cr_assert_eq(n, 577);
    int fails = 0;
    for (size_t i = 0; i < n; i++) {
        check(t, cases[i], i, "ids", false, &fails);
        check(t, cases[i], i, "ids_special", true, &fails);
        json_object_put(cases[i]);
    }
    free(cases);
    cr_assert_eq(fails, 0, "%d mismatches (see log)", fails);
    pt_tokenizer_free(t);
    tu_rmrf(d);
    free(d);
    free(c);
    free(k);
}

// Patterns where Rust's regex and PCRE2 differ ($, ., unions, negated
// intersections, scripts, \w, \b, \d, case folding, \s), encoded by
// OpenAI's Rust core over cl100k's ranks (probes.jsonl); text no match
// covers is dropped, as tiktoken's find_iter drops it.
Test(tiktoken, rust_pattern_probes)
{
    char *c = tu_fixture("tokenizer/tiktoken/cl100k");
    size_t n;
    json_object **cases = tu_read_jsonl("tokenizer/tiktoken/kimi_pattern/probes.jsonl", &n);
    cr_assert_eq(n, 33);
    int fails = 0;
    pt_tokenizer *t = NULL;
    char *cur = NULL;
    for (size_t i = 0; i < n; i++) {
        json_object *jp;
        cr_assert(json_object_object_get_ex(cases[i], "pattern", &jp));
        const char *pat = json_object_get_string(jp);
        if (!cur || strcmp(cur, pat)) { // a folder per pattern
            pt_tokenizer_free(t);
            free(cur);
            cur = strdup(pat);
            char *d = tu_tmpdir("tikprobe"), *out = NULL, p[1024];
            cr_assert_eq(tu_sh(&out, "ln -s %s/tiktoken.model %s/tokenizer_config.json %s/", c, c, d), 0);
            free(out);
            snprintf(p, sizeof p, "%s/pat_str.txt", d);
            FILE *f = fopen(p, "wb");
            fputs(pat, f);
            fclose(f);
            pt_err err = {{0}};
            t = pt_tokenizer_load_tiktoken(d, &err);
            cr_assert(t, "%s", err.msg);
            tu_rmrf(d);
            free(d);
        }
        json_object *jt, *ji;
        json_object_object_get_ex(cases[i], "text", &jt);
        json_object_object_get_ex(cases[i], "ids", &ji);
        int32_t *ids;
        pt_err err = {{0}};
        int64_t k = pt_tokenizer_encode(t, json_object_get_string(jt), (size_t)json_object_get_string_len(jt), false,
                                        false, &ids, &err);
        cr_assert(k >= 0, "%s", err.msg);
        if (tu_ids_diff(ids, k, ji) >= 0) {
            fails++;
            cr_log_error("pattern %s, text '%s': ids differ", pat, json_object_get_string(jt));
        }
        free(ids);
        json_object_put(cases[i]);
    }
    pt_tokenizer_free(t);
    free(cur);
    free(cases);
    free(c);
    cr_assert_eq(fails, 0, "%d mismatches (see log)", fails);
}

// Rust's '$' is the end of the text only; '.' is anything but "\n".
Test(tiktoken, rust_dollar_and_dot)
{
    size_t *sp;
    pt_err err = {{0}};
    cr_assert_eq(pt_tiktoken_split("x$", "x\n", 2, &sp, &err), 0);
    free(sp);
    cr_assert_eq(pt_tiktoken_split(".+", "ab\ncd", 5, &sp, &err), 2);
    cr_assert(sp[0] == 0 && sp[1] == 2 && sp[2] == 3 && sp[3] == 5);
    free(sp);
    // a nested negated class in a union, and a negated intersection
    cr_assert_eq(pt_tiktoken_split("[a[^\\p{L}]]+", "a1b", 3, &sp, &err), 1); // "a1"; "b" is neither
    cr_assert(sp[0] == 0 && sp[1] == 2);
    free(sp);
    cr_assert_eq(pt_tiktoken_split("[^\\p{L}&&[^a]]+", "1a2", 3, &sp, &err), 1); // not(L and not a) = non-L or 'a'
    cr_assert(sp[0] == 0 && sp[1] == 3);
    free(sp);
    cr_assert_eq(pt_tiktoken_split("[\\S]", "x", 1, &sp, &err), -1);
    cr_assert(strstr(err.msg, "\\S inside a character class"), "%s", err.msg);
}

// ---- errors and folders ------------------------------------------------------------

static char *make_dir(const char *tag, const char *model, const char *cfg, const char *pat)
{
    char *d = tu_tmpdir(tag);
    char p[1024];
    FILE *f;
    if (model) {
        snprintf(p, sizeof p, "%s/tiktoken.model", d);
        f = fopen(p, "wb");
        fputs(model, f);
        fclose(f);
    }
    if (cfg) {
        snprintf(p, sizeof p, "%s/tokenizer_config.json", d);
        f = fopen(p, "wb");
        fputs(cfg, f);
        fclose(f);
    }
    if (pat) {
        snprintf(p, sizeof p, "%s/pat_str.txt", d);
        f = fopen(p, "wb");
        fputs(pat, f);
        fclose(f);
    }
    return d;
}

Test(tiktoken, bad_folders)
{
    pt_err err = {{0}};
    char *d = make_dir("tikbad1", "YQ== 0\nYg== x\n", "{}", NULL);
    cr_assert_null(pt_tokenizer_load_tiktoken(d, &err));
    cr_assert(strstr(err.msg, "tiktoken.model: line 2"), "%s", err.msg);
    tu_rmrf(d);
    free(d);
    d = make_dir("tikbad2", "YQ== 0\n", NULL, NULL);
    cr_assert_null(pt_tokenizer_load_tiktoken(d, &err));
    cr_assert(strstr(err.msg, "tokenizer_config.json"), "%s", err.msg);
    tu_rmrf(d);
    free(d);
    d = make_dir("tikbad3", "YQ== 0\n", "{\"added_tokens_decoder\": {\"0\": {\"content\": \"<x>\"}}}", NULL);
    cr_assert_null(pt_tokenizer_load_tiktoken(d, &err));
    cr_assert(strstr(err.msg, "added_tokens_decoder[\"0\"]"), "%s", err.msg);
    tu_rmrf(d);
    free(d);
    d = make_dir("tikbad4", "YQ== 0\n", "{}", "[a\n");
    cr_assert_null(pt_tokenizer_load_tiktoken(d, &err));
    cr_assert(strstr(err.msg, "pattern"), "%s", err.msg);
    tu_rmrf(d);
    free(d);
}

// A tiny folder without pat_str.txt is Kimi's: Kimi's pattern, specials
// after the ranks. Ranks: a b c ab abc; "abc" is one token (whole-piece
// lookup), "abab" merges to ab ab.
Test(tiktoken, tiny_kimi_folder)
{
    const char *model = "YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYWJj 4\nIA== 5\n";
    const char *cfg = "{\"added_tokens_decoder\": {\"6\": {\"content\": \"[BOS]\", \"special\": true},"
                      " \"7\": {\"content\": \"[EOS]\", \"special\": true},"
                      " \"8\": {\"content\": \"<|im_end|>\", \"special\": true}},"
                      " \"bos_token\": \"[BOS]\", \"eos_token\": \"[EOS]\", \"chat_template\": \"{{ 1 }}\"}";
    char *d = make_dir("tikkimi", model, cfg, NULL);
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_load_tiktoken(d, &err);
    cr_assert(t, "%s", err.msg);
    cr_assert_eq(pt_tokenizer_vocab_size(t), 6 + 258);
    cr_assert_eq(pt_tokenizer_bos(t), 6);
    cr_assert_eq(pt_tokenizer_eos(t), 7);
    cr_assert_str_eq(pt_tokenizer_chat_template(t), "{{ 1 }}");
    cr_assert_eq(pt_tokenizer_token_id(t, "<|reserved_token_9|>"), 9);
    int32_t *ids;
    // a reserved name in the text is special too (Kimi's encode recognises all)
    cr_assert_eq(pt_tokenizer_encode(t, "<|reserved_token_263|>", 22, true, false, &ids, &err), 1);
    cr_assert_eq(ids[0], 263);
    free(ids);
    cr_assert_null(pt_tokenizer_token_str(t, 264)); // 6 + 258 ids, no more
    int64_t n = pt_tokenizer_encode(t, "abc abab<|im_end|>", 18, true, false, &ids, &err);
    // pieces "abc", " abab" (space prefix), then the special
    int32_t want[] = {4, 5, 3, 3, 8};
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(ids[i], want[i], "id %d: %d", i, ids[i]);
    free(ids);
    pt_tokenizer *t2 = pt_tokenizer_open(NULL, d, &err); // a folder opens as tiktoken
    cr_assert(t2, "%s", err.msg);
    cr_assert_eq(pt_tokenizer_vocab_size(t2), 264);
    pt_tokenizer_free(t2);
    pt_tokenizer_free(t);
    tu_rmrf(d);
    free(d);
}

// ---- GGUF ---------------------------------------------------------------------------

static char *write_gguf(gguf_writer *w, const char *tag)
{
    char *d = tu_tmpdir(tag), *p = malloc(strlen(d) + 16);
    sprintf(p, "%s/t.gguf", d);
    free(d);
    uint64_t hl;
    void *h = gguf_writer_header(w, &hl);
    FILE *f = fopen(p, "wb");
    cr_assert(f && fwrite(h, 1, hl, f) == hl);
    fclose(f);
    free(h);
    return p;
}

static pt_tokenizer *reload(const char *path)
{
    pt_err err = {{0}};
    gguf_file *g = gguf_open(path, &err);
    cr_assert(g, "%s", err.msg);
    pt_tokenizer *t = pt_tokenizer_from_gguf(g, &err);
    cr_assert(t, "%s", err.msg);
    gguf_close(g);
    return t;
}

// Stored in a GGUF and read back, cl100k still gives every reference id.
Test(tiktoken, cl100k_gguf_roundtrip)
{
    char *dir = tu_fixture("tokenizer/tiktoken/cl100k");
    gguf_writer *w = gguf_writer_new(32);
    pt_err err = {{0}};
    cr_assert_eq(pt_tokenizer_write_gguf(dir, NULL, w, &err), 0, "%s", err.msg);
    char *path = write_gguf(w, "tikgguf");
    gguf_writer_free(w);
    pt_tokenizer *t = reload(path);
    gguf_file *g = gguf_open(path, &err);
    const char *pre = gguf_get_str(g, "tokenizer.ggml.pre", &err);
    cr_assert_str_eq(pre, "llama-bpe"); // cl100k's pattern is Llama-3's regex
    cr_assert_null(gguf_get(g, "petrel.tokenizer.json"));
    gguf_close(g);
    cr_assert_eq(pt_tokenizer_vocab_size(t), 100277);
    cr_assert_eq(pt_tokenizer_eos(t), 100257);
    check_all_cases(t);
    pt_tokenizer_free(t);
    free(path);
    free(dir);
}

static const char TINY_MODEL[] = "YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYWJj 4\nIA== 5\n";
static const char TINY_CFG[] = "{\"added_tokens_decoder\": {\"6\": {\"content\": \"[BOS]\"},"
                               " \"7\": {\"content\": \"[EOS]\"}, \"8\": {\"content\": \"<|im_end|>\"}},"
                               " \"bos_token\": \"[BOS]\", \"eos_token\": \"[EOS]\"}";

// The merges written for llama.cpp are what its converter derives: for
// each token, tiktoken's rule over lower ranks only; two parts left = a
// merge. ab (rank 3) = a + b; abc (rank 4): a+b merges (rank 3), ab+c is
// rank 4, not below 4, so ab c.
Test(tiktoken, merges_for_llamacpp)
{
    char *d = make_dir("tikmerges", TINY_MODEL, TINY_CFG, NULL);
    gguf_writer *w = gguf_writer_new(32);
    pt_err err = {{0}};
    cr_assert_eq(pt_tokenizer_write_gguf(d, NULL, w, &err), 0, "%s", err.msg);
    char *path = write_gguf(w, "tikmerges2");
    gguf_writer_free(w);
    gguf_file *g = gguf_open(path, &err);
    cr_assert(g, "%s", err.msg);
    const gguf_kv *m = gguf_get(g, "tokenizer.ggml.merges"), *tk = gguf_get(g, "tokenizer.ggml.tokens");
    const gguf_kv *ty = gguf_get(g, "tokenizer.ggml.token_type");
    cr_assert(m && m->n == 2);
    const gguf_str *ms = m->arr, *ts = tk->arr;
    cr_assert_str_eq(ms[0].s, "a b");
    cr_assert_str_eq(ms[1].s, "ab c");
    cr_assert_str_eq(ts[5].s, "\xc4\xa0"); // the space in GPT-2's byte alphabet
    cr_assert_str_eq(ts[8].s, "<|im_end|>");
    cr_assert_eq(((const int32_t *)ty->arr)[8], 3);
    cr_assert_eq(((const int32_t *)ty->arr)[2], 1);
    cr_assert_str_eq(gguf_get_str(g, "tokenizer.ggml.pre", &err), "kimi-k2");
    gguf_close(g);
    free(path);
    tu_rmrf(d);
    free(d);
}

// A Kimi-K2 GGUF as llama.cpp writes it (gpt2 tokens and merges, pre
// "kimi-k2", no Petrel key) loads as tiktoken with Kimi's pattern.
Test(tiktoken, llamacpp_kimi_gguf)
{
    const char *toks[9] = {"a", "b", "c", "ab", "abc", "\xc4\xa0", "[BOS]", "[EOS]", "<|im_end|>"};
    int32_t types[9] = {1, 1, 1, 1, 1, 1, 3, 3, 3};
    const char *merges[2] = {"a b", "ab c"};
    gguf_writer *w = gguf_writer_new(32);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "kimi-k2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 9);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, 9);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 2);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 7);
    char *path = write_gguf(w, "tikllama");
    gguf_writer_free(w);
    pt_tokenizer *t = reload(path);
    int32_t *ids;
    pt_err err = {{0}};
    // "abc" whole; " abab" is one piece (space prefix, Ll+) -> space ab ab
    int64_t n = pt_tokenizer_encode(t, "abc abab<|im_end|>", 18, true, false, &ids, &err);
    int32_t want[] = {4, 5, 3, 3, 8};
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(ids[i], want[i], "id %d: %d", i, ids[i]);
    free(ids);
    cr_assert_eq(pt_tokenizer_eos(t), 7);
    pt_tokenizer_free(t);
    free(path);
}

// Kimi's encode cuts runs of more than 25,000 non-whitespace characters
// before the regex: "a" + 25,000 "x" is "a" + 24,999 "x" and then "x".
// Ranks a x xx: the first part is a, xx * 12,499, x; the second x; one
// piece (no cut) would be a, xx * 12,500.
Test(tiktoken, kimi_long_runs_cut)
{
    char *d = make_dir("tikrun", "YQ== 0\neA== 1\neHg= 2\n", "{}", NULL);
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_load_tiktoken(d, &err);
    cr_assert(t, "%s", err.msg);
    size_t n = 25001;
    char *text = malloc(n + 2);
    text[0] = 'a';
    memset(text + 1, 'x', n - 1);
    int32_t *ids;
    int64_t k = pt_tokenizer_encode(t, text, n, true, false, &ids, &err);
    cr_assert_eq(k, 1 + 12499 + 2);
    cr_assert_eq(ids[0], 0);
    for (int64_t i = 1; i <= 12499; i++)
        cr_assert_eq(ids[i], 2);
    cr_assert(ids[12500] == 1 && ids[12501] == 1);
    free(ids);
    // 25,000 characters are one piece: a, xx * 12,499, x
    k = pt_tokenizer_encode(t, text, n - 1, true, false, &ids, &err);
    cr_assert_eq(k, 1 + 12499 + 1);
    free(ids);
    free(text);
    pt_tokenizer_free(t);
    tu_rmrf(d);
    free(d);
}

// tokenizer.json: an empty continuing_subword_prefix / end_of_word_suffix
// means none (Qwen3's files say ""): it loads and encodes as without.
Test(tiktoken, hf_empty_subword_prefix)
{
    const char *js = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                     " \"merges\": [\"a b\"], \"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\"}}";
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_from_json(js, strlen(js), "mem", &err);
    cr_assert(t, "%s", err.msg);
    int32_t *ids;
    cr_assert_eq(pt_tokenizer_encode(t, "ab", 2, true, false, &ids, &err), 1);
    cr_assert_eq(ids[0], 2);
    free(ids);
    pt_tokenizer_free(t);
    const char *bad = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [],"
                      " \"continuing_subword_prefix\": \"##\"}}";
    cr_assert_null(pt_tokenizer_from_json(bad, strlen(bad), "mem", &err));
    cr_assert(strstr(err.msg, "continuing_subword_prefix"), "%s", err.msg);
}

// ---- the CLI -------------------------------------------------------------------------

// `petrel tokenize --tokenizer DIR --jsonl FILE` prints, per line, the ids
// with special-token strings recognised (ids_special); with --no-special,
// the ids with them as text (ids).
Test(tiktoken, cli_jsonl)
{
    char *dir = tu_fixture("tokenizer/tiktoken/cl100k");
    const char *keys[2] = {"ids_special", "ids"};
    for (int k = 0; k < 2; k++) {
        char *out = NULL;
        cr_assert_eq(tu_sh(&out, "%s tokenize --tokenizer %s --jsonl %s/cl100k_cases.jsonl %s", PETREL_BIN, dir, dir,
                           k ? "--no-special" : ""),
                     0);
        size_t n;
        json_object **cases = tu_read_jsonl("tokenizer/tiktoken/cl100k/cl100k_cases.jsonl", &n);
        char *save = NULL, *line = strtok_r(out, "\n", &save);
        size_t i = 0;
        for (; line && i < n; line = strtok_r(NULL, "\n", &save), i++) {
            json_object *got = json_tokener_parse(line), *want;
            json_object_object_get_ex(cases[i], keys[k], &want);
            cr_assert(got && json_object_equal(got, want), "line %zu (%s) differs", i + 1, keys[k]);
            json_object_put(got);
        }
        cr_assert_eq(i, n);
        for (size_t j = 0; j < n; j++)
            json_object_put(cases[j]);
        free(cases);
        free(out);
    }
    free(dir);
}
