/* mpi_collective.h - the cooperative API's all-gather over MPI (see
 * mpi_collective.c). */
#ifndef ADAPTSHIM_MPI_COLLECTIVE_H
#define ADAPTSHIM_MPI_COLLECTIVE_H

#include <stdbool.h>
#include <stdint.h>

/* Called once MPI is initialized (on the thread that initialized it), in
 * every process the library is preloaded into. */
void shim_mpi_collective_install(void);
/* Called before MPI_Finalize. */
void shim_mpi_collective_remove(void);
/* MPI's world while the all-gather is installed: its size and this
 * process's rank.  False before MPI_Init, after MPI_Finalize, or when MPI
 * could not be asked. */
bool shim_mpi_collective_world(uint32_t *size, uint32_t *rank);

#endif
