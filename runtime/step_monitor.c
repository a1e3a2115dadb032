/* step_monitor.c - steps, the piggy-backed reduction and agreed stops (see
 * step_monitor.h).
 *
 * Gradient convention (adaptshim(7) "Piggy-backing"): `local` is the squared norm of this
 * replica's own input to the all-reduce and `total` the squared norm of the
 * result divided by K, i.e. of the mean over replicas.  A trainer that
 * divides by K before the all-reduce makes both K^2 times smaller, one that
 * sums instead of averaging over its batch makes both b^2 times larger: the
 * noise scale grad_var / grad_sqr, the efficiency and the gain are the same
 * either way; grad_sqr itself is then |G|^2 in the trainer's own units. */
#include "step_monitor.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void step_monitor_init(struct step_monitor *monitor, struct piggyback_transport transport,
                       uint32_t replicas, uint64_t initial_global_bsz, double drain_seconds,
                       double now)
{
    memset(monitor, 0, sizeof *monitor);
    monitor->transport = transport;
    monitor->replicas = replicas == 0 ? 1 : replicas;
    monitor->drain_seconds = drain_seconds;
    monitor->step_started = now;
    monitor->measure_period = 1;
    monitor->measuring = true;
    monitor->measured_period_pending = 1;
    monitor->measured_period_posted = 1;
    monitor->measured_period_in_force = 1;
    grad_noise_init(&monitor->noise, initial_global_bsz);
}

static int piggyback_loopback_post(void *context, const double *send, double *receive,
                                   int count)
{
    struct piggyback_loopback *loopback = context;
    loopback->send = send;
    loopback->receive = receive;
    loopback->count = count;
    return 0;
}

/* The send buffer stays untouched between post and complete (the monitor
 * fills it anew only after completing), so it is copied here. */
static int piggyback_loopback_complete(void *context)
{
    struct piggyback_loopback *loopback = context;
    if (loopback->receive == NULL)
        return -1;
    memcpy(loopback->receive, loopback->send, (size_t)loopback->count * sizeof(double));
    return 0;
}

struct piggyback_transport piggyback_loopback_transport(struct piggyback_loopback *loopback)
{
    memset(loopback, 0, sizeof *loopback);
    return (struct piggyback_transport){.context = loopback,
                                        .post = piggyback_loopback_post,
                                        .complete = piggyback_loopback_complete};
}

void step_monitor_gradient(struct step_monitor *monitor, const void *communicator,
                           double local_sqr, double total_sqr, double seconds,
                           double norm_seconds)
{
    monitor->norm_time += norm_seconds;
    if (!monitor->in_step) {
        monitor->in_step = true;
        monitor->step_communicator = communicator;
    }
    monitor->gradient_ever_seen = true;
    monitor->gradient_pieces++;
    monitor->local_sqr += local_sqr;
    monitor->total_sqr += total_sqr;
    monitor->sync_time += seconds;
}

void step_monitor_gradient_unmeasured(struct step_monitor *monitor, const void *communicator,
                                      double seconds)
{
    step_monitor_gradient(monitor, communicator, 0, 0, seconds, 0);
    /* the norms of this step lack a piece: a partial sum would bias them */
    monitor->measuring = false;
}

void step_monitor_gradient_pair(struct step_monitor *monitor, double mean_sqr, bool valid)
{
    if (monitor->gradient_pieces == 0)
        monitor->pair_valid = valid;   /* the step's first piece (not counted yet) */
    else
        monitor->pair_valid = monitor->pair_valid && valid;
    monitor->pair_mean_sqr += mean_sqr;
}

/* The global batch of a step that read `global_records`: those, or for a
 * step that read none, the mean per step of this run after its first step
 * (a loader that reads ahead); 0 when unknown. */
