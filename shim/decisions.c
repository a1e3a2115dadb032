/* decisions.c - rank 0's batch-size and replica-count decisions at
 * synchronized step boundaries (adaptshim(7) "BATCH-SIZE CONTROL",
 * adaptdl-wrap(1) "The replica count"), and the cooperative API's in-place
 * batch proposals.  The rules are the runtime's (batch_decision.c,
 * replica_choice.c, run_policy.c), and so are who decides, their inputs and
 * what an outcome leaves in the job record (batch_decision_job.c); this file
 * hands them the step monitor, the session and the job record,
 * logs the outcome and its events, and asks for the restart that every
 * rank then agrees on in the piggy-backed reduction. */
#include "decisions.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "batch_decision_job.h"
#include "decision_text.h"
#include "events.h"
#include "log.h"
#include "replica_choice.h"
#include "run_policy.h"
#include "shim.h"
#include "statistical_epoch.h"
#include "step_state.h"

static bool shim_restart_requested;
static double shim_last_decision;
static bool shim_warned_no_save;
static struct goodput_model shim_model;      /* from the latest decision */
static bool shim_model_valid;
static bool shim_first_decision_made;        /* on trusted statistics, or a moved batch measured */
static double shim_noise_scale_decided = NAN; /* the trusted noise scale at the latest decision */

/* This run's batch is one a decision moved the job to, and its steps were
 * measured (run_policy.h). */
static bool shim_moved_batch_measured(void)
{
    const struct adaptdl_job_record *record = shim_steps_job_record();
    return shim_session.config.num_restarts > 0 && record->previous_global_bsz != 0 &&
           shim_monitor.steps_after_warm_up >= STEP_POLICY_MOVED_STEPS;
}

/* Decisions: unless ADAPTDL_DECIDE_SECONDS is set (then a fixed period),
 * the first as soon as the statistics can be trusted (no waiting 30 s: the
 * earlier a better batch is known, the less the job trains at the initial
 * one), later ones every 30 s or as soon as the noise scale has moved
 * materially (run_policy.h). */
static bool shim_decision_due(double now)
{
    const struct adaptdl_config *config = &shim_session.config;
    struct step_policy_decision_clock clock = {
        .period_given = config->decide_seconds_given,
        .first_decision_made = shim_first_decision_made,
        .statistics_trusted = grad_noise_trustworthy(&shim_monitor.noise),
        .moved_batch_measured = shim_moved_batch_measured(),
        .now = now,
        .last_decision = shim_last_decision,
        .period = config->decide_seconds,
        .noise_scale = grad_noise_scale_simple(&shim_monitor.noise),
        .noise_scale_decided = shim_noise_scale_decided,
    };
    return step_policy_decision_due(&clock);
}

static void shim_decide_batch_size(double now, uint64_t declared_local_batch)
{
    const struct adaptdl_config *config = &shim_session.config;
    struct adaptdl_job_record *record = shim_steps_job_record();
    uint64_t last_local_batch = agreed_step_local_batch(&shim_monitor.last);
    /* a decision needs this run's batch measured: a restarted run whose
     * statistics are trusted at once would else decide on the profiles of
     * the previous batch only */
    bool measured = shim_monitor.steps_after_warm_up >= STEP_POLICY_MOVED_STEPS;
    if (!batch_decision_job_decides(config) || shim_restart_requested || !shim_monitor.has_last ||
        !measured || (declared_local_batch == 0 && last_local_batch == 0) ||
        !shim_decision_due(now))
        return;
    shim_last_decision = now;
    struct batch_decision_inputs inputs;
    batch_decision_inputs_for_restart(&inputs, config, record, shim_monitor.replicas,
                                      declared_local_batch, last_local_batch);
    batch_decision_inputs_add_statistics(&inputs, &shim_monitor.noise);
    if (inputs.statistics_trusted || shim_moved_batch_measured())
        shim_first_decision_made = true;
    shim_noise_scale_decided = inputs.statistics_trusted
                                   ? grad_noise_scale_simple(&shim_monitor.noise)
                                   : NAN;
    struct batch_decision decision;
    char error[512];
    if (batch_decide(&inputs, &decision, error, sizeof error) != 0) {
        log_warn("batch-size decision skipped: %s", error);
        return;
    }
    if (!decision.valid)
        return;
    bool restart = decision.restart;
    if (restart && config->save_glob == NULL) {
        if (!shim_warned_no_save)
            log_warn("a larger batch size would pay off, but without ADAPTDL_SAVE no "
                     "checkpoint can carry the job across a restart: none is requested");
        shim_warned_no_save = true;
        restart = false;
    }
    shim_events_decision(&inputs, &decision, restart);
    shim_events_write_hints(config->hints_file, &inputs, &decision,
                            record->max_replicas_profiled);
    shim_model = (struct goodput_model){
        .perf = decision.perf,
        .grad = {.sqr = inputs.grad_sqr, .var = inputs.grad_var},
        .initial_global_bsz = inputs.initial_global_bsz,
    };
    shim_model_valid = true;
    if (log_enabled(LOG_LEVEL_INFO)) {
        char line[768];
        batch_decision_describe(&inputs, &decision, restart, line, sizeof line);
        log_info("%s", line);
    }
    batch_decision_record_outcome(record, &inputs, &decision, restart);
    if (restart)
        shim_restart_requested = true;
}

