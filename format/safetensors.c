// format/safetensors.c — safetensors reader with full validation.
#include "format/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/quant.h"

#define ST_MAX_HEADER (1ull << 30) // sanity bound on the JSON header

static const struct {
    const char *name;
    st_dtype t;
    size_t size;
} dtypes[] = {
    {"F8_E4M3", ST_F8_E4M3, 1}, {"BF16", ST_BF16, 2}, {"F16", ST_F16, 2}, {"F32", ST_F32, 4},
    {"F64", ST_F64, 8},         {"I8", ST_I8, 1},     {"U8", ST_U8, 1},   {"I16", ST_I16, 2},
    {"I32", ST_I32, 4},         {"I64", ST_I64, 8},   {"BOOL", ST_BOOL, 1},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

size_t st_dtype_size(st_dtype t)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].t == t)
            return dtypes[i].size;
    return 0;
}

const char *st_dtype_name(st_dtype t)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].t == t)
            return dtypes[i].name;
    return "?";
}

static int parse_dtype(const char *s, st_dtype *out)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (!strcmp(dtypes[i].name, s)) {
            *out = dtypes[i].t;
            return 0;
        }
    return -1;
}

// Reads exactly n bytes at off; -1 + err on error or short read.
static int pread_full(int fd, const char *path, void *dst, uint64_t n, uint64_t off, pt_err *err)
{
    uint8_t *p = dst;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = pread(fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return pt_errf(err, "%s: read at offset %llu failed: %s", path, (unsigned long long)off,
                           r < 0 ? strerror(errno) : "file is truncated");
        p += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return 0;
}

// Parses one header entry into t; data_base = 8 + header length.
static int parse_entry(st_file *f, const char *name, json_object *o, st_tensor *t, uint64_t data_base,
                       pt_err *err)
{
    const char *path = f->path;
    json_object *jd, *js, *jo;
    if (!json_object_is_type(o, json_type_object))
        return pt_errf(err, "%s: tensor '%s': header entry is not an object", path, name);
    if (!json_object_object_get_ex(o, "dtype", &jd) || !json_object_is_type(jd, json_type_string))
        return pt_errf(err, "%s: tensor '%s': missing or non-string 'dtype'", path, name);
    if (parse_dtype(json_object_get_string(jd), &t->dtype) < 0)
        return pt_errf(err, "%s: tensor '%s': unknown dtype '%s'", path, name, json_object_get_string(jd));
    if (!json_object_object_get_ex(o, "shape", &js) || !json_object_is_type(js, json_type_array))
        return pt_errf(err, "%s: tensor '%s': missing or non-array 'shape'", path, name);
    size_t nd = json_object_array_length(js);
    if (nd > 8)
        return pt_errf(err, "%s: tensor '%s': %zu dimensions (at most 8)", path, name, nd);
    t->n_dims = (uint32_t)nd;
    uint64_t elems = 1;
    for (size_t d = 0; d < nd; d++) {
        json_object *x = json_object_array_get_idx(js, d);
        if (!json_object_is_type(x, json_type_int) || json_object_get_int64(x) < 0)
            return pt_errf(err, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path, name, d);
        t->shape[d] = (uint64_t)json_object_get_int64(x);
        if (t->shape[d] && elems > UINT64_MAX / t->shape[d])
            return pt_errf(err, "%s: tensor '%s': shape overflows 64 bits", path, name);
        elems *= t->shape[d];
    }
    if (!json_object_object_get_ex(o, "data_offsets", &jo) || !json_object_is_type(jo, json_type_array) ||
        json_object_array_length(jo) != 2)
        return pt_errf(err, "%s: tensor '%s': 'data_offsets' must be an array [begin, end]", path, name);
    json_object *jb = json_object_array_get_idx(jo, 0), *je = json_object_array_get_idx(jo, 1);
    if (!json_object_is_type(jb, json_type_int) || !json_object_is_type(je, json_type_int) ||
        json_object_get_int64(jb) < 0 || json_object_get_int64(je) < 0)
        return pt_errf(err, "%s: tensor '%s': data_offsets are not non-negative integers", path, name);
    uint64_t b = (uint64_t)json_object_get_int64(jb), e = (uint64_t)json_object_get_int64(je);
    uint64_t data_len = f->file_size - data_base;
    if (b > e)
        return pt_errf(err, "%s: tensor '%s': data_offsets [%llu, %llu] have begin > end", path, name,
                       (unsigned long long)b, (unsigned long long)e);
    if (e > data_len)
        return pt_errf(err, "%s: tensor '%s': data_offsets [%llu, %llu] out of range (data section has %llu bytes;"
                       " file truncated?)", path, name, (unsigned long long)b, (unsigned long long)e,
                       (unsigned long long)data_len);
    size_t es = st_dtype_size(t->dtype);
    if (elems > UINT64_MAX / es || e - b != elems * es)
        return pt_errf(err, "%s: tensor '%s': data_offsets span %llu bytes but shape x %s needs %llu", path, name,
                       (unsigned long long)(e - b), st_dtype_name(t->dtype), (unsigned long long)(elems * es));
    t->begin = data_base + b;
    t->end = data_base + e;
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

// Parses the JSON header text (len bytes) and fills f->tensors.
static int parse_header(st_file *f, const char *text, uint64_t len, uint64_t data_base, pt_err *err)
{
    json_tokener *tok = json_tokener_new_ex(64);
    if (!tok)
        return pt_errf(err, "%s: out of memory", f->path);
    json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        if (root)
            json_object_put(root);
        return pt_errf(err, "%s: bad safetensors header JSON: %s (near byte %zu of %llu)", f->path,
                       jerr == json_tokener_continue ? "unexpected end of header" : json_tokener_error_desc(jerr),
                       used, (unsigned long long)len);
    }
    for (uint64_t i = used; i < len; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r' && text[i] != 0) {
            json_object_put(root);
            return pt_errf(err, "%s: bad safetensors header JSON: trailing data at byte %llu", f->path,
                           (unsigned long long)i);
        }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return pt_errf(err, "%s: bad safetensors header JSON: not an object", f->path);
    }
    size_t n = (size_t)json_object_object_length(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        json_object_put(root);
        return pt_errf(err, "%s: out of memory", f->path);
    }
    int rc = 0;
    json_object_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__"))
            continue;
        st_tensor *t = &f->tensors[f->n_tensors];
        t->name = strdup(key);
        f->n_tensors++;
        if (!t->name || parse_entry(f, key, val, t, data_base, err) < 0) {
            rc = -1;
            break;
        }
    }
    json_object_put(root);
    if (rc < 0)
        return -1;
    // Overlaps: sort a copy by begin. Zero-byte tensors never overlap.
    st_tensor *s = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *s);
    if (!s)
        return pt_errf(err, "%s: out of memory", f->path);
    memcpy(s, f->tensors, f->n_tensors * sizeof *s);
    qsort(s, f->n_tensors, sizeof *s, cmp_begin);
    const st_tensor *prev = NULL;
    for (uint64_t i = 0; i < f->n_tensors && rc == 0; i++) {
        if (s[i].end == s[i].begin)
            continue;
        if (prev && prev->end > s[i].begin)
            rc = pt_errf(err, "%s: tensor '%s': data_offsets [%llu, %llu) overlap tensor '%s' [%llu, %llu)", f->path,
                         s[i].name, (unsigned long long)(s[i].begin - data_base),
                         (unsigned long long)(s[i].end - data_base), prev->name,
                         (unsigned long long)(prev->begin - data_base), (unsigned long long)(prev->end - data_base));
        prev = &s[i];
    }
    free(s);
    if (rc < 0)
        return -1;
    // Sorted by name, for st_find by binary search.
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, cmp_name);
    return 0;
}

