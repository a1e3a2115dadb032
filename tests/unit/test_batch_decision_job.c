/* test_batch_decision_job.c - the policy around a job's batch-size
 * decisions (runtime/batch_decision_job.h): who decides, which batch a
 * decision is taken against, where the initial batch comes from, what an
 * in-place proposal leaves out, and what an outcome writes to the job
 * record for the next run. */
#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

#include "batch_decision_job.h"

static struct adaptdl_config deciding_config(void)
{
    return (struct adaptdl_config){
        .replica_rank = 0,
        .num_nodes = 2,
        .batch_size = 64,
        .max_batch_size = 1024,
        .local_bsz_min = 4,
        .local_bsz_max = 256,
        .bsz_arg = {.kind = INJECT_ARGV},
        .speedup_threshold = 1.05,
        .payback_seconds = 600,
    };
}

/* A deciding job's configuration and a fresh job record. */
struct job {
    struct adaptdl_config config;
    struct adaptdl_job_record record;
    struct batch_decision_inputs inputs;
};

static void job_init(struct job *job)
{
    job->config = deciding_config();
    job_record_init(&job->record);
    job->inputs = (struct batch_decision_inputs){0};
}

Test(batch_decision_job, rank_zero_decides_when_a_batch_can_be_injected_and_bounded)
{
    struct adaptdl_config config = deciding_config();
    cr_expect(batch_decision_job_decides(&config));
    config.bsz_arg.kind = INJECT_ENV;
    cr_expect(batch_decision_job_decides(&config), "ADAPTDL_BSZ_ENV injects too");

    struct adaptdl_config other_rank = deciding_config();
    other_rank.replica_rank = 1;
    cr_expect_not(batch_decision_job_decides(&other_rank), "rank 0 decides for all");

    struct adaptdl_config no_maximum = deciding_config();
    no_maximum.max_batch_size = 0;
    cr_expect_not(batch_decision_job_decides(&no_maximum), "no ADAPTDL_MAX_BATCH_SIZE");

    struct adaptdl_config no_injection = deciding_config();
    no_injection.bsz_arg.kind = INJECT_NONE;
    cr_expect_not(batch_decision_job_decides(&no_injection),
                  "a batch that cannot reach the trainer is not worth deciding");
}

Test(batch_decision_job, a_restart_decision_is_against_the_declared_batch)
{
    struct job job;
    job_init(&job);
    batch_decision_inputs_for_restart(&job.inputs, &job.config, &job.record, 4, 32, 7);
    cr_expect_eq(job.inputs.current_local_bsz, 32, "not the short last batch of 7");
    batch_decision_inputs_for_restart(&job.inputs, &job.config, &job.record, 4, 0, 7);
    cr_expect_eq(job.inputs.current_local_bsz, 7, "no declared batch: the step's records");
}

Test(batch_decision_job, a_restart_decision_takes_the_limits_of_the_environment)
{
    struct job job;
    job_init(&job);
    job.record.previous_global_bsz = 128;
    batch_decision_inputs_for_restart(&job.inputs, &job.config, &job.record, 4, 32, 32);
    cr_expect_eq(job.inputs.record, &job.record);
    cr_expect_eq(job.inputs.nodes, 2);
    cr_expect_eq(job.inputs.replicas, 4);
    cr_expect_eq(job.inputs.max_global_bsz, 1024);
    cr_expect_eq(job.inputs.local_bsz_min, 4);
    cr_expect_eq(job.inputs.local_bsz_max, 256);
    cr_expect_eq(job.inputs.speedup_threshold, 1.05);
    cr_expect_eq(job.inputs.payback_seconds, 600);
    cr_expect_eq(job.inputs.previous_global_bsz, 128, "rule 3 needs the batch before");
    cr_expect_not(job.inputs.statistics_trusted, "no statistics until they are added");
}

Test(batch_decision_job, the_initial_batch_is_the_first_runs_not_this_runs)
{
    struct job job;
    job_init(&job);
    batch_decision_inputs_for_restart(&job.inputs, &job.config, &job.record, 1, 64, 64);
    cr_expect_eq(job.inputs.initial_global_bsz, 64, "a new job: ADAPTDL_BATCH_SIZE");
    job.record.initial_global_bsz = 16;
    job.config.batch_size = 256;    /* a relaunch injected a larger batch */
    batch_decision_inputs_for_restart(&job.inputs, &job.config, &job.record, 1, 256, 256);
    cr_expect_eq(job.inputs.initial_global_bsz, 16, "the record keeps the first run's");
}

