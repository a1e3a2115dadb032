/* mpi.c - the MPI entry points (SPEC §6): MPI_Init(_thread), MPI_Allreduce,
 * MPI_Iallreduce and every call that completes or frees its requests
 * (MPI_Wait, MPI_Waitall, MPI_Waitany, MPI_Waitsome, MPI_Test, MPI_Testall,
 * MPI_Testany, MPI_Testsome, MPI_Request_free), MPI_Barrier, MPI_Bcast (as
 * step-ending collectives) and MPI_Finalize, each calling its PMPI_ twin.
 * Each is defined under its PMPI_ name too: Fortran's bindings
 * (libmpi_mpifh) call the PMPI_ functions directly.
 *
 * The library never links libmpi: a process that never calls MPI never
 * loads or initializes it.  The PMPI_ functions are resolved with
 * dlsym(RTLD_NEXT) at the first MPI call (an MPI library without them, such
 * as a serial stub library, is called by its MPI_ names; one that has
 * neither stops the process with a message naming the function), and the
 * predefined handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_DOUBLE, MPI_REAL,
 * MPI_DOUBLE_PRECISION, MPI_SUM, MPI_REQUEST_NULL), which in Open MPI are
 * addresses of objects inside libmpi, with dlsym(RTLD_DEFAULT): a PIE
 * trainer holds copy-relocated copies of those objects, and the copy is what
 * the trainer passes in.  mpi.h is included for its types only. */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mpi_collective.h"
#include "pending_gradients.h"
#include "previous_gradients.h"
#include "real_functions.h"
#include "shim.h"
#include "steps.h"
#include "stop_deadline.h"
#include "sysio.h"
#include "vector_norm.h"

struct shim_pmpi {
    int (*init)(int *, char ***);
    int (*init_thread)(int *, char ***, int, int *);
    int (*finalize)(void);
    int (*finalized)(int *);
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*iallreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                      MPI_Request *);
    int (*wait)(MPI_Request *, MPI_Status *);
    int (*waitall)(int, MPI_Request *, MPI_Status *);
    int (*waitany)(int, MPI_Request *, int *, MPI_Status *);
    int (*waitsome)(int, MPI_Request *, int *, int *, MPI_Status *);
    int (*test)(MPI_Request *, int *, MPI_Status *);
    int (*testall)(int, MPI_Request *, int *, MPI_Status *);
    int (*testany)(int, MPI_Request *, int *, int *, MPI_Status *);
    int (*testsome)(int, MPI_Request *, int *, int *, MPI_Status *);
    int (*request_free)(MPI_Request *);
    int (*barrier)(MPI_Comm);
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*comm_dup)(MPI_Comm, MPI_Comm *);
    int (*comm_size)(MPI_Comm, int *);
    int (*comm_rank)(MPI_Comm, int *);
};

/* The element types a gradient may have: C's float and double, and
 * Fortran's REAL, REAL*4, DOUBLE PRECISION and REAL*8. */
struct shim_mpi_handles {
    MPI_Comm world;
    MPI_Datatype float_types[3];
    MPI_Datatype double_types[3];
    MPI_Op sum;
    MPI_Request request_null;
};

static struct shim_pmpi pmpi;
static struct shim_mpi_handles handles;
static MPI_Comm shim_communicator;     /* the shim's own duplicate of the world */
static MPI_Request shim_reduction_request;
static bool shim_mpi_up;
static bool shim_mpi_finalized;
static pthread_t shim_mpi_thread;

/* The PMPI_ function, or the MPI_ one of a library that has no profiling
 * names; NULL when the process has neither. */
#define SHIM_RESOLVE(field, name)                                                   \
    do {                                                                            \
        void *function = dlsym(RTLD_NEXT, "PMPI_" name);                            \
        pmpi.field = (__typeof__(pmpi.field))(function != NULL                      \
                                                  ? function                        \
                                                  : dlsym(RTLD_NEXT, "MPI_" name)); \
    } while (0)

