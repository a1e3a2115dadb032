/* test_run_policy.c - the decisions of a run (runtime/run_policy.h): the
 * restart cost a decision assumes and the time a faster configuration takes
 * to earn a restart back; when a batch-size decision is due, the measured
 * restart cost and who writes the job record; and what a stop signal does:
 * ordinary behaviour without anything to synchronize, the second SIGINT,
 * the deadline (and its drain), what the deadline does, and when a
 * trainer's own exit becomes "restart me". */
#include <criterion/criterion.h>

#include <math.h>

#include "run_policy.h"
#include "state_store.h"

/* --- the restart cost and its payback ---------------------------------------------- */

Test(run_policy, a_measured_cost_is_used_as_is)
{
    struct adaptdl_job_record record;
    job_record_init(&record);
    record.restart_cost_seconds = 4.5;
    cr_expect_eq(restart_cost_seconds(&record), 4.5);
}

Test(run_policy, an_unmeasured_cost_is_the_default)
{
    struct adaptdl_job_record record;
    job_record_init(&record);
    cr_expect_eq(restart_cost_seconds(&record), RESTART_DEFAULT_COST_SECONDS,
                 "a new record says -1: not measured");
    record.restart_cost_seconds = 0;
    cr_expect_eq(restart_cost_seconds(&record), RESTART_DEFAULT_COST_SECONDS,
                 "no restart takes no time: 0 is not a measurement");
}

Test(run_policy, payback_is_cost_times_speedup_over_speedup_minus_one)
{
    cr_expect_float_eq(restart_payback_seconds(30, 1.5), 90, 1e-9);
    cr_expect_float_eq(restart_payback_seconds(30, 2), 60, 1e-9);
    cr_expect_float_eq(restart_payback_seconds(10, 1.01), 1010, 1e-9);
    cr_expect_eq(restart_payback_seconds(0, 1.2), 0, "a free restart pays at once");
}

Test(run_policy, a_configuration_that_is_not_faster_never_pays_back)
{
    cr_expect(isinf(restart_payback_seconds(30, 1)));
    cr_expect(isinf(restart_payback_seconds(30, 0.8)));
    cr_expect(isinf(restart_payback_seconds(30, NAN)), "an unknown speedup is no speedup");
    cr_expect(isinf(restart_payback_seconds(30, -INFINITY)));
}

Test(run_policy, an_infinite_speedup_pays_back_in_the_restart_cost)
{
    cr_expect_eq(restart_payback_seconds(30, INFINITY), 30, "the limit, not NAN");
}

/* --- the step code ------------------------------------------------------------------ */

/* One row per case: the clock's inputs and whether a decision is due.
 * Times in seconds from the run's start, a 30 s period. */
struct decision_clock_case {
    const char *what;
    bool period_given, first_made, trusted, moved_measured;
    double now, last, noise, noise_decided;
    bool due;
};

static const struct decision_clock_case decision_clock_cases[] = {
    {"the first decision: trusted at 1 s", false, false, true, false, 1, 0, 9, NAN, true},
    {"the first decision: not trusted yet", false, false, false, false, 1, 0, NAN, NAN, false},
    {"untrusted still decides after the period", false, false, false, false, 30, 0, NAN, NAN,
     true},
    {"after the first, the period", false, true, true, false, 11, 10, 9, 9, false},
    {"the period elapsed", false, true, true, false, 40, 10, 9, 9, true},
    {"a given period holds from the start", true, false, true, false, 1, 0, 9, NAN, false},
    {"a given period, elapsed", true, false, false, false, 30, 0, NAN, NAN, true},
    /* a run that a decision moved to another batch decides once that batch
     * is measured, trusted statistics or not: a wrong move is undone then,
     * not 30 s (or 100 s of untrusted statistics) later */
    {"a moved batch, measured", false, false, false, true, 1, 0, NAN, NAN, true},
    {"a moved batch: once per run", false, true, false, true, 1, 0.5, NAN, NAN, false},
    {"a moved batch under a given period", true, false, false, true, 1, 0, NAN, NAN, false},
    /* the noise scale grown or shrunk by 1.5 since the previous decision */
    {"noise grown 1.5x", false, true, true, false, 12, 10, 15, 10, true},
    {"noise shrunk 1.5x", false, true, true, false, 12, 10, 10, 15, true},
    {"noise grown 1.4x only", false, true, true, false, 12, 10, 14, 10, false},
    {"noise grown, but within a second of the decision", false, true, true, false, 10.5, 10,
     30, 10, false},
    {"noise grown, statistics not trusted", false, true, false, false, 12, 10, 30, 10, false},
    {"noise grown, no noise at the previous decision", false, true, true, false, 12, 10, 30,
     NAN, false},
    {"noise grown under a given period", true, true, true, false, 12, 10, 30, 10, false},
};

