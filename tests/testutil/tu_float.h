// tests/testutil/tu_float.h — comparing float arrays against references.
#ifndef PETREL_TESTS_TU_FLOAT_H
#define PETREL_TESTS_TU_FLOAT_H

#include <stddef.h>

// max |a[i] - b[i]| over n elements; a NaN in either propagates (the
// result is then NaN, which fails every "<= tolerance" check).
float tu_max_abs_diff(const float *a, const float *b, size_t n);

// How many of the n floats of a and b differ in their bits (0: identical,
// +0 and -0 counted as different).
size_t tu_count_bit_diffs(const float *a, const float *b, size_t n);

#endif
