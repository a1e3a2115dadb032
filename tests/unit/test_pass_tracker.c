/* test_pass_tracker.c - the pass and epoch model of one data file
 * (adaptshim(7) "Passes", "Progress"; replay and continue: "CHECKPOINT
 * BINDING").
 *
 * Modelled on AdaptDL's _AdaptiveDataLoaderState and ElasticSampler tests:
 * the position arithmetic (current_index = s + K * delivered, capped at N),
 * the restore rules under `replay` (earlier passes header-only, the bound
 * pass from the bound index, later passes from 0) and `continue` (the
 * current pass becomes the bound one), and whole-run simulations in which K
 * replicas consume part of a pass, a snapshot is taken, and the pass is
 * finished after restarts with different replica counts (1 -> 4 -> 2 as
 * AdaptDL's restart test): every record of the pass is delivered exactly
 * once, plus fewer than K padding records per segment. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pass_tracker.h"
#include "permutation.h"

/* --- single-tracker rules ------------------------------------------------- */

static struct pass_plan plan_of(const struct pass_tracker *tracker)
{
    struct pass_plan plan;
    pass_tracker_plan(tracker, &plan);
    return plan;
}

static void expect_position(const struct pass_tracker *tracker, uint64_t unconsumed,
                            uint64_t pass, uint64_t index)
{
    uint64_t got_pass = UINT64_MAX, got_index = UINT64_MAX;
    pass_tracker_position(tracker, unconsumed, &got_pass, &got_index, &(uint64_t){0});
    cr_expect_eq(got_pass, pass, "position pass %llu, expected %llu",
                 (unsigned long long)got_pass, (unsigned long long)pass);
    cr_expect_eq(got_index, index, "position index %llu, expected %llu",
                 (unsigned long long)got_index, (unsigned long long)index);
}

static void expect_plan(const struct pass_tracker *tracker, uint64_t pass, uint64_t start,
                        uint64_t length, bool skipped)
{
    struct pass_plan plan = plan_of(tracker);
    cr_expect_eq(plan.pass, pass, "plan pass %llu, expected %llu",
                 (unsigned long long)plan.pass, (unsigned long long)pass);
    cr_expect_eq(plan.start_index, start, "plan start %llu, expected %llu",
                 (unsigned long long)plan.start_index, (unsigned long long)start);
    cr_expect_eq(plan.length, length, "plan length %llu, expected %llu",
                 (unsigned long long)plan.length, (unsigned long long)length);
    cr_expect_eq(plan.skipped, skipped, "plan skipped %d, expected %d", plan.skipped,
                 skipped);
}

Test(pass_tracker, fresh_pass_starts_at_zero)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 3, 1);
    expect_plan(&tracker, 0, 0, 4, false);
    expect_position(&tracker, 0, 0, 0);
    cr_expect_not(tracker.started);
    cr_expect_eq(tracker.delivered, 0);
    cr_expect_not(tracker.has_bound);
}

Test(pass_tracker, zero_replicas_read_as_one)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 0, 0);
    cr_expect_eq(tracker.replicas, 1);
    expect_plan(&tracker, 0, 0, 10, false);
}

Test(pass_tracker, position_is_start_plus_k_times_delivered_capped_at_n)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 3, 2);
    pass_tracker_note_delivered(&tracker, 1, true);
    expect_position(&tracker, 0, 0, 3);
    pass_tracker_note_delivered(&tracker, 3, true);
    expect_position(&tracker, 0, 0, 9);
    /* the 4th record on rank 2 is padding: s + K*4 = 12 > N */
    pass_tracker_note_delivered(&tracker, 4, true);
    expect_position(&tracker, 0, 0, 10);
    cr_expect_eq(tracker.records_served, 4);
}

Test(pass_tracker, delivered_never_decreases)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 100, 2, 0);
    pass_tracker_note_delivered(&tracker, 5, true);
    pass_tracker_note_delivered(&tracker, 2, true);
    cr_expect_eq(tracker.delivered, 5);
    cr_expect_eq(tracker.records_served, 5);
    expect_position(&tracker, 0, 0, 10);
}

Test(pass_tracker, header_bytes_do_not_start_a_pass)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 100, 1, 0);
    pass_tracker_note_delivered(&tracker, 0, false);
    cr_expect_not(tracker.started);
    pass_tracker_note_delivered(&tracker, 0, true);
    cr_expect(tracker.started);
}

Test(pass_tracker, end_pass_fixes_a_fresh_next_pass)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 1);
    pass_tracker_note_delivered(&tracker, 5, true);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 1, 0, 5, false);
    cr_expect_not(tracker.started);
    cr_expect_eq(tracker.delivered, 0);
    cr_expect_eq(tracker.passes_completed, 1);
    cr_expect_eq(tracker.records_served, 5);
    expect_position(&tracker, 0, 1, 0);
}

Test(pass_tracker, unconsumed_records_are_not_counted)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 100, 4, 0);
    pass_tracker_note_delivered(&tracker, 6, true);
    expect_position(&tracker, 2, 0, 16);
    expect_position(&tracker, 6, 0, 0);
    expect_position(&tracker, 1000, 0, 0);
}

