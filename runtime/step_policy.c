/* step_policy.c - the step code's decisions (see step_policy.h). */
#include "step_policy.h"

#include <math.h>

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
