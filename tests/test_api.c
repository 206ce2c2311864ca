// tests/test_api.c — the docs/api.md example compiles and runs, its text in
// docs/api.md matches docs/api_example.c, and its greedy output equals what
// `petrel run --print-ids` generates for the same prompt.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

#define main api_example_main
#include "docs/api_example.c"
#undef main

Test(api, example_in_docs_is_verbatim)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/api_example.c", PETREL_SOURCE_DIR);
    char *src = tu_read(path, NULL);
    snprintf(path, sizeof path, "%s/docs/api.md", PETREL_SOURCE_DIR);
    char *doc = tu_read(path, NULL);
    cr_assert(src && doc);
    // Every line of the example appears in the doc.
    char *save = NULL;
    for (char *line = strtok_r(src, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        cr_expect(strstr(doc, line) != NULL, "docs/api.md lacks the example line: %s", line);
    free(src);
    free(doc);
}

Test(api, example_runs_and_matches_cli)
{
    char *model = tu_tiny_model("q8_0");
    char *argv[] = {"api_example", model, NULL};
    char out_path[] = "/tmp/petrel-api-XXXXXX";
    int fd = mkstemp(out_path);
    cr_assert(fd >= 0);
    fflush(stdout);
    FILE *saved = stdout;
    stdout = fdopen(fd, "w");
    int rc = api_example_main(2, argv);
    fclose(stdout);
    stdout = saved;
    cr_assert_eq(rc, 0);
    char *got = tu_read(out_path, NULL);
    unlink(out_path);
    char *cli = NULL;
    cr_assert_eq(tu_sh(&cli, "'%s' run -m '%s' --ids 1,2,3,4 -n 8 --print-ids --ignore-eos 2>/dev/null", PETREL_BIN,
                       model), 0);
    cr_expect_str_eq(got, cli, "API example printed %s, petrel run printed %s", got, cli);
    free(got);
    free(cli);
    free(model);
}