Test(pass_tracker, unconsumed_adjustment_never_goes_below_start)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 100, 2, 1);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 0, 41, 0));
    expect_plan(&tracker, 0, 41, 30, false);
    pass_tracker_note_delivered(&tracker, 3, true);
    expect_position(&tracker, 0, 0, 47);
    expect_position(&tracker, 1, 0, 45);
    expect_position(&tracker, 3, 0, 41);
    expect_position(&tracker, 50, 0, 41);
}

/* A loader that reads ahead reaches the end of a pass (the read returning 0
 * ends it) while it still holds its last records: a commit then counts the
 * records in flight back from the end of the pass just ended, not from the
 * start of the next one, which would lose them. */
Test(pass_tracker, records_in_flight_past_a_pass_end_count_back_into_that_pass)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 100, 2, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 0, 20, 0));
    pass_tracker_note_delivered(&tracker, 40, true);
    pass_tracker_end_pass(&tracker);
    expect_position(&tracker, 0, 1, 0);
    expect_position(&tracker, 16, 0, 20 + 2 * (40 - 16));
    expect_position(&tracker, 40, 0, 20);
    expect_position(&tracker, 1000, 0, 20);
    pass_tracker_note_delivered(&tracker, 5, true);
    expect_position(&tracker, 5, 1, 0);
    expect_position(&tracker, 16, 0, 20 + 2 * (40 - 11));
    pass_tracker_end_pass(&tracker);
    pass_tracker_end_pass(&tracker);
    expect_position(&tracker, 16, 3, 0);
}

/* Only a pass that delivered records can hold records in flight: one that
 * replay skipped, or a restore, leaves nothing to count back into. */
Test(pass_tracker, a_skipped_pass_or_a_restore_leaves_nothing_to_count_back_into)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 100, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 1, 30, 0));
    pass_tracker_end_pass(&tracker);
    expect_position(&tracker, 16, 1, 30);
    pass_tracker_note_delivered(&tracker, 70, true);
    pass_tracker_end_pass(&tracker);
    expect_position(&tracker, 16, 1, 84);
    pass_tracker_init(&tracker, 100, 1, 0);
    pass_tracker_note_delivered(&tracker, 100, true);
    pass_tracker_end_pass(&tracker);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 1, 0, 0));
    expect_position(&tracker, 16, 1, 0);
}

Test(pass_tracker, replay_skips_earlier_passes_then_resumes_at_bound_index)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 3, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 2, 5, 0));
    /* passes 0 and 1 are header-only; a snapshot meanwhile binds (2, 5) */
    expect_plan(&tracker, 0, 10, 0, true);
    expect_position(&tracker, 0, 2, 5);
    expect_position(&tracker, 7, 2, 5);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 1, 10, 0, true);
    expect_position(&tracker, 0, 2, 5);
    pass_tracker_end_pass(&tracker);
    /* the bound pass continues at 5, re-partitioned over K = 3 */
    expect_plan(&tracker, 2, 5, 2, false);
    expect_position(&tracker, 0, 2, 5);
    pass_tracker_note_delivered(&tracker, 1, true);
    expect_position(&tracker, 0, 2, 8);
    pass_tracker_note_delivered(&tracker, 2, true);
    expect_position(&tracker, 0, 2, 10);
    pass_tracker_end_pass(&tracker);
    /* later passes are normal */
    expect_plan(&tracker, 3, 0, 4, false);
    expect_position(&tracker, 0, 3, 0);
}

Test(pass_tracker, replay_with_bound_pass_zero_skips_nothing)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 0, 0, 0));
    expect_plan(&tracker, 0, 0, 10, false);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 1, 0, 10, false);
}

Test(pass_tracker, replay_complete_bound_pass_is_header_only)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 1);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 1, 10, 0));
    expect_plan(&tracker, 0, 10, 0, true);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 1, 10, 0, false);
    expect_position(&tracker, 0, 1, 10);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 2, 0, 5, false);
    expect_position(&tracker, 0, 2, 0);
}

Test(pass_tracker, replay_skips_passes_only_before_reaching_a_later_bound_pass)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 0);
    cr_expect_not(pass_tracker_replay_skips_passes(&tracker), "no restore: nothing skipped");
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 2, 3, 0));
    cr_expect(pass_tracker_replay_skips_passes(&tracker), "passes 0 and 1 are skipped");
    pass_tracker_end_pass(&tracker);
    cr_expect(pass_tracker_replay_skips_passes(&tracker), "pass 1 is still skipped");
    pass_tracker_end_pass(&tracker);
    cr_expect_not(pass_tracker_replay_skips_passes(&tracker), "the bound pass is reached");
}

Test(pass_tracker, replay_skips_no_pass_when_bound_to_the_current_one)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 0, 4, 0));
    cr_expect_not(pass_tracker_replay_skips_passes(&tracker));
    /* a complete bound pass is header-only, but it is not a skipped pass */
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 0, 10, 0));
    cr_expect_not(pass_tracker_replay_skips_passes(&tracker));
}

