/* test_stop_policy.c - the decisions of a stop signal (runtime/stop_policy.c):
 * ordinary behaviour without anything to synchronize, the second SIGINT,
 * the deadline (and its drain), what the deadline does, and when a
 * trainer's own exit becomes "restart me". */
#include <criterion/criterion.h>

#include "stop_policy.h"

Test(stop_policy, nothing_to_synchronize_keeps_the_ordinary_behaviour)
{
    struct stop_arrival arrival = {.something_to_synchronize = false, .interrupt = false};
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_ORDINARY);
    /* not even a second SIGINT is special: the first one already did what
     * it always does */
    arrival.interrupt = true;
    arrival.deferred_interrupts = 1;
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_ORDINARY);
}

Test(stop_policy, a_stop_with_something_to_synchronize_is_deferred)
{
    struct stop_arrival arrival = {.something_to_synchronize = true};
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_DEFER);
    arrival.interrupt = true;
    cr_expect_eq(stop_policy_on_arrival(&arrival), STOP_ARRIVAL_DEFER, "a first SIGINT");
}

Test(stop_policy, a_second_sigint_exits_at_once)
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

Test(stop_policy, a_train_read_stops_an_unsynchronized_process)
{
    struct stop_read_facts facts = {.stop_deferred = true};
    cr_expect(stop_policy_stops_at_train_read(&facts));
    facts.stop_deferred = false;
    cr_expect_not(stop_policy_stops_at_train_read(&facts), "no stop pending");
}

Test(stop_policy, a_train_read_leaves_an_agreed_stop_to_the_step_boundary)
{
    struct stop_read_facts facts = {.stop_deferred = true, .agreed_by_reduction = true};
    cr_expect_not(stop_policy_stops_at_train_read(&facts));
}

Test(stop_policy, a_worker_leaves_the_stop_to_its_stopping_start_process)
{
    /* a DataLoader worker signalled with its parent (a process group's
     * SIGTERM) must not exit first: the parent's batch would fail */
    struct stop_read_facts facts = {.stop_deferred = true, .start_process_stopping = true};
    cr_expect_not(stop_policy_stops_at_train_read(&facts));
    /* signalled alone, the child's stop is its own */
    facts.start_process_stopping = false;
    cr_expect(stop_policy_stops_at_train_read(&facts));
}

Test(stop_policy, the_deadline_counts_from_the_first_signal)
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

Test(stop_policy, a_drain_moves_the_deadline_past_its_end)
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

Test(stop_policy, the_deadline_ends_a_process_the_signal_would_have_ended)
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

Test(stop_policy, a_workers_deadline_waits_for_its_stopping_start_process)
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

Test(stop_policy, the_deadline_leaves_the_trainers_own_handling_alone)
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

Test(stop_policy, the_deadline_leaves_an_ending_process_alone)
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

Test(stop_policy, only_a_trainer_told_by_its_handler_exits_143_by_itself)
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
