/* cooperative_host.h - what the cooperative API (cooperative_api.c) needs
 * from the library it is built into.
 *
 * In libadaptshim.so (cooperative_host.c) these answer from the preloaded
 * shim's session: the replica layout, the state bound to checkpoints, step
 * profiling and the goodput model.  In the stand-in libadaptdl.so
 * (standalone/cooperative_host.c) they answer as one replica with nothing
 * to restore and nothing to profile. */
#ifndef ADAPTSHIM_COOPERATIVE_HOST_H
#define ADAPTSHIM_COOPERATIVE_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "cooperative_state.h"
#include "data_loop.h"

/* Where this process stands in the job. */
struct cooperative_job {
    uint32_t replicas;
    uint32_t rank;
    uint32_t restarts;
    uint64_t seed;   /* of the shuffles */
};

/* The state of this process (never NULL). */
struct cooperative_state *cooperative_host_state(void);
struct cooperative_job cooperative_host_job(void);
/* The first epoch loop of this run is about to begin: a restarted trainer
 * whose state directory holds snapshots but that loaded no checkpoint is
 * warned, in one line, that it starts fresh. */
void cooperative_host_first_epoch_loop(void);
/* A training loop finished a batch of `records` local records and is about
 * to hand out the next: a step boundary for profiling. */
void cooperative_host_train_batch(uint64_t records);
/* The trainer reported its gradient norms for the step in progress.  With
 * `ends_previous_step` (no training loop is being iterated, whose batch
 * requests would mark the steps) the report also ends the previous step,
 * and the step in progress consumed `local_batch` records. */
void cooperative_host_gradient(double local_sqr, double mean_sqr, uint64_t local_batch,
                               bool ends_previous_step);
/* The local batch size this replica proposes for a sweep of an adaptive
 * loop that starts now (rank 0's proposal is then agreed on). */
uint64_t cooperative_host_propose_local_batch(const struct data_loop *loop);
/* Efficiency of `global` records per step against the initial global
 * batch under the gradient statistics measured so far; 1 without any. */
double cooperative_host_efficiency(uint64_t initial_global, uint64_t global);
/* AdaScale's gain of `global` against the initial batch; 1 without any
 * gradient statistics. */
double cooperative_host_gain(uint64_t initial_global, uint64_t global);

#endif
