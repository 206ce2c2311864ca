// fuzz/fuzz_template.c — the chat-template interpreter on arbitrary
// templates and messages. The input is TEMPLATE, optionally followed by a
// NUL byte and a JSON array of messages (a fixed conversation with a system
// prompt, a tool call and a tool answer otherwise); it is parsed and
// rendered with add_generation_prompt on, as the server does.
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "fuzz/fuzz_util.h"
#include "template/template.h"

static const char k_msgs[] =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"2\"},{\"role\":\"user\",\"content\":\"ok\"}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0; // templates are a few KB; longer inputs only slow the search
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *src = malloc(tlen + 1);
    memcpy(src, data, tlen);
    src[tlen] = 0;
    json_object *msgs = NULL;
    if (nul) {
        json_tokener *tk = json_tokener_new();
        msgs = json_tokener_parse_ex(tk, (const char *)nul + 1, (int)(size - tlen - 1));
        json_tokener_free(tk);
        if (msgs && !json_object_is_type(msgs, json_type_array)) {
            json_object_put(msgs);
            msgs = NULL;
        }
    }
    if (!msgs)
        msgs = json_tokener_parse(k_msgs);
    json_object *extra = json_tokener_parse("{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}");
    char *out = NULL;
    size_t out_len = 0;
    pt_err err = {0};
    if (pt_chat_render(src, msgs, true, "<s>", "</s>", extra, &out, &out_len, &err) == 0)
        free(out);
    json_object_put(extra);
    json_object_put(msgs);
    free(src);
    return 0;
}
