/* run_policy.c - the decisions of a run (see run_policy.h).  Nothing here
 * may allocate, lock or call libc: the stop decisions run inside signal
 * handlers, and the others are kept to the same rule so that the module has
 * one. */
#include "run_policy.h"

#include <math.h>

#include "state_store.h"

/* --- the restart cost and its payback ---------------------------------------------- */

double restart_cost_seconds(const struct adaptdl_job_record *record)
{
    if (record->restart_cost_seconds > 0)
        return record->restart_cost_seconds;
    return RESTART_DEFAULT_COST_SECONDS;
}

double restart_payback_seconds(double restart_cost, double speedup)
{
    if (!(speedup > 1))
        return INFINITY;
    if (isinf(speedup))
        return restart_cost;
    return restart_cost * speedup / (speedup - 1);
}

/* --- the step code ------------------------------------------------------------------ */

#define STEP_POLICY_RESTART_COST_LIMIT 86400.0

/* The noise scale moved by the factor since the previous decision. */
static bool step_policy_noise_changed(double now_scale, double decided_scale)
{
    if (!(now_scale > 0) || !(decided_scale > 0) || !isfinite(now_scale) ||
        !isfinite(decided_scale))
        return false;
    double ratio = now_scale / decided_scale;
    return ratio >= STEP_POLICY_NOISE_CHANGE || ratio <= 1.0 / STEP_POLICY_NOISE_CHANGE;
}

bool step_policy_decision_due(const struct step_policy_decision_clock *clock)
{
    double since = clock->now - clock->last_decision;
    if (clock->period_given)
        return since >= clock->period;
    if (since >= clock->period)
        return true;
    if (!clock->first_decision_made)
        return clock->statistics_trusted || clock->moved_batch_measured;
    return clock->statistics_trusted && since >= STEP_POLICY_NOISE_MIN_SECONDS &&
           step_policy_noise_changed(clock->noise_scale, clock->noise_scale_decided);
}

double step_policy_restart_cost(double last_exit_unix_time, double now_unix_time,
                                uint32_t restarts)
{
    if (last_exit_unix_time <= 0 || restarts == 0)
        return -1;
    double cost = now_unix_time - last_exit_unix_time;
    return cost > 0 && cost < STEP_POLICY_RESTART_COST_LIMIT ? cost : -1;
}

bool step_policy_writes_job_record(bool has_directory, uint32_t rank, bool forked_child,
                                   uint64_t steps)
{
    return has_directory && rank == 0 && !forked_child && steps > 0;
}

/* --- a stop signal ------------------------------------------------------------------ */

enum stop_arrival_action stop_policy_on_arrival(const struct stop_arrival *arrival)
{
    /* With nothing to synchronize, waiting gains nothing: the signal keeps
     * the meaning the trainer (or the system) gave it. */
    if (!arrival->something_to_synchronize)
        return STOP_ARRIVAL_ORDINARY;
    if (arrival->interrupt && arrival->deferred_interrupts >= 1)
        return STOP_ARRIVAL_EXIT_AT_ONCE;
    return STOP_ARRIVAL_DEFER;
}

bool stop_policy_stops_at_train_read(const struct stop_read_facts *facts)
{
    if (!facts->stop_deferred || facts->agreed_by_reduction)
        return false;
    /* A worker that stopped on its own would fail its parent's batch. */
    return !facts->start_process_stopping;
}

double stop_policy_deadline(const struct stop_deadline_inputs *inputs)
{
    double deadline = inputs->requested_at + inputs->stop_seconds;
    /* A drain is a wait the user asked for: the deadline counts from its
     * end, when the replicas look for their last agreement point. */
    if (inputs->agreed && inputs->drain_seconds > 0) {
        double after_drain = inputs->agreed_at + inputs->drain_seconds + inputs->stop_seconds;
        if (after_drain > deadline)
            deadline = after_drain;
    }
    return deadline;
}

/* [how far the process has ended][a SIG_DFL stop was deferred][the job
 * record can be written] */
static const enum stop_deadline_action stop_deadline_table[3][2][2] = {
    [STOP_ENDING_RUNNING] = {
        /* only the trainer's handlers (they ran) or SIG_IGN: without the
         * library the process would have gone on, so it goes on */
        [false] = {STOP_DEADLINE_NOTHING, STOP_DEADLINE_NOTHING},
        /* it would have ended at the signal: it ends now, "restart me" */
        [true] = {[false] = STOP_DEADLINE_EXIT_AT_ONCE, [true] = STOP_DEADLINE_EXIT},
    },
    [STOP_ENDING_RECORDED] = {
        [false] = {STOP_DEADLINE_NOTHING, STOP_DEADLINE_NOTHING},
        /* the job record is written already */
        [true] = {STOP_DEADLINE_EXIT_AT_ONCE, STOP_DEADLINE_EXIT_AT_ONCE},
    },
    /* the process ends already, through the path that writes what it writes */
    [STOP_ENDING_EXITING] = {{STOP_DEADLINE_NOTHING, STOP_DEADLINE_NOTHING},
                             {STOP_DEADLINE_NOTHING, STOP_DEADLINE_NOTHING}},
};

enum stop_deadline_action stop_policy_at_deadline(const struct stop_deadline_facts *facts)
{
    unsigned ending = (unsigned)facts->ending;
    if (ending >= sizeof stop_deadline_table / sizeof stop_deadline_table[0])
        return STOP_DEADLINE_NOTHING;
    enum stop_deadline_action action =
        stop_deadline_table[ending][facts->default_action_deferred ? 1 : 0]
                           [facts->job_record_writable ? 1 : 0];
    /* The start process ends the job, and its workers with it: a child
     * that ended by its own deadline first would fail the parent's batch. */
    if (action != STOP_DEADLINE_NOTHING && facts->start_process_stopping)
        return STOP_DEADLINE_WAIT_AGAIN;
    return action;
}

bool stop_policy_exit_means_restart(const struct stop_exit_facts *facts)
{
    return facts->stop_deferred && facts->trainer_handler_ran_before_exit;
}
