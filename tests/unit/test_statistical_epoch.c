/* test_statistical_epoch.c - statistical epochs (adaptshim(7) "Statistical epochs"): the efficiency
 * used for progress, the planned pass length and its correction, and the
 * progress and step counter as data positions.
 *
 * The bug feared most: replicas or restarts that plan different lengths, a
 * plan that drifts (each pass a record or a batch off, never corrected), or
 * a run at the initial batch size whose passes stop being exactly N. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>

#include "goodput.h"
#include "statistical_epoch.h"

Test(statistical_epoch, efficiency_is_one_without_statistics_or_at_the_initial_batch)
{
    cr_expect_eq(statistical_epoch_efficiency(NAN, NAN, 8, 64), 1.0);
    cr_expect_eq(statistical_epoch_efficiency(0, 0, 8, 64), 1.0);
    cr_expect_float_eq(statistical_epoch_efficiency(2.0, 50.0, 8, 8), 1.0, 1e-12);
    cr_expect_eq(statistical_epoch_efficiency(2.0, 50.0, 0, 8), 1.0, "no initial batch");
}

Test(statistical_epoch, efficiency_is_the_goodput_models)
{
    struct goodput_model model = {.grad = {.sqr = 2.0, .var = 50.0}, .initial_global_bsz = 8};
    for (double batch = 8; batch <= 512; batch *= 2)
        cr_expect_float_eq(statistical_epoch_efficiency(2.0, 50.0, 8, batch),
                           goodput_efficiency(&model, batch), 1e-12, "batch %g", batch);
    double high_noise = statistical_epoch_efficiency(1.0, 1e6, 8, 64);
    double low_noise = statistical_epoch_efficiency(1.0, 1e-3, 8, 64);
    cr_expect_gt(high_noise, 0.95, "noisy gradients: a large batch is efficient");
    cr_expect_lt(low_noise, 0.2, "clean gradients: a large batch is wasted");
}

Test(statistical_epoch, a_pass_on_target_at_efficiency_one_is_exactly_n)
{
    static const uint64_t counts[] = {1, 7, 1000, 4000, 6001, 123457};
    static const double batches[] = {1, 3, 8, 24, 100, 333};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++) {
            uint64_t n = counts[c];
            double batch = batches[b];
            /* progress counted step by step, a partial last batch in proportion */
            double progress = 0;
            for (uint64_t epoch = 0; epoch < 3; epoch++) {
                uint64_t length = statistical_epoch_plan_length(n, epoch, progress, batch,
                                                                1.0, true);
                cr_expect_eq(length, n, "N %llu batch %g epoch %llu: %llu",
                             (unsigned long long)n, batch, (unsigned long long)epoch,
                             (unsigned long long)length);
                for (uint64_t done = 0; done < length; done += (uint64_t)batch) {
                    uint64_t step = length - done < batch ? length - done : (uint64_t)batch;
                    progress += (double)step / batch;
                }
            }
        }
}

Test(statistical_epoch, lower_efficiency_means_a_longer_pass)
{
    cr_expect_eq(statistical_epoch_plan_length(1000, 0, 0, 10, 0.5, true), 2000);
    cr_expect_eq(statistical_epoch_plan_length(1000, 0, 0, 10, 0.8, true), 1250);
    cr_expect_eq(statistical_epoch_plan_length(1000, 0, 0, 10, 0.8, false), 1250);
}

