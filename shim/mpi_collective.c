/* mpi_collective.c - the cooperative API's all-gather over MPI
 * (replica_collective.h): on a duplicate of MPI_COMM_WORLD of its own, so
 * that it never mixes with the trainer's traffic or with the piggy-backed
 * reduction of the step statistics.  Installed when MPI comes up through
 * the preload, in every process, with or without ADAPTDL_* variables (the
 * cooperative API then answers as MPI's world), and removed before
 * MPI_Finalize.  The duplicate is made at the first collective, which
 * every replica enters at the same point, so that an MPI program that
 * never uses the API never pays for it.  Its PMPI_ functions and handles
 * are the ones mpi_library.c found. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "error_message.h"
#include "log.h"
#include "mpi_collective.h"
#include "mpi_library.h"
#include "replica_collective.h"

struct shim_collective_mpi {
    bool up;                  /* installed, MPI not finalized */
    bool duplicated;          /* `communicator` exists */
    MPI_Comm communicator;
    int size, rank;           /* of MPI_COMM_WORLD, and so of the duplicate */
};

static struct shim_collective_mpi collective;

/* The PMPI_ functions and handles the all-gather needs: the name of the
 * first one missing, or NULL. */
static const char *shim_collective_missing(void)
{
    if (!pmpi.comm_dup)
        return "MPI_Comm_dup";
    if (!pmpi.allgather)
        return "MPI_Allgather";
    if (!pmpi.allgatherv)
        return "MPI_Allgatherv";
    if (!predefined.int_type || !predefined.byte_type)
        return "MPI_INT or MPI_BYTE";
    return NULL;
}

/* The duplicate, made at the first collective.  0, or -1 with a message. */
static int shim_collective_communicator(char *error, size_t error_size)
{
    if (collective.duplicated)
        return 0;
    const char *missing = shim_collective_missing();
    if (missing != NULL) {
        return error_message(error, error_size,
                             "the replicas cannot be reached over MPI: this MPI library has "
                             "no %s (the shim knows Open MPI's names)",
                             missing);
    }
    if (pmpi.comm_dup(predefined.world, &collective.communicator) != MPI_SUCCESS)
        return error_message(error, error_size, "MPI_Comm_dup of MPI_COMM_WORLD failed");
    collective.duplicated = true;
    return 0;
}

static int shim_collective_allgather(void *context, const void *bytes, size_t size,
                                     struct replica_gathered *gathered, char *error,
                                     size_t error_size)
{
    (void)context;
    if (size > INT_MAX) {
        return error_message(error, error_size, "cannot gather %zu bytes over MPI (at most %d)",
                             size, INT_MAX);
    }
    if (shim_collective_communicator(error, error_size) != 0)
        return -1;
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
    int size = 0, rank = -1;
    if (!pmpi.comm_size || !pmpi.comm_rank || !predefined.world ||
        pmpi.comm_size(predefined.world, &size) != MPI_SUCCESS ||
        pmpi.comm_rank(predefined.world, &rank) != MPI_SUCCESS || size < 1 || rank < 0 ||
        rank >= size) {
        /* quiet: a process that never uses the API must not hear of it; one
         * that does finds its collectives refused (replica_collective_expect) */
        log_debug("the cooperative API cannot size MPI's world (MPI_Comm_size or "
                  "MPI_Comm_rank missing or failing): it answers as before MPI_Init");
        return;
    }
    collective.size = size;
    collective.rank = rank;
    collective.duplicated = false;
    collective.up = true;
    replica_collective.context = NULL;
    replica_collective.allgather = shim_collective_allgather;
}

void shim_mpi_collective_remove(void)
{
    collective.up = false;
    replica_collective_use_fallback();   /* the trainer's own all-gather, if it gave one */
}

bool shim_mpi_collective_world(uint32_t *size, uint32_t *rank)
{
    if (!collective.up)
        return false;
    *size = (uint32_t)collective.size;
    *rank = (uint32_t)collective.rank;
    return true;
}
