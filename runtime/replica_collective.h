/* replica_collective.h - the one collective the cooperative API needs: every
 * replica contributes a byte string and receives everyone's, in rank order.
 *
 * The accumulator sums dictionaries whose keys may differ between replicas
 * (AdaptDL's allreduce of dicts), and loops take rank 0's batch-size
 * decision: both are an all-gather of serialized values followed by the
 * same deterministic merge on every replica.  The shim installs an MPI
 * transport on its own duplicated communicator once MPI is up (shim/mpi_collective.c);
 * until then, and in processes without MPI, the transport is the fallback:
 * a single replica that receives its own bytes back, which only a job of
 * one replica may use (replica_collective_expect), unless the trainer gave
 * an all-gather of its own (caller_collective.h). */
#ifndef ADAPTSHIM_REPLICA_COLLECTIVE_H
#define ADAPTSHIM_REPLICA_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct replica_gathered {
    unsigned replicas;
    unsigned rank;                /* this replica's place among them */
    unsigned char **parts;        /* parts[r]: replica r's bytes (malloc'd) */
    size_t *sizes;
};

struct replica_collective {
    void *context;
    /* Gathers `size` bytes from every replica into *gathered (caller frees
     * with replica_gathered_free).  0, or -1 with a message. */
    int (*allgather)(void *context, const void *bytes, size_t size,
                     struct replica_gathered *gathered, char *error, size_t error_size);
};

/* The transport in use: single replica unless the shim installed MPI's. */
extern struct replica_collective replica_collective;

/* Restores the single-replica transport and makes it the fallback again
 * (tests). */
void replica_collective_use_single(void);

/* The transport used whenever no other is installed (NULL: the single
 * replica), copied; true when it is the one in use now, false when
 * another one (MPI's) was installed over the fallback and stays. */
bool replica_collective_set_fallback(const struct replica_collective *fallback);
/* Leaves an installed transport for the fallback (MPI_Finalize). */
void replica_collective_use_fallback(void);

/* The replicas the job has and this one's rank, as the trainer is told
 * (0 replicas, the default: not checked, for tests that install a
 * transport of their own).  A collective that reaches another number of
 * replicas, or puts this one at another rank, fails with a message rather
 * than sum over part of the job: two processes started without a shared
 * MPI world but told they are 2 replicas would each sum alone. */
void replica_collective_expect(unsigned replicas, unsigned rank);

/* Gathers through the transport in use, then checks what it reached
 * against replica_collective_expect.  0, or -1 with a message (*gathered
 * is then empty). */
int replica_collective_allgather(const void *bytes, size_t size,
                                 struct replica_gathered *gathered, char *error,
                                 size_t error_size);
void replica_gathered_free(struct replica_gathered *gathered);

/* Every replica passes its value; all receive replica `root`'s (a broadcast
 * built on the all-gather).  0, or -1 with a message. */
int replica_collective_agree_u64(uint64_t value, unsigned root, uint64_t *agreed, char *error,
                                 size_t error_size);

#endif
