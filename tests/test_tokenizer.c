// tests/test_tokenizer.c — the tokenizer against the DeepSeek-V3 fixture
// (reference ids and decodings produced by Hugging Face tokenizers 0.23.2),
// plus robustness: invalid UTF-8, empty input, 1 MB input, malformed JSON,
// streaming detokenisation.
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"
#include "tests/testutil/tu_json.h"
#include "tokenizer/tokenizer.h"

static pt_tokenizer *tok;

static void setup(void)
{
    char *p = tu_fixture("tokenizer/deepseek_v3/tokenizer.json");
    pt_err err = {{0}};
    tok = pt_tokenizer_load(p, &err);
    cr_assert(tok, "load: %s", err.msg);
    free(p);
}

static void teardown(void)
{
    pt_tokenizer_free(tok);
}

static void check_case(json_object *c, size_t line, const char *ids_key, const char *dec_key, bool parse_special,
                       int *fails)
{
    json_object *jt, *ji, *jd;
    if (!json_object_object_get_ex(c, ids_key, &ji))
        return;
    json_object_object_get_ex(c, "text", &jt);
    const char *text = json_object_get_string(jt);
    size_t tl = (size_t)json_object_get_string_len(jt);
    int32_t *ids;
    pt_err err = {{0}};
    int64_t n = pt_tokenizer_encode(tok, text, tl, parse_special, false, &ids, &err);
    cr_assert(n >= 0, "%s", err.msg);
    long d = tu_ids_diff(ids, n, ji);
    if (d >= 0) {
        (*fails)++;
        cr_log_error("line %zu %s: mismatch at id %ld (got %lld ids, want %zu): %.80s", line + 1, ids_key, d,
                     (long long)n, json_object_array_length(ji), text);
    }
    if (json_object_object_get_ex(c, dec_key, &jd)) {
        size_t dl;
        char *dec = pt_tokenizer_decode(tok, ids, (size_t)n, false, &dl);
        if (dl != (size_t)json_object_get_string_len(jd) || memcmp(dec, json_object_get_string(jd), dl)) {
            (*fails)++;
            cr_log_error("line %zu %s: decode mismatch: %.80s", line + 1, dec_key, text);
        }
        free(dec);
    }
    free(ids);
}

Test(tokenizer, fixture_cases, .init = setup, .fini = teardown)
{
    size_t n;
    json_object **cases = tu_read_jsonl("tokenizer/deepseek_v3/cases.jsonl", &n);
    cr_assert_eq(n, 373);
    int fails = 0, special_lines = 0;
    for (size_t i = 0; i < n; i++) {
        check_case(cases[i], i, "ids", "decoded", true, &fails);
        if (json_object_object_get_ex(cases[i], "ids_special_as_text", NULL))
            special_lines++;
        check_case(cases[i], i, "ids_special_as_text", "decoded_special_as_text", false, &fails);
        json_object_put(cases[i]);
    }
    free(cases);
    cr_expect_eq(special_lines, 7);
    cr_assert_eq(fails, 0, "%d mismatches (see log)", fails);
}

Test(tokenizer, empty_and_basic, .init = setup, .fini = teardown)
{
    int32_t *ids = (int32_t *)1;
    pt_err err = {{0}};
    cr_assert_eq(pt_tokenizer_encode(tok, "", 0, true, false, &ids, &err), 0);
    cr_assert_null(ids);
    cr_assert_eq(pt_tokenizer_encode(tok, "", 0, true, true, &ids, &err), 0); // ByteLevel post: nothing added
    free(ids);
    cr_assert_eq(pt_tokenizer_vocab_size(tok), 128815);
    cr_assert(pt_tokenizer_is_special(tok, 0));
    cr_assert(!pt_tokenizer_is_special(tok, 128803)); // <｜User｜> is a non-special added token
    cr_assert_eq(pt_tokenizer_token_id(tok, "<｜User｜>"), 128803);
    cr_assert_str_eq(pt_tokenizer_token_str(tok, 19923), "Hello");
    size_t pl;
    const char *p = pt_tokenizer_piece(tok, 223, &pl); // "Ġ"
    cr_assert_eq(pl, 1);
    cr_assert_eq(p[0], ' ');
    char *d = pt_tokenizer_decode(tok, (int32_t[]){0, 19923}, 2, true, NULL);
    cr_assert_str_eq(d, "Hello");
    free(d);
}

