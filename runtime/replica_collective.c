/* replica_collective.c - the all-gather transport of the cooperative API
 * (see replica_collective.h), with its single-replica default. */
#include "replica_collective.h"
#include "error_message.h"

#include <stdlib.h>
#include <string.h>

static int replica_collective_single(void *context, const void *bytes, size_t size,
                                     struct replica_gathered *gathered, char *error,
                                     size_t error_size)
{
    (void)context;
    gathered->replicas = 1;
    gathered->parts = calloc(1, sizeof *gathered->parts);
    gathered->sizes = calloc(1, sizeof *gathered->sizes);
    unsigned char *copy = malloc(size ? size : 1);
    if (gathered->parts == NULL || gathered->sizes == NULL || copy == NULL) {
        free(copy);
        replica_gathered_free(gathered);
        return error_message(error, error_size, "out of memory gathering %zu bytes", size);
    }
    memcpy(copy, bytes, size);
    gathered->parts[0] = copy;
    gathered->sizes[0] = size;
    gathered->rank = 0;
    return 0;
}

struct replica_collective replica_collective = {NULL, replica_collective_single};

/* What replica_collective_use_fallback comes back to. */
static struct replica_collective replica_collective_fallback = {NULL, replica_collective_single};

void replica_collective_use_single(void)
{
    replica_collective_fallback.context = NULL;
    replica_collective_fallback.allgather = replica_collective_single;
    replica_collective = replica_collective_fallback;
}

bool replica_collective_set_fallback(const struct replica_collective *fallback)
{
    bool fallback_in_use = replica_collective.allgather == replica_collective_fallback.allgather &&
                           replica_collective.context == replica_collective_fallback.context;
    if (fallback != NULL) {
        replica_collective_fallback = *fallback;
    } else {
        replica_collective_fallback.context = NULL;
        replica_collective_fallback.allgather = replica_collective_single;
    }
    if (fallback_in_use)
        replica_collective = replica_collective_fallback;
    return fallback_in_use;
}

void replica_collective_use_fallback(void)
{
    replica_collective = replica_collective_fallback;
}

/* What the job says (replica_collective_expect); 0 replicas: unchecked. */
static struct {
    unsigned replicas, rank;
} replica_collective_expected;

void replica_collective_expect(unsigned replicas, unsigned rank)
{
    replica_collective_expected.replicas = replicas;
    replica_collective_expected.rank = rank;
}

/* Every replica that gathered checks, after the exchange: a replica that
 * refused before it would leave the others waiting in theirs. */
static int replica_collective_check_reach(struct replica_gathered *gathered, char *error,
                                          size_t error_size)
{
    unsigned replicas = replica_collective_expected.replicas;
    unsigned rank = replica_collective_expected.rank;
    if (replicas == 0 || (gathered->replicas == replicas && gathered->rank == rank))
        return 0;
    unsigned reached = gathered->replicas, reached_rank = gathered->rank;
    replica_gathered_free(gathered);
    return error_message(error, error_size,
                         "the job has %u replicas (this one rank %u) but the collective over "
                         "them reaches %u (this one rank %u)%s, so no sum over the replicas is "
                         "made; accepted: every replica in one MPI world (started by one "
                         "mpirun, MPI_Init called), with ADAPTDL_NUM_REPLICAS and "
                         "ADAPTDL_REPLICA_RANK unset or equal to MPI's size and rank, or "
                         "an all-gather given to adaptdl_use_allgather (Python: "
                         "torch.distributed initialized)",
                         replicas, rank, reached, reached_rank,
                         reached == 1 ? ": no MPI world joins this process to the others" : "");
}

int replica_collective_allgather(const void *bytes, size_t size,
                                 struct replica_gathered *gathered, char *error,
                                 size_t error_size)
{
    memset(gathered, 0, sizeof *gathered);
    if (replica_collective.allgather(replica_collective.context, bytes, size, gathered, error,
                                     error_size) != 0)
        return -1;
    return replica_collective_check_reach(gathered, error, error_size);
}

void replica_gathered_free(struct replica_gathered *gathered)
{
    if (gathered->parts != NULL)
        for (unsigned r = 0; r < gathered->replicas; r++)
            free(gathered->parts[r]);
    free(gathered->parts);
    free(gathered->sizes);
    memset(gathered, 0, sizeof *gathered);
}

int replica_collective_agree_u64(uint64_t value, unsigned root, uint64_t *agreed, char *error,
                                 size_t error_size)
{
    struct replica_gathered gathered;
    if (replica_collective_allgather(&value, sizeof value, &gathered, error, error_size) != 0)
        return -1;
    int status = 0;
    if (root >= gathered.replicas || gathered.sizes[root] != sizeof value) {
        error_message(error, error_size, "replica %u sent no value to agree on", root);
        status = -1;
    } else {
        memcpy(agreed, gathered.parts[root], sizeof value);
    }
    replica_gathered_free(&gathered);
    return status;
}
