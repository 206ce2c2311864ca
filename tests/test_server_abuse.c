// tests/test_server_abuse.c — `petrel serve` under abuse, on loopback only,
// every loop bounded (issue 15): 1,000 malformed or oversized requests
// (seeded), slowloris-style partial headers and bodies, 64 concurrent
// clients, huge headers, invalid UTF-8 in JSON strings, token-id prompts
// out of range, and --api-key. After each the server must still answer
// /health and give the same greedy completion as before the abuse; every
// client gets a status line, a close, or (slowloris only) its own timeout;
// RSS may not keep growing (a second round of the 1,000 may add at most
// 16 MB). Raw sockets, so that requests no HTTP client would send can be.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "tests/test_server_util.h"

static char *g_model;
static st_server g_srv;
static char *g_ref; // the greedy reply before any abuse

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int conn_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    return fd;
}

// Sends all of buf; false when the server has closed the socket already
// (it may answer and close before a long request is sent).
static bool send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        len -= (size_t)w;
    }
    return true;
}

enum { R_TIMEOUT = -1, R_CLOSED = 0 }; // else the HTTP status

typedef struct reply {
    int status;       // HTTP status, R_CLOSED (closed without a status line) or R_TIMEOUT
    char *text;       // (len) everything read, NUL-terminated
    size_t len;
} reply;

// True when text holds a whole response with a Content-Length (keep-alive
// connections are not closed after it).
static bool complete(const char *text, size_t len)
{
    const char *e = strstr(text, "\r\n\r\n");
    if (!e)
        return false;
    for (const char *h = text; h && h < e; h = strstr(h, "\r\n") ? strstr(h, "\r\n") + 2 : NULL)
        if (!strncasecmp(h, "Content-Length:", 15))
            return len >= (size_t)(e + 4 - text) + strtoull(h + 15, NULL, 10);
    return false;
}

// Reads until the server closes (requests say Connection: close) or
// timeout_ms pass.
static reply read_reply(int fd, int timeout_ms)
{
    reply r = {.status = R_TIMEOUT};
    size_t cap = 4096;
    r.text = malloc(cap);
    long end = now_ms() + timeout_ms;
    for (;;) {
        long left = end - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        if (r.len + 4096 > cap) {
            cap *= 2;
            r.text = realloc(r.text, cap);
        }
        ssize_t n = recv(fd, r.text + r.len, cap - r.len - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { // closed (or reset)
            r.status = R_CLOSED;
            break;
        }
        r.len += (size_t)n;
        r.text[r.len] = 0;
        if (complete(r.text, r.len)) {
            r.status = R_CLOSED; // parsed below
            break;
        }
    }
    r.text[r.len] = 0;
    if (r.status == R_CLOSED && r.len >= 12 && !strncmp(r.text, "HTTP/1.", 7))
        r.status = atoi(r.text + 9);
    return r;
}

// One request of raw bytes on a fresh connection. half_close ends the
// upload (shutdown SHUT_WR) so that a request the server cannot finish
// parsing meets the end of input; it is not used on requests that generate,
// since the server takes a hang-up (POLLRDHUP) as the client leaving and
// cancels the generation.
static reply raw_hc(const void *req, size_t len, int timeout_ms, bool half_close)
{
    int fd = conn_open(g_srv.port);
    send_all(fd, req, len);
    if (half_close)
        shutdown(fd, SHUT_WR);
    reply r = read_reply(fd, timeout_ms);
    close(fd);
    return r;
}

static reply raw(const void *req, size_t len, int timeout_ms) { return raw_hc(req, len, timeout_ms, false); }

static reply rawstr(const char *req, int timeout_ms) { return raw(req, strlen(req), timeout_ms); }

// A POST with a JSON body (Content-Length set right); extra_headers end in \r\n.
static reply post(const char *path, const char *extra_headers, const char *body, size_t blen, int timeout_ms)
{
    char head[1024];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "%sContent-Length: %zu\r\n\r\n",
                     path, extra_headers, blen);
    char *req = malloc((size_t)n + blen);
    memcpy(req, head, (size_t)n);
    memcpy(req + n, body, blen);
    reply r = raw(req, (size_t)n + blen, timeout_ms);
    free(req);
    return r;
}

