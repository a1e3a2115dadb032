/* mpi.c - the MPI entry points that start and end MPI and the blocking
 * collectives (adaptshim(7) "MPI"): MPI_Init(_thread), MPI_Finalize, MPI_Allreduce
 * (a gradient, or a step-ending collective), MPI_Barrier and MPI_Bcast (as
 * step-ending collectives), each calling its PMPI_ twin and defined under
 * both names.  MPI_Iallreduce and the calls that complete or free its
 * requests are mpi_requests.c's; finding the MPI library is
 * mpi_library.c's. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "ending.h"
#include "log.h"
#include "mpi_collective.h"
#include "mpi_library.h"
#include "previous_gradients.h"
#include "shim.h"
#include "state_sharing.h"
#include "steps.h"
#include "stop_deadline.h"
#include "sysio.h"
#include "vector_norm.h"

static MPI_Comm shim_communicator;     /* the shim's own duplicate of the world */
static MPI_Request shim_reduction_request;
static bool shim_mpi_up;
static bool shim_mpi_finalized;
static pthread_t shim_mpi_thread;

bool shim_mpi_watching(void)
{
    if (shim_state == SHIM_STATE_UNINITIALIZED)
        shim_ensure_initialized();
    return shim_mpi_up && shim_configured() && !shim_guarded() && !shim_frozen();
}

/* --- the piggy-backed reduction's transport ---------------------------------- */