Test(pass_tracker, continue_skips_no_pass)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 3, 4, 0));
    cr_expect_not(pass_tracker_replay_skips_passes(&tracker));
}

Test(pass_tracker, continue_makes_the_current_pass_the_bound_one)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 4, 3);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 4, 7, 0));
    expect_plan(&tracker, 4, 7, 1, false);
    expect_position(&tracker, 0, 4, 7);
    pass_tracker_note_delivered(&tracker, 1, true);
    expect_position(&tracker, 0, 4, 10);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 5, 0, 3, false);
}

Test(pass_tracker, continue_with_complete_index_is_header_only_then_next_pass)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 3, 10, 0));
    expect_plan(&tracker, 3, 10, 0, false);
    expect_position(&tracker, 0, 3, 10);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 4, 0, 10, false);
}

Test(pass_tracker, continue_can_go_back_to_an_earlier_pass)
{
    /* a tracker whose empty passes already ran (nothing started) */
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    pass_tracker_end_pass(&tracker);
    pass_tracker_end_pass(&tracker);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 1, 4, 0));
    expect_plan(&tracker, 1, 4, 6, false);
}

Test(pass_tracker, bound_index_past_n_is_clamped)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 0, 999, 0));
    cr_expect_eq(tracker.bound_index, 10);
    expect_plan(&tracker, 0, 10, 0, false);
    expect_position(&tracker, 0, 0, 10);
}

Test(pass_tracker, restore_after_started_is_refused_and_changes_nothing)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 0);
    pass_tracker_note_delivered(&tracker, 2, true);
    struct pass_tracker before = tracker;
    cr_expect_not(pass_tracker_restore(&tracker, RESUME_REPLAY, 3, 4, 0));
    cr_expect_not(pass_tracker_restore(&tracker, RESUME_CONTINUE, 3, 4, 0));
    cr_expect_eq(memcmp(&before, &tracker, sizeof tracker), 0);
    expect_position(&tracker, 0, 0, 4);
}

Test(pass_tracker, a_second_restore_before_start_replaces_the_first)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 2, 3, 0));
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 0, 6, 0));
    expect_plan(&tracker, 0, 6, 4, false);
}

/* --- whole-run simulations ------------------------------------------------ */

#define SIM_SEED 7
#define SIM_NAME "train.bin"

/* One run of K lock-step replicas over one file. */
struct sim_run {
    uint64_t record_count;
    uint32_t replicas;
    struct pass_tracker trackers[8];
};

static void sim_start(struct sim_run *run, uint64_t record_count, uint32_t replicas,
                      bool restore, enum resume_mode resume, uint64_t pass, uint64_t index)
{
    run->record_count = record_count;
    run->replicas = replicas;
    for (uint32_t rank = 0; rank < replicas; rank++) {
        pass_tracker_init(&run->trackers[rank], record_count, replicas, rank);
        if (restore)
            cr_assert(pass_tracker_restore(&run->trackers[rank], resume, pass, index, 0));
    }
}

/* Every replica consumes up to `records` more records of its current pass
 * (all replicas have the same view length), adding them to counts. */
static uint64_t sim_consume(struct sim_run *run, uint64_t records, unsigned *counts)
{
    uint64_t consumed = 0;
    for (uint32_t rank = 0; rank < run->replicas; rank++) {
        struct pass_tracker *tracker = &run->trackers[rank];
        struct pass_plan plan;
        pass_tracker_plan(tracker, &plan);
        struct record_permutation permutation;
        record_permutation_init(&permutation, run->record_count, true, SIM_SEED, SIM_NAME,
                                plan.pass, 0);
        uint64_t begin = tracker->delivered;
        uint64_t end = begin + records < plan.length ? begin + records : plan.length;
        for (uint64_t j = begin; j < end; j++) {
            uint64_t logical = view_logical_index(run->record_count, run->replicas, rank,
                                                  plan.start_index, j);
            uint64_t physical = record_permutation_apply(&permutation, logical);
            cr_assert_lt(physical, run->record_count);
            if (counts != NULL)
                counts[physical]++;
            consumed++;
        }
        if (end > begin)
            pass_tracker_note_delivered(tracker, end, true);
    }
    return consumed;
}

static uint64_t sim_length(const struct sim_run *run)
{
    struct pass_plan plan;
    pass_tracker_plan(&run->trackers[0], &plan);
    for (uint32_t rank = 1; rank < run->replicas; rank++) {
        struct pass_plan other;
        pass_tracker_plan(&run->trackers[rank], &other);
        cr_assert_eq(other.length, plan.length, "all replicas have equal view lengths");
        cr_assert_eq(other.pass, plan.pass);
    }
    return plan.length;
}

/* The snapshot position, identical on every replica in lock-step. */
static void sim_position(const struct sim_run *run, uint64_t *pass, uint64_t *index)
{
    pass_tracker_position(&run->trackers[0], 0, pass, index, &(uint64_t){0});
    for (uint32_t rank = 1; rank < run->replicas; rank++) {
        uint64_t other_pass, other_index;
        pass_tracker_position(&run->trackers[rank], 0, &other_pass, &other_index, &(uint64_t){0});
        cr_assert_eq(other_pass, *pass);
        cr_assert_eq(other_index, *index, "replicas disagree on current_index");
    }
}

