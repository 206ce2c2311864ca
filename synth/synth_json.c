// synth/synth_json.c — config.json, model.safetensors.index.json and
// safetensors shard headers of a synthetic checkpoint, formatted like the
// files of the published DeepSeek-V3 checkpoint (and tests/fixtures/tiny-dsv3).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "synth/synth_plan.h"

// Closes a memstream and returns its buffer (NULL if writing failed).
static char *ms_close(FILE *f, char **buf)
{
    if (fclose(f) != 0) {
        free(*buf);
        return NULL;
    }
    return *buf;
}

// Shortest round-trip decimal for a double ("1.0" style for integers when
// as_float is set, as Python's json writes floats).
static void put_num(FILE *f, double v, int as_float)
{
    char b[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, v);
        if (strtod(b, NULL) == v)
            break;
    }
    if (as_float && !strpbrk(b, ".eEn"))
        strcat(b, ".0");
    fputs(b, f);
}

char *synth_config_json(const synth_preset *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "{\n");
    fprintf(f, "  \"architectures\": [\n    \"%s\"\n  ],\n",
            p->idx_heads ? "GlmMoeDsaForCausalLM" : "DeepseekV3ForCausalLM");
    fprintf(f, "  \"attention_bias\": false,\n");
    fprintf(f, "  \"attention_dropout\": 0.0,\n");
    fprintf(f, "  \"aux_loss_alpha\": 0.001,\n");
    fprintf(f, "  \"bos_token_id\": 0,\n");
    fprintf(f, "  \"eos_token_id\": 1,\n");
    fprintf(f, "  \"ep_size\": 1,\n");
    fprintf(f, "  \"first_k_dense_replace\": %u,\n", p->first_dense);
    fprintf(f, "  \"hidden_act\": \"silu\",\n");
    fprintf(f, "  \"hidden_size\": %u,\n", p->hidden);
    if (p->idx_heads) {
        fprintf(f, "  \"index_head_dim\": %u,\n", p->idx_dim);
        fprintf(f, "  \"index_n_heads\": %u,\n", p->idx_heads);
        fprintf(f, "  \"index_topk\": %u,\n", p->idx_topk);
        fprintf(f, "  \"indexer_rope_interleave\": true,\n");
    }
    fprintf(f, "  \"initializer_range\": 0.02,\n");
    fprintf(f, "  \"intermediate_size\": %u,\n", p->dense_ffn);
    fprintf(f, "  \"kv_lora_rank\": %u,\n", p->kv_lora);
    fprintf(f, "  \"max_position_embeddings\": %u,\n", p->max_pos);
    fprintf(f, "  \"model_type\": \"%s\",\n", p->idx_heads ? "glm_moe_dsa" : "deepseek_v3");
    fprintf(f, "  \"moe_intermediate_size\": %u,\n", p->moe_ffn);
    fprintf(f, "  \"moe_layer_freq\": 1,\n");
    fprintf(f, "  \"n_group\": %u,\n", p->n_group);
    fprintf(f, "  \"n_routed_experts\": %u,\n", p->experts);
    fprintf(f, "  \"n_shared_experts\": %u,\n", p->n_shared);
    fprintf(f, "  \"norm_topk_prob\": true,\n");
    fprintf(f, "  \"num_attention_heads\": %u,\n", p->heads);
    fprintf(f, "  \"num_experts_per_tok\": %u,\n", p->top_k);
    fprintf(f, "  \"num_hidden_layers\": %u,\n", p->layers);
    fprintf(f, "  \"num_key_value_heads\": %u,\n", p->heads);
    fprintf(f, "  \"num_nextn_predict_layers\": %u,\n", p->nextn);
    fprintf(f, "  \"pretraining_tp\": 1,\n");
    fprintf(f, "  \"q_lora_rank\": %u,\n", p->q_lora);
    fprintf(f, "  \"qk_nope_head_dim\": %u,\n", p->nope);
    fprintf(f, "  \"qk_rope_head_dim\": %u,\n", p->rope);
    fprintf(f, "  \"quantization_config\": {\n");
    fprintf(f, "    \"activation_scheme\": \"dynamic\",\n");
    fprintf(f, "    \"fmt\": \"e4m3\",\n");
    fprintf(f, "    \"quant_method\": \"fp8\",\n");
    fprintf(f, "    \"weight_block_size\": [\n      128,\n      128\n    ]\n");
    fprintf(f, "  },\n");
    fprintf(f, "  \"rms_norm_eps\": 1e-06,\n");
    fprintf(f, "  \"rope_scaling\": {\n");
    fprintf(f, "    \"beta_fast\": 32,\n");
    fprintf(f, "    \"beta_slow\": 1,\n");
    fprintf(f, "    \"factor\": ");
    put_num(f, p->yarn_factor, 0);
    fprintf(f, ",\n");
    fprintf(f, "    \"mscale\": 1.0,\n");
    fprintf(f, "    \"mscale_all_dim\": 1.0,\n");
    fprintf(f, "    \"original_max_position_embeddings\": %u,\n", p->yarn_orig);
    fprintf(f, "    \"type\": \"yarn\"\n");
    fprintf(f, "  },\n");
    fprintf(f, "  \"rope_theta\": ");
    put_num(f, p->rope_theta, 0);
    fprintf(f, ",\n");
    fprintf(f, "  \"routed_scaling_factor\": ");
    put_num(f, p->routed_scale, 1);
    fprintf(f, ",\n");
    fprintf(f, "  \"scoring_func\": \"sigmoid\",\n");
    fprintf(f, "  \"seq_aux\": true,\n");
    fprintf(f, "  \"tie_word_embeddings\": false,\n");
    fprintf(f, "  \"topk_group\": %u,\n", p->topk_group);
    fprintf(f, "  \"topk_method\": \"noaux_tc\",\n");
    fprintf(f, "  \"torch_dtype\": \"bfloat16\",\n");
    fprintf(f, "  \"transformers_version\": \"4.33.1\",\n");
    fprintf(f, "  \"use_cache\": true,\n");
    fprintf(f, "  \"v_head_dim\": %u,\n", p->v_head);
    fprintf(f, "  \"vocab_size\": %u\n", p->vocab);
    fprintf(f, "}\n");
    return ms_close(f, &buf);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const synth_tensor *const *)a)->name, (*(const synth_tensor *const *)b)->name);
}

