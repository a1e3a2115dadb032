/* reported_steps.c - the exported API of adaptdl_steps.h: steps, gradient
 * norms and agreed stops told by a trainer's process whose gradients never
 * pass through MPI (the Python glue for PyTorch).  Thin: every call is
 * checked and handed to the step code (steps.c), which treats these steps
 * as it treats MPI's. */
#include <math.h>
#include <pthread.h>

#include "adaptdl_steps.h"
#include "log.h"
#include "shim.h"
#include "steps.h"
#include "stop_deadline.h"
#include "vector_norm.h"

#define API __attribute__((visibility("default")))

/* The loopback of a single process (step_monitor.h); the installed
 * transport is set once, under this lock. */
static struct piggyback_loopback reported_loopback;
static pthread_mutex_t reported_install_lock = PTHREAD_MUTEX_INITIALIZER;
static bool reported_installed;

static bool reported_steps_usable(void)
{
    shim_ensure_initialized();
    return shim_configured() && !shim_frozen();
}

API int adaptdl_steps_active(void)
{
    return reported_steps_usable() ? 1 : 0;
}

API int adaptdl_steps_install_transport(unsigned replicas, adaptdl_steps_post_function post,
                                        adaptdl_steps_complete_function complete,
                                        void *context)
{
    if (!reported_steps_usable())
        return -1;
    bool loopback = post == NULL && complete == NULL;
    if (replicas == 0 || (post == NULL) != (complete == NULL) || (loopback && replicas != 1)) {
        log_error("adaptdl_steps_install_transport: give post and complete for %u replicas, "
                  "or neither for one replica (a loopback)", replicas);
        return -1;
    }
    pthread_mutex_lock(&reported_install_lock);
    int result = -1;
    if (reported_installed)
        log_error("adaptdl_steps_install_transport: a transport is installed already (once "
                  "per process)");
    else if (shim_steps_are_synchronized())
        log_error("adaptdl_steps_install_transport: MPI carries this process's steps "
                  "already; its steps are MPI's");
    else {
        struct piggyback_transport transport =
            loopback ? piggyback_loopback_transport(&reported_loopback)
                     : (struct piggyback_transport){.context = context,
                                                    .post = post,
                                                    .complete = complete};
        /* a stop that finds no boundary in time is taken by this thread */
        shim_deadline_start_worker();
        shim_steps_start_synchronized(transport, replicas);
        reported_installed = true;
        result = 0;
        log_debug("steps reported by the trainer's process: %u replica(s), %s", replicas,
                  loopback ? "agreeing with itself" : "the reduction on the caller's transport");
    }
    pthread_mutex_unlock(&reported_install_lock);
    return result;
}

static bool reported_steps_ready(const char *function)
{
    if (!reported_steps_usable())
        return false;
    if (!__atomic_load_n(&reported_installed, __ATOMIC_ACQUIRE)) {
        log_error("%s: no transport installed (adaptdl_steps_install_transport first)",
                  function);
        return false;
    }
    return true;
}

API int adaptdl_steps_measuring(void)
{
    if (!reported_steps_ready("adaptdl_steps_measuring"))
        return 0;
    shim_steps_lock();
    bool measuring = step_monitor_measuring(&shim_monitor);
    shim_steps_unlock();
    return measuring ? 1 : 0;
}

API int adaptdl_steps_squared_norm(const void *data, uint64_t count, unsigned element_size,
                                   double *squared)
{
    if (squared == NULL || (data == NULL && count > 0) ||
        (element_size != sizeof(float) && element_size != sizeof(double))) {
        log_error("adaptdl_steps_squared_norm: give floats (element size 4) or doubles (8) "
                  "and a result pointer (got element size %u)", element_size);
        return -1;
    }
    *squared = element_size == sizeof(float) ? squared_norm_float(data, (size_t)count)
                                             : squared_norm_double(data, (size_t)count);
    return 0;
}

API int adaptdl_steps_report_gradient(double local_sqr, double mean_sqr, double sync_seconds,
                                      double norm_seconds)
{
    if (!reported_steps_ready("adaptdl_steps_report_gradient"))
        return -1;
    if (!isfinite(local_sqr) || !isfinite(mean_sqr) || local_sqr < 0 || mean_sqr < 0) {
        log_error("adaptdl_steps_report_gradient: squared norms must be finite and at least "
                  "0 (got %g, %g)", local_sqr, mean_sqr);
        return -1;
    }
    shim_steps_reported_gradient(local_sqr, mean_sqr, sync_seconds > 0 ? sync_seconds : 0,
                                 norm_seconds > 0 ? norm_seconds : 0, true);
    return 0;
}

API int adaptdl_steps_report_unmeasured(double sync_seconds)
{
    if (!reported_steps_ready("adaptdl_steps_report_unmeasured"))
        return -1;
    shim_steps_reported_gradient(0, 0, sync_seconds > 0 ? sync_seconds : 0, 0, false);
    return 0;
}

API int adaptdl_steps_report_single_replica_piece(const void *data, uint64_t count,
                                                  unsigned element_size)
{
    if (!reported_steps_ready("adaptdl_steps_report_single_replica_piece"))
        return -1;
    if ((data == NULL && count > 0) ||
        (element_size != sizeof(float) && element_size != sizeof(double))) {
        log_error("adaptdl_steps_report_single_replica_piece: give floats (element size 4) "
                  "or doubles (8) (got element size %u)", element_size);
        return -1;
    }
    shim_steps_reported_single_replica_piece(data, (size_t)count, element_size);
    return 0;
}

API int adaptdl_steps_boundary(uint64_t local_batch)
{
    if (!reported_steps_ready("adaptdl_steps_boundary"))
        return -1;
    return shim_steps_reported_boundary(local_batch) ? 1 : 0;
}

API int adaptdl_steps_finish(void)
{
    if (!reported_steps_ready("adaptdl_steps_finish"))
        return -1;
    shim_steps_drain_last_step();
    return 0;
}

API void adaptdl_steps_notice(const char *message)
{
    if (message != NULL)
        log_warn("%s", message);
}
