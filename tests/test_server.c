// tests/test_server.c — `petrel serve` over raw HTTP (curl): greedy output
// equals `petrel run --print-ids` token for token (plain and streamed),
// the error statuses and their OpenAI JSON shape (malformed bodies, wrong
// types, unknown model, API key, oversized bodies, unknown endpoints), a
// full queue answering 429 without a crash, a client disconnect cancelling
// its generation, and resuming a conversation after a restart with the
// prefix not recomputed and the output identical to an uninterrupted run.
#include "tests/test_server_util.h"

TestSuite(server, .fini = st_cleanup);

// Greedy ids from `petrel run` for a prompt of ids: the reference.
static int run_ids(const char *model, const char *ids, int n, int *out)
{
    char *o = NULL;
    int rc = tu_sh(&o, "'%s' run -m '%s' -t 2 --ids %s -n %d --print-ids 2>/dev/null", PETREL_BIN, model, ids, n);
    cr_assert_eq(rc, 0, "petrel run failed");
    int k = 0;
    for (char *p = o; *p && k < 4096;) {
        out[k++] = (int)strtol(p, &p, 10);
        while (*p == ',' || *p == '\n')
            p++;
    }
    free(o);
    return k;
}

static int ids_of(json_object *arr, int *out)
{
    int n = (int)json_object_array_length(arr);
    for (int i = 0; i < n; i++)
        out[i] = json_object_get_int(json_object_array_get_idx(arr, (size_t)i));
    return n;
}

Test(server, greedy_equals_petrel_run)
{
    char *model = tu_tiny_model("q8_0");
    st_server s = st_start(model, NULL);
    char *out;
    cr_assert_eq(st_http(&s, "GET", "/health", NULL, NULL, &out), 200);
    free(out);
    cr_assert_eq(st_http(&s, "GET", "/v1/models", NULL, NULL, &out), 200);
    cr_assert(strstr(out, "\"tiny-dsv3-q8_0\""), "%s", out);
    free(out);

    int ref[64], got[64];
    int nref = run_ids(model, "5,17,200,33,8,91,7", 20, ref);
    cr_assert_eq(nref, 20);
    json_object *r = st_post_json(&s, "/v1/completions",
                                  "{\"model\":\"tiny-dsv3-q8_0\",\"prompt\":[5,17,200,33,8,91,7],\"max_tokens\":20,"
                                  "\"temperature\":0,\"return_token_ids\":true}",
                                  200);
    int n = ids_of(st_path(r, "choices", 0, "token_ids"), got);
    cr_assert_eq(n, nref);
    cr_assert_eq(memcmp(got, ref, sizeof(int) * (size_t)n), 0, "server and petrel run differ");
    cr_assert_str_eq(json_object_get_string(st_path(r, "choices", 0, "finish_reason")), "length");
    cr_assert_eq(json_object_get_int(st_path(r, "usage", -1, "completion_tokens")), 20);
    cr_assert_eq(json_object_get_int(st_path(r, "usage", -1, "prompt_tokens")), 7);
    json_object_put(r);

    // The same request streamed: one token per chunk, then [DONE].
    cr_assert_eq(st_http(&s, "POST", "/v1/completions",
                         "{\"prompt\":[5,17,200,33,8,91,7],\"max_tokens\":20,\"temperature\":0,\"stream\":true,"
                         "\"return_token_ids\":true,\"stream_options\":{\"include_usage\":true}}",
                         "-N", &out),
                 200);
    int k = 0;
    bool usage = false, fin = false;
    for (char *p = strstr(out, "data: "); p; p = strstr(p + 1, "data: ")) {
        if (!strncmp(p, "data: [DONE]", 12)) {
            cr_assert(!strstr(p + 1, "data: "), "data after [DONE]");
            break;
        }
        json_object *c = json_tokener_parse(p + 6);
        cr_assert(c, "bad chunk %s", p);
        json_object *ch = st_path(c, "choices", -1, NULL), *t;
        if (json_object_array_length(ch) == 0) {
            usage = json_object_get_int(st_path(c, "usage", -1, "completion_tokens")) == 20;
        } else {
            json_object *c0 = json_object_array_get_idx(ch, 0), *f;
            if (json_object_object_get_ex(c0, "token_ids", &t))
                got[k++] = json_object_get_int(json_object_array_get_idx(t, 0));
            if (json_object_object_get_ex(c0, "finish_reason", &f) && f)
                fin = !strcmp(json_object_get_string(f), "length");
        }
        json_object_put(c);
    }
    cr_assert(strstr(out, "data: [DONE]\n\n"), "no [DONE]: %s", out);
    free(out);
    cr_assert(usage && fin, "usage chunk %d, finish chunk %d", usage, fin);
    cr_assert_eq(k, nref);
    cr_assert_eq(memcmp(got, ref, sizeof(int) * (size_t)k), 0, "streamed ids differ from petrel run");
    st_stop(&s);
    free(model);
}

