// tests/testutil/tu_float.c — see tu_float.h.
#include "tests/testutil/tu_float.h"

#include <assert.h>
#include <math.h>
#include <string.h>

float tu_max_abs_diff(const float *a, const float *b, size_t n)
{
    assert((a && b) || !n);
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        const float d = fabsf(a[i] - b[i]);
        if (!(d <= m))
            m = d; // NaN propagates as a failure
    }
    return m;
}

size_t tu_count_bit_diffs(const float *a, const float *b, size_t n)
{
    assert((a && b) || !n);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += memcmp(a + i, b + i, sizeof(float)) != 0;
    return d;
}
