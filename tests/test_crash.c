// tests/test_crash.c — the short kill -9 loop of tests/crash/run.sh (5 kills
// in each of conversion, state save, usage-file update and serve with
// requests in flight; the long run is bench/crash.sh), and the harness's own
// check: with writers that overwrite in place (--inplace) it must fail.
// PETREL_CRASH_SEED=N picks other kill times (the seed is in the output).
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static const char *seed(void)
{
    const char *s = getenv("PETREL_CRASH_SEED");
    return s && *s ? s : "1";
}

// Runs the harness with args; its output in *log (its exit status is
// redundant with the RESULT line, which the tests read).
static void run(const char *args, char **log)
{
    char *dir = tu_tmpdir("crash");
    tu_sh(log, "'%s/tests/crash/run.sh' --petrel '%s' --helper '%s' --seed %s --work '%s/w' %s 2>&1",
          PETREL_SOURCE_DIR, PETREL_BIN, CRASH_HELPER_BIN, seed(), dir, args);
    tu_rmrf(dir);
    free(dir);
}

// The RESULT line's value of key in log, -1 if absent.
static long result(const char *log, const char *key)
{
    const char *r = strstr(log, "RESULT ");
    if (!r)
        return -1;
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *k = strstr(r, pat);
    return k ? strtol(k + strlen(pat), NULL, 10) : -1;
}

Test(crash, kill9_short_loop_every_case, .timeout = 240)
{
    char *log = NULL;
    run("--kills 5", &log);
    cr_assert_eq(result(log, "cases"), 4, "%s", log);
    // 5 first kills per case; a conversion's resume is sometimes killed too
    cr_assert_geq(result(log, "convert_kills"), 5, "%s", log);
    cr_assert_eq(result(log, "state_kills"), 5, "%s", log);
    cr_assert_eq(result(log, "usage_kills"), 5, "%s", log);
    cr_assert_eq(result(log, "serve_kills"), 5, "%s", log);
    cr_assert_eq(result(log, "failures"), 0, "%s", log);
    free(log);
}

Test(crash, harness_catches_writers_without_rename, .timeout = 120)
{
    char *log = NULL;
    run("--kills 6 --cases 'state usage' --inplace", &log);
    cr_assert_eq(result(log, "kills"), 12, "%s", log);
    // Nearly every kill tears an in-place write; one caught per case at least.
    cr_assert(strstr(log, "FAIL [state") && strstr(log, "FAIL [usage"), "torn files went unnoticed:\n%s", log);
    free(log);
}