Test(run_policy, a_decision_is_due_by_the_period_the_first_statistics_or_a_noise_change)
{
    for (size_t i = 0; i < sizeof decision_clock_cases / sizeof decision_clock_cases[0]; i++) {
        const struct decision_clock_case *c = &decision_clock_cases[i];
        struct step_policy_decision_clock clock = {
            .period_given = c->period_given,
            .first_decision_made = c->first_made,
            .statistics_trusted = c->trusted,
            .moved_batch_measured = c->moved_measured,
            .now = c->now,
            .last_decision = c->last,
            .period = 30.0,
            .noise_scale = c->noise,
            .noise_scale_decided = c->noise_decided,
        };
        cr_expect_eq(step_policy_decision_due(&clock), c->due, "%s", c->what);
    }
}

Test(run_policy, the_restart_cost_is_from_the_last_exit_to_now)
{
    cr_expect_eq(step_policy_restart_cost(1000.0, 1002.5, 1), 2.5);
    cr_expect_eq(step_policy_restart_cost(1000.0, 1002.5, 0), -1, "no restart happened");
    cr_expect_eq(step_policy_restart_cost(0, 1002.5, 3), -1, "no exit recorded");
    cr_expect_eq(step_policy_restart_cost(2000.0, 1000.0, 1), -1, "a clock gone backwards");
    cr_expect_eq(step_policy_restart_cost(1000.0, 1000.0 + 86400.0, 1), -1, "a day or more");
}

Test(run_policy, rank_0_of_the_trainer_writes_the_job_record_once_it_made_a_step)
{
    cr_expect(step_policy_writes_job_record(true, 0, false, 5));
    cr_expect(!step_policy_writes_job_record(false, 0, false, 5), "no state directory");
    cr_expect(!step_policy_writes_job_record(true, 1, false, 5), "another rank");
    cr_expect(!step_policy_writes_job_record(true, 0, true, 5), "a forked child");
    cr_expect(!step_policy_writes_job_record(true, 0, false, 0), "a helper that made no step");
}

/* --- a stop signal ------------------------------------------------------------------ */

Test(run_policy, nothing_to_synchronize_keeps_the_ordinary_behaviour)
{
    struct stop_arrival arrival = {.something_to_synchronize = false, .interrupt = false};
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_ORDINARY);
    /* not even a second SIGINT is special: the first one already did what
     * it always does */
    arrival.interrupt = true;
    arrival.deferred_interrupts = 1;
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_ORDINARY);
}

Test(run_policy, a_stop_with_something_to_synchronize_is_deferred)
{
    struct stop_arrival arrival = {.something_to_synchronize = true};
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_DEFER);
    arrival.interrupt = true;
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_DEFER, "a first SIGINT");
}

Test(run_policy, a_second_sigint_exits_at_once)
{
    struct stop_arrival arrival = {
        .something_to_synchronize = true, .interrupt = true, .deferred_interrupts = 1};
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_EXIT_AT_ONCE);
    arrival.deferred_interrupts = 5;
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_EXIT_AT_ONCE);
    /* a SIGTERM after a SIGINT is one more request, not an interrupt */
    arrival.interrupt = false;
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_DEFER);
}

Test(run_policy, a_train_read_stops_an_unsynchronized_process)
{
    struct stop_read_facts facts = {.stop_deferred = true};
    cr_expect(stop_policy_stops_at_train_read(&facts));
    facts.stop_deferred = false;
    cr_expect_not(stop_policy_stops_at_train_read(&facts), "no stop pending");
}

Test(run_policy, a_train_read_leaves_an_agreed_stop_to_the_step_boundary)
{
    struct stop_read_facts facts = {.stop_deferred = true, .agreed_by_reduction = true};
    cr_expect_not(stop_policy_stops_at_train_read(&facts));
}

Test(run_policy, a_worker_leaves_the_stop_to_its_stopping_start_process)
{
    /* a DataLoader worker signalled with its parent (a process group's
     * SIGTERM) must not exit first: the parent's batch would fail */
    struct stop_read_facts facts = {.stop_deferred = true, .start_process_stopping = true};
    cr_expect_not(stop_policy_stops_at_train_read(&facts));
    /* signalled alone, the child's stop is its own */
    facts.start_process_stopping = false;
    cr_expect(stop_policy_stops_at_train_read(&facts));
}

