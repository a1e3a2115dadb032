/* cooperative_api.c - the exported functions of adaptdl.h, translating each
 * call into the runtime's epoch loop, data loops, accumulators and
 * cooperative state under the state's lock.  Built into libadaptshim.so and
 * into the stand-in libadaptdl.so; what differs between the two is the
 * host (cooperative_host.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adaptdl.h"
#include "caller_collective.h"
#include "cooperative_host.h"
#include "log.h"
#include "replica_collective.h"
#include "sysio.h"

#define API __attribute__((visibility("default")))

struct adaptdl_loop {
    struct data_loop loop;
    bool training;
    uint64_t min_local, max_local;   /* 0: no bound */
    /* loops over a file */
    int fd;
    uint64_t record_size, header_size;
    uint64_t *scratch;               /* indices of the batch being copied */
    size_t scratch_capacity;
};

struct adaptdl_accumulator {
    struct accumulator accumulator;
};

static __thread char api_error[512];

API const char *adaptdl_last_error(void)
{
    return api_error;
}

static void api_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void api_fail(const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(api_error, sizeof api_error, format, arguments);
    va_end(arguments);
}

static struct cooperative_state *api_lock(void)
{
    struct cooperative_state *state = cooperative_host_state();
    pthread_mutex_lock(&state->lock);
    state->used = true;
    /* the layout may change when MPI comes up: each collective checks the
     * replicas it reaches against the one the trainer is told now */
    struct cooperative_job job = cooperative_host_job();
    replica_collective_expect(job.replicas, job.rank);
    return state;
}

static void api_unlock(struct cooperative_state *state)
{
    pthread_mutex_unlock(&state->lock);
}

/* --- the job ------------------------------------------------------------------ */

API unsigned adaptdl_num_replicas(void)
{
    return cooperative_host_job().replicas;
}

API unsigned adaptdl_replica_rank(void)
{
    return cooperative_host_job().rank;
}

API unsigned adaptdl_num_restarts(void)
{
    return cooperative_host_job().restarts;
}

/* --- collectives without MPI: the trainer's own all-gather -------------------- */

/* Under the lock, as the collectives that call it run. */
API int adaptdl_use_allgather(unsigned replicas, unsigned rank,
                              adaptdl_allgather_function *allgather, void *context)
{
    struct cooperative_state *state = api_lock();
    int status = caller_collective_install(replicas, rank, allgather, context, api_error,
                                           sizeof api_error);
    api_unlock(state);
    return status;
}

/* --- epochs --------------------------------------------------------------------- */

/* The documented epoch loop, `for (e = ...; e >= 0; e = adaptdl_next_epoch())`,
 * ends quietly on ADAPTDL_ERROR: a refused epoch call is logged as well, so
 * that a trainer that never reads adaptdl_last_error still learns why its
 * epochs stopped. */
static void api_log_epoch_refusal(void)
{
    log_error("%s", api_error);
}

API int64_t adaptdl_remaining_epochs_until(int64_t end)
{
    struct cooperative_state *state = api_lock();
    bool first_epoch_loop = !state->epochs.begun;
    api_unlock(state);
    /* before the loop begins: from then on a late restore is refused */
    if (first_epoch_loop)
        cooperative_host_first_epoch_loop();
    state = api_lock();
    int64_t epoch = cooperative_state_begin_epochs(state, end, api_error, sizeof api_error);
    api_unlock(state);
    if (epoch == ADAPTDL_ERROR)
        api_log_epoch_refusal();
    return epoch;
}

API int64_t adaptdl_next_epoch(void)
{
    struct cooperative_state *state = api_lock();
    int64_t epoch = cooperative_state_next_epoch(state, api_error, sizeof api_error);
    api_unlock(state);
    if (epoch == ADAPTDL_ERROR)
        api_log_epoch_refusal();
    return epoch;
}

API int adaptdl_leave_epoch_loop(void)
{
    struct cooperative_state *state = api_lock();
    int status = cooperative_state_leave_epochs(state, api_error, sizeof api_error);
    api_unlock(state);
    if (status != 0)
        api_log_epoch_refusal();
    return status;
}

