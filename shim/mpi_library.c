/* mpi_library.c - finds the MPI library behind the shim (mpi_library.h).
 *
 * The shim never links libmpi: a process that never calls MPI never loads
 * or initializes it.  The PMPI_ functions are resolved with dlsym(RTLD_NEXT)
 * at the first MPI call; a library without them, such as a serial stub
 * library, is called by its MPI_ names.  The predefined handles, which in
 * Open MPI are addresses of objects inside libmpi, are resolved with
 * dlsym(RTLD_DEFAULT): a PIE trainer holds copy-relocated copies of those
 * objects, and the copy is what the trainer passes in. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mpi_library.h"
#include "sysio.h"

struct shim_pmpi pmpi;
struct shim_mpi_predefined predefined;

/* The PMPI_ function, or the MPI_ one of a library that has no profiling
 * names; NULL when the process has neither. */
#define SHIM_RESOLVE(field, name)                                                   \
    do {                                                                            \
        void *function = dlsym(RTLD_NEXT, "PMPI_" name);                            \
        pmpi.field = (__typeof__(pmpi.field))(function != NULL                      \
                                                  ? function                        \
                                                  : dlsym(RTLD_NEXT, "MPI_" name)); \
    } while (0)

static void shim_mpi_resolve_functions(void)
{
#define MPI_CALL(field, name, parameters) SHIM_RESOLVE(field, #name);
#define MPI_COMPLETING_CALL(field, name, parameters, ...) MPI_CALL(field, name, parameters)
#include "mpi_functions.def"
#undef MPI_CALL
#undef MPI_COMPLETING_CALL
}

static void shim_mpi_resolve_predefined(void)
{
    static const char *const float_names[SHIM_MPI_GRADIENT_TYPE_NAMES] = {
        "ompi_mpi_float", "ompi_mpi_real", "ompi_mpi_real4"};
    static const char *const double_names[SHIM_MPI_GRADIENT_TYPE_NAMES] = {
        "ompi_mpi_double", "ompi_mpi_dblprec", "ompi_mpi_real8"};
    predefined.world = (MPI_Comm)dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    for (int i = 0; i < SHIM_MPI_GRADIENT_TYPE_NAMES; i++) {
        predefined.float_types[i] = (MPI_Datatype)dlsym(RTLD_DEFAULT, float_names[i]);
        predefined.double_types[i] = (MPI_Datatype)dlsym(RTLD_DEFAULT, double_names[i]);
    }
    predefined.int_type = (MPI_Datatype)dlsym(RTLD_DEFAULT, "ompi_mpi_int");
    predefined.byte_type = (MPI_Datatype)dlsym(RTLD_DEFAULT, "ompi_mpi_byte");
    predefined.sum = (MPI_Op)dlsym(RTLD_DEFAULT, "ompi_mpi_op_sum");
    predefined.request_null = (MPI_Request)dlsym(RTLD_DEFAULT, "ompi_request_null");
}

static void shim_mpi_resolve_once(void)
{
    shim_mpi_resolve_functions();
    shim_mpi_resolve_predefined();
}

void shim_mpi_resolve(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, shim_mpi_resolve_once);
}

void shim_mpi_missing_function(const char *name)
{
    char line[256];
    int length = snprintf(line, sizeof line,
                          "adaptshim: MPI_%s was called, but no MPI library after "
                          "libadaptshim.so defines PMPI_%s or MPI_%s: aborting\n",
                          name, name, name);
    if (length > 0)
        sysio_write_all(STDERR_FILENO, line,
                        (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
    abort();
}

const char *shim_mpi_missing_for_statistics(void)
{
    const struct {
        const void *present;
        const char *name;
    } needed[] = {
        {(const void *)pmpi.comm_dup, "PMPI_Comm_dup"},
        {(const void *)pmpi.comm_size, "PMPI_Comm_size"},
        {(const void *)pmpi.comm_rank, "PMPI_Comm_rank"},
        {(const void *)pmpi.iallreduce, "PMPI_Iallreduce"},
        {(const void *)pmpi.wait, "PMPI_Wait"},
        {(const void *)predefined.world, "ompi_mpi_comm_world (MPI_COMM_WORLD)"},
        {(const void *)predefined.double_types[0], "ompi_mpi_double (MPI_DOUBLE)"},
        {(const void *)predefined.sum, "ompi_mpi_op_sum (MPI_SUM)"},
        {(const void *)predefined.request_null, "ompi_request_null (MPI_REQUEST_NULL)"},
    };
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (needed[i].present == NULL)
            return needed[i].name;
    return NULL;
}
