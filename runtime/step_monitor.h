/* step_monitor.h - steps, the piggy-backed reduction and agreed stops
 * (adaptshim(7) "Steps", "Piggy-backing").
 *
 * Every replica must count the same steps, so a step boundary is taken from
 * the sequence of collectives, which all replicas share: a step is a run of
 * gradient all-reduces, ended by the first other collective on the same
 * communicator or by the next train-batch read.  At each boundary the
 * monitor completes the small non-blocking all-reduce it posted at the
 * previous boundary and posts a new one carrying this step's numbers (exit
 * and restart requests, the "a checkpoint was committed" flag, squared
 * gradient norms, records consumed, step and sync times).  Every replica
 * posts the same number of these in the same order, so they always match,
 * and none of them sits on the critical path.
 *
 * The sums of step k arrive at boundary k+1, identical on every replica: a
 * stop decided from them is taken by all replicas at the same boundary.
 *
 * What it cannot see: a trainer whose only collective is its gradient
 * all-reduce and whose reads come from a prefetch thread has no boundary
 * between two steps' gradient all-reduces; its gradient pieces then merge
 * into one long step until the next read on the calling thread or the next
 * other collective. */
#ifndef ADAPTSHIM_STEP_MONITOR_H
#define ADAPTSHIM_STEP_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grad_noise.h"
#include "state_store.h"

enum piggyback_field {
    PIGGYBACK_EXIT = 0,          /* replicas asked to stop (a signal) */
    PIGGYBACK_RESTART,           /* replicas asking for a restart (batch size) */
    PIGGYBACK_COMMITTED,         /* replicas that committed a checkpoint this step */
    PIGGYBACK_DRAIN_EXPIRED,     /* replicas whose drain time is over */
    PIGGYBACK_HAS_GRADIENT,      /* replicas that saw gradient all-reduces */
    PIGGYBACK_LOCAL_SQR,         /* |own input|^2, summed over the step's pieces */
    PIGGYBACK_TOTAL_SQR,         /* |result / K|^2, summed over the pieces */
    PIGGYBACK_RECORDS,           /* train records consumed this step */
    PIGGYBACK_STEP_TIME,         /* seconds from the previous boundary */
    PIGGYBACK_SYNC_TIME,         /* seconds inside gradient all-reduces */
    PIGGYBACK_PROGRESS,          /* statistical progress (batch-size control) */
    PIGGYBACK_MEASURED,          /* replicas that measured gradient norms this step */
    PIGGYBACK_NORM_TIME,         /* seconds spent measuring them */
    PIGGYBACK_FIELD_COUNT
};

/* The transport of the piggy-backed reduction: an MPI_Iallreduce of doubles
 * with MPI_SUM on the shim's own communicator, or a fake in tests. */
struct piggyback_transport {
    void *context;
    /* posts the sum of `count` doubles; `receive` is filled by complete() */
    int (*post)(void *context, const double *send, double *receive, int count);
    /* waits for the posted reduction */
    int (*complete)(void *context);
};

/* A transport for a single process that has no collective library (a
 * PyTorch trainer without torch.distributed): what it posts is the sum over
 * its one replica, so complete() finds it in place.  Agreement then works
 * as with MPI's world of one: a stop is taken at the boundary after the
 * one where it was requested, decisions travel the same way. */
struct piggyback_loopback {
    const double *send;
    double *receive;
    int count;
};
struct piggyback_transport piggyback_loopback_transport(struct piggyback_loopback *loopback);

/* One step as every replica agrees on it (from the completed sums). */
struct agreed_step {
    uint64_t step;               /* 1-based step number */
    uint32_t replicas;           /* K */
    uint32_t replicas_with_gradient;
    uint64_t global_records;     /* records consumed by all replicas */
    uint64_t local_records;      /* this replica's own records in that step */
    double step_time;            /* mean over replicas */
    double sync_time;            /* mean over replicas */
    double local_sqr_mean;       /* mean over replicas of |own gradient|^2 */
    double total_sqr;            /* |mean gradient|^2 */
    bool statistics_updated;     /* the noise estimate took this step */
    /* The first step of a run holds the start-up (a loader that reads all
     * its data before training, first-call latencies): it is no sample of
     * a step's time or batch. */
    bool warm_up;
    /* The global batch of this step: its records, or, for a step that read
     * none (data read ahead), the mean records per step of this run after
     * the first; 0 when that is unknown too. */
    uint64_t batch_global;
};

