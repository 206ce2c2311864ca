// engine/spec_policy.c — the adaptive speculation policy (contract in
// engine/spec_policy.h).
#include "engine/spec_policy.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "petrel.h"

// Weight of a new sample in the time and byte averages: about the last
// three samples count, so that a cache warming up (or the machine's load
// changing) shows within a few steps.
#define EWMA_ALPHA 0.3

static void ewma(double *avg, double x)
{
    *avg = *avg > 0 ? *avg + EWMA_ALPHA * (x - *avg) : x;
}

// Step times on a shared machine have one-sided spikes (the thread was
// preempted): a sample counts at most twice the current average, so that
// one spike does not flip the decision, while a lasting change (a cache
// going cold) still moves the average within a few steps.
static void ewma_time(double *avg, double x)
{
    if (x <= 0)
        x = 1e-9;
    if (*avg > 0 && x > 2 * *avg)
        x = 2 * *avg;
    ewma(avg, x);
}

double pt_spec_gain(double acc, double t_plain, double t_verify, double t_draft)
{
    assert(t_plain > 0 && t_verify > 0 && t_draft >= 0);
    assert(acc >= 0 && acc <= 1);
    return (1.0 + acc) * t_plain / (t_verify + t_draft) - 1.0;
}

void pt_spec_policy_init(pt_spec_policy *p, int mode)
{
    assert(mode == PETREL_SPEC_ADAPTIVE || mode == PETREL_SPEC_ALWAYS || mode == PETREL_SPEC_OFF);
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->on = mode == PETREL_SPEC_ALWAYS;
    p->probe_gap = 1;
}

double pt_spec_acceptance(const pt_spec_policy *p)
{
    return (p->acc_hit + 0.5) / (p->acc_n + 1.0);
}

// Gain with the verification cost scaled by vscale; before a verification
// has been timed its cost is the prior PT_SPEC_PRIOR_VERIFY * t_plain
// (optimistic for a memory-bound MoE, where it is nearer 2: one wasted
// verification corrects it, and a pessimistic prior of 2 could never be
// beaten by any acceptance).
static double gain_acc(const pt_spec_policy *p, double acc, double vscale)
{
    if (p->t_plain <= 0)
        return 0;
    double tv = p->t_verify > 0 ? p->t_verify : PT_SPEC_PRIOR_VERIFY * p->t_plain;
    return pt_spec_gain(acc, p->t_plain, vscale * tv, p->t_draft);
}

static double gain_at(const pt_spec_policy *p, double vscale)
{
    return gain_acc(p, pt_spec_acceptance(p), vscale);
}

// Acceptance one standard error above the estimate (binomial over the
// window's effective sample count), capped at 1.
static double acceptance_high(const pt_spec_policy *p)
{
    double a = pt_spec_acceptance(p);
    double hi = a + sqrt(a * (1 - a) / (p->acc_n + 1.0));
    return hi > 1 ? 1 : hi;
}

// Shortest gap between probes: probes (each costs a draft) take at most
// PT_SPEC_PROBE_BUDGET of the time of the plain steps between them, so
// free drafts (an external drafter) are sampled every step.
static int min_gap(const pt_spec_policy *p)
{
    if (p->t_plain <= 0)
        return 1;
    double g = p->t_draft / (PT_SPEC_PROBE_BUDGET * p->t_plain);
    return g < 1 ? 1 : g > PT_SPEC_PROBE_MAX ? PT_SPEC_PROBE_MAX : (int)g + 1;
}

// Re-decides the regime from the current estimates, with hysteresis so
// that noise around break-even does not flip it every step.
static void decide(pt_spec_policy *p)
{
    p->gain = gain_at(p, 1.0);
    // Leaving needs the gain negative even for an acceptance one standard
    // error higher: while on, acceptance is sampled every step, but once
    // off only by probes, rarely, so a dip of noise would keep it off for
    // long; staying on when truly a little below break-even costs little.
    if (p->on && gain_acc(p, acceptance_high(p), 1.0) < -PT_SPEC_HYST) {
        p->on = false;
        p->n_switch++;
        p->probe_gap = min_gap(p); // the estimate is fresh: probe soon, then back off
        p->since_probe = 0;
    } else if (!p->on && p->gain > PT_SPEC_HYST) {
        p->on = true;
        p->n_switch++;
        p->since_plain = 0;
    }
}

