/* step_policy.h - what the step code of the preload decides, apart from the
 * calls it makes: when a batch-size decision is due, what a restart cost,
 * and whether this process writes the job record (SPEC §5, §7). */
#ifndef ADAPTSHIM_STEP_POLICY_H
#define ADAPTSHIM_STEP_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* When a batch-size decision is due.  Unless ADAPTDL_DECIDE_SECONDS was
 * given (a fixed period from the start):
 *   - the first decision of a run comes as soon as the gradient statistics
 *     can be trusted, or, in a run a decision moved to another batch, once
 *     that batch has STEP_POLICY_MOVED_STEPS measured steps (a move that
 *     went wrong is undone then, from the measured throughputs, trusted
 *     statistics or not);
 *   - a later one comes `period` seconds after the previous, or sooner when
 *     the trusted noise scale has changed by STEP_POLICY_NOISE_CHANGE or more
 *     since the previous decision (at most one per
 *     STEP_POLICY_NOISE_MIN_SECONDS): the noise scale grows as training
 *     converges, and a job that waits out the period at a batch the grown
 *     noise makes too small trains that long at the wrong size. */
#define STEP_POLICY_MOVED_STEPS 5
#define STEP_POLICY_NOISE_CHANGE 1.5
#define STEP_POLICY_NOISE_MIN_SECONDS 1.0

struct step_policy_decision_clock {
    bool period_given;              /* ADAPTDL_DECIDE_SECONDS was set */
    bool first_decision_made;       /* on trusted statistics, or a moved batch measured */
    bool statistics_trusted;
    bool moved_batch_measured;
    double now;                     /* seconds, any origin shared with last_decision */
    double last_decision;
    double period;                  /* ADAPTDL_DECIDE_SECONDS */
    double noise_scale;             /* now; NAN when unknown */
    double noise_scale_decided;     /* at the previous decision; NAN when none */
};
bool step_policy_decision_due(const struct step_policy_decision_clock *clock);

/* The restart cost measured at this run's first step: from the previous
 * run's exit to now.  -1 when there is nothing to measure (no restart, no
 * exit recorded) or the clock says something absurd (negative, a day or
 * more: the job record is older than this job). */
double step_policy_restart_cost(double last_exit_unix_time, double now_unix_time,
                                uint32_t restarts);

/* One job record per job: rank 0 writes it (the others would race it, and
 * only rank 0 knows the batch-size decision), not a forked child (its
 * parent's), and not a process that made no step (a helper program the
 * trainer runs holds nothing newer than what it loaded: writing it back
 * could only undo a decision the trainer wrote meanwhile). */
bool step_policy_writes_job_record(bool has_directory, uint32_t rank, bool forked_child,
                                   uint64_t steps);

#endif
