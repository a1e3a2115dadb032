/* caller_collective.c - the trainer's own all-gather as the cooperative
 * API's transport (see caller_collective.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "caller_collective.h"
#include "error_message.h"
#include "replica_collective.h"

struct caller_collective {
    caller_allgather_function *allgather;
    void *context;
    size_t *sizes;   /* room for one size per replica, reused */
};

static struct caller_collective caller;

/* replicas << 32 | rank, 0 when none is installed: read without the API's
 * lock by the calls that only ask for the layout (adaptdl_num_replicas). */
static uint64_t caller_layout;

bool caller_collective_world(unsigned *replicas, unsigned *rank)
{
    uint64_t layout = __atomic_load_n(&caller_layout, __ATOMIC_ACQUIRE);
    if (layout == 0)
        return false;
    *replicas = (unsigned)(layout >> 32);
    *rank = (unsigned)(layout & UINT32_MAX);
    return true;
}

/* The replica_collective transport over the trainer's function. */
static int caller_collective_allgather(void *context, const void *bytes, size_t size,
                                       struct replica_gathered *gathered, char *error,
                                       size_t error_size)
{
    (void)context;
    unsigned replicas, rank;
    if (!caller_collective_world(&replicas, &rank))
        return error_message(error, error_size, "no all-gather is installed");
    memset(caller.sizes, 0, replicas * sizeof *caller.sizes);
    const void *all = NULL;
    char reason[256] = "";
    int returned = caller.allgather(caller.context, bytes, size, caller.sizes, &all, reason,
                                    sizeof reason);
    reason[sizeof reason - 1] = '\0';
    if (returned != 0) {
        return error_message(error, error_size,
                             "the all-gather given to adaptdl_use_allgather failed (it "
                             "returned %d): %s",
                             returned, reason[0] ? reason : "it gave no reason");
    }
    size_t total = 0;
    for (unsigned r = 0; r < replicas; r++) {
        if (caller.sizes[r] > SIZE_MAX - total)
            return error_message(error, error_size,
                                 "the all-gather given to adaptdl_use_allgather reported sizes "
                                 "that add up to more than memory can hold");
        total += caller.sizes[r];
    }
    if (caller.sizes[rank] != size || (total > 0 && all == NULL)) {
        return error_message(error, error_size,
                             "the all-gather given to adaptdl_use_allgather handed back %zu "
                             "bytes at this replica's rank %u, given %zu%s; accepted: sizes[r] "
                             "for every replica r and *gathered pointing at their bytes in rank "
                             "order",
                             caller.sizes[rank], rank, size,
                             total > 0 && all == NULL ? ", and no bytes" : "");
    }
    gathered->replicas = replicas;
    gathered->rank = rank;
    gathered->parts = calloc(replicas, sizeof *gathered->parts);
    gathered->sizes = calloc(replicas, sizeof *gathered->sizes);
    if (gathered->parts == NULL || gathered->sizes == NULL)
        goto out_of_memory;
    const unsigned char *next = all;
    for (unsigned r = 0; r < replicas; r++) {
        gathered->parts[r] = malloc(caller.sizes[r] ? caller.sizes[r] : 1);
        if (gathered->parts[r] == NULL)
            goto out_of_memory;
        if (caller.sizes[r] > 0)
            memcpy(gathered->parts[r], next, caller.sizes[r]);
        gathered->sizes[r] = caller.sizes[r];
        next += caller.sizes[r];
    }
    return 0;
out_of_memory:
    replica_gathered_free(gathered);
    return error_message(error, error_size, "out of memory copying %zu gathered bytes", total);
}

int caller_collective_install(unsigned replicas, unsigned rank,
                              caller_allgather_function *allgather, void *context, char *error,
                              size_t error_size)
{
    if (allgather == NULL) {
        __atomic_store_n(&caller_layout, 0, __ATOMIC_RELEASE);
        free(caller.sizes);
        caller = (struct caller_collective){0};
        return replica_collective_set_fallback(NULL) ? 0 : 1;
    }
    if (replicas == 0 || rank >= replicas) {
        return error_message(error, error_size,
                             "adaptdl_use_allgather: %u replicas with this one at rank %u is "
                             "not a layout; accepted: at least 1 replica and a rank below "
                             "their count",
                             replicas, rank);
    }
    size_t *sizes = calloc(replicas, sizeof *sizes);
    if (sizes == NULL)
        return error_message(error, error_size,
                             "out of memory installing an all-gather over %u replicas",
                             replicas);
    free(caller.sizes);
    caller = (struct caller_collective){.allgather = allgather, .context = context,
                                        .sizes = sizes};
    __atomic_store_n(&caller_layout, (uint64_t)replicas << 32 | rank, __ATOMIC_RELEASE);
    static const struct replica_collective transport = {NULL, caller_collective_allgather};
    return replica_collective_set_fallback(&transport) ? 0 : 1;
}
