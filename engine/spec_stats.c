// engine/spec_stats.c — the speculation line of --stats (petrel_print_stats):
// what the policy decided and the estimates it decided on.
#include <stdio.h>

#include "engine/spec_policy.h"
#include "petrel.h"

void pt_spec_print_stats(const petrel_stats *s, void *file)
{
    FILE *f = file;
    if (!s->spec_used)
        return;
    const uint64_t drafts = s->spec_verify_steps + s->spec_probes;
    const uint64_t right = s->spec_accepted + s->spec_probe_hits;
    fprintf(f, "speculation (%s%s): %llu verifications (%llu accepted), %llu plain steps, %llu probes (%llu right), "
               "%llu switches, %llu exploration steps; drafts right %.1f%% of %llu\n",
            petrel_spec_mode_name(s->spec_mode),
            s->spec_mode == PETREL_SPEC_ADAPTIVE ? (s->spec_on ? ", now on" : ", now off") : "",
            (unsigned long long)s->spec_verify_steps, (unsigned long long)s->spec_accepted,
            (unsigned long long)s->spec_plain_steps, (unsigned long long)s->spec_probes,
            (unsigned long long)s->spec_probe_hits, (unsigned long long)s->spec_switches,
            (unsigned long long)s->spec_explore,
            drafts ? 100.0 * (double)right / (double)drafts : 0.0, (unsigned long long)drafts);
    fprintf(f, "speculation inputs: acceptance %.3f, plain step %.2f ms / %.2f MB read / %.1f experts, "
               "verification %.2f ms + draft %.2f ms / %.2f MB read / %.1f experts, expected gain %+.1f%%\n",
            s->spec_acceptance, s->spec_t_plain_s * 1e3, s->spec_bytes_plain / 1e6, s->spec_uses_plain,
            s->spec_t_verify_s * 1e3, s->spec_t_draft_s * 1e3, s->spec_bytes_verify / 1e6, s->spec_uses_verify,
            100.0 * s->spec_gain);
    if (s->spec_mode == PETREL_SPEC_ADAPTIVE)
        fprintf(f, "speculation dormancy: last call %s%s, %d dormant calls (%.2f s) since the last live one, "
                   "the next live one after %d; the last re-check cost %.2f ms over plain steps\n",
                s->spec_dormant ? "dormant" : "live", s->spec_from_prior ? " (costs from the model's prior)" : "",
                s->spec_dormant_calls, s->spec_dormant_s,
                s->spec_dormant_gap > 0 ? s->spec_dormant_gap : PT_SPEC_DORMANT_CALLS, s->spec_recheck_s * 1e3);
}
