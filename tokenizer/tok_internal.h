// tokenizer/tok_internal.h — the loaded tokenizer pipeline (private to
// tokenizer/*.c): hash maps, the added-token trie, normalizer and
// pre-tokenizer steps, post-processor, per-token decoded pieces, BPE cache.
#ifndef PETREL_TOKENIZER_TOK_INTERNAL_H
#define PETREL_TOKENIZER_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "tokenizer/tokenizer.h"

// ---- string -> id map (open addressing, keys borrowed or owned) ----------
typedef struct tok_strmap {
    uint32_t cap;          // slots, power of two (0 = empty map)
    uint32_t n;            // entries
    const char **key;      // (cap,) key bytes (NULL = free slot)
    uint32_t *klen;        // (cap,)
    int32_t *val;          // (cap,)
} tok_strmap;

void tok_strmap_init(tok_strmap *m, uint32_t expect);
void tok_strmap_free(tok_strmap *m);
// Inserts or overwrites; the key must outlive the map.
void tok_strmap_put(tok_strmap *m, const char *key, uint32_t len, int32_t val);
int32_t tok_strmap_get(const tok_strmap *m, const char *key, uint32_t len); // -1 if absent
uint64_t tok_hash(const void *p, size_t len);

// ---- (left id, right id) -> (rank, merged id) -----------------------------
typedef struct tok_pair_slot {
    uint64_t key;          // (left << 32 | right) + 1; 0 = free
    int32_t rank;
    int32_t out;           // merged token id
} tok_pair_slot;

typedef struct tok_pairmap {
    uint32_t cap;          // slots, power of two
    uint32_t n;
    tok_pair_slot *slot;   // (cap,) one 16-byte slot per probe
} tok_pairmap;

void tok_pairmap_init(tok_pairmap *m, uint32_t expect);
void tok_pairmap_free(tok_pairmap *m);
// Keeps the first (lowest-rank) entry when a pair repeats.
void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t out);
static inline bool tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank,
                                   int32_t *out)
{
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t mask = m->cap - 1, i = (uint32_t)(h >> 32) & mask;
    for (;;) {
        const tok_pair_slot *s = &m->slot[i];
        if (s->key == k) {
            *rank = s->rank;
            *out = s->out;
            return true;
        }
        if (!s->key)
            return false;
        i = (i + 1) & mask;
    }
}

// ---- added tokens ----------------------------------------------------------
typedef struct tok_added {
    int32_t id;
    char *content;         // as in tokenizer.json (normalized form if normalized)
    uint32_t len;
    bool special, lstrip, rstrip, normalized, single_word;
} tok_added;

// Byte trie over added-token contents; leftmost-longest matching.
typedef struct tok_trie_node {
    int32_t child;         // first child node, -1 none
    int32_t sibling;       // next sibling, -1 none
    int32_t added;         // index into t->added ending here, -1 none
    uint8_t byte;
} tok_trie_node;

typedef struct tok_trie {
    tok_trie_node *node;   // (n,) node 0 = root
    int32_t n, cap;
    uint8_t first[256];    // 1 if some token starts with this byte
} tok_trie;

// ---- normalizer / pre-tokenizer / post-processor / decoder -----------------
enum { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_LOWER, NORM_REPLACE, NORM_PREPEND };
typedef struct tok_norm {
    int kind;
    char *pat, *rep;       // NORM_REPLACE: literal pattern and replacement; PREPEND: rep
} tok_norm;

enum { PRE_SPLIT, PRE_BYTELEVEL };
enum { BEH_REMOVED, BEH_ISOLATED, BEH_MERGED_PREV, BEH_MERGED_NEXT, BEH_CONTIGUOUS };
typedef struct tok_pre {
    int kind;
    pcre2_code *re;        // SPLIT, BYTELEVEL with use_regex; NULL otherwise
    int behavior;          // SPLIT
    bool invert;           // SPLIT
    bool add_prefix_space; // BYTELEVEL
} tok_pre;

#define TOK_MAX_PRE 16

// Post-processor for one sequence: ids before and after the text's ids.
typedef struct tok_post {
    int32_t *pre, *post;   // (n_pre,), (n_post,)
    int n_pre, n_post;
} tok_post;

// ---- BPE cache: pre-token bytes -> ids -------------------------------------
typedef struct tok_cache {
    pthread_mutex_t mu;
    uint32_t cap;          // slots, power of two
    uint32_t n;            // entries
    uint64_t *hash;        // (cap,) key hash | 1; 0 = free slot
    uint32_t *koff, *ioff; // (cap,) offsets of key bytes / ids in the arenas
    uint16_t *klen, *ni;   // (cap,) key bytes / id count
    char *kbuf;            // (kcap,) key bytes arena
    size_t kused, kcap;
    int32_t *ibuf;         // (icap,) ids arena
    size_t iused, icap;
} tok_cache;

struct pt_tokenizer {
    char *name;            // file name for messages
    int32_t n_vocab;       // max id + 1 over vocab and added tokens
    char **tok_str;        // (n_vocab,) token strings (NULL for holes)
    char **retired;        // (n_retired,) replaced strings still keyed in strs
    int n_retired;
    char **piece;          // (n_vocab,) decoded bytes per token
    uint32_t *piece_len;   // (n_vocab,)
    uint8_t *attr;         // (n_vocab,) TOK_ATTR_*
    tok_strmap strs;       // token string -> id (vocab, then added tokens)
    tok_strmap raw;        // byte-level: raw-byte form -> id (ignore_merges lookups)
    char **raw_str;        // (n_vocab,) keys of `raw` (NULL unless built)
    tok_pairmap merges;
    char **merge_str;      // (n_merges,) "a b" as read (for GGUF writing)
    int32_t n_merges;