char *synth_index_json(const synth_plan *pl)
{
    const synth_tensor **byname = malloc(pl->n * sizeof *byname);
    if (!byname)
        return NULL;
    for (uint32_t i = 0; i < pl->n; i++)
        byname[i] = &pl->t[i];
    qsort(byname, pl->n, sizeof *byname, cmp_name);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        free(byname);
        return NULL;
    }
    char sn[64];
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
            (unsigned long long)pl->total);
    for (uint32_t i = 0; i < pl->n; i++) {
        synth_shard_name(sn, sizeof sn, byname[i]->shard, pl->n_shards);
        fprintf(f, "    \"%s\": \"%s\"%s\n", byname[i]->name, sn, i + 1 < pl->n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    free(byname);
    return ms_close(f, &buf);
}

char *synth_shard_header(const synth_plan *pl, uint32_t shard, size_t *len_out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fprintf(f, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (uint32_t i = 0; i < pl->n; i++) {
        const synth_tensor *t = pl->order[i];
        if (t->shard != shard)
            continue;
        fprintf(f, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, synth_dtype_name(t->dtype));
        if (t->n_dims == 1)
            fprintf(f, "%llu", (unsigned long long)t->cols);
        else
            fprintf(f, "%llu,%llu", (unsigned long long)t->rows, (unsigned long long)t->cols);
        fprintf(f, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin,
                (unsigned long long)(t->begin + t->bytes));
    }
    fputc('}', f);
    fflush(f);
    while ((8 + len) % 8 != 0) { // pad with spaces as the safetensors writer does
        fputc(' ', f);
        fflush(f);
    }
    char *out = ms_close(f, &buf);
    if (out && len_out)
        *len_out = strlen(out);
    return out;
}
