// tests/test_cache_sizes.c — the expert cache with layers whose slots have
// different sizes (llama.cpp's mixed recipes: Q4_K_M's ffn_down_exps are
// Q8_0 in some blocks and Q5_0 in others; a fused gate_up layout reads
// with a stride): slots sized per layer, the bytes read right, the budget
// kept, and memory that one layer gives up reused by layers of other slot
// sizes (the heap covers only what fragmentation leaves, bounded).
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/ecache.h"
#include "io/reader.h"
#include "tests/testutil.h"
#include "tests/testutil/tu_ecache.h"

#define NL 3
#define NE 6
#define ROUNDS 300
static unsigned char byte_at(uint64_t pos) { return (unsigned char)((pos * 2654435761u) >> 13); }

typedef struct fx {
    tu_ecache_file file;
    pt_ecache_layer_src src[NL];
} fx;

// Three MoE layers with slices of unequal sizes (one strided like a fused
// gate_up tensor), at offsets that are not 4 KiB-aligned.
static void fx_open(fx *f)
{
    memset(f, 0, sizeof *f);
    const uint64_t bytes[NL][3] = {{5000, 5000, 9000}, {20000, 20000, 12000}, {3000, 3000, 50000}};
    uint64_t off = 100;
    for (int l = 0; l < NL; l++) {
        if (l == 2) { // fused: expert e = [gate | up] at e * 2 * 3000
            f->src[l].n_expert = NE;
            f->src[l].off[0] = off;
            f->src[l].off[1] = off + bytes[l][0];
            f->src[l].stride[0] = f->src[l].stride[1] = 2 * bytes[l][0];
            f->src[l].bytes[0] = f->src[l].bytes[1] = bytes[l][0];
            off += 2 * bytes[l][0] * NE + 12;
            f->src[l].off[2] = off;
            f->src[l].bytes[2] = bytes[l][2];
            off += bytes[l][2] * NE + 12;
            continue;
        }
        off = tu_ecache_layer(&f->src[l], NE, off, bytes[l], 12);
    }
    tu_ecache_file_open(&f->file, "cachesz", off + 50, byte_at, PT_IO_POOL);
}

static void fx_close(fx *f) { tu_ecache_file_close(&f->file); }

static void get(pt_ecache *c, fx *f, int l, int e)
{
    const void *w[3];
    pt_err err;
    cr_assert_eq(pt_ecache_acquire(c, l, e, w, &err), 0, "%s", err.msg);
    tu_ecache_check_slices(&f->src[l], l, e, w, byte_at);
    pt_ecache_release(c, l, e);
}

Test(cache_sizes, unequal_slots_share_the_budget)
{
    fx f;
    fx_open(&f);
    uint64_t sb[NL], min = 0;
    for (int l = 0; l < NL; l++) {
        sb[l] = pt_ecache_slot_bytes_for(&f.src[l]);
        min += sb[l];
    }
    cr_assert(sb[0] != sb[1] && sb[1] != sb[2] && sb[0] != sb[2], "slot sizes %llu %llu %llu",
              (unsigned long long)sb[0], (unsigned long long)sb[1], (unsigned long long)sb[2]);
    const uint64_t budget = min + 2 * sb[1]; // a few slots more than one per layer
    pt_err err;
    pt_ecache_cfg cfg = {.reader = f.file.rd, .path = f.file.path, .n_layers = NL, .layers = f.src, .budget_bytes = budget};
    pt_ecache *c = pt_ecache_new(&cfg, &err);
    cr_assert(c, "%s", err.msg);
    for (int l = 0; l < NL; l++)
        cr_expect_eq(pt_ecache_slot_bytes(c, l), sb[l]);
    // Bursts on one layer at a time: it grows past its share by taking
    // slots from the others, then the next layer takes them back.
    unsigned r = 12345;
    for (int round = 0; round < ROUNDS; round++) {
        const int l = (round / 5) % NL;
        for (int i = 0; i < 4; i++) {
            r = r * 1103515245u + 12345u;
            get(c, &f, l, (int)((r >> 16) % NE));
            cr_assert(pt_ecache_bytes(c) <= budget, "slot bytes %llu over the budget %llu",
                      (unsigned long long)pt_ecache_bytes(c), (unsigned long long)budget);
        }
    }
    // Pieces given up by smaller slots are split and merged for larger ones;
    // what fragmentation still leaves (a slot or so) comes from the heap,
    // bounded: heap buffers are reused for their size. (Measured here: one
    // slot of layer 2 over 60, 600 and 6000 rounds.)
    const uint64_t max_sb = sb[0] > sb[1] ? (sb[0] > sb[2] ? sb[0] : sb[2]) : (sb[1] > sb[2] ? sb[1] : sb[2]);
    fprintf(stderr, "cache_sizes: %llu bytes of slots from the heap (largest slot %llu)\n",
            (unsigned long long)pt_ecache_heap_bytes(c), (unsigned long long)max_sb);
    cr_expect(pt_ecache_heap_bytes(c) <= 2 * max_sb, "%llu bytes of slots came from the heap",
              (unsigned long long)pt_ecache_heap_bytes(c));
    pt_ecache_free(c);
    fx_close(&f);
}