/* --- the replica count (adaptdl-wrap(1) "The replica count") ---------------
 * Kept apart from the batch-size decision above: after each decision that
 * fitted a model, rank 0 asks whether another replica count within
 * ADAPTDL_REPLICAS_RANGE (set by adaptdl-wrap -n MIN:MAX) would pay a
 * restart, by the rule the launcher applies to the hints file
 * (replica_choice.h), so that the launcher relaunches with the count that
 * made the shim ask. */
static double shim_replicas_considered_at = -1;
static bool shim_restart_for_replicas;

/* Why an agreed restart stops the process: rank 0 knows which decision
 * asked; the other ranks only saw the flag in the reduction. */
const char *shim_decisions_restart_reason(void)
{
    if (shim_restart_for_replicas)
        return "restart for another replica count, after the checkpoint just committed";
    if (shim_session.config.replica_rank == 0)
        return "restart for a new batch size, after the checkpoint just committed";
    return "restart requested by rank 0 (a new batch size or replica count), after the "
           "checkpoint just committed";
}

static void shim_consider_replicas(void)
{
    const struct adaptdl_config *config = &shim_session.config;
    struct adaptdl_job_record *record = shim_steps_job_record();
    if (config->replicas_max == 0 || config->replicas_min == config->replicas_max ||
        config->replica_rank != 0 || !shim_model_valid || shim_restart_requested ||
        shim_last_decision == shim_replicas_considered_at)
        return;
    shim_replicas_considered_at = shim_last_decision;
    uint32_t replicas = shim_monitor.replicas ? shim_monitor.replicas : 1;
    struct replica_goodputs table;
    replica_goodputs_predict(&shim_model, config->num_nodes,
                             record->max_replicas_profiled, replicas,
                             config->max_batch_size, config->local_bsz_min,
                             config->local_bsz_max, &table);
    struct replica_choice choice;
    if (replica_choice_pick(&table, config->replicas_min, config->replicas_max, replicas,
                            config->speedup_threshold, &choice) != 0)
        return;
    double cost = restart_cost_seconds(record);
    bool restart = choice.replicas != replicas &&
                   replica_choice_restart_pays(&choice, cost, config->payback_seconds);
    if (restart && config->save_glob == NULL) {
        static bool warned;
        if (!warned)
            log_warn("%u replica(s) would pay off, but without ADAPTDL_SAVE no checkpoint can "
                     "carry the job across a restart: none is requested", choice.replicas);
        warned = true;
        restart = false;
    }
    shim_events_replica_decision(&choice, replicas, cost, restart);
    char description[320];
    log_debug("replica decision in %u..%u: %s, restart cost %.1f s: %s", config->replicas_min,
              config->replicas_max, replica_choice_describe(&choice, description,
                                                            sizeof description),
              cost, restart ? "restart requested" : "keep");
    if (!restart)
        return;
    /* the relaunch injects the best batch for the new count */
    struct goodput_choice batch;
    if (goodput_optimize(&shim_model, config->num_nodes ? config->num_nodes : 1,
                         choice.replicas, config->max_batch_size, config->local_bsz_min,
                         config->local_bsz_max, false, &batch) == 0) {
        record->decided_global_bsz = batch.global_bsz;
        record->decided_local_bsz = batch.local_bsz;
        record->decided_replicas = choice.replicas;
    }
    log_info("%u replica(s) would pay off (speedup %.3f): restart requested, after the "
             "trainer's next checkpoint", choice.replicas, choice.speedup);
    shim_restart_for_replicas = true;
    shim_restart_requested = true;
}

void shim_decisions_at_boundary(double now, uint64_t declared_local_batch)
{
    shim_decide_batch_size(now, declared_local_batch);
    shim_consider_replicas();
}

bool shim_decisions_restart_requested(void)
{
    return shim_restart_requested;
}

const struct goodput_model *shim_decisions_model(void)
{
    return shim_model_valid ? &shim_model : NULL;
}

uint64_t shim_decisions_propose_local_batch(uint64_t initial_global, uint64_t max_global,
                                        uint32_t replicas, uint64_t current_local)
{
    const struct adaptdl_config *config = &shim_session.config;
    struct adaptdl_job_record *record = shim_steps_job_record();
    if (config->replica_rank != 0)
        return 0;   /* rank 0's proposal is the one agreed on */
    struct batch_decision_inputs inputs;
    batch_decision_inputs_in_place(&inputs, config, record, replicas, current_local,
                                   initial_global, max_global);
    batch_decision_inputs_add_statistics(&inputs, &shim_monitor.noise);
    struct batch_decision decision;
    char error[512];
    if (batch_decide(&inputs, &decision, error, sizeof error) != 0) {
        log_warn("cooperative loop: batch-size decision skipped: %s", error);
        return current_local;
    }
    uint64_t chosen = batch_decision_in_place(&decision, current_local,
                                              config->speedup_threshold);
    log_debug("cooperative loop: local batch %llu -> %llu (%s, speedup %.3f)",
              (unsigned long long)current_local, (unsigned long long)chosen,
              decision.valid ? "model fitted" : "no model yet", decision.speedup);
    return chosen;
}

double shim_decisions_efficiency(uint64_t initial_global, uint64_t global)
{
    return statistical_epoch_efficiency(grad_noise_sqr(&shim_monitor.noise),
                                        grad_noise_var(&shim_monitor.noise),
                                        (double)initial_global, (double)global);
}

double shim_decisions_gain(uint64_t initial_global, uint64_t global)
{
    return statistical_epoch_gain(grad_noise_sqr(&shim_monitor.noise),
                                  grad_noise_var(&shim_monitor.noise), (double)initial_global,
                                  (double)global);
}
