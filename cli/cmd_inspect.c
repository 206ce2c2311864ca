// cli/cmd_inspect.c — `petrel inspect MODEL.gguf [--expert L E]`: metadata,
// tensor table, trunk vs expert bytes, the type mix and bytes per expert per
// layer (cli/inspect_mix.c), expert slice locations, KV-cache bytes per
// token, row-length fallbacks, llama.cpp compatibility warnings.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/inspect_mix.h"
#include "format/gguf.h"
#include "format/hparams.h"
#include "io/io.h"
#include "kernels/quant.h"

static const char *vtype_name(uint32_t t)
{
    static const char *n[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    return t < sizeof n / sizeof n[0] ? n[t] : "?";
}

static void print_scalar(uint32_t type, const void *p)
{
    switch (type) {
    case GGUF_UINT8: printf("%u", *(const uint8_t *)p); break;
    case GGUF_INT8: printf("%d", *(const int8_t *)p); break;
    case GGUF_UINT16: printf("%u", *(const uint16_t *)p); break;
    case GGUF_INT16: printf("%d", *(const int16_t *)p); break;
    case GGUF_UINT32: printf("%u", *(const uint32_t *)p); break;
    case GGUF_INT32: printf("%d", *(const int32_t *)p); break;
    case GGUF_FLOAT32: printf("%g", *(const float *)p); break;
    case GGUF_BOOL: printf("%s", *(const uint8_t *)p ? "true" : "false"); break;
    case GGUF_UINT64: printf("%llu", (unsigned long long)*(const uint64_t *)p); break;
    case GGUF_INT64: printf("%lld", (long long)*(const int64_t *)p); break;
    case GGUF_FLOAT64: printf("%g", *(const double *)p); break;
    default: printf("?");
    }
}

// Prints a string, escaped, cut at max bytes.
static void print_str(const char *s, uint64_t len, uint64_t max)
{
    putchar('"');
    for (uint64_t i = 0; i < len && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n')
            fputs("\\n", stdout);
        else if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\x%02x", ch);
        else
            putchar(ch);
    }
    putchar('"');
    if (len > max)
        printf("... (%llu bytes)", (unsigned long long)len);
}

static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    default: return 8;
    }
}

static void print_kv(const gguf_kv *kv)
{
    printf("  %-52s %-4s ", kv->key, vtype_name(kv->type));
    if (kv->type == GGUF_STRING) {
        print_str(kv->str.s, kv->str.len, 96);
    } else if (kv->type == GGUF_ARRAY) {
        printf("[%s x %llu] ", vtype_name(kv->arr_type), (unsigned long long)kv->n);
        uint64_t show = kv->n < 8 ? kv->n : 8;
        for (uint64_t i = 0; i < show; i++) {
            if (i)
                printf(", ");
            if (kv->arr_type == GGUF_STRING) {
                const gguf_str *s = &((const gguf_str *)kv->arr)[i];
                print_str(s->s, s->len, 32);
            } else {
                print_scalar(kv->arr_type, (const uint8_t *)kv->arr + i * scalar_size(kv->arr_type));
            }
        }
        if (kv->n > show)
            printf(", ...");
    } else {
        print_scalar(kv->type, &kv->v);
    }
    putchar('\n');
}

static bool is_expert_tensor(const char *name) { return strstr(name, "_exps.") != NULL; }

// Prints the byte ranges of expert e's slices in block L.
static int print_expert(const gguf_file *g, long L, long e)
{
    static const char *const parts[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_up_exps"};
    int found = 0;
    uint64_t total = 0;
    printf("\nexpert %ld of block %ld:\n", e, L);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%ld.%s.weight", L, parts[i]);
        const gguf_tensor *t = gguf_find_tensor(g, name);
        if (!t)
            continue;
        if (t->n_dims != 3 || e < 0 || (uint64_t)e >= t->ne[2]) {
            fprintf(stderr, "petrel inspect: %s: %s has %llu experts, no expert %ld\n", g->path, name,
                    (unsigned long long)(t->n_dims == 3 ? t->ne[2] : 0), e);
            return -1;
        }
        uint64_t slice = t->size / t->ne[2];
        printf("  %-32s %-5s offset %14llu  bytes %10llu  (end %llu)\n", name, pt_dtype_name(t->type),
               (unsigned long long)(pt_loc_off(t->offset) + (uint64_t)e * slice), (unsigned long long)slice,
               (unsigned long long)(pt_loc_off(t->offset) + (uint64_t)(e + 1) * slice));
        total += slice;
        found++;
    }
    if (!found) {
        fprintf(stderr, "petrel inspect: %s: block %ld has no routed-expert tensors\n", g->path, L);
        return -1;
    }
    printf("  total %llu bytes\n", (unsigned long long)total);
    return 0;
}

