/* cooperative_state.h - everything the cooperative API (adaptdl(3)) keeps
 * across a restart, and its place in a bound snapshot.
 *
 * The trainer's epoch loop, its data loops and accumulators, and the state
 * it registered (named buffers, or save/load callbacks) are captured into
 * every snapshot the trainer's checkpoint commit writes, and restored when
 * the trainer loads that checkpoint.  An object created before the restore
 * is restored in place; one created after it takes its saved state, found
 * by name, when it is created - AdaptDL's load_state at construction.
 * Names are AdaptDL's: per epoch and creation count, so the replayed code
 * finds the same objects again. */
#ifndef ADAPTSHIM_COOPERATIVE_STATE_H
#define ADAPTSHIM_COOPERATIVE_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "accumulator.h"
#include "data_loop.h"
#include "epoch_loop.h"
#include "state_store.h"

/* State the trainer registered.  Buffer form: `buffer` of `size` bytes is
 * saved and, at a restore, overwritten (sizes must match).  Callback form:
 * save points *bytes at memory that stays the trainer's (the capture copies
 * it and never frees it), load gets a copy back that is valid during the
 * call only. */
struct registered_state {
    char *name;
    void *buffer;
    size_t size;
    int (*save)(void *context, void **bytes, size_t *size);
    int (*load)(void *context, const void *bytes, size_t size);
    void *context;
};

struct restored_loop {
    char *name;
    uint64_t current_index, end_index;
    struct data_loop_position *positions;
    size_t position_count;
};

struct restored_accumulator {
    char *name;
    struct accumulator_dict results;
    struct accumulator_results *history;
    size_t history_count;
};

struct restored_bytes {
    char *name;
    unsigned char *bytes;
    size_t size;
};

/* The loops or accumulators the trainer created, in creation order.  The
 * items are stored as void * and read back as the type they were added as:
 * a void * converts to any object pointer without a cast, so no list is
 * ever accessed through a pointer type it was not written with. */
struct tracked_list {
    void **items;
    size_t count, capacity;
};

/* The cooperative part of the last restored snapshot, by object name. */
struct cooperative_restored {
    struct restored_loop *loops;
    size_t loop_count;
    struct restored_accumulator *accumulators;
    size_t accumulator_count;
    struct restored_bytes *registered;
    size_t registered_count;
};

struct cooperative_state {
    pthread_mutex_t lock;          /* every API call holds it */
    bool used;                     /* the trainer called the API */
    struct epoch_loop epochs;
    double progress;               /* statistical progress of adaptive loops (AdaptDL's) */
    struct data_loop_registry loops;
    struct tracked_list loop_list;        /* struct data_loop * */
    struct tracked_list accumulator_list; /* struct accumulator * */
    struct registered_state *registered;
    size_t registered_count, registered_capacity;
    /* what the last restore brought, for objects created after it */
    struct cooperative_restored restored;
};

void cooperative_state_init(struct cooperative_state *state);
void cooperative_state_free(struct cooperative_state *state);

/* Tracks an object (the caller owns it) and gives it its restored state when
 * the last restore holds one of its name.  -1 with a message on allocation
 * failure or when restored state does not fit (a buffer of another size). */
int cooperative_state_add_loop(struct cooperative_state *state, struct data_loop *loop,
                               char *error, size_t error_size);
int cooperative_state_add_accumulator(struct cooperative_state *state,
                                      struct accumulator *accumulator, char *error,
                                      size_t error_size);
int cooperative_state_register(struct cooperative_state *state,
                               const struct registered_state *registered, char *error,
                               size_t error_size);
/* Stops tracking an object the trainer destroys. */
void cooperative_state_remove_loop(struct cooperative_state *state, struct data_loop *loop);
void cooperative_state_remove_accumulator(struct cooperative_state *state,
                                          struct accumulator *accumulator);

/* The epoch loop (epoch_loop.h), refused while a data loop is being
 * iterated: an iteration may not stay open across an epoch boundary (it
 * would carry its epoch's position and records into the next), so
 * beginning, ending or leaving an epoch then fails with a message and
 * changes nothing.  Begin and next return the epoch as epoch_loop_begin
 * and epoch_loop_next do, or EPOCH_LOOP_ERROR; leave returns 0 or -1. */
int64_t cooperative_state_begin_epochs(struct cooperative_state *state, int64_t end,
                                       char *error, size_t error_size);
int64_t cooperative_state_next_epoch(struct cooperative_state *state, char *error,
                                     size_t error_size);
int cooperative_state_leave_epochs(struct cooperative_state *state, char *error,
                                   size_t error_size);

/* Sums every accumulator's pending updates over the replicas (a collective,
 * AdaptDL's State.sync before a checkpoint): every replica calls it before
 * the trainer commits the checkpoint that should carry them. */
int cooperative_state_synchronize(struct cooperative_state *state, char *error,
                                  size_t error_size);

/* Fills the cooperative fields of a snapshot being captured (empty when the
 * API was never used).  -1 with a message on failure. */
int cooperative_state_capture(struct cooperative_state *state, struct adaptdl_snapshot *snapshot,
                              char *error, size_t error_size);
/* Applies a restored snapshot's cooperative fields: the finished epochs,
 * every existing object of a saved name, and keeps the rest for objects
 * created later.  A restore after the epoch loop began in this run applies
 * only the registered state, with an error line (the checkpoint must be
 * loaded before the epoch loop).  -1 with a message when restored state
 * does not fit. */
int cooperative_state_restore(struct cooperative_state *state,
                              const struct adaptdl_snapshot *snapshot, char *error,
                              size_t error_size);

#endif
