/* batch_plan.c - the batch size a run injects (see batch_plan.h).
 *
 * The initial global batch comes from ADAPTDL_BATCH_SIZE, else from the job
 * record (learned at the first run), else from the trainer's own value times
 * the replica count (and is then saved, so later runs with other replica
 * counts keep the same meaning).  The global batch is the job record's
 * decision when batch-size adaptation is on and a decision exists, else the
 * initial one; it is split over the replicas, rounded up, within the local
 * bounds (AdaptDL without autoscale_batch_size). */
#include "batch_plan.h"
#include "error_message.h"

#include <math.h>
#include <string.h>

#include "injection.h"
#include "learning_rate.h"

static uint64_t batch_plan_ceil_div(uint64_t numerator, uint64_t denominator)
{
    return numerator / denominator + (numerator % denominator != 0);
}

static double batch_plan_lr_factor(const struct adaptdl_config *config,
                                   const struct adaptdl_job_record *record, double scale,
                                   uint64_t initial)
{
    double gain = adascale_gain(record->grad_sqr, record->grad_var, initial, scale);
    return learning_rate_factor(config->lr_rule, scale, gain);
}

int batch_plan_decide(const struct adaptdl_config *config,
                      const struct adaptdl_job_record *record, double trainer_value,
                      bool trainer_present, struct batch_plan *plan, char *error,
                      size_t error_size)
{
    memset(plan, 0, sizeof *plan);
    plan->lr_factor = 1.0;
    if (config->bsz_arg.kind == INJECT_NONE)
        return 0;
    uint32_t replicas = config->num_replicas ? config->num_replicas : 1;
    uint64_t initial = config->batch_size;
    if (initial == 0)
        initial = record->initial_global_bsz;
    if (initial == 0 && trainer_present && trainer_value >= 1) {
        initial = (uint64_t)llround(trainer_value) * replicas;
        plan->initial_is_new = true;
    }
    if (initial == 0) {
        return error_message(
            error, error_size,
            "ADAPTDL_BSZ_ARG: no initial batch size: the trainer's command line has no "
            "%s value and ADAPTDL_BATCH_SIZE is unset; accepted: set ADAPTDL_BATCH_SIZE "
            "or pass the batch size to the trainer",
            config->bsz_arg.name ? config->bsz_arg.name : "batch-size");
    }
    uint64_t global = initial;
    if (config->max_batch_size > 0 && record->decided_global_bsz > 0) {
        global = record->decided_global_bsz;
        if (global > config->max_batch_size)
            global = config->max_batch_size;
        if (global < initial)
            global = initial;
    }
    uint64_t local = batch_plan_ceil_div(global, replicas);
    if (config->local_bsz_min > 0 && local < config->local_bsz_min)
        local = config->local_bsz_min;
    if (config->local_bsz_max > 0 && local > config->local_bsz_max)
        local = config->local_bsz_max;
    plan->active = true;
    plan->initial_global = initial;
    plan->global = local * replicas;
    plan->local = local;
    plan->scale = (double)plan->global / (double)initial;
    plan->lr_factor = batch_plan_lr_factor(config, record, plan->scale, initial);
    return 0;
}
