// common/fault.h — test-only fault injection at named I/O points.
//
// Compiled into every build but inert until armed, either by the API
// (pt_fault_arm, for tests in the same process) or by the environment of
// any petrel process:
//
//   PETREL_FAULT=SITE:NTH[:WHAT[:COUNT]][,SITE:NTH...]
//
// The NTH event (from 1) at SITE and the COUNT - 1 after it (default
// COUNT 1; 0 = every one from NTH on) fail with WHAT: an errno name or
// number (EIO, ENOSPC, EINTR, EAGAIN, ...; default EIO) or "short" (the
// operation moves fewer bytes than asked, as the kernel may). An
// unparsable PETREL_FAULT is reported on stderr once and arms nothing.
//
// Sites (each hook counts its own events):
//   read          an expert-read device completion (io/reader.c, both backends)
//   convert.write a pwrite of converted tensor data or the header (convert/)
//   convert.sync  the fdatasync / fsync of the conversion output
//   journal.write an append to <out>.journal (convert/journal.c)
//   state.write   write / fsync of a saved state's temp file (engine/state.c)
//   usage.write   write / fsync of a usage file's temp file (cache/usage.c)
//   atomic.rename the rename of any pt_write_file_atomic temp file
//
// Off, a hook costs one load of a global and a predicted branch.
#ifndef PETREL_COMMON_FAULT_H
#define PETREL_COMMON_FAULT_H

#include <stdbool.h>

#include "common/err.h"

// What pt_fault returns for a "short" fault (no errno uses this value).
#define PT_FAULT_SHORT (-1)

// 0 when nothing is armed (and PETREL_FAULT has been looked at), -1 before
// the environment is read, 1 when armed. Read by pt_fault only.
extern int pt_fault_state_;

// The slow path of pt_fault (reads PETREL_FAULT on first use).
int pt_fault_check_(const char *site);

// Counts one event at site; 0 when it proceeds normally, an errno (> 0)
// when it must fail with that errno, PT_FAULT_SHORT when it must move
// fewer bytes than asked.
static inline int pt_fault(const char *site)
{
    if (__builtin_expect(pt_fault_state_ == 0, 1))
        return 0;
    return pt_fault_check_(site);
}

// Arms the plan spec (PETREL_FAULT syntax), replacing any plan and
// resetting every site's event count; -1 + err when spec is malformed.
int pt_fault_arm(const char *spec, pt_err *err);
// Disarms every site (PETREL_FAULT is not read again).
void pt_fault_disarm(void);
// How many faults have been injected since the last arm.
long pt_fault_injected(void);

// Byte count for a "short" operation of n bytes: about half, at least 1,
// never more than n - 1 when n > 1.
static inline unsigned long pt_fault_short_len(unsigned long n) { return n > 1 ? n / 2 : n; }

#endif
