// common/fault.c — the fault plan: parsing PETREL_FAULT / pt_fault_arm
// specs and counting events per site (see fault.h).
#include "common/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_RULES = 16, SITE_LEN = 32 };

// One armed rule: events nth .. nth + count - 1 at site fail with what.
typedef struct rule {
    char site[SITE_LEN];
    unsigned long nth;      // first failing event (from 1)
    unsigned long count;    // failing events (0 = all from nth on)
    int what;               // errno > 0, or PT_FAULT_SHORT
    unsigned long seen;     // events at site so far
} rule;

int pt_fault_state_ = -1;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static rule rules[MAX_RULES];
static int n_rules;
static long injected;

static const struct {
    const char *name;
    int e;
} errnames[] = {{"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EINTR", EINTR}, {"EAGAIN", EAGAIN}, {"EDQUOT", EDQUOT},
                {"EROFS", EROFS}, {"EBADF", EBADF}, {"ENOMEM", ENOMEM}, {"EFBIG", EFBIG}};

// Parses "EIO", "28" or "short" into *what; -1 if none of these.
static int parse_what(const char *s, int *what)
{
    if (!strcmp(s, "short")) {
        *what = PT_FAULT_SHORT;
        return 0;
    }
    for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
        if (!strcmp(s, errnames[i].name)) {
            *what = errnames[i].e;
            return 0;
        }
    char *end;
    long v = strtol(s, &end, 10);
    if (*s && !*end && v > 0 && v < 4096) {
        *what = (int)v;
        return 0;
    }
    return -1;
}

// Parses one SITE:NTH[:WHAT[:COUNT]] item into r; -1 + err when malformed.
static int parse_rule(const char *item, rule *r, pt_err *err)
{
    char buf[128];
    if (strlen(item) >= sizeof buf)
        return pt_errf(err, "PETREL_FAULT: item '%.40s...' too long", item);
    strcpy(buf, item);
    char *f[4] = {0};
    int nf = 0;
    for (char *s = buf, *tok; nf < 4 && (tok = strsep(&s, ":")); )
        f[nf++] = tok;
    *r = (rule){.count = 1, .what = EIO};
    char *end;
    if (nf < 2 || !*f[0] || strlen(f[0]) >= SITE_LEN)
        return pt_errf(err, "PETREL_FAULT: '%s': want SITE:NTH[:WHAT[:COUNT]]", item);
    strcpy(r->site, f[0]);
    r->nth = strtoul(f[1], &end, 10);
    if (!*f[1] || *end || r->nth == 0)
        return pt_errf(err, "PETREL_FAULT: '%s': NTH must be a number from 1", item);
    if (nf > 2 && parse_what(f[2], &r->what) < 0)
        return pt_errf(err, "PETREL_FAULT: '%s': WHAT must be an errno name (EIO, ENOSPC, EINTR, EAGAIN, ...), "
                       "a number or 'short'", item);
    if (nf > 3) {
        r->count = strtoul(f[3], &end, 10);
        if (!*f[3] || *end)
            return pt_errf(err, "PETREL_FAULT: '%s': COUNT must be a number (0 = every event from NTH)", item);
    }
    return 0;
}

// Parses spec into rules (under mu); the state flips only on success.
static int arm_locked(const char *spec, pt_err *err)
{
    rule nr[MAX_RULES];
    int n = 0;
    const char *p = spec;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0) {
            if (n == MAX_RULES)
                return pt_errf(err, "PETREL_FAULT: more than %d items", MAX_RULES);
            char item[128];
            if (len >= sizeof item)
                return pt_errf(err, "PETREL_FAULT: item '%.40s...' too long", p);
            memcpy(item, p, len);
            item[len] = 0;
            if (parse_rule(item, &nr[n], err) < 0)
                return -1;
            n++;
        }
        p += len + (e ? 1 : 0);
    }
    memcpy(rules, nr, sizeof nr[0] * (size_t)n);
    n_rules = n;
    injected = 0;
    __atomic_store_n(&pt_fault_state_, n > 0 ? 1 : 0, __ATOMIC_RELEASE);
    return 0;
}

int pt_fault_arm(const char *spec, pt_err *err)
{
    pthread_mutex_lock(&mu);
    int rc = arm_locked(spec ? spec : "", err);
    pthread_mutex_unlock(&mu);
    return rc;
}

void pt_fault_disarm(void)
{
    pthread_mutex_lock(&mu);
    n_rules = 0;
    __atomic_store_n(&pt_fault_state_, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&mu);
}

long pt_fault_injected(void)
{
    pthread_mutex_lock(&mu);
    long n = injected;
    pthread_mutex_unlock(&mu);
    return n;
}

int pt_fault_check_(const char *site)
{
    pthread_mutex_lock(&mu);
    if (pt_fault_state_ < 0) {
        const char *env = getenv("PETREL_FAULT");
        pt_err e = {{0}};
        if (!env || arm_locked(env, &e) < 0) {
            if (env)
                fprintf(stderr, "petrel: %s (no faults armed)\n", e.msg);
            __atomic_store_n(&pt_fault_state_, 0, __ATOMIC_RELEASE);
        }
    }
    int what = 0;
    for (int i = 0; i < n_rules; i++) {
        rule *r = &rules[i];
        if (strcmp(r->site, site) != 0)
            continue;
        unsigned long n = ++r->seen;
        if (!what && n >= r->nth && (r->count == 0 || n - r->nth < r->count)) {
            what = r->what;
            injected++;
        }
    }
    pthread_mutex_unlock(&mu);
    return what;
}
