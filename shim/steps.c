/* steps.c - step boundaries, preemption, job record and metrics for the
 * preloaded layer (see steps.h).
 *
 * Preemption: SIGTERM, SIGINT and SIGUSR1 set a flag (SIGUSR1 because mpirun
 * forwards it to every rank, and not SIGTERM).  With gradient all-reduces
 * the flag travels in the piggy-backed reduction and every replica stops at
 * the same boundary; without them (no MPI, or MPI without a detected
 * gradient) a replica stops at its next train-batch read.  A second SIGINT
 * exits at once with 130.  The stop writes the job record (statistics,
 * never data positions), the latest metrics, finalizes MPI and calls exit(3)
 * with 143, so the trainer's buffered output and atexit handlers run. */
#include "steps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "signals.h"
#include "batch_decision.h"
#include "decision_text.h"
#include "events.h"
#include "statistical_epochs.h"

bool shim_steps_synchronized;
struct step_monitor shim_monitor;
void (*shim_steps_finalize_mpi)(void);

static struct adaptdl_job_record shim_job_record;
static bool shim_job_record_loaded;
static bool shim_warned_unsynchronized;
static bool shim_finished;
static double shim_last_step_log;
static double shim_overhead_seconds;  /* time spent in step boundaries */

static double shim_now(void)
{
    return log_monotonic_seconds();
}

static double shim_unix_time(void)
{
    struct timeval now;
    gettimeofday(&now, NULL);
    return (double)now.tv_sec + (double)now.tv_usec * 1e-6;
}

bool shim_steps_exit_requested(void)
{
    return shim_stop_signal != 0;
}

void shim_steps_initialize(void)
{
    shim_signals_install();
    shim_events_open();
    job_record_init(&shim_job_record);
    const char *directory = shim_session.config.checkpoint_path;
    if (directory != NULL) {
        char error[512];
        int status = job_record_load(directory, &shim_job_record, error, sizeof error);
        if (status < 0)
            log_warn("job record: %s; profiles and statistics start afresh", error);
        shim_job_record_loaded = status == 0;
        if (shim_job_record.last_exit_unix_time > 0)
            log_debug("job record: %zu step profiles, %u restarts, last exit %.0f s ago",
                      shim_job_record.profile_count, shim_job_record.restarts,
                      shim_unix_time() - shim_job_record.last_exit_unix_time);
    }
    /* 0: the monitor takes the first step's global batch */
    uint64_t initial = shim_session.config.batch_size;
    step_monitor_init(&shim_monitor, (struct piggyback_transport){0},
                      shim_session.config.num_replicas, initial,
                      shim_session.config.drain_seconds, shim_now());
    /* gradient statistics survive restarts through the job record */
    if (shim_job_record_loaded && shim_job_record.grad_ema_weight > 0) {
        shim_monitor.noise.sqr_biased = shim_job_record.grad_sqr_biased;
        shim_monitor.noise.var_biased = shim_job_record.grad_var_biased;
        shim_monitor.noise.sqr_unbias = shim_job_record.grad_ema_weight;
        shim_monitor.noise.var_unbias = shim_job_record.grad_ema_weight;
    }
}

void shim_steps_start_synchronized(struct piggyback_transport transport, uint32_t replicas)
{
    uint64_t initial = shim_monitor.noise.initial_global_bsz;
    struct grad_noise_state noise = shim_monitor.noise;
    step_monitor_init(&shim_monitor, transport, replicas, initial,
                      shim_session.config.drain_seconds, shim_now());
    shim_monitor.noise = noise;
    shim_steps_synchronized = true;
}

/* Records consumed without a read the shim sees: batches of the cooperative
 * API's training loops, batch sizes reported with gradients, and the
 * declared batch of steps that read no train record (data in memory). */
static uint64_t shim_records_without_reads;
static uint64_t shim_declared_local_batch;   /* injected, or ADAPTDL_BATCH_SIZE / K */

