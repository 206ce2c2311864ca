// tests/test_trace_replay.c — bench_trace (bench/bench_trace.c) on an
// eight-token hand-made trace of one MoE layer (top-1, 2 slots) whose hit
// rates follow by hand; "petrel" is the engine's own cache (cache/ecache.c)
// driven through a scratch file, so this also pins down its eviction
// order: fewest uses first, then least recent. Uses: 0 0 0 1 2 1 2 0.
//   LRU:    m h h m m(evicts 0) h h m                       -> 4/8
//   LFU:    m h h m m(evicts 1: 1 use vs 3) m(evicts 2) m(evicts 1) h -> 3/8
//   Belady: as LRU here (at the 2, 0's next use is furthest) -> 4/8
//   Belady with a token's experts resident together: the same (top-1) -> 4/8
//   static: {0, 1} (4 and 2 uses; 1 before 2 on the tie)    -> 6/8
//   petrel cold = LFU (no usage file)                       -> 3/8
//   petrel cold + prefetch of "2 at position 4" and "1 at 7": the first
//     evicts 1 (fewest uses), 2 is then a prefetch hit; 5 and 6 miss as in
//     LFU; the second evicts 2 and is never used (still resident: not
//     wasted); 7 hits 0                                      -> 4/8, 0 wasted
//   petrel warm, heat {2: 3 uses} from another trace: no hot-store unless
//     asked; the heat is a prior (decaying slowly) that keeps 2 once in:
//     m h h m m(evicts 1) m(evicts 0, not 2) h m(evicts 1)  -> 3/8
//   petrel warm with --pin-frac 0.5: the 2-slot budget keeps 1 LRU slot
//     (one token's need) and pins expert 2 in the other, filled on its
//     first use: m h h m(evicts 0) m(hot) h h m              -> 4/8
//   petrel cold with a half-life of half a token: old uses fade, so it
//     evicts as LRU does                                    -> 4/8
//   belady-step + the same prefetch candidates: at 4, "2" (next use 4)
//     replaces 0 (next use 7, after 1's at 5); "1 at 7" is never used
//     again, so not read: m h h m pf h h h m -> 5/8, 4 reads (0.5 per use)
//   repeat: positions 1 and 2 repeat the previous token's expert -> 2/7
//   recall: the prediction at 4 is right, at 7 wrong         -> 1/2
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static double field(const char *out, const char *key)
{
    const char *l = strstr(out, "RESULT ");
    cr_assert(l, "no RESULT line in:\n%s", out);
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *p = strstr(l, k);
    cr_assert(p, "no %s in:\n%s", key, l);
    return atof(p + strlen(k));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

Test(trace_replay, hand_trace)
{
    char *dir = tu_tmpdir("trace_replay"), path[1100], heat[1100], bin[1200];
    snprintf(path, sizeof path, "%s/t.trace", dir);
    snprintf(heat, sizeof heat, "%s/h.trace", dir);
    // Layer 0 dense (no lines), layer 1 MoE.
    write_file(path, "petrel-trace 1 blocks 2 experts 4 used 1 slot_bytes 1000000\n"
                     "A 1 0 0\nA 1 1 0\nA 1 2 0\nA 1 3 1\nP 1 4 2\nA 1 4 2\nA 1 5 1\nA 1 6 2\nP 1 7 1\nA 1 7 0\n");
    write_file(heat, "petrel-trace 1 blocks 2 experts 4 used 1 slot_bytes 1000000\nA 1 0 2\nA 1 1 2\nA 1 2 2\n");
    snprintf(bin, sizeof bin, "%s", PETREL_BIN);
    *strrchr(bin, '/') = 0;
    char *out = NULL;
    int rc = tu_sh(&out, "'%s/bench_trace' '%s' --slots 2 --heat-trace '%s' 2>&1", bin, path, heat);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_float_eq(field(out, "lru"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "lfu"), 0.375, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "belady"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "belady_step"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "static_oracle"), 0.75, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "belady_pf"), 0.625, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "belady_pf_reads"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "petrel_cold"), 0.375, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "petrel_cold_pf"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "petrel_warm"), 0.375, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "repeat"), 2.0 / 7.0, 1e-4, "%s", out);
    cr_assert_float_eq(field(out, "recall"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "prefetch_wasted_frac"), 0.0, 1e-9, "%s", out);
    free(out);
    rc = tu_sh(&out, "'%s/bench_trace' '%s' --slots 2 --heat-trace '%s' --pin-frac 0.5 --halflife 0.5 2>&1", bin, path,
               heat);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_float_eq(field(out, "petrel_warm"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "petrel_cold"), 0.5, 1e-9, "%s", out);
    cr_assert_float_eq(field(out, "lfu"), 0.375, 1e-9, "%s", out); // (the simulated policies do not change)
    free(out);
    // A trace naming an expert past its header's count is refused by name.
    write_file(path, "petrel-trace 1 blocks 2 experts 4 used 1 slot_bytes 1000000\nA 1 0 7\n");
    rc = tu_sh(&out, "'%s/bench_trace' '%s' --slots 2 2>&1", bin, path);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(out, "t.trace: entry 1: layer or expert id out of range"), "%s", out);
    free(out);
    tu_rmrf(dir);
    free(dir);
}
