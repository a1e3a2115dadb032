/* replica_outcome.h - how the ends of a job's replicas make the status of
 * the job, for adaptdl-torch-launch (adaptdl-wrap(1) "PYTORCH JOBS").  It answers
 * adaptdl-wrap's supervision loop as mpirun does: 0 done, 143 restart me,
 * anything else a crash.
 *
 * A replica's status is its exit status, or 128 + N when signal N ended it
 * (as a shell reports it: SIGTERM reads as 143, a stop; SIGKILL as 137, a
 * crash).  The rules, in the order replicas end:
 *
 *   - a replica that ends with 0 has finished: the others run on;
 *   - the first one that ends otherwise, while no stop is under way,
 *     decides: 143 starts a stop (the others are asked to stop gracefully,
 *     then stopped), any other status is a crash (the others are stopped at
 *     once) and is the job's status;
 *   - once a stop is under way (a stop signal was forwarded, or a replica
 *     ended with 143), the replicas that end are stopped ones whatever
 *     their status: peers of a departed replica fail in their collectives,
 *     and that is no crash of the job;
 *   - when every replica has ended: the crash's status if there was one,
 *     else 0 when every replica finished with 0, else 143 (some finished,
 *     some stopped: the job is not done everywhere, and a relaunch resumes
 *     from the checkpoint).
 *
 * Pure: no allocation, no I/O. */
#ifndef ADAPTSHIM_REPLICA_OUTCOME_H
#define ADAPTSHIM_REPLICA_OUTCOME_H

#include <stdbool.h>
#include <stdint.h>

#define REPLICA_OUTCOME_STOPPED 143

/* What the launcher must do to the replicas still running. */
enum replica_outcome_action {
    REPLICA_OUTCOME_NOTHING = 0,
    REPLICA_OUTCOME_STOP_OTHERS,       /* graceful stop (SIGUSR1), then at once after a grace */
    REPLICA_OUTCOME_TERMINATE_OTHERS,  /* at once (SIGTERM), SIGKILL after a grace */
};

struct replica_outcome {
    uint32_t replicas;
    uint32_t ended;
    uint32_t finished;          /* ended with 0 */
    bool stopping;              /* a stop is under way */
    bool crashed;
    int crash_status;           /* the status of the crash that decided */
    uint32_t crash_rank;
};

void replica_outcome_init(struct replica_outcome *outcome, uint32_t replicas);

/* A stop signal was forwarded to the replicas. */
void replica_outcome_stop_requested(struct replica_outcome *outcome);

/* The status a process's wait status stands for: its exit status, or
 * 128 + the signal that ended it. */
int replica_outcome_status_of(int wait_status);

/* Replica `rank` ended with `status` (replica_outcome_status_of); says what
 * to do to the others. */
enum replica_outcome_action replica_outcome_replica_ended(struct replica_outcome *outcome,
                                                          uint32_t rank, int status);

bool replica_outcome_all_ended(const struct replica_outcome *outcome);

/* The job's status once every replica has ended (the rules above). */
int replica_outcome_job_status(const struct replica_outcome *outcome);

#endif
