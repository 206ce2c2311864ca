// kernels/qt_lanes.h — the two pieces of ggml's x86 lane arithmetic that
// the scalar contracts of qt_legacy.c, qt_k.c and qt_iq.c all spell out:
// the horizontal sum of eight f32 lanes and the eight int32 lane sums of a
// 256-value super-block. Not a public header.
#ifndef PETREL_KERNELS_QT_LANES_H
#define PETREL_KERNELS_QT_LANES_H

#include <stdint.h>

// ggml's hsum_float_8: ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)).
static inline float qt_hsum8(const float a[8])
{
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// The eight lane sums of one super-block in ggml's 32-value registers:
// register r (0..7) holds values 32r .. 32r + 31, its lane l sums positions
// 32r + 4l .. + 3, all in 16-value group 2r + l / 4, so
//   sumi[l] = sum_r sc16[2r + l/4] * sum_{v<4} q(32r+4l+v) * x(32r+4l+v),
// exact in int32. q (256, the weights as integers in value order), sc16
// (16, the integer scale of each 16-value group), x (256, activation quants).
static inline void qt_lane_sums(const int8_t q[256], const int32_t sc16[16], const int8_t *x, int32_t sumi[8])
{
    for (int l = 0; l < 8; l++)
        sumi[l] = 0;
    for (int r = 0; r < 8; r++)
        for (int l = 0; l < 8; l++) {
            const int k = 32 * r + 4 * l;
            const int32_t p = q[k] * x[k] + q[k + 1] * x[k + 1] + q[k + 2] * x[k + 2] + q[k + 3] * x[k + 3];
            sumi[l] += sc16[2 * r + l / 4] * p;
        }
}

#endif