Test(batch_decision_job, an_in_place_proposal_has_the_loops_limits_and_no_reversal_rule)
{
    struct job job;
    job_init(&job);
    job.record.initial_global_bsz = 999;
    job.record.previous_global_bsz = 128;
    batch_decision_inputs_in_place(&job.inputs, &job.config, &job.record, 2, 24, 48, 480);
    cr_expect_eq(job.inputs.current_local_bsz, 24);
    cr_expect_eq(job.inputs.initial_global_bsz, 48, "the loop's, not the record's");
    cr_expect_eq(job.inputs.max_global_bsz, 480, "the loop's, not ADAPTDL_MAX_BATCH_SIZE");
    cr_expect_eq(job.inputs.local_bsz_min, 0);
    cr_expect_eq(job.inputs.local_bsz_max, 0);
    cr_expect_eq(job.inputs.previous_global_bsz, 0);
    cr_expect_eq(job.inputs.replicas, 2);
    cr_expect_eq(job.inputs.nodes, 2);
    cr_expect_eq(job.inputs.speedup_threshold, 1.05);
}

Test(batch_decision_job, statistics_come_with_their_trust_and_errors)
{
    struct grad_noise_state noise;
    grad_noise_init(&noise, 8);
    struct batch_decision_inputs inputs = {0};
    batch_decision_inputs_add_statistics(&inputs, &noise);
    cr_expect(isnan(inputs.grad_sqr), "no observation yet");
    cr_expect_not(inputs.statistics_trusted);
    for (int step = 0; step < 200; step++)
        cr_assert(grad_noise_update_replicas(&noise, 3.0 + (step % 2) * 0.01, 2.0, 2, 8, 16));
    batch_decision_inputs_add_statistics(&inputs, &noise);
    cr_expect_eq(inputs.grad_sqr, grad_noise_sqr(&noise));
    cr_expect_eq(inputs.grad_var, grad_noise_var(&noise));
    cr_expect_eq(inputs.statistics_trusted, grad_noise_trustworthy(&noise));
    cr_expect(inputs.statistics_trusted, "200 steady observations");
    double sqr_error, var_error;
    grad_noise_standard_errors(&noise, &sqr_error, &var_error);
    cr_expect_eq(inputs.grad_sqr_error, sqr_error);
    cr_expect_eq(inputs.grad_var_error, var_error);
}

/* Records an outcome of a decision for 16 records on each of 2 replicas
 * that chose 32 on each. */
static void record_decided_outcome(struct adaptdl_job_record *record, bool restart)
{
    job_record_init(record);
    struct batch_decision_inputs inputs = {.replicas = 2, .current_local_bsz = 16};
    struct batch_decision decision = {.valid = true};
    decision.perf = (struct perf_params){.alpha_c = 0.01, .beta_c = 0.001, .gamma = 1.5};
    decision.choice.global_bsz = 64;
    decision.choice.local_bsz = 32;
    batch_decision_record_outcome(record, &inputs, &decision, restart);
}

Test(batch_decision_job, every_outcome_records_the_fitted_model)
{
    struct adaptdl_job_record record;
    record_decided_outcome(&record, false);
    cr_expect(record.perf_params_valid);
    double expected[PERF_PARAMS_COUNT];
    perf_params_to_array(&(struct perf_params){.alpha_c = 0.01, .beta_c = 0.001, .gamma = 1.5},
                         expected);
    cr_expect_eq(memcmp(record.perf_params, expected, sizeof expected), 0);
    cr_expect_eq(record.decided_global_bsz, 0, "no restart: nothing to inject");
    cr_expect_eq(record.decided_local_bsz, 0);
    cr_expect_eq(record.decided_replicas, 0);
    cr_expect_eq(record.previous_global_bsz, 0);
}

Test(batch_decision_job, a_restart_records_what_to_inject_and_what_it_leaves)
{
    struct adaptdl_job_record record;
    record_decided_outcome(&record, true);
    cr_expect(record.perf_params_valid);
    cr_expect_eq(record.decided_global_bsz, 64);
    cr_expect_eq(record.decided_local_bsz, 32);
    cr_expect_eq(record.decided_replicas, 2);
    cr_expect_eq(record.previous_global_bsz, 32, "16 on each of 2 replicas");
}