static uint64_t step_monitor_batch_estimate(const struct step_monitor *monitor,
                                            uint64_t global_records)
{
    if (global_records > 0)
        return global_records;
    if (monitor->steps_after_warm_up == 0 || monitor->records_after_warm_up == 0)
        return 0;
    uint64_t mean = (monitor->records_after_warm_up + monitor->steps_after_warm_up / 2) /
                    monitor->steps_after_warm_up;
    return mean > 0 ? mean : 1;
}

/* K = 1: AdaptDL's difference estimator over consecutive steps (not the
 * first step of a run, which holds the start-up reads). */
static void step_monitor_single_replica_statistics(struct step_monitor *monitor,
                                                   uint64_t records)
{
    uint64_t batch = step_monitor_batch_estimate(monitor, records);
    if (monitor->replicas != 1 || monitor->gradient_pieces == 0 || batch == 0 ||
        monitor->boundaries <= 1 || !monitor->measuring)
        return;
    if (monitor->noise.initial_global_bsz == 0)
        monitor->noise.initial_global_bsz = batch;
    if (!monitor->pair_valid)
        grad_noise_forget_previous(&monitor->noise);
    grad_noise_update_consecutive(&monitor->noise, monitor->local_sqr, monitor->pair_mean_sqr,
                                  batch);
}

/* The batch and time of an agreed step, and what the run's later steps
 * learn from it. */
static void step_monitor_note_batch_and_time(struct step_monitor *monitor,
                                             struct agreed_step *step)
{
    step->warm_up = step->step == 1;
    if (step->warm_up) {
        monitor->records_before_first_step = step->global_records;
        step->batch_global = 0;
        return;
    }
    monitor->records_after_warm_up += step->global_records;
    monitor->steps_after_warm_up++;
    step->batch_global = step_monitor_batch_estimate(monitor, step->global_records);
    if (step->batch_global == 0 && step->replicas_with_gradient > 0)
        monitor->steps_with_unknown_batch++;
    if (step->step_time > 0)
        monitor->step_times[monitor->step_time_count++ % STEP_TIME_SAMPLES] = step->step_time;
}

bool step_monitor_ends_step(const struct step_monitor *monitor, const void *communicator)
{
    return monitor->in_step && communicator == monitor->step_communicator;
}

/* (unsigned arithmetic: records_consumed - records may wrap below 0 when the
 * views counted fewer than the trainer says; the difference the boundary
 * takes is `records` all the same) */
void step_monitor_set_step_records(struct step_monitor *monitor, uint64_t records_consumed,
                                   uint64_t records)
{
    monitor->records_at_step_start = records_consumed - records;
}

void step_monitor_note_commit(struct step_monitor *monitor)
{
    monitor->committed_since_boundary = true;
}

