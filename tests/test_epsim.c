// tests/test_epsim.c — bench_epsim (bench/bench_epsim.c) on a four-token
// hand-made trace whose figures follow from the model by hand: with experts
// {0,1} {0,2} {1,3} {2,3} over 2 ranks (round-robin, token t at home t mod 2)
// every token has exactly one remote rank; over 4 ranks 1, 2, 2, 1. A 2-slot
// LRU misses 2 + 1 + 2 + 1 times. See the derivation inline.
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static double field(const char *out, const char *line_head, const char *key)
{
    const char *l = strstr(out, line_head);
    cr_assert(l, "no line '%s' in:\n%s", line_head, out);
    const char *k = strstr(l, key);
    cr_assert(k, "no %s in line '%s'", key, line_head);
    return atof(k + strlen(key));
}

Test(epsim, hand_trace)
{
    char *dir = tu_tmpdir("epsim"), path[1100], bin[1200];
    snprintf(path, sizeof path, "%s/t.trace", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    // Layer 0 dense (no lines), layer 1 MoE; 'P' lines are ignored.
    fputs("petrel-trace 1 blocks 2 experts 4 used 2 slot_bytes 1000000\n"
          "A 1 0 0 1\nP 1 1 3 2\nA 1 1 0 2\nA 1 2 1 3\nA 1 3 2 3\n", f);
    fclose(f);
    snprintf(bin, sizeof bin, "%s", PETREL_BIN);
    *strrchr(bin, '/') = 0;
    char *out = NULL;
    int rc = tu_sh(&out,
                   "'%s/bench_epsim' '%s' --ranks 2,4 --hidden 1000 --dispatch-bytes 1 --combine-bytes 1 "
                   "--train-frac 0 --replicate 0 --cache-frac 0.5 --nvme-gbs 1 --latency-us 0 2>&1",
                   bin, path);
    cr_assert_eq(rc, 0, "%s", out);
    // 2-slot LRU: {0,1} 2 misses; {0,2} 1 (evicts 1); {1,3} 2; {2,3} 1.
    cr_assert_float_eq(field(out, "local NVMe streaming", "streaming: "), 1.5, 1e-9);
    // Per token: remote ranks x 1000 elements x (1 + 1) bytes.
    // R=2: 1 remote each -> 2000 B; R=4: mean 1.5 -> 3000 B.
    // NVMe time: 1.5 misses x 1 MB / 1 GB/s = 1.5 ms; break-even = bits / 1.5 ms.
    cr_assert_float_eq(field(out, "RESULT ranks=2 ", "bytes_per_token_mb="), 0.002, 1e-9);
    cr_assert_float_eq(field(out, "RESULT ranks=2 ", "break_even_gbps="), 2000 * 8 / 1.5e-3 / 1e9, 6e-4);
    cr_assert_float_eq(field(out, "RESULT ranks=4 ", "bytes_per_token_mb="), 0.003, 1e-9);
    cr_assert_float_eq(field(out, "RESULT ranks=4 ", "break_even_gbps="), 3000 * 8 / 1.5e-3 / 1e9, 6e-4);
    // Equal heat: the greedy placement equals round-robin here.
    cr_assert(strstr(out, "ranks=2 placement=heat: 0.002 MB/token"), "%s", out);
    // Replicating all 4 experts everywhere: nothing leaves the home rank.
    free(out);
    rc = tu_sh(&out, "'%s/bench_epsim' '%s' --ranks 2 --hidden 1000 --train-frac 0 --replicate 4 --latency-us 0 2>&1",
               bin, path);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_float_eq(field(out, "RESULT ranks=2 ", "bytes_per_token_mb="), 0.0, 1e-12);
    cr_assert(strstr(out, "placement=heat+rep bytes"), "%s", out);
    free(out);
    tu_rmrf(dir);
    free(dir);
}