static int shim_reduction_post(void *context, const double *send, double *receive, int count)
{
    (void)context;
    return pmpi.iallreduce(send, receive, count, predefined.double_types[0], predefined.sum,
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
    /* the trainer's atexit handlers run next, MPI gone (freeze.c) */
    shim_freeze("MPI_Finalize, before the stop's exit");
}

/* The sequence of the trainer's collectives, which makes the steps
 * (runtime/collective_cycle.h).  Touched by the thread that runs MPI. */
static struct collective_cycle shim_collective_cycle;

/* Several replicas with a state directory: every one of them must see it
 * (on several hosts, a shared file system).  One that does not ends the
 * job at start-up: rank 0 says so in one line, and every rank exits with
 * status 2 (a configuration error, which the wrapper does not retry). */
static void shim_mpi_check_state_shared(int rank, int size)
{
    const char *directory = shim_session.config.checkpoint_path;
    if (directory == NULL || size < 2)
        return;
    char host[256] = "?";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    char message[1024], error[256];
    int verdict = state_sharing_check(directory, (unsigned)rank, host, 0, message,
                                      sizeof message, error, sizeof error);
    if (verdict < 0) {
        log_warn("whether every host sees the state directory is not checked: %s", error);
    } else if (verdict == STATE_SHARING_UNKNOWN) {
        if (rank == 0)
            log_warn("%s", message);
    } else if (verdict == STATE_SHARING_NOT_SHARED) {
        /* the line first: once a rank has exited with 2, mpirun kills the
         * others, and MPI_Finalize holds every rank until all entered it */
        if (rank == 0) {
            char line[1200];
            int length = snprintf(line, sizeof line, "adaptshim: %s\n", message);
            if (length > 0)
                sysio_write_all(STDERR_FILENO, line,
                                length < (int)sizeof line ? (size_t)length : sizeof line - 1);
        }
        shim_mpi_collective_remove();
        PMPI(finalize, "Finalize")();
        _exit(2);
    } else {
        log_debug("every rank sees the state directory %s", directory);
    }
}

static void shim_mpi_after_init(void)
{
    /* in every process, so that the cooperative API answers as MPI's world
     * also without ADAPTDL_* variables (cooperative_host.c) */
    shim_mpi_collective_install();
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
    collective_cycle_init(&shim_collective_cycle, shim_session.config.grad_min,
                          shim_session.config.grad_min_given);
    int size = 1, rank = 0;
    pmpi.comm_size(predefined.world, &size);
    pmpi.comm_rank(predefined.world, &rank);
    if (pmpi.comm_dup(predefined.world, &shim_communicator) != MPI_SUCCESS) {
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
    shim_mpi_check_state_shared(rank, size);
    shim_deadline_start_worker();
    shim_ending_finalize_mpi = shim_mpi_finalize_for_stop;
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
        shim_ending_finish("MPI_Finalize");
        shim_mpi_finalized = true;
        shim_mpi_collective_remove();
        shim_guard_leave();
    }
    shim_mpi_collective_remove();   /* a process without ADAPTDL_* variables had it too */
    int result = PMPI(finalize, "Finalize")();
    /* MPI is gone: whatever reads files from now on (an MPI library's event
     * thread, the trainer's atexit handlers) gets the real functions */
    shim_freeze("MPI_Finalize");
    return result;
}

/* --- gradients ------------------------------------------------------------------ */

/* Bytes per element of a datatype a gradient may have, 0 for any other. */
static size_t shim_gradient_element_size(MPI_Datatype type)
{
    for (int i = 0; i < SHIM_MPI_GRADIENT_TYPE_NAMES; i++) {
        if (predefined.float_types[i] != NULL && type == predefined.float_types[i])
            return sizeof(float);
        if (predefined.double_types[i] != NULL && type == predefined.double_types[i])
            return sizeof(double);
    }
    return 0;
}

static double shim_squared_norm(const void *buffer, int count, MPI_Datatype type)
{
    if (shim_gradient_element_size(type) == sizeof(float))
        return squared_norm_float(buffer, (size_t)count);
    return squared_norm_double(buffer, (size_t)count);
}

static enum collective_element shim_collective_element(MPI_Datatype type)
{
    size_t size = shim_gradient_element_size(type);
    return size == sizeof(float)    ? COLLECTIVE_ELEMENT_FLOAT
           : size == sizeof(double) ? COLLECTIVE_ELEMENT_DOUBLE
                                    : COLLECTIVE_ELEMENT_OTHER;
}

bool shim_mpi_collective(enum collective_kind kind, int count, MPI_Datatype type, MPI_Op op,
                         MPI_Comm communicator)
{
    struct collective_call call = {.kind = kind,
                                   .element = shim_collective_element(type),
                                   .sum = op != NULL && op == predefined.sum,
                                   .count = count};
    double now = log_monotonic_seconds();
    struct collective_verdict verdict =
        collective_cycle_observe(&shim_collective_cycle, &call, now);
    if (verdict.boundary == COLLECTIVE_BOUNDARY_BEFORE)
        shim_steps_boundary();
    else if (verdict.boundary == COLLECTIVE_ENDS_GRADIENT_RUN &&
             step_monitor_ends_step(&shim_monitor, communicator))
        shim_steps_boundary();
    char message[512];
    if (collective_cycle_missing_gradient(&shim_collective_cycle, now, message, sizeof message))
        log_warn("%s", message);
    return verdict.gradient;
}

bool shim_mpi_collective_cycle_locked(void)
{
    return collective_cycle_makes_boundaries(&shim_collective_cycle);
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

struct gradient_start shim_mpi_gradient_starting(const void *input, int count,
                                                 MPI_Datatype type)
{
    struct gradient_start start = {.measuring = step_monitor_measuring(&shim_monitor)};
    double before = log_monotonic_seconds();
    start.local_sqr = start.measuring ? shim_squared_norm(input, count, type) : 0;
    start.started = log_monotonic_seconds();
    start.norm_seconds = start.started - before;
    return start;
}

void shim_mpi_gradient_reduced(const struct gradient_start *start, MPI_Comm communicator,
                               const void *reduced, int count, MPI_Datatype type)
{
    double finished = log_monotonic_seconds();
    int size = 1;
    pmpi.comm_size(communicator, &size);
    double replicas = (double)size;
    double total_sqr = start->measuring
                           ? shim_squared_norm(reduced, count, type) / (replicas * replicas)
                           : 0;
    if (start->measuring && size == 1)
        shim_single_replica_pair(reduced, count, type);
    double norm_seconds = start->norm_seconds + (log_monotonic_seconds() - finished);
    step_monitor_gradient(&shim_monitor, communicator, start->local_sqr, total_sqr,
                          finished - start->started, norm_seconds);
    shim_steps_note_training();
    log_trace("gradient all-reduce: %d elements, |local|^2 %g, |mean|^2 %g, %.6f s", count,
              start->local_sqr, total_sqr, finished - start->started);
}

static int shim_mpi_allreduce(const void *send, void *receive, int count, MPI_Datatype type,
                              MPI_Op op, MPI_Comm communicator)
{
    shim_mpi_resolve();
    int (*real_allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm) =
        PMPI(allreduce, "Allreduce");
    if (!shim_mpi_watching())
        return real_allreduce(send, receive, count, type, op, communicator);
    if (!shim_mpi_collective(COLLECTIVE_ALLREDUCE, count, type, op, communicator))
        return real_allreduce(send, receive, count, type, op, communicator);
    /* with MPI_IN_PLACE the input is in the receive buffer and is overwritten */
    const void *input = send == MPI_IN_PLACE ? receive : send;
    struct gradient_start start = shim_mpi_gradient_starting(input, count, type);
    int result = real_allreduce(send, receive, count, type, op, communicator);
    if (result == MPI_SUCCESS)
        shim_mpi_gradient_reduced(&start, communicator, receive, count, type);
    return result;
}

static int shim_mpi_barrier(MPI_Comm communicator)
{
    shim_mpi_resolve();
    int (*real_barrier)(MPI_Comm) = PMPI(barrier, "Barrier");
    if (shim_mpi_watching())
        shim_mpi_collective(COLLECTIVE_BARRIER, 0, NULL, NULL, communicator);
    return real_barrier(communicator);
}

static int shim_mpi_bcast(void *buffer, int count, MPI_Datatype type, int root,
                          MPI_Comm communicator)
{
    shim_mpi_resolve();
    int (*real_bcast)(void *, int, MPI_Datatype, int, MPI_Comm) = PMPI(bcast, "Bcast");
    if (shim_mpi_watching())
        shim_mpi_collective(COLLECTIVE_BROADCAST, count, type, NULL, communicator);
    return real_bcast(buffer, count, type, root, communicator);
}

/* --- the entry points, under both names ----------------------------------------- */

SHIM_MPI_ENTRY(Init, shim_mpi_init, (int *argc, char ***argv), (argc, argv))
SHIM_MPI_ENTRY(Init_thread, shim_mpi_init_thread,
               (int *argc, char ***argv, int required, int *provided),
               (argc, argv, required, provided))
SHIM_MPI_ENTRY(Finalize, shim_mpi_finalize, (void), ())
SHIM_MPI_ENTRY(Allreduce, shim_mpi_allreduce,
               (const void *send, void *receive, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm communicator),
               (send, receive, count, type, op, communicator))
SHIM_MPI_ENTRY(Barrier, shim_mpi_barrier, (MPI_Comm communicator), (communicator))
SHIM_MPI_ENTRY(Bcast, shim_mpi_bcast,
               (void *buffer, int count, MPI_Datatype type, int root, MPI_Comm communicator),
               (buffer, count, type, root, communicator))

/* A train-batch read on the thread that runs MPI ends a step in progress. */
bool shim_mpi_on_mpi_thread(void)
{
    return shim_mpi_up && pthread_equal(pthread_self(), shim_mpi_thread);
}
