/* test_replica_outcome.c - the status of a job from its replicas' ends
 * (runtime/replica_outcome.h): every replica 0 is done; the first crash
 * decides and stops the others at once; a 143 asks the others to stop and
 * whatever they end with then is a stop; some 0 and some 143 is 143; a
 * signal counts as 128 + its number. */
#include <criterion/criterion.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "replica_outcome.h"

static struct replica_outcome outcome_of(uint32_t replicas)
{
    struct replica_outcome outcome;
    replica_outcome_init(&outcome, replicas);
    return outcome;
}

Test(replica_outcome, every_replica_finished_is_done)
{
    struct replica_outcome outcome = outcome_of(3);
    for (uint32_t rank = 0; rank < 3; rank++) {
        cr_expect(!replica_outcome_all_ended(&outcome));
        cr_expect_eq(replica_outcome_replica_ended(&outcome, rank, 0), REPLICA_OUTCOME_NOTHING,
                     "a finished replica leaves the others running");
    }
    cr_expect(replica_outcome_all_ended(&outcome));
    cr_expect_eq(replica_outcome_job_status(&outcome), 0);
}

Test(replica_outcome, the_first_crash_decides_and_stops_the_others_at_once)
{
    struct replica_outcome outcome = outcome_of(3);
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 2, 0), REPLICA_OUTCOME_NOTHING);
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 1, 7),
                 REPLICA_OUTCOME_TERMINATE_OTHERS);
    /* the others die of the launcher's SIGTERM: no new decision */
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 0, 128 + SIGTERM),
                 REPLICA_OUTCOME_NOTHING);
    cr_expect_eq(replica_outcome_job_status(&outcome), 7);
    cr_expect_eq(outcome.crash_rank, 1);
}

Test(replica_outcome, a_stop_asks_the_others_and_their_failures_are_a_stop)
{
    struct replica_outcome outcome = outcome_of(3);
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 0, 143), REPLICA_OUTCOME_STOP_OTHERS);
    /* a peer fails in a collective with the departed replica */
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 1, 1), REPLICA_OUTCOME_NOTHING);
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 2, 143), REPLICA_OUTCOME_NOTHING);
    cr_expect_eq(replica_outcome_job_status(&outcome), 143);
}

Test(replica_outcome, a_forwarded_stop_makes_every_end_a_stop_unless_all_finished)
{
    struct replica_outcome stopped = outcome_of(2);
    replica_outcome_stop_requested(&stopped);
    cr_expect_eq(replica_outcome_replica_ended(&stopped, 1, 134), REPLICA_OUTCOME_NOTHING);
    cr_expect_eq(replica_outcome_replica_ended(&stopped, 0, 143), REPLICA_OUTCOME_NOTHING);
    cr_expect_eq(replica_outcome_job_status(&stopped), 143);

    struct replica_outcome finished = outcome_of(2);
    replica_outcome_stop_requested(&finished);
    replica_outcome_replica_ended(&finished, 0, 0);
    replica_outcome_replica_ended(&finished, 1, 0);
    cr_expect_eq(replica_outcome_job_status(&finished), 0, "the stop came after the end");
}

Test(replica_outcome, some_finished_and_some_stopped_is_a_stop)
{
    struct replica_outcome outcome = outcome_of(2);
    replica_outcome_replica_ended(&outcome, 0, 0);
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 1, 143), REPLICA_OUTCOME_STOP_OTHERS);
    cr_expect_eq(replica_outcome_job_status(&outcome), 143);
}

Test(replica_outcome, a_crash_after_a_finish_is_a_crash)
{
    struct replica_outcome outcome = outcome_of(2);
    replica_outcome_replica_ended(&outcome, 0, 0);
    cr_expect_eq(replica_outcome_replica_ended(&outcome, 1, 128 + SIGSEGV),
                 REPLICA_OUTCOME_TERMINATE_OTHERS);
    cr_expect_eq(replica_outcome_job_status(&outcome), 128 + SIGSEGV);
}

Test(replica_outcome, wait_statuses_read_as_a_shell_reports_them)
{
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0)
        _exit(143);
    int wait_status = 0;
    cr_assert_eq(waitpid(child, &wait_status, 0), child);
    cr_expect_eq(replica_outcome_status_of(wait_status), 143);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        raise(SIGKILL);
        _exit(0);
    }
    cr_assert_eq(waitpid(child, &wait_status, 0), child);
    cr_expect_eq(replica_outcome_status_of(wait_status), 128 + SIGKILL);
}
