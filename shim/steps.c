/* steps.c - step boundaries, stops at train reads, the job record and the
 * summary line for the preloaded layer (see steps.h).
 *
 * Preemption: SIGTERM, SIGINT and SIGUSR1 set a flag (SIGUSR1 because mpirun
 * forwards it to every rank, and not SIGTERM).  With gradient all-reduces
 * the flag travels in the piggy-backed reduction and every replica stops at
 * the same boundary; without them (no MPI, or MPI without a detected
 * gradient) a replica stops at its next train-batch read.  A second SIGINT
 * exits at once with 130.  The stop (ending.c) writes the job record
 * (statistics, never data positions), the latest metrics, finalizes MPI and
 * calls exit(3) with 143, so the trainer's buffered output and atexit
 * handlers run.
 *
 * A stop that finds no agreement point within ADAPTDL_STOP_SECONDS is taken
 * by the deadline's worker thread (stop_deadline.c, ending.c) while the
 * trainer's thread is elsewhere; the step code holds a lock that the worker
 * takes before it reads the statistics.
 *
 * Threads: without MPI every train read, on whichever thread, is a step
 * boundary, and a checkpoint commit on any thread reads the step in
 * progress; all of that runs under shim_steps_lock (see steps.h), released
 * before a stop calls exit(3), whose atexit handlers come back here. */
#include "steps.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock_time.h"
#include "dataset_view.h"
#include "previous_gradients.h"
#include "vector_norm.h"
#include "log.h"
#include "real_functions.h"
#include "run_policy.h"
#include "shim.h"
#include "signals.h"
#include "decisions.h"
#include "ending.h"
#include "events.h"
#include "pass_planning.h"
#include "stop_deadline.h"

static bool shim_job_record_loaded;
static bool shim_warned_unsynchronized;
static double shim_last_step_log;

static double shim_now(void)
{
    return log_monotonic_seconds();
}

/* Gradients and checkpoint commits seen; read by any reader thread
 * through dataset_view_training_events. */
static uint64_t shim_training_events;

void shim_steps_note_training(void)
{
    __atomic_add_fetch(&shim_training_events, 1, __ATOMIC_RELAXED);
}

/* dataset_view_training_events: told only where MPI is up (where training
 * shows as gradient all-reduces). */
static uint64_t shim_steps_training_events(void)
{
    if (!shim_steps_are_synchronized())
        return UINT64_MAX;
    return __atomic_load_n(&shim_training_events, __ATOMIC_RELAXED);
}

void shim_steps_initialize(void)
{
    shim_signals_install();
    shim_events_open();
    struct adaptdl_job_record *record = shim_steps_job_record();
    job_record_init(record);
    const char *directory = shim_session.config.checkpoint_path;
    if (directory != NULL) {
        char error[512];
        int status = job_record_load(directory, record, error, sizeof error);
        if (status < 0)
            log_warn("job record: %s; profiles and statistics start afresh", error);
        shim_job_record_loaded = status == 0;
        if (record->last_exit_unix_time > 0)
            log_debug("job record: %zu step profiles, %u restarts, last exit %.0f s ago",
                      record->profile_count, record->restarts,
                      clock_unix_seconds() - record->last_exit_unix_time);
    }
    /* 0: the monitor takes the first step's global batch */
    uint64_t initial = shim_session.config.batch_size;
    dataset_view_training_events = shim_steps_training_events;
    step_monitor_init(&shim_monitor, (struct piggyback_transport){0},
                      shim_session.config.num_replicas, initial,
                      shim_session.config.drain_seconds, shim_now());
    /* gradient statistics survive restarts through the job record */
    if (shim_job_record_loaded)
        step_monitor_restore_statistics(&shim_monitor, record);
}

void shim_steps_start_synchronized(struct piggyback_transport transport, uint32_t replicas)
{
    shim_steps_lock();
    uint64_t initial = shim_monitor.noise.initial_global_bsz;
    struct grad_noise_state noise = shim_monitor.noise;
    step_monitor_init(&shim_monitor, transport, replicas, initial,
                      shim_session.config.drain_seconds, shim_now());
    shim_monitor.noise = noise;
    __atomic_store_n(&shim_steps_synchronized, true, __ATOMIC_RELEASE);
    shim_steps_unlock();
}

static uint64_t shim_declared_local_batch;   /* injected, or ADAPTDL_BATCH_SIZE / K */

void shim_steps_declare_local_batch(uint64_t local_batch)
{
    shim_declared_local_batch = local_batch;
}

void shim_steps_save_job_record(const char *why)
{
    const char *directory = shim_session.config.checkpoint_path;
    char error[512];
    if (directory != NULL && shim_session.config.replica_rank == 0 && !shim_in_forked_child() &&
        job_record_save(directory, shim_steps_job_record(), error, sizeof error) != 0)
        log_error("job record not written (%s): %s", why, error);
}

static void shim_steps_job_position(struct job_position *position)
{
    statistical_epochs_capture(&shim_session.epochs, &position->progress, &position->step);
    position->epoch = dataset_registry_epoch(&shim_session.registry);
}