/* A copy of the epoch loop, taken under the lock, for the two queries. */
static struct epoch_loop api_epochs_now(void)
{
    struct cooperative_state *state = api_lock();
    struct epoch_loop epochs = state->epochs;
    api_unlock(state);
    return epochs;
}

API int64_t adaptdl_current_epoch(void)
{
    struct epoch_loop epochs = api_epochs_now();
    return epoch_loop_current(&epochs);
}

API int64_t adaptdl_finished_epochs(void)
{
    return api_epochs_now().finished;
}

/* --- batch sizes of loops ------------------------------------------------------------ */

static uint64_t api_clamp_local(const struct adaptdl_loop *owner, uint64_t local)
{
    if (owner->min_local > 0 && local < owner->min_local)
        local = owner->min_local;
    if (owner->max_local > 0 && local > owner->max_local)
        local = owner->max_local;
    return local > 0 ? local : 1;
}

/* AdaptDL's _sync_local_bsz: without adaptation ceil(batch / K); with it,
 * rank 0's goodput choice, agreed on by every replica. */
static uint64_t api_choose_local_batch(void *context, const struct data_loop *loop)
{
    (void)context;
    const struct adaptdl_loop *owner = (const struct adaptdl_loop *)loop;
    uint64_t plain = (loop->batch_size + loop->replicas - 1) / loop->replicas;
    if (loop->max_batch_size == 0)
        return api_clamp_local(owner, plain);
    uint64_t proposal = cooperative_host_propose_local_batch(loop);
    uint64_t agreed = proposal;
    char error[256];
    if (replica_collective_agree_u64(proposal, 0, &agreed, error, sizeof error) != 0) {
        /* every replica fails the same collective: all keep the plain share */
        static bool warned;
        if (!warned)
            log_warn("%s: the replicas cannot agree on a batch size (%s): each keeps the plain "
                     "share of the batch", loop->name, error);
        warned = true;
        agreed = plain;
    }
    return api_clamp_local(owner, agreed ? agreed : plain);
}

/* AdaptDL's get_progress: the sum over training steps of the step's global
 * batch times its efficiency, in initial batches.  Callers hold the lock. */
static double api_progress(void *context)
{
    (void)context;
    return cooperative_host_state()->progress;
}

static void api_install_loop_hooks(struct cooperative_state *state)
{
    state->loops.choose_local_batch = api_choose_local_batch;
    state->loops.progress = api_progress;
}

/* --- data loops ------------------------------------------------------------------------ */

static adaptdl_loop *api_loop_new(struct cooperative_state *state, uint64_t records,
                                  uint64_t batch_size, bool shuffle)
{
    adaptdl_loop *owner = calloc(1, sizeof *owner);
    if (owner == NULL) {
        api_fail("out of memory creating a data loop");
        return NULL;
    }
    owner->fd = -1;
    api_install_loop_hooks(state);
    if (data_loop_create(&state->loops, &owner->loop, epoch_loop_current(&state->epochs),
                         records, batch_size, shuffle, cooperative_host_job().seed, api_error,
                         sizeof api_error) != 0 ||
        cooperative_state_add_loop(state, &owner->loop, api_error, sizeof api_error) != 0) {
        data_loop_free(&owner->loop);
        free(owner);
        return NULL;
    }
    return owner;
}

API adaptdl_loop *adaptdl_loop_create(uint64_t records, uint64_t batch_size, bool shuffle)
{
    struct cooperative_state *state = api_lock();
    adaptdl_loop *owner = api_loop_new(state, records, batch_size, shuffle);
    api_unlock(state);
    return owner;
}