/* Turns the completed sums into the agreed step and the noise estimate. */
static void step_monitor_take_sums(struct step_monitor *monitor)
{
    const double *sums = monitor->receive;
    double replicas = (double)monitor->replicas;
    struct agreed_step *step = &monitor->last;
    memset(step, 0, sizeof *step);
    step->step = monitor->posted_step;
    step->replicas = monitor->replicas;
    step->replicas_with_gradient = (uint32_t)llround(sums[PIGGYBACK_HAS_GRADIENT]);
    step->global_records = (uint64_t)llround(sums[PIGGYBACK_RECORDS]);
    step->local_records = monitor->posted_local_records;
    step->step_time = sums[PIGGYBACK_STEP_TIME] / replicas;
    step->sync_time = sums[PIGGYBACK_SYNC_TIME] / replicas;
    step->local_sqr_mean = sums[PIGGYBACK_LOCAL_SQR] / replicas;
    step->total_sqr = sums[PIGGYBACK_TOTAL_SQR] / replicas;
    monitor->has_last = true;
    step_monitor_note_batch_and_time(monitor, step);
    bool measured = llround(sums[PIGGYBACK_MEASURED]) == (long long)monitor->replicas;
    if (measured)
        monitor->measured_period_in_force = monitor->measured_period_posted;
    if (measured && step->step_time > 0) {
        double norm_time = sums[PIGGYBACK_NORM_TIME] / replicas;
        double period = ceil(norm_time / (STEP_MEASURE_BUDGET * step->step_time));
        monitor->measure_period = period < 1                         ? 1
                                  : period > STEP_MEASURE_PERIOD_MAX ? STEP_MEASURE_PERIOD_MAX
                                                                     : (uint64_t)period;
    }
    /* Without a configured initial batch size, the first known global
     * batch is the initial one (AdaptDL's batch_size is the trainer's own). */
    if (monitor->noise.initial_global_bsz == 0 && step->batch_global > 0)
        monitor->noise.initial_global_bsz = step->batch_global;
    /* Statistics only from measured steps in which every replica had
     * gradients: a partial step mixes replicas that did and did not reduce. */
    /* this observation stands for the steps since the previous measured one */
    monitor->noise.steps_per_observation = monitor->measured_period_in_force;
    if (measured && monitor->replicas >= 2 &&
        step->replicas_with_gradient == monitor->replicas && step->batch_global > 0)
        step->statistics_updated = grad_noise_update_replicas(
            &monitor->noise, step->local_sqr_mean, step->total_sqr, monitor->replicas,
            step->batch_global / monitor->replicas, step->batch_global);
}

/* A stop signal stops at once (or after the drain); a restart request for a
 * new batch size always waits for the trainer's next checkpoint commit, so
 * that the restart loses no training. */
static bool step_monitor_should_stop(struct step_monitor *monitor, double now)
{
    const double *sums = monitor->receive;
    bool signalled = sums[PIGGYBACK_EXIT] > 0.5;
    if (!monitor->exit_agreed && (signalled || sums[PIGGYBACK_RESTART] > 0.5)) {
        monitor->exit_agreed = true;
        monitor->restart_agreed = !signalled;
        monitor->exit_agreed_at = now;
        return signalled && monitor->drain_seconds <= 0;
    }
    if (!monitor->exit_agreed)
        return false;
    if (monitor->restart_agreed && signalled) {
        /* a stop signal during the wait for a commit: it is a stop now */
        monitor->restart_agreed = false;
        monitor->exit_agreed_at = now;
        if (monitor->drain_seconds <= 0)
            return true;
    }
    if (monitor->restart_agreed)
        return sums[PIGGYBACK_COMMITTED] > 0.5;
    return sums[PIGGYBACK_COMMITTED] > 0.5 || sums[PIGGYBACK_DRAIN_EXPIRED] > 0.5;
}