static void sim_end_pass(struct sim_run *run)
{
    for (uint32_t rank = 0; rank < run->replicas; rank++)
        pass_tracker_end_pass(&run->trackers[rank]);
}

/* One pass split into segments: segment i runs on replicas[i] replicas,
 * starts from the previous snapshot and consumes fractions[i] (in 1/4) of
 * the view it sees, then snapshots; the last segment finishes the pass. */
static void sim_segmented_pass(uint64_t record_count, const uint32_t *replicas,
                               const unsigned *quarters, size_t segments,
                               enum resume_mode resume, uint64_t bound_pass)
{
    unsigned *counts = calloc(record_count, sizeof *counts);
    cr_assert_not_null(counts);
    uint64_t index = 0;
    uint64_t pass = bound_pass;
    for (size_t segment = 0; segment < segments; segment++) {
        struct sim_run run;
        sim_start(&run, record_count, replicas[segment], true, resume, pass, index);
        /* replay: passes before the bound one are header-only and deliver
         * nothing; a snapshot taken meanwhile binds the restored position */
        if (resume == RESUME_REPLAY) {
            for (uint64_t skipped = 0; skipped < bound_pass; skipped++) {
                cr_assert_eq(sim_length(&run), 0);
                cr_assert_eq(sim_consume(&run, 1, NULL), 0);
                uint64_t mid_pass, mid_index;
                sim_position(&run, &mid_pass, &mid_index);
                cr_assert_eq(mid_pass, pass);
                cr_assert_eq(mid_index, index);
                sim_end_pass(&run);
            }
        }
        uint64_t length = sim_length(&run);
        uint64_t want = segment + 1 == segments ? length : length * quarters[segment] / 4;
        uint64_t consumed = sim_consume(&run, want, counts);
        uint64_t new_pass, new_index;
        sim_position(&run, &new_pass, &new_index);
        cr_assert_eq(new_pass, bound_pass);
        cr_assert_geq(new_index, index);
        /* padding: the records served beyond the indices covered, < K */
        uint64_t covered = new_index - index;
        cr_assert_geq(consumed, covered);
        cr_assert_lt(consumed - covered, replicas[segment] > 1 ? replicas[segment] : 1,
                     "N=%llu segment %zu K=%u: %llu served for %llu indices",
                     (unsigned long long)record_count, segment, replicas[segment],
                     (unsigned long long)consumed, (unsigned long long)covered);
        index = new_index;
    }
    cr_assert_eq(index, record_count, "the pass is complete");
    /* padding repeats each record at most once, unless there are more
     * replicas than records (then the padding wraps around the pass) */
    uint32_t max_replicas = 1;
    for (size_t segment = 0; segment < segments; segment++)
        if (replicas[segment] > max_replicas)
            max_replicas = replicas[segment];
    unsigned most = max_replicas <= record_count
                        ? 2
                        : 1 + (unsigned)((max_replicas + record_count - 1) / record_count);
    for (uint64_t record = 0; record < record_count; record++)
        cr_assert(counts[record] >= 1 && counts[record] <= most,
                  "N=%llu record %llu delivered %u times", (unsigned long long)record_count,
                  (unsigned long long)record, counts[record]);
    free(counts);
}

static const uint64_t sim_record_counts[] = {1, 2, 3, 5, 7, 10, 16, 33, 100};
#define SIM_RECORD_COUNT_COUNT (sizeof sim_record_counts / sizeof sim_record_counts[0])

Test(pass_tracker_simulation, every_k_then_every_k_prime_replay)
{
    for (size_t n = 0; n < SIM_RECORD_COUNT_COUNT; n++)
        for (uint32_t k1 = 1; k1 <= 5; k1++)
            for (uint32_t k2 = 1; k2 <= 5; k2++)
                for (unsigned quarter = 0; quarter <= 4; quarter++) {
                    const uint32_t replicas[2] = {k1, k2};
                    const unsigned quarters[2] = {quarter, 0};
                    sim_segmented_pass(sim_record_counts[n], replicas, quarters, 2,
                                       RESUME_REPLAY, 0);
                }
}

Test(pass_tracker_simulation, adaptdl_restart_1_4_2_in_a_later_pass)
{
    /* as AdaptDL's restart test: 1 replica, then 4, then 2, in pass 2 */
    const uint32_t replicas[3] = {1, 4, 2};
    const unsigned quarters[3] = {1, 2, 0};
    for (size_t n = 0; n < SIM_RECORD_COUNT_COUNT; n++) {
        sim_segmented_pass(sim_record_counts[n], replicas, quarters, 3, RESUME_REPLAY, 2);
        sim_segmented_pass(sim_record_counts[n], replicas, quarters, 3, RESUME_CONTINUE, 2);
    }
}

