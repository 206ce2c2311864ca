// engine/spec_policy.h — when does speculative verification pay?
//
// A verification decodes [token, draft] as one batch and then drafts again
// with the MTP block: it yields 1 + (draft accepted) tokens for the price of
// a two-token step plus a draft, against 1 token for a plain one-token step.
// On a memory- or I/O-bound MoE the two-token step reads nearly twice the
// experts (the union of both tokens' choices), on a small compute-bound one
// it computes twice the rows, so speculation pays only when acceptance is
// high enough. The adaptive policy measures all of it online:
//   acceptance a     decayed counts of drafts accepted / drafts checked,
//                    from verifications and from probes (a draft made
//                    during plain decoding and compared with the token that
//                    plain decoding produces next; nothing verified);
//   t_plain          seconds per plain step,
//   t_verify         seconds per two-token step,
//   t_draft          seconds per draft (MTP block on one row, or the
//                    external drafter),
// each the mean of its last PT_SPEC_WIN samples, every sample clipped at
// PT_SPEC_CLIP times their median (a thread preempted on a shared machine
// gives one-sided spikes). Expected gain of speculating, in tokens per
// second relative to plain:
//   gain = (1 + a) * t_plain / (t_verify + t_draft) - 1
// It verifies while gain > +PT_SPEC_HYST and decodes plain steps while gain
// < -PT_SPEC_HYST (inside the band it keeps its regime: at break-even both
// are within the band of each other, and it does not flap on noise). The
// measurements of the regime it is not in are refreshed by exploration
// whose expected loss is bounded: a step of the other kind every
// |gain| / PT_SPEC_EXPLORE steps (so about PT_SPEC_EXPLORE of the time
// whatever the gain), twice as rarely after each exploration that did not
// change the regime (up to PT_SPEC_BACKOFF_MAX times, never past
// PT_SPEC_EXPLORE_MAX steps, and at that gap even when a cheaper step could
// not change the decision). The estimate of the regime not in use would
// otherwise be frozen at what it was when the policy left that regime (a
// load spike then, say): on every switch out of a regime held for
// PT_SPEC_EXPLORE_MIN steps or more (one left sooner was left on
// acceptance evidence, its window mostly older) the window of the regime
// just left is marked stale and the backoff restarts; its next sample (an
// exploration PT_SPEC_EXPLORE_MIN steps later) is checked against it.
// With cheap drafts only when that window's estimate moved out of the
// surprise band while the regime was held (entry_est): a switch on
// acceptance alone leaves a current estimate, and acceptance needs no
// exploration there (every plain step probes). With costly drafts always:
// the exploration is also an acceptance sample that sparse probes lack. An
// exploration sample off the estimate by more than PT_SPEC_SURPRISE
// (either way) calls for the next one PT_SPEC_EXPLORE_MIN steps later, and
// two in a row on the same side replace the window (the load changed
// since; one alone may be a preempted step). And acceptance
// probes while off only when a higher acceptance (one standard error up)
// could make speculation pay, at a pace where drafts take at most
// PT_SPEC_PROBE_BUDGET of the time (every step for free drafts). When
// acceptance cannot pay, an adaptive generation costs next to nothing over
// plain decoding.
//
// The step costs are properties of the machine, the model and its cache,
// not of the text: they live in a pt_spec_costs that the context keeps
// across petrel_generate calls (a later call starts deciding at once). The
// acceptance is a property of the text and the drafter: every call starts
// from one prior sample at 0.5 and, when drafts are costly (the model's own
// MTP block: the same drafter on the same model, and probes to relearn it
// cost), the last call's counts weighed down to PT_SPEC_CARRY samples; when
// they are cheap every plain step probes, and a fresh start does not carry
// one text's acceptance into the next.
//
// Per-model prior. A context that has measured nothing yet (a new
// conversation in the server, each job of bench_mtp --fresh) starts from
// the costs, regime, schedule and dormancy the model's contexts last ended
// with (pt_spec_prior, in the model, under a mutex), so that it decides at
// once instead of spending its first steps on timing both kinds of step;
// its own samples replace the prior's as they arrive (each window is
// checked by its first own samples: two on the same side of the surprise
// band replace it). The acceptance follows the rules above (carried only
// for costly drafts, weighed down to PT_SPEC_CARRY samples). With costly
// drafts, no acceptance evidence yet in a call leaves the regime carried
// in: the prior sample at 0.5 says nothing about this text, and a call
// that starts verifying keeps doing so until its first outcome decides.
// With cheap drafts (nothing carried: bench_mtp interleaves drafters of
// different acceptance on one context, and a weak carry of 1-4 samples
// simulated 0.5-2% worse there) a call decides on the 0.5 prior from its
// first step: acceptance is learnt as fast plain (every plain step
// probes) as verifying, so the regime carried in is worth nothing.
//
// Dormant calls. While adaptive decodes plain steps it still keeps the MTP
// block's KV cache filled (engine/spec_mtp.h: an eh_proj and a kv_a
// product per position), so that a draft can be made at any step. Where
// not even an acceptance one standard error above the estimate can pay
// (gain < -PT_SPEC_HYST on the costs the context measured, each from 3
// samples or more, and the acceptance carried in: costly drafts carry
// PT_SPEC_CARRY samples, so the bound is ~0.15 above; with none it is 1:
// a small compute-bound model, where a verification and a draft cost about
// two plain steps or more; until 2026-12-03 the bound was always 1, and on
// a Zen 4 the trained model's gain(1) ~ 0 kept every call live, 29-52
// verifications per repetition and 3-7% below off) that upkeep is all
// adaptive adds to plain decoding: on the trained model
// of bench/mtp.sh, 2-5% of the time with no verification and no probe
// (PT_NEVER A/B, 2026-12-02). Such a call is dormant: plain steps only, no
// draft, no MTP upkeep (engine/generate.c; the MTP cache then ends where
// the call started writing, and a later live call re-prefills from there).
// After PT_SPEC_DORMANT_CALLS dormant calls in a row one is live again, so
// that the costs are re-measured (a load or cache change may have made
// verifications cheaper); each live re-check that leaves speculation
// hopeless doubles the number of dormant calls before the next (up to
// PT_SPEC_DORMANT_MAX), one that does not resets it; the plain-step
// estimate stays current meanwhile. What each re-check cost over plain
// steps for its tokens (its MTP rows of the prompt, a verification and a
// draft) and the dormant calls' decode seconds since are measured and
// shown by --stats: on the trained model of bench/mtp.sh a re-check costs
// ~1.6 ms, about 6 plain steps, i.e. ~0.1% of the time at gaps of 8-64
// calls of 96 tokens (2026-12-07). A gate on that share (no re-check
// before the dormant calls had decoded 1000 times its cost) was tried and
// left out: it halved a cost that no measurement resolves (adaptive and
// off jobs doing identical work differ by up to 1% in bench/mtp.sh) and
// made test_spec_policy's recovery after a load change 5x slower. A
// re-check is dormant itself from the step after its verification is
// timed, if that sample agrees with the estimate (within the surprise
// band) and the costs are still hopeless:
// until 2026-12-07 it kept the MTP cache filled to its end, and on the
// trained model of bench/mtp.sh (a short model: the MTP block is ~1/5 of
// a step) its upkeep, the MTP rows of the whole prompt at its first draft
// included, was most of what adaptive cost over off.
// None of this can change a token: the policy only picks which kind of step
// produces the next one (engine/generate.c).
#ifndef PETREL_ENGINE_SPEC_POLICY_H
#define PETREL_ENGINE_SPEC_POLICY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