API adaptdl_loop *adaptdl_loop_create_for_file(const char *path, uint64_t record_size,
                                               uint64_t header_size, uint64_t batch_size,
                                               bool shuffle)
{
    if (path == NULL || record_size == 0) {
        api_fail("a loop over a file needs a path and a record size of at least 1 byte");
        return NULL;
    }
    int fd = runtime_sysio.open(path, O_RDONLY | O_CLOEXEC);
    struct stat status;
    if (fd < 0 || runtime_sysio.fstat(fd, &status) != 0) {
        api_fail("loop over %s: cannot open it: %s", path, strerror(errno));
        if (fd >= 0)
            runtime_sysio.close(fd);
        return NULL;
    }
    uint64_t size = (uint64_t)status.st_size;
    if (size < header_size || (size - header_size) % record_size != 0) {
        api_fail("loop over %s: %llu bytes are not a %llu-byte header and whole records of "
                 "%llu bytes", path, (unsigned long long)size, (unsigned long long)header_size,
                 (unsigned long long)record_size);
        runtime_sysio.close(fd);
        return NULL;
    }
    struct cooperative_state *state = api_lock();
    adaptdl_loop *owner = api_loop_new(state, (size - header_size) / record_size, batch_size,
                                       shuffle);
    api_unlock(state);
    if (owner == NULL) {
        runtime_sysio.close(fd);
        return NULL;
    }
    owner->fd = fd;
    owner->record_size = record_size;
    owner->header_size = header_size;
    return owner;
}

API void adaptdl_loop_destroy(adaptdl_loop *owner)
{
    if (owner == NULL)
        return;
    adaptdl_loop_break(owner);   /* a loop destroyed while iterated is left first */
    struct cooperative_state *state = api_lock();
    cooperative_state_remove_loop(state, &owner->loop);
    api_unlock(state);
    data_loop_free(&owner->loop);
    if (owner->fd >= 0)
        runtime_sysio.close(owner->fd);
    free(owner->scratch);
    free(owner);
}

API int adaptdl_loop_train(adaptdl_loop *owner)
{
    if (owner == NULL) {
        api_fail("adaptdl_loop_train: no loop");
        return -1;
    }
    owner->training = true;
    return 0;
}

API int adaptdl_loop_autoscale(adaptdl_loop *owner, uint64_t max_batch_size, uint64_t min_local,
                               uint64_t max_local)
{
    if (owner == NULL) {
        api_fail("adaptdl_loop_autoscale: no loop");
        return -1;
    }
    const uint64_t batch = owner->loop.batch_size;
    if ((min_local > 0 && min_local > batch) || (max_local > 0 && max_local < min_local)) {
        api_fail("%s: local batch bounds %llu..%llu are not accepted: the minimum must be at "
                 "most the batch size %llu and at most the maximum (0: no bound)",
                 owner->loop.name, (unsigned long long)min_local,
                 (unsigned long long)max_local, (unsigned long long)batch);
        return -1;
    }
    struct cooperative_state *state = api_lock();
    int status = data_loop_autoscale(&owner->loop, max_batch_size, api_error, sizeof api_error);
    api_unlock(state);
    if (status != 0)
        return -1;
    owner->min_local = min_local;
    owner->max_local = max_local;
    owner->training = true;
    return 0;
}

API int adaptdl_loop_begin(adaptdl_loop *owner)
{
    if (owner == NULL) {
        api_fail("adaptdl_loop_begin: no loop");
        return -1;
    }
    struct cooperative_job job = cooperative_host_job();
    struct cooperative_state *state = api_lock();
    bool skipped = false;
    int status = data_loop_begin(&state->loops, &owner->loop,
                                 epoch_loop_current(&state->epochs), job.replicas, job.rank,
                                 &skipped, api_error, sizeof api_error);
    api_unlock(state);
    if (status != 0)
        return -1;
    return skipped ? 0 : 1;
}

API long adaptdl_loop_next(adaptdl_loop *owner, uint64_t *indices, size_t capacity)
{
    if (owner == NULL || (indices == NULL && capacity > 0)) {
        api_fail("adaptdl_loop_next: no loop or no room for indices");
        return -1;
    }
    struct cooperative_state *state = api_lock();
    bool finished_batch = owner->loop.batch_in_hand && state->loops.current == &owner->loop;
    uint64_t finished_records = owner->loop.local_batch;
    if (owner->training && finished_batch) {
        uint64_t global = finished_records * owner->loop.replicas;
        state->progress += (double)global *
                           cooperative_host_efficiency(owner->loop.batch_size, global) /
                           (double)owner->loop.batch_size;
    }
    long count = data_loop_next_batch(&state->loops, &owner->loop, indices, capacity, api_error,
                                      sizeof api_error);
    api_unlock(state);
    if (owner->training && finished_batch)
        cooperative_host_train_batch(finished_records);
    return count;
}