static const char *body_of(const reply *r)
{
    const char *b = strstr(r->text, "\r\n\r\n");
    return b ? b + 4 : "";
}

// Valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
static bool utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n)
            return false;
        uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k;
    }
    return true;
}

static const char *k_chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about petrels.\"}],"
                            "\"max_tokens\":6,\"temperature\":0,\"return_token_ids\":true}";

// The greedy reply to k_chat (the "choices" part: ids and text, not the id / timings).
static char *greedy_choice(void)
{
    reply r = post("/v1/chat/completions", "", k_chat, strlen(k_chat), 60000);
    if (r.status != 200) {
        char log[1100];
        snprintf(log, sizeof log, "%s/server.log", g_srv.dir);
        char *l = tu_read(log, NULL);
        cr_assert_fail("chat: %d %s\nserver %s, its log:\n%s", r.status, r.text,
                       kill(g_srv.pid, 0) == 0 ? "alive" : "gone", l ? l : "");
    }
    json_object *o = json_tokener_parse(body_of(&r));
    cr_assert(o, "not JSON: %s", r.text);
    char *c = strdup(json_object_to_json_string(st_path(o, "choices", 0, "message")));
    json_object_put(o);
    free(r.text);
    return c;
}

static long rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    fclose(f);
    cr_assert_gt(kb, 0, "no VmRSS in %s", path);
    return kb;
}

// The server is alive, answers /health and still gives the reference reply.
static void still_serving(const char *after)
{
    char *out = NULL;
    int st = st_http(&g_srv, "GET", "/health", NULL, NULL, &out);
    cr_assert_eq(st, 200, "after %s: /health -> %d", after, st);
    free(out);
    char *c = greedy_choice();
    cr_assert_str_eq(c, g_ref, "after %s the greedy reply changed", after);
    free(c);
}

static void setup(void)
{
    g_model = st_synth_tiny();
    g_srv = st_start(g_model, "-c 256 --max-body 65536 --max-queue 8");
    g_ref = greedy_choice();
}

static void teardown(void)
{
    if (g_srv.dir)
        st_stop(&g_srv);
    st_cleanup();
    free(g_ref);
    free(g_model);
}

TestSuite(abuse, .init = setup, .fini = teardown, .timeout = 120);

// ---- 1,000 malformed or oversized requests -------------------------------------

static uint64_t g_rng;
static uint32_t rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

// Kind k of the malformed request number i: writes it into buf (cap bytes),
// returns its length and what the answer must be.
typedef enum want { W_4XX, W_ANY_ANSWER, W_413 } want;

