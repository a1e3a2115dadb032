/* mpi_library.h - the MPI library behind the shim's MPI wrappers: its
 * PMPI_ functions and predefined handles, found at the first MPI call
 * (mpi_library.c), and what the wrapper files (mpi.c, mpi_requests.c,
 * mpi_collective.c) share.  mpi.h is included for its types only. */
#ifndef ADAPTSHIM_MPI_LIBRARY_H
#define ADAPTSHIM_MPI_LIBRARY_H

#include <mpi.h>
#include <stdbool.h>

#include "collective_cycle.h"

#include "pending_gradients.h"
#include "shim.h"

/* The library's functions the shim calls (mpi_functions.def). */
struct shim_pmpi {
#define MPI_CALL(field, name, parameters) int (*field) parameters;
#define MPI_COMPLETING_CALL(field, name, parameters, ...) MPI_CALL(field, name, parameters)
#include "mpi_functions.def"
#undef MPI_CALL
#undef MPI_COMPLETING_CALL
};

/* Open MPI's predefined objects, as the trainer sees them.  The element
 * types a gradient may have: C's float and double, and Fortran's REAL,
 * REAL*4, DOUBLE PRECISION and REAL*8. */
#define SHIM_MPI_GRADIENT_TYPE_NAMES 3
struct shim_mpi_predefined {
    MPI_Comm world;
    MPI_Datatype float_types[SHIM_MPI_GRADIENT_TYPE_NAMES];
    MPI_Datatype double_types[SHIM_MPI_GRADIENT_TYPE_NAMES];
    MPI_Datatype int_type;
    MPI_Datatype byte_type;
    MPI_Op sum;
    MPI_Request request_null;
};

/* Filled by shim_mpi_resolve(); a field is NULL when the process has
 * neither the PMPI_ nor the MPI_ function (or the handle). */
extern struct shim_pmpi pmpi;
extern struct shim_mpi_predefined predefined;

/* Finds the functions and handles, once, whichever thread asks first. */
void shim_mpi_resolve(void);

/* Stops the process with a message naming the MPI function it called and
 * no library defines: calling on would jump to address 0. */
void shim_mpi_missing_function(const char *name) __attribute__((noreturn));

/* The next definition of an MPI function, never NULL. */
#define PMPI(field, name)                                 \
    (SHIM_LIKELY(pmpi.field != NULL)                      \
         ? pmpi.field                                     \
         : (shim_mpi_missing_function(name), pmpi.field))

/* What the shim's own traffic needs of the library: the name of the first
 * function or handle missing, or NULL. */
const char *shim_mpi_missing_for_statistics(void);

/* An interposed MPI function under both of its names: Fortran's bindings
 * (libmpi_mpifh) call the PMPI_ functions directly. */
#define SHIM_MPI_ENTRY(name, function, parameters, arguments)              \
    SHIM_EXPORT int MPI_##name parameters { return function arguments; }   \
    SHIM_EXPORT int PMPI_##name parameters { return function arguments; }

/* --- defined in mpi.c, shared with mpi_requests.c ------------------------ */

/* The shim watches MPI only in a configured process, once MPI is up. */
bool shim_mpi_watching(void);

/* One collective of the trainer's, before it reaches MPI: ends the step in
 * progress where the sequence of collectives says a step ends
 * (runtime/collective_cycle.h), and says whether it is a gradient piece.
 * `type` and `op` are NULL for collectives that have none. */
bool shim_mpi_collective(enum collective_kind kind, int count, MPI_Datatype type, MPI_Op op,
                         MPI_Comm communicator);

/* Measures the input of a gradient reduction about to start. */
struct gradient_start shim_mpi_gradient_starting(const void *input, int count,
                                                 MPI_Datatype type);

/* Accounts for a gradient reduction that has just finished, with its mean
 * times the replica count in `reduced`. */
void shim_mpi_gradient_reduced(const struct gradient_start *start, MPI_Comm communicator,
                               const void *reduced, int count, MPI_Datatype type);

#endif
