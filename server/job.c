// server/job.c — request jobs and their SSE channel (see job.h).
#include "server/job.h"

#include <stdlib.h>
#include <string.h>

srv_job *srv_job_new(void)
{
    srv_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    j->refs = 1;
    j->n = 1;
    j->gp.top_logprobs = -1;
    atomic_init(&j->cancel, false);
    return j;
}

void srv_job_unref(srv_job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0)
        return;
    free(j->prompt);
    for (int i = 0; i < j->gp.n_stop; i++)
        free(j->stop[i]);
    free(j->out);
    srv_gen_result_free(&j->res);
    for (int i = 0; i < SRV_MAX_N - 1; i++)
        srv_gen_result_free(&j->more[i]);
    for (int i = 0; i < SRV_MAX_N; i++)
        if (j->lp[i])
            json_object_put(j->lp[i]);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void srv_job_emit(srv_job *j, const char *s, size_t n)
{
    pthread_mutex_lock(&j->mu);
    if (j->out_len + n > j->out_cap) {
        size_t cap = (j->out_len + n) * 2 + 256;
        char *p = realloc(j->out, cap);
        if (!p) {
            pthread_mutex_unlock(&j->mu);
            return;
        }
        j->out = p;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void srv_job_emit_json(srv_job *j, json_object *o)
{
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t n = strlen(s);
    char *buf = malloc(n + 9);
    if (buf) {
        memcpy(buf, "data: ", 6);
        memcpy(buf + 6, s, n);
        memcpy(buf + 6 + n, "\n\n", 2);
        srv_job_emit(j, buf, n + 8);
        free(buf);
    }
    json_object_put(o);
}
