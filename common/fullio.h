// common/fullio.h — whole-buffer writes and syncs with a fault-injection
// site (common/fault.h): the loops every writer needs around write(2),
// which may move fewer bytes than asked or be interrupted.
#ifndef PETREL_COMMON_FULLIO_H
#define PETREL_COMMON_FULLIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Writes all n bytes of buf to fd at offset off (pwrite) — or at the file
// position when off is PT_AT_POS (write) — resuming after short writes and
// EINTR. 0 when done; -1 with errno set otherwise (ENOSPC when the kernel
// accepts no byte). site names the fault-injection point (NULL: none).
#define PT_AT_POS UINT64_MAX
int pt_write_full(int fd, const void *buf, size_t n, uint64_t off, const char *site);

// fdatasync (data_only) or fsync of fd, retried on EINTR; 0, or -1 with
// errno set. site as for pt_write_full.
int pt_sync_full(int fd, bool data_only, const char *site);

#endif