API long adaptdl_loop_next_records(adaptdl_loop *owner, void *buffer, size_t capacity_bytes)
{
    if (owner == NULL || owner->fd < 0) {
        api_fail("adaptdl_loop_next_records: not a loop over a file "
                 "(made by adaptdl_loop_create_for_file)");
        return -1;
    }
    size_t capacity = capacity_bytes / owner->record_size;
    if (capacity > owner->scratch_capacity) {
        uint64_t *scratch = realloc(owner->scratch, capacity * sizeof *scratch);
        if (scratch == NULL) {
            api_fail("out of memory reading a batch of %s", owner->loop.name);
            return -1;
        }
        owner->scratch = scratch;
        owner->scratch_capacity = capacity;
    }
    long count = adaptdl_loop_next(owner, owner->scratch, capacity);
    for (long i = 0; i < count; i++) {
        off_t offset = (off_t)(owner->header_size + owner->scratch[i] * owner->record_size);
        ssize_t got = sysio_pread_full(owner->fd, (char *)buffer + (size_t)i * owner->record_size,
                                       owner->record_size, offset);
        if (got != (ssize_t)owner->record_size) {
            api_fail("%s: reading record %llu failed: %s", owner->loop.name,
                     (unsigned long long)owner->scratch[i],
                     got < 0 ? strerror(errno) : "the file is shorter than at creation");
            return -1;
        }
    }
    return count;
}

API void adaptdl_loop_break(adaptdl_loop *owner)
{
    if (owner == NULL)
        return;
    struct cooperative_state *state = api_lock();
    data_loop_leave(&state->loops, &owner->loop);
    api_unlock(state);
}

/* AdaptDL's current_index is None outside the loop's iteration: 0 here
 * (a restored index waiting for the iteration is not the current one). */
API uint64_t adaptdl_loop_current_index(const adaptdl_loop *owner)
{
    if (owner == NULL)
        return 0;
    struct cooperative_state *state = api_lock();
    uint64_t index = state->loops.current == &owner->loop ? owner->loop.current_index : 0;
    api_unlock(state);
    return index;
}

API uint64_t adaptdl_loop_local_batch_size(const adaptdl_loop *owner)
{
    return owner ? owner->loop.local_batch : 0;
}

API uint64_t adaptdl_loop_global_batch_size(const adaptdl_loop *owner)
{
    return owner ? owner->loop.local_batch * owner->loop.replicas : 0;
}

API double adaptdl_loop_gain(const adaptdl_loop *owner)
{
    if (owner == NULL || owner->loop.local_batch == 0)
        return 1.0;
    return cooperative_host_gain(owner->loop.batch_size,
                                 owner->loop.local_batch * owner->loop.replicas);
}

/* --- accumulators ------------------------------------------------------------------------ */

/* The initial values of a new accumulator (AdaptDL's initial dict), given
 * before it is tracked, so that restored results replace them: 0, or -1
 * with a message. */
static int api_accumulator_initial_values(struct accumulator *accumulator,
                                          const char *const *keys, const double *values,
                                          size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (accumulator_set_initial(accumulator, keys[i], values[i], api_error,
                                    sizeof api_error) != 0)
            return -1;
    return 0;
}

/* Creates, names and tracks an accumulator under the lock; NULL with a
 * message when a loop is being iterated or on failure. */
