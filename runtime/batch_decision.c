/* batch_decision.c - one batch-size decision (see batch_decision.h). */
#include "batch_decision.h"
#include "error_message.h"
#include "run_policy.h"

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
static void batch_decision_consider_exploring(const struct batch_decision_inputs *inputs,
                                              const struct goodput_model *model,
                                              const struct step_profile_point *points,
                                              size_t count, struct batch_decision *decision);

static void batch_decision_consider_retreating(const struct batch_decision_inputs *inputs,
                                               const struct goodput_model *model,
                                               const struct step_profile_point *points,
                                               size_t count, struct batch_decision *decision);

/* Rule 5: the largest local batch a decision may choose: the bound of
 * ADAPTDL_LOCAL_BSZ_BOUNDS, and BATCH_DECISION_EXTRAPOLATION times the
 * largest measured local batch (never below the current one). */
static uint64_t batch_decision_extrapolation_limit(const struct batch_decision_inputs *inputs,
                                                   const struct step_profile_point *points,
                                                   size_t count)
{
    uint64_t largest = inputs->current_local_bsz;
    for (size_t i = 0; i < count; i++)
        if (points[i].local_bsz > largest)
            largest = points[i].local_bsz;
    uint64_t limit = largest * BATCH_DECISION_EXTRAPOLATION;
    if (inputs->local_bsz_max != 0 && inputs->local_bsz_max < limit)
        limit = inputs->local_bsz_max;
    return limit;
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
        return error_message(error, error_size, "throughput model fit: %s", fit_error);
    }
    struct goodput_model model = {
        .perf = decision->perf,
        .grad = {.sqr = inputs->grad_sqr, .var = inputs->grad_var},
        .initial_global_bsz = inputs->initial_global_bsz,
    };
    struct goodput_config current = {.local_bsz = inputs->current_local_bsz};
    decision->local_bsz_limit = batch_decision_extrapolation_limit(inputs, points, count);
    if (goodput_optimize_from(&model, inputs->nodes ? inputs->nodes : 1, inputs->replicas,
                              inputs->max_global_bsz, inputs->local_bsz_min,
                              decision->local_bsz_limit,
                              false, &current, &decision->choice) != 0) {
        return error_message(error, error_size, "goodput optimization refused its inputs");
    }
    decision->valid = true;
    decision->model_choice = decision->choice;
    decision->goodput_current = decision->choice.goodput_current;
    decision->speedup = decision->choice.goodput / decision->goodput_current;
    decision->restart_cost = restart_cost_seconds(inputs->record);
    decision->speedup_pessimistic = batch_decision_pessimistic_speedup(inputs, &model,
                                                                        decision);
    decision->payback_time = restart_payback_seconds(decision->restart_cost,
                                                     decision->speedup_pessimistic);
    decision->reason = batch_decision_reason_for(inputs, decision);
    /* with one size measured, a move up measures at least twice the batch */
    if (decision->reason != BATCH_DECISION_RESTART ||
        decision->choice.local_bsz < 2 * inputs->current_local_bsz)
        batch_decision_consider_exploring(inputs, &model, points, count, decision);
    if (decision->reason != BATCH_DECISION_RESTART && decision->reason != BATCH_DECISION_EXPLORE)
        batch_decision_consider_retreating(inputs, &model, points, count, decision);
    decision->restart = decision->reason == BATCH_DECISION_RESTART ||
                        decision->reason == BATCH_DECISION_EXPLORE ||
                        decision->reason == BATCH_DECISION_RETREAT;
    return 0;
}

/* The model with the gradient statistics one standard error against a
 * change toward a larger (or smaller) batch: for a larger one, a smaller
 * noise scale (sqr + error, var - error). */