// Asserts status and the OpenAI error shape.
static void expect_error(const st_server *s, const char *path, const char *body, const char *extra, int want,
                         const char *param)
{
    char *out;
    int st = st_http(s, "POST", path, body, extra, &out);
    cr_assert_eq(st, want, "%s -> %d, expected %d: %s", body ? body : "(no body)", st, want, out);
    json_object *o = json_tokener_parse(out);
    cr_assert(o, "error body is not JSON: %s", out);
    json_object *e = st_path(o, "error", -1, NULL), *m, *t;
    cr_assert(json_object_object_get_ex(e, "message", &m) && json_object_is_type(m, json_type_string), "%s", out);
    cr_assert(json_object_object_get_ex(e, "type", &t) && json_object_is_type(t, json_type_string), "%s", out);
    if (param)
        cr_assert_str_eq(json_object_get_string(st_path(o, "error", -1, "param")), param, "%s", out);
    json_object_put(o);
    free(out);
}

Test(server, errors_have_openai_shape)
{
    char *model = tu_tiny_model("q8_0");
    st_server s = st_start(model, "--api-key sekret --max-body 4096");
    const char *auth = "-H 'Authorization: Bearer sekret'";
    const char *ok = "{\"prompt\":[1,2,3],\"max_tokens\":2,\"temperature\":0}";
    expect_error(&s, "/v1/completions", ok, NULL, 401, NULL);
    expect_error(&s, "/v1/completions", ok, "-H 'Authorization: Bearer wrong'", 401, NULL);
    expect_error(&s, "/v1/completions", ok, "-H 'Authorization: sekret'", 401, NULL);
    char *out;
    cr_assert_eq(st_http(&s, "POST", "/v1/completions", ok, auth, &out), 200, "%s", out);
    free(out);
    cr_assert_eq(st_http(&s, "GET", "/health", NULL, NULL, &out), 200, "health needs no key");
    free(out);
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,2,", auth, 400, NULL);
    expect_error(&s, "/v1/completions", "not json at all", auth, 400, NULL);
    expect_error(&s, "/v1/completions", "", auth, 400, NULL);
    expect_error(&s, "/v1/completions", "[1,2,3]", auth, 400, NULL);
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,2,3]} trailing", auth, 400, NULL);
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,2,3],\"temperature\":\"hot\"}", auth, 400, "temperature");
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":\"5\"}", auth, 400, "max_tokens");
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":-1}", auth, 400, "max_tokens");
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,2,3],\"stream\":1}", auth, 400, "stream");
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,2,3],\"stop\":[1]}", auth, 400, "stop");
    expect_error(&s, "/v1/completions", "{\"prompt\":[1,99999]}", auth, 400, "prompt");
    expect_error(&s, "/v1/completions", "{\"prompt\":{}}", auth, 400, "prompt");
    expect_error(&s, "/v1/completions", "{\"prompt\":[]}", auth, 400, "prompt");
    expect_error(&s, "/v1/completions", "{\"max_tokens\":3}", auth, 400, "prompt");
    expect_error(&s, "/v1/completions", "{\"prompt\":[1],\"model\":7}", auth, 400, "model");
    expect_error(&s, "/v1/completions", "{\"prompt\":[1],\"model\":\"gpt-4o\"}", auth, 404, "model");
    expect_error(&s, "/v1/chat/completions", "{\"messages\":\"hi\"}", auth, 400, "messages");
    expect_error(&s, "/v1/chat/completions", "{\"messages\":[{\"content\":\"hi\"}]}", auth, 400, "messages");
    // No tokenizer in tiny-dsv3: chat is refused cleanly.
    expect_error(&s, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", auth, 400,
                 NULL);
    expect_error(&s, "/v1/nothing", "{}", auth, 404, NULL);
    // Longer than the context (256 positions for tiny-dsv3).
    char longp[2048];
    int lp = snprintf(longp, sizeof longp, "{\"prompt\":[1");
    for (int i = 0; i < 300; i++)
        lp += snprintf(longp + lp, sizeof longp - (size_t)lp, ",2");
    snprintf(longp + lp, sizeof longp - (size_t)lp, "]}");
    expect_error(&s, "/v1/completions", longp, auth, 400, "prompt");
    // Over the 4 KiB body limit: declared length, and chunked without one.
    char *big = malloc(20000);
    memset(big, ' ', 19999);
    memcpy(big, "{\"prompt\":[1]", 13);
    big[19998] = '}';
    big[19999] = 0;
    expect_error(&s, "/v1/completions", big, auth, 413, NULL);
    char extra[256];
    snprintf(extra, sizeof extra, "%s -H 'Transfer-Encoding: chunked'", auth);
    expect_error(&s, "/v1/completions", big, extra, 413, NULL);
    free(big);
    // Still serving afterwards.
    cr_assert_eq(st_http(&s, "POST", "/v1/completions", ok, auth, &out), 200, "%s", out);
    free(out);
    cr_assert_eq(st_http(&s, "GET", "/metrics", NULL, auth, &out), 200);
    cr_assert(st_metric(out, "petrel_tokens_generated_total") == 4, "%s", out);
    cr_assert(st_metric(out, "petrel_queue_length") == 0, "%s", out);
    cr_assert(st_metric(out, "petrel_resident_memory_bytes") > 0, "%s", out);
    free(out);
    st_stop(&s);
    free(model);
}

