// cli/cliutil.h — option parsing shared by the engine-facing commands.
#ifndef PETREL_CLI_CLIUTIL_H
#define PETREL_CLI_CLIUTIL_H

#include <stdbool.h>
#include "petrel.h"

// Options every engine command accepts:
//   -m/--model FILE, -t/--threads N, --ram SIZE, --expert-cache SIZE,
//   --expert-slots N, -c/--ctx N, --batch N, -v/--verbose
typedef struct cli_model_opts {
    const char *model;
    const char *trace;        // --trace FILE: routed experts of every token and layer (opened by cli_open)
    bool stats;               // --stats: print the streaming table at the end (cli_print_stream_stats)
    petrel_model_params mp;
    petrel_context_params cp;
} cli_model_opts;

void cli_model_opts_init(cli_model_opts *o);
// If argv[*i] is one of the common options, consumes it (and its value),
// advances *i and returns 1; 0 if not a common option; -1 on a bad value.
int cli_model_opt(cli_model_opts *o, int argc, char **argv, int *i);

// The speculation options of `run` and `bench`: --spec (sets *spec) and
// --spec-mode MODE (sets *spec_mode and *spec). If argv[*i] is one of them,
// consumes it (and its value), advances *i and returns 1; 0 if not; -1 on
// an unknown MODE, after printing "petrel CMD: ..." to stderr.
int cli_spec_opt(const char *cmd, int *spec, int *spec_mode, int argc, char **argv, int *i);
extern const char *cli_model_opts_help;

// Parses "1,2,3" into a malloc'ed array; -1 on error.
int cli_parse_ids(const char *s, petrel_token **out);

// Opens model + context from options (and the --trace file); prints the
// error and returns -1.
int cli_open(const cli_model_opts *o, petrel_model **m, petrel_context **c);
// With --stats: the per-layer expert-streaming table and totals on stderr.
void cli_print_stream_stats(const cli_model_opts *o, const petrel_context *c);

#endif
