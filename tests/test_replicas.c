// tests/test_replicas.c — two `petrel serve` replicas sharing one --kv-dir
// behind HAProxy with deploy/haproxy.cfg, all on free loopback ports, and a
// third server (own state only) as the reference; tests/server/replicas.mjs
// then drives concurrent conversations with the official openai npm client,
// kills the replica holding one of them and checks that every conversation
// continues on the survivor with the reference's greedy reply, reusing its
// first turn (cached_tokens). Skips when node or haproxy is missing and
// haproxy cannot be installed (scripts/deps.sh installs both).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/test_server_util.h"

TestSuite(replicas, .fini = st_cleanup);

// A loopback port nobody listens on now (the kernel's pick for port 0).
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &l) == 0);
    int port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static bool have_haproxy(void)
{
    if (tu_sh(NULL, "command -v haproxy >/dev/null 2>&1") == 0)
        return true;
    // As tests/test_server_openai.c installs the npm client: try once, bounded.
    tu_sh(NULL, "[ \"$(id -u)\" = 0 ] && command -v apt-get >/dev/null && DEBIAN_FRONTEND=noninteractive "
                "timeout 120 apt-get install -y -qq haproxy >/dev/null 2>&1");
    return tu_sh(NULL, "command -v haproxy >/dev/null 2>&1") == 0;
}

// HAProxy in the foreground with deploy/haproxy.cfg, its addresses in the
// environment; waits (bounded) until /health answers through it.
static st_server start_lb(int r1, int r2)
{
    st_server lb = {0};
    lb.dir = tu_tmpdir("lb");
    lb.port = free_port();
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "PETREL_LB_PORT=%d PETREL_R1=127.0.0.1:%d PETREL_R2=127.0.0.1:%d exec haproxy -db -f '%s/deploy/haproxy.cfg' "
             ">'%s/haproxy.log' 2>&1 </dev/null",
             lb.port, r1, r2, PETREL_SOURCE_DIR, lb.dir);
    lb.pid = fork();
    cr_assert(lb.pid >= 0);
    if (lb.pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    st_track(lb.pid, true);
    for (int i = 0; i < 100; i++) { // 10 s at most
        if (st_http(&lb, "GET", "/health", NULL, NULL, NULL) == 200)
            return lb;
        usleep(100000);
    }
    char log[1100];
    snprintf(log, sizeof log, "%s/haproxy.log", lb.dir);
    char *l = tu_read(log, NULL);
    cr_assert_fail("haproxy did not come up:\n%s", l ? l : "");
    return lb;
}

// Reaps a server the test killed on purpose.
static void reap(st_server *s)
{
    kill(s->pid, SIGKILL); // no-op when already dead
    waitpid(s->pid, NULL, 0);
    st_track(s->pid, false);
    tu_rmrf(s->dir);
    free(s->dir);
}

Test(replicas, failover_resumes_from_shared_kv_dir, .timeout = 300)
{
    if (tu_sh(NULL, "node --version >/dev/null 2>&1") != 0)
        cr_skip_test("node is not installed (scripts/deps.sh installs it)");
    if (!have_haproxy())
        cr_skip_test("haproxy is not installed and could not be installed (scripts/deps.sh installs it)");
    char *out = NULL;
    char mod[1200];
    snprintf(mod, sizeof mod, "%s/tests/server/node_modules/openai/package.json", PETREL_SOURCE_DIR);
    if (access(mod, R_OK) != 0) {
        int rc = tu_sh(&out, "cd '%s/tests/server' && timeout 300 npm ci --no-audit --no-fund 2>&1", PETREL_SOURCE_DIR);
        cr_assert_eq(rc, 0, "npm ci in tests/server failed:\n%s", out);
        free(out);
    }
    char *model = st_synth_tiny();
    char *kv = tu_tmpdir("kvshared");
    char extra[1400];
    snprintf(extra, sizeof extra, "--api-key k --kv-dir '%s'", kv);
    st_server r1 = st_start(model, extra), r2 = st_start(model, extra);
    st_server ref = st_start(model, "--api-key k");
    st_server lb = start_lb(r1.port, r2.port);
    int rc = tu_sh(&out,
                   "cd '%s/tests/server' && timeout 120 node replicas.mjs --lb http://127.0.0.1:%d/v1 "
                   "--ref http://127.0.0.1:%d/v1 --api-key k --model synth-tiny --r1-pid %d --r2-pid %d 2>&1",
                   PETREL_SOURCE_DIR, lb.port, ref.port, (int)r1.pid, (int)r2.pid);
    cr_assert_eq(rc, 0, "tests/server/replicas.mjs failed:\n%s", out);
    cr_assert(strstr(out, "PASSED"), "%s", out);
    cr_log_info("%s", out);
    // Exactly one replica was killed; the other still serves and stops cleanly.
    int st;
    bool r1_dead = waitpid(r1.pid, &st, WNOHANG) == r1.pid;
    bool r2_dead = waitpid(r2.pid, &st, WNOHANG) == r2.pid;
    cr_assert(r1_dead != r2_dead, "expected exactly one replica killed:\n%s", out);
    free(out);
    st_server *dead = r1_dead ? &r1 : &r2, *alive = r1_dead ? &r2 : &r1;
    st_track(dead->pid, false);
    dead->pid = -1;
    tu_rmrf(dead->dir);
    free(dead->dir);
    cr_assert_eq(st_http(alive, "GET", "/health", NULL, NULL, NULL), 200, "the surviving replica is unhealthy");
    reap(&lb);
    st_stop(alive);
    st_stop(&ref);
    tu_rmrf(kv);
    free(kv);
    free(model);
}