Test(server, full_queue_429_and_disconnect_cancels)
{
    char *model = tu_tiny_model("q8_0");
    st_server s = st_start(model, "--max-queue 1 --parallel 1 -c 8192");
    // A long streaming generation (8000 tokens: several seconds even on an
    // idle machine) whose client leaves after 2.5 s holds the
    // engine while 8 short requests arrive: one waits in the queue, the
    // others are refused with 429 at once. The leaving client cancels its
    // generation, then the queued request completes.
    char *out = NULL;
    int rc = tu_sh(&out,
                   "curl -s -N -o /dev/null --max-time 2.5 -d '{\"prompt\":[1,2,3],\"max_tokens\":8000,\"ignore_eos\":true,"
                   "\"stream\":true}' http://127.0.0.1:%d/v1/completions & sleep 0.5; "
                   "for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null -w '%%{http_code}\\n' --max-time 60 "
                   "-d '{\"prompt\":[1,2,3],\"max_tokens\":2,\"temperature\":0}' "
                   "http://127.0.0.1:%d/v1/completions & done; wait",
                   s.port, s.port);
    cr_assert_eq(rc, 0);
    int n200 = 0, n429 = 0, other = 0;
    for (char *p = out; *p;) {
        int c = (int)strtol(p, &p, 10);
        n200 += c == 200;
        n429 += c == 429;
        other += c != 200 && c != 429;
        while (*p == '\n')
            p++;
    }
    free(out);
    cr_assert(n200 >= 1 && n429 >= 1 && other == 0 && n200 + n429 == 8, "200: %d, 429: %d, other: %d", n200, n429,
              other);
    double cancelled = 0, gen = 0;
    for (int i = 0; i < 100 && cancelled < 1; i++) { // 10 s at most
        st_http(&s, "GET", "/metrics", NULL, NULL, &out);
        cancelled = st_metric(out, "petrel_requests_total{outcome=\"cancelled\"}");
        gen = st_metric(out, "petrel_tokens_generated_total");
        free(out);
        usleep(100000);
    }
    cr_assert(cancelled >= 1, "the disconnected request was not cancelled");
    cr_assert(gen < 8000, "the cancelled request generated all its tokens (%g)", gen);
    cr_assert_eq(st_http(&s, "GET", "/health", NULL, NULL, &out), 200);
    free(out);
    json_object *r = st_post_json(&s, "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":2}", 200);
    json_object_put(r);
    st_stop(&s);
    free(model);
}

