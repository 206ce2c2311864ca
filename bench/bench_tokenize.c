// bench/bench_tokenize.c — tokenizer throughput driver for bench/tokenize.sh.
//
//   bench_tokenize gen OUT BYTES        deterministic mixed-language text
//   bench_tokenize run TOKENIZER.json FILE (text|jsonl) [MIN_SECONDS]
//
// `run` splits the input into chunks (jsonl: the "text" field of each line;
// text: ~64 KiB pieces cut after a newline), encodes every chunk once as a
// warm-up, then repeats timed passes (single thread) for at least
// MIN_SECONDS (default 2) and prints
//   bytes=B passes=P seconds=S mbs=M ids=N hash=H
// (cpu_mbs: bytes over process CPU time, less sensitive to a busy machine)
// where hash is FNV-1a over the ids of one pass (to compare with another
// implementation on the same chunks).
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "tokenizer/tokenizer.h"

static uint32_t rng_state = 0x9E3779B9u;
static uint32_t rnd(void) // xorshift32
{
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rng_state = x;
}
static const char *pick(const char *const *v, size_t n) { return v[rnd() % n]; }
#define PICK(v) pick(v, sizeof v / sizeof v[0])

static const char *const EN[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he",
    "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "their", "one",
    "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no",
    "model", "tokenizer", "expert", "attention", "latent", "inference", "memory", "throughput", "benchmark",
    "Hello", "World", "However", "Therefore", "don't", "it's", "we'll", "they're", "I'm", "you've", "can't",
    "information", "international", "understanding", "representation", "approximately", "nevertheless"};
static const char *const RU[] = {"привет", "мир", "модель", "память", "быстро", "эксперт", "внимание", "данные",
                                 "Москва", "работа", "поэтому", "однако", "который", "вычисление"};
static const char *const AR[] = {"مرحبا", "العالم", "نموذج", "ذاكرة", "سريع", "خبير", "بيانات", "الحساب", "كتاب"};
static const char *const HI[] = {"नमस्ते", "दुनिया", "मॉडल", "स्मृति", "तेज़", "विशेषज्ञ", "डेटा", "गणना"};
static const char *const KO[] = {"안녕하세요", "세계", "모델", "메모리", "빠른", "전문가", "데이터", "계산", "한국어"};
static const char *const EMOJI[] = {"😀", "🚀", "👍🏽", "🇫🇷", "👨‍👩‍👧", "✨", "🤖", "⚛️", "1️⃣", "🔥"};
static const char CJK[] = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质";
static const char KANA[] = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノ";

// Appends n random UTF-8 characters drawn from a string of 3-byte chars.
static void rand_chars(FILE *f, const char *set, int n)
{
    size_t k = strlen(set) / 3;
    for (int i = 0; i < n; i++)
        fwrite(set + 3 * (rnd() % k), 1, 3, f);
}

static void rand_ident(FILE *f)
{
    int n = 3 + (int)(rnd() % 10);
    for (int i = 0; i < n; i++) {
        uint32_t r = rnd() % 40;
        fputc(r < 26 ? 'a' + (int)r : r < 32 ? 'A' + (int)(r % 26) : r < 36 ? '_' : '0' + (int)(r % 10), f);
    }
}

static void sentence(FILE *f)
{
    switch (rnd() % 12) {
    case 0: case 1: case 2: case 3: { // English prose
        int n = 5 + (int)(rnd() % 15);
        for (int i = 0; i < n; i++) {
            fputs(i ? " " : "", f);
            if (rnd() % 25 == 0)
                rand_ident(f);
            else
                fputs(PICK(EN), f);
            if (rnd() % 12 == 0)
                fputs(",", f);
        }
        fputs(rnd() % 4 ? ". " : "? ", f);
        break;
    }
    case 4: rand_chars(f, CJK, 8 + (int)(rnd() % 30)); fputs("。", f); break;
    case 5: rand_chars(f, KANA, 5 + (int)(rnd() % 20)); rand_chars(f, CJK, 2 + (int)(rnd() % 4)); fputs("。", f); break;
    case 6: {
        const char *const *v = rnd() % 2 ? RU : AR;
        size_t nv = v == RU ? sizeof RU / sizeof *RU : sizeof AR / sizeof *AR;
        int n = 4 + (int)(rnd() % 10);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%s", i ? " " : "", pick(v, nv));
        fputs(". ", f);
        break;
    }
    case 7: {
        int n = 3 + (int)(rnd() % 8);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%s", i ? " " : "", rnd() % 2 ? PICK(HI) : PICK(KO));
        fputs(" ", f);
        break;
    }
    case 8: // code
        fputs("\n    def ", f);
        rand_ident(f);
        fputs("(self, x, y=None):\n        return {\"", f);
        rand_ident(f);
        fprintf(f, "\": x * %u + self.", rnd() % 1000);
        rand_ident(f);
        fputs("(y)}\n", f);
        break;
    case 9: // numbers
        fprintf(f, "%u.%02u%% of %u, %u-%u-%u, 0x%08x; ", rnd() % 100, rnd() % 100, rnd(), 1990 + rnd() % 40,
                1 + rnd() % 12, 1 + rnd() % 28, rnd());
        break;
    case 10: // emoji and punctuation
        for (int i = 0, n = 1 + (int)(rnd() % 4); i < n; i++)
            fputs(PICK(EMOJI), f);
        fputs(rnd() % 2 ? "!!! " : " — ", f);
        break;
    default: // JSON
        fprintf(f, "{\"id\": %u, \"name\": \"", rnd() % 100000);
        rand_ident(f);
        fprintf(f, "\", \"tags\": [\"%s\", \"%s\"], \"ok\": %s}\n", PICK(EN), PICK(RU), rnd() % 2 ? "true" : "false");
        break;
    }
}