static void shim_mpi_resolve_once(void)
{
    SHIM_RESOLVE(init, "Init");
    SHIM_RESOLVE(init_thread, "Init_thread");
    SHIM_RESOLVE(finalize, "Finalize");
    SHIM_RESOLVE(finalized, "Finalized");
    SHIM_RESOLVE(allreduce, "Allreduce");
    SHIM_RESOLVE(iallreduce, "Iallreduce");
    SHIM_RESOLVE(wait, "Wait");
    SHIM_RESOLVE(waitall, "Waitall");
    SHIM_RESOLVE(waitany, "Waitany");
    SHIM_RESOLVE(waitsome, "Waitsome");
    SHIM_RESOLVE(test, "Test");
    SHIM_RESOLVE(testall, "Testall");
    SHIM_RESOLVE(testany, "Testany");
    SHIM_RESOLVE(testsome, "Testsome");
    SHIM_RESOLVE(request_free, "Request_free");
    SHIM_RESOLVE(barrier, "Barrier");
    SHIM_RESOLVE(bcast, "Bcast");
    SHIM_RESOLVE(comm_dup, "Comm_dup");
    SHIM_RESOLVE(comm_size, "Comm_size");
    SHIM_RESOLVE(comm_rank, "Comm_rank");
    handles.world = (MPI_Comm)dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    static const char *const float_names[] = {"ompi_mpi_float", "ompi_mpi_real",
                                              "ompi_mpi_real4"};
    static const char *const double_names[] = {"ompi_mpi_double", "ompi_mpi_dblprec",
                                               "ompi_mpi_real8"};
    for (int i = 0; i < 3; i++) {
        handles.float_types[i] = (MPI_Datatype)dlsym(RTLD_DEFAULT, float_names[i]);
        handles.double_types[i] = (MPI_Datatype)dlsym(RTLD_DEFAULT, double_names[i]);
    }
    handles.sum = (MPI_Op)dlsym(RTLD_DEFAULT, "ompi_mpi_op_sum");
    handles.request_null = (MPI_Request)dlsym(RTLD_DEFAULT, "ompi_request_null");
}

/* An MPI call the process cannot make: no MPI library after the shim
 * defines it.  Calling on would jump to address 0. */
static void shim_pmpi_missing(const char *name) __attribute__((noreturn));
static void shim_pmpi_missing(const char *name)
{
    char line[256];
    int length = snprintf(line, sizeof line,
                          "adaptshim: MPI_%s was called, but no MPI library after "
                          "libadaptshim.so defines PMPI_%s or MPI_%s: aborting\n",
                          name, name, name);
    if (length > 0)
        sysio_write_all(STDERR_FILENO, line,
                        (size_t)length < sizeof line ? (size_t)length : sizeof line - 1);
    abort();
}

/* The next definition of an MPI function, never NULL. */
#define PMPI(field, name) (SHIM_LIKELY(pmpi.field != NULL) ? pmpi.field \
                                                           : (shim_pmpi_missing(name), pmpi.field))

static void shim_mpi_resolve(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, shim_mpi_resolve_once);
}

/* The shim watches MPI only in a configured process. */
static bool shim_mpi_watching(void)
{
    if (shim_state == SHIM_STATE_UNINITIALIZED)
        shim_ensure_initialized();
    return shim_mpi_up && shim_configured() && !shim_guarded();
}

/* --- the piggy-backed reduction's transport ---------------------------------- */

static int shim_reduction_post(void *context, const double *send, double *receive, int count)
{
    (void)context;
    return pmpi.iallreduce(send, receive, count, handles.double_types[0], handles.sum,
                           shim_communicator, &shim_reduction_request) == MPI_SUCCESS ? 0 : -1;
}

