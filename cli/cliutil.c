#include "cli/cliutil.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "io/reader.h"

const char *cli_model_opts_help =
    "  -m, --model FILE      deepseek2 GGUF model\n"
    "  -t, --threads N       compute threads (default: all cores)\n"
    "  -c, --ctx N           context length (default: min(trained, 4096))\n"
    "      --batch N         prefill chunk: max tokens per forward batch (default: from the RAM budget, <= 512\n"
    "                        when every expert fits, <= 2048 when experts stream)\n"
    "      --ram SIZE        RAM budget for everything Petrel holds (e.g. 3G)\n"
    "      --expert-cache SIZE  bytes for cached routed experts\n"
    "      --expert-slots N  cache exactly N experts per layer\n"
    "      --io MODE         expert reads: auto | uring | pool | buffered (default auto)\n"
    "      --pin-gb SIZE     hot-store of pinned experts (GiB, or 512M; default 0 = none: the routing heat recorded\n"
    "                        in MODEL.usage orders the evictions instead)\n"
    "      --no-hot-store    never pin experts\n"
    "      --no-prefetch     no lookahead prefetch of the next layers' experts\n"
    "      --prefetch-depth N  MoE layers predicted ahead (default 1)\n"
    "      --prefetch-top N  read the N best-scored predicted experts per token (default 5/8 of top-k)\n"
    "      --usage FILE      routing-heat file (default MODEL.usage; 'none': do not record)\n"
    "      --stats           per-layer expert cache / I/O / prefetch statistics at the end\n"
    "      --trace FILE      record the routed experts of every token and layer (bench/trace-replay.sh)\n"
    "  -v, --verbose         load details\n";

void cli_model_opts_init(cli_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mp = petrel_model_default_params();
    o->cp = petrel_context_default_params();
}

static int need(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "petrel: option %s needs a value\n", argv[*i]);
        return -1;
    }
    return 0;
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        fprintf(stderr, "petrel: bad value '%s' for %s\n", v, opt);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_spec_opt(const char *cmd, int *spec, int *spec_mode, int argc, char **argv, int *i)
{
    assert(cmd && spec && spec_mode && i && *i < argc);
    if (!strcmp(argv[*i], "--spec")) {
        *spec = 1;
        (*i)++;
        return 1;
    }
    if (strcmp(argv[*i], "--spec-mode") || *i + 1 >= argc)
        return 0;
    *spec_mode = petrel_spec_mode_parse(argv[*i + 1]);
    if (*spec_mode < 0) {
        fprintf(stderr, "petrel %s: --spec-mode '%s': expected adaptive, always or off\n", cmd, argv[*i + 1]);
        return -1;
    }
    *spec = 1;
    *i += 2;
    return 1;
}

