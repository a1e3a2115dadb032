/* mpi.c - the MPI entry points (SPEC §6): MPI_Init(_thread), MPI_Allreduce,
 * MPI_Iallreduce and the calls completing its requests, MPI_Barrier,
 * MPI_Bcast (as step-ending collectives) and MPI_Finalize, each calling its
 * PMPI_ twin.
 *
 * The library never links libmpi: a process that never calls MPI never
 * loads or initializes it.  The PMPI_ functions are resolved with
 * dlsym(RTLD_NEXT) at the first MPI call, and the predefined handles
 * (MPI_COMM_WORLD, MPI_FLOAT, MPI_DOUBLE, MPI_SUM, MPI_REQUEST_NULL), which in
 * Open MPI are addresses of objects inside libmpi, with dlsym(RTLD_DEFAULT):
 * a PIE trainer holds copy-relocated copies of those objects, and the copy is
 * what the trainer passes in.  mpi.h is included for its types only. */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "steps.h"
#include "stop_deadline.h"
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
    int (*test)(MPI_Request *, int *, MPI_Status *);
    int (*barrier)(MPI_Comm);
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*comm_dup)(MPI_Comm, MPI_Comm *);
    int (*comm_size)(MPI_Comm, int *);
    int (*comm_rank)(MPI_Comm, int *);
};

