/* step_state.h - the step bookkeeping that every part of the preload's step
 * code shares: whether MPI carries the steps, the step monitor, the lock
 * that guards it, the job record, the records consumed without a read, and
 * which thread makes the steps.
 *
 * Who includes it: steps.c, which makes the steps, and the parts it calls
 * (signals.c, ending.c, decisions.c, pass_planning.c), which read and
 * change this state under the lock.  It includes runtime headers only, never
 * a header of the step code above it (steps.h, signals.h, ending.h...):
 * that is what keeps those from including each other in a circle. */
#ifndef ADAPTSHIM_STEP_STATE_H
#define ADAPTSHIM_STEP_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "state_records.h"
#include "step_monitor.h"

/* Set once MPI is up and the piggy-backed reduction can run (read it with
 * shim_steps_are_synchronized: any thread may ask). */
extern bool shim_steps_synchronized;
static inline bool shim_steps_are_synchronized(void)
{
    return __atomic_load_n(&shim_steps_synchronized, __ATOMIC_ACQUIRE);
}
/* The step bookkeeping.  Under MPI its step in progress belongs to the
 * thread that runs MPI (its collectives make the steps); everything else in
 * it, and all of it without MPI (where a train read on any thread makes a
 * boundary), is touched under shim_steps_lock only. */
extern struct step_monitor shim_monitor;
/* Guards shim_monitor, the job record and what publishing a step writes
 * (statistical epochs' counted step, step lines of the metrics file).  It is
 * taken before the registry's and the files' locks, never while one of them
 * is held, and never held across exit(3). */
void shim_steps_lock(void);
void shim_steps_unlock(void);
/* Around fork (shim/fork_safety.c): taken before, given back in the
 * parent, made anew in the child. */
void shim_steps_fork_prepare(void);
void shim_steps_fork_parent(void);
void shim_steps_fork_child(void);
/* Time spent in step boundaries, for the summary line (under
 * shim_steps_lock). */
extern double shim_overhead_seconds;
/* shim_steps_lock, giving up after `seconds`: false when another thread
 * holds the lock that long (the deadline's worker cannot wait forever). */
bool shim_steps_lock_within(int seconds);

/* The job record: the statistics and decisions that outlive a run, loaded
 * at start-up (steps.c) and written when the process ends (ending.c). */
struct adaptdl_job_record *shim_steps_job_record(void);

/* Records consumed without a read the shim sees: batches of the cooperative
 * API's training loops, batch sizes reported with gradients, and the
 * declared batch of steps that read no train record (data in memory).
 * Any thread may add to them. */
void shim_steps_note_records_without_reads(uint64_t records);
/* Train records served so far in this run, over every train file. */
uint64_t shim_steps_train_records_consumed(void);

/* True when a stop can wait for something better than where the signal
 * finds the trainer: data views, a checkpoint glob, or MPI up.  Safe in a
 * signal handler. */
bool shim_steps_something_to_synchronize(void);

/* Which thread makes the steps (mpi.c defines these).  True on the thread that initialized MPI (false before MPI is up). */
bool shim_mpi_on_mpi_thread(void);
/* True while the trainer's collectives repeat as a cycle whose boundaries
 * are the steps (runtime/collective_cycle.h): train reads then end none. */
bool shim_mpi_collective_cycle_locked(void);

#endif
