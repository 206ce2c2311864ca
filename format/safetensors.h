// format/safetensors.h — safetensors reader with full validation.
//
// Layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F8_E4M3", "shape": [..], "data_offsets": [b, e]}, ...,
//  "__metadata__": {...}}, then the data buffer; offsets are relative to it.
#ifndef PETREL_FORMAT_SAFETENSORS_H
#define PETREL_FORMAT_SAFETENSORS_H

#include <stdint.h>
#include "common/err.h"

typedef enum st_dtype {
    ST_F8_E4M3, ST_BF16, ST_F16, ST_F32, ST_F64, ST_I8, ST_U8, ST_I16, ST_I32, ST_I64, ST_BOOL,
} st_dtype;

typedef struct st_tensor {
    char *name;
    st_dtype dtype;
    uint32_t n_dims;
    uint64_t shape[8];     // PyTorch order: shape[0] outermost
    uint64_t begin, end;   // absolute byte range in the file
} st_tensor;

typedef struct st_file {
    char *path;
    int fd;
    uint64_t file_size;
    uint64_t n_tensors;
    st_tensor *tensors;    // (n_tensors,)
} st_file;

// Opens and validates: header length inside the file, JSON well-formed,
// known dtypes, byte ranges = shape x element size, inside the file, not
// overlapping. NULL + err (naming file and tensor) on failure.
st_file *st_open(const char *path, pt_err *err);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
size_t st_dtype_size(st_dtype t);
const char *st_dtype_name(st_dtype t);
// Reads the tensor's raw bytes into dst (end - begin bytes).
int st_read(const st_file *f, const st_tensor *t, void *dst, pt_err *err);
// Reads it converted to float32 (F8_E4M3 without scaling; BF16/F16/F32).
int st_read_f32(const st_file *f, const st_tensor *t, float *dst, pt_err *err);

#endif
