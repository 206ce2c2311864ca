// tests/testutil/tu_gguf.c — see tu_gguf.h.
#include "tests/testutil/tu_gguf.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

void tu_gguf_write(const char *path, gguf_writer *w, const gguf_file *g, const int *src_of, int n,
                   tu_gguf_make_fn make, void *user)
{
    cr_assert(path && w && g && n >= 0);
    uint64_t hl;
    void *h = gguf_writer_header(w, &hl);
    cr_assert(h, "%s: no header", path);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    cr_assert(fd >= 0, "%s: cannot create", path);
    cr_assert_eq(pwrite(fd, h, hl, 0), (ssize_t)hl, "%s: header write", path);
    free(h);
    for (int j = 0; j < n; j++) {
        const uint64_t sz = gguf_writer_tensor_size(w, j);
        const int src = src_of ? src_of[j] : (uint64_t)j < g->n_tensors ? j : -1;
        void *buf = calloc(1, sz ? sz : 1);
        cr_assert(buf);
        if (src >= 0) {
            pt_err err = {{0}};
            cr_assert_lt((uint64_t)src, g->n_tensors);
            cr_assert_eq(gguf_read(g, g->tensors[src].offset, buf, sz, &err), 0, "%s", err.msg);
        } else if (make) {
            make(user, g, j, src, buf, sz);
        }
        cr_assert_eq(pwrite(fd, buf, sz, (off_t)gguf_writer_tensor_offset(w, j)), (ssize_t)sz, "%s: tensor %d",
                     path, j);
        free(buf);
    }
    cr_assert_eq(ftruncate(fd, (off_t)gguf_writer_total_size(w)), 0);
    cr_assert_eq(close(fd), 0);
}
