/* mpi_collective.c - the cooperative API's all-gather over MPI
 * (replica_collective.h): on a duplicate of MPI_COMM_WORLD of its own, so
 * that it never mixes with the trainer's traffic or with the piggy-backed
 * reduction of the step statistics.  Installed when MPI comes up, removed
 * before MPI_Finalize.  Like mpi.c, it resolves the PMPI_ functions with
 * dlsym(RTLD_NEXT) and the predefined handles with dlsym(RTLD_DEFAULT). */
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mpi_collective.h"
#include "replica_collective.h"

struct shim_collective_mpi {
    int (*comm_dup)(MPI_Comm, MPI_Comm *);
    int (*comm_size)(MPI_Comm, int *);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*allgatherv)(const void *, int, MPI_Datatype, void *, const int *, const int *,
                      MPI_Datatype, MPI_Comm);
    MPI_Datatype int_type;
    MPI_Datatype byte_type;
    MPI_Comm communicator;
    int size;
};

static struct shim_collective_mpi collective;

static int shim_collective_allgather(void *context, const void *bytes, size_t size,
                                     struct replica_gathered *gathered, char *error,
                                     size_t error_size)
{
    (void)context;
    if (size > INT_MAX) {
        snprintf(error, error_size, "cannot gather %zu bytes over MPI (at most %d)", size,
                 INT_MAX);
        return -1;
    }
    int replicas = collective.size;
    int own = (int)size;
    int *sizes = calloc((size_t)replicas, sizeof *sizes);
    int *offsets = calloc((size_t)replicas, sizeof *offsets);
    gathered->replicas = (unsigned)replicas;
    gathered->parts = calloc((size_t)replicas, sizeof *gathered->parts);
    gathered->sizes = calloc((size_t)replicas, sizeof *gathered->sizes);
    unsigned char *all = NULL;
    int status = -1;
    if (sizes == NULL || offsets == NULL || gathered->parts == NULL || gathered->sizes == NULL) {
        snprintf(error, error_size, "out of memory gathering over MPI");
        goto done;
    }
    if (collective.allgather(&own, 1, collective.int_type, sizes, 1, collective.int_type,
                             collective.communicator) != MPI_SUCCESS) {
        snprintf(error, error_size, "MPI_Allgather of the sizes failed");
        goto done;
    }
    long long total = 0;
    for (int r = 0; r < replicas; r++) {
        offsets[r] = (int)total;
        total += sizes[r];
    }
    if (total > INT_MAX) {
        snprintf(error, error_size, "cannot gather %lld bytes over MPI", total);
        goto done;
    }
    all = malloc(total ? (size_t)total : 1);
    if (all == NULL) {
        snprintf(error, error_size, "out of memory gathering %lld bytes over MPI", total);
        goto done;
    }
    if (collective.allgatherv(bytes, own, collective.byte_type, all, sizes, offsets,
                              collective.byte_type, collective.communicator) != MPI_SUCCESS) {
        snprintf(error, error_size, "MPI_Allgatherv failed");
        goto done;
    }
    for (int r = 0; r < replicas; r++) {
        gathered->parts[r] = malloc(sizes[r] ? (size_t)sizes[r] : 1);
        if (gathered->parts[r] == NULL) {
            snprintf(error, error_size, "out of memory gathering over MPI");
            goto done;
        }
        memcpy(gathered->parts[r], all + offsets[r], (size_t)sizes[r]);
        gathered->sizes[r] = (size_t)sizes[r];
    }
    status = 0;
done:
    free(sizes);
    free(offsets);
    free(all);
    if (status != 0)
        replica_gathered_free(gathered);
    return status;
}

void shim_mpi_collective_install(void)
{
    collective.comm_dup = (__typeof__(collective.comm_dup))dlsym(RTLD_NEXT, "PMPI_Comm_dup");
    collective.comm_size = (__typeof__(collective.comm_size))dlsym(RTLD_NEXT, "PMPI_Comm_size");
    collective.allgather = (__typeof__(collective.allgather))dlsym(RTLD_NEXT, "PMPI_Allgather");
    collective.allgatherv =
        (__typeof__(collective.allgatherv))dlsym(RTLD_NEXT, "PMPI_Allgatherv");
    collective.int_type = (MPI_Datatype)dlsym(RTLD_DEFAULT, "ompi_mpi_int");
    collective.byte_type = (MPI_Datatype)dlsym(RTLD_DEFAULT, "ompi_mpi_byte");
    MPI_Comm world = (MPI_Comm)dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    if (!collective.comm_dup || !collective.comm_size || !collective.allgather ||
        !collective.allgatherv || !collective.int_type || !collective.byte_type || !world ||
        collective.comm_dup(world, &collective.communicator) != MPI_SUCCESS ||
        collective.comm_size(collective.communicator, &collective.size) != MPI_SUCCESS) {
        log_error("the cooperative API cannot reach the other replicas over MPI (PMPI "
                  "functions or handles missing, or MPI_Comm_dup failed): its collectives "
                  "answer as one replica");
        return;
    }
    replica_collective.context = NULL;
    replica_collective.allgather = shim_collective_allgather;
}

void shim_mpi_collective_remove(void)
{
    replica_collective_use_single();
}
