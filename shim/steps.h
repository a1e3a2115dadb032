/* steps.h - the shim's glue between interposed calls and the step monitor:
 * step boundaries, stops at train reads, the job record and the summary
 * (SPEC §6, §9).  How the process ends is ending.h's. */
#ifndef ADAPTSHIM_STEPS_H
#define ADAPTSHIM_STEPS_H

#include <stdbool.h>
#include <stdint.h>

#include "run_policy.h"
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

/* Installs the signal handlers and loads the job record (at start-up of a
 * configured process). */
void shim_steps_initialize(void);
/* MPI is up: `transport` carries the piggy-backed reduction over `replicas`. */
void shim_steps_start_synchronized(struct piggyback_transport transport, uint32_t replicas);
/* A step boundary reached inside an interposed call, before that call does
 * anything; does not return when every replica stops here. */
void shim_steps_boundary(void);
/* The same boundary made by a trainer's process that reports its steps
 * (the Python glue, at each optimizer step): `local_batch` > 0 is the
 * step's batch as the trainer told it.  Returns true when every replica
 * stops here: the ending is written and the caller exits with 143. */
bool shim_steps_reported_boundary(uint64_t local_batch);
/* A gradient piece of the step in progress as the trainer's process
 * measured it: |own gradient|^2, |gradient averaged over replicas|^2, the
 * seconds its reduction and the measuring took; `measured` false: a piece
 * whose norms are unknown (the step stays out of the statistics). */
void shim_steps_reported_gradient(double local_sqr, double mean_sqr, double sync_seconds,
                                  double norm_seconds, bool measured);
/* K = 1: a gradient piece (`count` elements of `element` bytes, 4 or 8),
 * for the difference estimator over consecutive steps. */
void shim_steps_reported_single_replica_piece(const void *gradient, size_t count,
                                              size_t element);
/* At MPI_Finalize: the last step's sums, still in flight, are completed
 * and published like any agreed step's. */
void shim_steps_drain_last_step(void);
/* A train-batch read is about to happen: ends a step in progress when the
 * read is on the thread that runs MPI, and stops here when a stop was
 * requested and no agreement point exists. */
void shim_steps_before_train_read(void);
/* Train records served so far in this run, over every train file. */
uint64_t shim_steps_train_records_consumed(void);
/* The local batch the trainer was given (injected, or ADAPTDL_BATCH_SIZE
 * shared over the replicas): a step that read no train record used it. */
void shim_steps_declare_local_batch(uint64_t local_batch);
/* The cooperative API (cooperative_host.c): a training loop's batch of
 * `records` is done and the next is asked for; a gradient report.  (Its
 * batch proposals are in decisions.h.) */
void shim_steps_cooperative_batch(uint64_t records);
void shim_steps_cooperative_gradient(double local_sqr, double mean_sqr, uint64_t local_batch,
                                     bool ends_previous_step);
/* True on the thread that initialized MPI (false before MPI is up). */
bool shim_mpi_on_mpi_thread(void);
/* True while the trainer's collectives repeat as a cycle whose boundaries
 * are the steps (runtime/collective_cycle.h): train reads then end none. */
bool shim_mpi_collective_cycle_locked(void);
/* A checkpoint commit happened. */
void shim_steps_note_commit(void);
/* A gradient all-reduce (or a gradient reported through the API) was seen:
 * something was trained (dataset_view_training_events). */
void shim_steps_note_training(void);
/* True when a stop can wait for something better than where the signal
 * finds the trainer: data views, a checkpoint glob, or MPI up.  Safe in a
 * signal handler. */
bool shim_steps_something_to_synchronize(void);
/* What a process leaves behind when it ends, once (ending.c says when):
 * the job record, the summary line and the metrics exit event with
 * `status`.  Nothing in a forked child: those are its parent's. */
void shim_steps_write_ending(const char *why, int status);
/* shim_steps_lock, giving up after `seconds`: false when another thread
 * holds the lock that long (the deadline's worker cannot wait forever). */
bool shim_steps_lock_within(int seconds);
/* The job record loaded at start-up (SPEC §5). */
struct adaptdl_job_record *shim_steps_job_record(void);
void shim_steps_save_job_record(const char *why);
/* Injects the planned batch size (and learning rate) into argv/environ
 * before main; exits 2 with one line when that cannot be done. */
void shim_inject_batch_size(int *argc, char ***argv);

#endif