static void shim_log_agreed_step(void)
{
    const struct agreed_step *step = &shim_monitor.last;
    double now = shim_now();
    if (!log_enabled(LOG_LEVEL_DEBUG) || now - shim_last_step_log < 1.0)
        return;
    shim_last_step_log = now;
    log_debug("step %" PRIu64 ": %u replicas (%u with gradients), %" PRIu64 " records "
              "(%" PRIu64 " here), step %.6f s, sync %.6f s, grad_sqr %g, grad_var %g, "
              "noise scale %g",
              step->step, step->replicas, step->replicas_with_gradient, step->global_records,
              step->local_records, step->step_time, step->sync_time,
              grad_noise_sqr(&shim_monitor.noise), grad_noise_var(&shim_monitor.noise),
              grad_noise_scale_simple(&shim_monitor.noise));
}

/* The restart cost: from the previous run's exit to this run's first step. */

static void shim_measure_restart_cost(void)
{
    static bool measured;
    if (measured)
        return;
    measured = true;
    struct adaptdl_job_record *record = shim_steps_job_record();
    double cost = step_policy_restart_cost(record->last_exit_unix_time, clock_unix_seconds(),
                                           shim_session.config.num_restarts);
    if (cost > 0) {
        record->restart_cost_seconds = cost;
        log_debug("restart cost measured: %.1f s", cost);
    }
}

/* The latest agreed step goes into the profiles, the statistical epochs,
 * the log and the metrics. */
static void shim_steps_publish_agreed_step(void)
{
    step_monitor_record_profile(&shim_monitor, shim_session.config.num_nodes,
                                shim_steps_job_record());
    shim_epochs_note_agreed_step(&shim_monitor.last, &shim_monitor.noise);
    shim_log_agreed_step();
    struct job_position position;
    shim_steps_job_position(&position);
    shim_events_step(&shim_monitor.last, &shim_monitor.noise, &position,
                     shim_session.config.data_count > 0 || shim_monitor.last.local_records > 0,
                     shim_decisions_model(), shim_session.config.num_nodes);
}

void shim_steps_drain_last_step(void)
{
    shim_steps_lock();
    if (step_monitor_drain_reduction(&shim_monitor))
        shim_steps_publish_agreed_step();
    shim_steps_unlock();
}

/* An agreed stop that drains moves the deadline past the drain (once). */
static void shim_note_agreed_stop(void)
{
    static bool noted;
    if (noted || !shim_monitor.exit_agreed || shim_monitor.restart_agreed ||
        shim_stop_signal == 0)
        return;
    noted = true;
    if (shim_monitor.drain_seconds > 0)
        shim_signals_stop_agreed(shim_monitor.exit_agreed_at, shim_monitor.drain_seconds);
}

/* The boundary's work, under the lock; `reported_local_batch` > 0 is the
 * step's batch as the trainer told it (shim_steps_reported_boundary).
 * Returns whether every replica stops here, with the reason in *why. */
static enum step_action shim_steps_take_boundary(uint64_t reported_local_batch,
                                                 const char **why)
{
    shim_guard_enter();
    shim_steps_lock();
    double started = shim_now();
    shim_measure_restart_cost();
    shim_decisions_at_boundary(started, reported_local_batch > 0 ? reported_local_batch
                                                                 : shim_declared_local_batch);
    uint64_t consumed = shim_steps_train_records_consumed();
    if (reported_local_batch > 0 && shim_monitor.in_step)
        step_monitor_set_step_records(&shim_monitor, consumed, reported_local_batch);
    /* a step that consumed no record the shim could see (the trainer
     * holds its data in memory) used the batch size it was given */
    else if (shim_monitor.in_step && shim_declared_local_batch > 0 &&
             consumed == shim_monitor.records_at_step_start) {
        shim_steps_note_records_without_reads(shim_declared_local_batch);
        consumed += shim_declared_local_batch;
    }
    enum step_action action = step_monitor_boundary(&shim_monitor, started, consumed,
                                                    shim_stop_signal != 0,
                                                    shim_decisions_restart_requested());
    if (shim_monitor.has_last)
        shim_steps_publish_agreed_step();
    /* the batch matters to a job with data views or batch-size control */
    char message[512];
    if ((shim_session.config.data_count > 0 || shim_session.config.max_batch_size > 0) &&
        step_monitor_unknown_batch_warning(&shim_monitor, message, sizeof message))
        log_warn("%s", message);
    shim_note_agreed_stop();
    shim_overhead_seconds += shim_now() - started;
    *why = shim_monitor.restart_agreed ? shim_decisions_restart_reason()
                                       : "every replica agreed to stop at this step";
    shim_steps_unlock();
    shim_guard_leave();
    return action;
}

void shim_steps_boundary(void)
{
    if (!shim_steps_are_synchronized())
        return;
    const char *why;
    if (shim_steps_take_boundary(0, &why) == STEP_STOP)
        shim_ending_stop_now(why);
}