// The kind of step generation takes next.
enum {
    PT_STEP_PLAIN = 0,       // decode one token
    PT_STEP_PLAIN_PROBE = 1, // draft first (acceptance sample), then decode one token
    PT_STEP_VERIFY = 2,      // draft, decode [token, draft], keep the draft if it is right
};

// Tuning constants (see the contract above; spec_policy.c says why).
#define PT_SPEC_WIN 8              // samples per cost estimate
#define PT_SPEC_CLIP 1.5
#define PT_SPEC_SURPRISE 1.25      // an exploration sample this far off the estimate (either way) is a surprise
#define PT_SPEC_WINDOW 32.0        // acceptance samples in the decayed window
#define PT_SPEC_CARRY 8.0          // acceptance samples a call inherits from the last (costly drafts)
#define PT_SPEC_PRIOR_VERIFY 1.5   // t_verify / t_plain assumed before one is measured
#define PT_SPEC_MAX_VERIFY 2.5     // t_verify / t_plain is taken within [1, this]
#define PT_SPEC_HYST 0.02          // switch on above +2%, off below -2%
#define PT_SPEC_EXPLORE 0.003      // exploration steps cost about this share of the time
#define PT_SPEC_EXPLORE_MIN 8      // fewest steps between two explorations
#define PT_SPEC_EXPLORE_MAX 256    // most steps between two explorations
#define PT_SPEC_BACKOFF_MAX 16     // an exploration that changes nothing doubles the gap, up to this factor
#define PT_SPEC_PROBE_BUDGET 0.02  // share of the plain steps' time probes may take
#define PT_SPEC_PROBE_MAX 32       // longest gap between acceptance probes while off
#define PT_SPEC_CHEAP_DRAFT 0.05   // a draft under this share of a plain step is cheap
// A live call needs the MTP cache to cover the prefix it keeps; after dormant
// calls it ends where the first of them started, so a live call re-prefills
// the main model from there (engine/generate.c). In a conversation that is
// the whole conversation since: far more than the upkeep a dormant call
// saves (on a 61-layer model the MTP block is ~1/60 of a step). A live
// call that would re-prefill more than PT_SPEC_REFILL_MAX positions stays
// dormant (pt_spec_keep_dormant); the costs are then re-measured by the
// first call whose prompt keeps no more than that (a new conversation).
#define PT_SPEC_DORMANT_CALLS 8    // dormant calls in a row before the first live re-check
#define PT_SPEC_DORMANT_MAX 64     // ... doubled after each re-check that confirms, up to this
#define PT_SPEC_REFILL_MAX 32      // most positions a live call after dormant ones may re-prefill

