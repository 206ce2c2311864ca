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
