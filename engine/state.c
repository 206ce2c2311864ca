// engine/state.c — saving and restoring a context's state (the latent KV
// cache of every block including MTP, the filled lengths, the token history)
// as a self-checking, zstd-compressed blob or file.
//
// Layout: an 80-byte header (st_header below, little-endian as on every
// target of Petrel) followed by one zstd frame with its content checksum on.
// The frame decompresses to
//   tokens  (n_past) int32
//   kv[il]  (len_il, kv_dim) float32 for each block il, len_il = n_past for
//           trunk blocks and mtp_len for the MTP block
//   ik[il]  (len_il, idx_dim) float32 for each block il with a DSA indexer
//           (the indexer key cache; none for other models)
// Positions are implicit: row p of every block is position p.
// Version 2 added the indexer key cache (and idx_dim): a version 1 state is
// refused, naming both versions, rather than read without its keys.
// The header carries a model identity (hparams, file size, tensor count and
// the first and last 64 KiB of the tensor data), the raw and compressed
// sizes, a hash of the raw payload and a hash of the header itself.
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "common/util.h"
#include "engine/context.h"
#include "engine/state.h"

#define ST_MAGIC "PETRELKV"
#define ST_VERSION 2u
#define ST_ID_SPAN (64u << 10)

typedef struct st_header {
    char magic[8];          // "PETRELKV"
    uint32_t version;       // ST_VERSION
    uint32_t header_bytes;  // sizeof(st_header)
    uint64_t model_id;      // st_model_id()
    uint32_t n_blocks;      // trunk + MTP blocks
    uint32_t kv_dim;        // kv_lora + qk_rope
    int32_t n_past;         // filled trunk positions
    int32_t mtp_len;        // filled MTP positions
    uint32_t n_vocab;       // for the error message on a model mismatch
    uint32_t idx_dim;       // DSA indexer key length (0: no indexer key cache)
    uint64_t raw_bytes;     // decompressed payload size
    uint64_t comp_bytes;    // zstd frame size following the header
    uint64_t payload_hash;  // st_hash over the raw payload
    uint64_t header_hash;   // st_hash over the bytes before this field
} st_header;
_Static_assert(sizeof(st_header) == PT_STATE_HEADER_BYTES, "st_header layout");

// A streamable 64-bit hash over 4-byte words (every payload segment is a
// multiple of 4 bytes); a trailing partial word is folded in byte-wise.
static uint64_t st_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, b + i, 4);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define ST_SEED 0xcbf29ce484222325ull

void pt_state_seal_header(void *buf, size_t len)
{
    assert(buf || !len);
    if (len < sizeof(st_header))
        return;
    uint64_t h = st_hash(ST_SEED, buf, offsetof(st_header, header_hash));
    memcpy((unsigned char *)buf + offsetof(st_header, header_hash), &h, sizeof h);
}

// Identity of the model a state belongs to: the shape-defining hparams, the
// file size, the tensor count and the first and last 64 KiB of the tensor
// data. Returns 0 and the id, or -1 + err on a read failure.
static int st_model_id(const petrel_model *m, uint64_t *id, pt_err *err)
{
    const pt_hparams *hp = &m->hp;
    const gguf_file *g = m->gguf;
    uint32_t f[] = {hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_nextn, hp->n_head, hp->q_lora_rank,
                    hp->kv_lora_rank, hp->qk_nope, hp->qk_rope, hp->v_head, hp->n_ff, hp->n_ff_exp,
                    hp->n_expert, hp->n_expert_used, hp->n_expert_shared, hp->n_dense_lead,
                    hp->idx_n_head, hp->idx_head_dim, hp->idx_topk, hp->idx_rope_neox};
    uint64_t h = st_hash(ST_SEED, f, sizeof f);
    uint64_t sz[2] = {g->file_size, g->n_tensors};
    h = st_hash(h, sz, sizeof sz);
    uint64_t data = g->file_size > g->data_offset ? g->file_size - g->data_offset : 0;
    uint64_t span = data < ST_ID_SPAN ? data : ST_ID_SPAN;
    if (span) {
        unsigned char *buf = malloc(span);
        if (!buf)
            return pt_errf(err, "out of memory");
        if (gguf_read(g, g->data_offset, buf, span, err) < 0 ||
            (h = st_hash(h, buf, span), gguf_read(g, g->file_size - span, buf, span, err) < 0)) {
            free(buf);
            return -1;
        }
        h = st_hash(h, buf, span);
        free(buf);
    }
    *id = h;
    return 0;
}

// Length of the indexer keys the context caches (0: none).
static uint32_t st_idx_dim(const petrel_context *c)
{
    for (uint32_t il = 0; il < pt_hp_n_blocks(&c->model->hp); il++)
        if (c->ik[il])
            return c->model->hp.idx_head_dim;
    return 0;
}

