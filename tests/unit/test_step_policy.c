/* test_step_policy.c - the step code's decisions (runtime/step_policy.h):
 * when a batch-size decision is due, the measured restart cost, and who
 * writes the job record. */
#include <criterion/criterion.h>

#include "step_policy.h"

Test(step_policy, the_first_decision_waits_only_for_trusted_statistics)
{
    cr_expect(step_policy_decision_due(false, false, true, false, 1.0, 0.0, 30.0),
              "trusted at 1 s");
    cr_expect(!step_policy_decision_due(false, false, false, false, 1.0, 0.0, 30.0),
              "not trusted");
    cr_expect(!step_policy_decision_due(false, true, true, false, 1.0, 0.0, 30.0),
              "after the first, the period");
    cr_expect(step_policy_decision_due(false, true, true, false, 31.0, 0.0, 30.0));
    cr_expect(!step_policy_decision_due(true, false, true, false, 1.0, 0.0, 30.0),
              "a given period holds from the start");
    cr_expect(step_policy_decision_due(true, false, false, false, 30.0, 0.0, 30.0));
}

/* A run that a decision moved to another batch decides once that batch is
 * measured, trusted statistics or not: a wrong move is undone then, not 30 s
 * (or 100 s of untrusted statistics) later. */
Test(step_policy, a_moved_batch_is_judged_once_measured)
{
    cr_expect(step_policy_decision_due(false, false, false, true, 1.0, 0.0, 30.0));
    cr_expect(!step_policy_decision_due(false, true, false, true, 1.0, 0.0, 30.0),
              "once per run");
    cr_expect(!step_policy_decision_due(true, false, false, true, 1.0, 0.0, 30.0),
              "a given period holds from the start");
}

Test(step_policy, the_restart_cost_is_from_the_last_exit_to_now)
{
    cr_expect_eq(step_policy_restart_cost(1000.0, 1002.5, 1), 2.5);
    cr_expect_eq(step_policy_restart_cost(1000.0, 1002.5, 0), -1, "no restart happened");
    cr_expect_eq(step_policy_restart_cost(0, 1002.5, 3), -1, "no exit recorded");
    cr_expect_eq(step_policy_restart_cost(2000.0, 1000.0, 1), -1, "a clock gone backwards");
    cr_expect_eq(step_policy_restart_cost(1000.0, 1000.0 + 86400.0, 1), -1, "a day or more");
}

Test(step_policy, rank_0_of_the_trainer_writes_the_job_record_once_it_made_a_step)
{
    cr_expect(step_policy_writes_job_record(true, 0, false, 5));
    cr_expect(!step_policy_writes_job_record(false, 0, false, 5), "no state directory");
    cr_expect(!step_policy_writes_job_record(true, 1, false, 5), "another rank");
    cr_expect(!step_policy_writes_job_record(true, 0, true, 5), "a forked child");
    cr_expect(!step_policy_writes_job_record(true, 0, false, 0), "a helper that made no step");
}
