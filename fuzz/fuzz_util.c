// fuzz/fuzz_util.c — scratch files for the fuzz targets (see fuzz_util.h).
#include "fuzz/fuzz_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static void fz_cleanup(void)
{
    char cmd[300];
    if (g_dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "fuzz: could not remove %s\n", g_dir);
    }
}

const char *fz_dir(void)
{
    if (!g_dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/petrel-fuzz-%d", t && *t ? t : "/tmp", (int)getpid());
        if (mkdir(g_dir, 0700) != 0) {
            perror(g_dir);
            abort();
        }
        atexit(fz_cleanup);
    }
    return g_dir;
}

const char *fz_write(const char *name, const uint8_t *data, size_t size)
{
    // Eight slots are plenty: a target writes at most a handful of files.
    static char paths[8][512];
    static const char *names[8];
    int slot = 0;
    while (slot < 7 && names[slot] && strcmp(names[slot], name) != 0)
        slot++;
    names[slot] = name;
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fz_dir(), name);
    int fd = open(paths[slot], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(paths[slot]);
        abort();
    }
    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            perror(paths[slot]);
            abort();
        }
        off += (size_t)w;
    }
    close(fd);
    return paths[slot];
}

const char *fz_src(const char *rel)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", PETREL_SOURCE_DIR, rel);
    return p;
}
