/* mpi_requests.c - MPI_Iallreduce and the calls that complete or free its
 * requests (adaptshim(7) "MPI"): MPI_Wait, MPI_Waitall, MPI_Waitany, MPI_Waitsome,
 * MPI_Test, MPI_Testall, MPI_Testany, MPI_Testsome and MPI_Request_free,
 * each calling its PMPI_ twin and defined under both names.
 *
 * A gradient posted with MPI_Iallreduce is measured when a call completes
 * its request: its local norm when it is posted, the norm of the sum once
 * it has arrived.  Outstanding gradients are kept, by handle, in
 * runtime/pending_gradients.c. */
#include <stdlib.h>
#include <string.h>

#include "fork_locks.h"
#include "fork_safety.h"
#include "log.h"
#include "mpi_library.h"
#include "pending_gradients.h"
#include "steps.h"

/* Outstanding gradient Iallreduces, until a call completes (Wait*, Test*)
 * or frees (Request_free) their request (runtime/pending_gradients.c). */
static struct pending_gradients shim_pending = PENDING_GRADIENTS_INITIALIZER;
static int shim_pending_warned;

void shim_mpi_requests_fork_prepare(void)
{
    fork_lock_before(&shim_pending.lock);
}

void shim_mpi_requests_fork_parent(void)
{
    fork_lock_after_in_parent(&shim_pending.lock);
}

void shim_mpi_requests_fork_child(void)
{
    fork_lock_after_in_child(&shim_pending.lock);
}

static bool shim_pending_take(MPI_Request request, struct pending_gradient *taken)
{
    return request != predefined.request_null &&
           pending_gradients_take(&shim_pending, request, taken);
}

static int shim_mpi_iallreduce(const void *send, void *receive, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm communicator, MPI_Request *request)
{
    shim_mpi_resolve();
    int (*real_iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                           MPI_Request *) = PMPI(iallreduce, "Iallreduce");
    if (!shim_mpi_watching())
        return real_iallreduce(send, receive, count, type, op, communicator, request);
    if (!shim_mpi_collective(COLLECTIVE_ALLREDUCE, count, type, op, communicator)) {
        int result = real_iallreduce(send, receive, count, type, op, communicator, request);
        if (result == MPI_SUCCESS)
            shim_pending_take(*request, NULL);   /* a stale entry with the same handle */
        return result;
    }
    const void *input = send == MPI_IN_PLACE ? receive : send;
    struct gradient_start start = shim_mpi_gradient_starting(input, count, type);
    int result = real_iallreduce(send, receive, count, type, op, communicator, request);
    if (result != MPI_SUCCESS)
        return result;
    struct pending_gradient pending = {.request = *request, .communicator = communicator,
                                       .receive = receive, .count = count, .type = type,
                                       .start = start};
    if (!pending_gradients_add(&shim_pending, &pending)) {
        if (!__atomic_exchange_n(&shim_pending_warned, 1, __ATOMIC_ACQ_REL))
            log_warn("more than %d gradient MPI_Iallreduce requests are outstanding: the "
                     "shim counts the others as they are posted, and the steps that hold "
                     "them give no gradient statistics", PENDING_GRADIENTS_MAX);
        step_monitor_gradient_unmeasured(&shim_monitor, communicator, 0);
    }
    return result;
}

/* A request completed: if it was a gradient, account for it. */
static void shim_request_completed(MPI_Request request)
{
    struct pending_gradient done;
    if (!shim_pending_take(request, &done))
        return;
    shim_mpi_gradient_reduced(&done.start, (MPI_Comm)done.communicator, done.receive,
                              done.count, (MPI_Datatype)done.type);
}

/* A request was freed: a gradient counts toward its step, unmeasured (its
 * result arrives when nobody looks; reading it now would race MPI). */
static void shim_request_freed(MPI_Request request)
{
    struct pending_gradient freed;
    if (!shim_pending_take(request, &freed))
        return;
    step_monitor_gradient_unmeasured(&shim_monitor, (MPI_Comm)freed.communicator,
                                     log_monotonic_seconds() - freed.start.started);
}

/* The handles of a request array before a call that may complete some of
 * them.  MPI sets each request it completes (a non-blocking collective's is
 * never persistent) to MPI_REQUEST_NULL, so comparing the array afterwards
 * tells which ones completed, whichever call it was and however it reports
 * them (an index, a list of indices, a flag). */
#define SHIM_REQUESTS_INLINE 64
struct shim_request_array {
    MPI_Request inline_handles[SHIM_REQUESTS_INLINE];
    MPI_Request *handles;        /* NULL: nothing to follow */
    int count;
    const MPI_Request *requests; /* the trainer's array */
};

/* Every completing wrapper (SHIM_MPI_COMPLETING_ENTRY, below) is
 * shim_requests_before, the real call, then shim_requests_after with the
 * call's result, which it returns. */
static void shim_requests_before(struct shim_request_array *saved, int count,
                                 const MPI_Request requests[])
{
    shim_mpi_resolve();
    saved->requests = requests;
    saved->handles = NULL;
    saved->count = 0;
    if (count <= 0 || requests == NULL ||
        pending_gradients_is_empty(&shim_pending) || !shim_mpi_watching())
        return;
    MPI_Request *copy = count <= SHIM_REQUESTS_INLINE ? saved->inline_handles
                                                      : malloc((size_t)count * sizeof *copy);
    if (copy == NULL) {
        log_warn("no memory to follow %d MPI requests: gradient all-reduces they complete "
                 "are not counted", count);
        return;
    }
    memcpy(copy, requests, (size_t)count * sizeof *copy);
    saved->handles = copy;
    saved->count = count;
}

static int shim_requests_after(struct shim_request_array *saved, int result)
{
    if (saved->handles == NULL)
        return result;
    for (int i = 0; i < saved->count; i++)
        if (saved->handles[i] != predefined.request_null &&
            saved->requests[i] == predefined.request_null)
            shim_request_completed(saved->handles[i]);
    if (saved->handles != saved->inline_handles)
        free(saved->handles);
    return result;
}

static int shim_mpi_request_free(MPI_Request *request)
{
    shim_mpi_resolve();
    MPI_Request before = request != NULL ? *request : NULL;
    int result = PMPI(request_free, "Request_free")(request);
    if (result == MPI_SUCCESS && before != NULL && shim_mpi_watching())
        shim_request_freed(before);
    return result;
}

/* --- the entry points, under both names ----------------------------------------- */

/* Each call that may complete requests (mpi_functions.def): follow them,
 * make the call, account for the ones it completed and return its result.
 * `count` and `requests` say which of the call's arguments is its request
 * array. */
#define MPI_CALL(field, name, parameters)
#define MPI_COMPLETING_CALL(field, name, parameters, arguments, count, requests)   \
    static int shim_mpi_##field parameters                                        \
    {                                                                             \
        struct shim_request_array saved;                                          \
        shim_requests_before(&saved, count, requests);                            \
        return shim_requests_after(&saved, PMPI(field, #name) arguments);         \
    }                                                                             \
    SHIM_MPI_ENTRY(name, shim_mpi_##field, parameters, arguments)
#include "mpi_functions.def"
#undef MPI_CALL
#undef MPI_COMPLETING_CALL

SHIM_MPI_ENTRY(Iallreduce, shim_mpi_iallreduce,
               (const void *send, void *receive, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm communicator, MPI_Request *request),
               (send, receive, count, type, op, communicator, request))
SHIM_MPI_ENTRY(Request_free, shim_mpi_request_free, (MPI_Request *request), (request))
