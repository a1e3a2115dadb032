/* test_batch_decision.c - whether a batch-size decision restarts
 * (runtime/batch_decision.h): AdaptDL's choice, then our four rules.
 *
 * Profiles of a job whose step costs 20 ms plus 1 ms per record on two
 * replicas, so that larger batches pay when the noise scale is large: with
 * trusted statistics the job restarts for the choice; with untrusted or
 * negative-grad_sqr statistics it never does (and a negative grad_sqr does
 * not send it to the largest batch); a speedup inside the statistics' error
 * does not restart; going back toward the previous batch needs the
 * threshold squared; and a run of decisions on noisy statistics around a
 * fixed truth never reverses direction. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch_decision.h"
#include "grad_noise.h"
#include "unit_helpers.h"

static struct step_profile profiles[4];

/* How a job record's profiles are made: `count` local batch sizes on 2
 * replicas, each measured `steps` times with a step of `constant` +
 * `per_record` seconds per local record, of which `sync` seconds synchronize. */
struct profiled_sizes {
    const uint64_t *locals;
    size_t count;
    uint64_t steps;
    double constant, per_record, sync;
};

/* A job record (initial global batch 16, the restart cost given) with the
 * profiles `sizes` describes, kept in `storage`. */
static void job_record_with_sizes(struct adaptdl_job_record *record, struct step_profile *storage,
                                  const struct profiled_sizes *sizes, double restart_cost)
{
    job_record_init(record);
    for (size_t i = 0; i < sizes->count; i++) {
        double step = sizes->constant + sizes->per_record * (double)sizes->locals[i];
        storage[i] = (struct step_profile){
            .nodes = 1, .replicas = 2, .local_bsz = sizes->locals[i], .count = sizes->steps,
            .step_time_sum = (double)sizes->steps * step,
            .sync_time_sum = (double)sizes->steps * sizes->sync};
    }
    record->profiles = storage;
    record->profile_count = sizes->count;
    record->initial_global_bsz = 16;
    record->restart_cost_seconds = restart_cost;
}

static void job_record_with_profiles(struct adaptdl_job_record *record)
{
    static const uint64_t locals[] = {8, 16, 32, 64};
    job_record_with_sizes(record, profiles,
                          &(struct profiled_sizes){locals, 4, 50, 0.020, 0.001, 0.004}, 2.0);
}

static struct batch_decision_inputs inputs_for(const struct adaptdl_job_record *record,
                                               double sqr, double var, uint64_t local)
{
    return (struct batch_decision_inputs){
        .record = record, .grad_sqr = sqr, .grad_var = var, .nodes = 1, .replicas = 2,
        .current_local_bsz = local, .initial_global_bsz = 16, .max_global_bsz = 1024,
        .speedup_threshold = 1.05, .payback_seconds = 600, .statistics_trusted = true,
    };
}

static struct batch_decision decide(const struct batch_decision_inputs *inputs)
{
    struct batch_decision decision;
    char error[256];
    cr_assert_eq(batch_decide(inputs, &decision, error, sizeof error), 0, "%s", error);
    cr_assert(decision.valid);
    return decision;
}

Test(batch_decision, trusted_statistics_restart_for_the_choice)
{
    struct adaptdl_job_record record;
    job_record_with_profiles(&record);
    struct batch_decision_inputs inputs = inputs_for(&record, 1.0, 200.0, 8);
    struct batch_decision decision = decide(&inputs);
    cr_expect_gt(decision.choice.global_bsz, 16, "a noise scale of 200 wants a larger batch");
    cr_expect_eq(decision.reason, BATCH_DECISION_RESTART, "%s",
                 batch_decision_reason_text(decision.reason));
    cr_expect(decision.restart);
    cr_expect_eq(decision.speedup_pessimistic, decision.speedup, "exact statistics");
}

Test(batch_decision, untrusted_statistics_never_restart)
{
    struct adaptdl_job_record record;
    job_record_with_profiles(&record);
    struct batch_decision_inputs inputs = inputs_for(&record, 1.0, 200.0, 8);
    inputs.statistics_trusted = false;
    struct batch_decision decision = decide(&inputs);
    cr_expect(!decision.restart);
    cr_expect_eq(decision.reason, BATCH_DECISION_UNTRUSTED);
}

/* A negative grad_sqr estimate (noise near convergence) makes every batch
 * look efficient; the estimator never trusts it, so the job keeps its batch
 * instead of jumping to the largest. */