static int shim_reduction_complete(void *context)
{
    (void)context;
    return pmpi.wait(&shim_reduction_request, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0 : -1;
}

static void shim_mpi_finalize_for_stop(void)
{
    if (!shim_mpi_up || shim_mpi_finalized)
        return;
    step_monitor_drain_reduction(&shim_monitor);
    shim_mpi_finalized = true;
    shim_mpi_collective_remove();
    PMPI(finalize, "Finalize")();
}

/* What the shim's own traffic needs of the MPI library; the name of the
 * first thing missing, or NULL. */
static const char *shim_mpi_missing_for_statistics(void)
{
    const struct {
        const void *present;
        const char *name;
    } needed[] = {
        {(const void *)pmpi.comm_dup, "PMPI_Comm_dup"},
        {(const void *)pmpi.comm_size, "PMPI_Comm_size"},
        {(const void *)pmpi.comm_rank, "PMPI_Comm_rank"},
        {(const void *)pmpi.iallreduce, "PMPI_Iallreduce"},
        {(const void *)pmpi.wait, "PMPI_Wait"},
        {(const void *)handles.world, "ompi_mpi_comm_world (MPI_COMM_WORLD)"},
        {(const void *)handles.double_types[0], "ompi_mpi_double (MPI_DOUBLE)"},
        {(const void *)handles.sum, "ompi_mpi_op_sum (MPI_SUM)"},
        {(const void *)handles.request_null, "ompi_request_null (MPI_REQUEST_NULL)"},
    };
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (needed[i].present == NULL)
            return needed[i].name;
    return NULL;
}

static void shim_mpi_after_init(void)
{
    if (!shim_configured())
        return;
    const char *missing = shim_mpi_missing_for_statistics();
    if (missing != NULL) {
        log_warn("this MPI library has no %s (the shim knows Open MPI's names): no "
                 "statistics, no synchronized stop", missing);
        return;
    }
    shim_guard_enter();
    shim_mpi_up = true;
    shim_mpi_thread = pthread_self();
    int size = 1, rank = 0;
    pmpi.comm_size(handles.world, &size);
    pmpi.comm_rank(handles.world, &rank);
    if (pmpi.comm_dup(handles.world, &shim_communicator) != MPI_SUCCESS) {
        log_error("MPI_Comm_dup of MPI_COMM_WORLD failed: no statistics, no synchronized stop");
        shim_mpi_up = false;
        shim_guard_leave();
        return;
    }
    if ((uint32_t)size != shim_session.config.num_replicas ||
        (uint32_t)rank != shim_session.config.replica_rank)
        log_warn("MPI says rank %d of %d, the data views were built for rank %u of %u "
                 "(ADAPTDL_NUM_REPLICAS / ADAPTDL_REPLICA_RANK or the launcher's variables)",
                 rank, size, shim_session.config.replica_rank,
                 shim_session.config.num_replicas);
    log_set_rank((uint32_t)rank);
    shim_mpi_collective_install();
    shim_deadline_start_worker();
    shim_steps_finalize_mpi = shim_mpi_finalize_for_stop;
    shim_steps_start_synchronized(
        (struct piggyback_transport){.post = shim_reduction_post,
                                     .complete = shim_reduction_complete},
        (uint32_t)size);
    log_debug("MPI up: rank %d of %d; the shim's statistics travel on its own duplicate of "
              "MPI_COMM_WORLD", rank, size);
    shim_guard_leave();
}

static int shim_mpi_init(int *argc, char ***argv)
{
    shim_mpi_resolve();
    int result = PMPI(init, "Init")(argc, argv);
    if (result == MPI_SUCCESS)
        shim_mpi_after_init();
    return result;
}

static int shim_mpi_init_thread(int *argc, char ***argv, int required, int *provided)
{
    shim_mpi_resolve();
    int result = PMPI(init_thread, "Init_thread")(argc, argv, required, provided);
    if (result == MPI_SUCCESS)
        shim_mpi_after_init();
    return result;
}

static int shim_mpi_finalize(void)
{
    shim_mpi_resolve();
    if (shim_mpi_up && !shim_mpi_finalized) {
        shim_guard_enter();
        if (shim_monitor.in_step)
            shim_guard_leave(), shim_steps_boundary(), shim_guard_enter();
        shim_steps_drain_last_step();
        shim_steps_finish("MPI_Finalize");
        shim_mpi_finalized = true;
        shim_mpi_collective_remove();
        shim_guard_leave();
    }
    return PMPI(finalize, "Finalize")();
}

/* --- gradients ------------------------------------------------------------------ */

/* Bytes per element of a datatype a gradient may have, 0 for any other. */
static size_t shim_gradient_element_size(MPI_Datatype type)
{
    for (int i = 0; i < 3; i++) {
        if (handles.float_types[i] != NULL && type == handles.float_types[i])
            return sizeof(float);
        if (handles.double_types[i] != NULL && type == handles.double_types[i])
            return sizeof(double);
    }
    return 0;
}

static bool shim_is_gradient(const void *send, int count, MPI_Datatype type, MPI_Op op)
{
    (void)send;
    return op == handles.sum && shim_gradient_element_size(type) != 0 && count >= 0 &&
           (uint64_t)count >= shim_session.config.grad_min;
}

static double shim_squared_norm(const void *buffer, int count, MPI_Datatype type)
{
    if (shim_gradient_element_size(type) == sizeof(float))
        return squared_norm_float(buffer, (size_t)count);
    return squared_norm_double(buffer, (size_t)count);
}

static int shim_communicator_size(MPI_Comm communicator)
{
    int size = 1;
    pmpi.comm_size(communicator, &size);
    return size;
}

/* A collective that is not a gradient all-reduce: the step may end here. */
static void shim_other_collective(MPI_Comm communicator)
{
    if (step_monitor_ends_step(&shim_monitor, communicator))
        shim_steps_boundary();
}

/* K = 1: the difference estimator pairs each gradient piece with the same
 * piece of the previous step (runtime/previous_gradients.c). */
static struct previous_gradients shim_previous_gradients;

static void shim_single_replica_pair(const void *gradient, int count, MPI_Datatype type)
{
    uint64_t index = shim_monitor.gradient_pieces;  /* this piece, not counted yet */
    double mean_sqr;
    bool valid = previous_gradients_pair(&shim_previous_gradients, (size_t)index, gradient,
                                         (size_t)count, shim_gradient_element_size(type),
                                         shim_monitor.boundaries + 1, &mean_sqr);
    step_monitor_gradient_pair(&shim_monitor, mean_sqr, valid);
}

static int shim_mpi_allreduce(const void *send, void *receive, int count, MPI_Datatype type,
                              MPI_Op op, MPI_Comm communicator)
{
    shim_mpi_resolve();
    int (*real_allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm) =
        PMPI(allreduce, "Allreduce");
    if (!shim_mpi_watching())
        return real_allreduce(send, receive, count, type, op, communicator);
    if (!shim_is_gradient(send, count, type, op)) {
        shim_other_collective(communicator);
        return real_allreduce(send, receive, count, type, op, communicator);
    }
    /* with MPI_IN_PLACE the input is in the receive buffer and is overwritten */
    const void *input = send == MPI_IN_PLACE ? receive : send;
    bool measuring = step_monitor_measuring(&shim_monitor);
    double before = log_monotonic_seconds();
    double local_sqr = measuring ? shim_squared_norm(input, count, type) : 0;
    double started = log_monotonic_seconds();
    int result = real_allreduce(send, receive, count, type, op, communicator);
    double finished = log_monotonic_seconds();
    if (result == MPI_SUCCESS) {
        int replicas = shim_communicator_size(communicator);
        double total_sqr = measuring ? shim_squared_norm(receive, count, type) /
                                           ((double)replicas * (double)replicas)
                                     : 0;
        if (measuring && replicas == 1)
            shim_single_replica_pair(receive, count, type);
        double norm_seconds = (started - before) + (log_monotonic_seconds() - finished);
        step_monitor_gradient(&shim_monitor, communicator, local_sqr, total_sqr,
                              finished - started, norm_seconds);
        log_trace("gradient all-reduce: %d elements, |local|^2 %g, |mean|^2 %g, %.6f s",
                  count, local_sqr, total_sqr, finished - started);
    }
    return result;
}

/* --- non-blocking gradients --------------------------------------------------- */

/* Outstanding gradient Iallreduces, until a call completes (Wait*, Test*)
 * or frees (Request_free) their request (runtime/pending_gradients.c). */
static struct pending_gradients shim_pending = PENDING_GRADIENTS_INITIALIZER;
static int shim_pending_warned;

static bool shim_pending_take(MPI_Request request, struct pending_gradient *taken)
{
    return request != handles.request_null &&
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
    if (!shim_is_gradient(send, count, type, op)) {
        shim_other_collective(communicator);
        int result = real_iallreduce(send, receive, count, type, op, communicator, request);
        if (result == MPI_SUCCESS)
            shim_pending_take(*request, NULL);   /* a stale entry with the same handle */
        return result;
    }
    const void *input = send == MPI_IN_PLACE ? receive : send;
    bool measuring = step_monitor_measuring(&shim_monitor);
    double before = log_monotonic_seconds();
    double local_sqr = measuring ? shim_squared_norm(input, count, type) : 0;
    double started = log_monotonic_seconds();
    int result = real_iallreduce(send, receive, count, type, op, communicator, request);
    if (result != MPI_SUCCESS)
        return result;
    struct pending_gradient pending = {
        .request = *request, .communicator = communicator, .receive = receive,
        .count = count, .type = type, .local_sqr = local_sqr, .started = started,
        .measuring = measuring, .norm_seconds = started - before};
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
    MPI_Comm communicator = (MPI_Comm)done.communicator;
    MPI_Datatype type = (MPI_Datatype)done.type;
    double replicas = (double)shim_communicator_size(communicator);
    double completed = log_monotonic_seconds();
    double total_sqr = done.measuring ? shim_squared_norm(done.receive, done.count, type) /
                                            (replicas * replicas)
                                      : 0;
    if (done.measuring && replicas == 1)
        shim_single_replica_pair(done.receive, done.count, type);
    double norm_seconds = done.norm_seconds + (log_monotonic_seconds() - completed);
    step_monitor_gradient(&shim_monitor, communicator, done.local_sqr, total_sqr,
                          completed - done.started, norm_seconds);
}

/* A request was freed: a gradient counts toward its step, unmeasured (its
 * result arrives when nobody looks; reading it now would race MPI). */
static void shim_request_freed(MPI_Request request)
{
    struct pending_gradient freed;
    if (!shim_pending_take(request, &freed))
        return;
    step_monitor_gradient_unmeasured(&shim_monitor, (MPI_Comm)freed.communicator,
                                     log_monotonic_seconds() - freed.started);
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

/* Every completing wrapper is shim_requests_before, the real call, then
 * shim_requests_after with the call's result, which it returns. */
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
        if (saved->handles[i] != handles.request_null &&
            saved->requests[i] == handles.request_null)
            shim_request_completed(saved->handles[i]);
    if (saved->handles != saved->inline_handles)
        free(saved->handles);
    return result;
}

static int shim_mpi_wait(MPI_Request *request, MPI_Status *status)
{
    struct shim_request_array saved;
    shim_requests_before(&saved, request != NULL ? 1 : 0, request);
    return shim_requests_after(&saved, PMPI(wait, "Wait")(request, status));
}

static int shim_mpi_waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    struct shim_request_array saved;
    shim_requests_before(&saved, count, requests);
    return shim_requests_after(&saved, PMPI(waitall, "Waitall")(count, requests, statuses));
}