// Invalid UTF-8 is encoded byte by byte (each invalid byte becomes its
// byte-level symbol, possibly merged); decoding gives the bytes back as raw
// pieces, and the lossy text has U+FFFD where they were.
Test(tokenizer, invalid_utf8, .init = setup, .fini = teardown)
{
    const char bad[] = "ab\xff\xfe cd \xc3( \xe2\x82 end\x80";
    size_t bl = sizeof bad - 1;
    int32_t *ids;
    pt_err err = {{0}};
    int64_t n = pt_tokenizer_encode(tok, bad, bl, true, false, &ids, &err);
    cr_assert_gt(n, 0);
    // concatenated raw pieces reproduce the input bytes exactly
    char buf[128];
    size_t o = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t l;
        const char *p = pt_tokenizer_piece(tok, ids[i], &l);
        cr_assert(o + l < sizeof buf);
        memcpy(buf + o, p, l);
        o += l;
    }
    cr_assert_eq(o, bl);
    cr_assert(!memcmp(buf, bad, bl));
    size_t dl;
    char *d = pt_tokenizer_decode(tok, ids, (size_t)n, false, &dl);
    // U+FFFD per maximal invalid subpart (Rust from_utf8_lossy)
    const char *want = "ab\xEF\xBF\xBD\xEF\xBF\xBD cd \xEF\xBF\xBD( \xEF\xBF\xBD end\xEF\xBF\xBD";
    cr_assert_str_eq(d, want);
    free(d);
    free(ids);
}

// 1 MB of mixed text: the round trip is exact, and the ids equal the
// concatenation of encoding each line-sized chunk separately (each chunk
// ends in "\n\n" followed by a letter, so pre-tokens never cross chunks).
Test(tokenizer, one_megabyte, .init = setup, .fini = teardown)
{
    const char *para = "The quick brown fox — 快速的棕色狐狸 — jumps over 13 lazy dogs; "
                       "café naïve Привет мир 🦊🐕 x=f(y)+42;\n\n";
    size_t pl = strlen(para), reps = (1u << 20) / pl + 1, len = pl * reps;
    char *big = malloc(len + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(big + i * pl, para, pl);
    big[len] = 0;
    int32_t *ids, *one;
    pt_err err = {{0}};
    int64_t n = pt_tokenizer_encode(tok, big, len, true, false, &ids, &err);
    int64_t n1 = pt_tokenizer_encode(tok, para, pl, true, false, &one, &err);
    cr_assert_gt(n1, 0);
    cr_assert_eq(n, n1 * (int64_t)reps);
    for (size_t r = 0; r < reps; r++)
        cr_assert(!memcmp(ids + r * (size_t)n1, one, (size_t)n1 * sizeof *ids), "chunk %zu differs", r);
    size_t dl;
    char *d = pt_tokenizer_decode(tok, ids, (size_t)n, false, &dl);
    cr_assert_eq(dl, len);
    cr_assert(!memcmp(d, big, len));
    free(d);
    free(ids);
    free(one);
    // one long run of a single letter (one huge pre-token: the heap path)
    memset(big, 'a', len);
    n = pt_tokenizer_encode(tok, big, len, true, false, &ids, &err);
    cr_assert_gt(n, 0);
    d = pt_tokenizer_decode(tok, ids, (size_t)n, false, &dl);
    cr_assert_eq(dl, len);
    cr_assert(!memcmp(d, big, len));
    free(d);
    free(ids);
    free(big);
}

Test(tokenizer, malformed_json)
{
    pt_err err = {{0}};
    const char *bad = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}";
    cr_assert_null(pt_tokenizer_from_json(bad, strlen(bad), "bad.json", &err));
    cr_assert(strstr(err.msg, "bad.json") && strstr(err.msg, "malformed JSON"), "%s", err.msg);
    const char *wrong = "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}";
    cr_assert_null(pt_tokenizer_from_json(wrong, strlen(wrong), "u.json", &err));
    cr_assert(strstr(err.msg, "model.type") && strstr(err.msg, "Unigram"), "%s", err.msg);
    const char *pre = "{\"pre_tokenizer\": {\"type\": \"Metaspace\"}, \"model\": {\"type\": \"BPE\", "
                      "\"vocab\": {\"a\": 0}, \"merges\": []}}";
    cr_assert_null(pt_tokenizer_from_json(pre, strlen(pre), "m.json", &err));
    cr_assert(strstr(err.msg, "pre_tokenizer.type") && strstr(err.msg, "Metaspace"), "%s", err.msg);
    const char *merge = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}";
    cr_assert_null(pt_tokenizer_from_json(merge, strlen(merge), "x.json", &err));
    cr_assert(strstr(err.msg, "model.merges[0]"), "%s", err.msg);
    cr_assert_null(pt_tokenizer_load("/nonexistent/tokenizer.json", &err));
    cr_assert(strstr(err.msg, "/nonexistent/tokenizer.json"), "%s", err.msg);
}

