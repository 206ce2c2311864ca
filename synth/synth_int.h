// synth/synth_int.h — internals shared by the synth_*.c files (not API).
#ifndef PETREL_SYNTH_INT_H
#define PETREL_SYNTH_INT_H

#include <stdint.h>
#include <stdio.h>
#include "synth/synth.h"
#include "format/safetensors.h"

// How a tensor's values are made (see synth_gen.c for the distributions).
typedef enum synth_init {
    SI_LINEAR,      // FP8: N(0,1) * gain / sqrt(cols) * per-128x128-block factor
    SI_SCALE,       // F32 scale_inv of the FP8 tensor `src` (filled while it is made)
    SI_DENSE,       // BF16: N(0,1) * gain / sqrt(cols)   (eh_proj, lm_head)
    SI_EMBED,       // BF16: N(0,1) * gain
    SI_NORM,        // BF16: 1 + 0.1 N(0,1)
    SI_GATE,        // BF16 router gate of MoE block `layer` (precomputed)
    SI_BIAS,        // F32 e_score_correction_bias of block `layer`
} synth_init;

typedef struct synth_tensor {
    char name[112];         // checkpoint name
    char key[112];          // seed key: copies share their source's key
    st_dtype dtype;         // ST_F8_E4M3, ST_BF16 or ST_F32
    uint32_t n_dims;        // 1 or 2
    uint64_t rows, cols;    // shape [rows, cols]; a 1-D tensor [n] has rows = 1, cols = n
    synth_init init;
    float gain;             // std multiplier
    int32_t layer;          // layer index (-1 for global tensors)
    int32_t src;            // SI_SCALE: index of the FP8 tensor; else -1
    uint32_t shard;         // 0-based shard number
    uint64_t begin;         // data offset inside the shard's data buffer
    uint64_t bytes;         // rows * cols * element size
} synth_tensor;

// Element size and safetensors name of the three dtypes synth writes (kept
// here so synth does not depend on the safetensors reader).
static inline uint64_t synth_dtype_size(st_dtype t) { return t == ST_F32 ? 4 : t == ST_BF16 ? 2 : 1; }
static inline const char *synth_dtype_name(st_dtype t)
{
    return t == ST_F32 ? "F32" : t == ST_BF16 ? "BF16" : "F8_E4M3";
}

// 64-bit mixing (splitmix64 finaliser) and a seed derived from a string.
static inline uint64_t synth_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
uint64_t synth_seed_of(uint64_t seed, const char *key);

// Router state for all MoE blocks, computed once up front (small:
// n_blocks * experts * hidden floats).
typedef struct synth_router {
    uint32_t n_blocks;      // blocks incl. MTP
    uint32_t first;         // first MoE block
    uint32_t experts, hidden;
    float *gate;            // (n_blocks, experts, hidden), rows of dense blocks unused
    float *bias;            // (n_blocks, experts)
} synth_router;
int synth_router_init(synth_router *r, const synth_preset *p, uint64_t seed);
void synth_router_free(synth_router *r);

// Makes rows [r0, r1) of tensor t (whose seed is tseed) into dst (the bytes of
// those rows, row-major). For SI_LINEAR (r0, r1 multiples of 128 or r1 ==
// rows) also writes the scale_inv rows [r0/128, ceil(r1/128)) into scale
// (ceil(cols/128) floats per block row). Thread-safe, deterministic in
// (tseed, row): any split into row ranges gives the same bytes.
void synth_make_rows(const synth_tensor *t, uint64_t tseed, const synth_router *router,
                     uint64_t r0, uint64_t r1, uint8_t *dst, float *scale);

// Tokenizer corpus (synth_corpus.c): NUL-terminated built-in text.
extern const char synth_corpus_text[];
// DeepSeek-V3 chat template (synth_corpus.c).
extern const char synth_chat_template[];
// DeepSeek-V3 pre_tokenizer JSON (Split regexes + ByteLevel), synth_corpus.c.
extern const char synth_pretokenizer_json[];

#endif
