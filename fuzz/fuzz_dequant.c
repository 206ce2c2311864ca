// fuzz/fuzz_dequant.c — every block type's dequantiser and scalar dot
// product on arbitrary bytes (kernels/qtypes.h). The first byte picks the
// ggml type id (0..39; ids Petrel lacks are skipped), the rest are blocks of
// that type (a trailing partial block is dropped). The dot product runs
// against a fixed finite activation row quantised to the type's act type,
// as matmul does. Any scale, grid index or sign pattern must stay inside
// its tables: reads out of the block or a table are what ASan catches.
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_util.h"
#include "kernels/qtypes.h"

enum { MAX_BLOCKS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float y[MAX_BLOCKS * 256], x[MAX_BLOCKS * 256];
    static unsigned char xq[MAX_BLOCKS * 256 * 2];
    if (size < 1)
        return 0;
    const pt_qtraits *q = pt_qtraits_of(data[0] % 40u);
    if (!q || !q->dequant || q->blck <= 1)
        return 0;
    size_t nb = (size - 1) / (size_t)q->bytes;
    if (nb > MAX_BLOCKS)
        nb = MAX_BLOCKS;
    if (nb == 0)
        return 0;
    // Copied so that a read past the last block is outside the allocation.
    unsigned char *w = malloc(nb * (size_t)q->bytes);
    memcpy(w, data + 1, nb * (size_t)q->bytes);
    const int64_t n = (int64_t)nb * q->blck;
    q->dequant(w, y, n);
    pt_actq_fn actq = pt_actq_of(q->act);
    pt_vdot_fn vdot = pt_vdot_of(q, PT_QPATH_SCALAR);
    if (actq && vdot && pt_act_row_bytes(q->act, n) <= sizeof xq) {
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)((i * 7919) % 29 - 14) / 8.0f;
        actq(x, xq, n);
        volatile float r = vdot(w, xq, n);
        (void)r;
    }
    free(w);
    return 0;
}
