// tests/test_split.c — split GGUF files (llama.cpp's gguf-split layout:
// NAME-0000K-of-0000N.gguf, metadata in part 1, split.no / split.count /
// split.tensors.count in every part): opened from any part as one model,
// reads going to the right file on every reader backend, and refusals for a
// missing part and for parts that belong to another split.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "io/io.h"
#include "io/reader.h"
#include "tests/llamacpp_cmp.h"
#include "tests/testutil/tu_gguf.h"

#define SPLIT_DIR "llamacpp/split/"
#define PART(k) SPLIT_DIR "tiny-dsv3-Q4_K_M-0000" #k "-of-00003.gguf"

// Writes the tensors of g as an n-part split at PREFIX-0000K-of-0000N.gguf,
// per_part tensors per part (the last takes the rest), as llama-gguf-split
// --split-max-tensors does: every metadata record in part 1, the split
// keys in every part, tensors in order.
static void write_split(const gguf_file *g, const char *prefix, int n, int per_part)
{
    for (int p = 0; p < n; p++) {
        gguf_writer *w = gguf_writer_new(32);
        if (p == 0)
            for (uint64_t i = 0; i < g->n_kv; i++)
                if (strncmp(g->kv[i].key, "split.", 6) != 0)
                    gguf_w_copy_kv(w, &g->kv[i]);
        gguf_w_u16(w, "split.no", (uint16_t)p);
        gguf_w_u16(w, "split.count", (uint16_t)n);
        gguf_w_i32(w, "split.tensors.count", (int32_t)g->n_tensors);
        const uint64_t t0 = (uint64_t)p * (uint64_t)per_part;
        const uint64_t t1 = p == n - 1 ? g->n_tensors : t0 + (uint64_t)per_part;
        for (uint64_t i = t0; i < t1; i++)
            gguf_w_tensor(w, g->tensors[i].name, g->tensors[i].n_dims, g->tensors[i].ne, g->tensors[i].type);
        char path[1024];
        snprintf(path, sizeof path, "%s-%05d-of-%05d.gguf", prefix, p + 1, n);
        int src_of[1024];
        cr_assert_leq(t1 - t0, 1024);
        for (uint64_t i = t0; i < t1; i++)
            src_of[i - t0] = (int)i;
        tu_gguf_write(path, w, g, src_of, (int)(t1 - t0), NULL, NULL);
        gguf_writer_free(w);
    }
}

static void copy_file(const char *from, const char *to)
{
    cr_assert_eq(tu_sh(NULL, "cp '%s' '%s'", from, to), 0, "cp %s %s", from, to);
}

// The fixture parts opened from each part: one table of 92 tensors with
// the parts' tensor counts (40, 40, 12) and the metadata of part 1.
Test(split, opens_from_any_part)
{
    for (int k = 1; k <= 3; k++) {
        char rel[128];
        snprintf(rel, sizeof rel, SPLIT_DIR "tiny-dsv3-Q4_K_M-%05d-of-00003.gguf", k);
        char *p = tu_fixture(rel);
        pt_err err = {{0}};
        gguf_file *g = gguf_open(p, &err);
        cr_assert(g, "%s", err.msg);
        cr_expect_eq(g->n_parts, 3u);
        cr_expect_eq(g->n_tensors, 92u);
        cr_expect(strstr(g->path, "-00001-of-00003.gguf"), "metadata part is %s", g->path);
        cr_expect_eq(g->parts[0].n_tensors, 40u);
        cr_expect_eq(g->parts[1].n_tensors, 40u);
        cr_expect_eq(g->parts[2].n_tensors, 12u);
        cr_expect_str_eq(gguf_get_str(g, "general.architecture", &err), "deepseek2");
        // Tensor i of part q: located in q, its bytes read from q's file.
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const gguf_tensor *t = &g->tensors[i];
            const uint32_t q = i < 40 ? 0 : i < 80 ? 1 : 2;
            cr_expect_eq(t->part, q, "%s in part %u", t->name, t->part);
            cr_expect_eq(pt_loc_file(t->offset), q);
            cr_expect(pt_loc_off(t->offset) + t->size <= g->parts[q].file_size);
        }
        // The last tensor's last bytes come from part 3, the same as a plain pread there.
        const gguf_tensor *t = &g->tensors[91];
        unsigned char a[64], b[64];
        cr_assert_eq(gguf_read(g, t->offset + t->size - 64, a, 64, &err), 0, "%s", err.msg);
        cr_assert_eq(pread(g->parts[2].fd, b, 64, (off_t)(pt_loc_off(t->offset) + t->size - 64)), 64);
        cr_expect(memcmp(a, b, 64) == 0);
        gguf_close(g);
        free(p);
    }
}