Test(pass_tracker_simulation, every_k_then_every_k_prime_continue)
{
    for (size_t n = 0; n < SIM_RECORD_COUNT_COUNT; n++)
        for (uint32_t k1 = 1; k1 <= 5; k1++)
            for (uint32_t k2 = 1; k2 <= 5; k2++) {
                const uint32_t replicas[3] = {k1, k2, k1 % 3 + 1};
                const unsigned quarters[3] = {1, 3, 0};
                sim_segmented_pass(sim_record_counts[n], replicas, quarters, 3,
                                   RESUME_CONTINUE, 1);
            }
}

/* A whole run of several passes, snapshot mid-pass 1, restarted under
 * replay with a different K: pass 0 is skipped, pass 1 finishes, pass 2
 * is a full fresh pass. */
Test(pass_tracker_simulation, replay_skips_finished_passes_and_runs_later_ones_fully)
{
    const uint64_t record_count = 24;
    unsigned *counts = calloc(record_count, sizeof *counts);
    cr_assert_not_null(counts);

    struct sim_run first;
    sim_start(&first, record_count, 3, false, RESUME_REPLAY, 0, 0);
    sim_consume(&first, sim_length(&first), NULL);
    sim_end_pass(&first);
    sim_consume(&first, 3, counts);
    uint64_t pass, index;
    sim_position(&first, &pass, &index);
    cr_assert_eq(pass, 1);
    cr_assert_eq(index, 9);

    struct sim_run second;
    sim_start(&second, record_count, 2, true, RESUME_REPLAY, pass, index);
    cr_assert_eq(sim_length(&second), 0, "pass 0 is skipped");
    sim_end_pass(&second);
    cr_assert_eq(sim_length(&second), 8, "pass 1 resumes at 9: ceil(15 / 2)");
    sim_consume(&second, 8, counts);
    struct record_permutation permutation;
    record_permutation_init(&permutation, record_count, true, SIM_SEED, SIM_NAME, 1, 0);
    uint64_t padding = record_permutation_apply(&permutation, 0);
    for (uint64_t record = 0; record < record_count; record++)
        cr_assert_eq(counts[record], record == padding ? 2 : 1,
                     "pass 1: record %llu delivered %u times (padding repeats perm[0])",
                     (unsigned long long)record, counts[record]);
    sim_end_pass(&second);
    struct pass_plan plan;
    pass_tracker_plan(&second.trackers[1], &plan);
    cr_expect_eq(plan.pass, 2);
    cr_expect_eq(plan.start_index, 0);
    cr_expect_eq(plan.length, 12);
    free(counts);
}

/* --- statistical epochs: planned pass lengths (adaptshim(7) "Statistical epochs") ------------- */

static uint64_t planner_calls;
/* pass p of N records holds N + 5p records (pass 0: N) */
static uint64_t growing_planner(uint64_t record_count, uint64_t pass)
{
    planner_calls++;
    return record_count + 5 * pass;
}

Test(pass_tracker, a_statistical_file_takes_its_fresh_pass_lengths_from_the_planner)
{
    pass_tracker_length_planner = growing_planner;
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 3, 1);
    expect_plan(&tracker, 0, 0, 4, false);
    pass_tracker_set_statistical(&tracker, true);
    pass_tracker_end_pass(&tracker);
    pass_tracker_end_pass(&tracker);
    /* pass 2: M = 20, L = ceil(20 / 3) = 7 */
    expect_plan(&tracker, 2, 0, 7, false);
    cr_expect_eq(tracker.pass_length, 20);
    pass_tracker_note_delivered(&tracker, 7, true);
    uint64_t pass, index, length;
    pass_tracker_position(&tracker, 0, &pass, &index, &length);
    cr_expect_eq(index, 20, "current_index is capped at M, not N");
    cr_expect_eq(length, 20);
    pass_tracker_position(&tracker, 2, &pass, &index, &length);
    cr_expect_eq(index, 15);

    struct pass_tracker eval;
    uint64_t calls = planner_calls;
    pass_tracker_init(&eval, 10, 3, 1);
    pass_tracker_end_pass(&eval);
    expect_plan(&eval, 1, 0, 4, false);
    cr_expect_eq(planner_calls, calls, "an eval file is never planned");
    pass_tracker_length_planner = NULL;
}

Test(pass_tracker, the_bound_pass_keeps_its_length_and_later_passes_are_planned)
{
    pass_tracker_length_planner = growing_planner;
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 0);
    pass_tracker_set_statistical(&tracker, true);
    /* bound: pass 1 of length 37, 30 records done; now replayed with K = 2 */
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 1, 30, 37));
    expect_plan(&tracker, 0, 10, 0, true);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 1, 30, 4, false);
    cr_expect_eq(tracker.pass_length, 37);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 2, 0, 10, false);
    cr_expect_eq(tracker.pass_length, 20, "planned afresh");

    struct pass_tracker clamped;
    pass_tracker_init(&clamped, 10, 1, 0);
    cr_assert(pass_tracker_restore(&clamped, RESUME_CONTINUE, 0, 99, 12));
    expect_plan(&clamped, 0, 12, 0, false);
    struct pass_tracker old_snapshot;
    pass_tracker_init(&old_snapshot, 10, 1, 0);
    cr_assert(pass_tracker_restore(&old_snapshot, RESUME_CONTINUE, 0, 4, 0));
    expect_plan(&old_snapshot, 0, 4, 6, false);
    cr_expect_eq(old_snapshot.pass_length, 10, "length 0 means N");
    pass_tracker_length_planner = NULL;
}