static size_t make_bad(int k, char *buf, size_t cap, want *w)
{
    static const char *bodies[] = {
        "", "{", "[]", "null", "42", "\"x\"", "{\"messages\":3}", "{\"messages\":[]}",
        "{\"messages\":[{\"role\":\"user\"}]}", "{\"messages\":[{\"role\":7,\"content\":\"a\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":-5}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"max_tokens\":\"many\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"temperature\":1e999}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"n\":0}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"top_logprobs\":1000,\"logprobs\":true}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stop\":[1,2]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}trailing",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"model\":\"nosuch\"}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
        "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}}}}}}}}}",
    };
    const int nb = (int)(sizeof bodies / sizeof bodies[0]);
    *w = W_4XX;
    switch (k) {
    case 0: { // random bytes instead of a request
        size_t n = 1 + rnd() % 300;
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)(rnd() & 0xFF);
        *w = W_ANY_ANSWER;
        return n;
    }
    case 1: { // a broken request line or version
        static const char *lines[] = {"GET\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "POST /v1/completions\r\n\r\n",
                                      "\r\n\r\n\r\n", "GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
                                      "G\x01T /health HTTP/1.1\r\n\r\n", "GET /%%%%zz HTTP/1.1\r\nHost: x\r\n\r\n"};
        const char *l = lines[rnd() % 7];
        *w = W_ANY_ANSWER;
        return (size_t)snprintf(buf, cap, "%s", l);
    }
    case 2: // a bad or truncated JSON body
    case 3: {
        const char *b = bodies[rnd() % (unsigned)nb];
        size_t bl = strlen(b);
        char body[512];
        memcpy(body, b, bl);
        if (k == 3 && bl) { // flip or cut a few bytes
            if (rnd() % 2)
                bl = rnd() % bl;
            else
                for (int f = 0; f < 3; f++)
                    body[rnd() % bl] = (char)(rnd() & 0xFF);
            *w = W_ANY_ANSWER; // a mutation may still be valid
        }
        const char *path = rnd() % 2 ? "/v1/chat/completions" : "/v1/completions";
        int n = snprintf(buf, cap, "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                         path, bl);
        memcpy(buf + n, body, bl);
        return (size_t)n + bl;
    }
    case 4: { // out-of-range, negative or non-integer token ids
        static const char *p[] = {"[99999999]", "[-1]", "[1.5]", "[1,\"a\"]", "[2147483648]", "[[1,2],[3]]",
                                  "[true]", "[]", "[9223372036854775807]"};
        char body[256];
        int bl = snprintf(body, sizeof body, "{\"prompt\":%s,\"max_tokens\":1}", p[rnd() % 9]);
        return (size_t)snprintf(buf, cap,
                                "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                "Content-Length: %d\r\n\r\n%s",
                                bl, body);
    }
    case 5: { // bodies past --max-body: by Content-Length, or chunked
        *w = W_413;
        if (rnd() % 2)
            return (size_t)snprintf(buf, cap,
                                    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                    "Content-Length: 99999999999\r\n\r\n{\"prompt\":");
        int n = snprintf(buf, cap,
                         "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n");
        for (int c = 0; c < 5; c++) { // 5 chunks of 16 KiB: 80 KiB > 64 KiB
            n += snprintf(buf + n, cap - (size_t)n, "4000\r\n");
            memset(buf + n, ' ', 16384);
            n += 16384;
            n += snprintf(buf + n, cap - (size_t)n, "\r\n");
        }
        n += snprintf(buf + n, cap - (size_t)n, "0\r\n\r\n");
        return (size_t)n;
    }
    case 6: { // bad framing: negative / garbage Content-Length, bad chunk sizes
        static const char *f[] = {"Content-Length: -5\r\n\r\n{}", "Content-Length: abc\r\n\r\n{}",
                                  "Content-Length: 2\r\nContent-Length: 9\r\n\r\n{}",
                                  "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                                  "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n{}\r\n"};
        *w = W_ANY_ANSWER;
        return (size_t)snprintf(buf, cap, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s",
                                f[rnd() % 5]);
    }
    default: { // unknown paths and methods
        static const char *m[] = {"DELETE /v1/completions", "GET /v1/chat/completions", "PUT /health",
                                  "GET /../../etc/passwd", "GET /v1/models/nosuch", "POST /v2/x"};
        return (size_t)snprintf(buf, cap, "%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", m[rnd() % 6]);
    }
    }
}

// 1,000 requests; each must be answered (a status line, or for requests
// that are not HTTP at all a close) within 10 s. Returns the answers seen.
static void thousand_bad(uint64_t seed, int counts[600])
{
    g_rng = seed;
    const size_t cap = 128 * 1024;
    char *buf = malloc(cap);
    for (int i = 0; i < 1000; i++) {
        int k = (int)(rnd() % 8);
        want w;
        size_t n = make_bad(k, buf, cap, &w);
        reply r = raw_hc(buf, n, 10000, k == 0 || k == 1 || k == 6);
        cr_assert_neq(r.status, R_TIMEOUT, "request %d (kind %d) got no answer in 10 s", i, k);
        if (w == W_4XX)
            cr_assert(r.status >= 400 && r.status < 500, "request %d (kind %d): %d\n%.*s\n->\n%s", i, k, r.status,
                      (int)(n < 400 ? n : 400), buf, r.text);
        if (w == W_413)
            cr_assert(r.status == 413 || r.status == R_CLOSED, "request %d (oversized): %d %s", i, r.status, r.text);
        if (r.status >= 200 && r.status < 300)
            cr_assert(utf8_ok((const unsigned char *)r.text, r.len), "request %d: a 2xx answer that is not UTF-8", i);
        counts[r.status > 0 && r.status < 600 ? r.status : 0]++;
        free(r.text);
    }
    free(buf);
}

