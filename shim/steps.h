/* steps.h - the shim's glue between interposed calls and the step monitor:
 * step boundaries, stops at train reads, loading and measuring the job
 * record.  The state every part of the step code shares (the monitor, its
 * lock, the job record) is step_state.h's, included here; how the process
 * ends, and what it leaves behind, is ending.h's.
 *
 * Who includes it: the interposed calls and the MPI layer, which make the
 * steps.  The parts steps.c calls (signals.h, decisions.h, ending.h,
 * pass_planning.h, stop_deadline.h) must not include it: they include
 * step_state.h, so that the dependencies point one way. */
#ifndef ADAPTSHIM_STEPS_H
#define ADAPTSHIM_STEPS_H

#include <stdbool.h>
#include <stdint.h>

#include "run_policy.h"
#include "step_monitor.h"
#include "step_state.h"

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
/* The local batch the trainer was given (injected, or ADAPTDL_BATCH_SIZE
 * shared over the replicas): a step that read no train record used it. */
void shim_steps_declare_local_batch(uint64_t local_batch);
/* The cooperative API (cooperative_host.c): a training loop's batch of
 * `records` is done and the next is asked for; a gradient report.  (Its
 * batch proposals are in decisions.h.) */
void shim_steps_cooperative_batch(uint64_t records);
void shim_steps_cooperative_gradient(double local_sqr, double mean_sqr, uint64_t local_batch,
                                     bool ends_previous_step);
/* A checkpoint commit happened. */
void shim_steps_note_commit(void);
/* A gradient all-reduce (or a gradient reported through the API) was seen:
 * something was trained (dataset_view_training_events). */
void shim_steps_note_training(void);
void shim_steps_save_job_record(const char *why);
/* Injects the planned batch size (and learning rate) into argv/environ
 * before main; exits 2 with one line when that cannot be done. */
void shim_inject_batch_size(int *argc, char ***argv);

#endif
