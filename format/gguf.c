// format/gguf.c — GGUF v3 reader (full validation) and writer.
//
// The reader maps the file read-only while parsing the header, copies every
// record into plain heap structs, checks each one against the file size and
// unmaps again; afterwards tensor data are read with pread (gguf_read).
#include "format/gguf.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "io/io.h"
#include "kernels/qtypes.h"
#include "kernels/quant.h"

// ---- type sizes -------------------------------------------------------------

// Bytes of one value of a metadata scalar type; 0 for string/array/unknown.
static size_t vtype_size(uint32_t t)
{
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

// ggml types the traits table (kernels/qtypes.h) has no row for: Petrel
// cannot compute them, but a file holding them is still a well-formed GGUF
// whose layout must be understood (so the engine can name the tensor and
// type it refuses). Figures from ggml.c's type_traits.
typedef struct foreign_type {
    uint32_t id;
    const char *name;
    uint32_t blck, bytes;
} foreign_type;

static const foreign_type foreign[] = {
    {24, "I8", 1, 1},      {25, "I16", 1, 2},    {26, "I32", 1, 4},   {27, "I64", 1, 8},
    {28, "F64", 1, 8},     {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66}, {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36}, {41, "Q1_0", 128, 18}, {42, "Q2_0", 64, 18},
};

static const foreign_type *foreign_of(uint32_t t)
{
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
        if (foreign[i].id == t)
            return &foreign[i];
    return NULL;
}

// Values per block and bytes per block of a type id; false if unknown.
// Q8_1 / Q8_K are activation layouts, never stored: unknown here.
static bool type_block(uint32_t t, uint64_t *blck, uint64_t *bytes)
{
    const pt_qtraits *q = t == PT_Q8_1 || t == PT_Q8_K ? NULL : pt_qtraits_of(t);
    if (q) {
        *blck = (uint64_t)q->blck;
        *bytes = (uint64_t)q->bytes;
        return true;
    }
    const foreign_type *f = foreign_of(t);
    if (f) {
        *blck = f->blck;
        *bytes = f->bytes;
        return true;
    }
    return false;
}

uint64_t gguf_row_bytes(uint32_t t, uint64_t n)
{
    uint64_t blck, bytes;
    if (!type_block(t, &blck, &bytes) || n % blck)
        return 0;
    return n / blck * bytes;
}

const char *gguf_type_name(uint32_t t)
{
    const pt_qtraits *q = t == PT_Q8_1 || t == PT_Q8_K ? NULL : pt_qtraits_of(t);
    if (q)
        return q->ggml_name;
    const foreign_type *f = foreign_of(t);
    return f ? f->name : "?";
}

// ---- reader -----------------------------------------------------------------

// A bounds-checked cursor over the mapped header.
typedef struct cursor {
    const uint8_t *base;
    uint64_t size;   // file size
    uint64_t pos;
    const char *path;
    pt_err *err;
} cursor;

static int cur_need(cursor *c, uint64_t n, const char *what)
{
    if (n > c->size || c->pos > c->size - n)
        return pt_errf(c->err, "%s: truncated header: %s at offset %llu needs %llu bytes, file has %llu",
                       c->path, what, (unsigned long long)c->pos, (unsigned long long)n,
                       (unsigned long long)c->size);
    return 0;
}

static int cur_bytes(cursor *c, void *dst, uint64_t n, const char *what)
{
    if (cur_need(c, n, what) < 0)
        return -1;
    memcpy(dst, c->base + c->pos, n);
    c->pos += n;
    return 0;
}

static int cur_u32(cursor *c, uint32_t *v, const char *what) { return cur_bytes(c, v, 4, what); }
static int cur_u64(cursor *c, uint64_t *v, const char *what) { return cur_bytes(c, v, 8, what); }

// Reads a GGUF string (u64 length + bytes) into a NUL-terminated copy.
static int cur_str(cursor *c, gguf_str *s, const char *what)
{
    uint64_t len;
    if (cur_u64(c, &len, what) < 0 || cur_need(c, len, what) < 0)
        return -1;
    s->s = malloc(len + 1);
    if (!s->s)
        return pt_errf(c->err, "%s: out of memory reading %s", c->path, what);
    memcpy(s->s, c->base + c->pos, len);
    s->s[len] = 0;
    s->len = len;
    c->pos += len;
    return 0;
}

// Reads the value of one metadata record (type already read into kv->type).
static int read_kv_value(cursor *c, gguf_kv *kv)
{
    char what[320];
    snprintf(what, sizeof what, "key '%s'", kv->key);
    kv->n = 1;
    if (kv->type == GGUF_STRING)
        return cur_str(c, &kv->str, what);
    if (kv->type == GGUF_ARRAY) {
        if (cur_u32(c, &kv->arr_type, what) < 0 || cur_u64(c, &kv->n, what) < 0)
            return -1;
        if (kv->arr_type == GGUF_STRING) {
            // Each string needs at least its 8-byte length: bound n by the file.
            if (kv->n > (c->size - c->pos) / 8)
                return pt_errf(c->err, "%s: key '%s': string array of %llu elements exceeds the file",
                               c->path, kv->key, (unsigned long long)kv->n);
            gguf_str *a = calloc(kv->n ? kv->n : 1, sizeof *a);
            if (!a)
                return pt_errf(c->err, "%s: key '%s': out of memory", c->path, kv->key);
            kv->arr = a;
            for (uint64_t i = 0; i < kv->n; i++)
                if (cur_str(c, &a[i], what) < 0)
                    return -1;
            return 0;
        }
        size_t es = vtype_size(kv->arr_type);
        if (es == 0)
            return pt_errf(c->err, "%s: key '%s': unsupported array element type %u", c->path, kv->key,
                           kv->arr_type);
        if (kv->n > (c->size - c->pos) / es)
            return pt_errf(c->err, "%s: key '%s': array of %llu elements exceeds the file", c->path,
                           kv->key, (unsigned long long)kv->n);
        kv->arr = malloc(kv->n * es + 1);
        if (!kv->arr)
            return pt_errf(c->err, "%s: key '%s': out of memory", c->path, kv->key);
        return cur_bytes(c, kv->arr, kv->n * es, what);
    }
    size_t es = vtype_size(kv->type);
    if (es == 0)
        return pt_errf(c->err, "%s: key '%s': unknown value type %u", c->path, kv->key, kv->type);
    uint8_t raw[8] = {0};
    if (cur_bytes(c, raw, es, what) < 0)
        return -1;
    switch (kv->type) {
    case GGUF_UINT8: kv->v.u64 = raw[0]; break;
    case GGUF_INT8: kv->v.i64 = (int8_t)raw[0]; break;
    case GGUF_BOOL:
        if (raw[0] > 1)
            return pt_errf(c->err, "%s: key '%s': bool value %u is not 0 or 1", c->path, kv->key, raw[0]);
        kv->v.u64 = 0;
        kv->v.b = raw[0];
        break;
    case GGUF_UINT16: { uint16_t x; memcpy(&x, raw, 2); kv->v.u64 = x; break; }
    case GGUF_INT16: { int16_t x; memcpy(&x, raw, 2); kv->v.i64 = x; break; }
    case GGUF_UINT32: { uint32_t x; memcpy(&x, raw, 4); kv->v.u64 = 0; kv->v.u32 = x; break; }
    case GGUF_INT32: { int32_t x; memcpy(&x, raw, 4); kv->v.u64 = 0; kv->v.i32 = x; break; }
    case GGUF_FLOAT32: { float x; memcpy(&x, raw, 4); kv->v.u64 = 0; kv->v.f32 = x; break; }
    case GGUF_UINT64: memcpy(&kv->v.u64, raw, 8); break;
    case GGUF_INT64: memcpy(&kv->v.i64, raw, 8); break;
    case GGUF_FLOAT64: memcpy(&kv->v.f64, raw, 8); break;
    }
    return 0;
}

static int read_tensor_info(cursor *c, gguf_tensor *t, uint64_t index)
{
    char what[96];
    snprintf(what, sizeof what, "tensor info #%llu", (unsigned long long)index);
    gguf_str name = {0};
    if (cur_str(c, &name, what) < 0)
        return -1;
    if (name.len == 0 || name.len >= sizeof t->name) {
        int rc = pt_errf(c->err, "%s: %s: name '%.80s' has %llu bytes (must be 1..63)", c->path, what,
                         name.s, (unsigned long long)name.len);
        free(name.s);
        return rc;
    }
    memcpy(t->name, name.s, name.len + 1);
    free(name.s);
    snprintf(what, sizeof what, "tensor '%s'", t->name);
    if (cur_u32(c, &t->n_dims, what) < 0)
        return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return pt_errf(c->err, "%s: tensor '%s': n_dims %u out of range 1..%d", c->path, t->name,
                       t->n_dims, GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (cur_u64(c, &t->ne[d], what) < 0)
            return -1;
    uint64_t rel;
    if (cur_u32(c, &t->type, what) < 0 || cur_u64(c, &rel, what) < 0)
        return -1;
    t->offset = rel; // relative for now; made absolute by the caller
    return 0;
}

// Size in bytes of a tensor from shape and type; -1 + err if invalid.
static int tensor_size(const char *path, gguf_tensor *t, pt_err *err)
{
    uint64_t blck, bytes;
    if (!type_block(t->type, &blck, &bytes))
        return pt_errf(err, "%s: tensor '%s': unknown tensor type id %u (not a ggml type)", path, t->name,
                       t->type);
    if (t->ne[0] == 0 || t->ne[0] % blck)
        return pt_errf(err, "%s: tensor '%s': row length %llu is not a multiple of the %s block size (%llu)",
                       path, t->name, (unsigned long long)t->ne[0], gguf_type_name(t->type),
                       (unsigned long long)blck);
    uint64_t size = t->ne[0] / blck * bytes;
    for (uint32_t d = 1; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] == 0)
            return pt_errf(err, "%s: tensor '%s': dimension %u is zero", path, t->name, d);
        if (size > UINT64_MAX / t->ne[d])
            return pt_errf(err, "%s: tensor '%s': size overflows 64 bits", path, t->name);
        size *= t->ne[d];
    }
    if (size >= (uint64_t)1 << PT_LOC_SHIFT)
        return pt_errf(err, "%s: tensor '%s': %llu bytes is more than Petrel addresses in one file", path,
                       t->name, (unsigned long long)size);
    t->size = size;
    return 0;
}

