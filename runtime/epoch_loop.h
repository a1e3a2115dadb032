/* epoch_loop.h - the trainer's loop over epochs, as AdaptDL's
 * remaining_epochs_until (adaptdl(3)).
 *
 *     for (int64_t e = epoch_loop_begin(&loop, 30); e >= 0; e = epoch_loop_next(&loop))
 *         ...
 *
 * `finished` is what a bound snapshot keeps: after a restart the loop starts
 * at the first epoch not finished, so every earlier epoch is skipped.
 * Leaving the loop early (a break) still finishes the current epoch, as the
 * `finally` of AdaptDL's generator does. */
#ifndef ADAPTSHIM_EPOCH_LOOP_H
#define ADAPTSHIM_EPOCH_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EPOCH_LOOP_NONE (-1)     /* current epoch outside a loop */
#define EPOCH_LOOP_ERROR (-2)    /* returned by epoch_loop_begin on misuse */

struct epoch_loop {
    int64_t finished;            /* epochs finished, across restarts */
    int64_t current;             /* EPOCH_LOOP_NONE outside a loop */
    int64_t end;                 /* exclusive bound of the running loop */
    bool running;
    /* an epoch loop began in this run: the finished epochs are in use, and
     * a restore may no longer replace them (cooperative_state_restore) */
    bool begun;
};

void epoch_loop_init(struct epoch_loop *loop);

/* Starts a loop up to `end` (exclusive): the first epoch to run, or
 * EPOCH_LOOP_NONE when every epoch before `end` is finished.
 * EPOCH_LOOP_ERROR with a message when a loop is already running
 * ("overlapping epoch loops"). */
int64_t epoch_loop_begin(struct epoch_loop *loop, int64_t end, char *error, size_t error_size);

/* Finishes the current epoch; the next one, or EPOCH_LOOP_NONE at the end
 * (the loop is then over). */
int64_t epoch_loop_next(struct epoch_loop *loop);

/* Leaves a running loop early: the current epoch counts as finished. */
void epoch_loop_leave(struct epoch_loop *loop);

/* The current epoch, or EPOCH_LOOP_NONE outside a loop. */
static inline int64_t epoch_loop_current(const struct epoch_loop *loop)
{
    return loop->current;
}

#endif
