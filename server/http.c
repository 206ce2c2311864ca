// server/http.c — the HTTP side of `petrel serve`: libmicrohttpd in
// thread-per-connection mode, routing, API-key check, body limit, and the
// wait for a job's result (non-streaming) or its SSE bytes (streaming).
// Client disconnects are noticed by polling the socket for a hang-up while
// waiting, and cancel the job.
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "server/api.h"
#include "server/server.h"
#include "server/worker.h"

typedef struct srv_http {
    const srv_config *cfg;
    srv_engine *e;
    srv_worker *w;
    atomic_bool stopping;
    atomic_ullong next_id;
} srv_http;

// Per-connection request state (MHD's con_cls).
typedef struct conn_req {
    char *body;      // (len) the upload so far
    size_t len, cap;
    int status;      // non-zero: answer with this error once the upload is consumed
    char msg[256];
} conn_req;

typedef struct sse_reader {
    srv_http *h;
    srv_job *j;
    int fd;          // the client socket, polled for a hang-up
} sse_reader;

static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int conn_fd(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned status, const char *type, const char *s)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), (void *)s, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, json_object *o)
{
    enum MHD_Result rc = send_text(conn, status, "application/json",
                                   json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return rc;
}

static enum MHD_Result send_error(srv_http *h, struct MHD_Connection *conn, unsigned status, const char *msg,
                                  const char *param)
{
    if (status != 429 && status != 503)
        srv_worker_count_rejected(h->w);
    return send_json(conn, status, srv_error_json((int)status, msg, param));
}

// Waits (bounded slices) until the job has output past out_off or is done;
// false if the client hung up or the server is stopping.
static bool wait_job(srv_http *h, srv_job *j, int fd, bool for_output)
{
    while (!(j->state == SRV_DONE || (for_output && j->out_off < j->out_len))) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (j->state != SRV_DONE && (client_gone(fd) || atomic_load(&h->stopping))) {
            atomic_store(&j->cancel, true);
            return false;
        }
    }
    return true;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    sse_reader *sr = cls;
    srv_job *j = sr->j;
    pthread_mutex_lock(&j->mu);
    if (!wait_job(sr->h, j, sr->fd, true)) {
        pthread_mutex_unlock(&j->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    ssize_t n;
    if (j->out_off < j->out_len) {
        size_t k = j->out_len - j->out_off < max ? j->out_len - j->out_off : max;
        memcpy(buf, j->out + j->out_off, k);
        j->out_off += k;
        n = (ssize_t)k;
    } else {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

static void sse_free(void *cls)
{
    sse_reader *sr = cls;
    atomic_store(&sr->j->cancel, true); // no-op when already done
    srv_job_unref(sr->j);
    free(sr);
}

static bool authorized(srv_http *h, struct MHD_Connection *conn)
{
    if (!h->cfg->api_key)
        return true;
    const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncmp(a, "Bearer ", 7))
        return false;
    const char *k = a + 7, *want = h->cfg->api_key;
    size_t lk = strlen(k), lw = strlen(want);
    unsigned diff = (unsigned)(lk != lw);
    for (size_t i = 0; i < lk && i < lw; i++)
        diff |= (unsigned)(k[i] ^ want[i]);
    return diff == 0;
}

static enum MHD_Result handle_generate(srv_http *h, struct MHD_Connection *conn, int kind, conn_req *cr)
{
    srv_job *j = srv_job_new();
    if (!j)
        return MHD_NO;
    char msg[1024];
    const char *param = NULL;
    int st = srv_parse_request(h->e, kind, cr->body ? cr->body : "", cr->len, j, msg, sizeof msg, &param);
    if (st != 200) {
        enum MHD_Result r = send_error(h, conn, (unsigned)st, msg, param);
        srv_job_unref(j);
        return r;
    }
    unsigned long long id = atomic_fetch_add(&h->next_id, 1);
    snprintf(j->id, sizeof j->id, "%s-%08lx%08llx", kind == SRV_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long)time(NULL), id);
    j->created = (long)time(NULL);
    st = srv_worker_submit(h->w, j);
    if (st) {
        srv_job_unref(j);
        return send_error(h, conn, (unsigned)st,
                          st == 429 ? "the request queue is full; retry later" : "the server is shutting down",
                          NULL);
    }
    int fd = conn_fd(conn);
    if (j->stream) {
        sse_reader *sr = calloc(1, sizeof *sr);
        sr->h = h;
        sr->j = j;
        sr->fd = fd;
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, sr, sse_free);
        if (!r) {
            atomic_store(&j->cancel, true);
            sse_free(sr);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    bool ok = wait_job(h, j, fd, false);
    pthread_mutex_unlock(&j->mu);
    enum MHD_Result rc;
    if (!ok)
        rc = MHD_NO; // the client left (or shutdown): close the connection
    else if (j->http_status)
        rc = send_error(h, conn, (unsigned)j->http_status, "the server is shutting down", NULL);
    else if (j->rc < 0)
        rc = send_json(conn, 500, srv_error_json(500, j->res.err, NULL));
    else
        rc = send_json(conn, MHD_HTTP_OK, srv_response(j));
    srv_job_unref(j);
    return rc;
}

static json_object *models_json(srv_http *h)
{
    json_object *m = json_object_new_object();
    json_object_object_add(m, "id", json_object_new_string(h->e->model_id));
    json_object_object_add(m, "object", json_object_new_string("model"));
    json_object_object_add(m, "created", json_object_new_int64(0));
    json_object_object_add(m, "owned_by", json_object_new_string("petrel"));
    json_object *arr = json_object_new_array(), *o = json_object_new_object();
    json_object_array_add(arr, m);
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(o, "data", arr);
    return o;
}

static enum MHD_Result route(srv_http *h, struct MHD_Connection *conn, const char *url, const char *method,
                             conn_req *cr)
{
    const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health") && get)
        return send_text(conn, 200, "application/json", "{\"status\":\"ok\"}");
    if (!authorized(h, conn))
        return send_error(h, conn, 401, "missing or incorrect API key (Authorization: Bearer KEY)", NULL);
    if (!strcmp(url, "/metrics") && get) {
        char *t = srv_worker_metrics(h->w);
        enum MHD_Result r = send_text(conn, 200, "text/plain; version=0.0.4", t ? t : "");
        free(t);
        return r;
    }
    if (!strcmp(url, "/v1/models") && get)
        return send_json(conn, 200, models_json(h));
    if (!strncmp(url, "/v1/models/", 11) && get) {
        if (strcmp(url + 11, h->e->model_id))
            return send_error(h, conn, 404, "the model does not exist", "model");
        json_object *l = models_json(h), *d, *m;
        json_object_object_get_ex(l, "data", &d);
        m = json_object_get(json_object_array_get_idx(d, 0));
        json_object_put(l);
        return send_json(conn, 200, m);
    }
    int kind = !strcmp(url, "/v1/chat/completions") ? SRV_CHAT : !strcmp(url, "/v1/completions") ? SRV_COMPLETION : 0;
    if (kind && post)
        return handle_generate(h, conn, kind, cr);
    if (kind)
        return send_error(h, conn, 405, "use POST", NULL);
    return send_error(h, conn, 404, "no such endpoint", NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    srv_http *h = cls;
    conn_req *cr = *con_cls;
    if (!cr) {
        cr = calloc(1, sizeof *cr);
        if (!cr)
            return MHD_NO;
        *con_cls = cr;
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > h->cfg->max_body)
            return send_error(h, conn, 413, "the request body is larger than the server accepts", NULL);
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cr->status) {
            if (cr->len + *upload_size > h->cfg->max_body) {
                cr->status = 413; // keep consuming, answer at the end
                free(cr->body);
                cr->body = NULL;
                cr->len = 0;
            } else {
                if (cr->len + *upload_size + 1 > cr->cap) {
                    size_t cap = (cr->len + *upload_size + 1) * 2;
                    if (cap > h->cfg->max_body + 1)
                        cap = h->cfg->max_body + 1;
                    char *p = realloc(cr->body, cap);
                    if (!p)
                        return MHD_NO;
                    cr->body = p;
                    cr->cap = cap;
                }
                memcpy(cr->body + cr->len, upload, *upload_size);
                cr->len += *upload_size;
                cr->body[cr->len] = 0;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cr->status == 413)
        return send_error(h, conn, 413, "the request body is larger than the server accepts", NULL);
    return route(h, conn, url, method, cr);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    conn_req *cr = *con_cls;
    if (cr) {
        free(cr->body);
        free(cr);
        *con_cls = NULL;
    }
}

int srv_serve(const srv_config *cfg)
{
    // Signals are taken by sigwait in this thread only.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[1024];
    srv_http h = {.cfg = cfg};
    atomic_init(&h.stopping, false);
    atomic_init(&h.next_id, 1);
    h.e = srv_engine_open(cfg->model, &cfg->mp, &cfg->cp, cfg->kv_dir, cfg->kv_ram, err, sizeof err);
    if (!h.e) {
        fprintf(stderr, "petrel serve: %s\n", err);
        return 1;
    }
    if (!h.e->tok)
        fprintf(stderr, "petrel serve: no usable tokenizer in the model: token-id prompts only\n");
    h.w = srv_worker_start(h.e, cfg, err, sizeof err);
    if (!h.w) {
        fprintf(stderr, "petrel serve: %s\n", err);
        srv_engine_close(h.e);
        return 1;
    }

    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (strchr(cfg->host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET6, cfg->host, &a->sin6_addr) != 1)
            goto bad_host;
        flags |= MHD_USE_IPv6;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)cfg->port);
        if (inet_pton(AF_INET, cfg->host, &a->sin_addr) != 1)
            goto bad_host;
    }
    struct MHD_Daemon *d =
        MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, &h, MHD_OPTION_SOCK_ADDR, &ss,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, &h, MHD_OPTION_CONNECTION_LIMIT, 256u,
                         MHD_OPTION_CONNECTION_TIMEOUT, 300u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "petrel serve: cannot listen on %s:%d: %s\n", cfg->host, cfg->port, strerror(errno));
        srv_worker_stop(h.w);
        srv_worker_free(h.w);
        srv_engine_close(h.e);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = di ? di->port : cfg->port;
    fprintf(stderr, "petrel serve: %s on http://%s:%d%s (parallel %d, prefill chunk %d, queue %d, kv-dir %s)\n",
            h.e->model_id, cfg->host, port, cfg->api_key ? " (API key required)" : "", h.w->n_slots, h.w->chunk,
            cfg->max_queue, cfg->kv_dir ? cfg->kv_dir : "none");
    if (cfg->port_file) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%d\n", port);
        pt_err pe = {{0}};
        if (pt_write_file_atomic(cfg->port_file, buf, (size_t)n, &pe) < 0)
            fprintf(stderr, "petrel serve: %s\n", pe.msg);
    }
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "petrel serve: signal %d, shutting down\n", sig);
    atomic_store(&h.stopping, true);
    MHD_quiesce_daemon(d);
    srv_worker_stop(h.w);
    MHD_stop_daemon(d);
    srv_worker_free(h.w);
    srv_engine_close(h.e);
    return 0;
bad_host:
    fprintf(stderr, "petrel serve: --host '%s' is not an IP address\n", cfg->host);
    srv_worker_stop(h.w);
    srv_worker_free(h.w);
    srv_engine_close(h.e);
    return 2;
}