enum step_action step_monitor_boundary(struct step_monitor *monitor, double now,
                                       uint64_t records_consumed, bool exit_requested,
                                       bool restart_requested)
{
    bool stop = false;
    monitor->boundaries++;
    if (monitor->posted) {
        monitor->transport.complete(monitor->transport.context);
        monitor->posted = false;
        step_monitor_take_sums(monitor);
        stop = step_monitor_should_stop(monitor, now);
    }
    double *send = monitor->send;
    memset(send, 0, sizeof monitor->send);
    uint64_t records = records_consumed - monitor->records_at_step_start;
    send[PIGGYBACK_EXIT] = exit_requested ? 1.0 : 0.0;
    send[PIGGYBACK_RESTART] = restart_requested ? 1.0 : 0.0;
    send[PIGGYBACK_COMMITTED] = monitor->committed_since_boundary ? 1.0 : 0.0;
    send[PIGGYBACK_DRAIN_EXPIRED] =
        monitor->exit_agreed && now - monitor->exit_agreed_at >= monitor->drain_seconds ? 1.0
                                                                                        : 0.0;
    send[PIGGYBACK_HAS_GRADIENT] = monitor->gradient_pieces > 0 ? 1.0 : 0.0;
    send[PIGGYBACK_LOCAL_SQR] = monitor->local_sqr;
    send[PIGGYBACK_TOTAL_SQR] = monitor->total_sqr;
    send[PIGGYBACK_RECORDS] = (double)records;
    send[PIGGYBACK_STEP_TIME] = now - monitor->step_started;
    send[PIGGYBACK_SYNC_TIME] = monitor->sync_time;
    send[PIGGYBACK_MEASURED] = monitor->measuring && monitor->gradient_pieces > 0 ? 1.0 : 0.0;
    monitor->measured_period_posted = monitor->measured_period_pending;
    send[PIGGYBACK_NORM_TIME] = monitor->norm_time;
    monitor->posted_local_records = records;
    monitor->posted_step = monitor->boundaries;
    step_monitor_single_replica_statistics(monitor, records);

    /* the next step starts here */
    monitor->in_step = false;
    monitor->step_communicator = NULL;
    monitor->step_started = now;
    monitor->sync_time = 0;
    monitor->local_sqr = 0;
    monitor->total_sqr = 0;
    monitor->gradient_pieces = 0;
    monitor->records_at_step_start = records_consumed;
    monitor->committed_since_boundary = false;
    monitor->pair_mean_sqr = 0;
    monitor->pair_valid = false;
    monitor->norm_time = 0;
    /* The step starting now is number boundaries + 1.  One replica measures
     * every step: its difference estimator, fed pairs of sampled steps only,
     * came out biased high in tests (to be understood; adaptshim(7)
     * "Gradient statistics (transparent)" says one process measures every
     * step). */
    uint64_t next = monitor->boundaries + 1;
    monitor->measuring = monitor->replicas == 1 || next % monitor->measure_period == 0;
    if (monitor->measuring)
        monitor->measured_period_pending = monitor->replicas == 1 ? 1 : monitor->measure_period;

    if (stop)
        return STEP_STOP;
    if (monitor->transport.post(monitor->transport.context, monitor->send, monitor->receive,
                                PIGGYBACK_FIELD_COUNT) == 0)
        monitor->posted = true;
    return STEP_CONTINUE;
}

bool step_monitor_local_boundary(struct step_monitor *monitor, double now,
                                 uint64_t records_consumed)
{
    uint64_t records = records_consumed - monitor->records_at_step_start;
    if (records == 0)
        return false;
    monitor->boundaries++;
    struct agreed_step *step = &monitor->last;
    memset(step, 0, sizeof *step);
    step->step = monitor->boundaries;
    step->replicas = 1;
    step->global_records = records;
    step->local_records = records;
    step->step_time = now - monitor->step_started;
    step_monitor_note_batch_and_time(monitor, step);
    monitor->has_last = true;
    monitor->step_started = now;
    monitor->records_at_step_start = records_consumed;
    return true;
}

bool step_monitor_drain_reduction(struct step_monitor *monitor)
{
    if (!monitor->posted)
        return false;
    monitor->transport.complete(monitor->transport.context);
    monitor->posted = false;
    step_monitor_take_sums(monitor);
    return true;
}

uint64_t step_monitor_records_in_flight(const struct step_monitor *monitor)
{
    if (!monitor->posted)
        return 0;
    return monitor->posted_local_records * monitor->replicas;
}

void step_monitor_uncounted_steps(const struct step_monitor *monitor, bool synchronized,
                                  uint64_t records_consumed, uint64_t *steps,
                                  uint64_t *records)
{
    *steps = 0;
    *records = 0;
    uint64_t in_progress = records_consumed - monitor->records_at_step_start;
    if (!synchronized) {
        if (in_progress > 0) {
            *steps = 1;
            *records = in_progress;
        }
        return;
    }
    if (monitor->posted) {
        *steps += 1;
        *records += step_monitor_records_in_flight(monitor);
    }
    if (monitor->in_step) {
        *steps += 1;
        *records += in_progress * monitor->replicas;
    }
}

