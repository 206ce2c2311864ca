// template/template.h — chat templates: a small Jinja2-subset interpreter
// that runs the model's own template (tokenizer_config.json chat_template,
// or tokenizer.chat_template in a GGUF) the way transformers does
// (trim_blocks and lstrip_blocks on, loop controls, raise_exception,
// strftime_now, tojson). See docs/tokenizer.md for what is supported.
#ifndef PETREL_TEMPLATE_TEMPLATE_H
#define PETREL_TEMPLATE_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>
#include "common/err.h"

// Renders template_src with the context
//   messages               the json-c array as given (OpenAI-style objects:
//                          role, content, tool_calls, tool_call_id, ...)
//   add_generation_prompt
//   bos_token, eos_token   (NULL = ""), pad_token = eos_token, unk_token = ""
//   every key of extra_ctx (may be NULL), e.g. "tools", overriding the above.
// On success *out gets a malloc'ed NUL-terminated string (and *out_len its
// length when out_len is non-NULL) and 0 is returned; on a syntax or runtime
// error -1 and err says "chat template line N: ...".
int pt_chat_render(const char *template_src, json_object *messages, bool add_generation_prompt,
                   const char *bos, const char *eos, json_object *extra_ctx, char **out, size_t *out_len,
                   pt_err *err);

// Parsed template, for rendering many times (the server).
typedef struct pt_template pt_template;
pt_template *pt_template_parse(const char *src, pt_err *err);
void pt_template_free(pt_template *t);
// Renders with a full context object (a json-c object of variables).
int pt_template_render(const pt_template *t, json_object *ctx, char **out, size_t *out_len, pt_err *err);

#endif
