// tests/test_faults.c — fault injection (common/fault.h) at every I/O site:
// expert reads, conversion writes, the conversion journal, state saves and
// usage-file writes. For each: the right error naming the file; retries
// where the kernel's answer is transient (EINTR, EAGAIN, short transfers)
// with results equal to the fault-free run; and nothing corrupt left
// behind (no final file appears, the previous state / usage file stays and
// loads, a failed conversion resumes to a byte-identical file).
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/usage.h"
#include "common/fault.h"
#include "petrel.h"
#include "tests/testutil.h"

static char *dir;
static void setup(void) { dir = tu_tmpdir("faults"); }
static void teardown(void)
{
    pt_fault_disarm();
    tu_rmrf(dir);
    free(dir);
}
TestSuite(faults, .init = setup, .fini = teardown);

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

// Entries of dir other than . and ..
static int count_files(const char *d)
{
    DIR *h = opendir(d);
    cr_assert(h, "opendir %s", d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(h)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(h);
    return n;
}

static void arm(const char *spec)
{
    pt_err e = {{0}};
    cr_assert_eq(pt_fault_arm(spec, &e), 0, "arm %s: %s", spec, e.msg);
}

// ---- the plan itself ----------------------------------------------------------

Test(faults, plan_counts_events_per_site)
{
    arm("a:2:ENOSPC:2,b:1:short,c:3:EINTR:0,d:1:5");
    int a[5], c[5];
    for (int i = 0; i < 5; i++) {
        a[i] = pt_fault("a");
        c[i] = pt_fault("c");
    }
    cr_assert(a[0] == 0 && a[1] == ENOSPC && a[2] == ENOSPC && a[3] == 0 && a[4] == 0);
    cr_assert(c[0] == 0 && c[1] == 0 && c[2] == EINTR && c[3] == EINTR && c[4] == EINTR);
    cr_assert_eq(pt_fault("b"), PT_FAULT_SHORT);
    cr_assert_eq(pt_fault("b"), 0);
    cr_assert_eq(pt_fault("d"), 5);
    cr_assert_eq(pt_fault("unknown"), 0);
    cr_assert_eq(pt_fault_injected(), 2 + 3 + 1 + 1);
    pt_fault_disarm();
    cr_assert_eq(pt_fault("a"), 0);
    const char *bad[] = {"read", "read:0", "read:x", "read:1:EWHAT", "read:1:EIO:z", ":1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_err e = {{0}};
        cr_assert_eq(pt_fault_arm(bad[i], &e), -1, "'%s' accepted", bad[i]);
        cr_assert(strstr(e.msg, "PETREL_FAULT"), "message: %s", e.msg);
    }
}

// ---- expert reads ---------------------------------------------------------------

static petrel_model *open_streaming(const char *path, int io, int slots)
{
    char err[1024];
    petrel_model_params mp = petrel_model_default_params();
    mp.n_threads = 1;
    mp.experts_per_layer = slots; // 0: every expert cached, read once at open
    mp.io_mode = io;
    mp.no_usage = true;
    mp.no_hot_store = true;
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "open %s: %s", path, err);
    return m;
}

// Logits of n tokens decoded one at a time into out (n x V), or -1.
static int decode_n(petrel_context *c, int n, float *out, size_t V)
{
    petrel_kv_truncate(c, 0);
    for (int i = 0; i < n; i++) {
        petrel_token t = (petrel_token)((i * 131 + 17) % 500 + 2);
        if (petrel_decode(c, &t, NULL, 1, PETREL_LOGITS_LAST) != 0)
            return -1;
        if (out)
            memcpy(out + (size_t)i * V, petrel_get_logits(c, 0), sizeof(float) * V);
    }
    return 0;
}

