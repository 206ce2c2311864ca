// server/api.h — the OpenAI wire format: request parsing and validation
// into a job, response / chunk / error objects.
#ifndef PETREL_SERVER_API_H
#define PETREL_SERVER_API_H

#include <json-c/json.h>
#include <stddef.h>

#include "server/engine.h"
#include "server/job.h"

// Parses a /v1/chat/completions (SRV_CHAT) or /v1/completions body into j
// (prompt rendered and tokenized). Returns 200, or the HTTP status of the
// error (400 malformed / wrong types, 404 unknown model) with a message
// and the offending parameter (or NULL) in *param.
int srv_parse_request(srv_engine *e, int kind, const char *body, size_t len, srv_job *j, char *msg, size_t msglen,
                      const char **param);

// {"error": {"message", "type", "param", "code"}}
json_object *srv_error_json(int status, const char *msg, const char *param);
// One streaming chunk of choice `index`: text (len bytes, may be empty), the
// role delta on the choice's first chat chunk, a logprobs entry (borrowed)
// or NULL, a finish reason or NULL.
json_object *srv_chunk(const srv_job *j, int index, const char *text, size_t len, bool role, json_object *lp,
                       const char *finish);
// The usage-only final chunk of a stream (stream_options.include_usage).
json_object *srv_usage_chunk(const srv_job *j);
// The complete non-streaming response of a finished job (all n choices).
json_object *srv_response(const srv_job *j);

#endif
