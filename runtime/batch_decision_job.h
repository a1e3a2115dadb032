/* batch_decision_job.h - a batch-size decision as the job takes it: whether
 * this process decides at all, the inputs it gathers from the
 * configuration, the job record and the gradient statistics, and what an
 * outcome leaves in the job record for the next run (adaptshim(7)
 * "Decisions").
 *
 * batch_decision.h holds the rules; this file holds the policy around
 * them that used to live in the shim, so that it is tested here without
 * preloading anything.  Two kinds of decision take inputs:
 *   - the restart decision of a transparent trainer, whose batch the shim
 *     injects through argv or the environment;
 *   - the in-place proposal of a cooperative loop (AdaptDL's
 *     _sync_local_bsz), which changes its batch without a restart. */
#ifndef ADAPTSHIM_BATCH_DECISION_JOB_H
#define ADAPTSHIM_BATCH_DECISION_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "batch_decision.h"
#include "config.h"
#include "grad_noise.h"

/* True for the process that takes restart decisions: rank 0 of a job with
 * ADAPTDL_MAX_BATCH_SIZE set and a batch size it can inject
 * (ADAPTDL_BSZ_ARG or ADAPTDL_BSZ_ENV).  Without a way to inject, a new
 * batch size could never reach the trainer. */
bool batch_decision_job_decides(const struct adaptdl_config *config);

/* The restart decision's inputs, without the statistics
 * (batch_decision_inputs_add_statistics adds them).  The current local
 * batch is the one the trainer declared (`declared_local_bsz`, 0 when it
 * declared none) rather than the last step's records: an epoch's short
 * last batch is no batch size to decide against.  The initial global batch
 * is the job record's, from the first run, else ADAPTDL_BATCH_SIZE. */
void batch_decision_inputs_for_restart(struct batch_decision_inputs *inputs,
                                       const struct adaptdl_config *config,
                                       const struct adaptdl_job_record *record,
                                       uint32_t replicas, uint64_t declared_local_bsz,
                                       uint64_t last_step_local_records);

/* A cooperative loop's in-place proposal: the loop states its initial and
 * largest global batch itself; no local bounds (the loop has none of the
 * environment's) and no reversal rule (an in-place change costs no
 * restart to flap over). */
void batch_decision_inputs_in_place(struct batch_decision_inputs *inputs,
                                    const struct adaptdl_config *config,
                                    const struct adaptdl_job_record *record,
                                    uint32_t replicas, uint64_t current_local_bsz,
                                    uint64_t initial_global_bsz, uint64_t max_global_bsz);

/* The gradient statistics and their confidence, as every decision takes
 * them (batch_decision.h, rules 1 and 2). */
void batch_decision_inputs_add_statistics(struct batch_decision_inputs *inputs,
                                          const struct grad_noise_state *noise);

/* What a restart decision leaves in the job record: the fitted model
 * always (the launcher's hints and the next run's start read it); on a
 * restart, the batch and replica count to inject after it, and the global
 * batch it leaves behind (rule 3 knows a reversal by it). */
void batch_decision_record_outcome(struct adaptdl_job_record *record,
                                   const struct batch_decision_inputs *inputs,
                                   const struct batch_decision *decision, bool restart);

#endif
