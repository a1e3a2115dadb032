/* adaptdl.h - the cooperative API of adaptshim (adaptdl(3)): AdaptDL's epochs,
 * data loops, accumulators, registered state and gradient statistics, for
 * C and C++ trainers that opt in.
 *
 * Link with `pkg-config --cflags --libs adaptshim` (libadaptdl.so, a stand-in
 * that answers as one replica with nothing to restore, so the trainer runs
 * as it is without the preload), and run under the preload as any trainer:
 * `LD_PRELOAD=libadaptshim.so ./trainer` or `adaptdl-wrap`.  The preloaded
 * library defines the same functions and wins; its state is then part of
 * the snapshot bound to each checkpoint the trainer commits (ADAPTDL_SAVE)
 * and comes back when the trainer loads that checkpoint.
 *
 * Errors: functions returning int return 0 (or a count) on success and -1
 * on misuse or failure; epoch functions return ADAPTDL_ERROR; creators
 * return NULL.  adaptdl_last_error() then says what was wrong, in one line.
 * The AdaptDL call each function mirrors is named in adaptdl(3).  The API
 * is for one thread: a collective (accumulator synchronization, loops with
 * adaptation, adaptdl_synchronize_states) must be entered by every replica
 * at the same point. */
#ifndef ADAPTDL_H
#define ADAPTDL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ADAPTDL_NONE (-1)        /* no epoch: outside every epoch loop */
#define ADAPTDL_ERROR (-2)

/* The last error of this thread, or "". */
const char *adaptdl_last_error(void);

/* --- the job ----------------------------------------------------------------
 * The replica count and this replica's rank: ADAPTDL_NUM_REPLICAS and
 * ADAPTDL_REPLICA_RANK, or the launcher's (mpirun's, torchrun's); a number
 * none of them gives is MPI's (MPI_Comm_size, MPI_Comm_rank of
 * MPI_COMM_WORLD) once MPI_Init has run under the preload, with or
 * without any ADAPTDL_* variable, and 1 replica, rank 0 before.  Without
 * the preload (the stand-in): 1 and 0. */
unsigned adaptdl_num_replicas(void);
unsigned adaptdl_replica_rank(void);
unsigned adaptdl_num_restarts(void);

/* --- collectives without MPI: the trainer's own all-gather ------------------
 * The API's collectives (accumulator synchronization, adaptive loops'
 * batch-size agreement, adaptdl_synchronize_states) go over MPI's world
 * when MPI is up under the preload.  A job whose replicas share no MPI
 * world (a PyTorch job over torch.distributed) gives its own all-gather
 * instead, on every replica, with the replica count and this replica's
 * rank; a number no variable gives is then the job's (as with MPI's).
 *
 * The library calls `allgather` inside its collectives, on every replica
 * at the same point, with this replica's `size` bytes; it sets sizes[r]
 * for each of the `replicas` replicas, points *gathered at their bytes
 * concatenated in rank order (memory that stays the caller's; the library
 * copies it before the call returns) and returns 0, or nonzero with a
 * one-line reason in error[0, error_size).  It must not call this API.
 * Returns 0 when the collectives now use it; 1 when MPI's world carries
 * them (it stays installed for when MPI is finalized); -1 for replicas 0
 * or rank >= replicas.  A NULL allgather removes the installed one.  The
 * stand-in libadaptdl.so uses it too: its job is then that layout. */
typedef int adaptdl_allgather_function(void *context, const void *bytes, size_t size,
                                       size_t *sizes, const void **gathered, char *error,
                                       size_t error_size);
int adaptdl_use_allgather(unsigned replicas, unsigned rank, adaptdl_allgather_function *allgather,
                          void *context);

/* --- epochs: remaining_epochs_until, current_epoch, finished_epochs ---------
 *     for (int64_t e = adaptdl_remaining_epochs_until(30); e >= 0;
 *          e = adaptdl_next_epoch()) { ... }
 * After a restart the loop starts at the first epoch not finished.  Leave a
 * loop early (break) with adaptdl_leave_epoch_loop(): the current epoch then
 * counts as finished, as AdaptDL's does.
 *
 * A data loop iteration may not stay open across epochs: while one is
 * being iterated (adaptdl_loop_begin without the end of its batches or
 * adaptdl_loop_break), beginning the epoch loop, the next epoch and leaving
 * the loop fail (ADAPTDL_ERROR, or -1 for leave) and change nothing; the
 * message is also logged, since the loop above then simply ends.
 * Beginning a second epoch loop inside a running one fails too. */
int64_t adaptdl_remaining_epochs_until(int64_t end);
int64_t adaptdl_next_epoch(void);
int adaptdl_leave_epoch_loop(void);
int64_t adaptdl_current_epoch(void);
int64_t adaptdl_finished_epochs(void);

/* --- data loops: AdaptiveDataLoaderHelper --------------------------------------
 *     adaptdl_loop *loop = adaptdl_loop_create(records, 64, true);
 *     ...
 *     uint64_t indices[MAX_LOCAL];
 *     long n;
 *     if (adaptdl_loop_begin(loop) < 0) ...;
 *     while ((n = adaptdl_loop_next(loop, indices, MAX_LOCAL)) > 0)
 *         train on records indices[0..n-1];
 * `batch_size` is the global batch; each replica gets its share of it.  A
 * loop over a file of fixed-size records reads them itself:
 * adaptdl_loop_next_records copies the batch's records, in order. */
typedef struct adaptdl_loop adaptdl_loop;
adaptdl_loop *adaptdl_loop_create(uint64_t records, uint64_t batch_size, bool shuffle);
adaptdl_loop *adaptdl_loop_create_for_file(const char *path, uint64_t record_size,
                                           uint64_t header_size, uint64_t batch_size,
                                           bool shuffle);