int step_monitor_record_profile(const struct step_monitor *monitor, uint32_t nodes,
                                struct adaptdl_job_record *record)
{
    const struct agreed_step *step = &monitor->last;
    uint64_t local_bsz = agreed_step_local_batch(step);
    if (monitor->has_last && !step->warm_up && local_bsz > 0 && step->step_time > 0) {
        struct step_profile *bucket = NULL;
        for (size_t i = 0; i < record->profile_count; i++) {
            struct step_profile *candidate = &record->profiles[i];
            if (candidate->nodes == nodes && candidate->replicas == step->replicas &&
                candidate->local_bsz == local_bsz)
                bucket = candidate;
        }
        if (bucket == NULL) {
            struct step_profile *grown = realloc(record->profiles,
                                                 (record->profile_count + 1) * sizeof *grown);
            if (grown == NULL)
                return -1;
            record->profiles = grown;
            bucket = &record->profiles[record->profile_count++];
            *bucket = (struct step_profile){.nodes = nodes, .replicas = step->replicas,
                                            .local_bsz = local_bsz};
        }
        bucket->count++;
        bucket->step_time_sum += step->step_time;
        bucket->sync_time_sum += step->sync_time;
        if (step->replicas > record->max_replicas_profiled)
            record->max_replicas_profiled = step->replicas;
    }
    record->grad_sqr = grad_noise_sqr(&monitor->noise);
    record->grad_var = grad_noise_var(&monitor->noise);
    record->grad_sqr_biased = monitor->noise.sqr_biased;
    record->grad_var_biased = monitor->noise.var_biased;
    record->grad_ema_weight = monitor->noise.var_unbias;
    record->grad_sqr_square_biased = monitor->noise.sqr_square_biased;
    record->grad_var_square_biased = monitor->noise.var_square_biased;
    record->grad_weight_square_sum = monitor->noise.weight_square_sum;
    return 0;
}

void step_monitor_restore_statistics(struct step_monitor *monitor,
                                     const struct adaptdl_job_record *record)
{
    if (!(record->grad_ema_weight > 0))
        return;
    struct grad_noise_state *noise = &monitor->noise;
    noise->sqr_biased = record->grad_sqr_biased;
    noise->var_biased = record->grad_var_biased;
    noise->sqr_unbias = record->grad_ema_weight;
    noise->var_unbias = record->grad_ema_weight;
    noise->sqr_square_biased = record->grad_sqr_square_biased;
    noise->var_square_biased = record->grad_var_square_biased;
    noise->weight_square_sum = record->grad_weight_square_sum;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double step_monitor_median_step_time(const struct step_monitor *monitor)
{
    size_t count = monitor->step_time_count < STEP_TIME_SAMPLES ? (size_t)monitor->step_time_count
                                                                : STEP_TIME_SAMPLES;
    if (count == 0)
        return 0;
    double sorted[STEP_TIME_SAMPLES];
    memcpy(sorted, monitor->step_times, count * sizeof *sorted);
    qsort(sorted, count, sizeof *sorted, compare_doubles);
    return count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2;
}

bool step_monitor_unknown_batch_warning(struct step_monitor *monitor, char *message,
                                        size_t message_size)
{
    if (monitor->unknown_batch_warned ||
        monitor->steps_with_unknown_batch < STEP_UNKNOWN_BATCH_STEPS)
        return false;
    monitor->unknown_batch_warned = true;
    char before[128] = "none of them through an ADAPTDL_DATA train file";
    if (monitor->records_before_first_step > 0)
        snprintf(before, sizeof before, "%" PRIu64 " were read before the first step: the "
                 "trainer reads its data ahead", monitor->records_before_first_step);
    snprintf(message, message_size,
             "%" PRIu64 " steps read no train record (%s), so the batch size is unknown and "
             "the gradient statistics are not used; set ADAPTDL_BATCH_SIZE to the trainer's "
             "global batch size",
             monitor->steps_with_unknown_batch, before);
    return true;
}