Test(statistical_epoch, an_error_is_corrected_within_bounds)
{
    /* epoch 1 target: 200 steps of 10; 190 done: 10 steps = 100 records */
    cr_expect_eq(statistical_epoch_plan_length(1000, 1, 190, 10, 1.0, true), 1000 / 2,
                 "ahead by 90 steps: bounded at half a nominal pass");
    cr_expect_eq(statistical_epoch_plan_length(1000, 1, 95, 10, 1.0, true), 1050,
                 "behind by 5 steps");
    cr_expect_eq(statistical_epoch_plan_length(1000, 1, 105, 10, 1.0, true), 950,
                 "ahead by 5 steps");
    cr_expect_eq(statistical_epoch_plan_length(1000, 5, 0, 10, 1.0, true), 2000,
                 "far behind: at most twice a nominal pass");
    cr_expect_eq(statistical_epoch_plan_length(1000, 1, NAN, 10, 1.0, true), 1000,
                 "no usable progress: nominal");
    cr_expect_eq(statistical_epoch_plan_length(1000, 0, 0, 10, NAN, true), 1000,
                 "no usable efficiency: 1");
    cr_expect_eq(statistical_epoch_plan_length(1, 9, 1e9, 10, 1.0, true), 1, "never empty");
    cr_expect_eq(statistical_epoch_plan_length(0, 0, 0, 10, 1.0, true), 0);
}

/* Runs `epochs_count` statistical epochs of a 5000-record file at a global
 * batch of 64 (B0 = 16), the noise statistics given per step by
 * `sqr_at`, and checks the progress at the end of every pass against the
 * target: within `tolerance` initial-batch steps. */
static void run_epochs(double (*sqr_at)(uint64_t records_so_far), double tolerance)
{
    struct statistical_epochs epochs;
    statistical_epochs_init(&epochs);
    statistical_epochs_note_train_file(&epochs);
    statistical_epochs_enable(&epochs, 16, 64, sqr_at(0), 400.0);
    const uint64_t n = 5000;
    uint64_t records = 0;
    for (uint64_t epoch = 0; epoch < 20; epoch++) {
        uint64_t length = statistical_epochs_pass_length(&epochs, n, epoch, 0);
        for (uint64_t done = 0; done < length; done += 64) {
            uint64_t step = length - done < 64 ? length - done : 64;
            records += step;
            statistical_epochs_note_step(&epochs, step, sqr_at(records), 400.0);
        }
        double target = (double)n * (double)(epoch + 1) / 16.0;
        cr_expect(fabs(epochs.progress - target) <= tolerance,
                  "epoch %llu: progress %g, target %g", (unsigned long long)epoch,
                  epochs.progress, target);
    }
}

static double constant_sqr(uint64_t records)
{
    (void)records;
    return 1.0;
}

/* |G|^2 rising as training goes on: the efficiency of the large batch
 * keeps falling, so every pass planned from its start's efficiency falls
 * short, the same way, pass after pass. */
static double rising_sqr(uint64_t records)
{
    return 0.2 + (double)records / 20000.0;
}

/* Constant statistics, passes that are not whole batches: the last partial
 * batch's error is corrected, so the progress never drifts by more than
 * one step's gain (64 / 16). */
Test(statistical_epoch, progress_does_not_drift_from_the_target)
{
    run_epochs(constant_sqr, 64.0 / 16.0 + 1e-9);
}

/* Statistics that move within a pass: one pass misses by what the moving
 * efficiency changed, the next corrects it; 20 epochs stay within 5% of an
 * epoch's progress (5000 / 16) instead of accumulating the shortfall. */
Test(statistical_epoch, an_efficiency_that_moves_is_corrected_pass_by_pass)
{
    run_epochs(rising_sqr, 0.05 * 5000.0 / 16.0);
}

Test(statistical_epoch, planning_off_gives_n_and_still_counts_steps)
{
    struct statistical_epochs epochs;
    statistical_epochs_init(&epochs);
    cr_expect_eq(statistical_epochs_pass_length(&epochs, 777, 3, 50), 777);
    statistical_epochs_note_step(&epochs, 32, 1.0, 1.0);
    statistical_epochs_note_step(&epochs, 32, 1.0, 1.0);
    cr_expect_eq(epochs.step, 2);
    cr_expect_eq(epochs.progress, 0.0);
    statistical_epochs_enable(&epochs, 0, 64, 1.0, 1.0);
    cr_expect_not(epochs.enabled, "no initial batch: off");
}

