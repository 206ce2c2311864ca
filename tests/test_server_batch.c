// tests/test_server_batch.c — continuous batching in `petrel serve`: several
// concurrent clients (plain, streamed, n > 1 sharing the prompt's KV, a long
// prompt prefilled in chunks while others decode, a sampled request) each get
// exactly the tokens `petrel run` gives the same request alone; a streaming
// client that disconnects mid-stream is cancelled without disturbing the
// others; chat requests with stop strings give the same text concurrently as
// alone; /metrics shows batches of more than one sequence, shared expert
// reads and interleaved prefill chunks.
#include "tests/test_server_util.h"

TestSuite(server_batch, .fini = st_cleanup);

// Ids `petrel run` prints for a prompt of ids (greedy, or sampled with
// temp/seed), on one thread (the server uses two: threads change no bit).
static int run_ids(const char *model, const char *ids, int n, const char *sampling, int *out, int max)
{
    char *o = NULL;
    int rc = tu_sh(&o, "'%s' run -m '%s' -t 1 --ids %s -n %d --ignore-eos %s --print-ids 2>/dev/null",
                   PETREL_BIN, model, ids, n, sampling ? sampling : "");
    cr_assert_eq(rc, 0, "petrel run failed");
    int k = 0;
    for (char *p = o; *p && k < max;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p)
            break;
        out[k++] = (int)v;
        p = e;
        while (*p == ',' || *p == '\n')
            p++;
    }
    free(o);
    return k;
}

static int json_ids(json_object *arr, int *out, int max)
{
    int n = (int)json_object_array_length(arr);
    cr_assert(n <= max);
    for (int i = 0; i < n; i++)
        out[i] = json_object_get_int(json_object_array_get_idx(arr, (size_t)i));
    return n;
}

// Token ids of an SSE stream per choice index (return_token_ids: one per
// chunk); *done tells whether [DONE] came, fin[i] the finish reasons seen.
static void sse_ids(const char *text, int n_choice, int ids[][256], int *count, int *fin, bool *done)
{
    *done = false;
    for (int i = 0; i < n_choice; i++)
        count[i] = fin[i] = 0;
    for (const char *p = strstr(text, "data: "); p; p = strstr(p + 1, "data: ")) {
        if (!strncmp(p, "data: [DONE]", 12)) {
            *done = true;
            break;
        }
        json_object *c = json_tokener_parse(p + 6);
        if (!c) // a chunk cut by the disconnect
            break;
        json_object *ch = st_path(c, "choices", -1, NULL);
        for (size_t k = 0; k < json_object_array_length(ch); k++) {
            json_object *c0 = json_object_array_get_idx(ch, k), *ix, *t, *f;
            cr_assert(json_object_object_get_ex(c0, "index", &ix));
            int i = json_object_get_int(ix);
            cr_assert(i >= 0 && i < n_choice, "choice index %d", i);
            if (json_object_object_get_ex(c0, "token_ids", &t) && count[i] < 256)
                ids[i][count[i]++] = json_object_get_int(json_object_array_get_idx(t, 0));
            if (json_object_object_get_ex(c0, "finish_reason", &f) && f)
                fin[i]++;
        }
        json_object_put(c);
    }
}

static char *file_in(const st_server *s, const char *name)
{
    char *p = malloc(1200);
    snprintf(p, 1200, "%s/%s", s->dir, name);
    return p;
}

static json_object *parse_file(const st_server *s, const char *name)
{
    char *p = file_in(s, name);
    char *t = tu_read(p, NULL);
    cr_assert(t, "no %s", p);
    json_object *o = json_tokener_parse(t);
    cr_assert(o, "%s is not JSON: %s", name, t);
    free(t);
    free(p);
    return o;
}

static void assert_ids_eq(const int *got, int ng, const int *ref, int nr, const char *what)
{
    cr_assert_eq(ng, nr, "%s: %d tokens, petrel run %d", what, ng, nr);
    for (int i = 0; i < ng; i++)
        cr_assert_eq(got[i], ref[i], "%s: token %d is %d, petrel run %d", what, i, got[i], ref[i]);
}

