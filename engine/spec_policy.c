// engine/spec_policy.c — the adaptive speculation policy (contract in
// engine/spec_policy.h).
#include "engine/spec_policy.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "petrel.h"

// Weight of a new sample in the byte and use averages (reported, not
// decided on).
#define EWMA_ALPHA 0.25

static void ewma(double *avg, double x, int n_before)
{
    *avg = n_before > 0 ? *avg + EWMA_ALPHA * (x - *avg) : x;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Adds a sample and re-estimates: the smallest of the first two samples
// (one of them may be a spike), then the mean of the window with every
// sample clipped at PT_SPEC_CLIP times the median. The mean, not the
// median, because tokens per second is total time over tokens: an I/O-bound
// step's legitimate long tail must count. The clip keeps a preempted step
// from counting as more than a few, while a lasting change (a cache going
// cold) moves the median, and so the estimate, within half a window.
static void win_add(pt_spec_win *w, double x)
{
    if (!(x > 0))
        x = 1e-12;
    w->v[w->next] = x;
    w->next = (w->next + 1) % PT_SPEC_WIN;
    if (w->n < PT_SPEC_WIN)
        w->n++;
    double s[PT_SPEC_WIN];
    memcpy(s, w->v, sizeof(double) * (size_t)w->n);
    qsort(s, (size_t)w->n, sizeof *s, cmp_d);
    if (w->n <= 2) {
        w->est = s[0];
        return;
    }
    const double med = w->n % 2 ? s[w->n / 2] : 0.5 * (s[w->n / 2 - 1] + s[w->n / 2]);
    double sum = 0;
    for (int i = 0; i < w->n; i++)
        sum += s[i] < PT_SPEC_CLIP * med ? s[i] : PT_SPEC_CLIP * med;
    w->est = sum / w->n;
}

// Adds a sample of the regime not in use (an exploration, or the first
// step after a switch back), whose window holds samples an exploration
// gap apart or more, so its oldest ones may be from another load. A
// sample outside [est / PT_SPEC_SURPRISE, est * PT_SPEC_SURPRISE] is a
// surprise (a band tighter than the clip: a false surprise costs one more
// exploration, a missed one keeps a stale estimate for one more
// exploration gap). A surprise calls for the next exploration soon
// (shift), and a second on the same side means the level moved: the two
// replace the window (its median would take 5 more explorations to
// follow). One alone never does: it may be a preempted step. A stale
// window (from before the last switch) is confirmed by a sample within the
// band, and starts such a pair by a surprise.
// Which side of the surprise band around the estimate x falls on: -1
// below, +1 above, 0 inside (or no estimate yet).
static int win_side(const pt_spec_win *w, double x)
{
    return w->n == 0 ? 0 : x < w->est / PT_SPEC_SURPRISE ? -1 : x > w->est * PT_SPEC_SURPRISE ? 1 : 0;
}

// Adds x, on `side` of the band: a second surprise on the same side as the
// last replaces the window by the two (returns true); otherwise x is added
// and its side remembered.
static bool win_add_side(pt_spec_win *w, double x, int side)
{
    if (side != 0 && side == w->shift) {
        const double prev = w->v[(w->next + PT_SPEC_WIN - 1) % PT_SPEC_WIN];
        w->n = w->next = 0;
        win_add(w, prev);
        win_add(w, x);
        w->shift = 0;
        return true;
    }
    win_add(w, x);
    w->shift = side;
    return false;
}

static void win_explore(pt_spec_win *w, double x)
{
    const int side = win_side(w, x);
    if (w->stale) {
        w->stale = false;
        w->shift = 0;
    }
    win_add_side(w, x, side);
}

// Adds a context's own sample to a window that holds the prior's
// (pt_spec_prior): within the surprise band the prior is confirmed (the
// window goes on as the context's own); outside it the sample is added and
// remembered, and a second one on the same side replaces the window by the
// two (the prior is another context's, perhaps under another load or cache
// state; one sample alone may be a preempted step).
static void win_own(pt_spec_win *w, double x)
{
    assert(w->prior && w->n > 0); // a prior window has samples (prior_take)
    const int side = win_side(w, x);
    if (win_add_side(w, x, side) || side == 0)
        w->prior = false;
}

double pt_spec_gain(double acc, double t_plain, double t_verify, double t_draft)
{
    assert(t_plain > 0 && t_verify > 0 && t_draft >= 0);
    assert(acc >= 0 && acc <= 1);
    return (1.0 + acc) * t_plain / (t_verify + t_draft) - 1.0;
}

// A draft costs next to nothing (an external drafter, or a big model's MTP
// block): probes are free, so acceptance is sampled on every plain step.
static bool draft_cheap(const pt_spec_policy *p)
{
    return p->k->t_draft.n > 0 && p->k->t_plain.n > 0 &&
           p->k->t_draft.est <= PT_SPEC_CHEAP_DRAFT * p->k->t_plain.est;
}

static double gain_acc(const pt_spec_policy *p, double acc, double vscale);
static double acceptance_high(const pt_spec_policy *p);
static void flush_step(pt_spec_policy *p, double now);

// Whether this call is dormant (contract in engine/spec_policy.h): every
// cost measured from 3 samples or more, and not even the acceptance one
// standard error above the estimate (the carried one: costly drafts; with
// none, the bound is 1) can pay by the hysteresis; at most
// PT_SPEC_DORMANT_CALLS in a row. A dormant call is off (its plain steps
// refresh the plain-step estimate).
static bool hopeless(const pt_spec_policy *p)
{
    const pt_spec_costs *k = p->k;
    const bool measured = k->t_plain.n >= 3 && k->t_verify.n >= 3 && k->t_draft.n >= 3;
    return measured && !p->on && gain_acc(p, acceptance_high(p), 1.0) < -PT_SPEC_HYST;
}

// The dormancy schedule: PT_SPEC_DORMANT_CALLS dormant calls, then a live
// re-check; each re-check after which the costs are still hopeless doubles
// the count before the next (up to PT_SPEC_DORMANT_MAX): on a model where
// speculation never pays the re-checks' MTP upkeep and explorations fade
// out, while a change (a cache warmed, less load) is still noticed within
// PT_SPEC_DORMANT_MAX calls. Costs that are not hopeless reset it.
static void set_dormant(pt_spec_policy *p)
{
    pt_spec_costs *k = p->k;
    if (!hopeless(p)) {
        k->dormant_calls = 0;
        k->dormant_gap = PT_SPEC_DORMANT_CALLS;
        k->recheck = false;
        k->dormant_secs = 0;
        k->recheck_secs = 0;
        return;
    }
    if (k->dormant_gap < PT_SPEC_DORMANT_CALLS)
        k->dormant_gap = PT_SPEC_DORMANT_CALLS;
    if (k->recheck) // the re-check confirmed
        k->dormant_gap = 2 * k->dormant_gap > PT_SPEC_DORMANT_MAX ? PT_SPEC_DORMANT_MAX : 2 * k->dormant_gap;
    k->recheck = false;
    if (k->dormant_calls < k->dormant_gap) {
        p->dormant = p->dormant_call = true;
        k->dormant_calls++;
    } else {
        k->dormant_calls = 0;
        k->recheck = true;
    }
}

void pt_spec_prior_init(pt_spec_prior *pr)
{
    memset(&pr->k, 0, sizeof pr->k);
    pthread_mutex_init(&pr->mu, NULL);
}

void pt_spec_prior_destroy(pt_spec_prior *pr)
{
    pthread_mutex_destroy(&pr->mu);
}

// Copies the prior into costs that hold no measurement yet, every window
// with samples marked prior; returns whether it did.
static bool prior_take(pt_spec_prior *pr, pt_spec_costs *k)
{
    if (k->t_plain.n || k->t_verify.n || k->t_draft.n)
        return false;
    pthread_mutex_lock(&pr->mu);
    const bool have = pr->k.t_plain.n > 0;
    if (have)
        *k = pr->k;
    pthread_mutex_unlock(&pr->mu);
    if (!have)
        return false;
    pt_spec_win *w[3] = {&k->t_plain, &k->t_verify, &k->t_draft};
    for (int i = 0; i < 3; i++) {
        w[i]->prior = w[i]->n > 0;
        w[i]->stale = false;
        w[i]->shift = 0;
    }
    return true;
}

void pt_spec_policy_init(pt_spec_policy *p, int mode, pt_spec_costs *costs)
{
    pt_spec_policy_init_prior(p, mode, costs, NULL);
}

void pt_spec_policy_init_prior(pt_spec_policy *p, int mode, pt_spec_costs *costs, pt_spec_prior *prior)
{
    assert(mode == PETREL_SPEC_ADAPTIVE || mode == PETREL_SPEC_ALWAYS || mode == PETREL_SPEC_OFF);
    memset(p, 0, sizeof *p);
    p->mode = mode;
    // Fixed modes measure into their own storage: what the context
    // remembers is what adaptive generations measured.
    p->k = mode == PETREL_SPEC_ADAPTIVE && costs ? costs : &p->own;
    if (mode == PETREL_SPEC_ADAPTIVE && costs && prior) {
        p->prior = prior;
        p->from_prior = prior_take(prior, costs);
    }
    // An adaptive call starts in the regime the last one ended in: its
    // estimates are of that regime (the other's was marked stale).
    p->on = mode == PETREL_SPEC_ALWAYS || (mode == PETREL_SPEC_ADAPTIVE && p->k->on);
    // ... and its schedule where the last one left it: the gaps between
    // explorations are steps of this context, not of one call (calls of
    // 16-96 tokens would otherwise never re-time the other regime at
    // gaps of up to PT_SPEC_EXPLORE_MAX).
    p->since_probe = p->k->since_probe;
    p->since_plain = p->k->since_plain;
    p->since_verify = p->k->since_verify;
    // With costly drafts, the last call's acceptance, weighed down.
    if (!draft_cheap(p) && p->k->acc_n > 0) {
        double w = p->k->acc_n > PT_SPEC_CARRY ? PT_SPEC_CARRY / p->k->acc_n : 1.0;
        p->acc_hit = w * p->k->acc_hit;
        p->acc_n = w * p->k->acc_n;
    }
    if (mode == PETREL_SPEC_ADAPTIVE)
        set_dormant(p);
}

bool pt_spec_keep_dormant(pt_spec_policy *p, int refill)
{
    assert(refill >= 0);
    if (p->mode != PETREL_SPEC_ADAPTIVE || p->dormant || refill <= PT_SPEC_REFILL_MAX || !hopeless(p))
        return false;
    // The live call is given up, not postponed: the count stays where
    // set_dormant left it (0), so that the next call asks again, and is
    // live once its prompt keeps less of this one (a new conversation).
    p->dormant = p->dormant_call = true;
    p->k->recheck = false; // no re-check took place
    return true;
}

double pt_spec_acceptance(const pt_spec_policy *p)
{
    return (p->acc_hit + 0.5) / (p->acc_n + 1.0);
}

void pt_spec_policy_done(pt_spec_policy *p)
{
    const double now = p->wall ? pt_now() : 0;
    if (p->wall)
        flush_step(p, now);
    if (p->mode == PETREL_SPEC_ADAPTIVE) {
        // For --stats: a dormant call's decode seconds, a re-check's cost
        // over plain steps for its tokens.
        const double secs = p->wall ? now - p->t_begin : p->secs;
        pt_spec_costs *k = p->k;
        if (p->dormant_call) {
            k->dormant_secs += secs;
        } else if (k->recheck) {
            // its MTP upkeep, verifications and drafts less the plain
            // steps they saved (the call's wall time less plain steps for
            // all its tokens would bury ~2 ms under the estimate's error)
            const double saved = (double)(p->n_verify + p->n_accepted) * k->t_plain.est;
            const double extra = p->upkeep + p->spec_secs - saved;
            k->recheck_secs = extra > 0 ? extra : 0;
            k->dormant_secs = 0;
        }
        p->k->acc_hit = p->acc_hit;
        p->k->acc_n = p->acc_n;
        p->k->on = p->on;
        p->k->since_probe = p->since_probe;
        p->k->since_plain = p->since_plain;
        p->k->since_verify = p->since_verify;
        if (p->prior) {
            pthread_mutex_lock(&p->prior->mu);
            p->prior->k = *p->k;
            pthread_mutex_unlock(&p->prior->mu);
        }
    }
}

// Gain at acceptance acc with the verification cost scaled by vscale;
// before a verification has been timed its cost is the prior
// PT_SPEC_PRIOR_VERIFY * t_plain. A two-token step does all the work of a
// one-token step and at most about twice it, so the measured ratio is held
// within [1, PT_SPEC_MAX_VERIFY]: a spike in either estimate (one sample
// of a preempted step) cannot make the gain absurd before the other
// samples outweigh it.
static double gain_acc(const pt_spec_policy *p, double acc, double vscale)
{
    const pt_spec_costs *k = p->k;
    if (k->t_plain.n == 0)
        return 0;
    const double tp = k->t_plain.est;
    double tv = k->t_verify.n ? k->t_verify.est : PT_SPEC_PRIOR_VERIFY * tp;
    tv = tv < tp ? tp : tv > PT_SPEC_MAX_VERIFY * tp ? PT_SPEC_MAX_VERIFY * tp : tv;
    return pt_spec_gain(acc, tp, vscale * tv, k->t_draft.est);
}

// Acceptance one standard error above the estimate (binomial over the
// window's effective sample count), capped at 1.
static double acceptance_high(const pt_spec_policy *p)
{
    double a = pt_spec_acceptance(p);
    double hi = a + sqrt(a * (1 - a) / (p->acc_n + 1.0));
    return hi > 1 ? 1 : hi;
}

// Steps between two explorations of the other regime: one costs about
// |gain| of a step, so every |gain| / PT_SPEC_EXPLORE steps they take about
// PT_SPEC_EXPLORE of the time.
static int explore_gap(double gain)
{
    double g = fabs(gain) / PT_SPEC_EXPLORE;
    return g < PT_SPEC_EXPLORE_MIN ? PT_SPEC_EXPLORE_MIN : g > PT_SPEC_EXPLORE_MAX ? PT_SPEC_EXPLORE_MAX : (int)g;
}

// Steps between two explorations at this gain, with the backoff; the
// shortest while the other regime's estimate rests on fewer than 3 samples
// (the first ones may be spikes, and the clipping needs 3), on samples
// from before the last regime switch, or on a last sample that disagreed.
static int explore_gap_k(const pt_spec_policy *p)
{
    const pt_spec_win *other = p->on ? &p->k->t_plain : &p->k->t_verify;
    // Fewer than 3 samples, samples from before the last switch, or a
    // surprising last one: look again soon.
    if (other->n < 3 || other->stale || other->shift != 0)
        return PT_SPEC_EXPLORE_MIN;
    // A two-token step measured cheaper than a one-token step: one of the
    // estimates is stale (the load changed since) or spiked; look again soon.
    if (p->k->t_verify.est < p->k->t_plain.est)
        return PT_SPEC_EXPLORE_MIN;
    int gap = explore_gap(p->gain) * (p->k->backoff > 1 ? p->k->backoff : 1);
    return gap > PT_SPEC_EXPLORE_MAX ? PT_SPEC_EXPLORE_MAX : gap;
}

// Plain steps between acceptance probes while off: when a higher
// acceptance could make speculation pay, as often as PT_SPEC_PROBE_BUDGET
// of the plain steps' time allows (every step for cheap drafts); when not
// even that, rarely (8 * PT_SPEC_PROBE_MAX), so that a text that turns
// predictable is still noticed.
static int probe_gap(const pt_spec_policy *p)
{
    const pt_spec_costs *k = p->k;
    if (draft_cheap(p))
        return 1;
    if (gain_acc(p, acceptance_high(p), 1.0) < 0)
        return 8 * PT_SPEC_PROBE_MAX;
    double g = k->t_draft.est / (PT_SPEC_PROBE_BUDGET * k->t_plain.est);
    return g < 1 ? 1 : g > PT_SPEC_PROBE_MAX ? PT_SPEC_PROBE_MAX : (int)g + 1;
}

// Re-decides the regime from the current estimates, with hysteresis so
// that noise around break-even does not flip it every step.
static void decide(pt_spec_policy *p)
{
    const bool was_on = p->on;
    p->gain = gain_acc(p, pt_spec_acceptance(p), 1.0);
    // Leaving with costly drafts needs the gain negative even for an
    // acceptance one standard error higher: once off, acceptance is
    // sampled only by rare probes, so leaving on a dip of noise would keep
    // it off for long. With cheap drafts every plain step probes.
    // No acceptance evidence yet (this call's or carried), costly drafts:
    // the prior alone says nothing about this text, so the regime carried
    // in stays (a call that starts verifying is not sent to plain steps by
    // the prior's 0.5 where break-even is above it; its first outcome
    // decides). Cheap drafts: plain steps probe, evidence comes as fast
    // either way, and the prior decides (engine/spec_policy.h).
    if (p->acc_n <= 0 && !draft_cheap(p)) {
        // keep
    } else if (p->on && p->gain < -PT_SPEC_HYST &&
        (draft_cheap(p) || gain_acc(p, acceptance_high(p), 1.0) < -PT_SPEC_HYST)) {
        p->on = false;
        p->n_switch++;
        p->since_verify = 0;
    } else if (!p->on && p->gain > PT_SPEC_HYST) {
        p->on = true;
        p->n_switch++;
        p->since_plain = 0;
    }
    int *b = &p->k->backoff;
    pt_spec_win *left = was_on ? &p->k->t_verify : &p->k->t_plain;
    const double e0 = p->k->entry_est;
    const bool moved = !draft_cheap(p) || !(e0 > 0) || left->est > e0 * PT_SPEC_SURPRISE || left->est < e0 / PT_SPEC_SURPRISE;
    if (p->on != was_on && p->k->regime_steps >= PT_SPEC_EXPLORE_MIN && moved) {
        // The window of the regime just left holds its last samples,
        // perhaps of a passing load burst that made it look worse, and is
        // stale by the time it is needed again: its next sample, an
        // exploration PT_SPEC_EXPLORE_MIN steps from now, replaces it
        // unless it agrees. The backoff measured the other regime's
        // stability: start over. (A regime left within a few steps of
        // entering it was left on acceptance evidence, its window is mostly
        // what it was before: neither. With cheap drafts neither either
        // when the window stayed within the surprise band of its estimate
        // at the regime's entry: the switch was on acceptance, which the
        // probes of every plain step follow without explorations.)
        left->stale = true;
        left->shift = 0;
        *b = 1;
    } else if (p->on == was_on && p->explored) {
        // An exploration that changed nothing: the next one twice as late,
        // unless its sample disagreed with the estimate (then soon).
        const pt_spec_win *other = p->on ? &p->k->t_plain : &p->k->t_verify;
        *b = other->shift != 0 ? 1 : *b < 1 ? 2 : *b * 2 > PT_SPEC_BACKOFF_MAX ? PT_SPEC_BACKOFF_MAX : *b * 2;
    }
    p->explored = false;
    if (p->on != was_on)
        p->k->entry_est = (p->on ? &p->k->t_verify : &p->k->t_plain)->est;
    p->k->regime_steps = p->on != was_on ? 0 : p->k->regime_steps + 1;
}

int pt_spec_next(pt_spec_policy *p)
{
    if (p->wall) { // the last step's sample, now that it is over; this one starts
        const double now = pt_now();
        flush_step(p, now);
        p->t_step = now;
        p->pend_draft = 0;
    }
    if (p->mode == PETREL_SPEC_OFF)
        return PT_STEP_PLAIN;
    if (p->mode == PETREL_SPEC_ALWAYS)
        return PT_STEP_VERIFY;
    const pt_spec_costs *k = p->k;
    if (p->dormant)
        return PT_STEP_PLAIN;
    if (k->t_plain.n == 0)
        return PT_STEP_PLAIN_PROBE; // nothing known: time a plain step and a draft, one acceptance sample
    if (k->t_verify.n == 0)
        return PT_STEP_VERIFY; // time a verification (at worst one step's loss, once per context)
    decide(p);
    // A live re-check (the call after dormant ones) has done its job once
    // a verification of this call is timed, agrees with the estimate (a
    // surprise calls for a second sample PT_SPEC_EXPLORE_MIN steps later,
    // which may replace the window: the load changed) and the costs still
    // say that nothing can pay: the rest of the call is dormant, so that it
    // does not keep the MTP cache filled for drafts that will not be made.
    const pt_spec_win *tw = &p->k->t_verify;
    if (p->k->recheck && p->n_verify > 0 && tw->shift == 0 && !tw->stale && !tw->prior && hopeless(p)) {
        p->dormant = true;
        return PT_STEP_PLAIN;
    }
    if (p->on) {
        if (p->since_plain >= explore_gap_k(p)) {
            p->n_explore++;
            p->explored = true;
            return PT_STEP_PLAIN; // refresh t_plain
        }
        return PT_STEP_VERIFY;
    }
    // Off: refresh the verification cost at the usual pace when a 25%
    // cheaper one could change the decision (a cache that warmed up, less
    // load) or the estimate is in doubt, else at the longest gap (the
    // estimate may be from a load spike that has ended).
    const pt_spec_win *tv = &p->k->t_verify;
    int gap = explore_gap_k(p);
    if (!(tv->n < 3 || tv->stale || tv->shift != 0 || gain_acc(p, acceptance_high(p), 0.75) > 0))
        gap = PT_SPEC_EXPLORE_MAX;
    if (p->since_verify >= gap) {
        p->n_explore++;
        p->explored = true;
        return PT_STEP_VERIFY;
    }
    // since_probe counts the plain steps after the last probe (the probe's
    // own is reset by its outcome): a gap of 1 is every step.
    return p->since_probe + 1 >= probe_gap(p) ? PT_STEP_PLAIN_PROBE : PT_STEP_PLAIN;
}

// A plain step's seconds into its window (as an exploration while on).
static void sample_plain(pt_spec_policy *p, double dt)
{
    pt_spec_costs *k = p->k;
    if (k->t_plain.prior)
        win_own(&k->t_plain, dt);
    else if ((p->explored && p->on) || k->t_plain.stale)
        win_explore(&k->t_plain, dt);
    else
        win_add(&k->t_plain, dt);
}

// A verification's seconds into its window (as an exploration while off).
static void sample_verify(pt_spec_policy *p, double dt)
{
    pt_spec_costs *k = p->k;
    p->spec_secs += dt;
    if (k->t_verify.prior)
        win_own(&k->t_verify, dt);
    else if ((p->explored && !p->on) || k->t_verify.stale)
        win_explore(&k->t_verify, dt);
    else
        win_add(&k->t_verify, dt);
}

// Wall-clock steps: the waiting sample, the step's seconds from its start
// to now less its draft's, at least what was noted.
static void flush_step(pt_spec_policy *p, double now)
{
    if (!p->pend)
        return;
    const double full = now - p->t_step - p->pend_draft;
    const double dt = full > p->pend_dt ? full : p->pend_dt;
    if (p->pend == 1)
        sample_plain(p, dt);
    else
        sample_verify(p, dt);
    p->pend = 0;
}

void pt_spec_policy_wall(pt_spec_policy *p)
{
    p->wall = true;
    p->pend = 0;
    p->t_step = p->t_begin = pt_now();
    p->pend_draft = 0;
}

void pt_spec_note_upkeep(pt_spec_policy *p, double secs)
{
    assert(secs >= 0);
    p->upkeep += secs;
}

void pt_spec_note_plain(pt_spec_policy *p, double dt, double bytes, double uses)
{
    pt_spec_costs *k = p->k;
    ewma(&k->b_plain, bytes, k->t_plain.n);
    ewma(&k->u_plain, uses, k->t_plain.n);
    if (p->wall) {
        p->pend = 1;
        p->pend_dt = dt;
    } else {
        sample_plain(p, dt);
        p->secs += dt;
    }
    p->n_plain++;
    p->since_probe++;
    p->since_verify++;
    p->since_plain = 0;
}

void pt_spec_note_verify(pt_spec_policy *p, double dt, double bytes, double uses)
{
    pt_spec_costs *k = p->k;
    ewma(&k->b_verify, bytes, k->t_verify.n);
    ewma(&k->u_verify, uses, k->t_verify.n);
    if (p->wall) {
        p->pend = 2;
        p->pend_dt = dt;
    } else {
        sample_verify(p, dt);
        p->secs += dt;
    }
    p->n_verify++;
    p->since_plain++;
    p->since_verify = 0;
    p->since_probe = 0; // a verification samples acceptance too
}

void pt_spec_note_draft(pt_spec_policy *p, double dt, double bytes)
{
    pt_spec_costs *k = p->k;
    p->pend_draft += dt;
    p->spec_secs += dt;
    if (!p->wall)
        p->secs += dt;
    ewma(&k->b_draft, bytes, k->t_draft.n);
    if (k->t_draft.prior)
        win_own(&k->t_draft, dt);
    else
        win_add(&k->t_draft, dt);
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
