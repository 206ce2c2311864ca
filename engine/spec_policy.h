// engine/spec_policy.h — when does speculative verification pay?
//
// A verification decodes [token, draft] as one batch and then drafts again
// with the MTP block: it yields 1 + (draft accepted) tokens for the price of
// a two-token step plus a draft, against 1 token for a plain one-token step.
// On a memory- or I/O-bound MoE the two-token step reads nearly twice the
// experts (the union of both tokens' choices), so speculation pays only when
// acceptance is high enough. The adaptive policy measures all of it online:
//   acceptance a     decayed counts of drafts accepted / drafts checked,
//                    from verifications and from cheap probes (a draft made
//                    during plain decoding and compared with the token that
//                    plain decoding produces next; nothing verified);
//   t_plain          seconds per plain step, and its expert bytes / uses;
//   t_verify         seconds per two-token step, and its expert bytes / uses;
//   t_draft          seconds per draft (MTP block on one or two rows).
// Expected gain of speculating, in tokens per second relative to plain:
//   gain = (1 + a) * t_plain / (t_verify + t_draft) - 1
// It speculates while gain > 0 (with a small hysteresis), keeps probing
// acceptance at a growing interval while off, refreshes t_plain now and then
// while on, and t_verify while off when a cheaper verification would flip
// the decision. None of this can change a token: the policy only picks
// which kind of step produces the next one (engine/generate.c).
#ifndef PETREL_ENGINE_SPEC_POLICY_H
#define PETREL_ENGINE_SPEC_POLICY_H

#include <stdbool.h>
#include <stdint.h>

// The kind of step generation takes next.
enum {
    PT_STEP_PLAIN = 0,       // decode one token
    PT_STEP_PLAIN_PROBE = 1, // draft first (acceptance sample), then decode one token
    PT_STEP_VERIFY = 2,      // draft, decode [token, draft], keep the draft if it is right
};

// Tuning constants (see the contract above; spec_policy.c says why).
#define PT_SPEC_WINDOW 16.0        // acceptance samples in the decayed window
#define PT_SPEC_PRIOR_VERIFY 1.5   // t_verify / t_plain assumed before one is measured
#define PT_SPEC_HYST 0.02          // switch on above +2%, off below -2%
#define PT_SPEC_PROBE_MAX 32       // longest gap between acceptance probes while off
#define PT_SPEC_PROBE_BUDGET 0.02  // share of the plain steps' time probes may take
#define PT_SPEC_FAR -0.15          // a gain below this backs the probes off
#define PT_SPEC_REFRESH_PLAIN 32   // verifications between t_plain refreshes while on
#define PT_SPEC_REFRESH_VERIFY 128 // plain steps between t_verify refreshes while off

typedef struct pt_spec_policy {
    int mode;                  // PETREL_SPEC_ADAPTIVE / _ALWAYS / _OFF
    bool on;                   // current regime (adaptive): verifying drafts
    // estimates
    double acc_hit, acc_n;     // decayed accepted / checked drafts
    double t_plain, t_verify, t_draft; // EWMA seconds per step of each kind (0 = no sample yet)
    double b_plain, b_verify, b_draft; // EWMA expert bytes read per plain step / verification / draft
    double u_plain, u_verify;  // EWMA expert uses (distinct experts per batch) per step
    double gain;               // gain at the last decision
    // schedule
    int since_probe;           // plain steps since the last acceptance probe
    int probe_gap;             // plain steps between probes (doubles while off, up to PT_SPEC_PROBE_MAX)
    int since_plain;           // verifications since the last plain step
    int since_verify;          // plain steps since the last verification
    // counts
    uint64_t n_plain, n_verify, n_accepted, n_probe, n_probe_hit, n_switch;
} pt_spec_policy;

// Expected relative change of tokens per second when verifying drafts
// instead of plain steps: (1 + acc) * t_plain / (t_verify + t_draft) - 1.
// Pure; t_plain, t_verify > 0, acc in [0, 1].
double pt_spec_gain(double acc, double t_plain, double t_verify, double t_draft);

void pt_spec_policy_init(pt_spec_policy *p, int mode);
// Acceptance estimate: decayed hits over decayed samples, with one prior
// sample at 0.5 so that it is defined before any evidence.
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
