/* batch_decision_job.c - the inputs and the recorded outcome of a job's
 * batch-size decisions (see batch_decision_job.h). */
#include "batch_decision_job.h"

bool batch_decision_job_decides(const struct adaptdl_config *config)
{
    return config->replica_rank == 0 && config->max_batch_size != 0 &&
           config->bsz_arg.kind != INJECT_NONE;
}

void batch_decision_inputs_in_place(struct batch_decision_inputs *inputs,
                                    const struct adaptdl_config *config,
                                    const struct adaptdl_job_record *record,
                                    uint32_t replicas, uint64_t current_local_bsz,
                                    uint64_t initial_global_bsz, uint64_t max_global_bsz)
{
    *inputs = (struct batch_decision_inputs){
        .record = record,
        .nodes = config->num_nodes,
        .replicas = replicas,
        .current_local_bsz = current_local_bsz,
        .initial_global_bsz = initial_global_bsz,
        .max_global_bsz = max_global_bsz,
        .speedup_threshold = config->speedup_threshold,
        .payback_seconds = config->payback_seconds,
    };
}

/* A restart decision is an in-place one with the environment's batches,
 * bounded by ADAPTDL_LOCAL_BSZ_BOUNDS, and wary of reversals (rule 3). */
void batch_decision_inputs_for_restart(struct batch_decision_inputs *inputs,
                                       const struct adaptdl_config *config,
                                       const struct adaptdl_job_record *record,
                                       uint32_t replicas, uint64_t declared_local_bsz,
                                       uint64_t last_step_local_records)
{
    uint64_t current = declared_local_bsz ? declared_local_bsz : last_step_local_records;
    uint64_t initial = record->initial_global_bsz ? record->initial_global_bsz
                                                  : config->batch_size;
    batch_decision_inputs_in_place(inputs, config, record, replicas, current, initial,
                                   config->max_batch_size);
    inputs->local_bsz_min = config->local_bsz_min;
    inputs->local_bsz_max = config->local_bsz_max;
    inputs->previous_global_bsz = record->previous_global_bsz;
}

void batch_decision_inputs_add_statistics(struct batch_decision_inputs *inputs,
                                          const struct grad_noise_state *noise)
{
    inputs->grad_sqr = grad_noise_sqr(noise);
    inputs->grad_var = grad_noise_var(noise);
    inputs->statistics_trusted = grad_noise_trustworthy(noise);
    grad_noise_standard_errors(noise, &inputs->grad_sqr_error, &inputs->grad_var_error);
}

void batch_decision_record_outcome(struct adaptdl_job_record *record,
                                   const struct batch_decision_inputs *inputs,
                                   const struct batch_decision *decision, bool restart)
{
    record->perf_params_valid = true;
    perf_params_to_array(&decision->perf, record->perf_params);
    if (!restart)
        return;
    record->previous_global_bsz = inputs->current_local_bsz * inputs->replicas;
    record->decided_global_bsz = decision->choice.global_bsz;
    record->decided_local_bsz = decision->choice.local_bsz;
    record->decided_replicas = inputs->replicas;
}
