/* thread_replicas.c - replicas as threads with an in-process all-gather
 * (see thread_replicas.h). */
#include "thread_replicas.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "replica_collective.h"

#define THREAD_REPLICAS_MAX 16

struct thread_replicas {
    unsigned replicas;
    pthread_barrier_t barrier;
    const void *bytes[THREAD_REPLICAS_MAX];
    size_t sizes[THREAD_REPLICAS_MAX];
};

static __thread unsigned thread_replica_rank;

static int thread_replicas_allgather(void *context, const void *bytes, size_t size,
                                     struct replica_gathered *gathered, char *error,
                                     size_t error_size)
{
    struct thread_replicas *replicas = context;
    unsigned rank = thread_replica_rank;
    replicas->bytes[rank] = bytes;
    replicas->sizes[rank] = size;
    pthread_barrier_wait(&replicas->barrier);   /* everyone has posted */
    gathered->replicas = replicas->replicas;
    gathered->rank = rank;
    gathered->parts = calloc(replicas->replicas, sizeof *gathered->parts);
    gathered->sizes = calloc(replicas->replicas, sizeof *gathered->sizes);
    for (unsigned r = 0; r < replicas->replicas; r++) {
        gathered->parts[r] = malloc(replicas->sizes[r] ? replicas->sizes[r] : 1);
        memcpy(gathered->parts[r], replicas->bytes[r], replicas->sizes[r]);
        gathered->sizes[r] = replicas->sizes[r];
    }
    pthread_barrier_wait(&replicas->barrier);   /* everyone has copied */
    return 0;
}

struct thread_replica_start {
    unsigned rank, replicas;
    void (*body)(unsigned, unsigned, void *);
    void *argument;
};

static void *thread_replica_main(void *pointer)
{
    struct thread_replica_start *start = pointer;
    thread_replica_rank = start->rank;
    start->body(start->rank, start->replicas, start->argument);
    return NULL;
}

void thread_replicas_run(unsigned replicas, void (*body)(unsigned, unsigned, void *),
                         void *argument)
{
    static struct thread_replicas shared;
    memset(&shared, 0, sizeof shared);
    shared.replicas = replicas;
    pthread_barrier_init(&shared.barrier, NULL, replicas);
    replica_collective.context = &shared;
    replica_collective.allgather = thread_replicas_allgather;
    pthread_t threads[THREAD_REPLICAS_MAX];
    struct thread_replica_start starts[THREAD_REPLICAS_MAX];
    for (unsigned rank = 0; rank < replicas; rank++) {
        starts[rank] = (struct thread_replica_start){rank, replicas, body, argument};
        pthread_create(&threads[rank], NULL, thread_replica_main, &starts[rank]);
    }
    for (unsigned rank = 0; rank < replicas; rank++)
        pthread_join(threads[rank], NULL);
    pthread_barrier_destroy(&shared.barrier);
    replica_collective_use_single();
}