Test(batch_decision, a_negative_grad_sqr_is_never_trusted)
{
    struct grad_noise_state noise;
    grad_noise_init(&noise, 16);
    for (int step = 0; step < 200; step++)   /* total > local: grad_sqr < 0 */
        grad_noise_update_replicas(&noise, 1.0 + 0.01 * (step % 3), 0.40, 2, 8, 16);
    cr_assert_lt(grad_noise_sqr(&noise), 0);
    cr_expect(!grad_noise_trustworthy(&noise));
    struct adaptdl_job_record record;
    job_record_with_profiles(&record);
    struct batch_decision_inputs inputs =
        inputs_for(&record, grad_noise_sqr(&noise), grad_noise_var(&noise), 8);
    inputs.statistics_trusted = grad_noise_trustworthy(&noise);
    struct batch_decision decision = decide(&inputs);
    cr_expect(!decision.restart, "chose %llu", (unsigned long long)decision.choice.global_bsz);
}

Test(batch_decision, statistics_become_trusted_as_consistent_observations_accumulate)
{
    struct grad_noise_state noise;
    grad_noise_init(&noise, 16);
    cr_expect(!grad_noise_trustworthy(&noise));
    for (int step = 0; step < 4; step++)
        grad_noise_update_replicas(&noise, 3.0 + 0.1 * (step % 2), 2.0, 2, 8, 16);
    cr_expect(!grad_noise_trustworthy(&noise), "%g effective observations are too few",
              grad_noise_effective_observations(&noise));
    for (int step = 0; step < 20; step++)
        grad_noise_update_replicas(&noise, 3.0 + 0.1 * (step % 2), 2.0, 2, 8, 16);
    cr_expect(grad_noise_trustworthy(&noise));
    double sqr_error, var_error;
    grad_noise_standard_errors(&noise, &sqr_error, &var_error);
    cr_expect_gt(sqr_error, 0);
    cr_expect_lt(sqr_error, 0.5 * grad_noise_sqr(&noise));
}

Test(batch_decision, a_speedup_inside_the_statistics_error_does_not_restart)
{
    struct adaptdl_job_record record;
    job_record_with_profiles(&record);
    /* the current batch is near the best: a small point speedup */
    struct batch_decision_inputs exact = inputs_for(&record, 1.0, 40.0, 8);
    struct batch_decision point = decide(&exact);
    cr_assert(point.speedup > 1.05 && point.speedup < 1.5, "speedup %g", point.speedup);
    struct batch_decision_inputs noisy = exact;
    noisy.grad_sqr_error = 0.5;
    noisy.grad_var_error = 20.0;
    struct batch_decision decision = decide(&noisy);
    cr_expect_lt(decision.speedup_pessimistic, decision.speedup);
    cr_expect(!decision.restart, "pessimistic speedup %g", decision.speedup_pessimistic);
    cr_expect_eq(decision.reason, BATCH_DECISION_BELOW_THRESHOLD);
}

Test(batch_decision, going_back_needs_the_threshold_squared)
{
    struct adaptdl_job_record record;
    job_record_with_profiles(&record);
    /* last change: 16 -> 64 global; now a smaller batch looks a little better */
    struct batch_decision_inputs inputs = inputs_for(&record, 1.0, 8.0, 32);
    struct batch_decision forward = decide(&inputs);
    cr_assert(forward.choice.global_bsz < 64 && forward.speedup > 1.05, "speedup %g to %llu",
              forward.speedup, (unsigned long long)forward.choice.global_bsz);
    inputs.speedup_threshold = sqrt(forward.speedup) * 1.001;   /* squared: above it */
    inputs.previous_global_bsz = 16;
    struct batch_decision back = decide(&inputs);
    cr_expect_eq(back.reason, BATCH_DECISION_REVERSAL, "%s",
                 batch_decision_reason_text(back.reason));
    inputs.previous_global_bsz = 128;   /* the same change, not a reversal */
    struct batch_decision onward = decide(&inputs);
    cr_expect_eq(onward.reason, BATCH_DECISION_RESTART, "%s",
                 batch_decision_reason_text(onward.reason));
}

/* Uniform on [0, 1), from the seeded sequence. */
static double uniform(uint64_t *state)
{
    return (double)(unit_splitmix64(state) >> 11) / 9007199254740992.0;
}