static int gen(const char *path, long bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    while (ftell(f) < bytes) {
        int n = 2 + (int)(rnd() % 8);
        for (int i = 0; i < n; i++)
            sentence(f);
        fputs(rnd() % 3 ? "\n\n" : "\n", f);
    }
    fclose(f);
    return 0;
}

typedef struct chunk {
    const char *s;
    size_t n;
} chunk;

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "gen"))
        return gen(argv[2], atol(argv[3]));
    if (argc < 5 || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: bench_tokenize gen OUT BYTES | run TOKENIZER.json FILE (text|jsonl) [MIN_SECONDS]\n");
        return 2;
    }
    double min_s = argc > 5 ? atof(argv[5]) : 2.0;
    pt_err err = {{0}};
    pt_tokenizer *t = pt_tokenizer_load(argv[2], &err);
    if (!t) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    size_t len;
    char *data = pt_read_file(argv[3], &len, &err);
    if (!data) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    chunk *ch = NULL;
    size_t nch = 0, bytes = 0;
    json_object **keep = NULL;
    if (!strcmp(argv[4], "jsonl")) {
        char *save = NULL;
        for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            json_object *o = json_tokener_parse(line), *tx;
            if (!o || !json_object_object_get_ex(o, "text", &tx))
                continue;
            ch = realloc(ch, (nch + 1) * sizeof *ch);
            keep = realloc(keep, (nch + 1) * sizeof *keep);
            keep[nch] = o;
            ch[nch++] = (chunk){json_object_get_string(tx), (size_t)json_object_get_string_len(tx)};
        }
    } else {
        for (size_t i = 0; i < len;) {
            size_t e = i + 65536 < len ? i + 65536 : len;
            while (e < len && data[e - 1] != '\n')
                e++;
            ch = realloc(ch, (nch + 1) * sizeof *ch);
            ch[nch++] = (chunk){data + i, e - i};
            i = e;
        }
    }
    for (size_t i = 0; i < nch; i++)
        bytes += ch[i].n;
    // warm-up pass: also the ids count and hash
    uint64_t h = 0xcbf29ce484222325ull, nids = 0;
    for (size_t i = 0; i < nch; i++) {
        int32_t *ids;
        int64_t k = pt_tokenizer_encode(t, ch[i].s, ch[i].n, true, false, &ids, &err);
        for (int64_t j = 0; j < k; j++) {
            h = (h ^ (uint32_t)ids[j]) * 0x100000001b3ull;
        }
        nids += (uint64_t)k;
        free(ids);
    }
    int passes = 0;
    double t0 = pt_now(), el;
    clock_t c0 = clock();
    do {
        for (size_t i = 0; i < nch; i++) {
            int32_t *ids;
            pt_tokenizer_encode(t, ch[i].s, ch[i].n, true, false, &ids, &err);
            free(ids);
        }
        passes++;
        el = pt_now() - t0;
    } while (el < min_s);
    double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    printf("bytes=%zu passes=%d seconds=%.3f mbs=%.2f cpu_mbs=%.2f ids=%llu hash=%016llx\n", bytes, passes, el,
           (double)bytes * passes / el / 1e6, (double)bytes * passes / cpu / 1e6, (unsigned long long)nids,
           (unsigned long long)h);
    for (size_t i = 0; keep && i < nch; i++)
        json_object_put(keep[i]);
    free(keep);
    free(ch);
    free(data);
    pt_tokenizer_free(t);
    return 0;
}
