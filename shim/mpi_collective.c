/* mpi_collective.c - the cooperative API's all-gather over MPI
 * (replica_collective.h): on a duplicate of MPI_COMM_WORLD of its own, so
 * that it never mixes with the trainer's traffic or with the piggy-backed
 * reduction of the step statistics.  Installed when MPI comes up, removed
 * before MPI_Finalize.  Its PMPI_ functions and handles are the ones
 * mpi_library.c found. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "error_message.h"
#include "log.h"
#include "mpi_collective.h"
#include "mpi_library.h"
#include "replica_collective.h"

struct shim_collective_mpi {
    MPI_Comm communicator;
    int size, rank;
};

static struct shim_collective_mpi collective;

static int shim_collective_allgather(void *context, const void *bytes, size_t size,
                                     struct replica_gathered *gathered, char *error,
                                     size_t error_size)
{
    (void)context;
    if (size > INT_MAX) {
        return error_message(error, error_size, "cannot gather %zu bytes over MPI (at most %d)",
                             size, INT_MAX);
    }
    int replicas = collective.size;
    int own = (int)size;
    int *sizes = calloc((size_t)replicas, sizeof *sizes);
    int *offsets = calloc((size_t)replicas, sizeof *offsets);
    gathered->replicas = (unsigned)replicas;
    gathered->rank = (unsigned)collective.rank;
    gathered->parts = calloc((size_t)replicas, sizeof *gathered->parts);
    gathered->sizes = calloc((size_t)replicas, sizeof *gathered->sizes);
    unsigned char *all = NULL;
    int status = -1;
    if (sizes == NULL || offsets == NULL || gathered->parts == NULL || gathered->sizes == NULL) {
        error_message(error, error_size, "out of memory gathering over MPI");
        goto done;
    }
    if (pmpi.allgather(&own, 1, predefined.int_type, sizes, 1, predefined.int_type,
                       collective.communicator) != MPI_SUCCESS) {
        error_message(error, error_size, "MPI_Allgather of the sizes failed");
        goto done;
    }
    long long total = 0;
    for (int r = 0; r < replicas; r++) {
        offsets[r] = (int)total;
        total += sizes[r];
    }
    if (total > INT_MAX) {
        error_message(error, error_size, "cannot gather %lld bytes over MPI", total);
        goto done;
    }
    all = malloc(total ? (size_t)total : 1);
    if (all == NULL) {
        error_message(error, error_size, "out of memory gathering %lld bytes over MPI", total);
        goto done;
    }
    if (pmpi.allgatherv(bytes, own, predefined.byte_type, all, sizes, offsets,
                        predefined.byte_type, collective.communicator) != MPI_SUCCESS) {
        error_message(error, error_size, "MPI_Allgatherv failed");
        goto done;
    }
    for (int r = 0; r < replicas; r++) {
        gathered->parts[r] = malloc(sizes[r] ? (size_t)sizes[r] : 1);
        if (gathered->parts[r] == NULL) {
            error_message(error, error_size, "out of memory gathering over MPI");
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
    shim_mpi_resolve();
    if (!pmpi.comm_dup || !pmpi.comm_size || !pmpi.comm_rank || !pmpi.allgather ||
        !pmpi.allgatherv || !predefined.int_type || !predefined.byte_type || !predefined.world ||
        pmpi.comm_dup(predefined.world, &collective.communicator) != MPI_SUCCESS ||
        pmpi.comm_size(collective.communicator, &collective.size) != MPI_SUCCESS ||
        pmpi.comm_rank(collective.communicator, &collective.rank) != MPI_SUCCESS) {
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