Test(faults, expert_reads_retry_or_fail_clearly, .timeout = 120)
{
    char *path = tu_tiny_model("f32");
    enum { N = 8 };
    petrel_model *m0 = open_streaming(path, PETREL_IO_AUTO, 0);
    const size_t V = (size_t)petrel_model_n_vocab(m0);
    float *want = malloc(sizeof(float) * V * N), *got = malloc(sizeof(float) * V * N);
    petrel_context *c0 = petrel_context_new(m0, NULL, NULL, 0);
    cr_assert_eq(decode_n(c0, N, want, V), 0, "%s", petrel_context_error(c0));
    petrel_context_free(c0);
    petrel_model_close(m0);
    // Transient faults: interrupted, would-block and short completions
    // (the bytes not reported are scribbled over), and single EIOs (fewer
    // than the reader's 4 attempts) are retried.
    const char *transient = "read:2:EINTR:3,read:9:EAGAIN:3,read:15:short:3,read:25:EIO:1,read:31:short:1,"
                            "read:40:EIO:2";
    const int ios[3] = {PETREL_IO_URING, PETREL_IO_POOL, PETREL_IO_BUFFERED};
    for (int k = 0; k < 3; k++) {
        petrel_model *m = open_streaming(path, ios[k], 1);
        petrel_context *c = petrel_context_new(m, NULL, NULL, 0);
        cr_assert(c);
        arm(transient);
        cr_assert_eq(decode_n(c, N, got, V), 0, "io %d: %s", ios[k], petrel_context_error(c));
        long inj = pt_fault_injected();
        cr_assert_geq(inj, 13, "io %d: only %ld faults were injected", ios[k], inj);
        cr_assert(memcmp(got, want, sizeof(float) * V * N) == 0, "io %d: logits differ under transient faults",
                  ios[k]);
        petrel_stats st;
        petrel_get_stats(c, &st);
        cr_assert_eq(st.io_mode, ios[k]);
        // A device that keeps failing: a clear error naming the file.
        arm("read:1:EIO:0");
        cr_assert_eq(decode_n(c, N, NULL, V), -1, "io %d: decode succeeded on a failing device", ios[k]);
        const char *msg = petrel_context_error(c);
        cr_assert(strstr(msg, path) && strstr(msg, "expert ") && strstr(msg, "offset") &&
                      strstr(msg, strerror(EIO)),
                  "io %d: message: %s", ios[k], msg);
        // Healthy again: the same context is exact.
        pt_fault_disarm();
        cr_assert_eq(decode_n(c, N, got, V), 0, "%s", petrel_context_error(c));
        cr_assert(memcmp(got, want, sizeof(float) * V * N) == 0, "io %d: logits differ after recovery", ios[k]);
        petrel_context_free(c);
        petrel_model_close(m);
    }
    free(want);
    free(got);
    free(path);
}

// ---- state saves ------------------------------------------------------------------

static petrel_context *state_ctx(petrel_model **mp, int n)
{
    char *path = tu_tiny_model("q8_0");
    char err[1024];
    petrel_model_params p = petrel_model_default_params();
    p.n_threads = 1;
    p.no_usage = true;
    *mp = petrel_model_open(path, &p, err, sizeof err);
    cr_assert(*mp, "open %s: %s", path, err);
    free(path);
    petrel_context *c = petrel_context_new(*mp, NULL, err, sizeof err);
    cr_assert(c, "%s", err);
    petrel_token t[32];
    for (int i = 0; i < n; i++)
        t[i] = (petrel_token)(i * 7 + 3);
    cr_assert_eq(petrel_decode(c, t, NULL, n, PETREL_LOGITS_LAST), 0, "%s", petrel_context_error(c));
    return c;
}