Test(run_policy, the_deadline_counts_from_the_first_signal)
{
    struct stop_deadline_inputs inputs = {.requested_at = 100, .stop_seconds = 10};
    cr_expect_float_eq(stop_policy_deadline(&inputs), 110, 1e-9);
    inputs.stop_seconds = 0;
    cr_expect_float_eq(stop_policy_deadline(&inputs), 100, 1e-9, "0: no wait at all");
    /* an agreed stop without a drain is taken at once: nothing extends */
    inputs.stop_seconds = 10;
    inputs.agreed = true;
    inputs.agreed_at = 105;
    cr_expect_float_eq(stop_policy_deadline(&inputs), 110, 1e-9);
}

Test(run_policy, a_drain_moves_the_deadline_past_its_end)
{
    struct stop_deadline_inputs inputs = {.requested_at = 100, .stop_seconds = 10,
                                          .agreed = true, .agreed_at = 103,
                                          .drain_seconds = 60};
    cr_expect_float_eq(stop_policy_deadline(&inputs), 173, 1e-9);
    /* the drain is not agreed yet: the signal's own deadline */
    inputs.agreed = false;
    cr_expect_float_eq(stop_policy_deadline(&inputs), 110, 1e-9);
    /* never earlier than the signal's own deadline */
    inputs.agreed = true;
    inputs.agreed_at = 0;
    inputs.drain_seconds = 1;
    cr_expect_float_eq(stop_policy_deadline(&inputs), 110, 1e-9);
}

Test(run_policy, the_deadline_ends_a_process_the_signal_would_have_ended)
{
    struct stop_deadline_facts facts = {.default_action_deferred = true,
                                        .ending = STOP_ENDING_RUNNING,
                                        .job_record_writable = true};
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_EXIT);
    facts.job_record_writable = false;
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_EXIT_AT_ONCE,
                 "a forked child never writes the job record");
    facts.job_record_writable = true;
    facts.ending = STOP_ENDING_RECORDED;
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_EXIT_AT_ONCE,
                 "the record was written at MPI_Finalize");
}

Test(run_policy, a_workers_deadline_waits_for_its_stopping_start_process)
{
    struct stop_deadline_facts facts = {.default_action_deferred = true,
                                        .ending = STOP_ENDING_RUNNING,
                                        .job_record_writable = false,
                                        .start_process_stopping = true};
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_WAIT_AGAIN);
    /* the start process is gone or has no stop pending: the child's own
     * deadline stands */
    facts.start_process_stopping = false;
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_EXIT_AT_ONCE);
    /* nothing to wait for when the deadline would do nothing anyway */
    facts.start_process_stopping = true;
    facts.default_action_deferred = false;
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_NOTHING);
    facts.default_action_deferred = true;
    facts.ending = STOP_ENDING_EXITING;
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_NOTHING);
}

Test(run_policy, the_deadline_leaves_the_trainers_own_handling_alone)
{
    /* its handler ran at the signal, or it ignores the signal: without the
     * library it would still be running */
    struct stop_deadline_facts facts = {.default_action_deferred = false,
                                        .ending = STOP_ENDING_RUNNING,
                                        .job_record_writable = true};
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_NOTHING);
    facts.ending = STOP_ENDING_RECORDED;
    cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_NOTHING);
}

Test(run_policy, the_deadline_leaves_an_ending_process_alone)
{
    for (int deferred = 0; deferred < 2; deferred++)
        for (int writable = 0; writable < 2; writable++) {
            struct stop_deadline_facts facts = {.default_action_deferred = deferred,
                                                .ending = STOP_ENDING_EXITING,
                                                .job_record_writable = writable};
            cr_expect_eq(stop_policy_at_deadline(&facts), STOP_DEADLINE_NOTHING);
        }
    struct stop_deadline_facts unknown = {.default_action_deferred = true, .ending = 7};
    cr_expect_eq(stop_policy_at_deadline(&unknown), STOP_DEADLINE_NOTHING);
}

Test(run_policy, only_a_trainer_told_by_its_handler_exits_143_by_itself)
{
    struct stop_exit_facts facts = {0};
    cr_expect_not(stop_policy_exit_means_restart(&facts), "no stop at all");
    /* no handler of its own: the trainer finished before the shim's stop,
     * its work is done (a finished job must not be relaunched) */
    facts.stop_deferred = true;
    cr_expect_not(stop_policy_exit_means_restart(&facts));
    /* its handler ran: it stopped because it was told to */
    facts.trainer_handler_ran_before_exit = true;
    cr_expect(stop_policy_exit_means_restart(&facts));
}