/* The local batch of an agreed step (its global batch over the replicas,
 * rounded up: the padded share), 0 when unknown. */
static inline uint64_t agreed_step_local_batch(const struct agreed_step *step)
{
    uint32_t replicas = step->replicas ? step->replicas : 1;
    return (step->batch_global + replicas - 1) / replicas;
}

/* Step times kept for the median (the latest ones). */
#define STEP_TIME_SAMPLES 1024
/* Agreed steps without a known batch before the monitor says so. */
#define STEP_UNKNOWN_BATCH_STEPS 20

enum step_action {
    STEP_CONTINUE = 0,
    STEP_STOP,                   /* every replica stops here: exit with 143 */
};

struct step_monitor {
    struct piggyback_transport transport;
    uint32_t replicas;           /* size of the reduction's communicator */
    double drain_seconds;

    /* the step in progress */
    bool in_step;
    const void *step_communicator;
    double step_started;         /* time of the previous boundary */
    double sync_time;
    double local_sqr;
    double total_sqr;
    uint64_t gradient_pieces;
    uint64_t records_at_step_start;
    bool committed_since_boundary;
    /* Norms cost a pass over the gradient: they are measured on one step in
     * `measure_period` (every step with K = 1), the period chosen
     * from the agreed sums so that measuring costs at most
     * STEP_MEASURE_BUDGET of the step time.  Every replica derives the same
     * period at the same boundary, so all measure the same steps. */
    uint64_t measure_period;
    bool measuring;              /* the step in progress is measured */
    /* the period a measured step stands for, carried from its start to the
     * boundary where its sums arrive */
    uint64_t measured_period_pending;
    uint64_t measured_period_posted;
    uint64_t measured_period_in_force;
    double norm_time;            /* seconds spent measuring this step */
    /* K = 1: |(a + b)/2|^2 of this step's gradient with the previous one's */
    double pair_mean_sqr;
    bool pair_valid;

    /* the reduction in flight */
    bool posted;
    double send[PIGGYBACK_FIELD_COUNT];
    double receive[PIGGYBACK_FIELD_COUNT];
    uint64_t posted_local_records;
    uint64_t posted_step;        /* the number of the step whose sums are in flight */

    /* agreement */
    uint64_t boundaries;         /* boundaries passed, = steps counted */
    bool exit_agreed;            /* every replica knows a stop is coming */
    bool restart_agreed;
    double exit_agreed_at;
    bool gradient_ever_seen;

    /* the batch of steps that read no record: records and steps of this run
     * after the first step */
    uint64_t records_after_warm_up;
    uint64_t steps_after_warm_up;
    uint64_t steps_with_unknown_batch;
    uint64_t records_before_first_step;
    bool unknown_batch_warned;
    /* this run's step times after the first, the latest STEP_TIME_SAMPLES */
    double step_times[STEP_TIME_SAMPLES];
    uint64_t step_time_count;

    /* statistics */
    struct grad_noise_state noise;
    struct agreed_step last;     /* the latest agreed step */
    bool has_last;
};

/* Share of the step time that measuring gradient norms may take. */
#define STEP_MEASURE_BUDGET 0.005
#define STEP_MEASURE_PERIOD_MAX 1000

/* initial_global_bsz 0: taken from the first step's global batch. */
void step_monitor_init(struct step_monitor *monitor, struct piggyback_transport transport,
                       uint32_t replicas, uint64_t initial_global_bsz, double drain_seconds,
                       double now);

/* True when the step in progress measures its gradient norms. */
static inline bool step_monitor_measuring(const struct step_monitor *monitor)
{
    return monitor->measuring;
}

/* A gradient all-reduce piece completed on `communicator`: squared norms of
 * this replica's input and of the result divided by K (0 when the step is
 * not measured), the seconds the all-reduce took and the seconds measuring
 * took.  Starts a step if none is in progress. */
void step_monitor_gradient(struct step_monitor *monitor, const void *communicator,
                           double local_sqr, double total_sqr, double seconds,
                           double norm_seconds);

/* A gradient piece whose norms cannot be read: its request was freed
 * (MPI_Request_free: the result arrives when nobody looks), or the shim had
 * no room left to remember it until it completes.  It counts toward the
 * step as any piece does (the step structure stays the same on every
 * replica), but the step is reported unmeasured, so no replica takes norms
 * from it. */
void step_monitor_gradient_unmeasured(struct step_monitor *monitor, const void *communicator,
                                      double seconds);

