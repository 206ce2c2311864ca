// convert/journal.h — the durable progress file of a conversion.
//
// `<out>.journal` is an append-only text file beside the output; every line
// is written with one write() and fsynced before the converter acts on it:
//   petrel-convert-journal 1 <source hash, 16 hex> <n_shards>
//   mtp <omit_embed 0|1> <omit_head 0|1>      (MTP de-duplication decision)
//   done <shard index> <shard file name>      (all its tensors written + fdatasynced)
// A torn last line (kill -9 in the middle of a write) is ignored on reading.
// The source hash covers config.json, the index, the tokenizer files and the
// type options, so a journal is only resumed by the same command.
#ifndef PETREL_CONVERT_JOURNAL_H
#define PETREL_CONVERT_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "common/err.h"

typedef struct pt_journal {
    char *path;
    int fd;                 // open for appending
    uint64_t src_hash;
    int omit_embed, omit_head; // -1 until decided
    uint32_t n_shards;
    bool *done;             // (n_shards,)
    uint32_t n_done;
} pt_journal;

// Opens an existing journal (resume) or creates a new one. *resumed tells
// which. -1 + err if an existing journal belongs to another source/options.
int pt_journal_open(pt_journal *j, const char *path, uint64_t src_hash, uint32_t n_shards, bool *resumed,
                    pt_err *err);
int pt_journal_set_mtp(pt_journal *j, bool omit_embed, bool omit_head, pt_err *err);
int pt_journal_mark_done(pt_journal *j, uint32_t shard, const char *name, pt_err *err);
void pt_journal_close(pt_journal *j);

// FNV-1a 64 accumulation helpers for the source hash.
uint64_t pt_hash_bytes(uint64_t h, const void *p, size_t n);
// Hashes a file's contents (h unchanged plus a marker when it is missing).
uint64_t pt_hash_file(uint64_t h, const char *path);
#define PT_HASH_INIT 1469598103934665603ull

#endif