/* Statistics drawn around a fixed truth (noise scale 100) within their
 * standard error (a relative error of 0.8, as early in a run): the restarts
 * the decisions ask for all go one way, and there are few. */
Test(batch_decision, noisy_statistics_do_not_make_the_batch_flap)
{
    struct adaptdl_job_record record;
    job_record_with_profiles(&record);
    uint64_t random_state = 5;
    uint64_t current = 8, previous = 0;
    int ups = 0, downs = 0;
    for (int round = 0; round < 60; round++) {
        double sqr = 1.0 * (1 + 0.8 * (2 * uniform(&random_state) - 1));
        double var = 100.0 * (1 + 0.8 * (2 * uniform(&random_state) - 1));
        struct batch_decision_inputs inputs = inputs_for(&record, sqr, var, current);
        inputs.grad_sqr_error = 0.8;
        inputs.grad_var_error = 80.0;
        inputs.previous_global_bsz = previous;
        struct batch_decision decision = decide(&inputs);
        if (!decision.restart)
            continue;
        if (decision.choice.local_bsz > current)
            ups++;
        else
            downs++;
        previous = current * 2;
        current = decision.choice.local_bsz;
    }
    cr_expect(ups == 0 || downs == 0, "%d restarts up and %d down", ups, downs);
    cr_expect_leq(ups + downs, 2, "%d restarts for one truth", ups + downs);
}

/* Rule 4: one local batch profiled, a step of 100 ms plus 0.78 ms per
 * record (the time-to-target benchmark's), statistics of its first
 * decision.  AdaptDL's prior (half the step constant) keeps the batch; the
 * bound with the step time no longer than now says twice the batch could
 * pay, so the job restarts once to measure it. */
static struct step_profile single_profile;

static void job_record_with_one_size(struct adaptdl_job_record *record, uint64_t local)
{
    /* no restart cost measured yet: Pollux's 30 s */
    job_record_with_sizes(record, &single_profile,
                          &(struct profiled_sizes){&local, 1, 40, 0.100, 0.00078, 0.0005}, 0);
}

/* Two local batches profiled (8 and 16 on 2 replicas), steps of
 * `constant` + `per_record` seconds per local record, a restart cost of 3 s
 * measured. */
static struct step_profile two_sizes[2];

static void job_record_with_two_sizes(struct adaptdl_job_record *record, double constant,
                                      double per_record)
{
    static const uint64_t locals[] = {8, 16};
    job_record_with_sizes(record, two_sizes,
                          &(struct profiled_sizes){locals, 2, 40, constant, per_record, 0.0005},
                          3.0);
}

/* The decision for a job measured at one size (local 8 on 2 replicas) whose
 * gradient statistics (grad_sqr 1.59, grad_var) are known to within their
 * errors. */
static struct batch_decision decide_after_one_size(double grad_var)
{
    struct adaptdl_job_record record;
    job_record_with_one_size(&record, 8);
    struct batch_decision_inputs inputs = inputs_for(&record, 1.59, grad_var, 8);
    inputs.grad_sqr_error = 0.05;
    inputs.grad_var_error = 0.5;
    return decide(&inputs);
}

Test(batch_decision, one_profiled_size_explores_twice_the_batch)
{
    /* noise scale 31 samples at a global batch of 16 */
    struct batch_decision decision = decide_after_one_size(50.0);
    cr_expect_eq(decision.reason, BATCH_DECISION_EXPLORE, "%s",
                 batch_decision_reason_text(decision.reason));
    cr_expect(decision.restart);
    cr_expect_eq(decision.choice.local_bsz, 16);
    cr_expect_eq(decision.choice.global_bsz, 32);
    cr_expect_gt(decision.speedup_pessimistic, 1.05 * 1.05, "the bound that explores");
    cr_expect_geq(decision.speedup, 1.0, "the prior does not call it a loss");
    cr_expect_lt(decision.speedup, 1.05, "the prior alone would not restart");
    cr_expect_lt(decision.model_choice.local_bsz, 16, "the model's own choice stays logged");
    cr_expect_leq(decision.payback_time, 600);
}

/* The job: noise scale 17 samples at a batch of 16.  The model,
 * prior included, predicts a loss at twice the batch (0.9x), so no restart
 * measures it, however large the bound with an unchanged step time. */
Test(batch_decision, a_batch_the_model_calls_right_is_not_explored)
{
    struct batch_decision decision = decide_after_one_size(27.0);
    cr_expect_not(decision.restart, "%s", batch_decision_reason_text(decision.reason));
    cr_expect_neq(decision.reason, BATCH_DECISION_EXPLORE);
}