Test(faults, state_save_keeps_previous_state, .timeout = 60)
{
    petrel_model *m;
    petrel_context *c = state_ctx(&m, 12);
    char path[1024], ref[1024], err[1024];
    snprintf(path, sizeof path, "%s/conv.state", dir);
    snprintf(ref, sizeof ref, "%s/ref.state", dir);
    cr_assert_eq(petrel_state_save(c, path, err, sizeof err), 0, "%s", err);
    size_t len_a;
    void *a = tu_read(path, &len_a);
    petrel_token more[5] = {40, 41, 42, 43, 44};
    cr_assert_eq(petrel_decode(c, more, NULL, 5, PETREL_LOGITS_LAST), 0);
    // write #1 fails (ENOSPC, EIO), the fsync fails, the rename fails.
    const char *fatal[] = {"state.write:1:ENOSPC", "state.write:1:EIO", "state.write:2:EIO", "atomic.rename:1:EIO"};
    const int errs[] = {ENOSPC, EIO, EIO, EIO};
    for (int i = 0; i < 4; i++) {
        arm(fatal[i]);
        err[0] = 0;
        cr_assert_eq(petrel_state_save(c, path, err, sizeof err), -1, "%s: save succeeded", fatal[i]);
        cr_assert(strstr(err, path) && strstr(err, strerror(errs[i])), "%s: message: %s", fatal[i], err);
        pt_fault_disarm();
        cr_assert_eq(count_files(dir), 1, "%s: a temporary file was left behind", fatal[i]);
        size_t len;
        void *now = tu_read(path, &len);
        cr_assert(now && len == len_a && memcmp(now, a, len) == 0, "%s: the previous state changed", fatal[i]);
        free(now);
        petrel_context *c2 = petrel_context_new(m, NULL, NULL, 0);
        cr_assert_eq(petrel_state_load(c2, path, err, sizeof err), 0, "%s: previous state: %s", fatal[i], err);
        petrel_context_free(c2);
    }
    // Transient: short writes and EINTR are continued; the file equals a
    // fault-free save of the same state.
    cr_assert_eq(petrel_state_save(c, ref, err, sizeof err), 0, "%s", err);
    size_t len_r;
    void *r = tu_read(ref, &len_r);
    arm("state.write:1:short:3,state.write:4:EINTR:2");
    cr_assert_eq(petrel_state_save(c, path, err, sizeof err), 0, "%s", err);
    cr_assert_geq(pt_fault_injected(), 4);
    pt_fault_disarm();
    size_t len;
    void *now = tu_read(path, &len);
    cr_assert(now && len == len_r && memcmp(now, r, len) == 0, "a save with short writes differs");
    cr_assert_eq(count_files(dir), 2);
    free(now);
    free(r);
    free(a);
    petrel_context_free(c);
    petrel_model_close(m);
}

// ---- usage files --------------------------------------------------------------------

Test(faults, usage_write_keeps_previous_file)
{
    enum { NB = 3, NE = 8 };
    char path[1024];
    snprintf(path, sizeof path, "%s/model.usage", dir);
    uint64_t add[NB * NE], got[NB * NE];
    for (int i = 0; i < NB * NE; i++)
        add[i] = (uint64_t)(i * i + 1);
    pt_err e = {{0}};
    cr_assert_eq(pt_usage_merge_save(path, NB, NE, add, &e), 0, "%s", e.msg);
    const char *fatal[] = {"usage.write:1:ENOSPC", "usage.write:1:EIO", "usage.write:2:EIO", "atomic.rename:1:ENOSPC"};
    const int errs[] = {ENOSPC, EIO, EIO, ENOSPC};
    for (int i = 0; i < 4; i++) {
        arm(fatal[i]);
        e.msg[0] = 0;
        cr_assert_eq(pt_usage_merge_save(path, NB, NE, add, &e), -1, "%s: save succeeded", fatal[i]);
        cr_assert(strstr(e.msg, path) && strstr(e.msg, strerror(errs[i])), "%s: message: %s", fatal[i], e.msg);
        pt_fault_disarm();
        cr_assert_eq(count_files(dir), 1, "%s: a temporary file was left behind", fatal[i]);
        cr_assert_eq(pt_usage_load(path, NB, NE, got), 1, "%s: the previous file no longer loads", fatal[i]);
        for (int k = 0; k < NB * NE; k++)
            cr_assert_eq(got[k], add[k], "%s: count %d changed", fatal[i], k);
    }
    arm("usage.write:1:short:4,usage.write:5:EINTR");
    cr_assert_eq(pt_usage_merge_save(path, NB, NE, add, &e), 0, "%s", e.msg);
    cr_assert_geq(pt_fault_injected(), 5);
    pt_fault_disarm();
    cr_assert_eq(pt_usage_load(path, NB, NE, got), 1);
    for (int k = 0; k < NB * NE; k++)
        cr_assert_eq(got[k], 2 * add[k], "count %d after a save with short writes", k);
}

// ---- conversion ---------------------------------------------------------------------

// `petrel convert` of tiny-dsv3 to out with PETREL_FAULT=spec (NULL: none);
// its exit status, stderr in *log (malloc'ed).
static int convert(const char *out, const char *spec, char **log)
{
    return tu_sh(log, "PETREL_FAULT='%s' '%s' convert '%s/tests/fixtures/tiny-dsv3' -o '%s' 2>&1", spec ? spec : "",
                 PETREL_BIN, PETREL_SOURCE_DIR, out);
}

