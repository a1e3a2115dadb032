/* statistical_epoch.h - AdaptDL's statistical epochs for a trainer that sees
 * each pass as a file of fixed size (adaptshim(7) "Statistical epochs").
 *
 * With adaptation on, AdaptDL counts training in "progress": every step adds
 * its gain, the number of initial-batch steps it is worth
 * (gain = scale * efficiency, from the gradient statistics), and epoch e is
 * over when the progress reaches N (e + 1) / B0.  At a larger batch a step
 * is worth less than `scale` initial steps, so an epoch then holds more
 * than N records.
 *
 * An unmodified trainer reads a pass as a file whose size is fixed when the
 * pass's view is fixed, so the length of the pass is planned then: the
 * records needed for the expected progress to reach the target,
 *
 *     M = (N (e + 1) / B0 - progress) * B0 / efficiency,
 *
 * from the progress counted so far and the efficiency at this run's batch
 * size.  Because the target is absolute, an error in one pass (statistics
 * that moved, a last partial batch) is corrected by the next.  Progress is
 * counted from records: a step of R records (all replicas) adds
 * R * efficiency / B0, which equals AdaptDL's gain for a full batch and
 * counts a partial last batch in proportion.
 *
 * Every replica must plan the same length, so the counting uses only what
 * every replica agrees on (the piggy-backed sums of each step, and
 * statistics computed from them): see shim/pass_planning.c.
 *
 * The progress and the step counter are data positions: they are captured
 * into bound snapshots and restored with them. */
#ifndef ADAPTSHIM_STATISTICAL_EPOCH_H
#define ADAPTSHIM_STATISTICAL_EPOCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A planned pass lies between these multiples of the nominal length
 * N / efficiency: the correction of one pass's error is bounded, so that
 * statistics gone wrong, or a progress far from its target, can neither
 * empty an epoch nor make it endless. */
#define STATISTICAL_EPOCH_MIN_STRETCH 0.5
#define STATISTICAL_EPOCH_MAX_STRETCH 2.0

struct statistical_epochs {
    pthread_mutex_t lock;
    bool enabled;              /* adaptation on: train passes are planned */
    double initial_global_bsz; /* B0 */
    double global_bsz;         /* the global batch this run uses */
    double progress;           /* sum of per-step gains, in initial-batch steps */
    uint64_t step;             /* agreed steps, continuing across restarts */
    double efficiency;         /* at global_bsz from the latest statistics; 1 without */
    uint32_t train_files;      /* registered train files */
    /* the global batch of the run whose snapshot was restored (0: none or
     * unknown): a resumed pass planned at another batch is re-planned */
    uint64_t restored_global_bsz;
};

/* What a bound snapshot keeps of statistical epochs. */
struct statistical_epoch_position {
    double progress;
    uint64_t step;
    uint64_t global_bsz;       /* the committing run's; 0 when planning is off */
};

void statistical_epochs_init(struct statistical_epochs *epochs);

/* Turns planning on for a run that uses `global_bsz` with the initial
 * global batch `initial_global_bsz` (both > 0; otherwise planning stays
 * off), with the efficiency from the statistics known at start-up (the job
 * record's; NAN when there are none). */
void statistical_epochs_enable(struct statistical_epochs *epochs, double initial_global_bsz,
                               double global_bsz, double grad_sqr, double grad_var);

/* Efficiency of a global batch under the gradient statistics (grad_sqr,
 * per-sample grad_var, as in goodput.h); 1 when the statistics say nothing
 * or a batch size is not positive. */
double statistical_epoch_efficiency(double grad_sqr, double grad_var,
                                    double initial_global_bsz, double global_bsz);

/* AdaptDL's gain of a global batch: how many steps at the initial batch one
 * step at `global_bsz` is worth, efficiency * global_bsz / initial.  1 when
 * the statistics are not finite numbers (grad_sqr positive, grad_var not
 * negative) or the initial batch is 0: nothing known, no gain claimed. */
double statistical_epoch_gain(double grad_sqr, double grad_var, double initial_global_bsz,
                              double global_bsz);

/* One agreed step consumed `global_records` train records on all replicas:
 * refreshes the efficiency from the statistics, then adds the step's
 * progress and counts the step. */
void statistical_epochs_note_step(struct statistical_epochs *epochs, uint64_t global_records,
                                  double grad_sqr, double grad_var);

/* The length M of pass `pass` of a train file of `record_count` records.
 * `pending_records` were consumed (all replicas) in a step whose agreed
 * sums have not arrived yet: they count as progress at the current
 * efficiency.  With one train file the plan corrects the progress error;
 * with several (shards read one after another, whose passes are fixed at
 * different points of an epoch) each pass is the nominal N / efficiency.
 * Returns record_count when planning is off. */
uint64_t statistical_epochs_pass_length(struct statistical_epochs *epochs,
                                        uint64_t record_count, uint64_t pass,
                                        uint64_t pending_records);

/* The pure plan behind it: records needed from `progress` to reach
 * N (epoch + 1) / B0 at `efficiency`, within the stretch bounds, at least
 * 1.  `correct` false: the nominal N / efficiency. */
uint64_t statistical_epoch_plan_length(uint64_t record_count, uint64_t epoch, double progress,
                                       double initial_global_bsz, double efficiency,
                                       bool correct);

/* A train file was registered (the plan corrects only with one). */
void statistical_epochs_note_train_file(struct statistical_epochs *epochs);

/* The progress and step counter so far (for step lines and logs). */
void statistical_epochs_capture(struct statistical_epochs *epochs, double *progress,
                                uint64_t *step);
/* The position a checkpoint committed now stands for: besides the counted
 * steps, `pending_steps` the trainer has finished whose agreed sums have
 * not arrived yet, of `pending_records` records (all replicas), counted at
 * the current efficiency.  Without them a restart would lose a step of
 * progress, and one count of the step counter, each time. */
void statistical_epochs_capture_with_pending(struct statistical_epochs *epochs,
                                             uint64_t pending_steps, uint64_t pending_records,
                                             struct statistical_epoch_position *position);
/* From a bound snapshot (a non-finite or negative progress counts as 0). */
void statistical_epochs_restore(struct statistical_epochs *epochs,
                                const struct statistical_epoch_position *position);

/* The length of pass `pass`, restored at global index `consumed` with the
 * length `bound_length` the committing run planned.  Kept when this run
 * trains at the batch that run used (a preempted job then reads exactly
 * what it would have read uninterrupted).  After a restart for another
 * batch, that plan counted on another efficiency: the rest of the pass is
 * re-planned from the restored progress, so that the epoch still ends
 * where its progress reaches the target (AdaptDL ends it there whatever
 * batch sizes it went through): consumed + the records still needed,
 * at most the upper stretch of N / efficiency, possibly none.  A pass not
 * begun is planned as a fresh one; a finished one stays finished. */
uint64_t statistical_epochs_resumed_pass_length(struct statistical_epochs *epochs,
                                                uint64_t record_count, uint64_t pass,
                                                uint64_t consumed, uint64_t bound_length);

/* The pure rule behind it for a begun pass: records still needed from
 * `progress` to reach N (epoch + 1) / B0 at `efficiency`, within
 * [0, upper stretch of N / efficiency]. */
uint64_t statistical_epoch_plan_remaining(uint64_t record_count, uint64_t epoch,
                                          double progress, double initial_global_bsz,
                                          double efficiency);

#endif
