/* test_step_policy.c - the step code's decisions (runtime/step_policy.h):
 * when a batch-size decision is due, the measured restart cost, and who
 * writes the job record. */
#include <criterion/criterion.h>
#include <math.h>

#include "step_policy.h"

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

Test(step_policy, a_decision_is_due_by_the_period_the_first_statistics_or_a_noise_change)
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