int pt_spec_next(pt_spec_policy *p)
{
    if (p->mode == PETREL_SPEC_OFF)
        return PT_STEP_PLAIN;
    if (p->mode == PETREL_SPEC_ALWAYS)
        return PT_STEP_VERIFY;
    if (p->t_plain <= 0)
        return PT_STEP_PLAIN_PROBE; // first step: time a plain step, one acceptance sample
    if (p->t_verify <= 0)
        return PT_STEP_VERIFY; // second: time a verification (at worst one step's loss, once)
    decide(p);
    if (p->on)
        return p->since_plain >= PT_SPEC_REFRESH_PLAIN ? PT_STEP_PLAIN : PT_STEP_VERIFY;
    // Off: refresh the verification cost only when a 25% cheaper one would
    // change the decision (a cache that warmed up, less load); otherwise
    // keep sampling acceptance, ever more rarely while it stays too low.
    if (p->since_verify >= PT_SPEC_REFRESH_VERIFY && gain_at(p, 0.75) > 0)
        return PT_STEP_VERIFY;
    return p->since_probe >= p->probe_gap ? PT_STEP_PLAIN_PROBE : PT_STEP_PLAIN;
}

void pt_spec_note_plain(pt_spec_policy *p, double dt, double bytes, double uses)
{
    ewma_time(&p->t_plain, dt);
    ewma(&p->b_plain, bytes);
    ewma(&p->u_plain, uses);
    p->n_plain++;
    p->since_probe++;
    p->since_verify++;
    p->since_plain = 0;
}

void pt_spec_note_verify(pt_spec_policy *p, double dt, double bytes, double uses)
{
    ewma_time(&p->t_verify, dt);
    ewma(&p->b_verify, bytes);
    ewma(&p->u_verify, uses);
    p->n_verify++;
    p->since_plain++;
    p->since_verify = 0;
}

void pt_spec_note_draft(pt_spec_policy *p, double dt, double bytes)
{
    ewma_time(&p->t_draft, dt > 0 ? dt : 1e-12);
    ewma(&p->b_draft, bytes > 0 ? bytes : 1e-9);
}

void pt_spec_note_outcome(pt_spec_policy *p, bool accepted, bool probe)
{
    const double keep = 1.0 - 1.0 / PT_SPEC_WINDOW;
    p->acc_hit = p->acc_hit * keep + (accepted ? 1.0 : 0.0);
    p->acc_n = p->acc_n * keep + 1.0;
    if (probe) {
        p->n_probe++;
        p->n_probe_hit += accepted;
        p->since_probe = 0;
        // Far from paying: wait twice as long before the next probe; near
        // break-even, keep sampling at the budget's pace.
        int lo = min_gap(p);
        if (p->mode == PETREL_SPEC_ADAPTIVE && !p->on && gain_at(p, 1.0) < PT_SPEC_FAR) {
            p->probe_gap *= 2;
            if (p->probe_gap > PT_SPEC_PROBE_MAX)
                p->probe_gap = PT_SPEC_PROBE_MAX;
        } else {
            p->probe_gap = lo;
        }
        if (p->probe_gap < lo)
            p->probe_gap = lo;
    } else {
        p->n_accepted += accepted;
    }
}

int petrel_spec_mode_parse(const char *name)
{
    if (!strcmp(name, "adaptive"))
        return PETREL_SPEC_ADAPTIVE;
    if (!strcmp(name, "always") || !strcmp(name, "on"))
        return PETREL_SPEC_ALWAYS;
    if (!strcmp(name, "off"))
        return PETREL_SPEC_OFF;
    return -1;
}

const char *petrel_spec_mode_name(int mode)
{
    return mode == PETREL_SPEC_ADAPTIVE ? "adaptive" : mode == PETREL_SPEC_ALWAYS ? "always" : "off";
}
