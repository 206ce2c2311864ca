#include "tests/testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

char *tu_fixture(const char *rel)
{
    size_t n = strlen(PETREL_SOURCE_DIR) + strlen(rel) + 32;
    char *p = malloc(n);
    snprintf(p, n, "%s/tests/fixtures/%s", PETREL_SOURCE_DIR, rel);
    return p;
}

char *tu_tmpdir(const char *tag)
{
    char tmpl[256];
    const char *base = getenv("TMPDIR");
    snprintf(tmpl, sizeof tmpl, "%s/petrel-%s-XXXXXX", base ? base : "/tmp", tag);
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

void tu_rmrf(const char *path)
{
    if (path && strlen(path) > 5)
        tu_sh(NULL, "rm -rf '%s'", path);
}

int tu_sh(char **out, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += r;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = 0;
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void *tu_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    void *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    ((char *)buf)[n] = 0;
    if (len)
        *len = (size_t)n;
    return buf;
}

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>

// Path of build/test-models/NAME (malloc'ed), the folder created.
static char *model_path(const char *name)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/test-models", PETREL_BUILD_DIR);
    mkdir(dir, 0755);
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

// Runs the shell command cmd unless path exists, serialised across
// concurrent test processes by one lock file; cmd must create path
// atomically (write elsewhere, then rename).
static void make_once(const char *path, const char *what, const char *cmd)
{
    char lock[1200];
    snprintf(lock, sizeof lock, "%s/test-models/.lock", PETREL_BUILD_DIR);
    int fd = open(lock, O_CREAT | O_RDWR, 0644);
    cr_assert(fd >= 0, "cannot open %s", lock);
    flock(fd, LOCK_EX);
    struct stat st;
    if (stat(path, &st) != 0) {
        char *out = NULL;
        int rc = tu_sh(&out, "%s", cmd);
        if (rc != 0) {
            flock(fd, LOCK_UN);
            close(fd);
            cr_assert_fail("making the %s test model failed (%d):\n%s", what, rc, out);
        }
        free(out);
    }
    flock(fd, LOCK_UN);
    close(fd);
}

char *tu_tiny_model(const char *type)
{
    char name[128], cmd[4096];
    snprintf(name, sizeof name, "tiny-dsv3-%s.gguf", type);
    char *path = model_path(name);
    snprintf(cmd, sizeof cmd, "'%s' convert '%s/tests/fixtures/tiny-dsv3' -o '%s.tmp' %s%s 2>&1 && mv '%s.tmp' '%s'",
             PETREL_BIN, PETREL_SOURCE_DIR, path, strcmp(type, "default") ? "--type " : "",
             strcmp(type, "default") ? type : "", path, path);
    make_once(path, type, cmd);
    return path;
}

char *tu_synth_model(const char *preset)
{
    char name[128], cmd[4096];
    snprintf(name, sizeof name, "synth-%s.gguf", preset);
    char *path = model_path(name);
    snprintf(cmd, sizeof cmd,
             "d='%s.src' && rm -rf \"$d\" && '%s' synth --preset %s -o \"$d\" --quiet 2>&1 && "
             "'%s' convert \"$d\" -o '%s.tmp' 2>&1 && mv '%s.tmp' '%s' && rm -rf \"$d\"",
             path, PETREL_BIN, preset, PETREL_BIN, path, path, path);
    make_once(path, preset, cmd);
    return path;
}

static void *golden(const char *name, size_t *bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/tiny-dsv3/golden/%s", PETREL_SOURCE_DIR, name);
    void *p = tu_read(path, bytes);
    cr_assert(p, "missing golden file %s", path);
    return p;
}

float *tu_golden_f32(const char *name, size_t *count)
{
    size_t b;
    float *p = golden(name, &b);
    if (count)
        *count = b / sizeof(float);
    return p;
}

int32_t *tu_golden_i32(const char *name, size_t *count)
{
    size_t b;
    int32_t *p = golden(name, &b);
    if (count)
        *count = b / sizeof(int32_t);
    return p;
}

int tu_collect_token(void *user, petrel_token t)
{
    tu_tokens *c = user;
    if (c->n < TU_MAX_TOKENS)
        c->t[c->n] = t;
    c->n++;
    return 0;
}

void tu_expect_same_tokens(const tu_tokens *a, const tu_tokens *b, const char *what)
{
    cr_assert_eq(a->n, b->n, "%s: %d vs %d tokens", what, a->n, b->n);
    for (int i = 0; i < a->n && i < TU_MAX_TOKENS; i++)
        cr_assert_eq(a->t[i], b->t[i], "%s: token %d differs (%d vs %d)", what, i, a->t[i], b->t[i]);
}
