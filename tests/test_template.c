// tests/test_template.c — chat templates: the DeepSeek-V3 fixture (prompts
// rendered by Jinja2 3.1.6 / @huggingface/jinja, ids by HF tokenizers), and
// Jinja-subset features with outputs worked out by hand from Jinja2's
// documented semantics (trim_blocks + lstrip_blocks as transformers sets).
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/template.h"
#include "tests/testutil.h"
#include "tokenizer/tokenizer.h"

Test(template, fixture_chats)
{
    char *tp = tu_fixture("tokenizer/deepseek_v3/tokenizer.json");
    char *cp = tu_fixture("tokenizer/deepseek_v3/tokenizer_config.json");
    char *jp = tu_fixture("tokenizer/deepseek_v3/chat.jsonl");
    pt_err err = {{0}};
    pt_tokenizer *tok = pt_tokenizer_load(tp, &err);
    cr_assert(tok, "%s", err.msg);
    cr_assert_eq(pt_tokenizer_load_config(tok, cp, &err), 0, "%s", err.msg);
    cr_assert(pt_tokenizer_chat_template(tok));
    cr_assert_str_eq(pt_tokenizer_bos_str(tok), "<｜begin▁of▁sentence｜>");
    cr_assert_eq(pt_tokenizer_bos(tok), 0);
    cr_assert_eq(pt_tokenizer_eos(tok), 1);
    size_t len;
    char *text = tu_read(jp, &len);
    cr_assert(text);
    int n = 0, fails = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        json_object *c = json_tokener_parse(line), *msgs, *agp, *prompt, *ids;
        cr_assert(c);
        json_object_object_get_ex(c, "messages", &msgs);
        json_object_object_get_ex(c, "add_generation_prompt", &agp);
        json_object_object_get_ex(c, "prompt", &prompt);
        json_object_object_get_ex(c, "ids", &ids);
        char *out;
        size_t ol;
        int rc = pt_chat_render(pt_tokenizer_chat_template(tok), msgs, json_object_get_boolean(agp),
                                pt_tokenizer_bos_str(tok), pt_tokenizer_eos_str(tok), NULL, &out, &ol, &err);
        cr_assert_eq(rc, 0, "chat %d: %s", n + 1, err.msg);
        if (ol != (size_t)json_object_get_string_len(prompt) || memcmp(out, json_object_get_string(prompt), ol)) {
            fails++;
            cr_log_error("chat %d: prompt differs:\n got: %s\nwant: %s", n + 1, out, json_object_get_string(prompt));
        }
        int32_t *v;
        int64_t k = pt_tokenizer_encode(tok, out, ol, true, false, &v, &err);
        bool same = k == (int64_t)json_object_array_length(ids);
        for (int64_t i = 0; same && i < k; i++)
            same = v[i] == json_object_get_int(json_object_array_get_idx(ids, (size_t)i));
        if (!same) {
            fails++;
            cr_log_error("chat %d: ids differ", n + 1);
        }
        free(v);
        free(out);
        json_object_put(c);
    }
    cr_assert_eq(n, 14);
    cr_assert_eq(fails, 0);
    free(text);
    free(tp);
    free(cp);
    free(jp);
    pt_tokenizer_free(tok);
}

// Renders src with a JSON context; returns the output (malloc'ed) or NULL
// with err filled.
static char *render(const char *src, const char *ctx_json, pt_err *err)
{
    pt_template *t = pt_template_parse(src, err);
    if (!t)
        return NULL;
    json_object *ctx = ctx_json ? json_tokener_parse(ctx_json) : NULL;
    char *out = NULL;
    int rc = pt_template_render(t, ctx, &out, NULL, err);
    json_object_put(ctx);
    pt_template_free(t);
    return rc ? NULL : out;
}

#define EXPECT(src, ctx, want)                                                  \
    do {                                                                        \
        pt_err e_ = {{0}};                                                      \
        char *o_ = render(src, ctx, &e_);                                       \
        cr_assert(o_, "%s: %s", src, e_.msg);                                   \
        cr_expect_str_eq(o_, want, "template: %s", src);                        \
        free(o_);                                                               \
    } while (0)

