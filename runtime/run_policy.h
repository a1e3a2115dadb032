/* run_policy.h - the decisions of a run, apart from the calls that carry
 * them out: when a batch-size decision is due, what a restart costs and how
 * soon a faster configuration earns it back, which process writes the job
 * record, and what a stop signal (SIGTERM, SIGINT, SIGUSR1) does when it
 * arrives, at a train read, at its deadline and when the trainer exits by
 * itself.
 *
 * The shim and the runtime gather the facts, some of them inside a signal
 * handler; every function here is pure (no allocation, no lock, no libc
 * call: the math.h classifications are compiler built-ins), so each is safe
 * to call from a signal handler and the unit tests can feed it any facts.
 * Anything may include this header; it includes nothing of the project's. */
#ifndef ADAPTSHIM_RUN_POLICY_H
#define ADAPTSHIM_RUN_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* The job record (state_store.h); only pointed to here. */
struct adaptdl_job_record;

/* ============================================================================
 * The restart cost and its payback
 *
 * A restart for a batch size or a replica count stops the job for C
 * seconds; afterwards it runs S times faster.  The time lost is made up
 * after C * S / (S - 1) seconds of the new configuration: the payback.
 * The batch-size decision and the replica-count choice both weigh a
 * restart this way, with the same cost, so the arithmetic lives here once.
 * ========================================================================= */

/* Pollux's restart cost until one has been measured. */
#define RESTART_DEFAULT_COST_SECONDS 30.0

/* The job record's measured restart cost, or the default while none has
 * been measured (a cost of 0 or less is "not measured"). */
double restart_cost_seconds(const struct adaptdl_job_record *record);

/* C * S / (S - 1) for a speedup S above 1; C itself for an infinite
 * speedup (the limit); INFINITY for a speedup of 1 or less or NAN: a
 * configuration that is not faster never pays a restart back. */
double restart_payback_seconds(double restart_cost, double speedup);

/* ============================================================================
 * The step code: when to decide, the measured restart cost, who writes the
 * job record
 * ========================================================================= */

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

/* ============================================================================
 * A stop signal: on arrival, at a train read, at the deadline, and the
 * status of a process that ends by itself while a stop is pending
 * ========================================================================= */

/* The statuses of the stops the shim makes. */
#define STOP_STATUS_RESTART 143      /* "restart me" */
#define STOP_STATUS_INTERRUPTED 130  /* a second SIGINT: stopped for good */

/* What the trainer set for a stop signal, i.e. what the signal would do
 * without the library. */
enum stop_disposition {
    STOP_DISPOSITION_DEFAULT = 0,    /* SIG_DFL: the process ends */
    STOP_DISPOSITION_IGNORE,         /* SIG_IGN: nothing happens */
    STOP_DISPOSITION_HANDLER,        /* a function of the trainer's runs */
};

/* --- arrival ------------------------------------------------------------------ */

struct stop_arrival {
    /* data views, a checkpoint glob, or MPI up: there is a point to stop at
     * that is better than where the signal finds the trainer */
    bool something_to_synchronize;
    bool interrupt;                  /* the signal is SIGINT */
    unsigned deferred_interrupts;    /* SIGINTs deferred before this one */
};

enum stop_arrival_action {
    /* the signal behaves exactly as without the library (the trainer's
     * handler runs, or it is ignored, or the process ends by it) */
    STOP_ARRIVAL_ORDINARY = 0,
    /* the stop waits for the next agreement point, at most until the
     * deadline; the trainer's own handler runs now */
    STOP_ARRIVAL_DEFER,
    /* a second SIGINT: exit at once with STOP_STATUS_INTERRUPTED */
    STOP_ARRIVAL_EXIT_AT_ONCE,
};

enum stop_arrival_action stop_policy_on_arrival(const struct stop_arrival *arrival);

/* --- a train read ------------------------------------------------------------- */

struct stop_read_facts {
    bool stop_deferred;              /* this process deferred a stop signal */
    /* the replicas agree on stops through the piggy-backed reduction: the
     * step boundary decides, not the read */
    bool agreed_by_reduction;
    /* this process is a forked child (a DataLoader worker) and the process
     * that started the trainer, still running, has a stop pending too: the
     * stop is that process's to make (shared_stop_flag.h) */
    bool start_process_stopping;
};

/* True when the process stops at this train read, with status 143. */
bool stop_policy_stops_at_train_read(const struct stop_read_facts *facts);

/* --- the deadline ------------------------------------------------------------- */

struct stop_deadline_inputs {
    double requested_at;   /* the first deferred stop signal, in seconds */
    double stop_seconds;   /* ADAPTDL_STOP_SECONDS */
    /* every replica agreed to stop; with a drain they run on until the
     * trainer's next checkpoint commit, or until drain_seconds passed, and
     * then wait for one more agreement point */
    bool agreed;
    double agreed_at;
    double drain_seconds;  /* ADAPTDL_DRAIN */
};

/* The moment past which the stop no longer waits (same clock as the
 * inputs): requested_at + stop_seconds, or, once an agreed stop drains,
 * agreed_at + drain_seconds + stop_seconds if that is later. */
double stop_policy_deadline(const struct stop_deadline_inputs *inputs);

/* How far the process's own ending has gone. */
enum stop_ending {
    STOP_ENDING_RUNNING = 0,         /* nothing ended yet */
    /* the job record and the exit event are written (MPI_Finalize), but
     * the trainer runs on */
    STOP_ENDING_RECORDED,
    STOP_ENDING_EXITING,             /* the process is already ending */
};

struct stop_deadline_facts {
    /* some deferred stop signal would have ended the process without the
     * library (its disposition is SIG_DFL) */
    bool default_action_deferred;
    enum stop_ending ending;
    /* a thread other than a signal handler can write the job record: false
     * in a forked child, which never writes it */
    bool job_record_writable;
    /* a forked child whose start process, still running, has a stop pending
     * too: the start process's stop ends the job */
    bool start_process_stopping;
};

enum stop_deadline_action {
    /* the trainer's own handlers or SIG_IGN govern what the signals do, or
     * the process is already ending: nothing to add */
    STOP_DEADLINE_NOTHING = 0,
    STOP_DEADLINE_EXIT,              /* write the job record, exit 143 */
    STOP_DEADLINE_EXIT_AT_ONCE,      /* exit 143, the job record untouched */
    /* a forked child leaves the stop to its start process: it waits one
     * more ADAPTDL_STOP_SECONDS and looks again */
    STOP_DEADLINE_WAIT_AGAIN,
};

enum stop_deadline_action stop_policy_at_deadline(const struct stop_deadline_facts *facts);

/* --- the status of a process that ends by itself ------------------------------ */

struct stop_exit_facts {
    bool stop_deferred;              /* a stop signal was deferred */
    /* ... and the trainer's own handler for it ran before its main
     * returned: the trainer stopped because it was told to */
    bool trainer_handler_ran_before_exit;
};

/* True when the trainer's own exit must become STOP_STATUS_RESTART: its
 * handler ran for a stop signal, so the job was preempted and is not done.
 * A trainer that had no handler for the signal (or got it after main
 * returned) ended by itself with its work done: its status stands. */
bool stop_policy_exit_means_restart(const struct stop_exit_facts *facts);

#endif