/* With one size measured, a restart the model asks for measures at least
 * twice the batch: a move from 8 to 13 would leave a fit to two close
 * sizes. */
Test(batch_decision, a_restart_from_one_measured_size_goes_at_least_twice_as_far)
{
    struct batch_decision decision = decide_after_one_size(70.0);
    cr_expect(decision.restart, "%s", batch_decision_reason_text(decision.reason));
    cr_expect_geq(decision.choice.local_bsz, 16);
}

/* Rule 5: the fit says little far from its points.  Two sizes measured (8
 * and 16), a noise scale that wants the maximum: the restart goes at most 4
 * times beyond the largest measured local batch. */
Test(batch_decision, a_restart_goes_at_most_four_times_beyond_the_measured_batches)
{
    struct adaptdl_job_record record;
    job_record_with_two_sizes(&record, 0.100, 0.00078);
    struct batch_decision_inputs inputs = inputs_for(&record, 1.0, 100000.0, 16);
    struct batch_decision decision = decide(&inputs);
    cr_expect(decision.restart, "%s", batch_decision_reason_text(decision.reason));
    cr_expect_eq(decision.choice.local_bsz, 4 * 16, "not the maximum of 512");
}

/* Rule 6: the job moved to 256 (local 128), whose steps turned out to take
 * 9 s: the measured throughput back at 32 (local 16) is far higher, which
 * a smaller batch's efficiency can only improve: the next decision goes
 * back, even on statistics not trusted yet. */
Test(batch_decision, a_wrong_move_is_undone_at_the_next_decision_without_trust)
{
    struct adaptdl_job_record record;
    job_record_init(&record);
    static struct step_profile measured[2];
    measured[0] = (struct step_profile){.nodes = 1, .replicas = 2, .local_bsz = 16, .count = 40,
                                        .step_time_sum = 40 * 0.1125, .sync_time_sum = 0.02};
    measured[1] = (struct step_profile){.nodes = 1, .replicas = 2, .local_bsz = 128, .count = 3,
                                        .step_time_sum = 3 * 9.0, .sync_time_sum = 0.01};
    record.profiles = measured;
    record.profile_count = 2;
    record.initial_global_bsz = 16;
    record.restart_cost_seconds = 3.0;
    struct batch_decision_inputs inputs = inputs_for(&record, 1.0, 100.0, 128);
    inputs.statistics_trusted = false;
    struct batch_decision decision = decide(&inputs);
    cr_expect(decision.restart, "%s", batch_decision_reason_text(decision.reason));
    cr_expect_eq(decision.reason, BATCH_DECISION_RETREAT, "%s",
                 batch_decision_reason_text(decision.reason));
    cr_expect_eq(decision.choice.local_bsz, 16);
    cr_expect_gt(decision.speedup, 10, "the measured throughputs' ratio");
}

Test(batch_decision, a_small_noise_scale_does_not_explore)
{
    struct adaptdl_job_record record;
    job_record_with_one_size(&record, 8);
    /* noise scale 0.1: twice the batch is worth at most ~1.01 */
    struct batch_decision_inputs inputs = inputs_for(&record, 10.0, 1.0, 8);
    struct batch_decision decision = decide(&inputs);
    cr_expect(!decision.restart, "%s", batch_decision_reason_text(decision.reason));
    cr_expect_neq(decision.reason, BATCH_DECISION_EXPLORE);
    cr_expect_eq(decision.choice.local_bsz, 8);
}

Test(batch_decision, exploration_needs_trusted_statistics_and_room)
{
    struct adaptdl_job_record record;
    job_record_with_one_size(&record, 8);
    struct batch_decision_inputs inputs = inputs_for(&record, 1.59, 22.96, 8);
    inputs.statistics_trusted = false;
    struct batch_decision untrusted = decide(&inputs);
    cr_expect(!untrusted.restart, "%s", batch_decision_reason_text(untrusted.reason));
    cr_expect_neq(untrusted.reason, BATCH_DECISION_EXPLORE);

    /* at the maximum (global 1024) nothing larger exists; the model may
     * still go back down, by rules 1-3 */
    job_record_with_one_size(&record, 512);
    inputs = inputs_for(&record, 1.59, 22.96, 512);
    struct batch_decision at_the_maximum = decide(&inputs);
    cr_expect_neq(at_the_maximum.reason, BATCH_DECISION_EXPLORE, "%s",
                  batch_decision_reason_text(at_the_maximum.reason));
    cr_expect_leq(at_the_maximum.choice.global_bsz, 512 * 2);
}

