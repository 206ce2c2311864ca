// server/server.h — `petrel serve`: an OpenAI-compatible HTTP server
// (libmicrohttpd, one connection thread each) in front of one generation
// thread. See docs/server.md.
#ifndef PETREL_SERVER_SERVER_H
#define PETREL_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include "petrel.h"

typedef struct srv_config {
    const char *model;          // GGUF path
    petrel_model_params mp;
    petrel_context_params cp;
    const char *host;           // "127.0.0.1" default; IPv4 or IPv6 literal
    int port;                   // 0 = any free port (printed, and written to port_file)
    const char *port_file;      // if set, the bound port is written there once listening
    const char *api_key;        // NULL = no authentication
    const char *kv_dir;         // kept conversation states on disk, or NULL
    uint64_t kv_ram;            // RAM budget for kept states
    int max_queue;              // waiting requests beyond the running ones
    size_t max_body;            // request body limit in bytes
    int parallel;               // sequences decoded together (slots, one context each); 0 = 4
    int prefill_chunk;          // prompt tokens per prefill chunk between decode steps; 0 = 256
    bool stats;                 // print batching and engine statistics at shutdown
} srv_config;

// Runs until SIGINT / SIGTERM; returns the process exit code.
int srv_serve(const srv_config *cfg);

#endif