static int cmp_u64_idx(const void *a, const void *b, void *ctx)
{
    const gguf_tensor *ts = ctx;
    uint64_t x = ts[*(const uint64_t *)a].offset, y = ts[*(const uint64_t *)b].offset;
    return x < y ? -1 : x > y;
}

// The indices 0..n_tensors-1 of g's tensors (n_tensors >= 1) sorted by
// cmp (given g->tensors as its context), malloc'ed; NULL when out of memory.
static uint64_t *sorted_tensors(const gguf_file *g, int (*cmp)(const void *, const void *, void *))
{
    assert(g->n_tensors > 0);
    uint64_t *idx = malloc(g->n_tensors * sizeof *idx);
    if (!idx)
        return NULL;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        idx[i] = i;
    qsort_r(idx, g->n_tensors, sizeof *idx, cmp, g->tensors);
    return idx;
}

// Checks that no two tensors' byte ranges overlap.
static int check_overlaps(gguf_file *g, pt_err *err)
{
    uint64_t n = g->n_tensors;
    if (n == 0)
        return 0;
    uint64_t *idx = sorted_tensors(g, cmp_u64_idx);
    if (!idx)
        return pt_errf(err, "%s: out of memory", g->path);
    int rc = 0;
    for (uint64_t i = 1; i < n; i++) {
        const gguf_tensor *a = &g->tensors[idx[i - 1]], *b = &g->tensors[idx[i]];
        if (a->offset + a->size > b->offset) {
            rc = pt_errf(err, "%s: tensor '%s' [%llu, %llu) overlaps tensor '%s' at %llu", g->path, a->name,
                         (unsigned long long)a->offset, (unsigned long long)(a->offset + a->size),
                         b->name, (unsigned long long)b->offset);
            break;
        }
    }
    free(idx);
    return rc;
}

