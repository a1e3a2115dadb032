/* cooperative_host.c - the cooperative API's host inside libadaptshim.so
 * (cooperative_host.h): the preloaded shim's session, step profiling and
 * goodput model. */
#include <pthread.h>

#include "cooperative_host.h"
#include "decisions.h"
#include "fork_locks.h"
#include "log.h"
#include "shim.h"
#include "statistical_epoch.h"
#include "steps.h"

/* A process the shim leaves inactive (no ADAPTDL_* variable) still gets a
 * working API: one replica, nothing to restore. */
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

struct cooperative_job cooperative_host_job(void)
{
    shim_ensure_initialized();
    if (!shim_configured())
        return (struct cooperative_job){.replicas = 1};
    const struct adaptdl_config *config = &shim_session.config;
    return (struct cooperative_job){
        .replicas = config->num_replicas,
        .rank = config->replica_rank,
        .restarts = config->num_restarts,
        /* a restore on another thread may set it (session.c) */
        .seed = __atomic_load_n(&config->seed, __ATOMIC_RELAXED),
    };
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
