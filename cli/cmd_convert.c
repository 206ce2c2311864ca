// cli/cmd_convert.c — `petrel convert HF_DIR -o MODEL.gguf [options]`.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "convert/convert.h"
#include "kernels/quant.h"

// The types Petrel can write, "q4_0 | q8_0 | ...".
static void print_types(FILE *f)
{
    const char *sep = "";
    for (uint32_t t = 0; t < 64; t++)
        if (t != PT_Q8_1 && t != PT_Q8_K && pt_dtype_known(t) && pt_dtype_can_quantize((pt_dtype)t)) {
            fprintf(f, "%s%s", sep, pt_dtype_name((pt_dtype)t));
            sep = " | ";
        }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: petrel convert HF_DIR -o MODEL.gguf [options]\n"
            "       petrel convert --plan HF_DIR|CONFIG.json [type options]\n"
            "\n"
            "Converts a Hugging Face DeepSeek-V3-style checkpoint (config.json, model.safetensors.index.json,\n"
            "shards; FP8 e4m3 with 128x128 block scales, or BF16/F16/F32) to a deepseek2 GGUF, shard by shard.\n"
            "A killed conversion resumes when the same command is run again.\n"
            "\n"
            "options:\n"
            "  -o, --output PATH      output GGUF file\n"
            "  --type T               type of every matrix (see below)\n"
            "  --expert-type T        routed experts (default q4_0)\n"
            "  --trunk-type T         other matrices (default q8_0); norms, router and bias stay f32\n"
            "  --type-rule REGEX=T    matrices whose GGUF name matches REGEX (PCRE2, anywhere in the name,\n"
            "                         as llama-quantize's --tensor-type, e.g. 'blk\\.\\d+\\.ffn_down_exps=q6_k')\n"
            "                         are stored as T; repeatable, the first matching rule wins\n"
            "  --tensor-type REGEX=T  the same (llama-quantize's name)\n"
            "  --threads N            worker threads for (de)quantisation\n"
            "  --delete-source        delete each shard once everything taken from it is durable\n"
            "  --fetch-cmd 'CMD {file}'  run (in HF_DIR) before a missing shard is needed\n"
            "  --tokenizer PATH       tokenizer.json, tiktoken.model or a folder with either (default: HF_DIR's;\n"
            "                         a tiktoken folder: tiktoken.model, tokenizer_config.json, [pat_str.txt])\n"
            "  --force                redo a complete conversion / discard an unfinished one\n"
            "  --plan                 print the output layout without reading any weight\n"
            "\n"
            "types T: ");
    print_types(f);
    fprintf(f, "\n"
            "A row length that is not whole blocks of T falls back as llama-quantize does (q2_k, q3_k ->\n"
            "q4_0; q4_k -> q5_0; q5_k -> q5_1; q6_k -> q8_0; iq4_xs -> iq4_nl; bf16 if that does not fit).\n");
}

static int parse_type(const char *opt, const char *v, pt_dtype *out)
{
    int t = v ? pt_dtype_from_name(v) : -1;
    if (t < 0 || !pt_dtype_can_quantize((pt_dtype)t)) {
        fprintf(stderr, "petrel convert: %s: %s type '%s' (", opt, t < 0 ? "unknown" : "Petrel cannot write",
                v ? v : "");
        print_types(stderr);
        fprintf(stderr, ")\n");
        return -1;
    }
    *out = (pt_dtype)t;
    return 0;
}

// "REGEX=TYPE" (split at the last '=') into rules[*n]; the pattern points
// into argv.
static int parse_rule(char *v, pt_type_rule *rules, uint32_t *n)
{
    char *eq = strrchr(v, '=');
    if (!eq || eq == v) {
        fprintf(stderr, "petrel convert: --type-rule '%s': expected REGEX=TYPE\n", v);
        return -1;
    }
    if (*n == PT_MAX_TYPE_RULES) {
        fprintf(stderr, "petrel convert: --type-rule: at most %d rules\n", PT_MAX_TYPE_RULES);
        return -1;
    }
    if (parse_type("--type-rule", eq + 1, &rules[*n].type) < 0)
        return -1;
    *eq = 0;
    rules[*n].pattern = v;
    (*n)++;
    return 0;
}

int cmd_convert(int argc, char **argv)
{
    pt_convert_opts o = {.expert_type = PT_Q4_0, .trunk_type = PT_Q8_0, .summary = stdout};
    bool plan = false, type_set = false, exp_set = false, trunk_set = false;
    pt_dtype all = PT_Q8_0;
    pt_type_rule rules[PT_MAX_TYPE_RULES];
    o.rules = rules;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                                  \
    do {                                                                              \
        if (!v) {                                                                     \
            fprintf(stderr, "petrel convert: %s needs a value\n", a);                \
            return 2;                                                                 \
        }                                                                             \
        i++;                                                                          \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            NEED_VALUE();
            o.out_path = v;
        } else if (!strcmp(a, "--type")) {
            NEED_VALUE();
            if (parse_type(a, v, &all) < 0)
                return 2;
            type_set = true;
        } else if (!strcmp(a, "--expert-type")) {
            NEED_VALUE();
            if (parse_type(a, v, &o.expert_type) < 0)
                return 2;
            exp_set = true;
        } else if (!strcmp(a, "--trunk-type")) {
            NEED_VALUE();
            if (parse_type(a, v, &o.trunk_type) < 0)
                return 2;
            trunk_set = true;
        } else if (!strcmp(a, "--type-rule") || !strcmp(a, "--tensor-type")) {
            NEED_VALUE();
            if (parse_rule(argv[i], rules, &o.n_rules) < 0)
                return 2;
        } else if (!strcmp(a, "--threads")) {
            NEED_VALUE();
            o.threads = atoi(v);
            if (o.threads <= 0) {
                fprintf(stderr, "petrel convert: --threads must be a positive integer\n");
                return 2;
            }
        } else if (!strcmp(a, "--delete-source")) {
            o.delete_source = true;
        } else if (!strcmp(a, "--fetch-cmd")) {
            NEED_VALUE();
            o.fetch_cmd = v;
        } else if (!strcmp(a, "--tokenizer")) {
            NEED_VALUE();
            o.tokenizer = v;
        } else if (!strcmp(a, "--force")) {
            o.force = true;
        } else if (!strcmp(a, "--plan")) {
            plan = true;
        } else if (!strcmp(a, "--debug-stop-after-units")) { // test hook (undocumented)
            NEED_VALUE();
            o.debug_stop_after_units = strtoull(v, NULL, 10);
        } else if (!strcmp(a, "--debug-stop-after-shards")) { // test hook (undocumented)
            NEED_VALUE();
            o.debug_stop_after_shards = strtoull(v, NULL, 10);
        } else if (a[0] == '-') {
            fprintf(stderr, "petrel convert: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!o.in_dir) {
            o.in_dir = a;
        } else {
            fprintf(stderr, "petrel convert: unexpected argument '%s'\n", a);
            return 2;
        }
#undef NEED_VALUE
    }
    if (type_set) {
        if (!exp_set)
            o.expert_type = all;
        if (!trunk_set)
            o.trunk_type = all;
    }
    if (!o.in_dir || (!plan && !o.out_path)) {
        usage(stderr);
        return 2;
    }
    pt_err err = {{0}};
    if (plan) {
        if (pt_convert_plan(o.in_dir, &o, stdout, &err) < 0) {
            fprintf(stderr, "petrel convert: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    if (pt_convert_run(&o, &err) < 0) {
        fprintf(stderr, "petrel convert: %s\n", err.msg);
        return 1;
    }
    return 0;
}
