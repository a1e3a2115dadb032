/* decisions.h - rank 0's batch-size and replica-count decisions, made at
 * synchronized step boundaries, and the cooperative API's proposals (see
 * decisions.c).  Called under shim_steps_lock. */
#ifndef ADAPTSHIM_DECISIONS_H
#define ADAPTSHIM_DECISIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "goodput.h"

/* At a synchronized boundary (`now`, monotonic seconds): decides the batch
 * size when one is due, then the replica count, on rank 0 only.  A step
 * that read no record used `declared_local_batch` (0: none declared). */
void shim_decisions_at_boundary(double now, uint64_t declared_local_batch);
/* Whether a decision asked for a restart (this rank's request; every rank
 * learns of it in the reduction). */
bool shim_decisions_restart_requested(void);
/* Why an agreed restart stops the process, in words for the log. */
const char *shim_decisions_restart_reason(void);
/* The model of the latest decision that fitted one, or NULL. */
const struct goodput_model *shim_decisions_model(void);

/* The cooperative API (cooperative_host.c): rank 0's local batch for an
 * adaptive loop's next sweep (0 on other ranks); the efficiency and the
 * gain of a global batch under the statistics so far. */
uint64_t shim_decisions_propose_local_batch(uint64_t initial_global, uint64_t max_global,
                                            uint32_t replicas, uint64_t current_local);
double shim_decisions_efficiency(uint64_t initial_global, uint64_t global);
double shim_decisions_gain(uint64_t initial_global, uint64_t global);

#endif
