// tests/testutil/tu_kernel.h — running a check on every kernel path
// (kernels/matmul.h) this CPU supports.
#ifndef PETREL_TESTS_TU_KERNEL_H
#define PETREL_TESTS_TU_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

// Selects the next kernel path this CPU supports, in the order scalar,
// AVX2, AVX-VNNI, AVX-512, after the cursor *it (start it at 0), and
// returns true; once none is left, selects PT_PATH_AUTO again and returns
// false. The loop
//     for (size_t it = 0; tu_next_kernel_path(&it);) { ... }
// runs its body once per supported path and leaves the automatic choice
// in force when it ends normally.
bool tu_next_kernel_path(size_t *it);

#endif