Test(server_batch, concurrent_clients_equal_alone)
{
    char *model = tu_tiny_model("q8_0");
    st_server s = st_start(model, "--parallel 4 --prefill-chunk 16 -c 2048");
    char *longf = file_in(&s, "long.sse");

    // A long streaming generation decodes from the start to the end of the
    // burst below (it is one row of every step), then its client leaves.
    char *pid = NULL;
    cr_assert_eq(tu_sh(&pid,
                       "curl -s -N -o '%s' -d '{\"prompt\":[1,2,3],\"max_tokens\":2000,\"ignore_eos\":true,"
                       "\"temperature\":0,\"stream\":true,\"return_token_ids\":true}' "
                       "http://127.0.0.1:%d/v1/completions </dev/null >/dev/null 2>&1 & echo $!",
                       longf, s.port),
                 0);
    int curl_pid = atoi(pid);
    free(pid);
    cr_assert(curl_pid > 0);
    for (int i = 0; i < 200; i++) { // 20 s at most: wait until it streams
        char *t = tu_read(longf, NULL);
        int k = 0;
        for (char *p = t ? strstr(t, "data: ") : NULL; p; p = strstr(p + 1, "data: "))
            k++;
        free(t);
        if (k >= 3)
            break;
        usleep(100000);
    }

    // The burst: a short prompt; a 150-token prompt (10 chunks of 16 while
    // the others decode); a streamed request; n = 3 streamed (waits for
    // three free slots); n = 2 sampled.
    char longp[2048];
    int lp = 0;
    for (int i = 0; i < 150; i++)
        lp += snprintf(longp + lp, sizeof longp - (size_t)lp, "%s%d", i ? "," : "", (i * 37) % 500 + 1);
    const char *p1 = "5,17,200,33,8,91,7", *p3 = "44,3,9,120", *p4 = "300,301,2,77,6";
    char *cmd = malloc(16384);
    snprintf(cmd, 16384,
             "cd '%s' || exit 1; u=http://127.0.0.1:%d/v1/completions; "
             "curl -s -o r1.json -d '{\"prompt\":[%s],\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true,"
             "\"return_token_ids\":true}' $u & "
             "curl -s -o r2.json -d '{\"prompt\":[%s],\"max_tokens\":16,\"temperature\":0,\"ignore_eos\":true,"
             "\"return_token_ids\":true}' $u & "
             "curl -s -N -o r3.sse -d '{\"prompt\":[%s],\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true,"
             "\"stream\":true,\"return_token_ids\":true,\"stream_options\":{\"include_usage\":true}}' $u & "
             "curl -s -N -o r4.sse -d '{\"prompt\":[%s],\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true,"
             "\"n\":3,\"stream\":true,\"return_token_ids\":true}' $u & "
             "curl -s -o r5.json -d '{\"prompt\":[%s],\"max_tokens\":12,\"temperature\":0.9,\"seed\":11,"
             "\"ignore_eos\":true,\"n\":2,\"return_token_ids\":true}' $u & "
             "wait",
             s.dir, s.port, p1, longp, p3, p4, p1);
    cr_assert_eq(tu_sh(NULL, "%s", cmd), 0);
    free(cmd);
    // The long stream's client leaves mid-stream.
    kill(curl_pid, SIGKILL);
    char *out = NULL;
    double cancelled = 0;
    for (int i = 0; i < 100 && cancelled < 1; i++) { // 10 s at most
        st_http(&s, "GET", "/metrics", NULL, NULL, &out);
        cancelled = st_metric(out, "petrel_requests_total{outcome=\"cancelled\"}");
        if (cancelled < 1)
            free(out);
        usleep(100000);
    }
    cr_assert(cancelled >= 1, "the disconnected stream was not cancelled");
    cr_assert_eq(st_metric(out, "petrel_requests_total{outcome=\"ok\"}"), 5, "%s", out);
    cr_assert(st_metric(out, "petrel_tokens_generated_total") < 24 + 16 + 24 + 36 + 24 + 2000, "%s", out);
    // Steps of more than one sequence happened, and shared expert visits.
    const double steps = st_metric(out, "petrel_batch_size_count");
    cr_assert(steps > 0 && st_metric(out, "petrel_batch_size_bucket{le=\"1\"}") < steps, "%s", out);
    cr_assert(st_metric(out, "petrel_batch_size_mean") > 1, "%s", out);
    cr_assert(st_metric(out, "petrel_batch_shared_bytes_total") > 0, "%s", out);
    cr_assert(st_metric(out, "petrel_batch_expert_visits_total") < st_metric(out, "petrel_batch_expert_uses_total"),
              "%s", out);
    // The long prompt was prefilled in chunks between decode steps.
    cr_assert(st_metric(out, "petrel_prefill_chunks_interleaved_total") >= 9, "%s", out);
    // Prefill figures: the chunk size in force and experts visited per chunk.
    cr_assert(st_metric(out, "petrel_prefill_batch_tokens") >= 1, "%s", out);
    cr_assert(st_metric(out, "petrel_prefill_experts_per_chunk") > 0, "%s", out);
    cr_assert_eq(st_metric(out, "petrel_queue_length"), 0, "%s", out);
    free(out);

    int ref[256], got[3][256], cnt[3], fin[3];
    bool done;
    // r1, r2: plain.
    json_object *r = parse_file(&s, "r1.json");
    int n = json_ids(st_path(r, "choices", 0, "token_ids"), got[0], 256);
    assert_ids_eq(got[0], n, ref, run_ids(model, p1, 24, NULL, ref, 256), "r1");
    json_object_put(r);
    r = parse_file(&s, "r2.json");
    n = json_ids(st_path(r, "choices", 0, "token_ids"), got[0], 256);
    assert_ids_eq(got[0], n, ref, run_ids(model, longp, 16, NULL, ref, 256), "r2 (chunked prefill)");
    cr_assert_eq(json_object_get_int(st_path(r, "usage", -1, "prompt_tokens")), 150);
    json_object_put(r);
    // r3: streamed, with the usage chunk and [DONE].
    char *f = file_in(&s, "r3.sse"), *t = tu_read(f, NULL);
    cr_assert(t);
    sse_ids(t, 1, got, cnt, fin, &done);
    cr_assert(done && fin[0] == 1 && strstr(t, "\"completion_tokens\":24"), "%s", t);
    assert_ids_eq(got[0], cnt[0], ref, run_ids(model, p3, 24, NULL, ref, 256), "r3 (streamed)");
    free(t);
    free(f);
    // r4: n = 3 streamed greedy: three copies of the one greedy answer.
    f = file_in(&s, "r4.sse");
    t = tu_read(f, NULL);
    cr_assert(t);
    sse_ids(t, 3, got, cnt, fin, &done);
    cr_assert(done, "%s", t);
    int nr = run_ids(model, p4, 12, NULL, ref, 256);
    for (int c = 0; c < 3; c++) {
        cr_assert_eq(fin[c], 1, "choice %d: %d finish chunks", c, fin[c]);
        assert_ids_eq(got[c], cnt[c], ref, nr, "r4 (n = 3)");
    }
    free(t);
    free(f);
    // r5: n = 2 sampled: choice i is the sample with seed 11 + i.
    r = parse_file(&s, "r5.json");
    cr_assert_eq(json_object_array_length(st_path(r, "choices", -1, NULL)), 2);
    cr_assert_eq(json_object_get_int(st_path(r, "usage", -1, "completion_tokens")), 24);
    for (int c = 0; c < 2; c++) {
        n = json_ids(st_path(r, "choices", c, "token_ids"), got[c], 256);
        char samp[64];
        snprintf(samp, sizeof samp, "--temp 0.9 --seed %d", 11 + c);
        assert_ids_eq(got[c], n, ref, run_ids(model, p1, 12, samp, ref, 256), samp);
    }
    json_object_put(r);
    // The cancelled stream: what it got before leaving is the greedy answer's start.
    t = tu_read(longf, NULL);
    cr_assert(t);
    sse_ids(t, 1, got, cnt, fin, &done);
    cr_assert(!done && cnt[0] >= 3, "%d tokens, [DONE] %d", cnt[0], done);
    const int upto = cnt[0] < 200 ? cnt[0] : 200; // (the reference runs in 256 positions)
    nr = run_ids(model, "1,2,3", upto, NULL, ref, 256);
    assert_ids_eq(got[0], upto, ref, nr, "cancelled stream");
    free(t);
    free(longf);

    // More choices than slots is refused up front.
    char *e = NULL;
    cr_assert_eq(st_http(&s, "POST", "/v1/completions", "{\"prompt\":[1,2],\"n\":5}", NULL, &e), 400, "%s", e);
    cr_assert(strstr(e, "\"param\":\"n\""), "%s", e);
    free(e);
    st_stop(&s);
    free(model);
}

