/* ending.c - how a configured process ends, once and by one path (see
 * ending.h).
 *
 * Four paths can end a process: an agreed stop (or a stop at a train read)
 * taken by the shim, the trainer's own exit through the atexit hook,
 * MPI_Finalize, and the deadline's worker thread when a stop found no
 * agreement point in time.  They may race: the worker runs beside the
 * trainer's thread, and a trainer may exit while a reader thread stops.
 * An atomic ending state that only moves forward settles it: the first path
 * to move it writes what the process leaves behind (shim_ending_leave_behind),
 * and a path that finds the deadline's worker ending the process waits for
 * it instead of racing it to the exit. */
#include "ending.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock_time.h"
#include "events.h"
#include "log.h"
#include "shim.h"
#include "stale_size.h"
#include "step_state.h"
#include "stop_signal_state.h"

void (*shim_ending_finalize_mpi)(void);

/* --- what the process leaves behind ------------------------------------------------ */

/* The job record with this run's profiles, exit time and restart count:
 * written by rank 0 of the trainer once it made a step (run_policy.h). */
static void shim_write_job_record(const char *why)
{
    const char *directory = shim_session.config.checkpoint_path;
    if (!step_policy_writes_job_record(directory != NULL, shim_session.config.replica_rank,
                                       shim_in_forked_child(), shim_monitor.boundaries)) {
        if (directory != NULL && shim_session.config.replica_rank == 0)
            log_debug("job record left as it is (%s): this process made no step", why);
        return;
    }
    struct adaptdl_job_record *record = shim_steps_job_record();
    step_monitor_record_profile(&shim_monitor, shim_session.config.num_nodes, record);
    record->last_exit_unix_time = clock_unix_seconds();
    record->restarts = shim_session.config.num_restarts;
    char error[512];
    if (job_record_save(directory, record, error, sizeof error) != 0)
        log_error("job record not written (%s): %s", why, error);
    else
        log_debug("job record written (%s): %zu profiles, grad_sqr %g, grad_var %g", why,
                  record->profile_count, record->grad_sqr, record->grad_var);
}

/* The one summary line per rank that `info` prints at exit: records
 * served, passes, restarts, steps, the median step time, the noise scale,
 * snapshots written and the time the shim spent in step boundaries. */
static void shim_log_summary(const char *why)
{
    if (!log_enabled(LOG_LEVEL_INFO))
        return;
    uint64_t records = 0, passes = 0;
    pthread_mutex_lock(&shim_session.registry.lock);
    for (struct dataset_file *file = shim_session.registry.files; file; file = file->next) {
        records += pass_tracker_records_served(&file->shared->tracker);
        passes += pass_tracker_passes_completed(&file->shared->tracker);
    }
    pthread_mutex_unlock(&shim_session.registry.lock);
    log_info("summary (%s): %" PRIu64 " records served, %" PRIu64 " passes, %u restarts, "
             "%" PRIu64 " steps, median step time %.6f s, gradient noise scale %g, "
             "%" PRIu64 " snapshots, shim overhead %.6f s",
             why, records, passes, shim_session.config.num_restarts, shim_monitor.boundaries,
             step_monitor_median_step_time(&shim_monitor),
             grad_noise_scale_simple(&shim_monitor.noise),
             __atomic_load_n(&shim_session.snapshots_written, __ATOMIC_RELAXED),
             shim_overhead_seconds);
}

/* A trainer that ends as if done while replay never reached a bound pass
 * may have left its records unread (stale_size.h): one warn line per file. */
static void shim_report_unread_bound_passes(void)
{
    pthread_mutex_lock(&shim_session.registry.lock);
    for (struct dataset_file *file = shim_session.registry.files; file; file = file->next) {
        char message[1024];
        if (stale_size_replay_unfinished(file, message, sizeof message))
            log_warn("%s", message);
    }
    pthread_mutex_unlock(&shim_session.registry.lock);
}

/* What a process leaves behind when it ends, once: the job record, the
 * summary line and the metrics exit event.  A forked child (a DataLoader
 * worker that exits through exit(3)) leaves none of them: they are its
 * parent's, and a second exit event would end the job twice in the
 * metrics. */
