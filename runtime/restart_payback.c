/* restart_payback.c - the restart cost and its payback time (see
 * restart_payback.h). */
#include "restart_payback.h"

#include <math.h>

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
