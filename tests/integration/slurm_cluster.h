/* slurm_cluster.h - a private Slurm for one integration test: munged,
 * slurmctld and slurmd of Debian's packages, started in a temporary
 * directory of their own (their own slurm.conf, munge key, sockets, ports,
 * state and logs), stopped by their pids and removed by
 * slurm_cluster_stop, which a test's .fini calls so that a failing test
 * leaves nothing running either. */
#ifndef ADAPTSHIM_TEST_SLURM_CLUSTER_H
#define ADAPTSHIM_TEST_SLURM_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

struct slurm_cluster {
    char *directory;        /* the daemons' files; removed by slurm_cluster_stop */
    char *conf;             /* DIRECTORY/slurm.conf */
    char *conf_setting;     /* "SLURM_CONF=..." for the clients' environment */
    pid_t munged, slurmctld, slurmd;
    unsigned cpus;          /* the node's CPUs: the machine's */
};

/* Starts the daemons and waits until the node is idle.  False (with the
 * reason in `why`) when this machine cannot run them: not root, the
 * packages missing, or a daemon that does not come up; whatever started
 * is stopped again then. */
bool slurm_cluster_start(struct slurm_cluster *cluster, char *why, size_t why_size);
/* Cancels every job, waits for its processes to end, stops the daemons by
 * pid and removes the directory.  Does nothing for a cluster that never
 * started; safe to call twice. */
void slurm_cluster_stop(struct slurm_cluster *cluster);

/* Runs a Slurm client (argv[0] a program name such as "sbatch", found in
 * /usr/bin) with SLURM_CONF set and `environment` added (may be NULL),
 * within `timeout_seconds`. */
int slurm_run(const struct slurm_cluster *cluster, struct run_result *result,
              char *const argv[], char *const environment[], double timeout_seconds);
/* Submits `script` with sbatch and the options (NULL-terminated), the
 * submitter's environment being `environment` (the job inherits it, as
 * sbatch's --export=ALL does); returns the job id, asserting success. */
unsigned long slurm_submit(const struct slurm_cluster *cluster, char *const options[],
                           const char *script, char *const environment[]);
/* One field of `scontrol show job` ("JobState", "ExitCode", "EndTime"...),
 * a new string, or NULL when the job or the field is unknown. */
char *slurm_job_field(const struct slurm_cluster *cluster, unsigned long job, const char *field);
/* Polls until the job's JobState is one of `states` (a space-separated
 * list such as "COMPLETED FAILED"), at most `timeout_seconds`; returns the
 * state reached (a new string), asserting that one was. */
char *slurm_wait_for_state(const struct slurm_cluster *cluster, unsigned long job,
                           const char *states, double timeout_seconds);
/* Runs `scontrol ARGUMENTS...` (NULL-terminated) and asserts it succeeds. */
void slurm_control(const struct slurm_cluster *cluster, char *const arguments[]);
/* After `scontrol requeue`: waits until the job is pending, then starts it
 * at once (StartTime=now skips the requeue's delay of about two minutes)
 * once the second in which its last run ended is over, since a start in
 * that same second is refused. */
void slurm_release_requeued(const struct slurm_cluster *cluster, unsigned long job);

#endif