// A tiny hand-made tokenizer: merges as ["a","b"] pairs, no pre-tokenizer
// regexes, TemplateProcessing adding a BOS. Expected ids worked out by hand.
Test(tokenizer, tiny_pair_merges_and_template)
{
    const char *js =
        "{\"added_tokens\":[{\"id\":7,\"content\":\"<s>\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"NFC\"},"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
        "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[7]}}},"
        "\"decoder\":{\"type\":\"ByteLevel\"},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"Ġ\":3,\"Ġab\":4,\"aa\":5,\"é\":6,"
        "\"Ã\":8,\"©\":9,\"Ã©\":10},"
        "\"merges\":[[\"a\",\"b\"],[\"Ġ\",\"ab\"],[\"a\",\"a\"],[\"Ã\",\"©\"]]}}";
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_from_json(js, strlen(js), "tiny.json", &err);
    cr_assert(t, "%s", err.msg);
    int32_t *ids;
    // "aab ab" -> pre-tokens "aab", " ab"; "aab": pairs aa(r2) ab(r0) -> a|ab ; " ab" -> Ġab
    int64_t n = pt_tokenizer_encode(t, "aab ab", 6, true, true, &ids, &err);
    cr_assert_eq(n, 4);
    cr_assert_eq(ids[0], 7);
    cr_assert_eq(ids[1], 0);
    cr_assert_eq(ids[2], 2);
    cr_assert_eq(ids[3], 4);
    free(ids);
    // "aaa" -> leftmost first: aa|a
    n = pt_tokenizer_encode(t, "aaa", 3, true, false, &ids, &err);
    cr_assert_eq(n, 2);
    cr_assert_eq(ids[0], 5);
    cr_assert_eq(ids[1], 0);
    free(ids);
    // NFC: "e" + U+0301 -> "é" (C3 A9) -> bytes Ã© -> merged id 10
    n = pt_tokenizer_encode(t, "e\xcc\x81", 3, true, false, &ids, &err);
    cr_assert(n == 1 && ids[0] == 10, "n=%lld", (long long)n);
    free(ids);
    pt_tokenizer_free(t);
}

