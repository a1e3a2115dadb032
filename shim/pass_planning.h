/* pass_planning.h - statistical epochs in the preloaded layer: progress
 * of agreed steps and the planned length of train passes (an epoch ends when the
 * progress, the sum of the steps' gains, reaches its target). */
#ifndef ADAPTSHIM_SHIM_PASS_PLANNING_H
#define ADAPTSHIM_SHIM_PASS_PLANNING_H

#include <stdbool.h>

#include "batch_plan.h"
#include "grad_noise.h"
#include "state_store.h"
#include "step_monitor.h"

/* At start-up: checkpoints commit the steps still in flight too. */
void shim_epochs_install(void);
/* Before main, once the batch plan is known: turns planning on when
 * adaptation is (ADAPTDL_MAX_BATCH_SIZE with an injected batch size). */
void shim_epochs_configure(const struct batch_plan *plan,
                           const struct adaptdl_job_record *record);
/* A step every replica agrees on: counts its progress (once per step). */
void shim_epochs_note_agreed_step(const struct agreed_step *step,
                                  const struct grad_noise_state *noise);

#endif