static int shim_mpi_waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    struct shim_request_array saved;
    shim_requests_before(&saved, count, requests);
    return shim_requests_after(&saved, PMPI(waitany, "Waitany")(count, requests, index, status));
}

static int shim_mpi_waitsome(int count, MPI_Request requests[], int *completed, int indices[],
                             MPI_Status statuses[])
{
    struct shim_request_array saved;
    shim_requests_before(&saved, count, requests);
    int result = PMPI(waitsome, "Waitsome")(count, requests, completed, indices, statuses);
    return shim_requests_after(&saved, result);
}

static int shim_mpi_test(MPI_Request *request, int *flag, MPI_Status *status)
{
    struct shim_request_array saved;
    shim_requests_before(&saved, request != NULL ? 1 : 0, request);
    return shim_requests_after(&saved, PMPI(test, "Test")(request, flag, status));
}

static int shim_mpi_testall(int count, MPI_Request requests[], int *flag,
                            MPI_Status statuses[])
{
    struct shim_request_array saved;
    shim_requests_before(&saved, count, requests);
    int result = PMPI(testall, "Testall")(count, requests, flag, statuses);
    return shim_requests_after(&saved, result);
}

static int shim_mpi_testany(int count, MPI_Request requests[], int *index, int *flag,
                            MPI_Status *status)
{
    struct shim_request_array saved;
    shim_requests_before(&saved, count, requests);
    int result = PMPI(testany, "Testany")(count, requests, index, flag, status);
    return shim_requests_after(&saved, result);
}

