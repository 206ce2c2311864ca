#include "common/util.h"

#include "common/fault.h"
#include "common/fullio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

void *pt_alloc_aligned(size_t bytes)
{
    if (bytes == 0)
        bytes = PT_ALIGN;
    void *p = NULL;
    size_t n = pt_align_up(bytes, PT_ALIGN);
    if (posix_memalign(&p, PT_ALIGN, n) != 0)
        return NULL;
    memset(p, 0, n); // pre-fault: no page faults on the hot path later
    return p;
}

void *pt_alloc_aligned_lazy(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, PT_ALIGN, pt_align_up(bytes ? bytes : PT_ALIGN, PT_ALIGN)) != 0)
        return NULL;
    return p;
}

void pt_free_aligned(void *p) { free(p); }

double pt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t status_kb(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0) {
            v = strtoull(line + kl, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v * 1024;
}

uint64_t pt_rss_bytes(void) { return status_kb("/proc/self/status", "VmRSS:"); }
uint64_t pt_peak_rss_bytes(void) { return status_kb("/proc/self/status", "VmHWM:"); }
uint64_t pt_mem_available(void) { return status_kb("/proc/meminfo", "MemAvailable:"); }

int64_t pt_parse_size(const char *s)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    case '\0': break;
    default: return -1;
    }
    if (*end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    return (int64_t)(v * mul);
}

char *pt_read_file(const char *path, size_t *len, pt_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        pt_errf(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fseeko(f, 0, SEEK_END) != 0) {
        pt_errf(err, "%s: cannot seek: %s", path, strerror(errno));
        fclose(f);
        return NULL;
    }
    off_t n = ftello(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        pt_errf(err, "%s: out of memory (%lld bytes)", path, (long long)n);
        fclose(f);
        return NULL;
    }
    if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        pt_errf(err, "%s: short read", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    if (len)
        *len = (size_t)n;
    return buf;
}

int pt_fsync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

// Removes "<path>.tmp.<digits>" files last modified more than PT_STALE_TMP_S
// ago: temp files of writers killed between create and rename (kill -9,
// power loss). A live writer's temp is seconds old whatever host or PID it
// has (a directory may be shared over NFS), so age alone decides. Best
// effort: errors are ignored.
#define PT_STALE_TMP_S 3600
static void remove_stale_temps(const char *path)
{
    char *copy = strdup(path), *copy2 = strdup(path);
    DIR *d = copy && copy2 ? opendir(dirname(copy)) : NULL;
    if (d) {
        const char *dir = copy, *base = basename(copy2);
        const size_t bl = strlen(base);
        const time_t now = time(NULL);
        struct dirent *de;
        while ((de = readdir(d))) {
            const char *n = de->d_name;
            if (strncmp(n, base, bl) || strncmp(n + bl, ".tmp.", 5) || !n[bl + 5] ||
                strspn(n + bl + 5, "0123456789") != strlen(n + bl + 5))
                continue;
            char full[4096];
            struct stat st;
            if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, n) < sizeof full && lstat(full, &st) == 0 &&
                S_ISREG(st.st_mode) && now - st.st_mtime > PT_STALE_TMP_S)
                unlink(full);
        }
        closedir(d);
    }
    free(copy);
    free(copy2);
}

int pt_write_file_atomic(const char *path, const void *buf, size_t len, pt_err *err)
{
    return pt_write_file_atomic_at(path, buf, len, "atomic.write", err);
}

int pt_write_file_atomic_at(const char *path, const void *buf, size_t len, const char *site, pt_err *err)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp)
        return pt_errf(err, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return pt_errf(err, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    // Any failure removes the temp file: path keeps its previous contents.
    const char *what = NULL;
    if (pt_write_full(fd, buf, len, PT_AT_POS, site) != 0)
        what = "write";
    else if (pt_sync_full(fd, false, site) != 0)
        what = "fsync";
    if (what) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return pt_errf(err, "%s: %s of %s failed: %s (the previous file is kept)", path, what, tmp, strerror(e));
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return pt_errf(err, "%s: close of %s failed: %s (the previous file is kept)", path, tmp, strerror(e));
    }
    int fx = pt_fault("atomic.rename");
    if (fx > 0 || rename(tmp, path) != 0) {
        int e = fx > 0 ? fx : errno;
        unlink(tmp);
        return pt_errf(err, "%s: rename of %s failed: %s (the previous file is kept)", path, tmp, strerror(e));
    }
    pt_fsync_dir_of(path);
    remove_stale_temps(path);
    return 0;
}

void pt_progress_begin(pt_progress *p, const char *label, uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    p->t0 = p->last = pt_now();
    p->tty = isatty(STDERR_FILENO);
}

void pt_progress_update(pt_progress *p, uint64_t done, const char *detail)
{
    p->done = done;
    double now = pt_now();
    double interval = p->tty ? 0.2 : 5.0;
    if (now - p->last < interval && done < p->total)
        return;
    p->last = now;
    double el = now - p->t0;
    double rate = el > 0 ? (double)done / el / 1e6 : 0;
    double frac = p->total ? (double)done / (double)p->total : 0;
    double eta = (rate > 0 && p->total > done) ? (double)(p->total - done) / 1e6 / rate : 0;
    if (p->tty) {
        int width = 30, fill = (int)(frac * width);
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r%s [%s] %5.1f%% %8.1f MB/s ETA %5.0fs %s\033[K", p->label, bar,
                frac * 100, rate, eta, detail ? detail : "");
    } else {
        fprintf(stderr, "%s: %.1f%% (%.1f/%.1f MB) %.1f MB/s ETA %.0fs %s\n", p->label, frac * 100,
                (double)done / 1e6, (double)p->total / 1e6, rate, eta, detail ? detail : "");
    }
}

void pt_progress_end(pt_progress *p, const char *detail)
{
    double el = pt_now() - p->t0;
    if (p->tty)
        fprintf(stderr, "\r\033[K");
    fprintf(stderr, "%s: done, %.1f MB in %.1fs (%.1f MB/s) %s\n", p->label, (double)p->done / 1e6, el,
            el > 0 ? (double)p->done / el / 1e6 : 0, detail ? detail : "");
}

bool pt_env_off(const char *name, int *cache)
{
    if (*cache < 0) {
        const char *e = getenv(name);
        *cache = e && !strcmp(e, "off");
    }
    return *cache;
}
