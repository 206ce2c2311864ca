// cli/inspect_mix.c — type mix, bytes per expert per layer and fallbacks of
// a GGUF (see inspect_mix.h).
#include "cli/inspect_mix.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"

#define NTYPE 64 // type ids counted (ggml's ids are below this)

int pt_ftype_base_type(uint32_t ftype)
{
    switch (ftype) {
    case 2: return PT_Q4_0;
    case 3: return PT_Q4_1;
    case 7: return PT_Q8_0;
    case 8: return PT_Q5_0;
    case 9: return PT_Q5_1;
    case 10: case 21: return PT_Q2_K; // Q2_K, Q2_K_S
    case 11: case 12: case 13: return PT_Q3_K; // Q3_K_S/M/L
    case 14: case 15: return PT_Q4_K;
    case 16: case 17: return PT_Q5_K;
    case 18: return PT_Q6_K;
    case 19: return PT_IQ2_XXS;
    case 20: return PT_IQ2_XS;
    case 22: return PT_IQ3_S;   // IQ3_XS
    case 23: return PT_IQ3_XXS;
    case 24: return PT_IQ1_S;
    case 25: return PT_IQ4_NL;
    case 26: case 27: return PT_IQ3_S; // IQ3_S, IQ3_M
    case 28: return PT_IQ2_XS;  // IQ2_S: llama-quantize's base type is IQ2_XS
    case 29: return PT_IQ2_S;   // IQ2_M
    case 30: return PT_IQ4_XS;
    case 31: return PT_IQ1_M;
    default: return -1;
    }
}

static bool is_expert(const gguf_tensor *t) { return strstr(t->name, "_exps.") != NULL; }

static const char *tname(uint32_t t) { return pt_dtype_known(t) ? pt_dtype_name((pt_dtype)t) : "?"; }

void pt_inspect_print_mix(const gguf_file *g, FILE *f)
{
    uint64_t n[NTYPE][2] = {{0}}, bytes[NTYPE][2] = {{0}}; // [type][0 trunk, 1 experts]
    int max_layer = -1;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        uint32_t ty = t->type < NTYPE ? t->type : NTYPE - 1;
        int e = is_expert(t);
        n[ty][e]++;
        bytes[ty][e] += t->size;
        int L = -1;
        if (e && sscanf(t->name, "blk.%d.", &L) == 1 && L > max_layer)
            max_layer = L;
    }
    fprintf(f, "\ntype mix:\n  %-8s %8s %14s   %8s %14s   %8s %14s\n", "type", "tensors", "bytes", "trunk", "bytes",
            "experts", "bytes");
    for (uint32_t ty = 0; ty < NTYPE; ty++) {
        if (!n[ty][0] && !n[ty][1])
            continue;
        fprintf(f, "  %-8s %8llu %14llu   %8llu %14llu   %8llu %14llu\n", tname(ty),
                (unsigned long long)(n[ty][0] + n[ty][1]), (unsigned long long)(bytes[ty][0] + bytes[ty][1]),
                (unsigned long long)n[ty][0], (unsigned long long)bytes[ty][0], (unsigned long long)n[ty][1],
                (unsigned long long)bytes[ty][1]);
    }
    int n_missing = 0;
    for (uint32_t ty = 0; ty < NTYPE; ty++)
        if ((n[ty][0] || n[ty][1]) && !pt_dtype_valid(ty))
            fprintf(f, "%s%s", n_missing++ ? ", " : "  Petrel cannot compute (no kernels for): ", tname(ty));
    if (n_missing)
        fprintf(f, "\n");
    if (max_layer < 0)
        return;
    // One expert's slices per MoE block (types may differ by block in mixed files).
    static const char *const parts[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_up_exps"};
    fprintf(f, "\nexperts per layer (one expert's slices, bytes):\n");
    for (int L = 0; L <= max_layer; L++) {
        uint64_t total = 0, n_exp = 0;
        char line[512];
        size_t k = 0;
        line[0] = 0;
        for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
            char name[96];
            snprintf(name, sizeof name, "blk.%d.%s.weight", L, parts[p]);
            const gguf_tensor *t = gguf_find_tensor(g, name);
            if (!t || t->n_dims != 3 || !t->ne[2])
                continue;
            uint64_t slice = t->size / t->ne[2];
            k += (size_t)snprintf(line + k, sizeof line - k, "  %s %s %llu", parts[p] + 4, tname(t->type),
                                  (unsigned long long)slice);
            total += slice;
            n_exp = t->ne[2];
            if (k >= sizeof line)
                k = sizeof line - 1;
        }
        if (total)
            fprintf(f, "  blk.%-3d %3llu experts%s  = %llu bytes per expert\n", L, (unsigned long long)n_exp, line,
                    (unsigned long long)total);
    }
}

// Did Petrel write this file (so that its petrel.convert.* keys describe
// it)? llama-quantize copies those keys from its input too, but sets
// general.file_type to its own ftype while the copied expert type stays the
// source's ("f32").
static bool written_by_petrel(const gguf_file *g)
{
    const gguf_kv *e = gguf_get(g, "petrel.convert.expert_type");
    if (!e || e->type != GGUF_STRING)
        return false;
    uint32_t ft = 0;
    const gguf_kv *k = gguf_get(g, "general.file_type");
    if (k && k->type == GGUF_UINT32)
        ft = k->v.u32;
    return strcmp(e->str.s, "f32") != 0 || ft == 0;
}

void pt_inspect_print_fallbacks(const gguf_file *g, FILE *f)
{
    int n = 0;
    if (written_by_petrel(g)) {
        fprintf(f, "\nfallbacks (row length not whole blocks of the requested type; petrel.convert.fallbacks):\n");
        const gguf_kv *fb = gguf_get(g, "petrel.convert.fallbacks");
        if (fb && fb->type == GGUF_ARRAY && fb->arr_type == GGUF_STRING)
            for (uint64_t i = 0; i < fb->n; i++) {
                const char *name = ((const gguf_str *)fb->arr)[i].s;
                const gguf_tensor *t = gguf_find_tensor(g, name);
                fprintf(f, "  %s  %s  row length %llu\n", name, t ? tname(t->type) : "?",
                        t ? (unsigned long long)t->ne[0] : 0ULL);
                n++;
            }
    } else {
        const gguf_kv *k = gguf_get(g, "general.file_type");
        int base = k && k->type == GGUF_UINT32 ? pt_ftype_base_type(k->v.u32) : -1;
        int64_t blck = base >= 0 ? pt_dtype_block((pt_dtype)base) : 32;
        fprintf(f, "\nfallbacks (matrices whose row length is not a multiple of %lld, the block of %s, stored as):\n",
                (long long)blck, base >= 0 ? pt_dtype_name((pt_dtype)base) : "any block type");
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            if (t->n_dims >= 2 && t->ne[0] % (uint64_t)blck != 0 && (int)t->type != base) {
                fprintf(f, "  %s  %s  row length %llu\n", t->name, tname(t->type), (unsigned long long)t->ne[0]);
                n++;
            }
        }
    }
    if (!n)
        fprintf(f, "  none\n");
}