// Opened from part 3, the split gives llama.cpp's logits of the whole file
// (case 1; test_llamacpp_files runs all cases from part 1).
Test(split, logits_from_last_part)
{
    char *p = tu_fixture(PART(3));
    char err[1024] = "";
    petrel_model *m = lc_open(p, err, sizeof err);
    cr_assert(m, "%s", err);
    cr_expect(strstr(petrel_model_path(m), "-00001-of-00003.gguf"), "model named %s", petrel_model_path(m));
    lc_result r;
    lc_run_case(m, "Q4_K_M", 1, &r);
    cr_expect_eq(r.rows_same_route, 7);
    cr_expect(r.max_diff <= LC_TIGHT, "max abs diff %g", r.max_diff);
    petrel_model_close(m);
    free(p);
}

static void expect_open_fails(const char *path, const char *needle1, const char *needle2)
{
    pt_err err = {{0}};
    gguf_file *g = gguf_open(path, &err);
    cr_expect_null(g, "%s was accepted", path);
    if (g)
        gguf_close(g);
    cr_expect(strstr(err.msg, needle1), "message '%s' lacks '%s'", err.msg, needle1);
    if (needle2)
        cr_expect(strstr(err.msg, needle2), "message '%s' lacks '%s'", err.msg, needle2);
    char msg[1024] = "";
    petrel_model *m = petrel_model_open(path, NULL, msg, sizeof msg);
    cr_expect_null(m);
    if (m)
        petrel_model_close(m);
    cr_expect(strstr(msg, needle1), "petrel_model_open: '%s' lacks '%s'", msg, needle1);
}

Test(split, missing_part_refused)
{
    char *dir = tu_tmpdir("split");
    char a[1024], c[1024];
    snprintf(a, sizeof a, "%s/m-00001-of-00003.gguf", dir);
    snprintf(c, sizeof c, "%s/m-00003-of-00003.gguf", dir);
    char *p1 = tu_fixture(PART(1)), *p3 = tu_fixture(PART(3));
    copy_file(p1, a);
    copy_file(p3, c);
    expect_open_fails(a, "m-00002-of-00003.gguf", "missing");
    expect_open_fails(c, "m-00002-of-00003.gguf", "missing");
    free(p1);
    free(p3);
    tu_rmrf(dir);
    free(dir);
}

// A renamed file whose name no longer says which part it is.
Test(split, renamed_part_refused)
{
    char *dir = tu_tmpdir("split");
    char a[1024];
    snprintf(a, sizeof a, "%s/model.gguf", dir);
    char *p2 = tu_fixture(PART(2));
    copy_file(p2, a);
    expect_open_fails(a, "model.gguf", "-00002-of-00003.gguf");
    free(p2);
    tu_rmrf(dir);
    free(dir);
}

// Parts of other splits (of another model) in place of part 2: one from a
// 3-part split with another distribution of tensors (the counts no longer
// add up), one from a 2-part split (its split.count differs).
Test(split, foreign_part_refused)
{
    char *dir = tu_tmpdir("split");
    char *other = tu_fixture("llamacpp/models/tiny-dsv3-Q2_K-mix.gguf");
    pt_err err = {{0}};
    gguf_file *g = gguf_open(other, &err);
    cr_assert(g, "%s", err.msg);
    char prefix[1024], path[1024];
    snprintf(prefix, sizeof prefix, "%s/three", dir);
    write_split(g, prefix, 3, 30);
    snprintf(prefix, sizeof prefix, "%s/two", dir);
    write_split(g, prefix, 2, 46);
    gguf_close(g);
    // Our own 3-part split of the other model opens and matches it.
    snprintf(path, sizeof path, "%s/three-00002-of-00003.gguf", dir);
    gguf_file *s = gguf_open(path, &err);
    cr_assert(s, "%s", err.msg);
    cr_expect_eq(s->n_tensors, 92u);
    gguf_close(s);

    char *p1 = tu_fixture(PART(1)), *p3 = tu_fixture(PART(3));
    char a[1024], b[1024], c[1024], from[1024];
    snprintf(a, sizeof a, "%s/m-00001-of-00003.gguf", dir);
    snprintf(b, sizeof b, "%s/m-00002-of-00003.gguf", dir);
    snprintf(c, sizeof c, "%s/m-00003-of-00003.gguf", dir);
    copy_file(p1, a);
    copy_file(p3, c);
    snprintf(from, sizeof from, "%s/three-00002-of-00003.gguf", dir);
    copy_file(from, b);
    expect_open_fails(a, "m-00002-of-00003.gguf", "tensors");
    snprintf(from, sizeof from, "%s/two-00002-of-00002.gguf", dir);
    copy_file(from, b);
    expect_open_fails(a, "m-00002-of-00003.gguf", "does not belong");
    expect_open_fails(c, "m-00002-of-00003.gguf", "does not belong");
    free(p1);
    free(p3);
    free(other);
    tu_rmrf(dir);
    free(dir);
}

