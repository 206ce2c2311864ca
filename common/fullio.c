// common/fullio.c — write / sync loops with fault-injection sites (fullio.h).
#include "common/fullio.h"

#include <errno.h>
#include <unistd.h>

#include "common/fault.h"

int pt_write_full(int fd, const void *buf, size_t n, uint64_t off, const char *site)
{
    const unsigned char *p = buf;
    while (n > 0) {
        const size_t want = n > (1u << 30) ? (1u << 30) : n; // (Linux moves at most ~2 GiB per call)
        const int fx = site ? pt_fault(site) : 0;
        ssize_t w;
        if (fx > 0) {
            errno = fx;
            w = -1;
        } else {
            const size_t len = fx == PT_FAULT_SHORT ? pt_fault_short_len(want) : want;
            w = off == PT_AT_POS ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) { // no progress: what a full device does on some file systems
            errno = ENOSPC;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        if (off != PT_AT_POS)
            off += (uint64_t)w;
    }
    return 0;
}

int pt_sync_full(int fd, bool data_only, const char *site)
{
    for (;;) {
        const int fx = site ? pt_fault(site) : 0;
        int rc;
        if (fx > 0) {
            errno = fx;
            rc = -1;
        } else {
            rc = data_only ? fdatasync(fd) : fsync(fd);
        }
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}
