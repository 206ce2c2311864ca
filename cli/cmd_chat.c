// cli/cmd_chat.c — `petrel chat`: an interactive terminal chat. Streams the
// reply token by token, keeps the conversation (the live context is reused,
// so each turn computes only its new tokens), /reset, /save NAME, /load NAME
// (conversation text + KV state), /stats, Ctrl-C stops the current reply.
// Works with piped stdin (no prompt is printed then). --session NAME loads
// the session at start (if it exists) and saves it on exit.
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cliutil.h"
#include "cli/commands.h"
#include "common/util.h"
#include "server/engine.h"

static atomic_bool g_stop;       // Ctrl-C during a reply
static atomic_bool g_generating;

static void on_sigint(int sig)
{
    (void)sig;
    if (atomic_load(&g_generating))
        atomic_store(&g_stop, true);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: petrel chat -m MODEL [options]\n"
            "      --session NAME      resume session NAME if saved, save it on exit\n"
            "      --session-dir DIR   where sessions live (default ~/.local/share/petrel/sessions)\n"
            "      --system TEXT       system prompt\n"
            "  -n, --max-tokens N      longest reply (default 1024)\n"
            "      --temp T --top-p P --seed S   sampling (default greedy)\n"
            "      --ignore-eos        do not end a reply at end-of-sequence tokens\n"
            "commands in the chat: /reset /save NAME /load NAME /stats /quit (Ctrl-C stops a reply)\n%s",
            cli_model_opts_help);
}

typedef struct chat {
    srv_engine *e;
    json_object *msgs;        // the conversation (OpenAI-style messages)
    const char *system;
    const char *dir;          // session directory
    int max_tokens;
    bool ignore_eos;          // replies end only at max_tokens or Ctrl-C
    petrel_sampler_params sp;
    srv_gen_result last;      // figures of the last reply
    bool have_last;
} chat;

static void reset(chat *ch)
{
    if (ch->msgs)
        json_object_put(ch->msgs);
    ch->msgs = json_object_new_array();
    if (ch->system) {
        json_object *m = json_object_new_object();
        json_object_object_add(m, "role", json_object_new_string("system"));
        json_object_object_add(m, "content", json_object_new_string(ch->system));
        json_object_array_add(ch->msgs, m);
    }
}

static void add_msg(chat *ch, const char *role, const char *text, size_t len)
{
    json_object *m = json_object_new_object();
    json_object_object_add(m, "role", json_object_new_string(role));
    json_object_object_add(m, "content", json_object_new_string_len(text, (int)len));
    json_object_array_add(ch->msgs, m);
}

