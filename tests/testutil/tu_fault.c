// tests/testutil/tu_fault.c — see tu_fault.h.
#include "tests/testutil/tu_fault.h"

#include <criterion/criterion.h>
#include <stdio.h>

#include "common/fault.h"

void tu_arm_read_faults(unsigned fail_from, unsigned fail_count, unsigned short_every)
{
    // "read:F:EIO:C" first: the first rule that matches an event decides it.
    char spec[32 * (TU_FAULT_SHORTS + 1)];
    size_t n = 0;
    spec[0] = 0;
    if (fail_from)
        n += (size_t)snprintf(spec + n, sizeof spec - n, "read:%u:EIO:%u,", fail_from, fail_count ? fail_count : 1);
    for (unsigned k = 1; short_every && k <= TU_FAULT_SHORTS; k++)
        n += (size_t)snprintf(spec + n, sizeof spec - n, "read:%u:short,", k * short_every);
    cr_assert_lt(n, sizeof spec, "fault plan too long");
    pt_err e = {{0}};
    cr_assert_eq(pt_fault_arm(spec, &e), 0, "arm '%s': %s", spec, e.msg);
}
