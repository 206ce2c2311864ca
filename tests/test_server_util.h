// tests/test_server_util.h — helpers for the server and chat tests (static,
// included by each test file): the synthetic tiny model with a tokenizer
// and chat template, starting / stopping a `petrel serve` on a free
// loopback port, and HTTP requests through curl.
#ifndef PETREL_TESTS_SERVER_UTIL_H
#define PETREL_TESTS_SERVER_UTIL_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/testutil.h"

// Servers started and not yet stopped, killed by st_cleanup when a test
// fails half-way (use it as the suite's .fini).
static pid_t st_live[8];

__attribute__((unused)) static void st_cleanup(void)
{
    for (int i = 0; i < 8; i++)
        if (st_live[i] > 0) {
            kill(st_live[i], SIGKILL);
            waitpid(st_live[i], NULL, 0);
            st_live[i] = 0;
        }
}

static void st_track(pid_t pid, bool on)
{
    for (int i = 0; i < 8; i++)
        if (on ? st_live[i] == 0 : st_live[i] == pid) {
            st_live[i] = on ? pid : 0;
            return;
        }
}

// `petrel synth --preset tiny` converted to GGUF (it has a tokenizer and a
// chat template), cached under the build directory.
__attribute__((unused)) static char *st_synth_tiny(void) { return tu_synth_model("tiny"); }

typedef struct st_server {
    pid_t pid;
    int port;
    char *dir; // scratch directory (port file, log, bodies)
} st_server;

// Starts `petrel serve -m model --port 0 <extra>` and waits (bounded) for it
// to listen. The server's stderr goes to dir/server.log.
__attribute__((unused)) static st_server st_start(const char *model, const char *extra)
{
    st_server s = {0};
    s.dir = tu_tmpdir("srv");
    char portf[1100], log[1100], cmd[4096];
    snprintf(portf, sizeof portf, "%s/port", s.dir);
    snprintf(log, sizeof log, "%s/server.log", s.dir);
    snprintf(cmd, sizeof cmd, "exec '%s' serve -m '%s' -t 2 --port 0 --port-file '%s' %s 2>'%s' </dev/null >/dev/null", PETREL_BIN, model,
             portf, extra ? extra : "", log);
    s.pid = fork();
    cr_assert(s.pid >= 0);
    if (s.pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    st_track(s.pid, true);
    for (int i = 0; i < 600; i++) { // 60 s at most
        char *p = tu_read(portf, NULL);
        if (p) {
            s.port = atoi(p);
            free(p);
            if (s.port > 0)
                return s;
        }
        int st;
        if (waitpid(s.pid, &st, WNOHANG) == s.pid) {
            char *l = tu_read(log, NULL);
            cr_assert_fail("petrel serve exited at startup:\n%s", l ? l : "");
        }
        usleep(100000);
    }
    kill(s.pid, SIGKILL);
    cr_assert_fail("petrel serve did not start listening");
    return s;
}

// SIGTERM, then waits (bounded) for a clean exit (status 0).
__attribute__((unused)) static void st_stop(st_server *s)
{
    kill(s->pid, SIGTERM);
    int st = 0;
    bool done = false;
    for (int i = 0; i < 300 && !done; i++) { // 30 s at most
        if (waitpid(s->pid, &st, WNOHANG) == s->pid)
            done = true;
        else
            usleep(100000);
    }
    if (!done) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &st, 0);
    }
    st_track(s->pid, false);
    char log[1100];
    snprintf(log, sizeof log, "%s/server.log", s->dir);
    char *l = tu_read(log, NULL);
    cr_assert(done, "petrel serve did not stop on SIGTERM:\n%s", l ? l : "");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "petrel serve ended badly (status %d):\n%s", st, l ? l : "");
    free(l);
    tu_rmrf(s->dir);
    free(s->dir);
    s->dir = NULL;
}

// One HTTP request with curl. body (may be NULL) is sent from a file;
// extra is more curl arguments. Returns the status (0 if none); *out
// gets the response body (malloc'ed) when out != NULL.
__attribute__((unused)) static int st_http(const st_server *s, const char *method, const char *path, const char *body, const char *extra,
                   char **out)
{
    char bodyf[1100], respf[1100];
    snprintf(bodyf, sizeof bodyf, "%s/body", s->dir);
    snprintf(respf, sizeof respf, "%s/resp", s->dir);
    if (body) {
        FILE *f = fopen(bodyf, "wb");
        fwrite(body, 1, strlen(body), f);
        fclose(f);
    }
    char *code = NULL;
    tu_sh(&code, "curl -s --max-time 60 -X %s -o '%s' -w '%%{http_code}' %s%s%s %s 'http://127.0.0.1:%d%s'", method,
          respf, body ? "-H 'Content-Type: application/json' --data-binary @'" : "", body ? bodyf : "",
          body ? "'" : "", extra ? extra : "", s->port, path);
    int st = atoi(code);
    free(code);
    if (out) {
        *out = tu_read(respf, NULL);
        if (!*out)
            *out = strdup("");
    }
    unlink(respf);
    return st;
}

// POSTs JSON and parses the JSON answer; asserts the status.
__attribute__((unused)) static json_object *st_post_json(const st_server *s, const char *path, const char *body, int want)
{
    char *out;
    int st = st_http(s, "POST", path, body, NULL, &out);
    cr_assert_eq(st, want, "POST %s %s -> %d, expected %d: %s", path, body, st, want, out);
    json_object *o = json_tokener_parse(out);
    cr_assert(o, "not JSON: %s", out);
    free(out);
    return o;
}

// Value of a Prometheus sample line "name value" in text, or -1.
__attribute__((unused)) static double st_metric(const char *text, const char *name)
{
    size_t l = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, name, l) && p[l] == ' ')
            return atof(p + l + 1);
    return -1;
}

__attribute__((unused)) static json_object *st_path(json_object *o, const char *a, int idx, const char *b)
{
    json_object *x = NULL;
    cr_assert(json_object_object_get_ex(o, a, &x), "no '%s' in %s", a, json_object_to_json_string(o));
    if (idx >= 0)
        x = json_object_array_get_idx(x, (size_t)idx);
    if (b)
        cr_assert(json_object_object_get_ex(x, b, &x), "no '%s' in %s", b, json_object_to_json_string(o));
    return x;
}

#endif