static uint64_t resumed_answer;
static uint64_t resumed_consumed_seen;
static uint64_t fixed_resumed_planner(uint64_t record_count, uint64_t pass, uint64_t consumed,
                                      uint64_t bound_length)
{
    resumed_consumed_seen = consumed;
    return resumed_answer;
}

Test(pass_tracker, a_restored_pass_takes_the_resumed_planners_length_never_below_consumed)
{
    pass_tracker_resumed_length_planner = fixed_resumed_planner;
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 1);
    pass_tracker_set_statistical(&tracker, true);
    resumed_answer = 24;
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 3, 30, 37));
    cr_expect_eq(resumed_consumed_seen, 30);
    /* M = 24 replaces 37 only if it keeps the 30 consumed: it does not */
    cr_expect_eq(tracker.pass_length, 37);
    resumed_answer = 32;
    pass_tracker_init(&tracker, 10, 2, 1);
    pass_tracker_set_statistical(&tracker, true);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 3, 30, 37));
    cr_expect_eq(tracker.pass_length, 32);
    expect_plan(&tracker, 3, 30, 1, false);  /* rank 1 of the 2 left: 31 */

    struct pass_tracker eval;
    pass_tracker_init(&eval, 10, 2, 1);
    cr_assert(pass_tracker_restore(&eval, RESUME_CONTINUE, 3, 30, 37));
    cr_expect_eq(eval.pass_length, 37, "an eval file is never re-planned");
    pass_tracker_resumed_length_planner = NULL;
}

/* The longest pass (PASS_TRACKER_MAX_SWEEPS sweeps): whatever a planner
 * answers, no pass is longer, so no capture writes a length that a restore
 * refuses (snapshot_check.h). */
static uint64_t endless_planner(uint64_t record_count, uint64_t pass)
{
    return UINT64_MAX - pass;
}

static uint64_t endless_resumed_planner(uint64_t record_count, uint64_t pass, uint64_t consumed,
                                        uint64_t bound_length)
{
    return UINT64_MAX;
}

Test(pass_tracker, no_pass_is_longer_than_the_sweep_limit)
{
    cr_expect_eq(pass_tracker_longest_pass(10), 10 * (uint64_t)PASS_TRACKER_MAX_SWEEPS);
    cr_expect_eq(pass_tracker_longest_pass(UINT64_MAX / 2), UINT64_MAX, "saturated");
    pass_tracker_length_planner = endless_planner;
    pass_tracker_resumed_length_planner = endless_resumed_planner;
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 3, 1);
    pass_tracker_set_statistical(&tracker, true);
    cr_expect_eq(tracker.pass_length, pass_tracker_longest_pass(10), "fresh pass");
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 2, 30, 37));
    cr_expect_eq(tracker.pass_length, pass_tracker_longest_pass(10), "re-planned resumed pass");
    pass_tracker_resumed_length_planner = NULL;
    struct pass_tracker bound;
    pass_tracker_init(&bound, 10, 3, 1);
    cr_assert(pass_tracker_restore(&bound, RESUME_CONTINUE, 2, 5, UINT64_MAX));
    cr_expect_eq(bound.pass_length, pass_tracker_longest_pass(10), "restored length");
    pass_tracker_length_planner = NULL;
}

/* --- the counters read without the lock ------------------------------------- */

Test(pass_tracker, the_lock_free_counters_follow_deliveries_and_pass_ends)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 0);
    cr_expect_eq(pass_tracker_current_pass(&tracker), 0);
    cr_expect_not(pass_tracker_started(&tracker));
    pass_tracker_note_delivered(&tracker, 0, true);   /* a header byte's read */
    cr_expect(pass_tracker_started(&tracker));
    cr_expect_eq(pass_tracker_records_served(&tracker), 0);
    pass_tracker_note_delivered(&tracker, 3, true);
    pass_tracker_note_delivered(&tracker, 2, true);   /* never counted backwards */
    cr_expect_eq(pass_tracker_records_served(&tracker), 3);
    pass_tracker_note_delivered(&tracker, 5, true);
    pass_tracker_end_pass(&tracker);
    cr_expect_eq(pass_tracker_current_pass(&tracker), 1);
    cr_expect_eq(pass_tracker_passes_completed(&tracker), 1);
    cr_expect_not(pass_tracker_started(&tracker), "a fresh pass has not started");
    pass_tracker_note_delivered(&tracker, 2, true);
    cr_expect_eq(pass_tracker_records_served(&tracker), 7, "served counts across passes");
}

/* --- lengthening a pass to a count the trainer was told -------------------- */

