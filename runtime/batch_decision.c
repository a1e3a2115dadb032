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
    double speedup = decision->speedup;
    decision->payback_time = speedup > 1 ? decision->restart_cost * speedup / (speedup - 1)
                                         : INFINITY;
    decision->restart = isfinite(speedup) && speedup > inputs->speedup_threshold &&
                        decision->payback_time <= inputs->payback_seconds &&
                        decision->choice.local_bsz != inputs->current_local_bsz;
    return 0;
}

uint64_t batch_decision_in_place(const struct batch_decision *decision, uint64_t current_local,
                                 double speedup_threshold)
{
    if (!decision->valid)
        return current_local;
    if (current_local == 0 || decision->speedup > speedup_threshold)
        return decision->choice.local_bsz;
    return current_local;
}
