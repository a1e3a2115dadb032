/* cooperative_host.c - the cooperative API's host inside libadaptshim.so
 * (cooperative_host.h): the preloaded shim's session, step profiling and
 * goodput model. */
#include <pthread.h>

#include "caller_collective.h"
#include "cooperative_host.h"
#include "decisions.h"
#include "fork_locks.h"
#include "log.h"
#include "mpi_collective.h"
#include "shim.h"
#include "statistical_epoch.h"
#include "steps.h"

/* A process the shim leaves inactive (no ADAPTDL_* variable) still gets a
 * working API: MPI's world once MPI is up (one replica before), nothing to
 * restore. */
static struct cooperative_state cooperative_host_inactive;
static pthread_once_t cooperative_host_inactive_once = PTHREAD_ONCE_INIT;

/* Its lock across fork, as fork_safety.c does for a configured process's
 * (which never uses this state). */
static void cooperative_host_inactive_fork_prepare(void)
{
    fork_lock_before(&cooperative_host_inactive.lock);
}

static void cooperative_host_inactive_fork_parent(void)
{
    fork_lock_after_in_parent(&cooperative_host_inactive.lock);
}

static void cooperative_host_inactive_fork_child(void)
{
    fork_lock_after_in_child(&cooperative_host_inactive.lock);
}

static void cooperative_host_init_inactive(void)
{
    cooperative_state_init(&cooperative_host_inactive);
    if (pthread_atfork(cooperative_host_inactive_fork_prepare,
                       cooperative_host_inactive_fork_parent,
                       cooperative_host_inactive_fork_child) != 0)
        log_warn("cannot register the cooperative API's fork handlers (out of memory): a "
                 "process forked while another thread is inside the API may hang in it");
}

struct cooperative_state *cooperative_host_state(void)
{
    shim_ensure_initialized();
    if (shim_configured())
        return &shim_session.cooperative;
    pthread_once(&cooperative_host_inactive_once, cooperative_host_init_inactive);
    return &cooperative_host_inactive;
}

/* Where this process stands: a number a variable gave (ADAPTDL_NUM_REPLICAS,
 * ADAPTDL_REPLICA_RANK or a launcher's) is the job's; one that none gave is
 * MPI's once MPI is up through the preload, as MPI_Comm_size and
 * MPI_Comm_rank say, also in a process without ADAPTDL_* variables (under
 * mpirun each rank would otherwise be one replica reading all the data);
 * without an MPI world it is the layout of the all-gather the trainer gave
 * (adaptdl_use_allgather), else 1 replica, rank 0.  A given number
 * that MPI's world contradicts stays the job's, and the collectives refuse
 * to sum over the wrong replicas (replica_collective_expect). */
struct cooperative_job cooperative_host_job(void)
{
    shim_ensure_initialized();
    struct cooperative_job job = {.replicas = 1};
    bool count_given = false, rank_given = false;
    if (shim_configured()) {
        const struct adaptdl_config *config = &shim_session.config;
        job = (struct cooperative_job){
            .replicas = config->num_replicas,
            .rank = config->replica_rank,
            .restarts = config->num_restarts,
            /* a restore on another thread may set it (session.c) */
            .seed = __atomic_load_n(&config->seed, __ATOMIC_RELAXED),
        };
        count_given = config->replica_count_given;
        rank_given = config->replica_rank_given;
    }
    uint32_t world_size, world_rank;
    unsigned caller_size, caller_rank;
    if (shim_mpi_collective_world(&world_size, &world_rank)) {
        if (!count_given)
            job.replicas = world_size;
        if (!rank_given)
            job.rank = world_rank;
    } else if (caller_collective_world(&caller_size, &caller_rank)) {
        /* no MPI world: the replicas the trainer's own all-gather joins */
        if (!count_given)
            job.replicas = caller_size;
        if (!rank_given)
            job.rank = caller_rank;
    }
    return job;
}

void cooperative_host_first_epoch_loop(void)
{
    static bool asked;   /* once: a refused first begin is followed by another */
    if (!shim_configured() || asked)
        return;
    asked = true;
    char message[1024];
    if (session_describe_unloaded_snapshots(&shim_session, message, sizeof message))
        log_warn("the epoch loop begins at epoch 0: %s; load the checkpoint before "
                 "adaptdl_remaining_epochs_until", message);
}

/* (not once the process froze for its teardown, freeze.c: MPI may be gone,
 * and the step code would use it) */
void cooperative_host_train_batch(uint64_t records)
{
    if (shim_configured() && !shim_frozen())
        shim_steps_cooperative_batch(records);
}

void cooperative_host_gradient(double local_sqr, double mean_sqr, uint64_t local_batch,
                               bool ends_previous_step)
{
    if (shim_configured() && !shim_frozen())
        shim_steps_cooperative_gradient(local_sqr, mean_sqr, local_batch, ends_previous_step);
}

uint64_t cooperative_host_propose_local_batch(const struct data_loop *loop)
{
    if (!shim_configured())
        return 0;
    return shim_decisions_propose_local_batch(loop->batch_size, loop->max_batch_size,
                                              loop->replicas, loop->local_batch);
}

double cooperative_host_efficiency(uint64_t initial_global, uint64_t global)
{
    return shim_configured() ? shim_decisions_efficiency(initial_global, global) : 1.0;
}

double cooperative_host_gain(uint64_t initial_global, uint64_t global)
{
    return shim_configured() ? shim_decisions_gain(initial_global, global) : 1.0;
}
