// convert/journal.c — durable append-only progress file.
#include "convert/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fullio.h"
#include "common/util.h"

uint64_t pt_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

uint64_t pt_hash_file(uint64_t h, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pt_hash_bytes(h, "<missing>", 9);
    uint8_t buf[1 << 16];
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0)
        h = pt_hash_bytes(h, buf, (size_t)r);
    close(fd);
    return h;
}

// Appends one line and makes it durable (site "journal.write"). A write
// that fails part-way leaves a line without its newline, which reading
// ignores and the next open cuts off (pt_journal_open).
static int append_line(pt_journal *j, const char *line, pt_err *err)
{
    if (pt_write_full(j->fd, line, strlen(line), PT_AT_POS, "journal.write") != 0)
        return pt_errf(err, "%s: write failed: %s", j->path, strerror(errno));
    if (pt_sync_full(j->fd, false, "journal.write") != 0)
        return pt_errf(err, "%s: fsync failed: %s", j->path, strerror(errno));
    return 0;
}

// Parses an existing journal's complete lines; *used = bytes they span
// (a torn last line after them is not counted).
static int parse(pt_journal *j, const char *text, size_t len, size_t *used, pt_err *err)
{
    *used = 0;
    size_t pos = 0;
    int line_no = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        if (!nl)
            break; // torn last line: ignored
        char line[512];
        size_t ll = (size_t)(nl - (text + pos));
        if (ll >= sizeof line)
            return pt_errf(err, "%s: line %d too long", j->path, line_no + 1);
        memcpy(line, text + pos, ll);
        line[ll] = 0;
        pos += ll + 1;
        *used = pos;
        line_no++;
        uint64_t h;
        unsigned ns, a, b, s;
        char name[400];
        if (line_no == 1) {
            if (sscanf(line, "petrel-convert-journal 1 %" SCNx64 " %u", &h, &ns) != 2)
                return pt_errf(err, "%s: not a petrel conversion journal", j->path);
            if (h != j->src_hash || ns != j->n_shards)
                return pt_errf(err, "%s: belongs to a conversion with other inputs or options; use --force to "
                               "start over", j->path);
        } else if (sscanf(line, "mtp %u %u", &a, &b) == 2) {
            j->omit_embed = (int)a;
            j->omit_head = (int)b;
        } else if (sscanf(line, "done %u %399s", &s, name) == 2 && s < j->n_shards) {
            if (!j->done[s])
                j->n_done++;
            j->done[s] = true;
        } else {
            return pt_errf(err, "%s: line %d unreadable: '%s'", j->path, line_no, line);
        }
    }
    if (line_no == 0)
        return 1; // empty or torn header: start afresh
    return 0;
}

int pt_journal_open(pt_journal *j, const char *path, uint64_t src_hash, uint32_t n_shards, bool *resumed,
                    pt_err *err)
{
    memset(j, 0, sizeof *j);
    j->fd = -1;
    j->path = strdup(path);
    j->src_hash = src_hash;
    j->n_shards = n_shards;
    j->omit_embed = j->omit_head = -1;
    j->done = calloc(n_shards ? n_shards : 1, sizeof *j->done);
    *resumed = false;
    if (access(path, F_OK) == 0) {
        size_t len;
        char *text = pt_read_file(path, &len, err);
        if (!text) {
            pt_journal_close(j);
            return -1;
        }
        size_t used;
        int rc = parse(j, text, len, &used, err);
        free(text);
        if (rc < 0) {
            pt_journal_close(j);
            return -1;
        }
        if (rc == 0) {
            j->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
            if (j->fd < 0) {
                pt_errf(err, "%s: cannot open: %s", path, strerror(errno));
                pt_journal_close(j);
                return -1;
            }
            // A torn last line (a kill or a failed write in the middle of an
            // append) is cut off, or the next line would be glued to it.
            if (used < len && (ftruncate(j->fd, (off_t)used) != 0 || pt_sync_full(j->fd, false, NULL) != 0)) {
                pt_errf(err, "%s: cannot cut its torn last line: %s", path, strerror(errno));
                pt_journal_close(j);
                return -1;
            }
            *resumed = true;
            return 0;
        }
    }
    j->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (j->fd < 0) {
        pt_errf(err, "%s: cannot create: %s", path, strerror(errno));
        pt_journal_close(j);
        return -1;
    }
    char line[128];
    snprintf(line, sizeof line, "petrel-convert-journal 1 %016" PRIx64 " %u\n", src_hash, n_shards);
    if (append_line(j, line, err) < 0) {
        pt_journal_close(j);
        return -1;
    }
    pt_fsync_dir_of(path);
    return 0;
}

int pt_journal_set_mtp(pt_journal *j, bool omit_embed, bool omit_head, pt_err *err)
{
    char line[64];
    snprintf(line, sizeof line, "mtp %d %d\n", omit_embed, omit_head);
    if (append_line(j, line, err) < 0)
        return -1;
    j->omit_embed = omit_embed;
    j->omit_head = omit_head;
    return 0;
}

int pt_journal_mark_done(pt_journal *j, uint32_t shard, const char *name, pt_err *err)
{
    char line[512];
    snprintf(line, sizeof line, "done %u %s\n", shard, name);
    if (append_line(j, line, err) < 0)
        return -1;
    if (!j->done[shard])
        j->n_done++;
    j->done[shard] = true;
    return 0;
}

void pt_journal_close(pt_journal *j)
{
    if (j->fd >= 0)
        close(j->fd);
    free(j->path);
    free(j->done);
    memset(j, 0, sizeof *j);
    j->fd = -1;
}
