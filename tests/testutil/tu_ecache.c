// tests/testutil/tu_ecache.c — see tu_ecache.h.
#include "tests/testutil/tu_ecache.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

uint64_t tu_ecache_layer(pt_ecache_layer_src *s, int n_expert, uint64_t off, const uint64_t bytes[3], uint64_t gap)
{
    cr_assert(s && n_expert > 0 && bytes);
    memset(s, 0, sizeof *s); // (fields not set here keep their defaults, e.g. stride)
    s->n_expert = n_expert;
    for (int k = 0; k < 3; k++) {
        s->off[k] = off;
        s->bytes[k] = bytes[k];
        off += bytes[k] * (uint64_t)n_expert + gap;
    }
    return off;
}

void tu_ecache_file_open(tu_ecache_file *f, const char *tag, uint64_t size, tu_byte_fn byte_at, pt_io_mode io)
{
    cr_assert(f && tag);
    f->dir = tu_tmpdir(tag);
    f->path = malloc(strlen(f->dir) + 16);
    cr_assert(f->path);
    sprintf(f->path, "%s/m.bin", f->dir);
    FILE *o = fopen(f->path, "wb");
    cr_assert(o, "%s: cannot create", f->path);
    for (uint64_t i = 0; i < size; i++)
        fputc(byte_at ? byte_at(i) : 0, o);
    cr_assert_eq(fclose(o), 0, "%s: write failed", f->path);
    pt_err err;
    pt_reader_cfg rc = {.path = f->path, .mode = io};
    f->rd = pt_reader_open(&rc, &err);
    cr_assert(f->rd, "%s", err.msg);
}

void tu_ecache_file_close(tu_ecache_file *f)
{
    pt_reader_close(f->rd);
    tu_rmrf(f->dir);
    free(f->dir);
    free(f->path);
}

void tu_ecache_check_slices(const pt_ecache_layer_src *s, int l, int e, const void *const w[3], tu_byte_fn byte_at)
{
    for (int k = 0; k < 3; k++) {
        const uint64_t stride = s->stride[k] ? s->stride[k] : s->bytes[k];
        const uint64_t o = s->off[k] + (uint64_t)e * stride;
        const unsigned char *p = w[k];
        for (uint64_t j = 0; j < s->bytes[k]; j++)
            cr_assert_eq(p[j], byte_at(o + j), "layer %d expert %d slice %d byte %llu", l, e, k,
                         (unsigned long long)j);
    }
}