static int cmp_name_idx(const void *a, const void *b, void *ctx)
{
    const gguf_tensor *ts = ctx;
    return strcmp(ts[*(const uint64_t *)a].name, ts[*(const uint64_t *)b].name);
}

// Checks that no two tensors have the same name.
static int check_unique_names(gguf_file *g, pt_err *err)
{
    uint64_t n = g->n_tensors;
    if (n < 2)
        return 0;
    uint64_t *idx = sorted_tensors(g, cmp_name_idx);
    if (!idx)
        return pt_errf(err, "%s: out of memory", g->path);
    int rc = 0;
    for (uint64_t i = 1; i < n; i++)
        if (!strcmp(g->tensors[idx[i - 1]].name, g->tensors[idx[i]].name)) {
            rc = pt_errf(err, "%s: tensor '%s' appears twice", g->path, g->tensors[idx[i]].name);
            break;
        }
    free(idx);
    return rc;
}

// Parses everything after the magic; the file is mapped at c->base.
static int parse(gguf_file *g, cursor *c, pt_err *err)
{
    char magic[4];
    if (cur_bytes(c, magic, 4, "magic") < 0)
        return -1;
    if (memcmp(magic, "GGUF", 4) != 0)
        return pt_errf(err, "%s: not a GGUF file (bad magic)", g->path);
    if (cur_u32(c, &g->version, "version") < 0)
        return -1;
    if (g->version != 2 && g->version != 3)
        return pt_errf(err, "%s: unsupported GGUF version %u (2 or 3 expected)", g->path, g->version);
    uint64_t n_tensors, n_kv;
    if (cur_u64(c, &n_tensors, "tensor count") < 0 || cur_u64(c, &n_kv, "metadata count") < 0)
        return -1;
    // Each kv record needs >= 13 bytes, each tensor info >= 29: bound counts by the file.
    if (n_kv > c->size / 13 || n_tensors > c->size / 29)
        return pt_errf(err, "%s: implausible counts (%llu tensors, %llu keys) for a %llu-byte file", g->path,
                       (unsigned long long)n_tensors, (unsigned long long)n_kv, (unsigned long long)c->size);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return pt_errf(err, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        gguf_str key = {0};
        char what[64];
        snprintf(what, sizeof what, "metadata record #%llu", (unsigned long long)i);
        if (cur_str(c, &key, what) < 0)
            return -1;
        kv->key = key.s;
        g->n_kv = i + 1; // owned from here on
        if (cur_u32(c, &kv->type, what) < 0 || read_kv_value(c, kv) < 0)
            return -1;
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->kv[j].key, kv->key))
                return pt_errf(err, "%s: key '%s' appears twice", g->path, kv->key);
    }
    g->alignment = 32;
    const gguf_kv *al = gguf_get(g, "general.alignment");
    if (al) {
        if (al->type != GGUF_UINT32)
            return pt_errf(err, "%s: key 'general.alignment' must be u32 (type %u found)", g->path, al->type);
        uint32_t a = al->v.u32;
        if (a == 0 || (a & (a - 1)))
            return pt_errf(err, "%s: key 'general.alignment' = %u is not a power of two", g->path, a);
        g->alignment = a;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = i + 1;
        if (read_tensor_info(c, &g->tensors[i], i) < 0)
            return -1;
    }
    g->n_tensors = n_tensors;
    g->data_offset = pt_align_up(c->pos, g->alignment);
    if (n_tensors && g->data_offset > g->file_size)
        return pt_errf(err, "%s: data section offset %llu past end of file (%llu bytes)", g->path,
                       (unsigned long long)g->data_offset, (unsigned long long)g->file_size);
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        if (tensor_size(g->path, t, err) < 0)
            return -1;
        if (t->offset % g->alignment)
            return pt_errf(err, "%s: tensor '%s': offset %llu not aligned to %llu", g->path, t->name,
                           (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->offset > g->file_size - g->data_offset ||
            t->size > g->file_size - g->data_offset - t->offset)
            return pt_errf(err, "%s: tensor '%s': data [%llu, +%llu) past end of file (%llu bytes)", g->path,
                           t->name, (unsigned long long)(g->data_offset + t->offset),
                           (unsigned long long)t->size, (unsigned long long)g->file_size);
        t->offset += g->data_offset;
    }
    if (check_unique_names(g, err) < 0 || check_overlaps(g, err) < 0)
        return -1;
    return 0;
}

