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

// Row bytes of n values of tensor type t (the types Petrel reads: F32, F16,
// BF16, Q8_0, Q4_0); 0 if t is unknown or n is not a whole number of blocks.
// (Same figures as kernels' pt_row_bytes; kept here so the container layer
// has no dependency on the kernels.)
static uint64_t tensor_row_bytes(uint32_t t, uint64_t n)
{
    switch (t) {
    case PT_F32: return n * 4;
    case PT_F16: case PT_BF16: return n * 2;
    case PT_Q8_0: return n % QK ? 0 : n / QK * sizeof(block_q8_0);
    case PT_Q4_0: return n % QK ? 0 : n / QK * sizeof(block_q4_0);
    default: return 0;
    }
}

static const char *tensor_type_name(uint32_t t)
{
    switch (t) {
    case PT_F32: return "f32";
    case PT_F16: return "f16";
    case PT_BF16: return "bf16";
    case PT_Q8_0: return "q8_0";
    case PT_Q4_0: return "q4_0";
    default: return "?";
    }
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
    uint64_t row = tensor_row_bytes(t->type, t->ne[0]);
    if (t->ne[0] == 0 || row == 0) {
        if (tensor_row_bytes(t->type, 32) == 0)
            return pt_errf(err, "%s: tensor '%s': unsupported tensor type %u", path, t->name, t->type);
        return pt_errf(err, "%s: tensor '%s': row length %llu is not a multiple of the %s block size",
                       path, t->name, (unsigned long long)t->ne[0], tensor_type_name(t->type));
    }
    uint64_t size = row;
    for (uint32_t d = 1; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] == 0)
            return pt_errf(err, "%s: tensor '%s': dimension %u is zero", path, t->name, d);
        if (size > UINT64_MAX / t->ne[d])
            return pt_errf(err, "%s: tensor '%s': size overflows 64 bits", path, t->name);
        size *= t->ne[d];
    }
    t->size = size;
    return 0;
}

static int cmp_u64_idx(const void *a, const void *b, void *ctx)
{
    const gguf_tensor *ts = ctx;
    uint64_t x = ts[*(const uint64_t *)a].offset, y = ts[*(const uint64_t *)b].offset;
    return x < y ? -1 : x > y;
}

// Checks that no two tensors' byte ranges overlap and names are unique.
static int check_overlaps(gguf_file *g, pt_err *err)
{
    uint64_t n = g->n_tensors;
    if (n == 0)
        return 0;
    uint64_t *idx = malloc(n * sizeof *idx);
    if (!idx)
        return pt_errf(err, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_u64_idx, g->tensors);
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

static int check_unique_names(gguf_file *g, pt_err *err)
{
    uint64_t n = g->n_tensors;
    if (n < 2)
        return 0;
    uint64_t *idx = malloc(n * sizeof *idx);
    if (!idx)
        return pt_errf(err, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, n, sizeof *idx, cmp_name_idx, g->tensors);
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

gguf_file *gguf_open(const char *path, pt_err *err)
{
    if (!path)
        return (void)pt_errf(err, "gguf_open: no path"), NULL;
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
    if (offset > g->file_size || bytes > g->file_size - offset)
        return pt_errf(err, "%s: read [%llu, +%llu) past end of file", g->path, (unsigned long long)offset,
                       (unsigned long long)bytes);
    uint8_t *p = dst;
    while (bytes > 0) {
        size_t chunk = bytes > (1u << 30) ? (1u << 30) : (size_t)bytes;
        ssize_t r = pread(g->fd, p, chunk, (off_t)offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return pt_errf(err, "%s: read at %llu failed: %s", g->path, (unsigned long long)offset,
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
    t->size = tensor_row_bytes(type, t->ne[0]);
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
