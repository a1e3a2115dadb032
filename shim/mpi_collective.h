/* mpi_collective.h - the cooperative API's all-gather over MPI (see
 * mpi_collective.c). */
#ifndef ADAPTSHIM_MPI_COLLECTIVE_H
#define ADAPTSHIM_MPI_COLLECTIVE_H

/* Called once MPI is initialized (on the thread that initialized it). */
void shim_mpi_collective_install(void);
/* Called before MPI_Finalize. */
void shim_mpi_collective_remove(void);

#endif