// Mean of the last PT_SPEC_WIN samples of one quantity, each clipped at
// PT_SPEC_CLIP times their median.
typedef struct pt_spec_win {
    double v[PT_SPEC_WIN]; // (n) samples, ring buffer
    int n, next;           // samples held; slot the next one goes to
    double est;            // the estimate (0 = no sample yet)
    bool stale;            // measured before the last regime switch: the next sample is an early check
    int shift;             // the last exploration sample fell below est / PT_SPEC_SURPRISE (-1), above est * it (+1), else 0
    bool prior;            // the samples are another context's (pt_spec_prior): the next ones are checked against them
} pt_spec_win;

// What a context remembers between petrel_generate calls (zero = nothing).
typedef struct pt_spec_costs {
    pt_spec_win t_plain, t_verify, t_draft; // seconds per step of each kind
    double b_plain, b_verify, b_draft;      // expert bytes read per step of each kind (last-8 average)
    double u_plain, u_verify;               // expert uses (distinct experts per batch) per step
    double acc_hit, acc_n;                  // last call's decayed acceptance counts
    int backoff;                            // exploration gap factor (1..PT_SPEC_BACKOFF_MAX; 0 = 1)
    bool on;                                // the regime the last adaptive call ended in
    int regime_steps;                       // decisions since that regime was entered
    double entry_est;                       // its step-cost estimate then (t_verify's when on, t_plain's when off; 0 = unknown)
    int since_probe, since_plain, since_verify; // the schedule's counters (pt_spec_policy's) at its end
    int dormant_calls;                      // dormant calls in a row just before (since the last live one)
    int dormant_gap;                        // dormant calls before the next live re-check (0 = PT_SPEC_DORMANT_CALLS)
    bool recheck;                           // the last call was a live re-check after dormant ones
    double dormant_secs;                    // decode seconds of the dormant calls since the last live one
    double recheck_secs;                    // the last re-check's cost over plain steps for its tokens (0 = none yet)
} pt_spec_costs;

// The step costs of one loaded model that a context which has measured
// nothing yet starts from (contract above: "Per-model prior"): the costs
// the last adaptive call of any of its contexts ended with. Several
// contexts may decode at once (the server): every access holds mu.
typedef struct pt_spec_prior {
    pthread_mutex_t mu;
    pt_spec_costs k; // (k.t_plain.n == 0: nothing published yet)
} pt_spec_prior;

void pt_spec_prior_init(pt_spec_prior *pr);
void pt_spec_prior_destroy(pt_spec_prior *pr);

typedef struct pt_spec_policy {
    int mode;                  // PETREL_SPEC_ADAPTIVE / _ALWAYS / _OFF
    bool on;                   // current regime (adaptive): verifying drafts
    bool dormant;              // (adaptive) this call takes plain steps only and needs no drafts
    bool dormant_call;         // (adaptive) ... and was from its start (set_dormant, pt_spec_keep_dormant)
    pt_spec_costs *k;          // the step costs (the context's, or own)
    pt_spec_prior *prior;      // (adaptive, or NULL) the model's, published to at the end
    bool from_prior;           // this call's costs started from the prior (a fresh context)
    pt_spec_costs own;         // storage when the caller keeps none
    // acceptance
    double acc_hit, acc_n;     // decayed accepted / checked drafts of this call
    double gain;               // gain at the last decision
    // schedule (carried across calls in the costs: calls shorter than an
    // exploration gap must still explore)
    int since_probe;           // plain steps since the last acceptance sample while off
    int since_plain;           // verifications since the last plain step
    int since_verify;          // plain steps since the last verification
    bool explored;             // the last step explored the other regime
    // wall-clock steps (pt_spec_policy_wall): a step's sample is taken at
    // the next pt_spec_next (or pt_spec_policy_done)
    bool wall;                 // time each step from one pt_spec_next to the next
    int pend;                  // a sample waits: 0 none, 1 plain, 2 verification
    double pend_dt;            // its decode seconds as noted
    double pend_draft;         // draft seconds noted since the step began
    double t_step;             // pt_now() when the step began
    double t_begin;            // (wall) pt_now() at pt_spec_policy_wall: the call's decode began
    double secs;               // (not wall) seconds noted: steps and drafts
    double upkeep;             // seconds of MTP upkeep before the first step (pt_spec_note_upkeep)
    double spec_secs;          // seconds of this call's verifications and drafts
    // counts
    uint64_t n_plain, n_verify, n_accepted, n_probe, n_probe_hit, n_switch, n_explore;
} pt_spec_policy;

