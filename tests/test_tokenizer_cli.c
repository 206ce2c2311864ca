// tests/test_tokenizer_cli.c — `petrel tokenize` / `petrel detokenize`
// against the DeepSeek-V3 fixture (reference ids from HF tokenizers).
#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#define FIX PETREL_SOURCE_DIR "/tests/fixtures/tokenizer/deepseek_v3"

Test(tokenizer_cli, tokenize_text_and_special_switch)
{
    char *out;
    cr_assert_eq(tu_sh(&out, "%s tokenize --tokenizer %s/tokenizer.json 'Hello, world!'", PETREL_BIN, FIX), 0);
    cr_assert_str_eq(out, "19923,14,2058,3\n");
    free(out);
    // the EOS text is one special token, or plain text with --no-special
    cr_assert_eq(tu_sh(&out, "%s tokenize --tokenizer %s/tokenizer.json 'a<｜end▁of▁sentence｜>'", PETREL_BIN, FIX),
                 0);
    cr_assert(strstr(out, ",1\n") && strchr(out, ',') == strrchr(out, ','), "%s", out);
    free(out);
    cr_assert_eq(
        tu_sh(&out, "%s tokenize --no-special --tokenizer %s/tokenizer.json 'a<｜end▁of▁sentence｜>'", PETREL_BIN, FIX),
        0);
    cr_assert(!strstr(out, ",1\n"), "%s", out);
    free(out);
    // stdin, raw bytes (including invalid UTF-8) and the empty string
    cr_assert_eq(tu_sh(&out, "printf 'Hello' | %s tokenize --tokenizer %s/tokenizer.json -", PETREL_BIN, FIX), 0);
    cr_assert_str_eq(out, "19923\n");
    free(out);
    cr_assert_eq(tu_sh(&out, "printf '\\377' | %s tokenize --tokenizer %s/tokenizer.json -", PETREL_BIN, FIX), 0);
    cr_assert(out[0] >= '0' && out[0] <= '9', "%s", out);
    free(out);
    cr_assert_eq(tu_sh(&out, "%s tokenize --tokenizer %s/tokenizer.json ''", PETREL_BIN, FIX), 0);
    cr_assert_str_eq(out, "\n");
    free(out);
}

// --jsonl over the whole fixture: one array per line equal to "ids".
Test(tokenizer_cli, jsonl_matches_fixture)
{
    char *out;
    cr_assert_eq(tu_sh(&out, "%s tokenize --tokenizer %s/tokenizer.json --jsonl %s/cases.jsonl", PETREL_BIN, FIX, FIX),
                 0);
    size_t len;
    char *want = tu_read(FIX "/cases.jsonl", &len);
    char *s1 = NULL, *s2 = NULL;
    char *a = strtok_r(out, "\n", &s1), *b = strtok_r(want, "\n", &s2);
    int n = 0;
    for (; a && b; a = strtok_r(NULL, "\n", &s1), b = strtok_r(NULL, "\n", &s2), n++) {
        json_object *got = json_tokener_parse(a), *c = json_tokener_parse(b), *ids;
        cr_assert(got && c);
        json_object_object_get_ex(c, "ids", &ids);
        cr_assert(json_object_equal(got, ids), "line %d: %s", n + 1, a);
        json_object_put(got);
        json_object_put(c);
    }
    cr_assert_eq(n, 373);
    cr_assert(!a && !b);
    free(out);
    free(want);
}

Test(tokenizer_cli, detokenize)
{
    char *out;
    cr_assert_eq(tu_sh(&out, "%s detokenize --tokenizer %s/tokenizer.json 19923,14,2058,3", PETREL_BIN, FIX), 0);
    cr_assert_str_eq(out, "Hello, world!");
    free(out);
    cr_assert_eq(tu_sh(&out, "%s detokenize --skip-special --tokenizer %s/tokenizer.json '[0, 19923, 1]'", PETREL_BIN,
                       FIX),
                 0);
    cr_assert_str_eq(out, "Hello");
    free(out);
    cr_assert_neq(tu_sh(&out, "%s detokenize --tokenizer %s/tokenizer.json 999999999 2>&1", PETREL_BIN, FIX), 0);
    cr_assert(strstr(out, "out of range"), "%s", out);
    free(out);
    cr_assert_neq(tu_sh(&out, "%s tokenize --tokenizer /nonexistent.json x 2>&1", PETREL_BIN), 0);
    cr_assert(strstr(out, "/nonexistent.json"), "%s", out);
    free(out);
}

// -m MODEL.gguf: a synthetic checkpoint converted to GGUF carries its
// tokenizer (petrel.tokenizer.json); ids equal those from its tokenizer.json.
Test(tokenizer_cli, from_converted_model)
{
    char *dir = tu_tmpdir("tokcli");
    cr_assert(dir);
    char *out = NULL;
    int rc = tu_sh(&out, "%s synth --preset tiny -o %s/hf --quiet 2>&1 && %s convert %s/hf -o %s/m.gguf 2>&1", PETREL_BIN,
                   dir, PETREL_BIN, dir, dir);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
    const char *text = "Hello world, 你好 — 123 <｜end▁of▁sentence｜>";
    char *a, *b, *d;
    cr_assert_eq(tu_sh(&a, "%s tokenize -m %s/m.gguf '%s'", PETREL_BIN, dir, text), 0);
    cr_assert_eq(tu_sh(&b, "%s tokenize --tokenizer %s/hf/tokenizer.json '%s'", PETREL_BIN, dir, text), 0);
    cr_assert_str_eq(a, b);
    a[strcspn(a, "\n")] = 0;
    cr_assert_eq(tu_sh(&d, "%s detokenize -m %s/m.gguf %s", PETREL_BIN, dir, a), 0);
    cr_assert_str_eq(d, text);
    free(a);
    free(b);
    free(d);
    tu_rmrf(dir);
    free(dir);
}
