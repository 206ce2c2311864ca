// cache/usage.c — the usage file and hot-store selection (see usage.h).
#include "cache/usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

int pt_usage_load(const char *path, int n_blocks, int n_expert, uint64_t *counts)
{
    const size_t n = (size_t)n_blocks * (size_t)n_expert;
    memset(counts, 0, n * sizeof *counts);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ver = 0, nb = 0, ne = 0;
    int ok = fscanf(f, "petrel-usage %d %d %d", &ver, &nb, &ne) == 3 && ver == 1 && nb == n_blocks &&
             ne == n_expert;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned long long v;
        if (fscanf(f, "%llu", &v) != 1)
            ok = 0;
        else
            counts[i] = v;
    }
    fclose(f);
    if (!ok)
        memset(counts, 0, n * sizeof *counts);
    return ok;
}

int pt_usage_merge_save(const char *path, int n_blocks, int n_expert, const uint64_t *add, pt_err *err)
{
    const size_t n = (size_t)n_blocks * (size_t)n_expert;
    uint64_t *cur = malloc(n * sizeof *cur);
    size_t cap = 64 + n * 21 + (size_t)n_blocks;
    char *buf = malloc(cap);
    if (!cur || !buf) {
        free(cur);
        free(buf);
        return pt_errf(err, "%s: out of memory", path);
    }
    pt_usage_load(path, n_blocks, n_expert, cur);
    size_t len = (size_t)snprintf(buf, cap, "petrel-usage 1 %d %d\n", n_blocks, n_expert);
    for (int b = 0; b < n_blocks; b++) {
        for (int e = 0; e < n_expert; e++) {
            size_t i = (size_t)b * (size_t)n_expert + (size_t)e;
            len += (size_t)snprintf(buf + len, cap - len, "%s%llu", e ? " " : "",
                                    (unsigned long long)(cur[i] + add[i]));
        }
        buf[len++] = '\n';
    }
    int rc = pt_write_file_atomic_at(path, buf, len, "usage.write", err);
    free(cur);
    free(buf);
    return rc;
}

typedef struct heat_ent {
    uint64_t count;
    int32_t block, expert;
} heat_ent;

static int by_heat(const void *a, const void *b)
{
    const heat_ent *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->block != y->block)
        return x->block < y->block ? -1 : 1;
    return x->expert < y->expert ? -1 : (x->expert > y->expert);
}

int pt_usage_pick_hot(const uint64_t *counts, int n_blocks, int n_expert, const pt_ecache_layer_src *layers,
                      uint64_t bytes, int32_t *out)
{
    heat_ent *v = malloc(sizeof *v * (size_t)n_blocks * (size_t)n_expert);
    if (!v)
        return 0;
    int n = 0;
    for (int b = 0; b < n_blocks; b++)
        for (int e = 0; e < layers[b].n_expert && e < n_expert; e++) {
            uint64_t cnt = counts[(size_t)b * (size_t)n_expert + (size_t)e];
            if (cnt > 0)
                v[n++] = (heat_ent){cnt, b, e};
        }
    qsort(v, (size_t)n, sizeof *v, by_heat);
    int k = 0;
    uint64_t used = 0;
    for (int i = 0; i < n; i++) {
        uint64_t sb = pt_ecache_slot_bytes_for(&layers[v[i].block]);
        if (used + sb > bytes)
            continue;
        used += sb;
        out[2 * k] = v[i].block;
        out[2 * k + 1] = v[i].expert;
        k++;
    }
    free(v);
    return k;
}
