/* data_loop.h - loops over a dataset with AdaptDL's AdaptiveDataLoaderHelper
 * semantics (adaptdl(3)).
 *
 * A loop is created outside any other loop's iteration and named per epoch
 * and creation count (adaptdl-dataloader-epoch{e}-{k}).  Each iteration has
 * a position within its epoch (the loop registry counts iterations begun in
 * each epoch); leaving an iteration records that position as the loop's last
 * finished one in the epoch, and after a restart an iteration at a position
 * the loop already finished in this epoch is skipped (skipdone).  An
 * interrupted iteration continues at its current index (records of every
 * replica done in the loop), re-partitioned over the new replica count
 * exactly as AdaptDL's ElasticSampler does: replica r of K gets positions
 * base + r, base + r + K, ... of the epoch's permutation, padded with
 * permutation[r] so that all replicas have the same count, in batches of
 * the local batch size.  The current index grows by K * local batch size
 * when the next batch is asked for, so a checkpoint taken while a batch is
 * being trained on does not count it.
 *
 * With adaptation on (max_batch_size > 0) an iteration ends once the
 * statistical progress reaches records * (epoch + 1) / batch_size (AdaptDL's
 * __iter__), sweeping the records again with a fresh permutation when
 * needed; otherwise after one sweep.  The local batch size is asked from the
 * registry's chooser at the start of each sweep (AdaptDL's _sync_local_bsz). */
#ifndef ADAPTSHIM_DATA_LOOP_H
#define ADAPTSHIM_DATA_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "permutation.h"

#define DATA_LOOP_NAME_SIZE 80

struct data_loop;

struct epoch_counter {
    int64_t epoch;
    uint64_t count;
};

struct epoch_counters {
    struct epoch_counter *entries;
    size_t count;
};

/* AdaptDL's class-level state: which loop iterates now, how many
 * iterations began per epoch, how many loops and accumulators were created
 * per epoch (for their names). */
struct data_loop_registry {
    struct data_loop *current;
    struct epoch_counters positions;
    struct epoch_counters loops_created;
    struct epoch_counters accumulators_created;
    /* the local batch size to use for a sweep starting now; NULL: AdaptDL's
     * rule without adaptation, ceil(batch_size / replicas) */
    uint64_t (*choose_local_batch)(void *context, const struct data_loop *loop);
    /* statistical progress so far (adaptation on); NULL: 0 */
    double (*progress)(void *context);
    void *context;
};

struct data_loop_position {
    int64_t epoch;
    int64_t position;
};

struct data_loop {
    char name[DATA_LOOP_NAME_SIZE];
    /* saved in snapshots */
    uint64_t current_index;
    uint64_t end_index;
    struct data_loop_position *last_positions;
    size_t position_count;
    /* settings */
    uint64_t records;
    uint64_t batch_size;          /* target global batch, as AdaptDL's batch_size */
    uint64_t max_batch_size;      /* 0: no adaptation */
    bool shuffle;
    uint64_t seed;
    uint32_t replicas;
    uint32_t rank;
    /* the running iteration */
    int64_t epoch;
    bool skip;                    /* this iteration's position was finished */
    bool batch_in_hand;           /* a batch was handed out and not yet counted */
    uint64_t local_batch;
    uint64_t sweep_base;          /* current_index when the sweep started */
    uint64_t sweep_batches;       /* batches handed out in this sweep */
    struct record_permutation permutation;
};

void epoch_counters_free(struct epoch_counters *counters);
/* Current count for epoch (0 when absent). */
uint64_t epoch_counters_get(const struct epoch_counters *counters, int64_t epoch);
/* Returns the count before, then adds one.  -1 on allocation failure. */
int epoch_counters_take(struct epoch_counters *counters, int64_t epoch, uint64_t *before);

void data_loop_registry_init(struct data_loop_registry *registry);
void data_loop_registry_free(struct data_loop_registry *registry);

/* Creates a loop over `records` records (refused while another loop is
 * being iterated).  0, or -1 with a message. */
int data_loop_create(struct data_loop_registry *registry, struct data_loop *loop, int64_t epoch,
                     uint64_t records, uint64_t batch_size, bool shuffle, uint64_t seed,
                     char *error, size_t error_size);
void data_loop_free(struct data_loop *loop);

/* Adaptation on: the largest global batch (at least batch_size). */
int data_loop_autoscale(struct data_loop *loop, uint64_t max_batch_size, char *error,
                        size_t error_size);

/* Enters an iteration in `epoch` with `replicas`/`rank` (refused while
 * another loop is iterated: overlapping iterations).  *skipped is true when
 * the iteration's position was already finished: the iteration is then
 * over at once (it took its position; batch requests return 0 until the
 * loop is begun again).  0, or -1 with a message. */
int data_loop_begin(struct data_loop_registry *registry, struct data_loop *loop, int64_t epoch,
                    uint32_t replicas, uint32_t rank, bool *skipped, char *error,
                    size_t error_size);

/* Counts the batch in hand as done and hands out the next one: up to
 * `capacity` record indices of this replica's next batch into `indices`
 * (the local batch size must fit).  Returns the batch's size, 0 when the
 * iteration is over (the loop has then left it), or -1 with a message. */
long data_loop_next_batch(struct data_loop_registry *registry, struct data_loop *loop,
                          uint64_t *indices, size_t capacity, char *error, size_t error_size);

/* Leaves an iteration early (a break); the batch in hand is not counted. */
void data_loop_leave(struct data_loop_registry *registry, struct data_loop *loop);

/* The loop's last finished position in an epoch, or -1. */
int64_t data_loop_last_position(const struct data_loop *loop, int64_t epoch);
/* Replaces the saved state (a restore).  -1 on allocation failure. */
int data_loop_set_saved(struct data_loop *loop, uint64_t current_index, uint64_t end_index,
                        const struct data_loop_position *positions, size_t count);

#endif