static void assert_same_file(const char *a, const char *b, const char *what)
{
    size_t la, lb;
    void *x = tu_read(a, &la), *y = tu_read(b, &lb);
    cr_assert(x && y, "%s: missing %s or %s", what, a, b);
    cr_assert(la == lb && memcmp(x, y, la) == 0, "%s: %s differs from the fault-free conversion", what, b);
    free(x);
    free(y);
}

Test(faults, conversion_fails_clearly_and_resumes_identically, .timeout = 300)
{
    char ref[1024], out[1024], partial[1100], journal[1100];
    snprintf(ref, sizeof ref, "%s/ref.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(partial, sizeof partial, "%s.partial", out);
    snprintf(journal, sizeof journal, "%s.journal", out);
    char *log = NULL;
    cr_assert_eq(convert(ref, NULL, &log), 0, "%s", log);
    free(log);
    // Fatal faults: the header write, tensor data in the second shard, the
    // data sync of a shard, the journal's record of the second shard, the
    // final fsync. `resumed` = shards the rerun finds done.
    const struct {
        const char *spec;
        int err;
        const char *names;   // file the message must name
        int resumed;         // shards done before the failure
    } cases[] = {
        {"convert.write:1:ENOSPC", ENOSPC, partial, 0},
        {"convert.write:200:EIO", EIO, partial, 1},
        {"convert.sync:1:EIO", EIO, partial, 0},
        {"convert.sync:2:ENOSPC", ENOSPC, partial, 1},
        {"journal.write:7:ENOSPC", ENOSPC, journal, 1},
        {"convert.sync:3:EIO", EIO, partial, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = convert(out, cases[i].spec, &log);
        cr_assert_neq(rc, 0, "%s: the conversion succeeded:\n%s", cases[i].spec, log);
        cr_assert(strstr(log, cases[i].names) && strstr(log, strerror(cases[i].err)), "%s: message:\n%s",
                  cases[i].spec, log);
        cr_assert(!exists(out), "%s: the final file appeared after a failure", cases[i].spec);
        // A run that finished no shard removes what it started.
        if (cases[i].resumed == 0)
            cr_assert(!exists(partial) && !exists(journal), "%s: leftovers of a run that finished nothing",
                      cases[i].spec);
        else
            cr_assert(exists(partial) && exists(journal), "%s: nothing kept to resume from", cases[i].spec);
        free(log);
        rc = convert(out, NULL, &log);
        cr_assert_eq(rc, 0, "%s: the rerun failed:\n%s", cases[i].spec, log);
        char want[128];
        snprintf(want, sizeof want, "resuming: %d of 2 shards already done", cases[i].resumed);
        if (cases[i].resumed > 0)
            cr_assert(strstr(log, want), "%s: rerun did not say '%s':\n%s", cases[i].spec, want, log);
        else
            cr_assert(!strstr(log, "resuming"), "%s: a rerun resumed from nothing:\n%s", cases[i].spec, log);
        free(log);
        assert_same_file(ref, out, cases[i].spec);
        cr_assert(!exists(partial) && !exists(journal), "%s: leftovers after the rerun", cases[i].spec);
        unlink(out);
    }
    // A torn last journal line (a kill, or a write that stopped part-way)
    // is cut off on resume: the resumed run's own record of the second
    // shard must not be glued to it, or the run after that (here after a
    // failed final fsync) could not read the journal.
    cr_assert_neq(convert(out, "journal.write:7:ENOSPC", &log), 0, "%s", log);
    free(log);
    FILE *f = fopen(journal, "a");
    cr_assert(f);
    fputs("do", f);
    fclose(f);
    cr_assert_neq(convert(out, "convert.sync:2:EIO", &log), 0, "%s", log);
    cr_assert(strstr(log, "resuming: 1 of 2 shards already done") && strstr(log, strerror(EIO)), "%s", log);
    free(log);
    cr_assert_eq(convert(out, NULL, &log), 0, "after a torn journal line: %s", log);
    cr_assert(strstr(log, "resuming: 2 of 2 shards already done"), "%s", log);
    free(log);
    assert_same_file(ref, out, "torn journal line");
    unlink(out);
    // Transient: short writes and EINTR everywhere are continued.
    const char *ok = "convert.write:1:short:20,convert.write:30:EINTR:5,journal.write:1:short:2,"
                     "journal.write:3:EINTR:2,convert.sync:1:EINTR";
    cr_assert_eq(convert(out, ok, &log), 0, "%s", log);
    free(log);
    assert_same_file(ref, out, ok);
}