// Chat on the synthetic model (tokenizer + template): the same requests
// concurrently give the text they give alone; a stop string cuts one.
Test(server_batch, concurrent_chat_with_stop_strings)
{
    char *model = st_synth_tiny();
    st_server s = st_start(model, "--parallel 3");
    static const char *const users[3] = {"Tell me about the sea.", "What is two plus two?", "Name a colour."};
    char *alone[3];
    for (int i = 0; i < 3; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":24,\"temperature\":0}",
                 users[i]);
        json_object *r = st_post_json(&s, "/v1/chat/completions", body, 200);
        alone[i] = strdup(json_object_get_string(st_path(st_path(r, "choices", 0, "message"), "content", -1, NULL)));
        json_object_put(r);
    }
    // A stop string from the middle of the first answer: 3 printable ASCII
    // bytes that need no escaping in JSON or the shell.
    size_t l0 = strlen(alone[0]), at = l0;
    for (size_t i = l0 / 2; i + 3 <= l0 && at == l0; i++) {
        bool ok = true;
        for (size_t k = i; k < i + 3; k++)
            ok &= alone[0][k] >= 0x20 && alone[0][k] < 0x7f && !strchr("\"\\'", alone[0][k]);
        if (ok)
            at = i;
    }
    cr_assert(at < l0, "no plain 3 bytes in the second half of '%s' to stop at", alone[0]);
    char stop[8] = {0};
    memcpy(stop, alone[0] + at, 3);
    char *cmd = malloc(8192);
    int k = snprintf(cmd, 8192, "cd '%s' || exit 1; u=http://127.0.0.1:%d/v1/chat/completions; ", s.dir, s.port);
    for (int i = 0; i < 3; i++)
        k += snprintf(cmd + k, 8192 - (size_t)k,
                      "curl -s -o c%d.json -d '{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                      "\"max_tokens\":24,\"temperature\":0%s%s%s}' $u & ",
                      i, users[i], i == 0 ? ",\"stop\":\"" : "", i == 0 ? stop : "", i == 0 ? "\"" : "");
    snprintf(cmd + k, 8192 - (size_t)k, "wait");
    cr_assert_eq(tu_sh(NULL, "%s", cmd), 0);
    free(cmd);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d.json", i);
        json_object *r = parse_file(&s, name);
        const char *txt = json_object_get_string(st_path(st_path(r, "choices", 0, "message"), "content", -1, NULL));
        const char *fin = json_object_get_string(st_path(r, "choices", 0, "finish_reason"));
        if (i == 0) {
            size_t cut = (size_t)(strstr(alone[0], stop) - alone[0]);
            cr_assert(strlen(txt) == cut && !strncmp(txt, alone[0], cut), "'%s' is not '%s' cut at '%s'", txt,
                      alone[0], stop);
            cr_assert_str_eq(fin, "stop");
        } else {
            cr_assert_str_eq(txt, alone[i], "concurrent '%s' differs from alone '%s'", txt, alone[i]);
        }
        json_object_put(r);
        free(alone[i]);
    }
    st_stop(&s);
    free(model);
}
