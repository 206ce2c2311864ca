// tests/testutil/tu_json.h — JSON fixtures of the tokenizer tests.
#ifndef PETREL_TESTS_TU_JSON_H
#define PETREL_TESTS_TU_JSON_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

// Reads the JSONL fixture tests/fixtures/<rel>: one parsed object per
// non-empty line, in order (*n of them). The caller puts each object
// (json_object_put) and frees the array. Aborts the test when the file is
// missing or a line does not parse.
json_object **tu_read_jsonl(const char *rel, size_t *n);

// Compares the n ids with the JSON array of integers want: the index of the
// first difference (the shorter length when one is a prefix of the other),
// or -1 when they are equal.
long tu_ids_diff(const int32_t *ids, int64_t n, json_object *want);

#endif
