/* batch_decision.c - one batch-size decision (see batch_decision.h). */
#include "batch_decision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_DECISION_MAX_POINTS 256

/* The job record's profile buckets as fit points (their means). */
static size_t batch_decision_points(const struct adaptdl_job_record *record,
                                    struct step_profile_point *points)
{
    size_t count = 0;
    for (size_t i = 0; i < record->profile_count && count < BATCH_DECISION_MAX_POINTS; i++) {
        const struct step_profile *profile = &record->profiles[i];
        if (profile->count == 0 || profile->step_time_sum <= 0)
            continue;
        double step = profile->step_time_sum / (double)profile->count;
        double sync = profile->sync_time_sum / (double)profile->count;
        if (sync >= step)
            sync = step * 0.99;
        points[count++] = (struct step_profile_point){
            .nodes = profile->nodes ? profile->nodes : 1,
            .replicas = profile->replicas ? profile->replicas : 1,
            .local_bsz = profile->local_bsz,
            .step_time = step,
            .sync_time = sync < 0 ? 0 : sync,
            .count = profile->count,
        };
    }
    return count;
}

static double batch_decision_pessimistic_speedup(const struct batch_decision_inputs *inputs,
                                                 const struct goodput_model *model,
                                                 const struct batch_decision *decision);
static enum batch_decision_reason
batch_decision_reason_for(const struct batch_decision_inputs *inputs,
                          const struct batch_decision *decision);

int batch_decide(const struct batch_decision_inputs *inputs, struct batch_decision *decision,
                 char *error, size_t error_size)
{
    memset(decision, 0, sizeof *decision);
    decision->goodput_current = NAN;
    decision->speedup = NAN;
    struct step_profile_point points[BATCH_DECISION_MAX_POINTS];
    size_t count = batch_decision_points(inputs->record, points);
    if (count == 0 || inputs->max_global_bsz == 0 || inputs->initial_global_bsz == 0)
        return 0;
    char fit_error[256];
    if (perf_params_fit(points, count, &decision->perf, fit_error, sizeof fit_error) != 0) {
        snprintf(error, error_size, "throughput model fit: %s", fit_error);
        return -1;
    }
    struct goodput_model model = {
        .perf = decision->perf,
        .grad = {.sqr = inputs->grad_sqr, .var = inputs->grad_var},
        .initial_global_bsz = inputs->initial_global_bsz,
    };
    struct goodput_config current = {.local_bsz = inputs->current_local_bsz};
    if (goodput_optimize_from(&model, inputs->nodes ? inputs->nodes : 1, inputs->replicas,
                              inputs->max_global_bsz, inputs->local_bsz_min,
                              inputs->local_bsz_max, false, &current, &decision->choice) != 0) {
        snprintf(error, error_size, "goodput optimization refused its inputs");
        return -1;
    }
    decision->valid = true;
    decision->goodput_current = decision->choice.goodput_current;
    decision->speedup = decision->choice.goodput / decision->goodput_current;
    decision->restart_cost = inputs->record->restart_cost_seconds > 0
                                 ? inputs->record->restart_cost_seconds
                                 : BATCH_DECISION_DEFAULT_RESTART_COST;
    decision->speedup_pessimistic = batch_decision_pessimistic_speedup(inputs, &model,
                                                                        decision);
    double speedup = decision->speedup_pessimistic;
    decision->payback_time = speedup > 1 ? decision->restart_cost * speedup / (speedup - 1)
                                         : INFINITY;
    decision->reason = batch_decision_reason_for(inputs, decision);
    decision->restart = decision->reason == BATCH_DECISION_RESTART;
    return 0;
}

/* Rule 2: the speedup with the statistics one standard error against the
 * change.  A larger batch pays when the noise scale var / sqr is large, so
 * it is judged with sqr + error and var - error; a smaller one the other
 * way round. */
