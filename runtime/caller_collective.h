/* caller_collective.h - an all-gather the trainer gives the cooperative API
 * (adaptdl_use_allgather in adaptdl.h): the transport of a job whose
 * replicas share no MPI world, such as a PyTorch job whose processes meet
 * through torch.distributed.
 *
 * The trainer's function fills an array of sizes and points at the
 * replicas' bytes, concatenated in rank order, in memory that stays its
 * own; this file copies them into the runtime's replica_gathered form and
 * checks them.  Installed, it is the fallback transport of
 * replica_collective.h: used whenever MPI's is not (MPI's world, when the
 * shim has one, carries the collectives).  The replica count and rank it
 * was installed with answer for the job where no variable and no MPI world
 * says otherwise. */
#ifndef ADAPTSHIM_CALLER_COLLECTIVE_H
#define ADAPTSHIM_CALLER_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>

/* The trainer's all-gather, as adaptdl.h declares it: 0, or nonzero with
 * a one-line reason in error[0, error_size). */
typedef int caller_allgather_function(void *context, const void *bytes, size_t size,
                                      size_t *sizes, const void **gathered, char *error,
                                      size_t error_size);

/* Installs `allgather` (NULL removes the installed one) for `replicas`
 * replicas at `rank`.  Returns 0 when the collectives now go through it,
 * 1 when another transport (MPI's) carries them and keeps doing so while
 * it is installed, -1 with a message for a layout that cannot be (no
 * replica, or a rank outside them).  Callers serialize it with the
 * collectives (the cooperative API's lock). */
int caller_collective_install(unsigned replicas, unsigned rank,
                              caller_allgather_function *allgather, void *context, char *error,
                              size_t error_size);

/* The layout the installed all-gather was given; false when none is. */
bool caller_collective_world(unsigned *replicas, unsigned *rank);

#endif
