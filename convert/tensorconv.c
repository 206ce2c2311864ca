// convert/tensorconv.c — read, dequantise, rearrange, quantise, write.
#include "convert/tensorconv.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fullio.h"
#include "kernels/quant.h"

#define FP8_BLOCK 128
#define CHUNK_ELEMS (4u << 20) // values per chunk of rows (16 MiB as float32)
#define PAR_MIN (1u << 18)     // fewer values than this: one thread (fork/join costs more)

static float fp8_lut[256];
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;
static void fp8_init(void)
{
    for (int i = 0; i < 256; i++)
        fp8_lut[i] = pt_fp8_e4m3_to_f32((uint8_t)i);
}

static int pread_full(int fd, const char *path, const char *name, void *dst, uint64_t n, uint64_t off, pt_err *err)
{
    uint8_t *p = dst;
    while (n > 0) {
        ssize_t r = pread(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return pt_errf(err, "%s: tensor '%s': read at offset %llu failed: %s", path, name,
                           (unsigned long long)off, r < 0 ? strerror(errno) : "file is truncated");
        p += r;
        off += (uint64_t)r;
        n -= (uint64_t)r;
    }
    return 0;
}

// Writes n bytes of converted tensor data at off (site "convert.write").
static int pwrite_full(int fd, const char *path, const char *name, const void *src, uint64_t n, uint64_t off,
                       pt_err *err)
{
    if (pt_write_full(fd, src, (size_t)n, off, "convert.write") != 0)
        return pt_errf(err, "%s: tensor '%s': write of %llu bytes at offset %llu failed: %s", path, name,
                       (unsigned long long)n, (unsigned long long)off, strerror(errno));
    return 0;
}

static void fmt_shape(char *buf, size_t len, const uint64_t *shape, uint32_t nd)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (uint32_t d = 0; d < nd && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

int pt_src_view_open(pt_src_view *v, const pt_plan *p, const pt_unit *u, const st_file *f, const st_file *sf,
                     pt_err *err)
{
    pthread_once(&fp8_once, fp8_init);
    memset(v, 0, sizeof *v);
    const pt_out_tensor *ot = &p->tensors[u->tensor];
    char name[160], got[128], want[128];
    pt_plan_unit_name(p, u, name, sizeof name);
    const st_tensor *t = st_find(f, name);
    if (!t)
        return pt_errf(err, "%s: tensor '%s' is listed in the index for this shard but absent from it", f->path,
                       name);
    if (t->dtype != ST_F8_E4M3 && t->dtype != ST_BF16 && t->dtype != ST_F16 && t->dtype != ST_F32)
        return pt_errf(err, "%s: tensor '%s': dtype %s is not supported (F8_E4M3, BF16, F16 or F32)", f->path, name,
                       st_dtype_name(t->dtype));
    if (t->dtype == ST_F8_E4M3 && !p->cfg->fp8)
        return pt_errf(err, "%s: tensor '%s': dtype F8_E4M3 disagrees with config.json, which declares no fp8 "
                       "quantization_config", f->path, name);
    bool shape_ok = t->n_dims == ot->src_dims && t->shape[0] == ot->src_shape[0] &&
                    (ot->src_dims == 1 || t->shape[1] == ot->src_shape[1]);
    if (!shape_ok) {
        fmt_shape(got, sizeof got, t->shape, t->n_dims);
        fmt_shape(want, sizeof want, ot->src_shape, ot->src_dims);
        return pt_errf(err, "%s: tensor '%s': shape %s disagrees with config.json (expected %s for %s)", f->path,
                       name, got, want, ot->spec.name);
    }
    v->f = f;
    v->t = t;
    v->rows = ot->src_dims == 1 ? 1 : t->shape[0];
    v->cols = ot->src_dims == 1 ? t->shape[0] : t->shape[1];
    v->in_bytes = t->end - t->begin;
    if (t->dtype != ST_F8_E4M3)
        return 0;
    char sname[192];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    const st_tensor *s = sf ? st_find(sf, sname) : NULL;
    if (ot->src_dims != 2 || !s)
        return pt_errf(err, "%s: tensor '%s': F8_E4M3 weight without its '%s' (F32 block scales)", f->path, name,
                       sname);
    uint64_t sr = (v->rows + FP8_BLOCK - 1) / FP8_BLOCK, sc = (v->cols + FP8_BLOCK - 1) / FP8_BLOCK;
    if (s->dtype != ST_F32 || s->n_dims != 2 || s->shape[0] != sr || s->shape[1] != sc) {
        fmt_shape(got, sizeof got, s->shape, s->n_dims);
        return pt_errf(err, "%s: tensor '%s': %s %s, expected F32 [%llu, %llu] (128x128 blocks of %s)", sf->path,
                       sname, st_dtype_name(s->dtype), got, (unsigned long long)sr, (unsigned long long)sc, name);
    }
    v->scale = malloc(sr * sc * sizeof(float));
    if (!v->scale)
        return pt_errf(err, "%s: tensor '%s': out of memory", sf->path, sname);
    if (st_read(sf, s, v->scale, err) < 0) {
        pt_src_view_free(v);
        return -1;
    }
    v->scale_cols = sc;
    v->in_bytes += s->end - s->begin;
    return 0;
}

void pt_src_view_free(pt_src_view *v)
{
    free(v->scale);
    v->scale = NULL;
}

void pt_convbuf_free(pt_convbuf *b)
{
    free(b->raw);
    free(b->f32);
    free(b->tmp);
    free(b->out);
    memset(b, 0, sizeof *b);
}

static int ensure(pt_convbuf *b, uint64_t elems, pt_err *err)
{
    if (elems <= b->cap)
        return 0;
    pt_convbuf_free(b);
    b->raw = malloc(elems * 4);
    b->f32 = malloc(elems * 4);
    b->tmp = malloc(elems * 4);
    b->out = malloc(elems * 4 + 64);
    if (!b->raw || !b->f32 || !b->tmp || !b->out) {
        pt_convbuf_free(b);
        return pt_errf(err, "out of memory for %llu-value conversion buffers", (unsigned long long)elems);
    }
    b->cap = elems;
    return 0;
}

// Converts one raw source row (row index r of the tensor) to float32.
static void dequant_row(const pt_src_view *v, uint64_t r, const uint8_t *x, float *y)
{
    const uint64_t C = v->cols;
    switch (v->t->dtype) {
    case ST_F8_E4M3: {
        const float *srow = v->scale + (r / FP8_BLOCK) * v->scale_cols;
        for (uint64_t j0 = 0; j0 < C; j0 += FP8_BLOCK) {
            const float s = srow[j0 / FP8_BLOCK];
            const uint64_t j1 = j0 + FP8_BLOCK < C ? j0 + FP8_BLOCK : C;
            for (uint64_t j = j0; j < j1; j++)
                y[j] = fp8_lut[x[j]] * s;
        }
        break;
    }
    case ST_BF16:
        for (uint64_t j = 0; j < C; j++) {
            uint16_t h;
            memcpy(&h, x + 2 * j, 2);
            y[j] = pt_bf16_to_f32(h);
        }
        break;
    case ST_F16:
        for (uint64_t j = 0; j < C; j++) {
            uint16_t h;
            memcpy(&h, x + 2 * j, 2);
            y[j] = pt_fp16_to_f32(h);
        }
        break;
    default:
        memcpy(y, x, C * 4);
        break;
    }
}

// Reads the raw bytes of rows [r0, r0 + n) into raw.
static int read_rows_raw(const pt_src_view *v, uint64_t r0, uint64_t n, uint8_t *raw, pt_err *err)
{
    assert(r0 + n <= v->rows);
    const st_tensor *t = v->t;
    size_t es = st_dtype_size(t->dtype);
    uint64_t C = v->cols;
    return pread_full(v->f->fd, v->f->path, t->name, raw, n * C * es, t->begin + r0 * C * es, err);
}

int pt_src_rows_f32(const pt_src_view *v, uint64_t r0, uint64_t n, uint8_t *raw, float *dst, pt_err *err)
{
    pthread_once(&fp8_once, fp8_init);
    if (read_rows_raw(v, r0, n, raw, err) < 0)
        return -1;
    const uint64_t C = v->cols, rb = C * st_dtype_size(v->t->dtype);
    int64_t nr = (int64_t)n;
#pragma omp parallel for schedule(static) if (n * C >= PAR_MIN)
    for (int64_t i = 0; i < nr; i++)
        dequant_row(v, r0 + (uint64_t)i, raw + (uint64_t)i * rb, dst + (uint64_t)i * C);
    return 0;
}

// Quantises n rows of length C from src into b->out and writes them at off.
static int emit_rows(const pt_out_tensor *ot, const float *src, uint64_t n, uint64_t C, uint64_t off, int fd,
                     const char *out_path, pt_convbuf *b, pt_err *err)
{
    size_t rb = pt_row_bytes(ot->type, C);
    assert(rb > 0);
    int64_t nr = (int64_t)n;
#pragma omp parallel for schedule(static) if (n * C >= PAR_MIN)
    for (int64_t i = 0; i < nr; i++)
        pt_quantize_row(ot->type, src + (uint64_t)i * C, b->out + (uint64_t)i * rb, (int64_t)C);
    return pwrite_full(fd, out_path, ot->spec.name, b->out, n * rb, off, err);
}

int pt_unit_convert(const pt_plan *p, const pt_unit *u, const pt_src_view *v, int out_fd, const char *out_path,
                    pt_convbuf *b, pt_err *err)
{
    const pt_out_tensor *ot = &p->tensors[u->tensor];
    const pt_hparams *hp = &p->cfg->hp;
    const uint64_t C = v->cols;
    if (ot->xform == PT_X_COPY) {
        // Row by row: dequantise into a small per-thread buffer (stays in cache)
        // and encode straight away.
        uint64_t per = CHUNK_ELEMS / C ? CHUNK_ELEMS / C : 1;
        if (per > v->rows)
            per = v->rows;
        if (ensure(b, per * C, err) < 0)
            return -1;
        const size_t rb = pt_row_bytes(ot->type, C), in_rb = C * st_dtype_size(v->t->dtype);
        for (uint64_t r0 = 0; r0 < v->rows; r0 += per) {
            uint64_t n = v->rows - r0 < per ? v->rows - r0 : per;
            if (read_rows_raw(v, r0, n, b->raw, err) < 0)
                return -1;
            int64_t nr = (int64_t)n;
#pragma omp parallel if (n * C >= PAR_MIN)
            {
                float *row = malloc(C * sizeof *row);
                if (!row)
                    abort(); // a few KiB: nothing sensible to do without them
#pragma omp for schedule(static)
                for (int64_t i = 0; i < nr; i++) {
                    dequant_row(v, r0 + (uint64_t)i, b->raw + (uint64_t)i * in_rb, row);
                    pt_quantize_row(ot->type, row, b->out + (uint64_t)i * rb, (int64_t)C);
                }
                free(row);
            }
            if (pwrite_full(out_fd, out_path, ot->spec.name, b->out, n * rb, u->out_offset + r0 * rb, err) < 0)
                return -1;
        }
        return 0;
    }
    // kv_b_proj [H * (nope + v), kv_lora], per head: nope rows of k then v rows of v.
    const uint64_t nope = hp->qk_nope, vh = hp->v_head, L = hp->kv_lora_rank, H = hp->n_head;
    assert(C == L && v->rows == H * (nope + vh));
    if (ensure(b, (nope > vh ? nope : vh) * L, err) < 0)
        return -1;
    for (uint64_t h = 0; h < H; h++) {
        if (ot->xform == PT_X_VB) {
            size_t rb = pt_row_bytes(ot->type, L);
            if (pt_src_rows_f32(v, h * (nope + vh) + nope, vh, b->raw, b->f32, err) < 0 ||
                emit_rows(ot, b->f32, vh, L, u->out_offset + h * vh * rb, out_fd, out_path, b, err) < 0)
                return -1;
        } else {
            // attn_k_b: k [nope, L] of head h transposed to [L, nope].
            size_t rb = pt_row_bytes(ot->type, nope);
            if (pt_src_rows_f32(v, h * (nope + vh), nope, b->raw, b->f32, err) < 0)
                return -1;
            for (uint64_t n = 0; n < nope; n++)
                for (uint64_t c = 0; c < L; c++)
                    b->tmp[c * nope + n] = b->f32[n * L + c];
            if (emit_rows(ot, b->tmp, L, nope, u->out_offset + h * L * rb, out_fd, out_path, b, err) < 0)
                return -1;
        }
    }
    return 0;
}
