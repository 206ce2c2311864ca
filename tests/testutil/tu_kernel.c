// tests/testutil/tu_kernel.c — see tu_kernel.h.
#include "tests/testutil/tu_kernel.h"

#include <assert.h>

#include "kernels/matmul.h"

bool tu_next_kernel_path(size_t *it)
{
    static const pt_kernel_path paths[] = {PT_PATH_SCALAR, PT_PATH_AVX2, PT_PATH_AVXVNNI, PT_PATH_AVX512};
    assert(it);
    while (*it < sizeof paths / sizeof paths[0]) {
        const pt_kernel_path p = paths[(*it)++];
        if (pt_kernel_path_supported(p)) {
            pt_kernel_set_path(p);
            return true;
        }
    }
    pt_kernel_set_path(PT_PATH_AUTO);
    return false;
}
