/* cooperative_host.c (standalone) - the cooperative API's host in the
 * stand-in libadaptdl.so that cooperative trainers link: one replica (or
 * those of an all-gather the trainer gives), nothing to restore, nothing
 * profiled, so a trainer built against the API runs as it is without the
 * preload.  When libadaptshim.so is preloaded its
 * own definitions of the API win and this library is never entered. */
#include <pthread.h>

#include "caller_collective.h"
#include "cooperative_host.h"

static struct cooperative_state cooperative_host_alone;
static pthread_once_t cooperative_host_once = PTHREAD_ONCE_INIT;

static void cooperative_host_init(void)
{
    cooperative_state_init(&cooperative_host_alone);
}

struct cooperative_state *cooperative_host_state(void)
{
    pthread_once(&cooperative_host_once, cooperative_host_init);
    return &cooperative_host_alone;
}

/* One replica, or the replicas the trainer's own all-gather joins
 * (adaptdl_use_allgather): a torch.distributed job shares its data and
 * sums its accumulators without the preload too, with nothing restored. */
struct cooperative_job cooperative_host_job(void)
{
    struct cooperative_job job = {.replicas = 1};
    unsigned replicas, rank;
    if (caller_collective_world(&replicas, &rank)) {
        job.replicas = replicas;
        job.rank = rank;
    }
    return job;
}

void cooperative_host_first_epoch_loop(void)
{
    /* nothing was ever saved, so nothing can be missed */
}

void cooperative_host_train_batch(uint64_t records)
{
    (void)records;
}

void cooperative_host_gradient(double local_sqr, double mean_sqr, uint64_t local_batch,
                               bool ends_previous_step)
{
    (void)local_sqr;
    (void)mean_sqr;
    (void)local_batch;
    (void)ends_previous_step;
}

uint64_t cooperative_host_propose_local_batch(const struct data_loop *loop)
{
    (void)loop;
    return 0;   /* the plain share */
}

double cooperative_host_efficiency(uint64_t initial_global, uint64_t global)
{
    (void)initial_global;
    (void)global;
    return 1.0;
}

double cooperative_host_gain(uint64_t initial_global, uint64_t global)
{
    (void)initial_global;
    (void)global;
    return 1.0;
}