static struct goodput_model batch_decision_against_change(const struct batch_decision_inputs *inputs,
                                                          const struct goodput_model *model,
                                                          bool larger)
{
    double sqr_error = isfinite(inputs->grad_sqr_error) ? inputs->grad_sqr_error : 0;
    double var_error = isfinite(inputs->grad_var_error) ? inputs->grad_var_error : 0;
    struct goodput_model shifted = *model;
    shifted.grad.sqr = inputs->grad_sqr + (larger ? sqr_error : -sqr_error);
    shifted.grad.var = inputs->grad_var + (larger ? -var_error : var_error);
    if (shifted.grad.var < 0)
        shifted.grad.var = 0;
    if (!(shifted.grad.sqr > 0))
        shifted.grad.sqr = inputs->grad_sqr > 0 ? inputs->grad_sqr * 1e-3 : 1e-12;
    return shifted;
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
    struct goodput_model shifted = batch_decision_against_change(inputs, model, larger);
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

/* Whether every profile point has the same local batch (rule 4). */
static bool batch_decision_one_local_size(const struct step_profile_point *points, size_t count)
{
    for (size_t i = 1; i < count; i++)
        if (points[i].local_bsz != points[0].local_bsz)
            return false;
    return true;
}

/* Rule 4's candidate: twice the current local batch, or the model's choice
 * when that is larger, within the bounds and the maximum; 0 when that is
 * no larger than the current batch. */
static uint64_t batch_decision_exploration_local(const struct batch_decision_inputs *inputs,
                                                 const struct batch_decision *decision)
{
    uint64_t candidate = 2 * inputs->current_local_bsz;
    if (decision->choice.local_bsz > candidate && decision->choice.accum_steps == 0)
        candidate = decision->choice.local_bsz;
    uint64_t largest = inputs->max_global_bsz / inputs->replicas;
    if (inputs->local_bsz_max != 0 && inputs->local_bsz_max < largest)
        largest = inputs->local_bsz_max;
    if (BATCH_DECISION_EXTRAPOLATION * inputs->current_local_bsz < largest)
        largest = BATCH_DECISION_EXTRAPOLATION * inputs->current_local_bsz;
    if (candidate > largest)
        candidate = largest;
    return candidate > inputs->current_local_bsz ? candidate : 0;
}

static void batch_decision_consider_exploring(const struct batch_decision_inputs *inputs,
                                              const struct goodput_model *model,
                                              const struct step_profile_point *points,
                                              size_t count, struct batch_decision *decision)
{
    if (!inputs->statistics_trusted || inputs->replicas == 0 ||
        !batch_decision_one_local_size(points, count))
        return;
    uint64_t local = batch_decision_exploration_local(inputs, decision);
    if (local == 0)
        return;
    /* only where the model, prior included, predicts no loss beyond the
     * noise band of ADAPTDL_SPEEDUP */
    uint32_t nodes = inputs->nodes ? inputs->nodes : 1;
    double model_speedup = goodput_evaluate(model, nodes, inputs->replicas, (double)local, 0) /
                           decision->goodput_current;
    if (!(model_speedup * inputs->speedup_threshold >= 1.0))
        return;
    /* the throughput bound: a step at the larger batch takes no longer */
    struct goodput_model shifted = batch_decision_against_change(inputs, model, true);
    double current_global = (double)(inputs->current_local_bsz * inputs->replicas);
    double candidate_global = (double)(local * inputs->replicas);
    double bound = candidate_global * goodput_efficiency(&shifted, candidate_global) /
                   (current_global * goodput_efficiency(&shifted, current_global));
    double threshold = inputs->speedup_threshold;
    if (!isfinite(bound) || bound <= threshold * threshold)
        return;
    double payback = restart_payback_seconds(decision->restart_cost, bound);
    if (payback > inputs->payback_seconds)
        return;
    decision->choice.local_bsz = local;
    decision->choice.accum_steps = 0;
    decision->choice.global_bsz = local * inputs->replicas;
    decision->choice.goodput = goodput_evaluate(model, nodes, inputs->replicas, (double)local, 0);
    decision->choice.throughput = goodput_throughput(model, nodes, inputs->replicas,
                                                     (double)local, 0);
    decision->choice.efficiency = goodput_efficiency(model, candidate_global);
    decision->speedup = decision->choice.goodput / decision->goodput_current;
    decision->speedup_pessimistic = bound;
    decision->payback_time = payback;
    decision->reason = BATCH_DECISION_EXPLORE;
}

/* Measured samples per second of (replicas, local) in the profiles: the
 * point's, or 0 when that configuration was not measured. */
static double batch_decision_measured_throughput(const struct step_profile_point *points,
                                                 size_t count, uint32_t replicas,
                                                 uint64_t local)
{
    for (size_t i = 0; i < count; i++)
        if (points[i].replicas == replicas && points[i].local_bsz == local &&
            points[i].accum_steps == 0 && points[i].step_time > 0)
            return (double)(replicas * local) / points[i].step_time;
    return 0;
}

static void batch_decision_consider_retreating(const struct batch_decision_inputs *inputs,
                                               const struct goodput_model *model,
                                               const struct step_profile_point *points,
                                               size_t count, struct batch_decision *decision)
{
    double current = batch_decision_measured_throughput(points, count, inputs->replicas,
                                                        inputs->current_local_bsz);
    if (!(current > 0))
        return;
    uint64_t best_local = 0;
    double best = current;
    for (size_t i = 0; i < count; i++) {
        uint64_t local = points[i].local_bsz;
        if (points[i].replicas != inputs->replicas || local >= inputs->current_local_bsz ||
            local * inputs->replicas < inputs->initial_global_bsz)
            continue;
        double throughput = batch_decision_measured_throughput(points, count,
                                                               inputs->replicas, local);
        if (throughput > best) {
            best = throughput;
            best_local = local;
        }
    }
    double speedup = best / current;   /* a lower bound of the goodput's */
    if (best_local == 0 || !(speedup > inputs->speedup_threshold))
        return;
    double payback = restart_payback_seconds(decision->restart_cost, speedup);
    if (payback > inputs->payback_seconds)
        return;
    uint32_t nodes = inputs->nodes ? inputs->nodes : 1;
    double global = (double)(best_local * inputs->replicas);
    decision->choice.local_bsz = best_local;
    decision->choice.accum_steps = 0;
    decision->choice.global_bsz = best_local * inputs->replicas;
    decision->choice.goodput = goodput_evaluate(model, nodes, inputs->replicas,
                                                (double)best_local, 0);
    decision->choice.throughput = best;
    decision->choice.efficiency = goodput_efficiency(model, global);
    decision->speedup = speedup;
    decision->speedup_pessimistic = speedup;
    decision->payback_time = payback;
    decision->reason = BATCH_DECISION_RETREAT;
}

const char *batch_decision_reason_text(enum batch_decision_reason reason)
{
    static const char *const texts[] = {
#define BATCH_DECISION_REASON(suffix, text) [BATCH_DECISION_##suffix] = text,
#include "batch_decision_reasons.def"
#undef BATCH_DECISION_REASON
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