Test(statistical_epoch, pending_records_count_as_progress)
{
    struct statistical_epochs epochs;
    statistical_epochs_init(&epochs);
    statistical_epochs_note_train_file(&epochs);
    statistical_epochs_enable(&epochs, 10, 10, NAN, NAN);
    for (int step = 0; step < 99; step++)
        statistical_epochs_note_step(&epochs, 10, NAN, NAN);
    /* the 100th step of 10 is in flight: epoch 0 is over, epoch 1 is N */
    cr_expect_eq(statistical_epochs_pass_length(&epochs, 1000, 1, 10), 1000);
    cr_expect_eq(statistical_epochs_pass_length(&epochs, 1000, 1, 0), 1010);
}

Test(statistical_epoch, several_train_files_take_the_nominal_length)
{
    struct statistical_epochs epochs;
    statistical_epochs_init(&epochs);
    statistical_epochs_note_train_file(&epochs);
    statistical_epochs_note_train_file(&epochs);
    statistical_epochs_enable(&epochs, 10, 40, 1.0, 0.0);  /* no noise: efficiency 1/4 */
    cr_expect_eq(statistical_epochs_pass_length(&epochs, 1000, 0, 0), 4000);
    statistical_epochs_note_step(&epochs, 40000, 1.0, 0.0);  /* far ahead */
    cr_expect_eq(statistical_epochs_pass_length(&epochs, 1000, 1, 0), 4000,
                 "no correction across shards");
}

/* Planning on from an initial global batch, with no gradient statistics
 * (efficiency 1), after one step of global_bsz records. */
static void start_without_statistics_after_one_step(struct statistical_epochs *epochs,
                                                    double initial_global_bsz,
                                                    uint64_t global_bsz)
{
    statistical_epochs_init(epochs);
    statistical_epochs_enable(epochs, initial_global_bsz, (double)global_bsz, NAN, NAN);
    statistical_epochs_note_step(epochs, global_bsz, NAN, NAN);
}

Test(statistical_epoch, progress_and_step_are_captured_and_restored)
{
    struct statistical_epochs epochs;
    start_without_statistics_after_one_step(&epochs, 8, 32);
    struct statistical_epoch_position position;
    statistical_epochs_capture_with_pending(&epochs, 0, 0, &position);
    cr_expect_float_eq(position.progress, 4.0, 1e-12);
    cr_expect_eq(position.step, 1);
    cr_expect_eq(position.global_bsz, 32);

    struct statistical_epochs next;
    statistical_epochs_init(&next);
    statistical_epochs_restore(&next, &position);
    statistical_epochs_note_step(&next, 8, NAN, NAN);
    cr_expect_eq(next.step, 2);
    cr_expect_eq(next.restored_global_bsz, 32);
    position.progress = NAN;
    statistical_epochs_restore(&next, &position);
    cr_expect_eq(next.progress, 0.0, "a non-finite progress is not restored");
    position.progress = -3.0;
    statistical_epochs_restore(&next, &position);
    cr_expect_eq(next.progress, 0.0);
}

/* A checkpoint committed while a finished step's sums are in flight stands
 * for that step too: without it every restart would lose one step. */
Test(statistical_epoch, a_commit_includes_the_steps_still_in_flight)
{
    struct statistical_epochs epochs;
    statistical_epochs_init(&epochs);
    statistical_epochs_enable(&epochs, 8, 32, 1.0, 0.0);  /* no noise: efficiency 1/4 */
    statistical_epochs_note_step(&epochs, 32, 1.0, 0.0);
    struct statistical_epoch_position position;
    statistical_epochs_capture_with_pending(&epochs, 2, 64, &position);
    cr_expect_eq(position.step, 3);
    cr_expect_float_eq(position.progress, 3.0, 1e-12, "1 counted + 2 pending steps at gain 1");
    cr_expect_eq(epochs.step, 1, "capturing counts nothing");

    struct statistical_epochs plain;
    statistical_epochs_init(&plain);
    statistical_epochs_note_step(&plain, 32, NAN, NAN);
    statistical_epochs_capture_with_pending(&plain, 1, 32, &position);
    cr_expect_eq(position.step, 2, "the step counter runs without adaptation too");
    cr_expect_eq(position.progress, 0.0, "progress only with adaptation");
    cr_expect_eq(position.global_bsz, 0, "no batch recorded without adaptation");
}