st_file *st_open(const char *path, pt_err *err)
{
    st_file *f = calloc(1, sizeof *f);
    if (!f) {
        pt_errf(err, "%s: out of memory", path);
        return NULL;
    }
    f->path = strdup(path);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        pt_errf(err, "%s: cannot open: %s", path, strerror(errno));
        st_close(f);
        return NULL;
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_errf(err, "%s: not a regular file", path);
        st_close(f);
        return NULL;
    }
    f->file_size = (uint64_t)st.st_size;
    uint64_t hlen = 0;
    if (f->file_size < 8) {
        pt_errf(err, "%s: truncated: %llu bytes, no header length", path, (unsigned long long)f->file_size);
        st_close(f);
        return NULL;
    }
    if (pread_full(f->fd, path, &hlen, 8, 0, err) < 0) {
        st_close(f);
        return NULL;
    }
    if (hlen > f->file_size - 8 || hlen > ST_MAX_HEADER) {
        pt_errf(err, "%s: header length %llu past end of file (%llu bytes)", path, (unsigned long long)hlen,
                (unsigned long long)f->file_size);
        st_close(f);
        return NULL;
    }
    char *text = malloc(hlen + 1);
    if (!text) {
        pt_errf(err, "%s: out of memory for a %llu-byte header", path, (unsigned long long)hlen);
        st_close(f);
        return NULL;
    }
    int rc = pread_full(f->fd, path, text, hlen, 8, err);
    text[hlen] = 0;
    if (rc == 0)
        rc = parse_header(f, text, hlen, 8 + hlen, err);
    free(text);
    if (rc < 0) {
        st_close(f);
        return NULL;
    }
    return f;
}

void st_close(st_file *f)
{
    if (!f)
        return;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f);
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    uint64_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0)
            return &f->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int st_read(const st_file *f, const st_tensor *t, void *dst, pt_err *err)
{
    if (pread_full(f->fd, f->path, dst, t->end - t->begin, t->begin, err) < 0)
        return pt_errf(err, "%s: tensor '%s': read failed (file truncated or unreadable)", f->path, t->name);
    return 0;
}

int st_read_f32(const st_file *f, const st_tensor *t, float *dst, pt_err *err)
{
    uint64_t bytes = t->end - t->begin;
    size_t es = st_dtype_size(t->dtype);
    uint64_t n = bytes / es;
    if (t->dtype == ST_F32)
        return st_read(f, t, dst, err);
    if (t->dtype != ST_F8_E4M3 && t->dtype != ST_BF16 && t->dtype != ST_F16)
        return pt_errf(err, "%s: tensor '%s': dtype %s cannot be read as float", f->path, t->name,
                       st_dtype_name(t->dtype));
    // Read into the tail of dst (raw is never larger than f32), convert forward.
    uint8_t *raw = (uint8_t *)dst + (n * 4 - bytes);
    if (st_read(f, t, raw, err) < 0)
        return -1;
    if (t->dtype == ST_F8_E4M3) {
        for (uint64_t i = 0; i < n; i++)
            dst[i] = pt_fp8_e4m3_to_f32(raw[i]);
    } else {
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            dst[i] = t->dtype == ST_BF16 ? pt_bf16_to_f32(h) : pt_fp16_to_f32(h);
        }
    }
    return 0;
}