Test(template, whitespace_control)
{
    // trim_blocks removes the newline after a block tag; lstrip_blocks the
    // indentation before it
    EXPECT("{% if true %}\nyes\n{% endif %}\nend", NULL, "yes\nend");
    EXPECT("a\n    {% if true %}\n    b\n    {% endif %}\nc", NULL, "a\n    b\nc");
    EXPECT("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    EXPECT("{{ 'x' }}\n{{ 'y' }}", NULL, "x\ny"); // no trim after }}
    EXPECT("a {# c #}\nb", NULL, "a b");
    EXPECT("  {%+ if true %}x{% endif %}", NULL, "  x");
    EXPECT("{% raw %}{{ not evaluated }}{% endraw %}", NULL, "{{ not evaluated }}");
}

Test(template, expressions)
{
    EXPECT("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}", NULL,
           "7 9 3 1 1024 3.5");
    EXPECT("{{ 'a' ~ 1 ~ none }} {{ 'ab' + 'cd' }} {{ 'x' * 3 }}", NULL, "a1None abcd xxx");
    EXPECT("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}", NULL,
           "True True True True");
    EXPECT("{{ 1 if false else 2 }} {{ 'y' if x is defined else 'n' }} [{{ 'z' if false }}]", NULL, "2 n []");
    EXPECT("{{ not 1 == 2 and 3 > 2 or false }}", NULL, "True");
    EXPECT("{{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v'} }}", NULL, "[1, 'a', None, True, 1.5] {'k': 'v'}");
    EXPECT("{{ m.a.b }}{{ m['a']['b'] }}{{ m.missing }}|{{ l[-1] }}{{ l[1:] }}{{ l[::-1] }}{{ 'héllo'[1:3] }}",
           "{\"m\": {\"a\": {\"b\": 5}}, \"l\": [1, 2, 3]}", "55|3[2, 3][3, 2, 1]él");
    EXPECT("{{ '\\u2581x\\x41\\U0001F600' }}", NULL, "\u2581xA\U0001F600");
    EXPECT("{{ 0.1 + 0.2 }} {{ 1e20 * 10.0 }} {{ 100.0 }} {{ -3 }}", NULL, "0.30000000000000004 1e+21 100.0 -3");
}

Test(template, statements)
{
    EXPECT("{% for x in [1, 2, 3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", NULL,
           "11,22,33");
    EXPECT("{% for x in [] %}a{% else %}empty{% endfor %}", NULL, "empty");
    EXPECT("{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}", NULL, "15 35 55 75 95 ");
    EXPECT("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{\"d\": {\"a\": 1, \"b\": [2]}}",
           "a=1;b=[2];");
    EXPECT("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
           "{{ x }}{% endfor %}",
           NULL, "13");
    // assignments in a loop body are cleared after each iteration (Jinja2
    // docs, "Scoping Behavior"); a namespace carries values
    EXPECT("{% set c = 5 %}{% for i in [1,2,3] %}{% set c = c + i %}{{ c }}{% endfor %}", NULL, "678");
    // set inside a loop does not leak; a namespace does
    EXPECT("{% set c = 0 %}{% set ns = namespace(c=0) %}{% for i in [1,2] %}{% set c = c + i %}"
           "{% set ns.c = ns.c + i %}{% endfor %}{{ c }} {{ ns.c }}",
           NULL, "0 3");
    EXPECT("{% if a %}A{% elif b %}B{% else %}C{% endif %}", "{\"a\": 0, \"b\": \"x\"}", "B");
    EXPECT("{% set x %}in {{ 1 + 1 }}{% endset %}[{{ x }}]", NULL, "[in 2]");
    EXPECT("{% macro g(name, p='!') %}hi {{ name }}{{ p }}{% endmacro %}{{ g('a') }} {{ g('b', p='?') }}", NULL,
           "hi a! hi b?");
    EXPECT("{% set a, b = [1, 2] %}{{ b }}{{ a }}", NULL, "21");
}

Test(template, filters_tests_methods)
{
    EXPECT("{{ '  x  ' | trim }}|{{ 'abc' | length }}|{{ [1,2] | length }}|{{ 'Ab' | lower }}{{ 'ab' | upper }}",
           NULL, "x|3|2|abAB");
    EXPECT("{{ 'a-b-c' | replace('-', '+') }} {{ undefinedvar | default('d') }} {{ [1,2,3] | join(', ') }}", NULL,
           "a+b+c d 1, 2, 3");
    EXPECT("{{ [3,1,2] | sort | first }}{{ [3,1,2] | last }}{{ [1,2] | reverse | list }}{{ '5' | int + 1 }}", NULL,
           "12[2, 1]6");
    EXPECT("{{ x | tojson }}", "{\"x\": {\"a\": [1, 2.5, \"é\\n\\\"\"], \"b\": null, \"c\": true}}",
           "{\"a\": [1, 2.5, \"é\\n\\\"\"], \"b\": null, \"c\": true}");
    EXPECT("{{ x | tojson(indent=2) }}", "{\"x\": {\"a\": [1]}}", "{\n  \"a\": [\n    1\n  ]\n}");
    EXPECT("{{ x | tojson(separators=(',', ':')) }}", "{\"x\": {\"a\": [1, 2]}}", "{\"a\":[1,2]}");
    EXPECT("{{ x | tojson(ensure_ascii=True) }}", "{\"x\": \"é😀\"}", "\"\\u00e9\\ud83d\\ude00\"");
    EXPECT("{{ l | selectattr('r', 'equalto', 'u') | map(attribute='c') | join }}",
           "{\"l\": [{\"r\": \"u\", \"c\": \"1\"}, {\"r\": \"a\", \"c\": \"2\"}, {\"r\": \"u\", \"c\": \"3\"}]}", "13");
    EXPECT("{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 3 is divisibleby 3 }}"
           "{{ x is not defined }}",
           NULL, "TrueTrueTrueTrueTrueTrue");
    EXPECT("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ ' a b '.split() }}{{ 'a,b'.split(',') }}"
           "|{{ '\\n x \\n'.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a</think>b'.split('</think>')[-1] }}",
           NULL, "TrueTrue|['a', 'b']['a', 'b']|x|axx|b");
    EXPECT("{{ d.get('a') }}{{ d.get('z', 0) }}{{ d.keys() | list }}{{ d['a'] }}", "{\"d\": {\"a\": 1}}",
           "10['a']1");
    EXPECT("{{ '[Round {}] {q}'.format(2, q='x') }}{{ '{0}{0}{{}}'.format('a') }}|{{ '%s=%d %.2f %%' % ('a', 3, 0.5) }}"
           "|{{ '%s-%s' | format(1, 'b') }}",
           NULL, "[Round 2] xaa{}|a=3 0.50 %|1-b");
    EXPECT("{{ {'a': {'b': 1}} }}{{ {'k': [1]}['k'] }}", NULL, "{'a': {'b': 1}}[1]");
    EXPECT("{{ 'Hello World'.title() }} {{ 'hello'.capitalize() }} {{ 'abcabc'.replace('b', '') }}", NULL,
           "Hello World Hello acac");
}

Test(template, errors_name_the_line)
{
    pt_err err = {{0}};
    cr_assert_null(render("line1\n{% if x %}\nno end", NULL, &err));
    cr_assert(strstr(err.msg, "line 2") && strstr(err.msg, "endif"), "%s", err.msg);
    cr_assert_null(render("a\nb\n{{ 1 + }}", NULL, &err));
    cr_assert(strstr(err.msg, "line 3"), "%s", err.msg);
    cr_assert_null(render("\n\n\n{{ raise_exception('Only user and assistant roles') }}", NULL, &err));
    cr_assert(strstr(err.msg, "line 4") && strstr(err.msg, "Only user and assistant roles"), "%s", err.msg);
    cr_assert_null(render("{{ x | nosuchfilter }}", NULL, &err));
    cr_assert(strstr(err.msg, "nosuchfilter"), "%s", err.msg);
    cr_assert_null(render("{% frobnicate %}", NULL, &err));
    cr_assert(strstr(err.msg, "frobnicate"), "%s", err.msg);
}

// Tool calls through the fixture template, with the extra context (tools)
// path exercised: output assembled by hand from the template text.
Test(template, tools_and_extra_context)
{
    const char *tmpl = "{% for t in tools %}{{ t.function.name }}:{{ t.function.parameters | tojson }};{% endfor %}"
                       "{% for m in messages %}[{{ m.role }}]{{ m.content if m.content is not none else '' }}"
                       "{% for c in m.tool_calls or [] %}<{{ c.function.name }}({{ c.function.arguments }})>"
                       "{% endfor %}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";
    json_object *msgs = json_tokener_parse(
        "[{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
        "[{\"type\": \"function\", \"function\": {\"name\": \"get\", \"arguments\": \"{\\\"c\\\": 1}\"}}]}, "
        "{\"role\": \"tool\", \"content\": \"22\"}]");
    json_object *extra = json_tokener_parse(
        "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get\", \"parameters\": {\"type\": "
        "\"object\"}}}]}");
    char *out;
    pt_err err = {{0}};
    cr_assert_eq(pt_chat_render(tmpl, msgs, true, "<s>", "</s>", extra, &out, NULL, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out, "get:{\"type\": \"object\"};[user]w?[assistant]<get({\"c\": 1})>[tool]22[assistant]");
    free(out);
    json_object_put(msgs);
    json_object_put(extra);
}