/* Restored at the batch it was planned at, a pass keeps its length: a
 * preempted job reads what it would have read uninterrupted. */
/* One train file, B0 = 8, this run at `global_bsz` without noise, restored
 * from `position`. */
static void restored_epochs(struct statistical_epochs *epochs, double global_bsz,
                            struct statistical_epoch_position position)
{
    statistical_epochs_init(epochs);
    statistical_epochs_note_train_file(epochs);
    statistical_epochs_enable(epochs, 8, global_bsz, 1.0, 0.0);
    statistical_epochs_restore(epochs, &position);
}

Test(statistical_epoch, a_pass_resumed_at_the_same_batch_keeps_its_length)
{
    struct statistical_epochs epochs;
    restored_epochs(&epochs, 32,
                    (struct statistical_epoch_position){.progress = 100, .global_bsz = 32});
    cr_expect_eq(statistical_epochs_resumed_pass_length(&epochs, 1000, 0, 400, 4000), 4000);
}

/* Planned at efficiency 1/4 (batch 32), the pass resumes at batch 8
 * (efficiency 1): the rest needs a quarter of the records. */
Test(statistical_epoch, a_pass_resumed_at_another_batch_is_replanned_from_its_progress)
{
    struct statistical_epochs epochs;
    /* 2000 of 4000 records at gain 1/4 per initial batch: progress 62.5 of 125 */
    restored_epochs(&epochs, 8,
                    (struct statistical_epoch_position){.progress = 62.5, .global_bsz = 32});
    cr_expect_eq(statistical_epochs_resumed_pass_length(&epochs, 1000, 0, 2000, 4000), 2500,
                 "62.5 initial steps still needed: 500 records at efficiency 1");
    cr_expect_eq(statistical_epochs_resumed_pass_length(&epochs, 1000, 0, 4000, 4000), 4000,
                 "a finished pass stays finished");
    cr_expect_eq(statistical_epochs_resumed_pass_length(&epochs, 1000, 1, 0, 4000), 1500,
                 "a pass not begun is planned afresh: 250 - 62.5 initial steps to go");

    statistical_epochs_restore(&epochs, &(struct statistical_epoch_position){
                                            .progress = 200, .global_bsz = 32});
    cr_expect_eq(statistical_epochs_resumed_pass_length(&epochs, 1000, 0, 2000, 4000), 2000,
                 "past the target: the pass ends where it resumes");
}

Test(statistical_epoch, remaining_records_are_bounded)
{
    cr_expect_eq(statistical_epoch_plan_remaining(1000, 0, 0, 8, 1.0), 1000);
    cr_expect_eq(statistical_epoch_plan_remaining(1000, 0, 125, 8, 1.0), 0);
    cr_expect_eq(statistical_epoch_plan_remaining(1000, 0, 200, 8, 1.0), 0);
    cr_expect_eq(statistical_epoch_plan_remaining(1000, 5, 0, 8, 0.5), 4000,
                 "at most twice the nominal 2000");
    cr_expect_eq(statistical_epoch_plan_remaining(1000, 0, NAN, 8, 1.0), 0);
    cr_expect_eq(statistical_epoch_plan_remaining(0, 0, 0, 8, 1.0), 0);
}

/* statistical_epochs_capture: the progress and step counter that step lines
 * and logs report; without planning the steps still count, the progress
 * does not move. */