static double batch_decision_pessimistic_speedup(const struct batch_decision_inputs *inputs,
                                                 const struct goodput_model *model,
                                                 const struct batch_decision *decision)
{
    uint64_t current_global = inputs->current_local_bsz * inputs->replicas;
    bool larger = decision->choice.global_bsz > current_global;
    double sqr_error = isfinite(inputs->grad_sqr_error) ? inputs->grad_sqr_error : 0;
    double var_error = isfinite(inputs->grad_var_error) ? inputs->grad_var_error : 0;
    struct goodput_model shifted = *model;
    shifted.grad.sqr = inputs->grad_sqr + (larger ? sqr_error : -sqr_error);
    shifted.grad.var = inputs->grad_var + (larger ? -var_error : var_error);
    if (shifted.grad.var < 0)
        shifted.grad.var = 0;
    if (!(shifted.grad.sqr > 0))
        shifted.grad.sqr = inputs->grad_sqr > 0 ? inputs->grad_sqr * 1e-3 : 1e-12;
    uint32_t nodes = inputs->nodes ? inputs->nodes : 1;
    double chosen = goodput_evaluate(&shifted, nodes, inputs->replicas,
                                     (double)decision->choice.local_bsz,
                                     decision->choice.accum_steps);
    double current = goodput_evaluate(&shifted, nodes, inputs->replicas,
                                      (double)inputs->current_local_bsz, 0);
    double speedup = chosen / current;
    return isfinite(speedup) ? speedup : NAN;
}

static enum batch_decision_reason
batch_decision_reason_for(const struct batch_decision_inputs *inputs,
                          const struct batch_decision *decision)
{
    if (decision->choice.local_bsz == inputs->current_local_bsz)
        return BATCH_DECISION_KEEP;
    if (!inputs->statistics_trusted)
        return BATCH_DECISION_UNTRUSTED;
    double speedup = decision->speedup_pessimistic;
    if (!isfinite(speedup) || speedup <= inputs->speedup_threshold)
        return BATCH_DECISION_BELOW_THRESHOLD;
    uint64_t current_global = inputs->current_local_bsz * inputs->replicas;
    uint64_t previous = inputs->previous_global_bsz;
    bool reversal = previous != 0 && previous != current_global &&
                    (decision->choice.global_bsz > current_global) != (current_global > previous);
    if (reversal && speedup <= inputs->speedup_threshold * inputs->speedup_threshold)
        return BATCH_DECISION_REVERSAL;
    if (decision->payback_time > inputs->payback_seconds)
        return BATCH_DECISION_NO_PAYBACK;
    return BATCH_DECISION_RESTART;
}

const char *batch_decision_reason_text(enum batch_decision_reason reason)
{
    static const char *const texts[] = {
        [BATCH_DECISION_NO_MODEL] = "no throughput model yet",
        [BATCH_DECISION_UNTRUSTED] = "gradient statistics not trustworthy yet",
        [BATCH_DECISION_KEEP] = "the current batch is the best",
        [BATCH_DECISION_BELOW_THRESHOLD] = "speedup within the noise or below ADAPTDL_SPEEDUP",
        [BATCH_DECISION_REVERSAL] = "going back needs the threshold squared",
        [BATCH_DECISION_NO_PAYBACK] = "the restart would not pay back in time",
        [BATCH_DECISION_RESTART] = "restart",
    };
    if ((unsigned)reason >= sizeof texts / sizeof texts[0])
        return "unknown";
    return texts[reason];
}

uint64_t batch_decision_in_place(const struct batch_decision *decision, uint64_t current_local,
                                 double speedup_threshold)
{
    if (!decision->valid)
        return current_local;
    if (current_local == 0)
        return decision->choice.local_bsz;
    /* changing in place costs no restart, but still rests on the statistics */
    if (decision->reason != BATCH_DECISION_UNTRUSTED &&
        decision->speedup_pessimistic > speedup_threshold)
        return decision->choice.local_bsz;
    return current_local;
}
