// tests/test_convert_resume.c — kill -9 during a conversion (test hooks
// --debug-stop-after-units/-shards make the child SIGKILL itself at exact
// points), rerun, and compare with an uninterrupted conversion byte for
// byte; re-running a finished conversion; --force; --delete-source never
// deleting a shard still needed; --fetch-cmd.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

static char *g_dir, *g_ref;

// A writable copy of tiny-dsv3 at DIR/NAME.
static char *copy_fixture(const char *name)
{
    char *fx = tu_fixture("tiny-dsv3");
    char *dst = malloc(2048);
    snprintf(dst, 2048, "%s/%s", g_dir, name);
    cr_assert_eq(tu_sh(NULL, "mkdir -p '%s' && cp '%s'/*.json '%s'/*.safetensors '%s'/ && chmod u+w '%s'/*", dst, fx,
                       fx, dst, dst), 0);
    free(fx);
    return dst;
}

static bool exists(const char *dir, const char *name)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static bool same_file(const char *a, const char *b) { return tu_sh(NULL, "cmp -s '%s' '%s'", a, b) == 0; }

// Runs convert; returns the shell status (-1 when killed by a signal).
static int convert(char **log, const char *in, const char *out, const char *extra)
{
    return tu_sh(log, "%s convert '%s' -o '%s' %s 2>&1", PETREL_BIN, in, out, extra);
}

static void setup(void)
{
    g_dir = tu_tmpdir("resume");
    char *fx = tu_fixture("tiny-dsv3");
    g_ref = malloc(1024);
    snprintf(g_ref, 1024, "%s/ref.gguf", g_dir);
    char *log = NULL;
    cr_assert_eq(convert(&log, fx, g_ref, ""), 0, "%s", log);
    free(log);
    free(fx);
}

static void teardown(void)
{
    tu_rmrf(g_dir);
    free(g_dir);
    free(g_ref);
}

TestSuite(resume, .init = setup, .fini = teardown, .timeout = 300);

Test(resume, kill_at_several_points_then_rerun_is_identical)
{
    char *fx = tu_fixture("tiny-dsv3");
    // 272 units in all (shard 1 holds the first ~140): early, mid-shard-1,
    // just into shard 2, near the end.
    const char *points[] = {"--debug-stop-after-units 1", "--debug-stop-after-units 60",
                            "--debug-stop-after-units 150", "--debug-stop-after-units 270",
                            "--debug-stop-after-shards 1"};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        char out[1024], part[1100], jour[1100];
        snprintf(out, sizeof out, "%s/k%zu.gguf", g_dir, i);
        snprintf(part, sizeof part, "%s.partial", out);
        snprintf(jour, sizeof jour, "%s.journal", out);
        char *log = NULL;
        int rc = convert(&log, fx, out, points[i]);
        cr_assert_neq(rc, 0, "%s: the child was not killed: %s", points[i], log);
        free(log);
        cr_assert(access(out, F_OK) != 0, "%s: complete-looking output after a kill", points[i]);
        cr_assert(access(part, F_OK) == 0 && access(jour, F_OK) == 0, "%s: no partial/journal", points[i]);
        // A second kill during the resumed run, then the final run.
        if (i == 1) {
            rc = convert(&log, fx, out, "--debug-stop-after-units 100");
            cr_assert_neq(rc, 0);
            free(log);
        }
        rc = convert(&log, fx, out, "");
        cr_assert_eq(rc, 0, "%s: resume failed: %s", points[i], log);
        if (i == 4)
            cr_assert(strstr(log, "resuming: 1 of 2 shards already done"), "%s", log);
        free(log);
        cr_assert(same_file(out, g_ref), "%s: resumed output differs from the uninterrupted one", points[i]);
        cr_assert(access(part, F_OK) != 0 && access(jour, F_OK) != 0, "leftover partial/journal");
    }
    free(fx);
}

Test(resume, finished_shard_is_not_redone)
{
    char *ck = copy_fixture("ck_nore");
    char out[1024];
    snprintf(out, sizeof out, "%s/nore.gguf", g_dir);
    char *log = NULL;
    cr_assert_neq(convert(&log, ck, out, "--debug-stop-after-shards 1"), 0);
    free(log);
    // Shard 1 is recorded done: the resume must not need it at all.
    char s1[1100];
    snprintf(s1, sizeof s1, "%s/model-00001-of-000002.safetensors", ck);
    cr_assert_eq(unlink(s1), 0);
    cr_assert_eq(convert(&log, ck, out, ""), 0, "%s", log);
    free(log);
    cr_assert(same_file(out, g_ref));
    free(ck);
}