    bool byte_level;       // a ByteLevel pre-tokenizer: BPE runs on raw bytes
    int32_t byte_id[256];  // byte-level: id of each byte's symbol, -1 if absent
    int32_t fb_id[256];    // byte_fallback: id of <0xXX>, -1 if absent
    bool ignore_merges, byte_fallback, fuse_unk;
    int32_t unk_id;        // -1 none

    tok_added *added;      // (n_added,)
    int n_added;
    tok_trie trie_raw;     // added tokens with normalized=false
    tok_trie trie_norm;    // added tokens with normalized=true
    bool has_norm_tokens;

    tok_norm *norm;        // (n_norm,) flattened normalizer sequence
    int n_norm;
    tok_pre pre[TOK_MAX_PRE]; // (n_pre,) flattened pre-tokenizer sequence
    int n_pre;
    tok_post post;

    int32_t bos_id, eos_id;
    char *bos_str, *eos_str, *chat_template;
    int32_t *eog;          // (n_eog,) extra end-of-generation ids
    int n_eog;

    char *tiktoken_pat;    // tiktoken kind: the pattern as written (Rust syntax); NULL otherwise
    bool kimi_chunks;      // Kimi's encode: text cut into <= 400k-char pieces with <= 25k-char
                           // (non-)whitespace runs, each encoded on its own

    tok_cache *cache;
};

enum { TOK_ATTR_NORMAL = 0, TOK_ATTR_SPECIAL = 1, TOK_ATTR_ADDED = 2, TOK_ATTR_HOLE = 4 };

// The GPT-2 byte <-> unicode mapping used by ByteLevel.
extern const uint16_t tok_byte_to_cp[256];
int tok_cp_to_byte(uint32_t cp);                // -1 if cp is not a mapped char
// Decodes one UTF-8 char at s (n bytes available); returns its length
// (1..4) and the code point, or 0 if the sequence is invalid / truncated.
int tok_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp);
int tok_utf8_enc(uint32_t cp, char *out);

// Growable id vector.
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
void tok_ids_push(tok_ids *a, int32_t id);

// Growable byte string, always NUL-terminated once anything (even 0 bytes)
// was put: p[0..n) the bytes, cap the allocation. Start it zeroed.
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;
void tok_buf_put(tok_buf *b, const void *s, size_t n); // appends n bytes of s
void tok_buf_str(tok_buf *b, const char *s);           // appends the string s

// BPE over one pre-token (bytes if byte_level, else UTF-8 chars).
void tok_bpe_word(const pt_tokenizer *t, const char *s, size_t len, tok_ids *out);
tok_cache *tok_cache_new(void);
void tok_cache_free(tok_cache *c);

// Compiles an Oniguruma-syntax pattern (as written in tokenizer.json) with
// PCRE2 (UTF, UCP, invalid UTF tolerated, JIT). NULL + err on failure.
pcre2_code *tok_regex_compile(const char *pattern, bool literal, const char *where, pt_err *err);

// Code points of general category prop (e.g. "L", "Nd") that PCRE2's
// Unicode tables lack but HF's Oniguruma has, as a PCRE2 class body
// ("\\x{..}-\\x{..}..."); NULL if none (tok_unicode.c).
const char *tok_unicode_extra(const char *prop, size_t len);

// ---- tiktoken kind (tok_tiktoken.c, tok_tiktoken_re.c) -----------------------
// Kimi-K2's pre-tokenizer pattern in tiktoken's (Rust fancy-regex) syntax.
extern const char tok_kimi_pattern[];
// Translates a Rust-syntax pattern into a PCRE2 pattern that matches the
// same pieces (malloc'ed); NULL with a reason in msg when it uses syntax
// the translation does not cover.
char *tok_tiktoken_translate(const char *pattern, char *msg, size_t msg_len);
// Translates and compiles (UTF, UCP, JIT); NULL + err naming `where`.
pcre2_code *tok_tiktoken_compile(const char *pattern, const char *where, pt_err *err);
// A tiktoken tokenizer from GGUF-style tokens (byte-level spelling; types
// 1 normal = rank = id, 3/4 special, 5 unused) and a pattern.
pt_tokenizer *tok_tiktoken_from_tokens(const char *name, const gguf_str *toks, const int32_t *types, uint64_t n,
                                       const char *pattern, pt_err *err);
// The merges llama.cpp's converter derives from the ranks ("a b" in
// byte-level spelling, rank order): for each token, tiktoken's rule with
// lower ranks only; a token that ends as two parts gives a merge. Returns
// the count; *out is malloc'ed, as is each string.
int32_t tok_tiktoken_merges(const pt_tokenizer *t, char ***out);

// Builds tries once t->added is complete.
void tok_trie_build(tok_trie *tr, const pt_tokenizer *t, bool normalized);
void tok_trie_free(tok_trie *tr);

// ByteLevel inverse: maps each char of s back to its byte. False (nothing
// allocated) if some char is not one of the 256 mapped chars.
bool tok_bytelevel_unmap(const char *s, char **out, size_t *len);

// Fills piece/piece_len for every token from the decoder description.
int tok_build_pieces(pt_tokenizer *t, void *decoder_json, pt_err *err);

#endif
