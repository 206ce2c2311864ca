// kernels/matmul.h — matrix-vector and matrix-matrix products over the
// stored weight types.
//
// A weight matrix W is `rows` rows of `cols` values each, row-major, in its
// storage type (one row = pt_row_bytes(type, cols) bytes): the PyTorch
// [out, in] layout, i.e. GGUF ne = {cols, rows}.
//
// Numerics contract (the engine's placement invariant rests on it):
//  - For Q8_0 / Q4_0 weights the input vector is first quantised to Q8_0
//    (per 32-block, as ggml's x86 quantize_row_q8_0: id = 127/amax,
//    ties to even), each block's integer sums (of 4 products per lane)
//    are exact, and block results are accumulated in fp32 in ggml's x86
//    order (kern_internal.h): the products equal llama.cpp's on x86. For F32 / F16 / BF16 weights, products are accumulated in
//    fp32 in a fixed order.
//  - The result for one output row depends only on that row and the input
//    vector: never on the batch size, on which other rows are computed, on
//    the thread count, or on the code path (scalar, AVX2, AVX-512) chosen at
//    run time. pt_gemm(batch=b) gives, bit for bit, what b pt_gemv calls give.
#ifndef PETREL_KERNELS_MATMUL_H
#define PETREL_KERNELS_MATMUL_H

#include <stdint.h>
#include "kernels/quant.h"

typedef struct pt_mat {
    const void *data;  // (rows, cols) in storage type `type`
    pt_dtype type;
    int64_t rows;      // output dimension
    int64_t cols;      // input dimension
} pt_mat;

// y (rows) = W (rows, cols) · x (cols). Threads over rows with OpenMP.
void pt_gemv(const pt_mat *W, const float *x, float *y);

// Y (batch, rows) = X (batch, cols) · W^T. Same per-row result as pt_gemv.
void pt_gemm(const pt_mat *W, const float *X, int64_t batch, float *Y);

// YA = X · A^T and YB = X · B^T (as two pt_gemm calls, bit for bit) in one
// parallel region, quantising X once: for gate/up pairs of SwiGLU FFNs.
void pt_gemm_pair(const pt_mat *A, const pt_mat *B, const float *X, int64_t batch, float *YA, float *YB);

// Same as pt_gemm but computes only output rows [r0, r1); used for
// per-head slices of a larger matrix. Y has row stride ldy and Y points at
// row r0's output: Y[b * ldy + (r - r0)] = W[r] · X[b] (pass Y + r0 to
// write into a full-width output).
void pt_gemm_rows(const pt_mat *W, int64_t r0, int64_t r1, const float *X, int64_t batch,
                  float *Y, int64_t ldy);

// Same as pt_gemm_rows(W, 0, W->rows, ...) for a matrix whose rows lie
// ld_bytes apart (>= one row's bytes) instead of back to back, e.g. the c_kv
// part of an attention cache row [c_kv | k_rope]: with F32 rows, Y[b][t] is
// bit for bit pt_dot_f32(X[b], row t, cols).
void pt_gemm_strided(const pt_mat *W, size_t ld_bytes, const float *X, int64_t batch, float *Y, int64_t ldy);

// Frees the calling thread's grow-only activation scratch (optional; the
// buffers are reused across calls so the decode loop does not allocate).
void pt_matmul_scratch_free(void);

// Which code path runs ("scalar", "avx2", "avxvnni", "avx512vnni"); can be forced for
// tests. Returns the previous setting. Forcing a path the CPU lacks falls
// back to the best supported one below it (check pt_kernel_path_supported).
// Not meant to be changed while other threads are multiplying. Without a
// call, the environment variable PETREL_KERNELS (scalar | avx2 | avxvnni |
// avx512) chooses the path; otherwise the best one the CPU supports.
typedef enum {
    PT_PATH_AUTO = 0,
    PT_PATH_SCALAR,
    PT_PATH_AVX2,
    PT_PATH_AVX512,  // AVX-512 F/BW/VL + VNNI
    PT_PATH_AVXVNNI, // AVX2 + AVX-VNNI (VEX vpdpbusd), no AVX-512
} pt_kernel_path;
pt_kernel_path pt_kernel_set_path(pt_kernel_path p);
const char *pt_kernel_path_name(void);
bool pt_kernel_path_supported(pt_kernel_path p);

#endif