void adaptdl_loop_destroy(adaptdl_loop *loop);
/* This loop trains: its steps are profiled for the goodput model. */
int adaptdl_loop_train(adaptdl_loop *loop);
/* Adaptive batch size up to max_batch_size (global), local bounds 0 = none;
 * marks the loop as training, and its iterations then end by statistical
 * progress. */
int adaptdl_loop_autoscale(adaptdl_loop *loop, uint64_t max_batch_size, uint64_t min_local,
                           uint64_t max_local);
/* Enters an iteration: 1, or 0 when this position of the epoch was finished
 * before a restart (the iteration is then empty), or -1. */
int adaptdl_loop_begin(adaptdl_loop *loop);
/* The next batch's record indices; its size, 0 at the end of the iteration
 * (which has then been left), -1 on error. */
long adaptdl_loop_next(adaptdl_loop *loop, uint64_t *indices, size_t capacity);
/* Loops over a file: the next batch's records copied into buffer. */
long adaptdl_loop_next_records(adaptdl_loop *loop, void *buffer, size_t capacity_bytes);
/* Leaves an iteration early. */
void adaptdl_loop_break(adaptdl_loop *loop);
/* Records of every replica done in the loop's running iteration; 0 when it
 * is not being iterated (AdaptDL: None) or for no loop. */
uint64_t adaptdl_loop_current_index(const adaptdl_loop *loop);
/* The batch sizes of the running (or last) iteration's sweep; 0 before the
 * loop's first iteration (AdaptDL: None) or for no loop. */
uint64_t adaptdl_loop_local_batch_size(const adaptdl_loop *loop);
uint64_t adaptdl_loop_global_batch_size(const adaptdl_loop *loop);
/* AdaScale's gain at the loop's current global batch against its initial
 * one, from the gradient statistics so far (1 without any): multiply the
 * learning rate of the initial batch by it (AdaptDL's AdaScale rule). */
double adaptdl_loop_gain(const adaptdl_loop *loop);

/* --- accumulators: Accumulator -------------------------------------------------
 * add/subtract outside a synchronized block are local updates (a key is
 * created at 0); between adaptdl_accumulator_synchronize and _desynchronize
 * the accumulator reads and writes as a dictionary holding every replica's
 * updates summed, and add/subtract there need a key it holds (-1 for a
 * missing one, where AdaptDL raises KeyError).  Outside a synchronized
 * block it reads as empty (size 0, get false), set and remove are refused
 * (-1) and clear does nothing, as in AdaptDL.  get
 * returns false and leaves *value untouched for a key that is absent
 * (AdaptDL: KeyError for accum[k], None for accum.get(k)). */
typedef struct adaptdl_accumulator adaptdl_accumulator;
adaptdl_accumulator *adaptdl_accumulator_create(void);
/* AdaptDL's Accumulator(initial_dict): `count` keys and their values are
 * the results the first synchronization adds to (a key given twice takes
 * its last value); when a restored checkpoint holds this accumulator, its
 * saved results replace them, as AdaptDL's load_state does. */
adaptdl_accumulator *adaptdl_accumulator_create_with_values(const char *const *keys,
                                                            const double *values, size_t count);
void adaptdl_accumulator_destroy(adaptdl_accumulator *accumulator);
int adaptdl_accumulator_add(adaptdl_accumulator *accumulator, const char *key, double value);
int adaptdl_accumulator_subtract(adaptdl_accumulator *accumulator, const char *key,
                                 double value);
int adaptdl_accumulator_synchronize(adaptdl_accumulator *accumulator);
void adaptdl_accumulator_desynchronize(adaptdl_accumulator *accumulator);
bool adaptdl_accumulator_get(const adaptdl_accumulator *accumulator, const char *key,
                             double *value);
int adaptdl_accumulator_set(adaptdl_accumulator *accumulator, const char *key, double value);
int adaptdl_accumulator_remove(adaptdl_accumulator *accumulator, const char *key);
int adaptdl_accumulator_clear(adaptdl_accumulator *accumulator);
size_t adaptdl_accumulator_size(const adaptdl_accumulator *accumulator);
const char *adaptdl_accumulator_key(const adaptdl_accumulator *accumulator, size_t index);

/* --- state: State, save_all_states -----------------------------------------------
 * Registered state is saved in the snapshot of every checkpoint commit and
 * restored with it.  adaptdl_synchronize_states sums every accumulator's
 * pending updates over the replicas (a collective): call it on every
 * replica before the checkpoint commit that should carry them.
 *
 * Ownership: a registered buffer stays the trainer's; it is read at each
 * commit and overwritten at a restore.  A save callback returns 0 and
 * points *bytes at *size bytes that stay the trainer's: static memory, a
 * member of the context, or memory it allocated (free it yourself, e.g. at
 * the next save call); the library copies them as soon as save returns
 * and never frees them.  A nonzero return, or *size > 0 with *bytes NULL,
 * fails the checkpoint commit.  The load callback gets the saved bytes
 * for the duration of the call only (copy what you keep) and returns 0, or
 * nonzero to refuse them. */
int adaptdl_register_buffer(const char *name, void *buffer, size_t size);
int adaptdl_register_callbacks(const char *name,
                               int (*save)(void *context, void **bytes, size_t *size),
                               int (*load)(void *context, const void *bytes, size_t size),
                               void *context);
int adaptdl_synchronize_states(void);

/* --- gradient statistics without MPI interception --------------------------------
 * Once per step: |g_local|^2 of this replica's gradient, |g_mean|^2 of the
 * gradient averaged over replicas, and this replica's batch size. */
int adaptdl_report_gradient(double local_sqr, double mean_sqr, uint64_t local_batch);

#ifdef __cplusplus
}
#endif

#endif