static void shim_ending_leave_behind(const char *why, int status)
{
    if (shim_in_forked_child()) {
        log_debug("exit of a forked child (%s): no job record, summary or exit event", why);
        return;
    }
    shim_steps_lock();
    if (status == 0)
        shim_report_unread_bound_passes();
    shim_write_job_record(why);
    shim_log_summary(why);
    shim_events_exit(status, why);
    shim_steps_unlock();
}

/* --- one ending ------------------------------------------------------------------- */

/* How far the process has ended; moves forward only, by compare-and-swap. */
enum shim_ending {
    SHIM_ENDING_NONE = 0,
    SHIM_ENDING_RECORDED,   /* written at MPI_Finalize; the trainer runs on */
    SHIM_ENDING_EXITING,    /* an agreed stop or the trainer's exit */
    SHIM_ENDING_DEADLINE,   /* the deadline's worker ends the process */
};
static int shim_ending;

/* How long the worker waits for the trainer's thread to leave the step
 * code (it may be blocked in MPI) before it gives up the job record. */
#define SHIM_DEADLINE_LOCK_SECONDS 2

static bool shim_ending_advance(int from, int to)
{
    return __atomic_compare_exchange_n(&shim_ending, &from, to, false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

static int shim_ending_now(void)
{
    return __atomic_load_n(&shim_ending, __ATOMIC_SEQ_CST);
}

enum stop_ending shim_ending_state(void)
{
    switch (shim_ending_now()) {
    case SHIM_ENDING_NONE:
        return STOP_ENDING_RUNNING;
    case SHIM_ENDING_RECORDED:
        return STOP_ENDING_RECORDED;
    default:
        return STOP_ENDING_EXITING;
    }
}

/* The deadline's worker is ending the process: the trainer's thread waits
 * for it here instead of racing it to the exit. */
static void shim_wait_for_the_deadline(void) __attribute__((noreturn));
static void shim_wait_for_the_deadline(void)
{
    for (;;)
        pause();
}

/* Moves the ending to `to` (RECORDED or EXITING).  True when this call is
 * the first to end anything, so it writes the job record and the exit
 * event; false when that was done before. */
static bool shim_ending_claim(int to)
{
    for (;;) {
        int state = shim_ending_now();
        if (state == SHIM_ENDING_DEADLINE)
            shim_wait_for_the_deadline();
        if (state >= to)
            return false;
        if (shim_ending_advance(state, to))
            return state == SHIM_ENDING_NONE;
    }
}

/* The shim itself is stopping the process (under shim_steps_lock). */
static bool shim_stopping;

/* Marks the process as stopping and, the first time, writes what it
 * leaves behind; false when another thread was first. */
static bool shim_ending_begin_stop(const char *why, const char *how)
{
    shim_steps_lock();
    bool first = !shim_stopping;
    shim_stopping = true;
    if (first) {
        log_info("stopping: %s; exit status 143%s", why, how);
        if (shim_ending_claim(SHIM_ENDING_EXITING))
            shim_ending_leave_behind(why, STOP_STATUS_RESTART);
    }
    shim_steps_unlock();
    return first;
}

void shim_ending_stop_now(const char *why)
{
    bool first = shim_ending_begin_stop(why, "");
    /* Another reader thread reached a stop point too: one thread exits,
     * the others wait for the process to end (two exit(3) calls at once
     * would run the atexit handlers twice). */
    while (!first)
        pause();
    if (shim_ending_finalize_mpi != NULL)
        shim_ending_finalize_mpi();
    exit(STOP_STATUS_RESTART);
}

void shim_ending_stop_by_caller(const char *why)
{
    shim_ending_begin_stop(why, " (the trainer's interpreter exits)");
}

void shim_ending_at_deadline(void)
{
    if (!shim_ending_advance(SHIM_ENDING_NONE, SHIM_ENDING_DEADLINE)) {
        /* written at MPI_Finalize already: only the exit is left to do */
        if (shim_ending_advance(SHIM_ENDING_RECORDED, SHIM_ENDING_DEADLINE))
            shim_ending_at_deadline_at_once();
        return;  /* the process is ending by itself */
    }
    const char *why = "no agreement point within ADAPTDL_STOP_SECONDS of the stop signal";
    log_warn("stopping: %s (%g s); exit status 143", why, shim_session.config.stop_seconds);
    if (shim_steps_lock_within(SHIM_DEADLINE_LOCK_SECONDS)) {
        shim_ending_leave_behind(why, STOP_STATUS_RESTART);
        shim_steps_unlock();
    } else {
        log_warn("job record not written: the trainer's thread is held inside the shim's "
                 "step code (in MPI?) for more than %d s", SHIM_DEADLINE_LOCK_SECONDS);
    }
    _exit(STOP_STATUS_RESTART);
}

void shim_ending_at_deadline_at_once(void)
{
    /* async-signal-safe: called from the stop handler too */
    int state = shim_ending_now();
    if (state != SHIM_ENDING_DEADLINE &&
        !shim_ending_advance(SHIM_ENDING_NONE, SHIM_ENDING_DEADLINE) &&
        !shim_ending_advance(SHIM_ENDING_RECORDED, SHIM_ENDING_DEADLINE))
        return;  /* the process is ending by itself */
    log_signal_safe(LOG_LEVEL_WARN, "stopping: no agreement point within ADAPTDL_STOP_SECONDS "
                                    "of the stop signal; exit status 143");
    _exit(STOP_STATUS_RESTART);
}

/* The status the process ends with if the trainer's exit stands (0 for
 * "done": the trainer's own status is not known here). */
static int shim_expected_exit_status(void)
{
    struct stop_exit_facts facts = shim_stop_exit_facts();
    return stop_policy_exit_means_restart(&facts) ? STOP_STATUS_RESTART : 0;
}

void shim_ending_finish(const char *why)
{
    if (shim_ending_claim(SHIM_ENDING_RECORDED))
        shim_ending_leave_behind(why, shim_expected_exit_status());
}

/* A trainer that read train records and ends: the settings that matched
 * nothing in it are named (session_describe_unmatched_globs).  Forked
 * workers say nothing: the process that started the trainer speaks.  Only
 * rank 0 misses ADAPTDL_SAVE: in a job of several replicas the others
 * usually leave the checkpoint to it. */
static void shim_ending_name_unmatched_globs(void)
{
    if (shim_in_forked_child() || !session_train_record_delivered(&shim_session))
        return;
    char unmatched[1024];
    bool data = !__atomic_load_n(&shim_session.warned_unmatched_data, __ATOMIC_RELAXED);
    bool save = shim_session.config.replica_rank == 0;
    if (session_describe_unmatched_globs(&shim_session, data, save, unmatched,
                                         sizeof unmatched))
        log_warn("at exit, %s", unmatched);
}

void shim_ending_at_exit(void)
{
    shim_ending_name_unmatched_globs();
    if (shim_ending_claim(SHIM_ENDING_EXITING))
        shim_ending_leave_behind("exit", shim_expected_exit_status());
    shim_steps_lock();
    bool stopping = shim_stopping;
    shim_steps_unlock();
    /* The shim's own stop exits with 143 already, and its exit(3) flushes
     * stdio without waiting for streams that reader threads parked in
     * shim_ending_stop_now still hold (fflush(NULL) would wait for them). */
    if (stopping)
        return;
    struct stop_exit_facts facts = shim_stop_exit_facts();
    if (!stop_policy_exit_means_restart(&facts)) {
        if (facts.stop_deferred)
            log_info("the trainer ended by itself before the stop signal found an agreement "
                     "point, and no handler of its own was told: its work is done, its own "
                     "exit status stands");
        return;
    }
    /* The trainer stopped on its own after a stop signal (its own handler
     * ran too): the job was preempted, so the status says "restart me".
     * This handler was registered first, so it runs after every atexit
     * handler of the trainer; stdio is flushed here because _exit skips it. */
    log_info("the trainer exited by itself after a stop signal: exit status 143");
    fflush(NULL);
    _exit(STOP_STATUS_RESTART);
}
