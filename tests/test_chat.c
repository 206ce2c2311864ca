// tests/test_chat.c — `petrel chat` driven through piped stdin on the
// synthetic tiny model: replies stream, /stats reports, /save + /reset +
// /load restore the conversation and its KV state (the next turn reuses
// it), --session resumes after a restart with the same reply as a session
// that never stopped, and Ctrl-C (SIGINT) stops a reply without leaving.
#include "tests/test_server_util.h"

// Runs a chat script; returns stdout (malloc'ed) and asserts exit 0.
static char *chat(const char *model, const char *args, const char *script)
{
    char *out = NULL;
    int rc = tu_sh(&out, "printf '%s' | timeout 120 '%s' chat -m '%s' -t 2 %s 2>/dev/null", script, PETREL_BIN, model,
                   args);
    cr_assert_eq(rc, 0, "petrel chat exited with %d:\n%s", rc, out);
    return out;
}

// The reply printed after the k-th (0-based) line that starts with
// `marker`: the text from the end of that line up to the next "stats: last
// reply" line (the scripts put /stats after each turn), malloc'ed.
static char *reply_after(const char *text, const char *marker, int k)
{
    const char *p = text;
    for (int i = 0; i <= k; i++) {
        while (p && strncmp(p, marker, strlen(marker))) {
            p = strchr(p, '\n');
            p = p ? p + 1 : NULL;
        }
        cr_assert(p, "no line %d starting with '%s' in:\n%s", k, marker, text);
        if (i < k)
            p++;
    }
    p = strchr(p, '\n') + 1;
    const char *e = strstr(p, "stats: last reply");
    cr_assert(e, "no /stats after the reply in:\n%s", text);
    return strndup(p, (size_t)(e - p));
}

// "prompt A tokens cached + B prefilled" of the n-th stats line.
static void cached_prefilled(const char *text, int n, int *cached, int *pre)
{
    const char *p = text;
    for (int i = 0; i <= n; i++) {
        p = strstr(p, "tokens cached + ");
        cr_assert(p, "no stats line %d in:\n%s", n, text);
        p++;
    }
    const char *q = p - 1;
    while (q > text && q[-1] != ' ')
        q--;
    q--;
    while (q > text && q[-1] != ' ')
        q--;
    *cached = atoi(q);
    *pre = atoi(strstr(p, "+ ") + 2);
}

Test(chat, scripted_session_save_load)
{
    char *model = st_synth_tiny();
    char *dir = tu_tmpdir("chat"), args[1200];
    snprintf(args, sizeof args, "-n 8 --session-dir '%s'", dir);
    char *out = chat(model, args,
                     "Hello there\\n/stats\\n/save one\\n/reset\\n/stats\\n/load one\\nAnd then?\\n/stats\\n");
    cr_assert(strstr(out, "stats: last reply 8 tokens"), "%s", out);
    cr_assert(strstr(out, "saved session 'one' (2 messages"), "%s", out);
    cr_assert(strstr(out, "conversation cleared"), "%s", out);
    cr_assert(strstr(out, "loaded session 'one' (2 messages"), "%s", out);
    cr_assert(strstr(out, "MB read per token") && strstr(out, "expert hit rate") && strstr(out, "resident"), "%s", out);
    int c0, p0, c2, p2;
    cached_prefilled(out, 0, &c0, &p0);
    cached_prefilled(out, 2, &c2, &p2);
    cr_assert_eq(c0, 0, "first turn cannot reuse anything:\n%s", out);
    cr_assert(p0 > 0);
    cr_assert(c2 >= p0, "the loaded state was not reused (%d cached):\n%s", c2, out);

    // The same conversation without the save / reset / load detour gives
    // the same replies.
    char *ref = chat(model, "-n 8", "Hello there\\n/stats\\nAnd then?\\n/stats\\n");
    char *a2 = reply_after(out, "loaded session", 0), *r2 = reply_after(ref, "stats: session", 0);
    size_t l1 = (size_t)(strstr(out, "stats: last reply") - out), l2 = (size_t)(strstr(ref, "stats: last reply") - ref);
    cr_assert(l1 == l2 && !strncmp(out, ref, l1), "first replies differ");
    cr_assert_str_eq(a2, r2, "reply after /load differs:\n%s\n---\n%s", out, ref);
    free(a2), free(r2), free(ref), free(out);
    tu_rmrf(dir);
    free(dir);
    free(model);
}

Test(chat, session_resumes_after_restart)
{
    char *model = st_synth_tiny();
    char *dir = tu_tmpdir("chat_sess"), args[1200];
    snprintf(args, sizeof args, "-n 8 --session-dir '%s' --session conv", dir);
    char *o1 = chat(model, args, "Hello there\\n");
    cr_assert(strstr(o1, "saved session 'conv'"), "%s", o1);
    char *o2 = chat(model, args, "And then?\\n/stats\\n");
    cr_assert(strstr(o2, "loaded session 'conv' (2 messages"), "%s", o2);
    int c, p;
    cached_prefilled(o2, 0, &c, &p);
    char *ref = chat(model, "-n 8", "Hello there\\n/stats\\nAnd then?\\n/stats\\n");
    int rc_, rp;
    cached_prefilled(ref, 1, &rc_, &rp);
    cr_assert(c > 0 && c == rc_ && p == rp, "resumed: %d cached + %d prefilled; uninterrupted: %d + %d", c, p, rc_, rp);
    char *a = reply_after(o2, "loaded session", 0), *r = reply_after(ref, "stats: session", 0);
    cr_assert_str_eq(a, r, "resumed reply differs from the uninterrupted one");
    free(a), free(r), free(o1), free(o2), free(ref);
    tu_rmrf(dir);
    free(dir);
    free(model);
}

Test(chat, ctrl_c_stops_reply_not_chat)
{
    char *model = st_synth_tiny();
    char *dir = tu_tmpdir("chat_int");
    char *out = NULL;
    int rc = tu_sh(&out,
                   "cd '%s' && mkfifo in && { '%s' chat -m '%s' -t 2 -n 3000 -c 4096 --ignore-eos <in >out 2>/dev/null & P=$!; "
                   "(sleep 60; kill -9 $P) >/dev/null 2>&1 & W=$!; "
                   "exec 3>in; echo 'Tell me a long story' >&3; sleep 1.5; kill -INT $P; sleep 0.3; "
                   "echo '/stats' >&3; exec 3>&-; wait $P; echo $?; kill $W; cat out; }",
                   dir, PETREL_BIN, model);
    cr_assert_eq(rc, 0);
    cr_assert(!strncmp(out, "0\n", 2), "petrel chat did not exit cleanly after Ctrl-C:\n%s", out);
    cr_assert(strstr(out, "[stopped]"), "the reply was not stopped:\n%s", out);
    cr_assert(strstr(out, "stats: last reply"), "the chat did not continue after Ctrl-C:\n%s", out);
    free(out);
    tu_rmrf(dir);
    free(dir);
    free(model);
}