Test(pass_tracker, a_resumed_pass_lengthens_to_the_count_asked_from_its_start)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 1);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 3, 6, 0));
    expect_plan(&tracker, 3, 6, 2, false);
    cr_expect(pass_tracker_lengthen(&tracker, 5), "5 records per replica, as at a fresh pass");
    expect_plan(&tracker, 3, 6, 5, false);
    cr_expect_eq(tracker.pass_length, 16, "s + K * 5: the last 6 from the next sweep");
    cr_expect_eq(tracker.bound_length, 16, "a re-fix of the bound pass keeps it");
    /* positions already in the view keep their records */
    cr_expect_eq(view_logical_index(16, 2, 1, 6, 0), 7);
    cr_expect_eq(view_logical_index(16, 2, 1, 6, 1), 9);
    cr_expect_eq(view_logical_index(16, 2, 1, 6, 2), 11, "into the next sweep");
    pass_tracker_note_delivered(&tracker, 5, true);
    expect_position(&tracker, 0, 3, 16);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 4, 0, 5, false);
    cr_expect_eq(tracker.pass_length, 10, "the next pass is a plain one");
}

Test(pass_tracker, lengthening_leaves_a_skipped_or_long_enough_pass_alone)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_expect_not(pass_tracker_lengthen(&tracker, 10), "not shorter");
    cr_expect_not(pass_tracker_lengthen(&tracker, 4), "a shorter count shortens nothing");
    expect_plan(&tracker, 0, 0, 10, false);

    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 2, 4, 0));
    cr_expect_not(pass_tracker_lengthen(&tracker, 10), "replay's skipped pass stays empty");
    expect_plan(&tracker, 0, 10, 0, true);

}

Test(pass_tracker, a_begun_pass_lengthens_and_keeps_what_it_delivered)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 0, 6, 0));
    pass_tracker_note_delivered(&tracker, 3, true);
    cr_expect(pass_tracker_lengthen(&tracker, 10));
    expect_plan(&tracker, 0, 6, 10, false);
    expect_position(&tracker, 0, 0, 9);
    cr_expect_eq(tracker.records_served, 3);
}

Test(pass_tracker, lengthening_stops_at_the_sweep_limit)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 3, 1, 0);
    cr_expect(pass_tracker_lengthen(&tracker, UINT64_MAX));
    cr_expect_eq(tracker.pass_length, pass_tracker_longest_pass(3));
}

/* --- moving a pass's start (a loader counting part of the view) ------------ */

Test(pass_tracker, advancing_the_start_continues_the_same_pass_after_what_was_delivered)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 0);
    cr_expect_not(pass_tracker_advance_start(&tracker), "nothing delivered");
    pass_tracker_note_delivered(&tracker, 2, true);
    cr_expect(pass_tracker_advance_start(&tracker));
    expect_plan(&tracker, 0, 4, 3, false);
    cr_expect_not(tracker.started);
    expect_position(&tracker, 0, 0, 4);
    cr_expect_eq(tracker.records_served, 2, "what was served stays served");
    pass_tracker_note_delivered(&tracker, 3, true);
    cr_expect_not(pass_tracker_advance_start(&tracker), "nothing of the pass would be left");
    expect_plan(&tracker, 0, 4, 3, false);
}

Test(pass_tracker, an_advanced_bound_pass_keeps_its_new_start_when_it_is_fixed_again)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 1, 2, 0));
    pass_tracker_note_delivered(&tracker, 3, true);
    cr_expect(pass_tracker_advance_start(&tracker));
    pass_tracker_set_statistical(&tracker, false);
    expect_plan(&tracker, 1, 5, 5, false);
}

/* adaptshim(7) "Own positioning": a trainer restored at index 6 of 10 places
 * its first read at its own record 6 (one replica, as before the kill): the
 * pass starts again at 0 with its 6 records delivered, so that record 6 of
 * the view is index 6.  With two replicas, rank 0's record 3 and rank 1's
 * record 3 (indices 6 and 7) are where each stopped.  A placement anywhere
 * else (a loader's own order, a count of another replica count), at the
 * first record, on a pass begun, or under replay changes nothing. */
Test(pass_tracker, a_first_read_placed_where_the_epoch_stopped_keeps_the_pass_coordinates)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 2, 6, 0));
    expect_plan(&tracker, 2, 6, 4, false);
    cr_expect_not(pass_tracker_resume_at_own_position(&tracker, 0), "the first record");
    cr_expect_not(pass_tracker_resume_at_own_position(&tracker, 7), "past what was consumed");
    expect_plan(&tracker, 2, 6, 4, false);
    cr_assert(pass_tracker_resume_at_own_position(&tracker, 6));
    expect_plan(&tracker, 2, 0, 10, false);
    expect_position(&tracker, 0, 2, 6);
    cr_expect_not(pass_tracker_resume_at_own_position(&tracker, 6), "only once");

    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 2, 6, 0));
    cr_expect_not(pass_tracker_resume_at_own_position(&tracker, 3), "its own order");
    expect_plan(&tracker, 2, 6, 4, false);

    pass_tracker_init(&tracker, 10, 2, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 2, 6, 0));
    cr_assert(pass_tracker_resume_at_own_position(&tracker, 3));
    expect_plan(&tracker, 2, 0, 5, false);
    expect_position(&tracker, 0, 2, 6);
    pass_tracker_note_delivered(&tracker, 4, true);
    expect_position(&tracker, 0, 2, 8);
    pass_tracker_init(&tracker, 10, 2, 1);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 2, 6, 0));
    cr_assert(pass_tracker_resume_at_own_position(&tracker, 3), "indices 1, 3, 5 consumed");

    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 2, 6, 0));
    pass_tracker_note_delivered(&tracker, 1, true);
    cr_expect_not(pass_tracker_resume_at_own_position(&tracker, 6), "the pass has begun");
    pass_tracker_init(&tracker, 10, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 0, 6, 0));
    cr_expect_not(pass_tracker_resume_at_own_position(&tracker, 6), "replay's own rule");
}

