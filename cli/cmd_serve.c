// cli/cmd_serve.c — `petrel serve`: the OpenAI-compatible HTTP server.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cliutil.h"
#include "cli/commands.h"
#include "common/util.h"
#include "server/engine.h"
#include "server/server.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: petrel serve -m MODEL [options]\n"
            "      --host ADDR       address to bind (default 127.0.0.1)\n"
            "      --port N          port (default 8080; 0 = any free port)\n"
            "      --port-file FILE  write the bound port to FILE once listening\n"
            "      --api-key KEY     require 'Authorization: Bearer KEY'\n"
            "      --kv-dir DIR      keep conversation states on disk (survive restarts)\n"
            "      --kv-ram SIZE     RAM for kept conversation states (default 1G)\n"
            "  -np, --parallel N     sequences decoded together, one KV cache each (default 4)\n"
            "      --prefill-chunk N prompt tokens computed between two decode steps (default 256)\n"
            "      --max-queue N     requests waiting beyond the running ones (default 16)\n"

            "      --max-body SIZE   request body limit (default 8M)\n%s",
            cli_model_opts_help);
}

int cmd_serve(int argc, char **argv)
{
    cli_model_opts o;
    cli_model_opts_init(&o);
    srv_config cfg = {.host = "127.0.0.1", .port = 8080, .max_queue = 16, .max_body = 8u << 20,
                      .kv_ram = 1ull << 30};
    for (int i = 1; i < argc;) {
        int r = cli_model_opt(&o, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        char *end = NULL;
        if (!strcmp(a, "--host")) {
            cfg.host = v;
        } else if (!strcmp(a, "--port")) {
            long p = strtol(v, &end, 10);
            if (*end || p < 0 || p > 65535) {
                fprintf(stderr, "petrel serve: bad --port '%s'\n", v);
                return 2;
            }
            cfg.port = (int)p;
        } else if (!strcmp(a, "--port-file")) {
            cfg.port_file = v;
        } else if (!strcmp(a, "--api-key")) {
            cfg.api_key = v;
        } else if (!strcmp(a, "--kv-dir")) {
            cfg.kv_dir = v;
        } else if (!strcmp(a, "--kv-ram") || !strcmp(a, "--max-body")) {
            int64_t s = pt_parse_size(v);
            if (s < 0) {
                fprintf(stderr, "petrel serve: bad size '%s' for %s\n", v, a);
                return 2;
            }
            if (!strcmp(a, "--kv-ram"))
                cfg.kv_ram = (uint64_t)s;
            else
                cfg.max_body = (size_t)s;
        } else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
            long q = strtol(v, &end, 10);
            if (*end || q < 1 || q > SRV_MAX_SLOTS) {
                fprintf(stderr, "petrel serve: bad --parallel '%s' (1..%d)\n", v, SRV_MAX_SLOTS);
                return 2;
            }
            cfg.parallel = (int)q;
        } else if (!strcmp(a, "--prefill-chunk")) {
            long q = strtol(v, &end, 10);
            if (*end || q < 1 || q > 1 << 20) {
                fprintf(stderr, "petrel serve: bad --prefill-chunk '%s'\n", v);
                return 2;
            }
            cfg.prefill_chunk = (int)q;
        } else if (!strcmp(a, "--max-queue")) {
            long q = strtol(v, &end, 10);
            if (*end || q < 0 || q > 100000) {
                fprintf(stderr, "petrel serve: bad --max-queue '%s'\n", v);
                return 2;
            }
            cfg.max_queue = (int)q;
        } else {
            usage();
            return 2;
        }
        i += 2;
    }
    if (!o.model) {
        usage();
        return 2;
    }
    cfg.model = o.model;
    cfg.mp = o.mp;
    cfg.cp = o.cp;
    cfg.stats = o.stats;
    return srv_serve(&cfg);
}
