// convert/tensorconv.h — one unit of conversion: read a checkpoint tensor
// (dequantising FP8 with its 128x128 block scales), rearrange it (kv_b
// split), quantise it to the output type and pwrite it at its final offset.
// Works in chunks of rows, so memory stays bounded by a few MiB per thread
// whatever the tensor size.
#ifndef PETREL_CONVERT_TENSORCONV_H
#define PETREL_CONVERT_TENSORCONV_H

#include <stdint.h>
#include "common/err.h"
#include "convert/plan.h"
#include "format/safetensors.h"

// A checked view of a unit's source: the weight and (FP8) its scale.
typedef struct pt_src_view {
    const st_file *f;        // shard holding the weight
    const st_tensor *t;      // the weight
    uint64_t rows, cols;     // HF [rows, cols]; 1-D: [1, n]
    float *scale;            // (ceil(rows/128), ceil(cols/128)) block scales, NULL if not FP8
    uint64_t scale_cols;     // ceil(cols/128)
    uint64_t in_bytes;       // bytes read from the checkpoint (weight + scale)
} pt_src_view;

// Looks the unit's weight up in shard f (and its scale in sf, may equal f or
// be NULL when the index lists none) and checks dtype and shape against the
// plan (i.e. config.json). Loads the scale. -1 + err naming file and tensor.
int pt_src_view_open(pt_src_view *v, const pt_plan *p, const pt_unit *u, const st_file *f, const st_file *sf,
                     pt_err *err);
void pt_src_view_free(pt_src_view *v);

// Scratch buffers reused across units.
typedef struct pt_convbuf {
    uint8_t *raw;   // (cap,) bytes of raw source rows
    float *f32;     // (cap,) dequantised values
    float *tmp;     // (cap,) rearranged values (kv_b split)
    uint8_t *out;   // (cap * 4,) encoded output rows
    uint64_t cap;   // elements
} pt_convbuf;
void pt_convbuf_free(pt_convbuf *b);

// Converts the unit and pwrites it to out_fd. -1 + err on a read/write error.
int pt_unit_convert(const pt_plan *p, const pt_unit *u, const pt_src_view *v, int out_fd, const char *out_path,
                    pt_convbuf *b, pt_err *err);

// Reads rows [r0, r0 + n) of the source as float32 into dst (n * cols values):
// BF16/F16/F32 exactly, F8_E4M3 as fp8 * scale_inv[r / 128][c / 128] in float32.
int pt_src_rows_f32(const pt_src_view *v, uint64_t r0, uint64_t n, uint8_t *raw, float *dst, pt_err *err);

#endif