static bool on_piece(void *user, const char *text, size_t len, petrel_token tok, json_object *lp)
{
    (void)user;
    (void)tok;
    (void)lp;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

static void turn(chat *ch, const char *line)
{
    add_msg(ch, "user", line, strlen(line));
    char err[1024];
    petrel_token *ids = NULL;
    int n = srv_render_chat(ch->e, ch->msgs, NULL, &ids, err, sizeof err);
    if (n <= 0) {
        printf("error: %s\n", n < 0 ? err : "the conversation renders to no tokens");
        json_object_array_del_idx(ch->msgs, json_object_array_length(ch->msgs) - 1, 1);
        free(ids);
        return;
    }
    srv_gen_params p = {.prompt = ids, .n_prompt = n, .max_tokens = ch->max_tokens, .sp = ch->sp,
                        .top_logprobs = -1, .ignore_eos = ch->ignore_eos};
    if (ch->have_last)
        srv_gen_result_free(&ch->last);
    atomic_store(&g_stop, false);
    atomic_store(&g_generating, true);
    int rc = srv_generate(ch->e, &p, on_piece, NULL, &g_stop, &ch->last);
    atomic_store(&g_generating, false);
    ch->have_last = true;
    free(ids);
    if (rc < 0) {
        printf("\nerror: %s\n", ch->last.err);
        json_object_array_del_idx(ch->msgs, json_object_array_length(ch->msgs) - 1, 1);
        return;
    }
    if (!strcmp(ch->last.finish, "cancelled")) {
        // What was shown is kept as the reply.
        printf(" [stopped]");
    }
    printf("\n");
    fflush(stdout);
    add_msg(ch, "assistant", ch->last.text ? ch->last.text : "", ch->last.text_len);
}

static void print_stats(chat *ch)
{
    petrel_stats s;
    petrel_get_stats(ch->e->c, &s);
    const uint64_t uses = s.expert_hits + s.expert_misses, toks = s.n_prompt_tokens + s.n_decode_tokens;
    const srv_gen_result *r = &ch->last;
    double tps = ch->have_last && r->n_gen > 1 && r->t_decode_s > 0 ? (r->n_gen - 1) / r->t_decode_s : 0;
    printf("stats: last reply %d tokens, %.2f tok/s, TTFT %.1f ms, prompt %d tokens cached + %d prefilled\n",
           ch->have_last ? r->n_gen : 0, tps, ch->have_last ? r->ttft_s * 1e3 : 0.0, ch->have_last ? r->n_cached : 0,
           ch->have_last ? r->n_prefilled : 0);
    printf("stats: session %llu prompt + %llu generated tokens, expert hit rate %.1f%%, %.3f MB read per token, "
           "resident %.1f MB, context %d / %u positions\n",
           (unsigned long long)s.n_prompt_tokens, (unsigned long long)s.n_decode_tokens,
           uses ? 100.0 * (double)s.expert_hits / (double)uses : 0.0, toks ? (double)s.bytes_read / 1e6 / (double)toks : 0.0,
           (double)s.rss_bytes / 1e6, petrel_kv_len(ch->e->c), petrel_context_n_ctx(ch->e->c));
}

static bool valid_name(const char *n)
{
    return *n && !strchr(n, '/') && strcmp(n, ".") && strcmp(n, "..") && strlen(n) < 200;
}

static void session_paths(const chat *ch, const char *name, char *js, char *kv, size_t len)
{
    snprintf(js, len, "%s/%s.json", ch->dir, name);
    snprintf(kv, len, "%s/%s.pkv", ch->dir, name);
}

// Creates dir and its parents.
static void mkdirs(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

static int save(chat *ch, const char *name)
{
    if (!valid_name(name)) {
        printf("error: bad session name '%s'\n", name);
        return -1;
    }
    mkdirs(ch->dir);
    char js[4400], kv[4400], err[1024];
    session_paths(ch, name, js, kv, sizeof js);
    const char *s = json_object_to_json_string_ext(ch->msgs, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    pt_err pe = {{0}};
    if (pt_write_file_atomic(js, s, strlen(s), &pe) < 0) {
        printf("error: %s\n", pe.msg);
        return -1;
    }
    if (petrel_state_save(ch->e->c, kv, err, sizeof err) < 0) {
        printf("error: %s\n", err);
        return -1;
    }
    printf("saved session '%s' (%zu messages, %d positions)\n", name, json_object_array_length(ch->msgs),
           petrel_kv_len(ch->e->c));
    return 0;
}

static int load(chat *ch, const char *name, bool quiet_missing)
{
    if (!valid_name(name)) {
        printf("error: bad session name '%s'\n", name);
        return -1;
    }
    char js[4400], kv[4400], err[1024];
    session_paths(ch, name, js, kv, sizeof js);
    if (quiet_missing && access(js, R_OK) != 0)
        return 0;
    pt_err pe = {{0}};
    char *text = pt_read_file(js, NULL, &pe);
    if (!text) {
        printf("error: %s\n", pe.msg);
        return -1;
    }
    json_object *m = json_tokener_parse(text);
    free(text);
    if (!m || !json_object_is_type(m, json_type_array)) {
        if (m)
            json_object_put(m);
        printf("error: %s: not a conversation (a JSON array of messages)\n", js);
        return -1;
    }
    json_object_put(ch->msgs);
    ch->msgs = m;
    // Without its state the conversation still works: the next turn
    // recomputes the prompt.
    if (petrel_state_load(ch->e->c, kv, err, sizeof err) < 0)
        printf("warning: %s; the next reply recomputes the conversation\n", err);
    printf("loaded session '%s' (%zu messages, %d positions)\n", name, json_object_array_length(m),
           petrel_kv_len(ch->e->c));
    return 0;
}

static int parse_opts(int argc, char **argv, cli_model_opts *o, chat *ch, const char **session)
{
    for (int i = 1; i < argc;) {
        int r = cli_model_opt(o, argc, argv, &i);
        if (r < 0)
            return -1;
        if (r > 0)
            continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--ignore-eos")) {
            ch->ignore_eos = true;
            i++;
            continue;
        }
        if (!v)
            return -1;
        if (!strcmp(a, "--session"))
            *session = v;
        else if (!strcmp(a, "--session-dir"))
            ch->dir = v;
        else if (!strcmp(a, "--system"))
            ch->system = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens"))
            ch->max_tokens = atoi(v);
        else if (!strcmp(a, "--temp"))
            ch->sp.temperature = strtof(v, NULL);
        else if (!strcmp(a, "--top-p"))
            ch->sp.top_p = strtof(v, NULL);
        else if (!strcmp(a, "--seed"))
            ch->sp.seed = strtoull(v, NULL, 10);
        else
            return -1;
        i += 2;
    }
    return o->model && ch->max_tokens > 0 ? 0 : -1;
}

int cmd_chat(int argc, char **argv)
{
    cli_model_opts o;
    cli_model_opts_init(&o);
    chat ch = {.max_tokens = 1024, .sp = petrel_sampler_default_params()};
    ch.sp.temperature = 0;
    const char *session = NULL;
    if (parse_opts(argc, argv, &o, &ch, &session) < 0) {
        usage();
        return 2;
    }
    char defdir[4096];
    if (!ch.dir) {
        const char *home = getenv("HOME");
        snprintf(defdir, sizeof defdir, "%s/.local/share/petrel/sessions", home ? home : ".");
        ch.dir = defdir;
    }
    char err[1024];
    ch.e = srv_engine_open(o.model, &o.mp, &o.cp, NULL, 0, err, sizeof err);
    if (!ch.e) {
        fprintf(stderr, "petrel chat: %s\n", err);
        return 1;
    }
    if (!ch.e->tok) {
        fprintf(stderr, "petrel chat: the model has no usable tokenizer\n");
        srv_engine_close(ch.e);
        return 1;
    }
    reset(&ch);
    if (session && load(&ch, session, true) < 0) {
        srv_engine_close(ch.e);
        json_object_put(ch.msgs);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; // no SA_RESTART: Ctrl-C at the prompt just re-prompts
    sigaction(SIGINT, &sa, NULL);
    const bool tty = isatty(0);
    if (tty)
        fprintf(stderr, "petrel chat: %s — /reset /save NAME /load NAME /stats /quit; Ctrl-C stops a reply, "
                        "Ctrl-D quits\n",
                ch.e->model_id);
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        errno = 0;
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0) {
            if (errno == EINTR) {
                clearerr(stdin);
                if (tty)
                    printf("\n");
                continue;
            }
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (len == 0)
            continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit"))
            break;
        if (!strcmp(line, "/reset")) {
            reset(&ch);
            petrel_kv_truncate(ch.e->c, 0);
            printf("conversation cleared\n");
        } else if (!strcmp(line, "/stats")) {
            print_stats(&ch);
        } else if (!strncmp(line, "/save ", 6)) {
            save(&ch, line + 6);
        } else if (!strncmp(line, "/load ", 6)) {
            load(&ch, line + 6, false);
        } else if (line[0] == '/' && line[1] != '/') {
            printf("unknown command %s (/reset /save NAME /load NAME /stats /quit; '//' starts a message with '/')\n",
                   line);
        } else {
            turn(&ch, line[0] == '/' ? line + 1 : line);
        }
        fflush(stdout);
    }
    free(line);
    int rc = 0;
    if (session && save(&ch, session) < 0)
        rc = 1;
    if (ch.have_last)
        srv_gen_result_free(&ch.last);
    json_object_put(ch.msgs);
    srv_engine_close(ch.e);
    return rc;
}