Test(batch_decision, two_profiled_sizes_leave_the_choice_to_the_model)
{
    struct adaptdl_job_record record;
    /* compute all per sample: larger batches buy no throughput */
    job_record_with_two_sizes(&record, 0.0, 0.0125);
    struct batch_decision_inputs inputs = inputs_for(&record, 1.59, 22.96, 8);
    struct batch_decision decision = decide(&inputs);
    cr_expect_neq(decision.reason, BATCH_DECISION_EXPLORE);
    cr_expect(!decision.restart, "%s", batch_decision_reason_text(decision.reason));
    cr_expect_eq(decision.choice.local_bsz, 8);
    cr_expect_eq(decision.model_choice.local_bsz, decision.choice.local_bsz);
}

/* A cooperative loop changes its batch in place: with no current batch it
 * takes the choice; otherwise only when the pessimistic speedup (rule 2)
 * strictly exceeds the threshold and the statistics are trusted (rule 1);
 * with no model it keeps whatever it has. */
static struct batch_decision in_place_decision(double speedup, double pessimistic,
                                               enum batch_decision_reason reason)
{
    struct batch_decision decision;
    memset(&decision, 0, sizeof decision);
    decision.valid = true;
    decision.choice.local_bsz = 32;
    decision.choice.global_bsz = 64;
    decision.speedup = speedup;
    decision.speedup_pessimistic = pessimistic;
    decision.reason = reason;
    return decision;
}

Test(batch_decision, in_place_keeps_the_current_batch_without_a_model)
{
    struct batch_decision decision = in_place_decision(10, 10, BATCH_DECISION_RESTART);
    decision.valid = false;
    cr_expect_eq(batch_decision_in_place(&decision, 8, 1.05), 8);
    cr_expect_eq(batch_decision_in_place(&decision, 0, 1.05), 0,
                 "no model and no batch yet: still none");
}

Test(batch_decision, in_place_takes_the_choice_when_there_is_no_current_batch)
{
    struct batch_decision low = in_place_decision(0.5, 0.5, BATCH_DECISION_KEEP);
    cr_expect_eq(batch_decision_in_place(&low, 0, 1.05), 32);
    struct batch_decision untrusted = in_place_decision(1, 1, BATCH_DECISION_UNTRUSTED);
    cr_expect_eq(batch_decision_in_place(&untrusted, 0, 1.05), 32);
}

Test(batch_decision, in_place_changes_only_above_the_threshold_on_trusted_statistics)
{
    struct batch_decision above = in_place_decision(1.2, 1.1, BATCH_DECISION_NO_PAYBACK);
    cr_expect_eq(batch_decision_in_place(&above, 8, 1.05), 32,
                 "no restart to pay back in place");
    struct batch_decision equal = in_place_decision(1.2, 1.05, BATCH_DECISION_BELOW_THRESHOLD);
    cr_expect_eq(batch_decision_in_place(&equal, 8, 1.05), 8, "must exceed, not equal");
    struct batch_decision noisy = in_place_decision(1.5, 1.01, BATCH_DECISION_BELOW_THRESHOLD);
    cr_expect_eq(batch_decision_in_place(&noisy, 8, 1.05), 8,
                 "the point speedup alone does not change the batch");
    struct batch_decision untrusted = in_place_decision(2, 2, BATCH_DECISION_UNTRUSTED);
    cr_expect_eq(batch_decision_in_place(&untrusted, 8, 1.05), 8);
}

Test(batch_decision, in_place_follows_a_fitted_decision)
{
    struct adaptdl_job_record record;
    job_record_with_profiles(&record);
    struct batch_decision_inputs inputs = inputs_for(&record, 1.0, 200.0, 8);
    struct batch_decision trusted = decide(&inputs);
    cr_assert_neq(trusted.choice.local_bsz, 8);
    cr_expect_eq(batch_decision_in_place(&trusted, 8, inputs.speedup_threshold),
                 trusted.choice.local_bsz);
    inputs.statistics_trusted = false;
    struct batch_decision untrusted = decide(&inputs);
    cr_expect_eq(batch_decision_in_place(&untrusted, 8, inputs.speedup_threshold), 8);
}