static adaptdl_accumulator *api_accumulator_new(struct cooperative_state *state,
                                                const char *const *keys, const double *values,
                                                size_t count)
{
    if (state->loops.current != NULL) {
        api_fail("an accumulator may not be created while %s is being iterated; create it "
                 "before the loop", state->loops.current->name);
        return NULL;
    }
    adaptdl_accumulator *owner = calloc(1, sizeof *owner);
    uint64_t created;
    if (owner == NULL || epoch_counters_take(&state->loops.accumulators_created,
                                             epoch_loop_current(&state->epochs),
                                             &created) != 0) {
        free(owner);
        api_fail("out of memory creating an accumulator");
        return NULL;
    }
    accumulator_init(&owner->accumulator, epoch_loop_current(&state->epochs), (unsigned)created);
    if (api_accumulator_initial_values(&owner->accumulator, keys, values, count) != 0 ||
        cooperative_state_add_accumulator(state, &owner->accumulator, api_error,
                                          sizeof api_error) != 0) {
        /* its name is taken: the replayed code's next accumulator is named
         * after this one, as in the run before the restart */
        accumulator_free(&owner->accumulator);
        free(owner);
        return NULL;
    }
    return owner;
}

API adaptdl_accumulator *adaptdl_accumulator_create(void)
{
    struct cooperative_state *state = api_lock();
    adaptdl_accumulator *owner = api_accumulator_new(state, NULL, NULL, 0);
    api_unlock(state);
    return owner;
}

API adaptdl_accumulator *adaptdl_accumulator_create_with_values(const char *const *keys,
                                                                const double *values,
                                                                size_t count)
{
    if (count > 0 && (keys == NULL || values == NULL)) {
        api_fail("adaptdl_accumulator_create_with_values: %zu values but no %s; accepted: "
                 "arrays of count keys and values, or count 0",
                 count, keys == NULL ? "keys" : "values");
        return NULL;
    }
    struct cooperative_state *state = api_lock();
    adaptdl_accumulator *owner = api_accumulator_new(state, keys, values, count);
    api_unlock(state);
    return owner;
}

API void adaptdl_accumulator_destroy(adaptdl_accumulator *owner)
{
    if (owner == NULL)
        return;
    struct cooperative_state *state = api_lock();
    cooperative_state_remove_accumulator(state, &owner->accumulator);
    api_unlock(state);
    accumulator_free(&owner->accumulator);
    free(owner);
}

/* The calls that change an accumulator, made under the lock. */
enum api_accumulator_change {
    API_ACCUMULATOR_ADD,
    API_ACCUMULATOR_SET,
    API_ACCUMULATOR_REMOVE,
    API_ACCUMULATOR_CLEAR,
    API_ACCUMULATOR_SYNCHRONIZE,
};

/* Makes one change to `owner` under the lock (key and value where the change
 * takes them): 0, or -1 with a message, also when there is no accumulator. */
static int api_accumulator_change(adaptdl_accumulator *owner, enum api_accumulator_change change,
                                  const char *key, double value)
{
    if (owner == NULL) {
        api_fail("no accumulator");
        return -1;
    }
    struct cooperative_state *state = api_lock();
    struct accumulator *accumulator = &owner->accumulator;
    int status = -1;
    switch (change) {
    case API_ACCUMULATOR_ADD:
        status = accumulator_add(accumulator, key, value, api_error, sizeof api_error);
        break;
    case API_ACCUMULATOR_SET:
        status = accumulator_set(accumulator, key, value, api_error, sizeof api_error);
        break;
    case API_ACCUMULATOR_REMOVE:
        status = accumulator_remove(accumulator, key, api_error, sizeof api_error);
        break;
    case API_ACCUMULATOR_CLEAR:
        status = accumulator_clear(accumulator, api_error, sizeof api_error);
        break;
    case API_ACCUMULATOR_SYNCHRONIZE:
        status = accumulator_synchronize(accumulator, epoch_loop_current(&state->epochs),
                                         state->loops.current != NULL, api_error,
                                         sizeof api_error);
        break;
    }
    api_unlock(state);
    return status;
}

API int adaptdl_accumulator_add(adaptdl_accumulator *owner, const char *key, double value)
{
    return api_accumulator_change(owner, API_ACCUMULATOR_ADD, key, value);
}

API int adaptdl_accumulator_subtract(adaptdl_accumulator *owner, const char *key, double value)
{
    return api_accumulator_change(owner, API_ACCUMULATOR_ADD, key, -value);
}