// Streaming: feeding the ids of text with multi-byte characters split across
// tokens one at a time never yields a broken character, and the pieces
// concatenate to the full decode.
Test(tokenizer, streaming_never_splits_utf8, .init = setup, .fini = teardown)
{
    const char *text = "emoji 🤖⚛️👋🏽 family 👨‍👩‍👧 and 量子计算 mixed é";
    int32_t *ids;
    pt_err err = {{0}};
    int64_t n = pt_tokenizer_encode(tok, text, strlen(text), true, false, &ids, &err);
    // also the byte tokens of a 4-byte emoji one by one
    int32_t bytes[4];
    const char *em = "\xF0\x9F\xA4\x96";
    for (int i = 0; i < 4; i++) {
        char u[8] = {0};
        // byte-level symbol of each byte
        int32_t id = -1;
        for (int32_t k = 0; k < 256 * 2 && id < 0; k++) {
            size_t l;
            const char *p = pt_tokenizer_piece(tok, k, &l);
            if (p && l == 1 && p[0] == em[i])
                id = k;
        }
        (void)u;
        cr_assert_geq(id, 0);
        bytes[i] = id;
    }
    pt_detok d;
    pt_detok_init(&d, tok, false);
    char acc[512] = {0};
    size_t o = 0;
    int empty_pushes = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int32_t *v = pass ? bytes : ids;
        int64_t m = pass ? 4 : n;
        for (int64_t i = 0; i < m; i++) {
            size_t l;
            const char *s = pt_detok_push(&d, v[i], &l);
            char *fixed = pt_utf8_lossy(s, l, NULL);
            cr_assert_str_eq(fixed, s, "push %lld yielded invalid UTF-8", (long long)i);
            free(fixed);
            if (!l)
                empty_pushes++;
            memcpy(acc + o, s, l);
            o += l;
        }
    }
    size_t l;
    pt_detok_flush(&d, &l);
    cr_assert_eq(l, 0);
    pt_detok_free(&d);
    acc[o] = 0;
    char want[512];
    snprintf(want, sizeof want, "%s%s", text, em);
    cr_assert_str_eq(acc, want);
    cr_assert_geq(empty_pushes, 3); // the byte tokens of the emoji wait for each other
    // an unfinished character at the end becomes U+FFFD on flush
    pt_detok_init(&d, tok, false);
    pt_detok_push(&d, bytes[0], &l);
    cr_assert_eq(l, 0);
    const char *f = pt_detok_flush(&d, &l);
    cr_assert_str_eq(f, "\xEF\xBF\xBD");
    pt_detok_free(&d);
    free(ids);
}

// ---- GGUF storage -----------------------------------------------------------

#include "format/gguf.h"

// Writes a metadata-only GGUF with the tokenizer keys; returns its path.
static char *write_tok_gguf(const char *dir, bool embed, const char *model_override)
{
    char *tp = tu_fixture("tokenizer/deepseek_v3/tokenizer.json");
    char *cp = tu_fixture("tokenizer/deepseek_v3/tokenizer_config.json");
    gguf_writer *w = gguf_writer_new(32);
    pt_err err = {{0}};
    if (model_override)
        gguf_w_str(w, "tokenizer.ggml.model", model_override);
    else
        cr_assert_eq(pt_tokenizer_write_gguf_ex(tp, cp, embed, w, &err), 0, "%s", err.msg);
    uint64_t len;
    void *hdr = gguf_writer_header(w, &len);
    char *path = malloc(strlen(dir) + 32);
    sprintf(path, "%s/tok%d.gguf", dir, (int)embed);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(hdr, 1, len, f), len);
    fclose(f);
    free(hdr);
    gguf_writer_free(w);
    free(tp);
    free(cp);
    return path;
}

static void check_all_cases(pt_tokenizer *t)
{
    pt_tokenizer *saved = tok;
    tok = t;
    size_t n;
    json_object **cases = tu_read_jsonl("tokenizer/deepseek_v3/cases.jsonl", &n);
    int fails = 0;
    for (size_t i = 0; i < n; i++) {
        check_case(cases[i], i, "ids", "decoded", true, &fails);
        check_case(cases[i], i, "ids_special_as_text", "decoded_special_as_text", false, &fails);
        json_object_put(cases[i]);
    }
    free(cases);
    tok = saved;
    cr_assert_eq(fails, 0);
}

