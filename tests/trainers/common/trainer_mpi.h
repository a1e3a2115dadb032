/* trainer_mpi.h - what the MPI test trainers share: a fatal error ends the
 * whole job.  A header of its own, as only those trainers link MPI. */
#ifndef ADAPTSHIM_TRAINER_MPI_H
#define ADAPTSHIM_TRAINER_MPI_H

#include <mpi.h>
#include <stdio.h>

/* For trainer_set_before_exit: with MPI running, the whole job ends with
 * the status (MPI_Abort), not this rank alone, which would leave the
 * others waiting in a collective. */
static inline void trainer_abort_the_job_if_mpi_runs(int status)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
}

#endif