/* Reading twice before training: the pass read whole and ended is served
 * again, from its start, once; a pass ended short of its records, or one
 * followed by a pass already begun, is not. */
Test(pass_tracker, a_pass_read_whole_can_be_served_once_more)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 10, 2, 1);
    pass_tracker_note_delivered(&tracker, 5, true);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 1, 0, 5, false);
    cr_assert(pass_tracker_repeat_previous_pass(&tracker));
    expect_plan(&tracker, 0, 0, 5, false);
    cr_expect_eq(pass_tracker_passes_completed(&tracker), 0);
    cr_expect_not(pass_tracker_repeat_previous_pass(&tracker), "once");
    pass_tracker_note_delivered(&tracker, 5, true);
    pass_tracker_end_pass(&tracker);
    expect_plan(&tracker, 1, 0, 5, false);

    pass_tracker_init(&tracker, 10, 1, 0);
    pass_tracker_note_delivered(&tracker, 4, true);
    pass_tracker_end_pass(&tracker);
    cr_expect_not(pass_tracker_repeat_previous_pass(&tracker), "read short of its end");
    pass_tracker_init(&tracker, 10, 1, 0);
    pass_tracker_note_delivered(&tracker, 10, true);
    pass_tracker_end_pass(&tracker);
    pass_tracker_note_delivered(&tracker, 1, true);
    cr_expect_not(pass_tracker_repeat_previous_pass(&tracker), "the next pass has begun");
}

/* adaptshim(7) "Readers in their own order": a bound pass that serves only the
 * records its snapshot did not name delivered. */
Test(pass_tracker, a_selected_bound_pass_serves_its_remaining_records_once)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 100, 3, 1);
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 4, 20, 0));
    cr_assert(pass_tracker_select_undelivered(&tracker, 31));
    struct pass_plan plan = plan_of(&tracker);
    cr_expect_eq(plan.selected, 31);
    cr_expect_eq(plan.length, 11, "ceil(31 / 3)");
    cr_expect_eq(plan.start_index, 20);
    /* the rules for readers in order leave it alone */
    cr_expect_not(pass_tracker_resume_at_own_position(&tracker, 7));
    pass_tracker_note_delivered(&tracker, 5, true);
    cr_expect_not(pass_tracker_advance_start(&tracker));
    /* its own positions are not s + K*j: it binds its start, losing nothing */
    expect_position(&tracker, 0, 4, 20);
    /* a stale count lengthens it past its end: 3 * 12 = 36 = 31 + 5 */
    cr_expect_not(pass_tracker_lengthen(&tracker, 10), "31 already exceed 3 * 10");
    cr_assert(pass_tracker_lengthen(&tracker, 12));
    cr_expect_eq(tracker.selected, 36);
    cr_expect_eq(tracker.pass_length, 105);
    cr_expect_eq(plan_of(&tracker).length, 12);
    pass_tracker_end_pass(&tracker);
    cr_expect_eq(tracker.selected, 0, "the next pass is whole");
    cr_expect_eq(plan_of(&tracker).length, 34);
    cr_expect_not(tracker.has_previous, "nothing in flight is counted back into it");
}

Test(pass_tracker, replay_selects_only_once_it_reaches_the_bound_pass)
{
    struct pass_tracker tracker;
    pass_tracker_init(&tracker, 50, 1, 0);
    cr_assert(pass_tracker_restore(&tracker, RESUME_REPLAY, 2, 10, 0));
    cr_expect_not(pass_tracker_select_undelivered(&tracker, 41), "more than [10, 50) holds");
    cr_assert(pass_tracker_select_undelivered(&tracker, 12));
    cr_expect_eq(tracker.selected, 0, "pass 0 is skipped, header-only");
    pass_tracker_end_pass(&tracker);
    pass_tracker_end_pass(&tracker);
    cr_expect_eq(tracker.pass, 2);
    cr_expect_eq(plan_of(&tracker).length, 12);
    /* a later restore starts over without a selection */
    cr_assert(pass_tracker_restore(&tracker, RESUME_CONTINUE, 2, 10, 0));
    cr_expect_eq(tracker.selected, 0);
}