Test(tokenizer_gguf, round_trip_embedded_and_rebuilt)
{
    char *dir = tu_tmpdir("tokgguf");
    for (int embed = 1; embed >= 0; embed--) {
        char *path = write_tok_gguf(dir, embed, NULL);
        pt_err err = {{0}};
        gguf_file *g = gguf_open(path, &err);
        cr_assert(g, "%s", err.msg);
        cr_assert_str_eq(gguf_get_str(g, "tokenizer.ggml.model", &err), "gpt2");
        cr_assert_str_eq(gguf_get_str(g, "tokenizer.ggml.pre", &err), "deepseek-v3");
        const gguf_kv *tk = gguf_get(g, "tokenizer.ggml.tokens"), *tt = gguf_get(g, "tokenizer.ggml.token_type");
        cr_assert(tk && tk->n == 128815 && tt && tt->n == 128815);
        const int32_t *types = tt->arr;
        cr_assert_eq(types[0], 3);      // <｜begin▁of▁sentence｜>: special
        cr_assert_eq(types[128803], 4); // <｜User｜>: non-special added
        cr_assert_eq(types[19923], 1);
        cr_assert_str_eq(((gguf_str *)tk->arr)[19923].s, "Hello");
        const gguf_kv *mg = gguf_get(g, "tokenizer.ggml.merges");
        cr_assert(mg && mg->n == 127741);
        cr_assert_str_eq(((gguf_str *)mg->arr)[0].s, "Ġ t");
        uint32_t bos, eos;
        cr_assert_eq(gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos, &err), 0);
        cr_assert_eq(gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos, &err), 0);
        cr_assert(bos == 0 && eos == 1);
        cr_assert(gguf_get_str(g, "tokenizer.chat_template", &err));
        cr_assert_eq(gguf_get(g, "petrel.tokenizer.json") != NULL, embed);
        pt_tokenizer *t = pt_tokenizer_from_gguf(g, &err);
        cr_assert(t, "%s", err.msg);
        cr_assert_eq(pt_tokenizer_bos(t), 0);
        cr_assert_eq(pt_tokenizer_eos(t), 1);
        cr_assert_str_eq(pt_tokenizer_eos_str(t), "<｜end▁of▁sentence｜>");
        cr_assert(pt_tokenizer_chat_template(t));
        check_all_cases(t);
        pt_tokenizer_free(t);
        gguf_close(g);
        free(path);
    }
    tu_rmrf(dir);
    free(dir);
}

Test(tokenizer_gguf, other_models_are_refused)
{
    char *dir = tu_tmpdir("tokgguf2");
    char *path = write_tok_gguf(dir, false, "llama");
    pt_err err = {{0}};
    gguf_file *g = gguf_open(path, &err);
    cr_assert(g, "%s", err.msg);
    cr_assert_null(pt_tokenizer_from_gguf(g, &err));
    cr_assert(strstr(err.msg, "llama") && strstr(err.msg, "unavailable"), "%s", err.msg);
    gguf_close(g);
    tu_rmrf(dir);
    free(dir);
    free(path);
}

// Split with a literal String pattern and behaviour Removed, on a
// non-byte-level vocabulary (symbols are UTF-8 characters); by hand:
// "ab-a-b" -> "ab" | "a" | "b" -> [ab] [a] [b].
Test(tokenizer, literal_split_removed)
{
    const char *js = "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Removed\","
                     "\"invert\":false},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"é\":3},"
                     "\"merges\":[\"a b\"]}}";
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_from_json(js, strlen(js), "lit.json", &err);
    cr_assert(t, "%s", err.msg);
    int32_t *ids;
    int64_t n = pt_tokenizer_encode(t, "ab-a-bé", strlen("ab-a-bé"), true, false, &ids, &err);
    cr_assert_eq(n, 4);
    cr_assert(ids[0] == 2 && ids[1] == 0 && ids[2] == 1 && ids[3] == 3);
    free(ids);
    pt_tokenizer_free(t);
}

