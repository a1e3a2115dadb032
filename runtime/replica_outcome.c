/* replica_outcome.c - the job's status from its replicas' ends
 * (replica_outcome.h). */
#include "replica_outcome.h"

#include <sys/wait.h>

void replica_outcome_init(struct replica_outcome *outcome, uint32_t replicas)
{
    *outcome = (struct replica_outcome){.replicas = replicas};
}

void replica_outcome_stop_requested(struct replica_outcome *outcome)
{
    if (!outcome->crashed)
        outcome->stopping = true;
}

int replica_outcome_status_of(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 255;
}

enum replica_outcome_action replica_outcome_replica_ended(struct replica_outcome *outcome,
                                                          uint32_t rank, int status)
{
    outcome->ended++;
    if (status == 0) {
        outcome->finished++;
        return REPLICA_OUTCOME_NOTHING;
    }
    /* the first status that is not 0 decided already */
    if (outcome->stopping || outcome->crashed)
        return REPLICA_OUTCOME_NOTHING;
    if (status == REPLICA_OUTCOME_STOPPED) {
        outcome->stopping = true;
        return REPLICA_OUTCOME_STOP_OTHERS;
    }
    outcome->crashed = true;
    outcome->crash_status = status;
    outcome->crash_rank = rank;
    return REPLICA_OUTCOME_TERMINATE_OTHERS;
}

bool replica_outcome_all_ended(const struct replica_outcome *outcome)
{
    return outcome->ended >= outcome->replicas;
}

int replica_outcome_job_status(const struct replica_outcome *outcome)
{
    if (outcome->crashed)
        return outcome->crash_status;
    if (outcome->finished == outcome->replicas)
        return 0;
    return REPLICA_OUTCOME_STOPPED;
}