// Opens and validates one file (the whole of gguf_open but the split parts).
static gguf_file *open_one(const char *path, pt_err *err)
{
    gguf_file *g = calloc(1, sizeof *g);
    if (!g)
        return (void)pt_errf(err, "%s: out of memory", path), NULL;
    g->fd = -1;
    g->path = strdup(path);
    g->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (g->fd < 0) {
        pt_errf(err, "%s: cannot open: %s", path, strerror(errno));
        gguf_close(g);
        return NULL;
    }
    struct stat st;
    if (fstat(g->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_errf(err, "%s: not a regular file", path);
        gguf_close(g);
        return NULL;
    }
    g->file_size = (uint64_t)st.st_size;
    if (g->file_size >= (uint64_t)1 << PT_LOC_SHIFT) {
        pt_errf(err, "%s: file of %llu bytes is larger than Petrel addresses", path, (unsigned long long)g->file_size);
        gguf_close(g);
        return NULL;
    }
    if (g->file_size < 24) {
        pt_errf(err, "%s: file too small for a GGUF header (%llu bytes)", path, (unsigned long long)g->file_size);
        gguf_close(g);
        return NULL;
    }
    void *map = mmap(NULL, g->file_size, PROT_READ, MAP_PRIVATE, g->fd, 0);
    if (map == MAP_FAILED) {
        pt_errf(err, "%s: mmap failed: %s", path, strerror(errno));
        gguf_close(g);
        return NULL;
    }
    cursor c = {.base = map, .size = g->file_size, .pos = 0, .path = path, .err = err};
    int rc = parse(g, &c, err);
    munmap(map, g->file_size);
    if (rc < 0) {
        gguf_close(g);
        return NULL;
    }
    return g;
}

// ---- split files ------------------------------------------------------------

// An integer-valued scalar record (split.* keys are u16 in gguf-split's
// files; any integer type is taken).
static bool kv_int(const gguf_kv *kv, int64_t *out)
{
    if (!kv)
        return false;
    switch (kv->type) {
    case GGUF_UINT8: case GGUF_UINT16: case GGUF_UINT64: *out = (int64_t)kv->v.u64; return true;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT64: *out = kv->v.i64; return true;
    case GGUF_UINT32: *out = kv->v.u32; return true;
    case GGUF_INT32: *out = kv->v.i32; return true;
    default: return false;
    }
}

// The split keys of one opened part: -1 + err naming the file if a key is
// missing or out of range.
static int split_keys(const gguf_file *g, int64_t *no, int64_t *count, int64_t *tensors, pt_err *err)
{
    if (!kv_int(gguf_get(g, "split.count"), count) || *count < 1 || *count > PT_LOC_MAX_FILES)
        return pt_errf(err, "%s: key 'split.count' is missing, not an integer or out of range", g->path);
    if (!kv_int(gguf_get(g, "split.no"), no) || *no < 0 || *no >= *count)
        return pt_errf(err, "%s: key 'split.no' is missing or not in 0..%lld (split.count)", g->path,
                       (long long)*count - 1);
    if (!kv_int(gguf_get(g, "split.tensors.count"), tensors) || *tensors < 0)
        return pt_errf(err, "%s: key 'split.tensors.count' is missing or not a count", g->path);
    return 0;
}

// Path of part k (0-based) of n, from the path of part `self` (llama.cpp's
// llama_split_prefix / llama_split_path: PREFIX-%05d-of-%05d.gguf). NULL +
// err when `path` does not end that way.
static char *part_path(const char *path, int64_t self, int64_t k, int64_t n, pt_err *err)
{
    char tail[64], tk[64];
    snprintf(tail, sizeof tail, "-%05lld-of-%05lld.gguf", (long long)self + 1, (long long)n);
    snprintf(tk, sizeof tk, "-%05lld-of-%05lld.gguf", (long long)k + 1, (long long)n);
    size_t lp = strlen(path), lt = strlen(tail);
    if (lp <= lt || strcmp(path + lp - lt, tail) != 0) {
        pt_errf(err, "%s: part %lld of a %lld-part split, but the name does not end in '%s', so the other parts "
                     "cannot be found", path, (long long)self + 1, (long long)n, tail);
        return NULL;
    }
    const size_t lk = strlen(tk);
    char *out = malloc(lp - lt + lk + 1);
    if (!out) {
        pt_errf(err, "%s: out of memory", path);
        return NULL;
    }
    memcpy(out, path, lp - lt);
    memcpy(out + lp - lt, tk, lk + 1);
    return out;
}

// Merges the parts of a split model into parts[0]: it keeps part 1's
// metadata and takes every part's tensors (offsets located) and file.
// Consumes every part (closed or merged); NULL + err on a mismatch.
static gguf_file *merge_parts(gguf_file **p, int64_t n, int64_t total, pt_err *err)
{
    gguf_file *g = p[0];
    uint64_t sum = 0;
    for (int64_t k = 0; k < n; k++)
        sum += p[k]->n_tensors;
    if (sum != (uint64_t)total) {
        // Which part is foreign cannot be told from counts: name them all.
        char list[768];
        int at = 0;
        for (int64_t k = 0; k < n && at < (int)sizeof list - 1; k++)
            at += snprintf(list + at, sizeof list - (size_t)at, "%s%s: %llu", k ? ", " : "", p[k]->path,
                           (unsigned long long)p[k]->n_tensors);
        pt_errf(err, "%s: the %lld parts of this split hold %llu tensors (%s), split.tensors.count says %lld: "
                     "a part from another split?", g->path, (long long)n, (unsigned long long)sum, list,
                (long long)total);
        goto fail;
    }
    gguf_tensor *ts = realloc(g->tensors, (sum ? sum : 1) * sizeof *ts);
    g->parts = calloc((size_t)n, sizeof *g->parts);
    if (!ts || !g->parts) {
        if (ts)
            g->tensors = ts;
        pt_errf(err, "%s: out of memory", g->path);
        goto fail;
    }
    g->tensors = ts;
    g->parts[0] = (gguf_part){g->path, g->fd, g->file_size, g->data_offset, g->n_tensors};
    uint64_t at = g->n_tensors;
    for (int64_t k = 1; k < n; k++) {
        gguf_file *q = p[k];
        for (uint64_t i = 0; i < q->n_tensors; i++) {
            gguf_tensor t = q->tensors[i];
            t.part = (uint32_t)k;
            t.offset = pt_loc((uint32_t)k, t.offset);
            ts[at++] = t;
        }
        g->parts[k] = (gguf_part){q->path, q->fd, q->file_size, q->data_offset, q->n_tensors};
        g->n_parts = (uint32_t)k + 1; // owns q's path and fd from here on
        q->path = NULL;
        q->fd = -1;
        gguf_close(q);
        p[k] = NULL;
    }
    g->n_tensors = at;
    g->n_parts = (uint32_t)n;
    if (check_unique_names(g, err) < 0) {
        p[0] = g;
        goto fail;
    }
    return g;
fail:
    for (int64_t k = 0; k < n; k++)
        gguf_close(p[k]);
    return NULL;
}

gguf_file *gguf_open(const char *path, pt_err *err)
{
    if (!path)
        return (void)pt_errf(err, "gguf_open: no path"), NULL;
    gguf_file *g = open_one(path, err);
    if (!g)
        return NULL;
    int64_t no = 0, n = 1, total = 0;
    if (!gguf_get(g, "split.count") && !gguf_get(g, "split.no")) {
        g->parts = calloc(1, sizeof *g->parts);
        if (!g->parts) {
            pt_errf(err, "%s: out of memory", path);
            gguf_close(g);
            return NULL;
        }
        g->parts[0] = (gguf_part){g->path, g->fd, g->file_size, g->data_offset, g->n_tensors};
        g->n_parts = 1;
        return g;
    }
    if (split_keys(g, &no, &n, &total, err) < 0) {
        gguf_close(g);
        return NULL;
    }
    gguf_file **p = calloc((size_t)n, sizeof *p);
    if (!p) {
        pt_errf(err, "%s: out of memory", path);
        gguf_close(g);
        return NULL;
    }
    p[no] = g;
    for (int64_t k = 0; k < n; k++) {
        if (p[k])
            continue;
        char *pp = part_path(path, no, k, n, err);
        if (!pp)
            goto fail;
        if (access(pp, F_OK) != 0) {
            pt_errf(err, "%s: part %lld of %lld of this split model is missing (looked for %s)", path,
                    (long long)k + 1, (long long)n, pp);
            free(pp);
            goto fail;
        }
        p[k] = open_one(pp, err);
        free(pp);
        if (!p[k])
            goto fail;
        int64_t kno, kn, kt;
        if (split_keys(p[k], &kno, &kn, &kt, err) < 0)
            goto fail;
        if (kno != k || kn != n || kt != total) {
            pt_errf(err, "%s: does not belong with %s: split.no %lld, split.count %lld, split.tensors.count %lld "
                         "(expected %lld, %lld, %lld)", p[k]->path, path, (long long)kno, (long long)kn,
                    (long long)kt, (long long)k, (long long)n, (long long)total);
            goto fail;
        }
    }
    g = merge_parts(p, n, total, err);
    free(p);
    return g;
fail:
    for (int64_t k = 0; k < n; k++)
        gguf_close(p[k]);
    free(p);
    return NULL;
}

static void free_kv(gguf_kv *kv)
{
    free(kv->key);
    free(kv->str.s);
    if (kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING && kv->arr) {
        gguf_str *a = kv->arr;
        for (uint64_t i = 0; i < kv->n; i++)
            free(a[i].s);
    }
    free(kv->arr);
}

void gguf_close(gguf_file *g)
{
    if (!g)
        return;
    for (uint64_t i = 0; i < g->n_kv; i++)
        free_kv(&g->kv[i]);
    free(g->kv);
    free(g->tensors);
    // parts[0] repeats g->fd / g->path; the other parts own theirs.
    for (uint32_t i = 1; i < g->n_parts; i++) {
        if (g->parts[i].fd >= 0)
            close(g->parts[i].fd);
        free(g->parts[i].path);
    }
    free(g->parts);
    if (g->fd >= 0)
        close(g->fd);
    free(g->path);
    free(g);
}

const gguf_kv *gguf_get(const gguf_file *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

static const char *vtype_name(uint32_t t)
{
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static const gguf_kv *get_typed(const gguf_file *g, const char *key, uint32_t type, pt_err *err)
{
    const gguf_kv *kv = gguf_get(g, key);
    if (!kv) {
        pt_errf(err, "%s: missing key '%s'", g->path, key);
        return NULL;
    }
    if (kv->type != type) {
        pt_errf(err, "%s: key '%s' has type %s, expected %s", g->path, key, vtype_name(kv->type),
                vtype_name(type));
        return NULL;
    }
    return kv;
}

int gguf_get_u32(const gguf_file *g, const char *key, uint32_t *out, pt_err *err)
{
    const gguf_kv *kv = get_typed(g, key, GGUF_UINT32, err);
    if (!kv)
        return -1;
    *out = kv->v.u32;
    return 0;
}

int gguf_get_f32(const gguf_file *g, const char *key, float *out, pt_err *err)
{
    const gguf_kv *kv = get_typed(g, key, GGUF_FLOAT32, err);
    if (!kv)
        return -1;
    *out = kv->v.f32;
    return 0;
}

int gguf_get_bool(const gguf_file *g, const char *key, bool *out, pt_err *err)
{
    const gguf_kv *kv = get_typed(g, key, GGUF_BOOL, err);
    if (!kv)
        return -1;
    *out = kv->v.b;
    return 0;
}

const char *gguf_get_str(const gguf_file *g, const char *key, pt_err *err)
{
    const gguf_kv *kv = get_typed(g, key, GGUF_STRING, err);
    return kv ? kv->str.s : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name))
            return &g->tensors[i];
    return NULL;
}

int gguf_read(const gguf_file *g, uint64_t offset, void *dst, uint64_t bytes, pt_err *err)
{
    const uint32_t pi = pt_loc_file(offset);
    if (pi >= (g->n_parts ? g->n_parts : 1))
        return pt_errf(err, "%s: read at located offset %#llx names part %u of %u", g->path,
                       (unsigned long long)offset, pi + 1, g->n_parts);
    const char *path = pi ? g->parts[pi].path : g->path;
    const int fd = pi ? g->parts[pi].fd : g->fd;
    const uint64_t size = pi ? g->parts[pi].file_size : g->file_size;
    offset = pt_loc_off(offset);
    if (offset > size || bytes > size - offset)
        return pt_errf(err, "%s: read [%llu, +%llu) past end of file", path, (unsigned long long)offset,
                       (unsigned long long)bytes);
    uint8_t *p = dst;
    while (bytes > 0) {
        size_t chunk = bytes > (1u << 30) ? (1u << 30) : (size_t)bytes;
        ssize_t r = pread(fd, p, chunk, (off_t)offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return pt_errf(err, "%s: read at %llu failed: %s", path, (unsigned long long)offset,
                           r < 0 ? strerror(errno) : "unexpected end of file");
        p += r;
        offset += (uint64_t)r;
        bytes -= (uint64_t)r;
    }
    return 0;
}

// ---- writer -----------------------------------------------------------------

typedef struct wtensor {
    char name[64];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t rel;   // offset relative to the data section
    uint64_t size;  // bytes
} wtensor;

struct gguf_writer {
    uint32_t alignment;
    uint8_t *kv;          // serialised key/value records
    uint64_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys;          // (n_kv,) copies of the key names
    uint64_t keys_cap;
    wtensor *t;           // (n_t,)
    uint64_t n_t, t_cap;
    uint64_t data_len;    // bytes of the data section so far (aligned)
    bool oom;
};

gguf_writer *gguf_writer_new(uint32_t alignment)
{
    assert(alignment && !(alignment & (alignment - 1)));
    gguf_writer *w = calloc(1, sizeof *w);
    if (w)
        w->alignment = alignment;
    return w;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    for (uint64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    free(w->keys);
    free(w->kv);
    free(w->t);
    free(w);
}

static void put(gguf_writer *w, const void *p, uint64_t n)
{
    if (w->kv_len + n > w->kv_cap) {
        uint64_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n)
            cap *= 2;
        uint8_t *nb = realloc(w->kv, cap);
        if (!nb) {
            w->oom = true;
            return;
        }
        w->kv = nb;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void put_u32(gguf_writer *w, uint32_t v) { put(w, &v, 4); }
static void put_u64(gguf_writer *w, uint64_t v) { put(w, &v, 8); }
static void put_str(gguf_writer *w, const char *s)
{
    uint64_t n = strlen(s);
    put_u64(w, n);
    put(w, s, n);
}

// Starts a record: key and value type.
static void put_key(gguf_writer *w, const char *key, uint32_t type)
{
    assert(!gguf_writer_has_key(w, key));
    if (w->n_kv == w->keys_cap) {
        uint64_t cap = w->keys_cap ? w->keys_cap * 2 : 64;
        char **nk = realloc(w->keys, cap * sizeof *nk);
        if (!nk) {
            w->oom = true;
            return;
        }
        w->keys = nk;
        w->keys_cap = cap;
    }
    w->keys[w->n_kv] = strdup(key);
    put_str(w, key);
    put_u32(w, type);
    w->n_kv++;
}

bool gguf_writer_has_key(const gguf_writer *w, const char *key)
{
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (w->keys[i] && !strcmp(w->keys[i], key))
            return true;
    return false;
}

void gguf_w_u16(gguf_writer *w, const char *key, uint16_t v) { put_key(w, key, GGUF_UINT16); put(w, &v, 2); }
void gguf_w_u32(gguf_writer *w, const char *key, uint32_t v) { put_key(w, key, GGUF_UINT32); put_u32(w, v); }
void gguf_w_i32(gguf_writer *w, const char *key, int32_t v) { put_key(w, key, GGUF_INT32); put(w, &v, 4); }
void gguf_w_u64(gguf_writer *w, const char *key, uint64_t v) { put_key(w, key, GGUF_UINT64); put_u64(w, v); }
void gguf_w_f32(gguf_writer *w, const char *key, float v) { put_key(w, key, GGUF_FLOAT32); put(w, &v, 4); }
void gguf_w_bool(gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    put_key(w, key, GGUF_BOOL);
    put(w, &b, 1);
}
void gguf_w_str(gguf_writer *w, const char *key, const char *v) { put_key(w, key, GGUF_STRING); put_str(w, v); }

static void put_arr_head(gguf_writer *w, const char *key, uint32_t et, uint64_t n)
{
    put_key(w, key, GGUF_ARRAY);
    put_u32(w, et);
    put_u64(w, n);
}

void gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n)
{
    put_arr_head(w, key, GGUF_STRING, n);
    for (uint64_t i = 0; i < n; i++)
        put_str(w, v[i]);
}
void gguf_w_arr_i32(gguf_writer *w, const char *key, const int32_t *v, uint64_t n)
{
    put_arr_head(w, key, GGUF_INT32, n);
    put(w, v, n * 4);
}
void gguf_w_arr_u32(gguf_writer *w, const char *key, const uint32_t *v, uint64_t n)
{
    put_arr_head(w, key, GGUF_UINT32, n);
    put(w, v, n * 4);
}
void gguf_w_arr_f32(gguf_writer *w, const char *key, const float *v, uint64_t n)
{
    put_arr_head(w, key, GGUF_FLOAT32, n);
    put(w, v, n * 4);
}

void gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv)
{
    put_key(w, kv->key, kv->type);
    if (kv->type == GGUF_STRING) {
        put_u64(w, kv->str.len);
        put(w, kv->str.s, kv->str.len);
        return;
    }
    if (kv->type == GGUF_ARRAY) {
        put_u32(w, kv->arr_type);
        put_u64(w, kv->n);
        if (kv->arr_type == GGUF_STRING) {
            const gguf_str *a = kv->arr;
            for (uint64_t i = 0; i < kv->n; i++) {
                put_u64(w, a[i].len);
                put(w, a[i].s, a[i].len);
            }
        } else {
            put(w, kv->arr, kv->n * vtype_size(kv->arr_type));
        }
        return;
    }
    // Scalars are stored widened (read_kv_value): narrow them back.
    uint8_t raw[8];
    const size_t es = vtype_size(kv->type);
    switch (kv->type) {
    case GGUF_UINT8: case GGUF_UINT16: case GGUF_UINT64: memcpy(raw, &kv->v.u64, 8); break;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT64: memcpy(raw, &kv->v.i64, 8); break;
    case GGUF_BOOL: raw[0] = kv->v.b ? 1 : 0; break;
    case GGUF_UINT32: memcpy(raw, &kv->v.u32, 4); break;
    case GGUF_INT32: memcpy(raw, &kv->v.i32, 4); break;
    case GGUF_FLOAT32: memcpy(raw, &kv->v.f32, 4); break;
    case GGUF_FLOAT64: memcpy(raw, &kv->v.f64, 8); break;
    default: assert(0 && "unknown value type"); return;
    }
    put(w, raw, es); // little-endian: the low bytes are the narrow value
}

int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type)
{
    assert(strlen(name) < 64 && n_dims >= 1 && n_dims <= GGUF_MAX_DIMS);
    if (w->n_t == w->t_cap) {
        uint64_t cap = w->t_cap ? w->t_cap * 2 : 64;
        wtensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) {
            w->oom = true;
            return -1;
        }
        w->t = nt;
        w->t_cap = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type = type;
    t->size = gguf_row_bytes(type, t->ne[0]);
    assert(t->size > 0);
    for (uint32_t d = 1; d < GGUF_MAX_DIMS; d++)
        t->size *= t->ne[d];
    t->rel = w->data_len;
    w->data_len += pt_align_up(t->size, w->alignment);
    return (int)w->n_t++;
}

// Bytes of the header before padding.
static uint64_t header_raw_size(const gguf_writer *w)
{
    uint64_t n = 4 + 4 + 8 + 8 + w->kv_len;
    for (uint64_t i = 0; i < w->n_t; i++)
        n += 8 + strlen(w->t[i].name) + 4 + 8ull * w->t[i].n_dims + 4 + 8;
    return n;
}

uint64_t gguf_writer_header_size(gguf_writer *w) { return pt_align_up(header_raw_size(w), w->alignment); }

uint64_t gguf_writer_tensor_offset(gguf_writer *w, int i)
{
    assert(i >= 0 && (uint64_t)i < w->n_t);
    return gguf_writer_header_size(w) + w->t[i].rel;
}

uint64_t gguf_writer_tensor_size(gguf_writer *w, int i)
{
    assert(i >= 0 && (uint64_t)i < w->n_t);
    return w->t[i].size;
}

uint64_t gguf_writer_total_size(gguf_writer *w) { return gguf_writer_header_size(w) + w->data_len; }

void *gguf_writer_header(gguf_writer *w, uint64_t *len)
{
    if (w->oom)
        return NULL;
    uint64_t raw = header_raw_size(w), total = pt_align_up(raw, w->alignment);
    uint8_t *buf = calloc(1, total ? total : 1);
    if (!buf)
        return NULL;
    uint8_t *p = buf;
#define EMIT(src, n) do { memcpy(p, (src), (n)); p += (n); } while (0)
    uint32_t version = 3;
    uint64_t n_t = w->n_t, n_kv = w->n_kv;
    EMIT("GGUF", 4);
    EMIT(&version, 4);
    EMIT(&n_t, 8);
    EMIT(&n_kv, 8);
    EMIT(w->kv, w->kv_len);
    for (uint64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t nl = strlen(t->name);
        EMIT(&nl, 8);
        EMIT(t->name, nl);
        EMIT(&t->n_dims, 4);
        EMIT(t->ne, 8ull * t->n_dims);
        EMIT(&t->type, 4);
        EMIT(&t->rel, 8);
    }
#undef EMIT
    assert((uint64_t)(p - buf) == raw);
    *len = total;
    return buf;
}