Test(statistical_epoch, capture_reports_the_counted_progress_and_steps)
{
    struct statistical_epochs epochs;
    statistical_epochs_init(&epochs);
    double progress = -1;
    uint64_t step = 99;
    statistical_epochs_capture(&epochs, &progress, &step);
    cr_expect_eq(progress, 0);
    cr_expect_eq(step, 0);
    statistical_epochs_note_step(&epochs, 64, NAN, NAN);
    statistical_epochs_capture(&epochs, &progress, &step);
    cr_expect_eq(step, 1, "planning off: the step counts");
    cr_expect_eq(progress, 0, "but adds no progress");

    statistical_epochs_enable(&epochs, 16, 64, NAN, NAN);
    statistical_epochs_note_step(&epochs, 64, NAN, NAN);
    statistical_epochs_note_step(&epochs, 32, NAN, NAN);   /* a partial last batch */
    statistical_epochs_capture(&epochs, &progress, &step);
    cr_expect_eq(step, 3);
    cr_expect_float_eq(progress, (64.0 + 32.0) / 16.0, 1e-12, "records / B0 at efficiency 1");

    /* the same as the position of a checkpoint with nothing pending */
    struct statistical_epoch_position position;
    statistical_epochs_capture_with_pending(&epochs, 0, 0, &position);
    cr_expect_eq(position.progress, progress);
    cr_expect_eq(position.step, step);
    /* and what a restore brings back */
    struct statistical_epochs restarted;
    statistical_epochs_init(&restarted);
    statistical_epochs_restore(&restarted, &(struct statistical_epoch_position){
                                               .progress = 7.5, .step = 40, .global_bsz = 64});
    statistical_epochs_capture(&restarted, &progress, &step);
    cr_expect_eq(progress, 7.5);
    cr_expect_eq(step, 40);
}

Test(statistical_epoch, capture_counts_no_pending_step)
{
    struct statistical_epochs epochs;
    start_without_statistics_after_one_step(&epochs, 8, 8);
    struct statistical_epoch_position with_pending;
    statistical_epochs_capture_with_pending(&epochs, 2, 16, &with_pending);
    cr_expect_eq(with_pending.step, 3);
    cr_expect_float_eq(with_pending.progress, 3.0, 1e-12);
    double progress;
    uint64_t step;
    statistical_epochs_capture(&epochs, &progress, &step);
    cr_expect_eq(step, 1, "only the counted steps");
    cr_expect_float_eq(progress, 1.0, 1e-12);
}

Test(statistical_epoch, gain_is_efficiency_times_scale)
{
    for (double batch = 8; batch <= 512; batch *= 2)
        cr_expect_float_eq(statistical_epoch_gain(2.0, 50.0, 8, batch),
                           statistical_epoch_efficiency(2.0, 50.0, 8, batch) * batch / 8, 1e-12,
                           "batch %g", batch);
    cr_expect_float_eq(statistical_epoch_gain(2.0, 50.0, 8, 8), 1.0, 1e-12,
                       "the initial batch is worth one step of itself");
    cr_expect_gt(statistical_epoch_gain(1.0, 1e6, 8, 64), 7.5, "noisy: nearly 8 steps");
    cr_expect_lt(statistical_epoch_gain(1.0, 1e-3, 8, 64), 1.5, "clean: about one step");
}

Test(statistical_epoch, gain_claims_nothing_without_statistics_or_an_initial_batch)
{
    cr_expect_eq(statistical_epoch_gain(NAN, 50.0, 8, 64), 1.0);
    cr_expect_eq(statistical_epoch_gain(2.0, NAN, 8, 64), 1.0);
    cr_expect_eq(statistical_epoch_gain(0, 50.0, 8, 64), 1.0, "grad_sqr must be positive");
    cr_expect_eq(statistical_epoch_gain(-1.0, 50.0, 8, 64), 1.0);
    cr_expect_eq(statistical_epoch_gain(2.0, -1.0, 8, 64), 1.0, "a negative variance");
    cr_expect_eq(statistical_epoch_gain(INFINITY, 50.0, 8, 64), 1.0);
    cr_expect_eq(statistical_epoch_gain(2.0, 50.0, 0, 64), 1.0, "no initial batch");
}
