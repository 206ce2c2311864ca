// server/kvstore.h — kept conversation states for prefix reuse: every
// finished generation's context state, keyed by its token history, held in
// RAM within a byte budget and written through to a directory when one is
// given (which also makes them survive a restart, and lets replicas that
// share the directory resume each other's conversations). Not thread-safe:
// used by the one generation thread.
#ifndef PETREL_SERVER_KVSTORE_H
#define PETREL_SERVER_KVSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "petrel.h"

typedef struct srv_kv_entry {
    petrel_token *tokens; // (n) token history of the state
    int n;
    void *blob;           // (blob_len) petrel_state_save_mem bytes, or NULL if only on disk
    size_t blob_len;
    char *path;           // file in the kv dir, or NULL
    uint64_t last_use;    // store clock at the last add / hit
} srv_kv_entry;

#define SRV_KV_SKIP 256 // remembered unloadable file names
// A state file's first bytes: magic, version, header size and the model
// identity (docs/server.md, "State files"); equal for every state a model's
// contexts write, different for any other model or format version.
#define SRV_KV_SIG 24

typedef struct srv_kvstore {
    srv_kv_entry *e;      // (n, cap) entries, unordered
    int n, cap;
    char *dir;            // write-through directory or NULL
    uint64_t ram_budget;  // bytes of blobs kept in RAM
    uint64_t ram_used;
    int max_entries;      // oldest entries (and their files) dropped beyond this
    uint64_t clock;
    char *skip[SRV_KV_SKIP]; // (n_skip) files not to index again: unreadable or another model's
    int n_skip;
    unsigned char sig[SRV_KV_SIG]; // head of this model's state files
    uint64_t name_seed;            // hash of sig: file names differ between models
} srv_kvstore;

// Creates a store for states of c's model; dir may be NULL. With a dir,
// indexes the *.pkv files in it that belong to this model (token histories
// only). Returns NULL + err if dir cannot be created.
srv_kvstore *srv_kv_new(const char *dir, uint64_t ram_budget, int max_entries, petrel_context *c, char *err,
                        size_t errlen);
void srv_kv_free(srv_kvstore *s);
// Indexes *.pkv files that appeared in the directory since the last call
// (written by other replicas sharing it); cheap when none did (one readdir).
void srv_kv_refresh(srv_kvstore *s);
// Index of the entry sharing the longest token prefix with ids[0..n), its
// length in *lcp; -1 if none shares a token.
int srv_kv_best(srv_kvstore *s, const petrel_token *ids, int n, int *lcp);
// Restores entry i into c; 0 or -1 + err (the entry is then dropped).
int srv_kv_restore(srv_kvstore *s, int i, petrel_context *c, char *err, size_t errlen);
// Keeps c's current state (replacing entries whose history is a prefix of
// it). 0 or -1 + err.
int srv_kv_add(srv_kvstore *s, petrel_context *c, char *err, size_t errlen);

// Longest common prefix of two token arrays.
int srv_lcp(const petrel_token *a, int na, const petrel_token *b, int nb);

#endif