static int shim_mpi_testsome(int count, MPI_Request requests[], int *completed, int indices[],
                             MPI_Status statuses[])
{
    struct shim_request_array saved;
    shim_requests_before(&saved, count, requests);
    int result = PMPI(testsome, "Testsome")(count, requests, completed, indices, statuses);
    return shim_requests_after(&saved, result);
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

static int shim_mpi_barrier(MPI_Comm communicator)
{
    shim_mpi_resolve();
    int (*real_barrier)(MPI_Comm) = PMPI(barrier, "Barrier");
    if (shim_mpi_watching())
        shim_other_collective(communicator);
    return real_barrier(communicator);
}

static int shim_mpi_bcast(void *buffer, int count, MPI_Datatype type, int root,
                          MPI_Comm communicator)
{
    shim_mpi_resolve();
    int (*real_bcast)(void *, int, MPI_Datatype, int, MPI_Comm) = PMPI(bcast, "Bcast");
    if (shim_mpi_watching())
        shim_other_collective(communicator);
    return real_bcast(buffer, count, type, root, communicator);
}

/* --- the entry points, under both names ----------------------------------------- */

#define SHIM_MPI_ENTRY(name, function, parameters, arguments)              \
    SHIM_EXPORT int MPI_##name parameters { return function arguments; }   \
    SHIM_EXPORT int PMPI_##name parameters { return function arguments; }

SHIM_MPI_ENTRY(Init, shim_mpi_init, (int *argc, char ***argv), (argc, argv))
SHIM_MPI_ENTRY(Init_thread, shim_mpi_init_thread,
               (int *argc, char ***argv, int required, int *provided),
               (argc, argv, required, provided))
SHIM_MPI_ENTRY(Finalize, shim_mpi_finalize, (void), ())
SHIM_MPI_ENTRY(Allreduce, shim_mpi_allreduce,
               (const void *send, void *receive, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm communicator),
               (send, receive, count, type, op, communicator))
SHIM_MPI_ENTRY(Iallreduce, shim_mpi_iallreduce,
               (const void *send, void *receive, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm communicator, MPI_Request *request),
               (send, receive, count, type, op, communicator, request))
SHIM_MPI_ENTRY(Wait, shim_mpi_wait, (MPI_Request *request, MPI_Status *status),
               (request, status))
SHIM_MPI_ENTRY(Waitall, shim_mpi_waitall,
               (int count, MPI_Request requests[], MPI_Status statuses[]),
               (count, requests, statuses))
SHIM_MPI_ENTRY(Waitany, shim_mpi_waitany,
               (int count, MPI_Request requests[], int *index, MPI_Status *status),
               (count, requests, index, status))
SHIM_MPI_ENTRY(Waitsome, shim_mpi_waitsome,
               (int count, MPI_Request requests[], int *completed, int indices[],
                MPI_Status statuses[]),
               (count, requests, completed, indices, statuses))
SHIM_MPI_ENTRY(Test, shim_mpi_test, (MPI_Request *request, int *flag, MPI_Status *status),
               (request, flag, status))
SHIM_MPI_ENTRY(Testall, shim_mpi_testall,
               (int count, MPI_Request requests[], int *flag, MPI_Status statuses[]),
               (count, requests, flag, statuses))
SHIM_MPI_ENTRY(Testany, shim_mpi_testany,
               (int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status),
               (count, requests, index, flag, status))
SHIM_MPI_ENTRY(Testsome, shim_mpi_testsome,
               (int count, MPI_Request requests[], int *completed, int indices[],
                MPI_Status statuses[]),
               (count, requests, completed, indices, statuses))
SHIM_MPI_ENTRY(Request_free, shim_mpi_request_free, (MPI_Request *request), (request))
SHIM_MPI_ENTRY(Barrier, shim_mpi_barrier, (MPI_Comm communicator), (communicator))
SHIM_MPI_ENTRY(Bcast, shim_mpi_bcast,
               (void *buffer, int count, MPI_Datatype type, int root, MPI_Comm communicator),
               (buffer, count, type, root, communicator))

/* A train-batch read on the thread that runs MPI ends a step in progress. */
bool shim_mpi_on_mpi_thread(void)
{
    return shim_mpi_up && pthread_equal(pthread_self(), shim_mpi_thread);
}