int cli_model_opt(cli_model_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    long v;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (need(argc, argv, i) < 0)
            return -1;
        o->model = argv[++*i];
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (need(argc, argv, i) < 0 || parse_int(a, argv[*i + 1], 1, 1024, &v) < 0)
            return -1;
        o->mp.n_threads = (int)v;
        ++*i;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
        if (need(argc, argv, i) < 0 || parse_int(a, argv[*i + 1], 1, 1 << 24, &v) < 0)
            return -1;
        o->cp.n_ctx = (uint32_t)v;
        ++*i;
    } else if (!strcmp(a, "--batch")) {
        if (need(argc, argv, i) < 0 || parse_int(a, argv[*i + 1], 1, 1 << 16, &v) < 0)
            return -1;
        o->cp.n_batch = (uint32_t)v;
        ++*i;
    } else if (!strcmp(a, "--expert-slots")) {
        if (need(argc, argv, i) < 0 || parse_int(a, argv[*i + 1], 1, 1 << 20, &v) < 0)
            return -1;
        o->mp.experts_per_layer = (int)v;
        ++*i;
    } else if (!strcmp(a, "--ram") || !strcmp(a, "--expert-cache")) {
        if (need(argc, argv, i) < 0)
            return -1;
        int64_t sz = pt_parse_size(argv[*i + 1]);
        if (sz <= 0) {
            fprintf(stderr, "petrel: bad size '%s' for %s\n", argv[*i + 1], a);
            return -1;
        }
        if (!strcmp(a, "--ram"))
            o->mp.ram_budget = (uint64_t)sz;
        else
            o->mp.expert_cache = (uint64_t)sz;
        ++*i;
    } else if (!strcmp(a, "--io")) {
        if (need(argc, argv, i) < 0)
            return -1;
        int mode = pt_io_mode_parse(argv[*i + 1]);
        if (mode < 0) {
            fprintf(stderr, "petrel: bad value '%s' for --io (auto, uring, pool, buffered)\n", argv[*i + 1]);
            return -1;
        }
        o->mp.io_mode = mode;
        ++*i;
    } else if (!strcmp(a, "--pin-gb")) {
        if (need(argc, argv, i) < 0)
            return -1;
        const char *v = argv[*i + 1];
        int64_t sz = pt_parse_size(v);
        if (sz >= 0 && strspn(v, "0123456789.") == strlen(v)) // a bare number is GiB
            sz = (int64_t)(strtod(v, NULL) * 1073741824.0);
        if (sz < 0) {
            fprintf(stderr, "petrel: bad size '%s' for --pin-gb\n", v);
            return -1;
        }
        if (sz == 0)
            o->mp.no_hot_store = true;
        o->mp.pin_bytes = (uint64_t)sz;
        ++*i;
    } else if (!strcmp(a, "--trace")) {
        if (need(argc, argv, i) < 0)
            return -1;
        o->trace = argv[++*i];
    } else if (!strcmp(a, "--stats")) {
        o->stats = true;
    } else if (!strcmp(a, "--no-hot-store")) {
        o->mp.no_hot_store = true;
    } else if (!strcmp(a, "--prefetch-depth")) {
        if (need(argc, argv, i) < 0 || parse_int(a, argv[*i + 1], 1, 8, &v) < 0)
            return -1;
        o->mp.prefetch_depth = (int)v;
        ++*i;
    } else if (!strcmp(a, "--prefetch-top")) {
        if (need(argc, argv, i) < 0 || parse_int(a, argv[*i + 1], 1, 64, &v) < 0)
            return -1;
        o->mp.prefetch_top = (int)v;
        ++*i;
    } else if (!strcmp(a, "--no-prefetch")) {
        o->mp.no_prefetch = true;
    } else if (!strcmp(a, "--usage")) {
        if (need(argc, argv, i) < 0)
            return -1;
        if (!strcmp(argv[*i + 1], "none"))
            o->mp.no_usage = true;
        else
            o->mp.usage_path = argv[*i + 1];
        ++*i;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
        o->mp.verbose = true;
    } else {
        return 0;
    }
    ++*i;
    return 1;
}

int cli_parse_ids(const char *s, petrel_token **out)
{
    int cap = 64, n = 0;
    petrel_token *ids = malloc(sizeof *ids * (size_t)cap);
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
            free(ids);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            ids = realloc(ids, sizeof *ids * (size_t)cap);
        }
        ids[n++] = (petrel_token)v;
        p = end;
        if (*p && *p != ',' && *p != ' ' && *p != '\n') {
            free(ids);
            return -1;
        }
    }
    *out = ids;
    return n;
}

int cli_open(const cli_model_opts *o, petrel_model **m, petrel_context **c)
{
    char err[1024];
    if (!o->model) {
        fprintf(stderr, "petrel: no model given (-m FILE)\n");
        return -1;
    }
    *m = petrel_model_open(o->model, &o->mp, err, sizeof err);
    if (!*m) {
        fprintf(stderr, "petrel: %s\n", err);
        return -1;
    }
    *c = petrel_context_new(*m, &o->cp, err, sizeof err);
    if (!*c) {
        fprintf(stderr, "petrel: %s\n", err);
        petrel_model_close(*m);
        return -1;
    }
    if (o->trace && petrel_trace_open(*c, o->trace, err, sizeof err) < 0) {
        fprintf(stderr, "petrel: %s\n", err);
        petrel_context_free(*c);
        petrel_model_close(*m);
        return -1;
    }
    return 0;
}

void cli_print_stream_stats(const cli_model_opts *o, const petrel_context *c)
{
    if (o->stats)
        petrel_print_stream_stats(c, stderr);
}