// One payload segment: a pointer and a byte count, in payload order.
typedef struct st_seg {
    void *p;
    size_t n;
} st_seg;

// Lists the payload segments of c (tokens, each block's filled latent rows,
// then each block's filled indexer key rows, empty without an indexer) into
// segs (2 * n_blocks + 1 entries); returns the total byte count.
static uint64_t st_segments(const petrel_context *c, int32_t n_past, int32_t mtp_len, st_seg *segs)
{
    const uint32_t nb = pt_hp_n_blocks(&c->model->hp);
    uint64_t total = 0;
    segs[0].p = c->tokens;
    segs[0].n = (size_t)n_past * sizeof(petrel_token);
    total += segs[0].n;
    for (uint32_t il = 0; il < nb; il++) {
        int32_t len = il < c->model->hp.n_layer ? n_past : mtp_len;
        segs[il + 1].p = c->kv[il];
        segs[il + 1].n = (size_t)len * c->kv_dim * sizeof(float);
        total += segs[il + 1].n;
        st_seg *ik = &segs[nb + 1 + il];
        ik->p = c->ik[il];
        ik->n = c->ik[il] ? (size_t)len * st_idx_dim(c) * sizeof(float) : 0;
        total += ik->n;
    }
    return total;
}

static void copy_err(char *errbuf, size_t errlen, const pt_err *e)
{
    if (errbuf && errlen)
        snprintf(errbuf, errlen, "%s", e->msg);
}

