/* step_policy.c - the step code's decisions (see step_policy.h). */
#include "step_policy.h"

#define STEP_POLICY_RESTART_COST_LIMIT 86400.0

bool step_policy_decision_due(bool period_given, bool first_decision_made,
                              bool statistics_trusted, bool moved_batch_measured, double now,
                              double last_decision, double period)
{
    if (!period_given && !first_decision_made && (statistics_trusted || moved_batch_measured))
        return true;
    return now - last_decision >= period;
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