struct shim_mpi_handles {
    MPI_Comm world;
    MPI_Datatype float_type;
    MPI_Datatype double_type;
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

#define SHIM_RESOLVE(field, name) pmpi.field = (__typeof__(pmpi.field))dlsym(RTLD_NEXT, name)

static void shim_mpi_resolve_once(void)
{
    SHIM_RESOLVE(init, "PMPI_Init");
    SHIM_RESOLVE(init_thread, "PMPI_Init_thread");
    SHIM_RESOLVE(finalize, "PMPI_Finalize");
    SHIM_RESOLVE(finalized, "PMPI_Finalized");
    SHIM_RESOLVE(allreduce, "PMPI_Allreduce");
    SHIM_RESOLVE(iallreduce, "PMPI_Iallreduce");
    SHIM_RESOLVE(wait, "PMPI_Wait");
    SHIM_RESOLVE(waitall, "PMPI_Waitall");
    SHIM_RESOLVE(test, "PMPI_Test");
    SHIM_RESOLVE(barrier, "PMPI_Barrier");
    SHIM_RESOLVE(bcast, "PMPI_Bcast");
    SHIM_RESOLVE(comm_dup, "PMPI_Comm_dup");
    SHIM_RESOLVE(comm_size, "PMPI_Comm_size");
    SHIM_RESOLVE(comm_rank, "PMPI_Comm_rank");
    handles.world = (MPI_Comm)dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    handles.float_type = (MPI_Datatype)dlsym(RTLD_DEFAULT, "ompi_mpi_float");
    handles.double_type = (MPI_Datatype)dlsym(RTLD_DEFAULT, "ompi_mpi_double");
    handles.sum = (MPI_Op)dlsym(RTLD_DEFAULT, "ompi_mpi_op_sum");
    handles.request_null = (MPI_Request)dlsym(RTLD_DEFAULT, "ompi_request_null");
}

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
    return pmpi.iallreduce(send, receive, count, handles.double_type, handles.sum,
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
    pmpi.finalize();
}

static void shim_mpi_after_init(void)
{
    if (!shim_configured())
        return;
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

SHIM_EXPORT int MPI_Init(int *argc, char ***argv)
{
    shim_mpi_resolve();
    int result = pmpi.init(argc, argv);
    if (result == MPI_SUCCESS)
        shim_mpi_after_init();
    return result;
}

SHIM_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    shim_mpi_resolve();
    int result = pmpi.init_thread(argc, argv, required, provided);
    if (result == MPI_SUCCESS)
        shim_mpi_after_init();
    return result;
}

SHIM_EXPORT int MPI_Finalize(void)
{
    shim_mpi_resolve();
    if (shim_mpi_up && !shim_mpi_finalized) {
        shim_guard_enter();
        if (shim_monitor.in_step)
            shim_guard_leave(), shim_steps_boundary(), shim_guard_enter();
        shim_steps_drain_last_step();
        shim_steps_finish("MPI_Finalize");
        shim_mpi_finalized = true;
        shim_guard_leave();
    }
    return pmpi.finalize();
}

/* --- gradients ------------------------------------------------------------------ */

static bool shim_is_gradient(const void *send, int count, MPI_Datatype type, MPI_Op op)
{
    (void)send;
    return op == handles.sum && (type == handles.float_type || type == handles.double_type) &&
           count >= 0 && (uint64_t)count >= shim_session.config.grad_min;
}

static double shim_squared_norm(const void *buffer, int count, MPI_Datatype type)
{
    if (type == handles.float_type)
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

/* K = 1: the difference estimator needs the previous step's gradient.  One
 * copy per gradient piece of a step is kept (pieces come in the same order
 * and sizes every step); |(a + b)/2|^2 is computed while both are at hand. */
#define SHIM_PIECES_KEPT 64
struct shim_previous_piece {
    void *data;
    int count;
    MPI_Datatype type;
    uint64_t step;               /* the step it was copied in */
};
static struct shim_previous_piece shim_previous_pieces[SHIM_PIECES_KEPT];

static void shim_single_replica_pair(const void *gradient, int count, MPI_Datatype type)
{
    uint64_t index = shim_monitor.gradient_pieces;  /* this piece, not counted yet */
    if (index >= SHIM_PIECES_KEPT) {
        step_monitor_gradient_pair(&shim_monitor, 0, false);
        return;
    }
    struct shim_previous_piece *previous = &shim_previous_pieces[index];
    size_t element = type == handles.float_type ? sizeof(float) : sizeof(double);
    uint64_t step = shim_monitor.boundaries + 1;
    bool valid = previous->data != NULL && previous->count == count &&
                 previous->type == type && previous->step + 1 == step;
    double mean_sqr = 0;
    if (valid) {
        for (int i = 0; i < count; i++) {
            double a, b;
            if (type == handles.float_type) {
                a = ((const float *)previous->data)[i];
                b = ((const float *)gradient)[i];
            } else {
                a = ((const double *)previous->data)[i];
                b = ((const double *)gradient)[i];
            }
            mean_sqr += (a + b) * (a + b) * 0.25;
        }
    }
    step_monitor_gradient_pair(&shim_monitor, mean_sqr, valid);
    if (previous->count != count || previous->type != type || previous->data == NULL) {
        void *grown = realloc(previous->data, (size_t)count * element);
        if (grown == NULL)
            return;
        previous->data = grown;
        previous->count = count;
        previous->type = type;
    }
    memcpy(previous->data, gradient, (size_t)count * element);
    previous->step = step;
}

SHIM_EXPORT int MPI_Allreduce(const void *send, void *receive, int count, MPI_Datatype type,
                              MPI_Op op, MPI_Comm communicator)
{
    shim_mpi_resolve();
    if (!shim_mpi_watching())
        return pmpi.allreduce(send, receive, count, type, op, communicator);
    if (!shim_is_gradient(send, count, type, op)) {
        shim_other_collective(communicator);
        return pmpi.allreduce(send, receive, count, type, op, communicator);
    }
    /* with MPI_IN_PLACE the input is in the receive buffer and is overwritten */
    const void *input = send == MPI_IN_PLACE ? receive : send;
    bool measuring = step_monitor_measuring(&shim_monitor);
    double before = log_monotonic_seconds();
    double local_sqr = measuring ? shim_squared_norm(input, count, type) : 0;
    double started = log_monotonic_seconds();
    int result = pmpi.allreduce(send, receive, count, type, op, communicator);
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

/* Outstanding gradient Iallreduces, completed by Wait/Waitall/Test. */
struct shim_pending_gradient {
    MPI_Request request;
    MPI_Comm communicator;
    void *receive;
    int count;
    MPI_Datatype type;
    double local_sqr;
    double started;
    bool measuring;
    double norm_seconds;
};
#define SHIM_PENDING_MAX 256
static struct shim_pending_gradient shim_pending[SHIM_PENDING_MAX];
static int shim_pending_count;
static pthread_mutex_t shim_pending_lock = PTHREAD_MUTEX_INITIALIZER;

SHIM_EXPORT int MPI_Iallreduce(const void *send, void *receive, int count, MPI_Datatype type,
                               MPI_Op op, MPI_Comm communicator, MPI_Request *request)
{
    shim_mpi_resolve();
    if (!shim_mpi_watching())
        return pmpi.iallreduce(send, receive, count, type, op, communicator, request);
    if (!shim_is_gradient(send, count, type, op)) {
        shim_other_collective(communicator);
        return pmpi.iallreduce(send, receive, count, type, op, communicator, request);
    }
    const void *input = send == MPI_IN_PLACE ? receive : send;
    bool measuring = step_monitor_measuring(&shim_monitor);
    double before = log_monotonic_seconds();
    double local_sqr = measuring ? shim_squared_norm(input, count, type) : 0;
    double started = log_monotonic_seconds();
    int result = pmpi.iallreduce(send, receive, count, type, op, communicator, request);
    if (result == MPI_SUCCESS) {
        pthread_mutex_lock(&shim_pending_lock);
        if (shim_pending_count < SHIM_PENDING_MAX)
            shim_pending[shim_pending_count++] = (struct shim_pending_gradient){
                .request = *request, .communicator = communicator, .receive = receive,
                .count = count, .type = type, .local_sqr = local_sqr, .started = started,
                .measuring = measuring, .norm_seconds = started - before};
        pthread_mutex_unlock(&shim_pending_lock);
    }
    return result;
}

/* A request completed: if it was a gradient, account for it. */
static void shim_request_completed(MPI_Request request)
{
    if (shim_pending_count == 0 || request == handles.request_null)
        return;
    struct shim_pending_gradient done;
    bool found = false;
    pthread_mutex_lock(&shim_pending_lock);
    for (int i = 0; i < shim_pending_count; i++) {
        if (shim_pending[i].request != request)
            continue;
        done = shim_pending[i];
        shim_pending[i] = shim_pending[--shim_pending_count];
        found = true;
        break;
    }
    pthread_mutex_unlock(&shim_pending_lock);
    if (!found)
        return;
    double replicas = (double)shim_communicator_size(done.communicator);
    double completed = log_monotonic_seconds();
    double total_sqr = done.measuring ? shim_squared_norm(done.receive, done.count, done.type) /
                                            (replicas * replicas)
                                      : 0;
    if (done.measuring && replicas == 1)
        shim_single_replica_pair(done.receive, done.count, done.type);
    double norm_seconds = done.norm_seconds + (log_monotonic_seconds() - completed);
    step_monitor_gradient(&shim_monitor, done.communicator, done.local_sqr, total_sqr,
                          completed - done.started, norm_seconds);
}

SHIM_EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    shim_mpi_resolve();
    MPI_Request before = request ? *request : NULL;
    int result = pmpi.wait(request, status);
    if (result == MPI_SUCCESS && shim_mpi_watching())
        shim_request_completed(before);
    return result;
}

SHIM_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    shim_mpi_resolve();
    MPI_Request before[64];
    int remembered = count < 64 ? count : 64;
    for (int i = 0; i < remembered; i++)
        before[i] = requests[i];
    int result = pmpi.waitall(count, requests, statuses);
    if (result == MPI_SUCCESS && shim_mpi_watching())
        for (int i = 0; i < remembered; i++)
            shim_request_completed(before[i]);
    return result;
}

SHIM_EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    shim_mpi_resolve();
    MPI_Request before = request ? *request : NULL;
    int result = pmpi.test(request, flag, status);
    if (result == MPI_SUCCESS && *flag && shim_mpi_watching())
        shim_request_completed(before);
    return result;
}

SHIM_EXPORT int MPI_Barrier(MPI_Comm communicator)
{
    shim_mpi_resolve();
    if (shim_mpi_watching())
        shim_other_collective(communicator);
    return pmpi.barrier(communicator);
}

SHIM_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype type, int root,
                          MPI_Comm communicator)
{
    shim_mpi_resolve();
    if (shim_mpi_watching())
        shim_other_collective(communicator);
    return pmpi.bcast(buffer, count, type, root, communicator);
}

/* A train-batch read on the thread that runs MPI ends a step in progress. */
bool shim_mpi_on_mpi_thread(void)
{
    return shim_mpi_up && pthread_equal(pthread_self(), shim_mpi_thread);
}