Test(resume, rerun_after_completion_and_force)
{
    char *fx = tu_fixture("tiny-dsv3");
    char out[1024];
    snprintf(out, sizeof out, "%s/again.gguf", g_dir);
    char *log = NULL;
    cr_assert_eq(convert(&log, fx, out, ""), 0, "%s", log);
    free(log);
    cr_assert_eq(convert(&log, fx, out, ""), 0, "%s", log);
    cr_assert(strstr(log, "up to date"), "second run redid work: %s", log);
    free(log);
    cr_assert_eq(convert(&log, fx, out, "--force"), 0, "%s", log);
    cr_assert(strstr(log, "wrote"), "--force did not redo: %s", log);
    free(log);
    cr_assert(same_file(out, g_ref));
    // Other options, same output path: refused without --force.
    cr_assert_neq(convert(&log, fx, out, "--type f32"), 0);
    cr_assert(strstr(log, "--force"), "%s", log);
    free(log);
    free(fx);
}

Test(resume, delete_source_only_after_durable)
{
    // Killed inside shard 1: nothing may be deleted.
    char *ck = copy_fixture("ck_del");
    char out[1024];
    snprintf(out, sizeof out, "%s/del.gguf", g_dir);
    char *log = NULL;
    cr_assert_neq(convert(&log, ck, out, "--delete-source --debug-stop-after-units 20"), 0);
    free(log);
    cr_assert(exists(ck, "model-00001-of-000002.safetensors") && exists(ck, "model-00002-of-000002.safetensors"));
    // Killed right after shard 1 is recorded done, before the deletion step:
    // the resume deletes it (nothing pending reads it) and finishes.
    cr_assert_neq(convert(&log, ck, out, "--delete-source --debug-stop-after-shards 1"), 0);
    free(log);
    // Killed inside shard 2 after shard 1 was deleted: shard 2 holds the scale of
    // a shard-1 tensor and its own data, so it must still be there.
    cr_assert_neq(convert(&log, ck, out, "--delete-source --debug-stop-after-units 30"), 0);
    free(log);
    cr_assert(!exists(ck, "model-00001-of-000002.safetensors"), "finished shard 1 was not deleted");
    cr_assert(exists(ck, "model-00002-of-000002.safetensors"), "shard 2 deleted before its data were written");
    cr_assert_eq(convert(&log, ck, out, "--delete-source"), 0, "%s", log);
    free(log);
    cr_assert(!exists(ck, "model-00002-of-000002.safetensors"));
    cr_assert(exists(ck, "config.json") && exists(ck, "model.safetensors.index.json"));
    cr_assert(same_file(out, g_ref), "output differs after --delete-source resumes");
    // A completed conversion is still recognised without the shards.
    cr_assert_eq(convert(&log, ck, out, "--delete-source"), 0, "%s", log);
    cr_assert(strstr(log, "up to date"), "%s", log);
    free(log);
    free(ck);
}

Test(resume, fetch_cmd_brings_missing_shards)
{
    char *fx = tu_fixture("tiny-dsv3");
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/ck_fetch", g_dir);
    cr_assert_eq(tu_sh(NULL, "mkdir -p '%s' && cp '%s'/*.json '%s'/", ck, fx, ck), 0);
    char out[1024], extra[2048];
    snprintf(out, sizeof out, "%s/fetch.gguf", g_dir);
    snprintf(extra, sizeof extra, "--delete-source --fetch-cmd 'cp %s/{file} {file}.tmp && mv {file}.tmp {file}'", fx);
    char *log = NULL;
    cr_assert_eq(convert(&log, ck, out, extra), 0, "%s", log);
    cr_assert(strstr(log, "fetching model-00001-of-000002.safetensors"), "%s", log);
    cr_assert(strstr(log, "fetching model-00002-of-000002.safetensors"), "%s", log);
    free(log);
    cr_assert(!exists(ck, "model-00001-of-000002.safetensors") && !exists(ck, "model-00002-of-000002.safetensors"));
    cr_assert(same_file(out, g_ref));
    free(fx);
}