// cached_tokens and the generated ids of a /v1/completions response.
static int cached_of(const char *resp, char *ids, size_t idlen)
{
    json_object *o = json_tokener_parse(resp), *u, *d, *c, *ch, *t;
    cr_assert(o, "not JSON: %s", resp);
    cr_assert(json_object_object_get_ex(o, "usage", &u) && json_object_object_get_ex(u, "prompt_tokens_details", &d) &&
                  json_object_object_get_ex(d, "cached_tokens", &c),
              "%s", resp);
    int n = json_object_get_int(c);
    cr_assert(json_object_object_get_ex(o, "choices", &ch) &&
                  json_object_object_get_ex(json_object_array_get_idx(ch, 0), "token_ids", &t),
              "%s", resp);
    snprintf(ids, idlen, "%s", json_object_to_json_string(t));
    json_object_put(o);
    return n;
}

// The number of *.pkv files in dir, and (name != NULL) the first one's name.
static int pkv_files(const char *dir, char *name, size_t namelen)
{
    char *out = NULL;
    tu_sh(&out, "cd '%s' && ls *.pkv 2>/dev/null | sort", dir);
    int n = 0;
    for (char *p = out; p && *p; p++)
        n += *p == '\n';
    if (name) {
        size_t l = strcspn(out ? out : "", "\n");
        snprintf(name, namelen, "%.*s", (int)l, out ? out : "");
    }
    free(out);
    return n;
}

// Two quantisations of one model (same shapes, same tokens, different
// identity) share a --kv-dir: each replica keeps its own states, never
// loads, overwrites or deletes the other's, and resumes from its own.
Test(replicas, other_models_states_left_alone, .timeout = 180)
{
    char *qa = tu_tiny_model("q8_0"), *qb = tu_tiny_model("f32");
    char *kv = tu_tmpdir("kvmixed"), extra[1400], *resp = NULL;
    snprintf(extra, sizeof extra, "--kv-dir '%s' --usage none", kv);
    const char *req = "{\"prompt\":[5,17,200,33,8,91,7],\"max_tokens\":4,\"temperature\":0,\"return_token_ids\":true}";
    char ids_a[512], ids[512];

    st_server a = st_start(qa, extra);
    cr_assert_eq(st_http(&a, "POST", "/v1/completions", req, NULL, &resp), 200, "%s", resp);
    cached_of(resp, ids_a, sizeof ids_a);
    free(resp);
    st_stop(&a);
    char file_a[256];
    cr_assert_eq(pkv_files(kv, file_a, sizeof file_a), 1, "expected one state file in %s", kv);
    char path_a[1400];
    snprintf(path_a, sizeof path_a, "%s/%s", kv, file_a);
    size_t len_a, len2;
    void *bytes_a = tu_read(path_a, &len_a);
    cr_assert(bytes_a);

    st_server b = st_start(qb, extra);
    cr_assert_eq(st_http(&b, "POST", "/v1/completions", req, NULL, &resp), 200, "%s", resp);
    cr_assert_eq(cached_of(resp, ids, sizeof ids), 0, "the other quantisation's state was used: %s", resp);
    free(resp);
    cr_assert_eq(st_http(&b, "POST", "/v1/completions", req, NULL, &resp), 200, "%s", resp);
    cr_assert_gt(cached_of(resp, ids, sizeof ids), 0, "own state not reused: %s", resp);
    free(resp);
    st_stop(&b);
    void *now = tu_read(path_a, &len2);
    cr_assert(now && len2 == len_a && !memcmp(now, bytes_a, len_a), "%s was deleted or overwritten by the other model",
              path_a);
    free(now);
    cr_assert_eq(pkv_files(kv, NULL, 0), 2, "expected both models' states in %s", kv);

    // A restarted replica of the first model resumes from its own state only.
    a = st_start(qa, extra);
    cr_assert_eq(st_http(&a, "POST", "/v1/completions", req, NULL, &resp), 200, "%s", resp);
    cr_assert_gt(cached_of(resp, ids, sizeof ids), 0, "own state not found after a restart: %s", resp);
    cr_assert_str_eq(ids, ids_a, "resumed output differs");
    free(resp);
    st_stop(&a);
    free(bytes_a);
    tu_rmrf(kv);
    free(kv);
    free(qa);
    free(qb);
}