// Two threads encoding the fixture at once (shared BPE cache) get the same
// ids as one thread.
#include <pthread.h>

typedef struct enc_job {
    json_object **cases;
    size_t n;
    int fails;
} enc_job;

static void *enc_thread(void *arg)
{
    enc_job *j = arg;
    for (int rep = 0; rep < 3; rep++)
        for (size_t i = 0; i < j->n; i++) {
            json_object *jt, *ji;
            json_object_object_get_ex(j->cases[i], "text", &jt);
            json_object_object_get_ex(j->cases[i], "ids", &ji);
            int32_t *ids;
            pt_err err = {{0}};
            int64_t n = pt_tokenizer_encode(tok, json_object_get_string(jt), (size_t)json_object_get_string_len(jt),
                                            true, false, &ids, &err);
            if (tu_ids_diff(ids, n, ji) >= 0)
                j->fails++;
            free(ids);
        }
    return NULL;
}

Test(tokenizer, concurrent_encodes, .init = setup, .fini = teardown)
{
    size_t n;
    json_object **cases = tu_read_jsonl("tokenizer/deepseek_v3/cases.jsonl", &n);
    enc_job a = {cases, n, 0}, b = {cases, n, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, enc_thread, &a);
    pthread_create(&tb, NULL, enc_thread, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_assert_eq(a.fails + b.fails, 0);
    for (size_t i = 0; i < n; i++)
        json_object_put(cases[i]);
    free(cases);
}

// Characters added in Unicode 15.0-16.0 (PCRE2 10.42 has Unicode 14): HF's
// Oniguruma classifies them, so Petrel must too (tok_unicode.c); a Unicode
// 17.0 character stays unassigned as in HF. Reference ids from HF
// tokenizers 0.23.2 (Node binding) on the fixture tokenizer.
Test(tokenizer, unicode_15_16_characters, .init = setup, .fini = teardown)
{
    static const struct {
        const char *text;
        int n;
        int32_t ids[8];
    } cases[] = {
        {"a \xF0\xAE\xAF\xB0", 5, {67, 86387, 109, 110, 111}},              // U+2EBF0 CJK Ext I (15.1, Lo)
        {"a \xF0\x91\xBC\x84", 5, {67, 86387, 242, 123, 229}},              // U+11F04 Kawi (15.0, Lo)
        {"a \xF0\xB1\x8D\x90", 5, {67, 86387, 112, 238, 241}},              // U+31350 CJK Ext H (15.0)
        {"a \xE2\xBF\xBC", 4, {67, 1327, 126, 123}},                       // U+2FFC (15.1, So)
        {"a \xF0\x9E\x80\xB0", 5, {67, 86387, 255, 225, 111}},              // U+1E030 (15.0, Lm)
        {"a \xE1\xB2\x89", 4, {67, 8751, 113, 234}},                       // U+1C89 (16.0, Lu)
        {"a \xF0\x90\xA5\x80", 5, {67, 223, 120577, 101, 225}},             // U+10940 Sidetic (17.0): unassigned
        {"hi \xF0\x9F\xAB\xA8\xF0\x9F\xA9\xB7 ok", 8, {6366, 7351, 107, 104, 3574, 105, 118, 9109}}, // new emoji
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *ids;
        pt_err err = {{0}};
        int64_t n = pt_tokenizer_encode(tok, cases[i].text, strlen(cases[i].text), true, false, &ids, &err);
        cr_expect_eq(n, cases[i].n, "case %zu: %lld ids", i, (long long)n);
        for (int k = 0; k < cases[i].n && k < n; k++)
            cr_expect_eq(ids[k], cases[i].ids[k], "case %zu id %d", i, k);
        free(ids);
    }
}