// Serialises the context's state into a malloc'ed blob (*out, *out_len).
// The context is not modified. Returns 0, or -1 + err.
int petrel_state_save_mem(petrel_context *c, void **out, size_t *out_len, char *errbuf, size_t errlen)
{
    assert(c && out && out_len);
    pt_err err = {{0}};
    const uint32_t nb = pt_hp_n_blocks(&c->model->hp);
    st_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, ST_MAGIC, 8);
    h.version = ST_VERSION;
    h.header_bytes = sizeof h;
    if (st_model_id(c->model, &h.model_id, &err) < 0) {
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    h.n_blocks = nb;
    h.kv_dim = c->kv_dim;
    h.idx_dim = st_idx_dim(c);
    h.n_past = c->n_past;
    h.mtp_len = c->model->hp.n_nextn ? c->mtp_len : 0;
    h.n_vocab = c->model->hp.n_vocab;
    const uint32_t n_segs = 2 * nb + 1;
    st_seg *segs = calloc(n_segs, sizeof *segs);
    if (!segs)
        return -1;
    h.raw_bytes = st_segments(c, h.n_past, h.mtp_len, segs);
    size_t cap = sizeof h + ZSTD_compressBound(h.raw_bytes) + 64;
    unsigned char *buf = malloc(cap);
    ZSTD_CCtx *z = ZSTD_createCCtx();
    if (!buf || !z) {
        free(segs);
        free(buf);
        ZSTD_freeCCtx(z);
        pt_errf(&err, "out of memory (state of %d positions)", c->n_past);
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setPledgedSrcSize(z, h.raw_bytes);
    ZSTD_outBuffer ob = {buf + sizeof h, cap - sizeof h, 0};
    uint64_t ph = ST_SEED;
    int fail = 0;
    for (uint32_t s = 0; s < n_segs && !fail; s++) {
        ph = st_hash(ph, segs[s].p, segs[s].n);
        ZSTD_inBuffer ib = {segs[s].p, segs[s].n, 0};
        ZSTD_EndDirective mode = s + 1 == n_segs ? ZSTD_e_end : ZSTD_e_continue;
        for (;;) {
            size_t r = ZSTD_compressStream2(z, &ob, &ib, mode);
            if (ZSTD_isError(r)) {
                pt_errf(&err, "zstd: %s", ZSTD_getErrorName(r));
                fail = 1;
                break;
            }
            if (mode == ZSTD_e_end ? r == 0 : ib.pos == ib.size)
                break;
        }
    }
    ZSTD_freeCCtx(z);
    free(segs);
    if (fail) {
        free(buf);
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    h.comp_bytes = ob.pos;
    h.payload_hash = ph;
    memcpy(buf, &h, sizeof h);
    pt_state_seal_header(buf, sizeof h);
    *out = buf;
    *out_len = sizeof h + ob.pos;
    return 0;
}

// Reads the header of the blob (buf, len) named `name` into *h (zeroed when
// the blob is too short) and checks what needs no model: its size, magic,
// version and its own hash. The one header parser of both the loader and
// petrel_state_tokens (which fuzz/fuzz_state.c exercises). 0 or -1 + err.
static int st_read_header(const void *buf, size_t len, const char *name, st_header *h, pt_err *err)
{
    assert(h && name && (buf || !len));
    memset(h, 0, sizeof *h);
    if (len < sizeof *h)
        return pt_errf(err, "%s: not a Petrel state (truncated: %zu bytes, the header alone is %zu)", name,
                       len, sizeof *h);
    memcpy(h, buf, sizeof *h);
    if (memcmp(h->magic, ST_MAGIC, 8) != 0)
        return pt_errf(err, "%s: not a Petrel state file (bad magic)", name);
    if (h->version == 1)
        return pt_errf(err, "%s: state version 1 is no longer read (this build reads version %u, which also holds "
                       "the DSA indexer key cache): re-create the state", name, ST_VERSION);
    if (h->version != ST_VERSION || h->header_bytes != sizeof *h)
        return pt_errf(err, "%s: unsupported state version %u (this build reads version %u)", name, h->version,
                       ST_VERSION);
    if (st_hash(ST_SEED, h, offsetof(st_header, header_hash)) != h->header_hash)
        return pt_errf(err, "%s: corrupted state: header checksum mismatch", name);
    return 0;
}

// Validates a header that st_read_header accepted from a blob of avail
// bytes named `name` against the context's model; 0 or -1 + err.
static int st_check_header(const petrel_context *c, const st_header *h, size_t avail, const char *name,
                           pt_err *err)
{
    uint64_t id;
    pt_err e2 = {{0}};
    if (st_model_id(c->model, &id, &e2) < 0)
        return pt_errf(err, "%s", e2.msg);
    const uint32_t nb = pt_hp_n_blocks(&c->model->hp);
    if (h->model_id != id || h->n_blocks != nb || h->kv_dim != c->kv_dim || h->idx_dim != st_idx_dim(c))
        return pt_errf(err,
                       "%s: the state belongs to another model (%u blocks, kv dim %u, vocab %u; id %016llx) "
                       "than %s (id %016llx)",
                       name, h->n_blocks, h->kv_dim, h->n_vocab, (unsigned long long)h->model_id,
                       c->model->path, (unsigned long long)id);
    if (h->n_past < 0 || h->mtp_len < 0 || h->mtp_len > h->n_past)
        return pt_errf(err, "%s: corrupted state: bad lengths n_past %d, mtp_len %d", name, h->n_past, h->mtp_len);
    if ((uint32_t)h->n_past > c->n_ctx)
        return pt_errf(err, "%s: the state holds %d positions, more than the context length %u", name, h->n_past,
                       c->n_ctx);
    if (avail - sizeof *h != h->comp_bytes)
        return pt_errf(err, "%s: %s state: %zu payload bytes, the header says %llu", name,
                       avail - sizeof *h < h->comp_bytes ? "truncated" : "corrupted", avail - sizeof *h,
                       (unsigned long long)h->comp_bytes);
    return 0;
}

// Restores a blob made by petrel_state_save_mem into c, replacing its state.
// On failure c is left empty (kv_len 0) and -1 + err is returned.
static int load_named(petrel_context *c, const void *buf, size_t len, const char *name, char *errbuf,
                      size_t errlen);

int petrel_state_load_mem(petrel_context *c, const void *buf, size_t len, char *errbuf, size_t errlen)
{
    return load_named(c, buf, len, "state", errbuf, errlen);
}

static int load_named(petrel_context *c, const void *buf, size_t len, const char *name, char *errbuf,
                      size_t errlen)
{
    assert(c && (buf || !len));
    pt_err err = {{0}};
    st_header h;
    c->n_past = 0;
    c->mtp_len = 0;
    if (st_read_header(buf, len, name, &h, &err) < 0 || st_check_header(c, &h, len, name, &err) < 0) {
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    const uint32_t nb = pt_hp_n_blocks(&c->model->hp);
    const uint32_t n_segs = 2 * nb + 1;
    st_seg *segs = calloc(n_segs, sizeof *segs);
    ZSTD_DCtx *z = ZSTD_createDCtx();
    if (!segs || !z) {
        free(segs);
        ZSTD_freeDCtx(z);
        pt_errf(&err, "out of memory");
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    c->n_past = 0;
    c->mtp_len = 0;
    uint64_t raw = st_segments(c, h.n_past, h.mtp_len, segs);
    int fail = 0;
    if (raw != h.raw_bytes)
        fail = pt_errf(&err, "%s: corrupted state: payload of %llu bytes, expected %llu", name,
                       (unsigned long long)h.raw_bytes, (unsigned long long)raw);
    ZSTD_inBuffer ib = {(const unsigned char *)buf + sizeof h, len - sizeof h, 0};
    uint64_t ph = ST_SEED;
    size_t r = 1;
    for (uint32_t s = 0; s < n_segs && !fail; s++) {
        ZSTD_outBuffer ob = {segs[s].p, segs[s].n, 0};
        while (ob.pos < ob.size) {
            size_t in0 = ib.pos;
            r = ZSTD_decompressStream(z, &ob, &ib);
            if (ZSTD_isError(r)) {
                fail = pt_errf(&err, "%s: corrupted state: zstd: %s", name, ZSTD_getErrorName(r));
                break;
            }
            if (ob.pos < ob.size && ib.pos == ib.size && in0 == ib.pos) {
                fail = pt_errf(&err, "%s: truncated state: the payload ends early", name);
                break;
            }
        }
        if (!fail)
            ph = st_hash(ph, segs[s].p, segs[s].n);
    }
    // Drain the frame end (checksum) and demand nothing after it.
    while (!fail && r != 0) {
        unsigned char sink[64];
        ZSTD_outBuffer ob = {sink, sizeof sink, 0};
        size_t in0 = ib.pos;
        r = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(r))
            fail = pt_errf(&err, "%s: corrupted state: zstd: %s", name, ZSTD_getErrorName(r));
        else if (ob.pos)
            fail = pt_errf(&err, "%s: corrupted state: payload longer than its header says", name);
        else if (r != 0 && in0 == ib.pos)
            fail = pt_errf(&err, "%s: truncated state: the compressed frame is incomplete", name);
    }
    if (!fail && ib.pos != ib.size)
        fail = pt_errf(&err, "%s: corrupted state: %zu bytes after the payload", name, ib.size - ib.pos);
    if (!fail && ph != h.payload_hash)
        fail = pt_errf(&err, "%s: corrupted state: payload checksum mismatch", name);
    ZSTD_freeDCtx(z);
    free(segs);
    if (fail) {
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    c->n_past = h.n_past;
    c->mtp_len = h.mtp_len;
    c->last_n = 0;
    c->logits_n = 0;
    c->mtp_n = 0;
    return 0;
}

int petrel_state_save(petrel_context *c, const char *path, char *errbuf, size_t errlen)
{
    assert(c && path);
    void *buf;
    size_t len;
    if (petrel_state_save_mem(c, &buf, &len, errbuf, errlen) < 0)
        return -1;
    pt_err err = {{0}};
    int rc = pt_write_file_atomic_at(path, buf, len, "state.write", &err);
    free(buf);
    if (rc < 0)
        copy_err(errbuf, errlen, &err);
    return rc;
}

int petrel_state_load(petrel_context *c, const char *path, char *errbuf, size_t errlen)
{
    assert(c && path);
    pt_err err = {{0}};
    size_t len;
    char *buf = pt_read_file(path, &len, &err);
    if (!buf) {
        c->n_past = 0;
        c->mtp_len = 0;
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    int rc = load_named(c, buf, len, path, errbuf, errlen);
    free(buf);
    return rc;
}

int petrel_state_tokens(const void *buf, size_t len, petrel_token **tokens, char *errbuf, size_t errlen)
{
    assert(tokens);
    st_header h;
    pt_err err = {{0}};
    *tokens = NULL;
    int rc = st_read_header(buf, len, "state", &h, &err);
    if (rc == 0 && h.n_past < 0)
        rc = pt_errf(&err, "state: corrupted state: bad length n_past %d", h.n_past);
    if (rc < 0) {
        copy_err(errbuf, errlen, &err);
        return -1;
    }
    // The buffer grows as the frame really yields tokens (from 64 KiB,
    // doubling): a corrupt n_past cannot make a small blob allocate
    // gigabytes (found by fuzz/fuzz_state.c).
    const size_t want = (size_t)h.n_past * sizeof(petrel_token);
    size_t cap = want < ((size_t)64 << 10) ? want : ((size_t)64 << 10);
    petrel_token *t = malloc(cap + sizeof *t);
    ZSTD_DCtx *z = ZSTD_createDCtx();
    ZSTD_inBuffer ib = {(const unsigned char *)buf + sizeof h, len - sizeof h, 0};
    ZSTD_outBuffer ob = {t, cap, 0};
    while (t && z && ob.pos < want) {
        if (ob.pos == ob.size) {
            cap = cap > want / 2 ? want : cap * 2;
            petrel_token *nt = realloc(t, cap + sizeof *t);
            if (!nt)
                break;
            t = nt;
            ob.dst = t;
            ob.size = cap;
        }
        size_t in0 = ib.pos;
        size_t r = ZSTD_decompressStream(z, &ob, &ib);
        if (ZSTD_isError(r) || (ob.pos < ob.size && in0 == ib.pos && ib.pos == ib.size))
            break;
    }
    ZSTD_freeDCtx(z);
    if (!t || ob.pos < want) {
        free(t);
        snprintf(errbuf, errlen, "corrupted or truncated state");
        return -1;
    }
    *tokens = t;
    return h.n_past;
}
