// fuzz/fuzz_server_body.c — the server's request bodies (server/api.c
// srv_parse_request) on arbitrary bytes, as http.c hands them over: the
// first byte picks /v1/chat/completions or /v1/completions, the rest is the
// body. The engine is opened once on $PETREL_FUZZ_MODEL, or on the tiny
// IQ1_S fixture (which has no tokenizer, so chat bodies stop at rendering
// while token-id prompts and every sampling parameter are parsed).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "server/api.h"

static srv_engine *g_e;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_e) {
        const char *m = getenv("PETREL_FUZZ_MODEL");
        if (!m || !*m)
            m = fz_src("tests/fixtures/llamacpp/models/tiny-dsv3-IQ1_S.gguf");
        petrel_model_params mp = petrel_model_default_params();
        petrel_context_params cp = petrel_context_default_params();
        cp.n_ctx = 256;
        char err[1024];
        g_e = srv_engine_open(m, &mp, &cp, NULL, 0, err, sizeof err);
        if (!g_e) {
            fprintf(stderr, "fuzz_server_body: %s\n", err);
            abort();
        }
    }
    if (size < 1)
        return 0;
    const int kind = (data[0] & 1) ? SRV_COMPLETION : SRV_CHAT;
    // http.c keeps the body NUL-terminated; so does this copy.
    char *body = malloc(size);
    memcpy(body, data + 1, size - 1);
    body[size - 1] = 0;
    srv_job *j = srv_job_new();
    char msg[512];
    const char *param = NULL;
    int st = srv_parse_request(g_e, kind, body, size - 1, j, msg, sizeof msg, &param);
    if (st != 200) {
        json_object *o = srv_error_json(st, msg, param);
        json_object_put(o);
    }
    srv_job_unref(j);
    free(body);
    return 0;
}