void shim_steps_declare_local_batch(uint64_t local_batch)
{
    shim_declared_local_batch = local_batch;
}

uint64_t shim_steps_train_records_consumed(void)
{
    uint64_t total = __atomic_load_n(&shim_records_without_reads, __ATOMIC_RELAXED);
    pthread_mutex_lock(&shim_session.registry.lock);
    for (struct dataset_file *file = shim_session.registry.files; file; file = file->next)
        if (file->entry->role == DATA_ROLE_TRAIN)
            total += file->shared->tracker.records_served;
    pthread_mutex_unlock(&shim_session.registry.lock);
    return total;
}

struct adaptdl_job_record *shim_steps_job_record(void)
{
    return &shim_job_record;
}

void shim_steps_save_job_record(const char *why)
{
    const char *directory = shim_session.config.checkpoint_path;
    char error[512];
    if (directory != NULL && shim_session.config.replica_rank == 0 && !shim_in_forked_child() &&
        job_record_save(directory, &shim_job_record, error, sizeof error) != 0)
        log_error("job record not written (%s): %s", why, error);
}

static void shim_write_job_record(const char *why)
{
    const char *directory = shim_session.config.checkpoint_path;
    /* one job record per job: rank 0 writes it (the others would race it,
     * and only rank 0 knows the batch-size decision) */
    if (directory == NULL || shim_session.config.replica_rank != 0)
        return;
    /* A process that made no step (a helper program the trainer runs, a
     * tool started with the preload by mistake) holds nothing newer than
     * the record it loaded: writing it back could only undo a decision
     * the trainer wrote meanwhile. */
    if (shim_monitor.boundaries == 0) {
        log_debug("job record left as it is (%s): this process made no step", why);
        return;
    }
    step_monitor_record_profile(&shim_monitor, shim_session.config.num_nodes,
                                &shim_job_record);
    shim_job_record.last_exit_unix_time = shim_unix_time();
    shim_job_record.restarts = shim_session.config.num_restarts;
    char error[512];
    if (job_record_save(directory, &shim_job_record, error, sizeof error) != 0)
        log_error("job record not written (%s): %s", why, error);
    else
        log_debug("job record written (%s): %zu profiles, grad_sqr %g, grad_var %g", why,
                  shim_job_record.profile_count, shim_job_record.grad_sqr,
                  shim_job_record.grad_var);
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

static void shim_log_summary(const char *why);

/* What a process leaves behind when it ends: the job record, the summary
 * line and the metrics exit event.  A forked child (a DataLoader worker
 * that exits through exit(3)) leaves none of them: they are its parent's,
 * and a second exit event would end the job twice in the metrics. */
static void shim_report_exit(int status, const char *why)
{
    if (shim_in_forked_child()) {
        log_debug("exit of a forked child (%s): no job record, summary or exit event", why);
        return;
    }
    shim_write_job_record(why);
    shim_log_summary(why);
    shim_events_exit(status, why);
}

static void shim_stop_now(const char *why) __attribute__((noreturn));
static void shim_stop_now(const char *why)
{
    log_info("stopping: %s; exit status 143", why);
    shim_report_exit(143, why);
    shim_finished = true;
    if (shim_steps_finalize_mpi != NULL)
        shim_steps_finalize_mpi();
    exit(143);
}

/* Rank 0 re-decides the batch size every ADAPTDL_DECIDE_SECONDS (SPEC §7);
 * a restart request then travels to every rank in the piggy-backed
 * reduction. */
static bool shim_restart_requested;
static double shim_last_decision;
static bool shim_warned_no_save;
static struct goodput_model shim_model;      /* from the latest decision */
static bool shim_model_valid;

static void shim_steps_decide(double now)
{
    const struct adaptdl_config *config = &shim_session.config;
    if (config->max_batch_size == 0 || config->bsz_arg.kind == INJECT_NONE ||
        config->replica_rank != 0 || shim_restart_requested ||
        now - shim_last_decision < config->decide_seconds || !shim_monitor.has_last)
        return;
    shim_last_decision = now;
    struct batch_decision_inputs inputs = {
        .record = &shim_job_record,
        .grad_sqr = grad_noise_sqr(&shim_monitor.noise),
        .grad_var = grad_noise_var(&shim_monitor.noise),
        .nodes = config->num_nodes,
        .replicas = shim_monitor.replicas,
        /* the batch the trainer was given, not the last step's records: an
         * epoch's short last batch is no batch size to decide against */
        .current_local_bsz = shim_declared_local_batch ? shim_declared_local_batch
                                                       : shim_monitor.last.local_records,
        .initial_global_bsz = shim_job_record.initial_global_bsz ? shim_job_record.initial_global_bsz
                                                                 : config->batch_size,
        .max_global_bsz = config->max_batch_size,
        .local_bsz_min = config->local_bsz_min,
        .local_bsz_max = config->local_bsz_max,
        .speedup_threshold = config->speedup_threshold,
        .payback_seconds = config->payback_seconds,
    };
    struct batch_decision decision;
    char error[512];
    if (batch_decide(&inputs, &decision, error, sizeof error) != 0) {
        log_warn("batch-size decision skipped: %s", error);
        return;
    }
    if (!decision.valid)
        return;
    bool restart = decision.restart;
    if (restart && config->save_glob == NULL) {
        if (!shim_warned_no_save)
            log_warn("a larger batch size would pay off, but without ADAPTDL_SAVE no "
                     "checkpoint can carry the job across a restart: none is requested");
        shim_warned_no_save = true;
        restart = false;
    }
    shim_events_decision(&inputs, &decision, restart);
    shim_events_write_hints(config->hints_file, &inputs, &decision,
                            shim_job_record.max_replicas_profiled);
    shim_model = (struct goodput_model){
        .perf = decision.perf,
        .grad = {.sqr = inputs.grad_sqr, .var = inputs.grad_var},
        .initial_global_bsz = inputs.initial_global_bsz,
    };
    shim_model_valid = true;
    if (log_enabled(LOG_LEVEL_INFO)) {
        char line[768];
        batch_decision_describe(&inputs, &decision, restart, line, sizeof line);
        log_info("%s", line);
    }
    shim_job_record.perf_params_valid = true;
    perf_params_to_array(&decision.perf, shim_job_record.perf_params);
    if (restart) {
        shim_job_record.decided_global_bsz = decision.choice.global_bsz;
        shim_job_record.decided_local_bsz = decision.choice.local_bsz;
        shim_job_record.decided_replicas = shim_monitor.replicas;
        shim_restart_requested = true;
    }
}

/* The restart cost: from the previous run's exit to this run's first step. */
static void shim_measure_restart_cost(void)
{
    static bool measured;
    if (measured || shim_job_record.last_exit_unix_time <= 0 ||
        shim_session.config.num_restarts == 0)
        return;
    measured = true;
    double cost = shim_unix_time() - shim_job_record.last_exit_unix_time;
    if (cost > 0 && cost < 86400) {
        shim_job_record.restart_cost_seconds = cost;
        log_debug("restart cost measured: %.1f s", cost);
    }
}

/* The latest agreed step goes into the profiles, the statistical epochs,
 * the log and the metrics. */
static void shim_steps_publish_agreed_step(void)
{
    step_monitor_record_profile(&shim_monitor, shim_session.config.num_nodes, &shim_job_record);
    shim_epochs_note_agreed_step(&shim_monitor.last, &shim_monitor.noise);
    shim_log_agreed_step();
    struct job_position position;
    shim_steps_job_position(&position);
    shim_events_step(&shim_monitor.last, &shim_monitor.noise, &position,
                     shim_session.config.data_count > 0 || shim_monitor.last.local_records > 0,
                     shim_model_valid ? &shim_model : NULL, shim_session.config.num_nodes);
}

void shim_steps_drain_last_step(void)
{
    if (step_monitor_drain_reduction(&shim_monitor))
        shim_steps_publish_agreed_step();
}

void shim_steps_boundary(void)
{
    if (!shim_steps_synchronized)
        return;
    shim_guard_enter();
    double started = shim_now();
    shim_measure_restart_cost();
    shim_steps_decide(started);
    /* a step that consumed no record the shim could see (the trainer
     * holds its data in memory) used the batch size it was given */
    if (shim_monitor.in_step && shim_declared_local_batch > 0 &&
        shim_steps_train_records_consumed() == shim_monitor.records_at_step_start)
        __atomic_add_fetch(&shim_records_without_reads, shim_declared_local_batch,
                           __ATOMIC_RELAXED);
    enum step_action action = step_monitor_boundary(&shim_monitor, started,
                                                    shim_steps_train_records_consumed(),
                                                    shim_stop_signal != 0,
                                                    shim_restart_requested);
    if (shim_monitor.has_last)
        shim_steps_publish_agreed_step();
    shim_overhead_seconds += shim_now() - started;
    shim_guard_leave();
    if (action == STEP_STOP)
        shim_stop_now(shim_monitor.restart_agreed
                          ? "restart for a new batch size, after the checkpoint just committed"
                          : "every replica agreed to stop at this step");
}

/* Without MPI a step is the time between two train-batch reads. */
static void shim_steps_local_boundary(void)
{
    shim_guard_enter();
    double now = shim_now();
    /* (a train read made this boundary, so ADAPTDL_DATA is set; and no
     * model exists: decisions are made at synchronized boundaries only) */
    if (step_monitor_local_boundary(&shim_monitor, now, shim_steps_train_records_consumed())) {
        shim_steps_publish_agreed_step();
        shim_overhead_seconds += shim_now() - now;
    }
    shim_guard_leave();
}

/* The cooperative API's steps (cooperative_host.c). */
static const char shim_cooperative_communicator[] = "cooperative API";

void shim_steps_cooperative_batch(uint64_t records)
{
    __atomic_add_fetch(&shim_records_without_reads, records, __ATOMIC_RELAXED);
    shim_steps_before_train_read();
}

void shim_steps_cooperative_gradient(double local_sqr, double mean_sqr, uint64_t local_batch,
                                     bool ends_previous_step)
{
    if (ends_previous_step) {
        shim_steps_before_train_read();
        __atomic_add_fetch(&shim_records_without_reads, local_batch, __ATOMIC_RELAXED);
    }
    shim_guard_enter();
    step_monitor_gradient(&shim_monitor, shim_cooperative_communicator, local_sqr, mean_sqr,
                          0.0, 0.0);
    shim_guard_leave();
}

uint64_t shim_steps_propose_local_batch(uint64_t initial_global, uint64_t max_global,
                                        uint32_t replicas, uint64_t current_local)
{
    const struct adaptdl_config *config = &shim_session.config;
    if (config->replica_rank != 0)
        return 0;   /* rank 0's proposal is the one agreed on */
    struct batch_decision_inputs inputs = {
        .record = &shim_job_record,
        .grad_sqr = grad_noise_sqr(&shim_monitor.noise),
        .grad_var = grad_noise_var(&shim_monitor.noise),
        .nodes = config->num_nodes,
        .replicas = replicas,
        .current_local_bsz = current_local,
        .initial_global_bsz = initial_global,
        .max_global_bsz = max_global,
        .speedup_threshold = config->speedup_threshold,
        .payback_seconds = config->payback_seconds,
    };
    struct batch_decision decision;
    char error[512];
    if (batch_decide(&inputs, &decision, error, sizeof error) != 0) {
        log_warn("cooperative loop: batch-size decision skipped: %s", error);
        return current_local;
    }
    uint64_t chosen = batch_decision_in_place(&decision, current_local,
                                              config->speedup_threshold);
    log_debug("cooperative loop: local batch %llu -> %llu (%s, speedup %.3f)",
              (unsigned long long)current_local, (unsigned long long)chosen,
              decision.valid ? "model fitted" : "no model yet", decision.speedup);
    return chosen;
}

double shim_steps_efficiency(uint64_t initial_global, uint64_t global)
{
    return statistical_epoch_efficiency(grad_noise_sqr(&shim_monitor.noise),
                                        grad_noise_var(&shim_monitor.noise),
                                        (double)initial_global, (double)global);
}

double shim_steps_gain(uint64_t initial_global, uint64_t global)
{
    double sqr = grad_noise_sqr(&shim_monitor.noise);
    double var = grad_noise_var(&shim_monitor.noise);
    if (!(sqr > 0) || !isfinite(sqr) || !(var >= 0) || !isfinite(var) || initial_global == 0)
        return 1.0;
    double scale = (double)global / (double)initial_global;
    return statistical_epoch_efficiency(sqr, var, (double)initial_global, (double)global) * scale;
}

void shim_steps_before_train_read(void)
{
    if (shim_monitor.in_step && shim_steps_synchronized && shim_mpi_on_mpi_thread())
        shim_steps_boundary();
    else if (!shim_steps_synchronized)
        shim_steps_local_boundary();
    if (shim_stop_signal == 0)
        return;
    if (shim_steps_synchronized && shim_monitor.gradient_ever_seen)
        return;  /* the piggy-backed reduction decides */
    if (shim_steps_synchronized && shim_monitor.replicas > 1 && !shim_warned_unsynchronized) {
        shim_warned_unsynchronized = true;
        log_warn("no gradient all-reduce was detected: the stop cannot be synchronized "
                 "across replicas; each replica stops at its next batch read");
    }
    /* without agreement MPI_Finalize could wait for ranks that run on */
    shim_steps_finalize_mpi = shim_monitor.replicas > 1 ? NULL : shim_steps_finalize_mpi;
    shim_stop_now("stop requested, at the next batch read");
}

void shim_steps_note_commit(void)
{
    step_monitor_note_commit(&shim_monitor);
}

/* The one summary line per rank that `info` prints at exit (SPEC §9). */
static void shim_log_summary(const char *why)
{
    if (!log_enabled(LOG_LEVEL_INFO))
        return;
    uint64_t records = 0, passes = 0;
    pthread_mutex_lock(&shim_session.registry.lock);
    for (struct dataset_file *file = shim_session.registry.files; file; file = file->next) {
        records += file->shared->tracker.records_served;
        passes += file->shared->tracker.passes_completed;
    }
    pthread_mutex_unlock(&shim_session.registry.lock);
    const struct step_profile *profiles = shim_job_record.profiles;
    double step_time_sum = 0;
    uint64_t steps = 0;
    for (size_t i = 0; i < shim_job_record.profile_count; i++) {
        step_time_sum += profiles[i].step_time_sum;
        steps += profiles[i].count;
    }
    log_info("summary (%s): %" PRIu64 " records served, %" PRIu64 " passes, %u restarts, "
             "%" PRIu64 " steps, mean step time %.6f s, gradient noise scale %g, "
             "%" PRIu64 " snapshots, shim overhead %.6f s",
             why, records, passes, shim_session.config.num_restarts, shim_monitor.boundaries,
             steps ? step_time_sum / (double)steps : 0.0,
             grad_noise_scale_simple(&shim_monitor.noise), shim_session.snapshots_written,
             shim_overhead_seconds);
}

void shim_steps_finish(const char *why)
{
    if (shim_finished)
        return;
    shim_finished = true;
    shim_report_exit(shim_stop_signal ? 143 : 0, why);
}

void shim_steps_at_exit(void)
{
    shim_steps_finish("exit");
    if (shim_stop_signal == 0)
        return;
    /* The trainer stopped on its own after a stop signal (its own handler
     * ran too): the job was preempted, so the status says "restart me".
     * This handler was registered first, so it runs after every atexit
     * handler of the trainer; stdio is flushed here because _exit skips it. */
    log_info("the trainer exited by itself after a stop signal: exit status 143");
    fflush(NULL);
    _exit(143);
}
