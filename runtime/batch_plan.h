/* batch_plan.h - which batch size (and learning-rate factor) a run injects
 * into the trainer before its main (adaptshim(7) "BATCH-SIZE CONTROL").
 *
 * Every rank computes the same plan from the configuration, the job record
 * and the replica count; nothing is communicated (MPI is not up yet). */
#ifndef ADAPTSHIM_BATCH_PLAN_H
#define ADAPTSHIM_BATCH_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "state_store.h"

struct batch_plan {
    bool active;                 /* ADAPTDL_BSZ_ARG names where to inject */
    uint64_t initial_global;     /* AdaptDL's batch_size: the smallest global batch */
    uint64_t global;             /* the global batch this run uses */
    uint64_t local;              /* what this replica's trainer is given */
    double scale;                /* local * replicas / initial_global */
    double lr_factor;            /* applied to the trainer's learning rate */
    bool initial_is_new;         /* learned from the trainer now: save it */
};

/* `trainer_value` is the trainer's own batch size (present = false when its
 * command line or environment has none).  Returns 0, or -1 with a one-line
 * message when batch-size control cannot work (no initial batch anywhere). */
int batch_plan_decide(const struct adaptdl_config *config,
                      const struct adaptdl_job_record *record, double trainer_value,
                      bool trainer_present, struct batch_plan *plan, char *error,
                      size_t error_size);

#endif