// The reader with several files: located offsets read from the file they
// name, on every backend, at offsets that are and are not 4 KiB-aligned.
Test(split, reader_reads_the_named_file)
{
    char *dir = tu_tmpdir("split");
    enum { NF = 3, SZ = 3 * 4096 + 100 };
    char names[NF][1024];
    const char *paths[NF];
    unsigned char *data[NF];
    for (int f = 0; f < NF; f++) {
        snprintf(names[f], sizeof names[f], "%s/f%d.bin", dir, f);
        paths[f] = names[f];
        data[f] = malloc(SZ);
        for (int i = 0; i < SZ; i++)
            data[f][i] = (unsigned char)(i * 7 + f * 101 + (i >> 8));
        int fd = open(names[f], O_CREAT | O_TRUNC | O_WRONLY, 0644);
        cr_assert_eq(write(fd, data[f], SZ), SZ);
        close(fd);
    }
    const pt_io_mode modes[] = {PT_IO_URING, PT_IO_POOL, PT_IO_BUFFERED};
    for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
        pt_reader_cfg cfg = {.paths = paths, .n_paths = NF, .mode = modes[mi], .max_request = 4096};
        pt_err err = {{0}};
        pt_reader *r = pt_reader_open(&cfg, &err);
        if (!r && modes[mi] == PT_IO_URING) {
            fprintf(stderr, "split: io_uring unavailable here (%s)\n", err.msg);
            continue;
        }
        cr_assert(r, "%s", err.msg);
        const uint64_t offs[] = {0, 4096, 123, 5000, SZ - 77};
        const uint64_t lens[] = {4096, 100, 9000, 4000, 77};
        unsigned char *buf[NF][5];
        for (int f = NF - 1; f >= 0; f--)
            for (int j = 0; j < 5; j++) {
                buf[f][j] = pt_alloc_aligned(pt_io_span(offs[j], lens[j]) + 4096);
                cr_assert_eq(pt_reader_submit(r, (uint64_t)(f * 5 + j), pt_loc((uint32_t)f, offs[j]), lens[j],
                                              buf[f][j], &err), 0, "%s", err.msg);
            }
        int got = 0;
        uint64_t tag;
        int rc;
        while ((rc = pt_reader_wait(r, &tag, &err)) == 1) {
            const int f = (int)tag / 5, j = (int)tag % 5;
            cr_expect(memcmp(buf[f][j] + pt_io_head(offs[j]), data[f] + offs[j], lens[j]) == 0,
                      "%s: file %d read %d: wrong bytes", pt_io_mode_name(modes[mi]), f, j);
            got++;
        }
        cr_expect_eq(rc, 0, "%s", err.msg);
        cr_expect_eq(got, NF * 5);
        // A read past the end of file 1 fails naming file 1.
        unsigned char *p = pt_alloc_aligned(8192);
        cr_assert_eq(pt_reader_submit(r, 99, pt_loc(1, SZ - 10), 4000, p, &err), 0);
        cr_expect_eq(pt_reader_wait(r, &tag, &err), -1);
        cr_expect(strstr(err.msg, "f1.bin"), "message '%s' does not name f1.bin", err.msg);
        pt_free_aligned(p);
        pt_reader_close(r);
        for (int f = 0; f < NF; f++)
            for (int j = 0; j < 5; j++)
                pt_free_aligned(buf[f][j]);
    }
    for (int f = 0; f < NF; f++)
        free(data[f]);
    tu_rmrf(dir);
    free(dir);
}
