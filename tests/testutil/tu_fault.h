// tests/testutil/tu_fault.h — the fault plans the I/O tests arm at the
// expert-read site "read" (common/fault.h), the one fault-injection
// mechanism of the reader.
#ifndef PETREL_TESTS_TU_FAULT_H
#define PETREL_TESTS_TU_FAULT_H

// Arms the process-wide fault plan (replacing any) so that device
// completions fail_from .. fail_from + fail_count - 1 fail with EIO (none
// when fail_from is 0) and every short_every-th completion (0: none) is
// short; the EIO run wins where both apply. The plan holds a bounded number
// of rules, so only the first TU_FAULT_SHORTS short completions are listed.
// Aborts the test when the plan is refused. pt_fault_disarm ends it.
#define TU_FAULT_SHORTS 15
void tu_arm_read_faults(unsigned fail_from, unsigned fail_count, unsigned short_every);

#endif