bool shim_steps_reported_boundary(uint64_t local_batch)
{
    if (!shim_steps_are_synchronized())
        return false;
    const char *why;
    if (shim_steps_take_boundary(local_batch, &why) != STEP_STOP)
        return false;
    shim_ending_stop_by_caller(why);
    return true;
}

/* The step's "communicator" for pieces a trainer's process reports: one
 * address, so that the step is one run of pieces as under MPI. */
static const char shim_reported_communicator[] = "reported by the trainer's process";

void shim_steps_reported_gradient(double local_sqr, double mean_sqr, double sync_seconds,
                                  double norm_seconds, bool measured)
{
    shim_guard_enter();
    shim_steps_lock();
    if (measured)
        step_monitor_gradient(&shim_monitor, shim_reported_communicator, local_sqr, mean_sqr,
                              sync_seconds, norm_seconds);
    else
        step_monitor_gradient_unmeasured(&shim_monitor, shim_reported_communicator,
                                         sync_seconds);
    shim_steps_unlock();
    shim_steps_note_training();
    shim_guard_leave();
}

/* K = 1: the difference estimator pairs each gradient piece with the same
 * piece of the previous step, as the MPI layer does for a world of one. */
static struct previous_gradients shim_reported_previous_gradients;

void shim_steps_reported_single_replica_piece(const void *gradient, size_t count,
                                              size_t element)
{
    shim_guard_enter();
    shim_steps_lock();
    double started = shim_now();
    double squared = element == sizeof(float) ? squared_norm_float(gradient, count)
                                              : squared_norm_double(gradient, count);
    double mean_sqr;
    bool valid = previous_gradients_pair(&shim_reported_previous_gradients,
                                         (size_t)shim_monitor.gradient_pieces, gradient, count,
                                         element, shim_monitor.boundaries + 1, &mean_sqr);
    step_monitor_gradient_pair(&shim_monitor, mean_sqr, valid);
    step_monitor_gradient(&shim_monitor, shim_reported_communicator, squared, squared, 0.0,
                          shim_now() - started);
    shim_steps_unlock();
    shim_steps_note_training();
    shim_guard_leave();
}

/* Without MPI a step is the time between two train-batch reads, on any
 * thread: with several reader threads, between two reads of any of them. */
static void shim_steps_local_boundary(void)
{
    shim_guard_enter();
    shim_steps_lock();
    double now = shim_now();
    /* (a train read made this boundary, so ADAPTDL_DATA is set; and no
     * model exists: decisions are made at synchronized boundaries only) */
    if (step_monitor_local_boundary(&shim_monitor, now, shim_steps_train_records_consumed())) {
        shim_steps_publish_agreed_step();
        shim_overhead_seconds += shim_now() - now;
    }
    shim_steps_unlock();
    shim_guard_leave();
}

/* The cooperative API's steps (cooperative_host.c). */
static const char shim_cooperative_communicator[] = "cooperative API";

void shim_steps_cooperative_batch(uint64_t records)
{
    shim_steps_note_records_without_reads(records);
    shim_steps_before_train_read();
}

void shim_steps_cooperative_gradient(double local_sqr, double mean_sqr, uint64_t local_batch,
                                     bool ends_previous_step)
{
    if (ends_previous_step) {
        shim_steps_before_train_read();
        shim_steps_note_records_without_reads(local_batch);
    }
    shim_guard_enter();
    step_monitor_gradient(&shim_monitor, shim_cooperative_communicator, local_sqr, mean_sqr,
                          0.0, 0.0);
    shim_steps_note_training();
    shim_guard_leave();
}

void shim_steps_before_train_read(void)
{
    bool synchronized = shim_steps_are_synchronized();
    /* the step in progress is the MPI thread's own (steps.h) */
    if (synchronized && shim_mpi_on_mpi_thread() && shim_monitor.in_step &&
        !shim_mpi_collective_cycle_locked())
        shim_steps_boundary();
    else if (!synchronized)
        shim_steps_local_boundary();
    if (shim_stop_signal == 0)
        return;
    shim_steps_lock();
    bool agreed = synchronized && shim_monitor.gradient_ever_seen;
    uint32_t replicas = shim_monitor.replicas;
    struct stop_read_facts facts = {
        .stop_deferred = true,
        .agreed_by_reduction = agreed,
        .start_process_stopping = shim_signals_start_process_stopping(),
    };
    bool stops = stop_policy_stops_at_train_read(&facts);
    bool warn = stops && synchronized && replicas > 1 && !shim_warned_unsynchronized;
    shim_warned_unsynchronized |= warn;
    shim_steps_unlock();
    if (!stops)
        return;
    if (warn)
        log_warn("no gradient all-reduce was detected: the stop cannot be synchronized "
                 "across replicas; each replica stops at its next batch read");
    /* without agreement MPI_Finalize could wait for ranks that run on */
    shim_ending_finalize_mpi = replicas > 1 ? NULL : shim_ending_finalize_mpi;
    shim_ending_stop_now("stop requested, at the next batch read");
}

void shim_steps_note_commit(void)
{
    shim_steps_note_training();
    shim_steps_lock();
    step_monitor_note_commit(&shim_monitor);
    shim_steps_unlock();
}