/* K = 1 only, called before step_monitor_gradient() for the same piece:
 * this step's piece and the previous step's same piece give
 * |(a + b)/2|^2 = mean_sqr; `valid` false when the previous step had no such
 * piece (first step, other sizes).  The difference estimator of AdaptDL
 * then runs at the boundary (grad_noise_update_consecutive). */
void step_monitor_gradient_pair(struct step_monitor *monitor, double mean_sqr, bool valid);

/* True when a collective on `communicator` that is not a gradient all-reduce
 * ends the step in progress. */
bool step_monitor_ends_step(const struct step_monitor *monitor, const void *communicator);

/* The step in progress consumed `records` train records, whatever the data
 * views counted (`records_consumed`, the views' running total): a trainer
 * that tells its batch size itself (the first dimension of a PyTorch
 * model's input) is believed, also when a prefetching loader read ahead.
 * Call it just before step_monitor_boundary with the same total. */
void step_monitor_set_step_records(struct step_monitor *monitor, uint64_t records_consumed,
                                   uint64_t records);

/* A checkpoint commit happened (any time): reported with the next payload. */
void step_monitor_note_commit(struct step_monitor *monitor);

/* The boundary: completes the previous reduction (filling monitor->last),
 * posts this step's, and says whether every replica stops now.
 * `records_consumed` is the running total of train records this replica
 * consumed; `exit_requested` / `restart_requested` are this replica's own
 * wishes.  Returns STEP_STOP at the same boundary on every replica. */
enum step_action step_monitor_boundary(struct step_monitor *monitor, double now,
                                       uint64_t records_consumed, bool exit_requested,
                                       bool restart_requested);

/* A boundary of a replica that has no collective to agree on (no MPI): a
 * step is the time between two train-batch reads that delivered records.
 * Fills monitor->last from this replica's own numbers; returns true when a
 * step was completed (records were consumed since the previous one). */
bool step_monitor_local_boundary(struct step_monitor *monitor, double now,
                                 uint64_t records_consumed);

/* The median time of this run's agreed steps after the first (0 without
 * any): the typical step, which a mean over a few slow ones is not. */
double step_monitor_median_step_time(const struct step_monitor *monitor);

/* Once, when STEP_UNKNOWN_BATCH_STEPS agreed steps had gradients but no
 * known batch (the trainer read its data before its first step and no
 * batch size was given): fills `message` with one line naming
 * ADAPTDL_BATCH_SIZE and returns true. */
bool step_monitor_unknown_batch_warning(struct step_monitor *monitor, char *message,
                                        size_t message_size);

/* Completes a reduction still in flight (before MPI_Finalize); true when
 * one was, and its sums are now the latest agreed step. */
bool step_monitor_drain_reduction(struct step_monitor *monitor);

/* Records of the step whose agreed sums are still in flight, over all
 * replicas (in lock-step every replica consumed as many): progress that
 * counts before its sums arrive.  0 when no reduction is in flight. */
uint64_t step_monitor_records_in_flight(const struct step_monitor *monitor);

/* At a checkpoint commit, the steps the trainer finished that no agreed
 * step counts yet, and their records over all replicas, with
 * `records_consumed` train records read so far.  Synchronized: the step
 * whose sums are in flight, and the step in progress once its gradient was
 * reduced (a trainer that checkpoints after its optimizer step, before its
 * next read, has finished it); records read but not yet reduced belong to
 * a step the checkpoint does not include.  Unsynchronized (local
 * boundaries, one replica): the records read since the last boundary, as
 * one step, if any. */
void step_monitor_uncounted_steps(const struct step_monitor *monitor, bool synchronized,
                                  uint64_t records_consumed, uint64_t *steps,
                                  uint64_t *records);

/* Adds the agreed step to the job record's profile buckets (AdaptDL's
 * _metrics profile, keyed by nodes, replicas and local batch size) and
 * copies the gradient statistics there.  -1 on allocation failure. */
int step_monitor_record_profile(const struct step_monitor *monitor, uint32_t nodes,
                                struct adaptdl_job_record *record);

/* Takes back the gradient statistics an earlier run copied into the job
 * record, so that the noise scale and its confidence survive a restart.
 * A record that holds none (a bias-correction weight of 0) changes
 * nothing. */
void step_monitor_restore_statistics(struct step_monitor *monitor,
                                     const struct adaptdl_job_record *record);

#endif
