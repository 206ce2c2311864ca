// tests/test_server_openai.c — runs the Node.js suite tests/server/run.mjs
// (the official openai npm client) against a `petrel serve` it starts on a
// free loopback port with the synthetic tiny model (tokenizer + chat
// template), an API key and a queue of 2. Installs the client with
// `npm ci` into tests/server/node_modules when it is missing.
#include "tests/test_server_util.h"

TestSuite(server_openai, .fini = st_cleanup);

Test(server_openai, node_suite, .timeout = 600)
{
    char *out = NULL;
    if (tu_sh(NULL, "node --version >/dev/null 2>&1") != 0)
        cr_skip_test("node is not installed");
    char mod[1200];
    snprintf(mod, sizeof mod, "%s/tests/server/node_modules/openai/package.json", PETREL_SOURCE_DIR);
    if (access(mod, R_OK) != 0) {
        int rc = tu_sh(&out, "cd '%s/tests/server' && timeout 300 npm ci --no-audit --no-fund 2>&1", PETREL_SOURCE_DIR);
        cr_assert_eq(rc, 0, "npm ci in tests/server failed:\n%s", out);
        free(out);
    }
    char *model = st_synth_tiny();
    st_server s = st_start(model, "--api-key test-key-123 --max-queue 2");
    int rc = tu_sh(&out,
                   "cd '%s/tests/server' && timeout 300 node run.mjs --base-url http://127.0.0.1:%d/v1 "
                   "--api-key test-key-123 --model synth-tiny 2>&1",
                   PETREL_SOURCE_DIR, s.port);
    cr_assert_eq(rc, 0, "the openai npm suite failed:\n%s", out);
    cr_assert(strstr(out, "PASSED"), "%s", out);
    free(out);
    char *m = NULL;
    cr_assert_eq(st_http(&s, "GET", "/health", NULL, NULL, &m), 200, "server unhealthy after the suite");
    free(m);
    st_stop(&s);
    free(model);
}
