/* shared_stop_flag.h - "the process that started the trainer has a stop
 * pending", readable by every process forked from it.
 *
 * A PyTorch DataLoader's workers are forked from the trainer and read the
 * data file for it.  When the trainer is told to stop, the stop is the
 * trainer's to make: a worker that exits first fails the trainer's next
 * batch ("DataLoader worker exited unexpectedly"), so the trainer would end
 * with status 1 instead of the 143 that asks for a restart.  A worker sees
 * its own signals only, so the flag lives in a page mapped MAP_SHARED before
 * the trainer can fork: the start process raises it, the children read it.
 *
 * Raising and reading are single word stores and loads: safe in a signal
 * handler. */
#ifndef ADAPTSHIM_SHARED_STOP_FLAG_H
#define ADAPTSHIM_SHARED_STOP_FLAG_H

#include <sys/types.h>

struct shared_stop_flag;

/* Maps the flag, lowered, owned by the calling process; NULL when the
 * mapping fails (errno set). */
struct shared_stop_flag *shared_stop_flag_create(void);
void shared_stop_flag_destroy(struct shared_stop_flag *flag);

/* The owner has a stop pending: marks the flag raised (a no-op in any
 * other process, whose stops are its own). */
void shared_stop_flag_raise(struct shared_stop_flag *flag, pid_t caller);

/* The process that raised the flag, or 0 while it is lowered (also for a
 * NULL flag). */
pid_t shared_stop_flag_raiser(const struct shared_stop_flag *flag);

#endif