Test(abuse, thousand_malformed_and_oversized_requests_memory_bounded)
{
    int counts[600] = {0};
    long t0 = now_ms();
    thousand_bad(1, counts);
    still_serving("1,000 malformed requests");
    long rss1 = rss_kb(g_srv.pid);
    thousand_bad(2, counts);
    still_serving("2,000 malformed requests");
    long rss2 = rss_kb(g_srv.pid);
    cr_log_info("2,000 malformed requests in %ld ms: 400:%d 401:%d 404:%d 405:%d 413:%d 431:%d 200:%d closed:%d; "
                "RSS %ld -> %ld KB",
                now_ms() - t0, counts[400], counts[401], counts[404], counts[405], counts[413], counts[431],
                counts[200], counts[0], rss1, rss2);
    fprintf(stderr, "abuse: 2000 malformed in %ld ms; 400:%d 404:%d 405:%d 413:%d closed:%d; RSS %ld -> %ld KB\n",
            now_ms() - t0, counts[400], counts[404], counts[405], counts[413], counts[0], rss1, rss2);
    cr_assert(counts[400] > 100 && counts[413] > 50 && counts[404] > 20, "the mix did not reach the checks");
#ifdef __SANITIZE_ADDRESS__
    // ASan keeps freed memory in quarantine (up to 256 MB): RSS says nothing
    // about leaks there (LeakSanitizer and the Release run do).
    fprintf(stderr, "abuse: ASan build: the RSS bound is checked by the Release run only\n");
#else
    cr_assert_lt(rss2 - rss1, 16 * 1024, "RSS grew by %ld KB over the second 1,000 requests", rss2 - rss1);
#endif
}

// ---- invalid UTF-8 in JSON strings --------------------------------------------

Test(abuse, invalid_utf8_in_json_strings)
{
    static const char *bad[] = {"\xff\xfe", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "abc\xe2\x82",
                                "\x80\x80\x80", "\xf0\x9f\x98"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int kind = 0; kind < 3; kind++) {
            char body[512];
            if (kind == 0)
                snprintf(body, sizeof body,
                         "{\"messages\":[{\"role\":\"user\",\"content\":\"hi %s there\"}],\"max_tokens\":2,"
                         "\"temperature\":0}",
                         bad[i]);
            else if (kind == 1)
                snprintf(body, sizeof body, "{\"prompt\":\"x%sy\",\"max_tokens\":2,\"stop\":[\"%s\"]}", bad[i], bad[i]);
            else
                snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"model\":\"%s\"}",
                         bad[i]);
            reply r = post(kind == 1 ? "/v1/completions" : "/v1/chat/completions", "", body, strlen(body), 30000);
            cr_assert((r.status >= 400 && r.status < 500) || r.status == 200, "%zu/%d: %d %s", i, kind, r.status,
                      r.text);
            // Whatever comes back is valid UTF-8 and valid JSON.
            cr_assert(utf8_ok((const unsigned char *)r.text, r.len), "%zu/%d: answer not UTF-8: %s", i, kind, r.text);
            json_object *o = json_tokener_parse(body_of(&r));
            cr_assert(o, "%zu/%d: answer not JSON: %s", i, kind, r.text);
            json_object_put(o);
            free(r.text);
        }
    still_serving("invalid UTF-8");
}

// ---- token ids out of range ---------------------------------------------------

Test(abuse, token_id_prompts_out_of_range)
{
    char body[256];
    const char *p[] = {"[0, 99999999]", "[-1]", "[4294967296]", "[1e10]", "[[5, -3]]"};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        snprintf(body, sizeof body, "{\"prompt\":%s,\"max_tokens\":1}", p[i]);
        reply r = post("/v1/completions", "", body, strlen(body), 10000);
        cr_assert_eq(r.status, 400, "%s: %d %s", p[i], r.status, r.text);
        cr_assert(strstr(body_of(&r), "prompt"), "the error names the field: %s", r.text);
        free(r.text);
    }
    // The vocabulary's last id is fine, one past it is not.
    json_object *m = st_post_json(&g_srv, "/v1/completions", "{\"prompt\":[1],\"max_tokens\":1}", 200);
    json_object_put(m);
    still_serving("out-of-range token ids");
}