// Expected relative change of tokens per second when verifying drafts
// instead of plain steps: (1 + acc) * t_plain / (t_verify + t_draft) - 1.
// Pure; t_plain, t_verify > 0, acc in [0, 1].
double pt_spec_gain(double acc, double t_plain, double t_verify, double t_draft);

// A policy for one generation. costs: the step costs remembered from
// earlier calls, updated by this one (NULL: none kept, the policy starts
// from nothing). Only the adaptive mode reads or writes them. Sets
// p->dormant (see the contract): the caller then need not keep the MTP
// cache filled, pt_spec_next returns PT_STEP_PLAIN only.
void pt_spec_policy_init(pt_spec_policy *p, int mode, pt_spec_costs *costs);
// The same, with the model's prior (NULL: none): an adaptive call whose
// costs hold no measurement yet starts from a copy of it, every window
// marked prior (the context's own samples replace it: a sample within
// [est / PT_SPEC_SURPRISE, est * PT_SPEC_SURPRISE] confirms it, two on the
// same side outside replace the window); pt_spec_policy_done publishes
// the costs back.
void pt_spec_policy_init_prior(pt_spec_policy *p, int mode, pt_spec_costs *costs, pt_spec_prior *prior);

// Times every step from one pt_spec_next to the next (the caller's
// bookkeeping between decodes included: sampling, the MTP queue, a
// rejected draft's truncation, the token callback), less the draft's own
// time (pt_spec_note_draft), but never less than the seconds noted with
// the step. Without it a step costs what the caller notes: on the trained
// model on a Zen 4 (2026-12-03) verifications noted 1.55x a plain step's
// decode plus a draft of 0.33x, while always ran at 0.84-0.88 of off at
// acceptance 0.77 (~2.06 plain steps per verification), so the policy saw
// gain(0.9) > 0 and stayed live. (Simulations note made-up seconds and
// leave this off.)
void pt_spec_policy_wall(pt_spec_policy *p);

// MTP upkeep done before the first step (the prompt rows queued during
// prefill, engine/generate.c): seconds counted as this call's (a
// re-check's cost, shown by --stats), not as any step's.
void pt_spec_note_upkeep(pt_spec_policy *p, double secs);

// Called before prefill by a caller that reuses a kept prefix: refill is
// how many kept positions the call would re-prefill only because the MTP
// cache does not cover them (the prefix kept without speculation minus the
// one kept with it). Where that is over PT_SPEC_REFILL_MAX and speculation
// is hopeless on the measured costs (the case that made earlier calls
// dormant), the call is made dormant too; returns whether it was.
bool pt_spec_keep_dormant(pt_spec_policy *p, int refill);
// Ends a generation: remembers its acceptance as the next call's prior,
// and (adaptive, with a prior) publishes the costs to the model's prior.
void pt_spec_policy_done(pt_spec_policy *p);
// Acceptance estimate: decayed hits over decayed samples, with one prior
// sample so that it is defined before any evidence.
double pt_spec_acceptance(const pt_spec_policy *p);
// The kind of the next step (PT_STEP_*). Always PT_STEP_VERIFY for
// _ALWAYS, PT_STEP_PLAIN for _OFF.
int pt_spec_next(pt_spec_policy *p);
// Measurements of a finished step: its seconds, expert bytes read and
// expert uses. A verification's figures exclude its draft (pt_spec_note_draft).
void pt_spec_note_plain(pt_spec_policy *p, double dt, double bytes, double uses);
void pt_spec_note_verify(pt_spec_policy *p, double dt, double bytes, double uses);
// A draft's seconds and bytes (the MTP block for the step that follows a
// verification, or a probe's), counted with the verification cost.
void pt_spec_note_draft(pt_spec_policy *p, double dt, double bytes);
// Whether a draft was right; probe: it came from a probe, not a verification.
void pt_spec_note_outcome(pt_spec_policy *p, bool accepted, bool probe);
// The two speculation lines of --stats (nothing when no speculative
// generation ran); s is a petrel_stats, file a FILE* (engine/spec_stats.c).
struct petrel_stats;
void pt_spec_print_stats(const struct petrel_stats *s, void *file);

#endif
