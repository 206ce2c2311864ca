// tests/testutil/tu_json.c — see tu_json.h.
#include "tests/testutil/tu_json.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

json_object **tu_read_jsonl(const char *rel, size_t *n)
{
    char *p = tu_fixture(rel);
    size_t len;
    char *text = tu_read(p, &len);
    cr_assert(text, "missing %s", p);
    free(p);
    json_object **v = NULL;
    *n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        v = realloc(v, (*n + 1) * sizeof *v);
        cr_assert(v);
        v[*n] = json_tokener_parse(line);
        cr_assert(v[*n], "%s: bad fixture line %zu", rel, *n);
        (*n)++;
    }
    free(text);
    return v;
}

long tu_ids_diff(const int32_t *ids, int64_t n, json_object *want)
{
    long nw = (long)json_object_array_length(want);
    for (long i = 0; i < nw && i < n; i++)
        if (ids[i] != json_object_get_int(json_object_array_get_idx(want, (size_t)i)))
            return i;
    return n == nw ? -1 : (n < nw ? n : nw);
}