// ---- huge headers -------------------------------------------------------------

Test(abuse, huge_headers)
{
    const size_t big = 1 << 20;
    char *req = malloc(big + 4096);
    // one 1 MiB header value
    int n = snprintf(req, 4096, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ");
    memset(req + n, 'a', big);
    n += (int)big;
    n += snprintf(req + n, 4096, "\r\n\r\n");
    reply r = raw(req, (size_t)n, 10000);
    cr_assert(r.status >= 400 || r.status == R_CLOSED, "1 MiB header: %d", r.status);
    free(r.text);
    // 20,000 small headers
    n = snprintf(req, 4096, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (int i = 0; i < 20000 && (size_t)n + 64 < big; i++)
        n += snprintf(req + n, 64, "X-H%d: v\r\n", i);
    n += snprintf(req + n, 8, "\r\n");
    r = raw(req, (size_t)n, 10000);
    cr_assert(r.status >= 400 || r.status == R_CLOSED, "20,000 headers: %d", r.status);
    free(r.text);
    // a 1 MiB URL
    n = snprintf(req, 4096, "GET /");
    memset(req + n, 'u', big);
    n += (int)big;
    n += snprintf(req + n, 4096, " HTTP/1.1\r\nHost: x\r\n\r\n");
    r = raw(req, (size_t)n, 10000);
    cr_assert(r.status >= 400 || r.status == R_CLOSED, "1 MiB URL: %d", r.status);
    free(r.text);
    free(req);
    still_serving("huge headers");
}

// ---- slowloris ----------------------------------------------------------------

Test(abuse, slowloris_partial_headers_and_bodies)
{
    enum { N_HEAD = 32, N_BODY = 32 };
    int fds[N_HEAD + N_BODY];
    for (int i = 0; i < N_HEAD + N_BODY; i++) {
        fds[i] = conn_open(g_srv.port);
        const char *s = i < N_HEAD ? "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le"
                                   : "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\n{\"pro";
        cr_assert(send_all(fds[i], s, strlen(s)));
    }
    // 2 s of trickling one byte per connection every 200 ms; meanwhile
    // ordinary clients are served without waiting for the slow ones.
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < N_HEAD + N_BODY; i++)
            send_all(fds[i], i < N_HEAD ? "n" : " ", 1);
        if (round % 3 == 0) {
            long t = now_ms();
            char *c = greedy_choice();
            cr_assert_str_eq(c, g_ref);
            free(c);
            cr_assert_lt(now_ms() - t, 20000, "a normal request waited for the slow clients");
        }
        usleep(200000);
    }
    // None of the slow requests was answered early (their requests are not
    // complete), nor was any connection dropped for being slow.
    int early = 0;
    for (int i = 0; i < N_HEAD + N_BODY; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        if (poll(&p, 1, 0) > 0)
            early++;
    }
    cr_assert_eq(early, 0, "%d slow connections got an answer to an incomplete request", early);
    // Finishing a slow body properly gets an answer (a 400 here: "{\"pro" + spaces is not JSON).
    char *pad = malloc(4000);
    memset(pad, ' ', 4000);
    int fin = fds[N_HEAD];
    send_all(fin, pad, 4000 - 5 - 10);
    reply r = read_reply(fin, 10000);
    cr_assert_eq(r.status, 400, "the completed slow body: %d %s", r.status, r.text);
    free(r.text);
    free(pad);
    for (int i = 0; i < N_HEAD + N_BODY; i++)
        close(fds[i]);
    still_serving("slowloris");
}

// ---- 64 concurrent clients ----------------------------------------------------

typedef struct client_res {
    int idx;
    int status;
} client_res;

