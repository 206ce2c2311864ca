// tests/tu_sha256.h — a small SHA-256 (FIPS 180-4) for comparing tensor
// bytes with the fixtures' manifest.json digests. Header-only (the tests
// are one .c file each); checked against the FIPS "abc" vector in
// tests/test_qt_quantize.c.
#ifndef PETREL_TESTS_TU_SHA256_H
#define PETREL_TESTS_TU_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct tu_sha256 {
    uint32_t h[8];     // chaining state
    uint8_t buf[64];   // pending partial block
    uint64_t len;      // bytes hashed so far
} tu_sha256;

static const uint32_t tu_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t tu_ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void tu_sha256_block(tu_sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = tu_ror(w[i - 15], 7) ^ tu_ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = tu_ror(w[i - 2], 17) ^ tu_ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (tu_ror(e, 6) ^ tu_ror(e, 11) ^ tu_ror(e, 25)) + ((e & f) ^ (~e & g)) + tu_sha256_k[i] + w[i];
        uint32_t t2 = (tu_ror(a, 2) ^ tu_ror(a, 13) ^ tu_ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
    s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

static void tu_sha256_init(tu_sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->len = 0;
}

static void tu_sha256_update(tu_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        size_t have = (size_t)(s->len % 64), take = 64 - have < n ? 64 - have : n;
        memcpy(s->buf + have, p, take);
        s->len += take;
        p += take;
        n -= take;
        if (s->len % 64 == 0)
            tu_sha256_block(s, s->buf);
    }
}

// Finishes and writes the digest as 64 lower-case hex digits + NUL.
static void tu_sha256_hex(tu_sha256 *s, char out[65])
{
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80, zero = 0, lenb[8];
    tu_sha256_update(s, &pad, 1);
    while (s->len % 64 != 56)
        tu_sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        lenb[i] = (uint8_t)(bits >> (56 - 8 * i));
    tu_sha256_update(s, lenb, 8);
    for (int i = 0; i < 8; i++)
        snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

static void tu_sha256_of(const void *data, size_t n, char out[65])
{
    tu_sha256 s;
    tu_sha256_init(&s);
    tu_sha256_update(&s, data, n);
    tu_sha256_hex(&s, out);
}

#endif
