// convert/hfindex.c — model.safetensors.index.json (or a lone model.safetensors).
#include "convert/hfindex.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "format/safetensors.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; // FNV-1a
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int build_table(pt_hf_index *ix, pt_err *err)
{
    ix->ht_cap = 16;
    while (ix->ht_cap < ix->n_names * 2)
        ix->ht_cap *= 2;
    ix->ht = calloc(ix->ht_cap, sizeof *ix->ht);
    ix->used = calloc(ix->n_names ? ix->n_names : 1, sizeof *ix->used);
    if (!ix->ht || !ix->used)
        return pt_errf(err, "%s: out of memory", ix->path);
    for (uint64_t i = 0; i < ix->n_names; i++) {
        uint64_t h = hash_str(ix->names[i]) & (ix->ht_cap - 1);
        while (ix->ht[h]) {
            if (!strcmp(ix->names[ix->ht[h] - 1], ix->names[i]))
                return pt_errf(err, "%s: tensor '%s' listed twice", ix->path, ix->names[i]);
            h = (h + 1) & (ix->ht_cap - 1);
        }
        ix->ht[h] = i + 1;
    }
    return 0;
}

int64_t pt_hf_index_find(const pt_hf_index *ix, const char *name)
{
    if (!ix->ht)
        return -1;
    uint64_t h = hash_str(name) & (ix->ht_cap - 1);
    while (ix->ht[h]) {
        if (!strcmp(ix->names[ix->ht[h] - 1], name))
            return (int64_t)(ix->ht[h] - 1);
        h = (h + 1) & (ix->ht_cap - 1);
    }
    return -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Shard file names must be plain names inside the directory (they are also
// substituted into --fetch-cmd).
static bool safe_name(const char *s)
{
    if (!*s || !strcmp(s, ".") || !strcmp(s, ".."))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
              *s == '_' || *s == '.'))
            return false;
    return true;
}

static int load_json_index(pt_hf_index *ix, pt_err *err)
{
    size_t len;
    char *text = pt_read_file(ix->path, &len, err);
    if (!text)
        return -1;
    json_tokener *tok = json_tokener_new();
    json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    free(text);
    json_object *wm = NULL, *md = NULL, *ts = NULL;
    if (!root || jerr != json_tokener_success) {
        if (root)
            json_object_put(root);
        return pt_errf(err, "%s: malformed JSON (%s)", ix->path, json_tokener_error_desc(jerr));
    }
    if (!json_object_object_get_ex(root, "weight_map", &wm) || !json_object_is_type(wm, json_type_object)) {
        json_object_put(root);
        return pt_errf(err, "%s: missing key 'weight_map'", ix->path);
    }
    if (json_object_object_get_ex(root, "metadata", &md) && json_object_object_get_ex(md, "total_size", &ts))
        ix->total_size = (uint64_t)json_object_get_int64(ts);
    uint64_t n = (uint64_t)json_object_object_length(wm);
    ix->names = calloc(n ? n : 1, sizeof *ix->names);
    ix->shard_of = calloc(n ? n : 1, sizeof *ix->shard_of);
    char **files = calloc(n ? n : 1, sizeof *files);
    int rc = 0;
    if (!ix->names || !ix->shard_of || !files)
        rc = pt_errf(err, "%s: out of memory", ix->path);
    json_object_object_foreach(wm, key, val) {
        if (rc < 0)
            break;
        if (!json_object_is_type(val, json_type_string) || !safe_name(json_object_get_string(val))) {
            rc = pt_errf(err, "%s: tensor '%s': shard name %s is not a plain file name", ix->path, key,
                         json_object_to_json_string(val));
            break;
        }
        ix->names[ix->n_names] = strdup(key);
        files[ix->n_names] = (char *)json_object_get_string(val);
        ix->n_names++;
    }
    if (rc == 0) {
        // Distinct shard names, sorted.
        char **sorted = malloc((n ? n : 1) * sizeof *sorted);
        memcpy(sorted, files, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_str);
        ix->shards = calloc(n ? n : 1, sizeof *ix->shards);
        for (uint64_t i = 0; i < n; i++)
            if (i == 0 || strcmp(sorted[i], sorted[i - 1]) != 0)
                ix->shards[ix->n_shards++] = strdup(sorted[i]);
        for (uint64_t i = 0; i < n; i++) {
            char **hit = bsearch(&files[i], ix->shards, ix->n_shards, sizeof *ix->shards, cmp_str);
            ix->shard_of[i] = (uint32_t)(hit - ix->shards);
        }
        free(sorted);
    }
    free(files);
    json_object_put(root);
    return rc;
}

static int load_single(pt_hf_index *ix, const char *shard_path, pt_err *err)
{
    st_file *f = st_open(shard_path, err);
    if (!f)
        return -1;
    ix->n_shards = 1;
    ix->shards = calloc(1, sizeof *ix->shards);
    ix->shards[0] = strdup("model.safetensors");
    ix->names = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *ix->names);
    ix->shard_of = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *ix->shard_of);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        ix->names[i] = strdup(f->tensors[i].name);
        ix->total_size += f->tensors[i].end - f->tensors[i].begin;
    }
    ix->n_names = f->n_tensors;
    st_close(f);
    return 0;
}

int pt_hf_index_load(const char *dir, pt_hf_index *ix, pt_err *err)
{
    memset(ix, 0, sizeof *ix);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    int rc;
    if (access(path, F_OK) == 0) {
        ix->path = strdup(path);
        rc = load_json_index(ix, err);
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        if (access(path, F_OK) != 0)
            return pt_errf(err, "%s: no model.safetensors.index.json and no model.safetensors", dir);
        ix->path = strdup(path);
        rc = load_single(ix, path, err);
    }
    if (rc == 0)
        rc = build_table(ix, err);
    if (rc < 0)
        pt_hf_index_free(ix);
    return rc;
}

void pt_hf_index_free(pt_hf_index *ix)
{
    for (uint64_t i = 0; i < ix->n_names; i++)
        free(ix->names[i]);
    for (uint32_t i = 0; i < ix->n_shards; i++)
        free(ix->shards[i]);
    free(ix->names);
    free(ix->shards);
    free(ix->shard_of);
    free(ix->used);
    free(ix->ht);
    free(ix->path);
    memset(ix, 0, sizeof *ix);
}