static void print_warnings(const gguf_file *g, const pt_hparams *hp, bool hp_ok)
{
    printf("\nllama.cpp compatibility:\n");
    int n = 0;
    if (hp_ok) {
        bool lite = hp->n_layer == 26 || hp->n_layer == 27 || (hp->n_layer == 48 && hp->n_vocab == 128256);
        if (lite && hp->q_lora_rank > 0) {
            printf("  WARNING: llama.cpp will refuse this file: with %u trunk layers%s it assumes DeepSeek-V2-Lite,\n"
                   "           ignores q_lora_rank (%u) and requires blk.N.attn_q.weight, which this model does not\n"
                   "           have. Petrel runs it.\n",
                   hp->n_layer, hp->n_layer == 48 ? " and vocab 128256" : "", hp->q_lora_rank);
            n++;
        }
        if (!lite && hp->q_lora_rank == 0) {
            printf("  WARNING: llama.cpp will refuse this file: without q_lora_rank it expects the DeepSeek-V2-Lite\n"
                   "           layer count (26 or 27 trunk layers), this model has %u. Petrel runs it.\n",
                   hp->n_layer);
            n++;
        }
        if (hp->n_group > 1 && !(hp->topk_group > 0 && hp->topk_group < hp->n_group)) {
            printf("  WARNING: llama.cpp asserts 0 < expert_group_used_count < expert_group_count (%u, %u)\n",
                   hp->topk_group, hp->n_group);
            n++;
        }
    }
    if (gguf_get(g, "deepseek2.attention.key_length_mla")) {
        for (uint64_t i = 0; i < g->n_tensors; i++)
            if (strstr(g->tensors[i].name, ".attn_kv_b.")) {
                printf("  WARNING: %s next to the *_mla keys: llama.cpp rejects the extra tensor\n",
                       g->tensors[i].name);
                n++;
                break;
            }
    }
    const char *tm = NULL;
    const gguf_kv *kv = gguf_get(g, "tokenizer.ggml.model");
    if (kv && kv->type == GGUF_STRING)
        tm = kv->str.s;
    if (tm && !strcmp(tm, "gpt2") && !gguf_get(g, "tokenizer.ggml.tokens")) {
        printf("  WARNING: tokenizer.ggml.model is gpt2 but tokenizer.ggml.tokens is missing\n");
        n++;
    }
    if (!n)
        printf("  no known problem\n");
}

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    long exp_l = -1, exp_e = -1;
    bool show_tensors = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: petrel inspect MODEL.gguf [--expert LAYER EXPERT] [--no-tensors]\n"
                   "Prints metadata, the tensor table (name, type, shape, absolute offset, bytes), trunk vs\n"
                   "expert bytes, the type mix (tensors and bytes per type, trunk and experts), one expert's\n"
                   "bytes per layer, KV-cache bytes per token, row-length fallbacks and\n"
                   "llama.cpp compatibility warnings. --expert L E: byte ranges of that expert's slices.\n");
            return 0;
        } else if (!strcmp(argv[i], "--expert") && i + 2 < argc) {
            exp_l = strtol(argv[i + 1], NULL, 10);
            exp_e = strtol(argv[i + 2], NULL, 10);
            i += 2;
        } else if (!strcmp(argv[i], "--no-tensors")) {
            show_tensors = false;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "petrel inspect: unexpected argument '%s'\n", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "usage: petrel inspect MODEL.gguf [--expert LAYER EXPERT] [--no-tensors]\n");
        return 2;
    }
    pt_err err = {{0}};
    gguf_file *g = gguf_open(path, &err);
    if (!g) {
        fprintf(stderr, "petrel inspect: %s\n", err.msg);
        return 1;
    }
    printf("file: %s\nGGUF v%u, %llu bytes, %llu tensors, %llu metadata keys, alignment %llu, data at %llu\n",
           path, g->version, (unsigned long long)g->file_size, (unsigned long long)g->n_tensors,
           (unsigned long long)g->n_kv, (unsigned long long)g->alignment, (unsigned long long)g->data_offset);
    for (uint32_t i = 0; g->n_parts > 1 && i < g->n_parts; i++) // split: table offsets are in the tensor's part
        printf("part %u of %u: %s, %llu bytes, %llu tensors\n", i + 1, g->n_parts, g->parts[i].path,
               (unsigned long long)g->parts[i].file_size, (unsigned long long)g->parts[i].n_tensors);
    printf("\nmetadata:\n");
    for (uint64_t i = 0; i < g->n_kv; i++)
        print_kv(&g->kv[i]);

    uint64_t trunk = 0, experts = 0, n_routed = 0, per_expert = 0;
    int64_t first_moe = -1;
    if (show_tensors)
        printf("\ntensors:\n  %-5s %-44s %-5s %-24s %16s %14s\n", "#", "name", "type", "shape (ne)", "offset",
               "bytes");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (show_tensors) {
            char shape[64];
            int k = snprintf(shape, sizeof shape, "{");
            for (uint32_t d = 0; d < t->n_dims; d++)
                k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%llu", d ? ", " : "",
                              (unsigned long long)t->ne[d]);
            snprintf(shape + k, sizeof shape - (size_t)k, "}");
            printf("  %-5llu %-44s %-5s %-24s %16llu %14llu\n", (unsigned long long)i, t->name,
                   pt_dtype_name(t->type), shape, (unsigned long long)pt_loc_off(t->offset), // (in its part's file)
                   (unsigned long long)t->size);
        }
        if (is_expert_tensor(t->name)) {
            experts += t->size;
            int L = -1;
            sscanf(t->name, "blk.%d.", &L);
            if (first_moe < 0)
                first_moe = L;
            if (L == first_moe && t->n_dims == 3)
                per_expert += t->size / t->ne[2];
            if (t->n_dims == 3 && (strstr(t->name, "ffn_gate_exps") || strstr(t->name, "ffn_gate_up_exps")))
                n_routed += t->ne[2];
        } else {
            trunk += t->size;
        }
    }
    printf("\nsummary:\n");
    printf("  trunk bytes:      %16llu (%.3f GiB)\n", (unsigned long long)trunk, (double)trunk / (1 << 30));
    printf("  expert bytes:     %16llu (%.3f GiB)\n", (unsigned long long)experts, (double)experts / (1 << 30));
    printf("  routed experts:   %16llu\n", (unsigned long long)n_routed);
    printf("  bytes per expert: %16llu (gate + up + down of one expert of block %lld; every block: below)\n",
           (unsigned long long)per_expert, (long long)first_moe);
    pt_hparams hp;
    pt_err herr = {{0}};
    bool hp_ok = pt_hparams_from_gguf(g, &hp, &herr) == 0;
    if (hp_ok) {
        printf("  blocks:           %u trunk + %u MTP, %u dense, %u experts (top %u), %u heads\n", hp.n_layer,
               hp.n_nextn, hp.n_dense_lead, hp.n_expert, hp.n_expert_used, hp.n_head);
        printf("  KV cache:         %llu bytes per token (f32: (%u + %u) blocks x (%u + %u) x 4)\n",
               (unsigned long long)pt_hparams_kv_bytes_per_token(&hp, 4), hp.n_layer, hp.n_nextn, hp.kv_lora_rank,
               hp.qk_rope);
    } else {
        printf("  hyper-parameters: not readable: %s\n", herr.msg);
    }
    pt_inspect_print_mix(g, stdout);
    pt_inspect_print_fallbacks(g, stdout);
    print_warnings(g, &hp, hp_ok);
    int rc = 0;
    if (exp_l >= 0 || exp_e >= 0)
        rc = print_expert(g, exp_l, exp_e) < 0 ? 1 : 0;
    gguf_close(g);
    return rc;
}