API int adaptdl_accumulator_synchronize(adaptdl_accumulator *owner)
{
    return api_accumulator_change(owner, API_ACCUMULATOR_SYNCHRONIZE, NULL, 0);
}

API void adaptdl_accumulator_desynchronize(adaptdl_accumulator *owner)
{
    if (owner == NULL)
        return;
    struct cooperative_state *state = api_lock();
    accumulator_desynchronize(&owner->accumulator);
    api_unlock(state);
}

API bool adaptdl_accumulator_get(const adaptdl_accumulator *owner, const char *key, double *value)
{
    return owner != NULL && value != NULL && accumulator_get(&owner->accumulator, key, value);
}

API int adaptdl_accumulator_set(adaptdl_accumulator *owner, const char *key, double value)
{
    return api_accumulator_change(owner, API_ACCUMULATOR_SET, key, value);
}

API int adaptdl_accumulator_remove(adaptdl_accumulator *owner, const char *key)
{
    return api_accumulator_change(owner, API_ACCUMULATOR_REMOVE, key, 0);
}

API int adaptdl_accumulator_clear(adaptdl_accumulator *owner)
{
    return api_accumulator_change(owner, API_ACCUMULATOR_CLEAR, NULL, 0);
}

API size_t adaptdl_accumulator_size(const adaptdl_accumulator *owner)
{
    return owner ? accumulator_size(&owner->accumulator) : 0;
}

API const char *adaptdl_accumulator_key(const adaptdl_accumulator *owner, size_t index)
{
    return owner ? accumulator_key(&owner->accumulator, index) : NULL;
}

/* --- state ----------------------------------------------------------------------------------- */

static int api_register(const struct registered_state *registered)
{
    if (registered->name == NULL || registered->name[0] == '\0') {
        api_fail("registered state needs a name");
        return -1;
    }
    struct cooperative_state *state = api_lock();
    int status = cooperative_state_register(state, registered, api_error, sizeof api_error);
    api_unlock(state);
    return status;
}

API int adaptdl_register_buffer(const char *name, void *buffer, size_t size)
{
    if (buffer == NULL && size > 0) {
        api_fail("registered buffer \"%s\": no memory given for %zu bytes", name ? name : "",
                 size);
        return -1;
    }
    struct registered_state registered = {.name = (char *)name, .buffer = buffer, .size = size};
    return api_register(&registered);
}

API int adaptdl_register_callbacks(const char *name,
                                   int (*save)(void *context, void **bytes, size_t *size),
                                   int (*load)(void *context, const void *bytes, size_t size),
                                   void *context)
{
    if (save == NULL || load == NULL) {
        api_fail("registered state \"%s\": both a save and a load callback are needed",
                 name ? name : "");
        return -1;
    }
    struct registered_state registered = {
        .name = (char *)name, .save = save, .load = load, .context = context};
    return api_register(&registered);
}

API int adaptdl_synchronize_states(void)
{
    struct cooperative_state *state = api_lock();
    int status = cooperative_state_synchronize(state, api_error, sizeof api_error);
    api_unlock(state);
    return status;
}

/* --- gradients ------------------------------------------------------------------------------- */

API int adaptdl_report_gradient(double local_sqr, double mean_sqr, uint64_t local_batch)
{
    if (!isfinite(local_sqr) || !isfinite(mean_sqr) || local_sqr < 0 || mean_sqr < 0 ||
        local_batch == 0) {
        api_fail("adaptdl_report_gradient: squared norms must be finite and at least 0 and "
                 "the local batch at least 1 (got %g, %g, %llu)", local_sqr, mean_sqr,
                 (unsigned long long)local_batch);
        return -1;
    }
    struct cooperative_state *state = api_lock();
    const struct adaptdl_loop *current = (const struct adaptdl_loop *)state->loops.current;
    bool loop_marks_steps = current != NULL && current->training;
    api_unlock(state);
    cooperative_host_gradient(local_sqr, mean_sqr, local_batch, !loop_marks_steps);
    return 0;
}
