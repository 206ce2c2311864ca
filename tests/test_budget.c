// tests/test_budget.c — the RAM budget (--ram): a trunk that cannot fit is
// refused at load with a clear message; a budget that leaves no room for
// streaming is refused at context creation naming the sizes; and under a
// cgroup-v1 memory cap slightly above the budget, `petrel run` streams the
// "small" synthetic model without ever triggering the OOM killer, with a
// peak RSS within the budget and the same tokens as with everything cached.
// The cgroup part is skipped (with a message) where cgroups are unavailable.
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "petrel.h"
#include "tests/testutil.h"

static char *small_model(void) { return tu_synth_model("small"); }

Test(budget, trunk_that_cannot_fit_is_refused)
{
    char *path = small_model();
    petrel_model_params mp = petrel_model_default_params();
    mp.ram_budget = 1u << 20;
    mp.no_usage = true;
    char err[1024] = "";
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert_null(m);
    cr_assert(strstr(err, "trunk alone") && strstr(err, "RAM budget"), "message: %s", err);
    free(path);
}

Test(budget, no_room_for_streaming_is_refused)
{
    char *path = small_model();
    petrel_model_params mp = petrel_model_default_params();
    mp.no_usage = true;
    petrel_model *m0 = petrel_model_open(path, &mp, NULL, 0);
    cr_assert(m0);
    uint64_t trunk = petrel_model_trunk_bytes(m0);
    petrel_model_close(m0);
    mp.ram_budget = trunk + (1u << 20); // the trunk fits; nothing else does
    char err[1024] = "";
    petrel_model *m = petrel_model_open(path, &mp, err, sizeof err);
    cr_assert(m, "%s", err);
    petrel_context *c = petrel_context_new(m, NULL, err, sizeof err);
    cr_assert_null(c);
    cr_assert(strstr(err, "too small") && strstr(err, "trunk") && strstr(err, "KV cache"), "message: %s", err);
    petrel_model_close(m);
    free(path);
}

// The memory cgroup (v1) of this process, if a child can be made under it.
static int cgroup_parent(char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return -1;
    char line[1024];
    int ok = -1;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, ":memory:");
        if (!p)
            continue;
        p += 8;
        p[strcspn(p, "\n")] = 0;
        snprintf(out, n, "/sys/fs/cgroup/memory%s", strcmp(p, "/") ? p : "");
        ok = access(out, W_OK) == 0 ? 0 : -1;
    }
    fclose(f);
    return ok;
}

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, s, strlen(s));
    close(fd);
    return n == (ssize_t)strlen(s) ? 0 : -1;
}

// Runs `petrel run` (output to outfile) in cgroup cg (NULL: none); returns
// the wait status and the child's peak RSS in *maxrss_kib.
static int run_petrel(const char *cg, const char *model, const char *ram, const char *outfile, long *maxrss_kib)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (cg) {
            char procs[1200], me[32];
            snprintf(procs, sizeof procs, "%s/cgroup.procs", cg);
            snprintf(me, sizeof me, "%d", (int)getpid());
            if (write_str(procs, me) < 0)
                _exit(90);
        }
        int fd = open(outfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            _exit(91);
        dup2(fd, 1);
        dup2(fd, 2);
        char *argv[] = {PETREL_BIN, "run", "-m", (char *)model, "-c", "256", "-t", "1",
                        "--ids", "11,22,33,44,55,66,77,88", "-n", "24", "--print-ids", "--ignore-eos",
                        ram ? "--ram" : NULL, (char *)ram, NULL};
        execv(PETREL_BIN, argv);
        _exit(92);
    }
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {
    }
    if (maxrss_kib)
        *maxrss_kib = ru.ru_maxrss;
    return st;
}

static uint64_t read_u64_field(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char k[64];
    unsigned long long v;
    uint64_t out = 0;
    while (fscanf(f, "%63s %llu", k, &v) == 2)
        if (!strcmp(k, key))
            out = v;
    fclose(f);
    return out;
}

// The line of generated ids in a petrel run output.
static char *ids_line(const char *file)
{
    size_t len;
    char *txt = tu_read(file, &len);
    cr_assert(txt, "no output in %s", file);
    char *best = NULL;
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n"))
        if (strspn(line, "0123456789,") == strlen(line) && strchr(line, ','))
            best = line;
    char *r = best ? strdup(best) : NULL;
    free(txt);
    return r;
}

Test(budget, cgroup_cap_above_budget_never_ooms)
{
    char parent[1024];
    if (cgroup_parent(parent, sizeof parent) < 0) {
        cr_skip_test("no writable cgroup-v1 memory controller here: skipping the memory-cap test");
        return;
    }
    char *path = small_model();
    char *dir = tu_tmpdir("budget");
    char ref_out[1200];
    snprintf(ref_out, sizeof ref_out, "%s/ref.txt", dir);
    const char *budgets[2] = {"48M", "64M"}; // the experts (~90 MB) do not fit
    const uint64_t bytes[2] = {48u << 20, 64u << 20};
    for (int i = 0; i < 2; i++) {
        char cg[1100], file[1200], lim[64], out[1200];
        snprintf(cg, sizeof cg, "%s/petrel-test-budget-%d-%d", parent, (int)getpid(), i);
        cr_assert(mkdir(cg, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", cg, strerror(errno));
        snprintf(file, sizeof file, "%s/memory.limit_in_bytes", cg);
        snprintf(lim, sizeof lim, "%llu", (unsigned long long)(bytes[i] + (8u << 20)));
        if (write_str(file, lim) < 0) {
            rmdir(cg);
            cr_skip_test("cannot set memory.limit_in_bytes: skipping the memory-cap test");
            return;
        }
        snprintf(out, sizeof out, "%s/run%d.txt", dir, i);
        long rss_kib = 0;
        int st = run_petrel(cg, path, budgets[i], out, &rss_kib);
        snprintf(file, sizeof file, "%s/memory.oom_control", cg);
        uint64_t kills = read_u64_field(file, "oom_kill");
        rmdir(cg);
        size_t len;
        char *txt = tu_read(out, &len);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "budget %s: petrel run failed (status %d):\n%s", budgets[i],
                  st, txt ? txt : "");
        cr_assert_eq(kills, 0, "budget %s: the OOM killer fired", budgets[i]);
        free(txt);
        cr_assert_leq((uint64_t)rss_kib * 1024, bytes[i], "budget %s: peak RSS %ld KiB", budgets[i], rss_kib);
    }
    // Same tokens with everything cached, uncapped.
    int st = run_petrel(NULL, path, NULL, ref_out, NULL);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *want = ids_line(ref_out);
    cr_assert(want, "no ids in the reference run");
    for (int i = 0; i < 2; i++) {
        char out[1200];
        snprintf(out, sizeof out, "%s/run%d.txt", dir, i);
        char *got = ids_line(out);
        cr_assert(got && !strcmp(got, want), "budget %s: ids differ: %s vs %s", budgets[i], got ? got : "(none)",
                  want);
        free(got);
    }
    free(want);
    tu_rmrf(dir);
    free(dir);
    free(path);
}