static void *client_main(void *arg)
{
    client_res *c = arg;
    char body[256];
    reply r;
    switch (c->idx % 4) {
    case 0:
        snprintf(body, sizeof body, "{\"prompt\":\"client %d\",\"max_tokens\":3,\"temperature\":0}", c->idx);
        r = post("/v1/completions", "", body, strlen(body), 60000);
        break;
    case 1:
        snprintf(body, sizeof body,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"client %d\"}],\"max_tokens\":3,\"stream\":true}",
                 c->idx);
        r = post("/v1/chat/completions", "", body, strlen(body), 60000);
        break;
    case 2:
        r = rawstr("GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 60000);
        break;
    default:
        r = post("/v1/completions", "", "{\"prompt\":[1,2", 14, 60000);
        break;
    }
    c->status = r.status;
    free(r.text);
    return NULL;
}

Test(abuse, sixty_four_concurrent_clients)
{
    enum { N = 64 };
    pthread_t th[N];
    client_res res[N];
    for (int i = 0; i < N; i++) {
        res[i] = (client_res){.idx = i};
        cr_assert_eq(pthread_create(&th[i], NULL, client_main, &res[i]), 0);
    }
    int ok = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        int s = res[i].status, want = i % 4 == 3 ? 400 : 200;
        // a generation may be turned away by the bounded queue (429), nothing else
        cr_assert(s == want || (i % 4 < 2 && s == 429), "client %d: %d", i, s);
        ok += s == want;
        busy += s == 429;
    }
    fprintf(stderr, "abuse: 64 concurrent clients: %d answered, %d turned away (429)\n", ok, busy);
    cr_assert_geq(ok, 32, "the non-generating half are always answered");
    still_serving("64 concurrent clients");
}

// ---- --api-key ----------------------------------------------------------------

Test(abuse, api_key_nothing_served_without_it)
{
    st_server s = st_start(g_model, "-c 256 --api-key s3cret-KEY");
    st_server keep = g_srv;
    g_srv = s; // raw() talks to g_srv
    static const char *auth[] = {"", "Authorization: s3cret-KEY\r\n", "Authorization: Bearer\r\n",
                                 "Authorization: Bearer \r\n", "Authorization: Bearer s3cret-KE\r\n",
                                 "Authorization: Bearer s3cret-KEYY\r\n", "Authorization: bearer s3cret-KEY\r\n",
                                 "Authorization: Basic czNjcmV0LUtFWQ==\r\n", "X-Api-Key: s3cret-KEY\r\n"};
    static const char *paths[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/metrics",
                                  "/v1/models/synth-tiny", "/nosuch"};
    char req[2048];
    for (size_t a = 0; a < sizeof auth / sizeof auth[0]; a++)
        for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
            const bool is_post = p < 2;
            const char *body = p == 0 ? k_chat : "{\"prompt\":[1,2],\"max_tokens\":1}";
            int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s", is_post ? "POST" : "GET",
                             paths[p], auth[a]);
            if (is_post)
                n += snprintf(req + n, sizeof req - (size_t)n, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
            else
                n += snprintf(req + n, sizeof req - (size_t)n, "\r\n");
            reply r = raw(req, (size_t)n, 10000);
            cr_assert_eq(r.status, 401, "%s with '%s': %d %s", paths[p], auth[a], r.status, r.text);
            cr_assert(!strstr(r.text, "choices") && !strstr(r.text, "synth"), "a 401 leaked content: %s", r.text);
            free(r.text);
        }
    // malformed and oversized requests without the key are refused too
    reply r = post("/v1/completions", "", "{bad", 4, 10000);
    cr_assert_eq(r.status, 401, "%d", r.status);
    free(r.text);
    // with the key: served; /health needs none
    r = post("/v1/chat/completions", "Authorization: Bearer s3cret-KEY\r\n", k_chat, strlen(k_chat), 60000);
    cr_assert_eq(r.status, 200, "%d %s", r.status, r.text);
    free(r.text);
    r = rawstr("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 10000);
    cr_assert_eq(r.status, 200);
    free(r.text);
    // Only the one keyed generation ran: the rest never reached the engine.
    r = rawstr("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer s3cret-KEY\r\n\r\n",
               10000);
    cr_assert_eq(r.status, 200);
    double ok = st_metric(body_of(&r), "petrel_requests_total{outcome=\"ok\"}");
    cr_assert_eq(ok, 1.0, "requests served: %g\n%s", ok, body_of(&r));
    free(r.text);
    g_srv = keep;
    st_stop(&s);
}
