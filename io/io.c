#include "io/io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int pt_pread_full(int fd, const char *path, uint64_t off, void *buf, uint64_t len, pt_err *err)
{
    char *p = buf;
    uint64_t done = 0;
    int retries = 0;
    while (done < len) {
        ssize_t r = pread(fd, p + done, len - done, (off_t)(off + done));
        if (r < 0) {
            if ((errno == EINTR || errno == EAGAIN) && retries++ < 100)
                continue;
            return pt_errf(err, "%s: read of %llu bytes at offset %llu failed: %s", path,
                           (unsigned long long)len, (unsigned long long)off, strerror(errno));
        }
        if (r == 0)
            return pt_errf(err, "%s: unexpected end of file reading %llu bytes at offset %llu", path,
                           (unsigned long long)len, (unsigned long long)off);
        done += (uint64_t)r;
    }
    return 0;
}
