// format/gguf.h — GGUF v3 reader and writer.
//
// File layout: magic "GGUF", u32 version (3), u64 n_tensors, u64 n_kv, the
// key/value records, the tensor-info records (name, n_dims, ne[], type,
// offset relative to the data section), padding to `general.alignment`
// (default 32; Petrel writes 4096), then the data section. All little-endian.
// Tensor data lie in tensor-info order, back to back, each padded to the
// alignment.
//
// Split files (llama.cpp's gguf-split): NAME-0000K-of-0000N.gguf, each part
// a complete GGUF with its own tensor infos and data section; every part
// has `split.no` (u16, 0-based), `split.count` (u16) and
// `split.tensors.count` (i32, tensors of all parts); the model's metadata
// is in part 1 only. gguf_open on any part opens all of them and presents
// one file: the metadata of part 1, one tensor table whose tensors record
// their part, and located offsets (io/io.h) that every read decodes.
#ifndef PETREL_FORMAT_GGUF_H
#define PETREL_FORMAT_GGUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "common/err.h"

enum gguf_vtype {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3, GGUF_UINT32 = 4,
    GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9,
    GGUF_UINT64 = 10, GGUF_INT64 = 11, GGUF_FLOAT64 = 12,
};

typedef struct gguf_str {
    uint64_t len;
    char *s;               // NUL-terminated copy (len bytes + NUL)
} gguf_str;

typedef struct gguf_kv {
    char *key;
    uint32_t type;         // enum gguf_vtype
    uint32_t arr_type;     // element type when type == GGUF_ARRAY
    uint64_t n;            // element count (1 for scalars)
    union {
        uint64_t u64; int64_t i64; double f64;   // scalars widened
        uint32_t u32; int32_t i32; float f32; bool b;
    } v;
    gguf_str str;          // type == GGUF_STRING
    void *arr;             // arrays: (n,) elements of arr_type; strings as gguf_str[n]
} gguf_kv;

#define GGUF_MAX_DIMS 4
typedef struct gguf_tensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; // ggml order: ne[0] innermost (row length)
    uint32_t type;              // ggml type id (pt_dtype for the types Petrel knows)
    uint32_t part;              // index into gguf_file.parts (0 for a single file)
    uint64_t offset;            // located offset (io/io.h): part in the top bits, absolute
                                // byte offset in that part's file below; = file offset for part 0
    uint64_t size;              // bytes
} gguf_tensor;

// One file of a (possibly split) model.
typedef struct gguf_part {
    char *path;
    int fd;                     // open O_RDONLY
    uint64_t file_size;
    uint64_t data_offset;       // absolute offset of this file's data section
    uint64_t n_tensors;         // tensors stored in this file
} gguf_part;

typedef struct gguf_file {
    char *path;             // part 1 (the metadata holder); path/fd/file_size/
    int fd;                 // data_offset repeat parts[0]. fd open O_RDONLY
    uint64_t file_size;
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;            // (n_kv,)
    uint64_t n_tensors;
    gguf_tensor *tensors;   // (n_tensors,)
    uint64_t alignment;
    uint64_t data_offset;   // absolute offset of the data section
    uint32_t n_parts;       // 1 unless split
    gguf_part *parts;       // (n_parts,) in split.no order
} gguf_file;

// Opens and validates a GGUF file: magic, version 2/3, every record inside
// the file, tensor type ids known to ggml (an unknown id is an error naming
// file, tensor and id), row lengths whole blocks of their type, offsets
// aligned, in range and not overlapping, sizes consistent with shape and
// type. A part of a split model opens every part (see above) and checks
// they belong together: same split.count and split.tensors.count, every
// split.no present once, the tensor counts adding up, no tensor twice; a
// missing or foreign part is an error naming that file. NULL + err on failure.
gguf_file *gguf_open(const char *path, pt_err *err);
void gguf_close(gguf_file *g);

const gguf_kv *gguf_get(const gguf_file *g, const char *key);
// Typed getters: 0 on success; -1 + err (naming file and key) if the key is
// missing or has another type. gguf_get_u32 accepts only UINT32 (as llama.cpp).
int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out, pt_err *err);
int gguf_get_f32(const gguf_file *g, const char *key, float *out, pt_err *err);
int gguf_get_bool(const gguf_file *g, const char *key, bool *out, pt_err *err);
const char *gguf_get_str(const gguf_file *g, const char *key, pt_err *err);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);
// Reads bytes at a located offset (a tensor's offset, or inside it) with
// pread from the right part; -1 + err (naming that part's file) on failure.
int gguf_read(const gguf_file *g, uint64_t offset, void *dst, uint64_t bytes, pt_err *err);
// ggml's name of a type id ("Q4_K", "TQ1_0"); "?" for an id ggml does not have.
const char *gguf_type_name(uint32_t type);
// Bytes of a row of n values of ggml type `type`, from the type-traits
// table (kernels/qtypes.h) or, for ggml types Petrel does not compute
// (I8..F64, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0), ggml's own figures;
// 0 when the id is unknown or n is not a whole number of blocks.
uint64_t gguf_row_bytes(uint32_t type, uint64_t n);

// ---- writer ---------------------------------------------------------------
// Collects metadata and tensor infos, lays tensors out (aligned, in order of
// addition), then writes the header. Tensor data are written by the caller
// at gguf_writer_tensor_offset() (absolute), e.g. with pwrite.
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(uint32_t alignment);
void gguf_writer_free(gguf_writer *w);
void gguf_w_u16(gguf_writer *w, const char *key, uint16_t v);
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_w_f32(gguf_writer *w, const char *key, float v);
void gguf_w_bool(gguf_writer *w, const char *key, bool v);
void gguf_w_str(gguf_writer *w, const char *key, const char *v);
void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
void gguf_w_arr_u32(gguf_writer *w, const char *key, const uint32_t *v, uint64_t n);
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n);
// Copies one record read by gguf_open (any value type) under its own key.
void gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv);
// Has a metadata key of this name been added?
bool gguf_writer_has_key(const gguf_writer *w, const char *key);
// Adds a tensor; returns its index. ne in ggml order.
int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                  uint32_t type);
uint64_t gguf_writer_header_size(gguf_writer *w);        // = data section offset
uint64_t gguf_writer_tensor_offset(gguf_writer *w, int i); // absolute
uint64_t gguf_writer_tensor_size(gguf_writer *w, int i);
uint64_t gguf_writer_total_size(gguf_writer *w);          // whole file
// Serialises the header (and padding up to the data section) into a buffer.
void *gguf_writer_header(gguf_writer *w, uint64_t *len);

#endif