Test(server, resume_after_restart)
{
    char *model = tu_tiny_model("q8_0");
    char *kv = tu_tmpdir("kvdir"), extra[1200];
    snprintf(extra, sizeof extra, "--kv-dir '%s'", kv);
    const char *p1 = "9,41,7,300,12,5,66,2,19,88,4,120,7,7,31";
    const int n1 = 15, g1 = 10;

    // Turn 1, then stop the server.
    st_server s = st_start(model, extra);
    char body[4096];
    snprintf(body, sizeof body, "{\"prompt\":[%s],\"max_tokens\":%d,\"temperature\":0,\"return_token_ids\":true}", p1,
             g1);
    json_object *r = st_post_json(&s, "/v1/completions", body, 200);
    int gen1[64];
    cr_assert_eq(ids_of(st_path(r, "choices", 0, "token_ids"), gen1), g1);
    json_object_put(r);
    st_stop(&s);

    // Turn 2 after a restart: the conversation so far plus new tokens.
    char p2[2048];
    int len = snprintf(p2, sizeof p2, "%s", p1);
    for (int i = 0; i < g1; i++)
        len += snprintf(p2 + len, sizeof p2 - (size_t)len, ",%d", gen1[i]);
    len += snprintf(p2 + len, sizeof p2 - (size_t)len, ",44,45,46,47");
    const int n2 = n1 + g1 + 4;
    s = st_start(model, extra);
    snprintf(body, sizeof body, "{\"prompt\":[%s],\"max_tokens\":12,\"temperature\":0,\"return_token_ids\":true}", p2);
    r = st_post_json(&s, "/v1/completions", body, 200);
    int got[64], ref[64];
    int n = ids_of(st_path(r, "choices", 0, "token_ids"), got);
    // The kept state holds the prompt and every generated token but the
    // last (never decoded); only the rest is computed.
    const int cached = n1 + g1 - 1;
    json_object *u = st_path(r, "usage", -1, "prompt_tokens_details"), *ct;
    cr_assert(json_object_object_get_ex(u, "cached_tokens", &ct));
    cr_assert_eq(json_object_get_int(ct), cached);
    cr_assert_eq(json_object_get_int(st_path(r, "timings", -1, "prefill_tokens")), n2 - cached);
    json_object_put(r);
    char *out;
    cr_assert_eq(st_http(&s, "GET", "/metrics", NULL, NULL, &out), 200);
    cr_assert(st_metric(out, "petrel_prefill_tokens_total") == n2 - cached, "%s", out);
    cr_assert(st_metric(out, "petrel_prompt_tokens_cached_total") == cached, "%s", out);
    free(out);
    st_stop(&s);

    // Identical to never having stopped: one uninterrupted greedy run over
    // the whole conversation.
    int nref = run_ids(model, p2, 12, ref);
    cr_assert_eq(n, nref);
    cr_assert_eq(memcmp(got, ref, sizeof(int) * (size_t)n), 0, "resumed output differs from an uninterrupted run");
    tu_rmrf(kv);
    free(kv);
    free(model);
}

// Two interleaved conversations: the follow-up of the first is served from
// its state kept in RAM (the live context holds the second by then).
Test(server, interleaved_conversations_reuse_kept_state)
{
    char *model = tu_tiny_model("q8_0");
    st_server s = st_start(model, NULL);
    json_object *a = st_post_json(&s, "/v1/completions",
                                  "{\"prompt\":[3,1,4,1,5,9,2,6],\"max_tokens\":5,\"temperature\":0,"
                                  "\"return_token_ids\":true}",
                                  200);
    int ga[8];
    cr_assert_eq(ids_of(st_path(a, "choices", 0, "token_ids"), ga), 5);
    json_object_put(a);
    json_object *b = st_post_json(&s, "/v1/completions", "{\"prompt\":[77,78,79,80],\"max_tokens\":5,\"temperature\":0}",
                                  200);
    cr_assert_eq(json_object_get_int(st_path(b, "timings", -1, "cached_tokens")), 0);
    json_object_put(b);
    char body[512];
    snprintf(body, sizeof body,
             "{\"prompt\":[3,1,4,1,5,9,2,6,%d,%d,%d,%d,%d,11,12],\"max_tokens\":4,\"temperature\":0,"
             "\"return_token_ids\":true}",
             ga[0], ga[1], ga[2], ga[3], ga[4]);
    json_object *c = st_post_json(&s, "/v1/completions", body, 200);
    cr_assert_eq(json_object_get_int(st_path(c, "timings", -1, "cached_tokens")), 8 + 5 - 1);
    cr_assert_eq(json_object_get_int(st_path(c, "timings", -1, "prefill_tokens")), 15 - 12);
    int got[8], ref[8];
    int n = ids_of(st_path(c, "choices", 0, "token_ids"), got);
    json_object_put(c);
    char ids[256];
    snprintf(ids, sizeof ids, "3,1,4,1,5,9,2,6,%d,%d,%d,%d,%d,11,12", ga[0], ga[1], ga[2], ga[3], ga[4]);
    cr_assert_eq(run_ids(model, ids, 4, ref), n);
    cr_assert_eq(memcmp(got, ref, sizeof(int) * (size_t)n), 0, "output after a restored state differs");
    st_stop(&s);
    free(model);
}
