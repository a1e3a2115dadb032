/* fuzz_cooperative_api.c - libFuzzer target: call sequences of the
 * cooperative API at the runtime level (runtime/cooperative_state.h and the
 * data loops, epoch loop and accumulators it holds), as shim/cooperative_api.c
 * makes them: loops created, autoscaled, begun, asked for batches, left and
 * destroyed; the epoch loop begun, advanced and left; accumulators created
 * (with initial values or not), added to, set, read, cleared, synchronized
 * and destroyed; state registered as buffers and save/load callbacks;
 * snapshots captured, encoded, decoded and restored, in place (a load at any
 * point) or into a fresh process (a restart).
 *
 * The first byte picks the job: one replica; two replicas as two threads of
 * this process running the same sequence with an in-process all-gather (so
 * their collectives must match, call for call); or one process told it is
 * one of two replicas with no world to reach them (every collective must be
 * refused).  Each further three bytes are one call and its two arguments.
 *
 * Whatever the sequence: no crash, no leak, no hang (a replica that waits
 * in a collective the other never enters aborts after FUZZ_WAIT_SECONDS),
 * every refusal is one non-empty line, and a refused epoch call changes
 * nothing. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cooperative_state.h"
#include "log.h"
#include "replica_collective.h"
#include "snapshot_check.h"
#include "state_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
    FUZZ_LOOPS = 4,
    FUZZ_ACCUMULATORS = 4,
    FUZZ_REGISTERED = 3,
    FUZZ_INDICES = 16,
    FUZZ_MAX_REPLICAS = 2,
    FUZZ_WAIT_SECONDS = 20,
};

/* --- refusals ----------------------------------------------------------------- */

/* A refusal must say what was wrong, in one line. */
static void fuzz_check_refusal(const char *error)
{
    if (error[0] == '\0' || strchr(error, '\n') != NULL) {
        fprintf(stderr, "fuzz_cooperative_api: a refusal without a one-line message: \"%s\"\n",
                error);
        abort();
    }
}

static void fuzz_check_status(int status, const char *error)
{
    if (status != 0)
        fuzz_check_refusal(error);
}

/* --- two replicas in one process ------------------------------------------------ */

/* A reusable two-phase exchange: every replica posts its bytes, all copy
 * everyone's, then all leave.  A wait past FUZZ_WAIT_SECONDS means one
 * replica entered a collective the other never will: the hang the target
 * exists to find, turned into a crash with a message. */
struct fuzz_exchange {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    unsigned replicas, arrived, generation;
    const void *bytes[FUZZ_MAX_REPLICAS];
    size_t sizes[FUZZ_MAX_REPLICAS];
};

static struct fuzz_exchange fuzz_exchange = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .changed = PTHREAD_COND_INITIALIZER,
};
static __thread unsigned fuzz_thread_rank;

static void fuzz_exchange_wait(struct fuzz_exchange *exchange)
{
    pthread_mutex_lock(&exchange->lock);
    unsigned generation = exchange->generation;
    if (++exchange->arrived == exchange->replicas) {
        exchange->arrived = 0;
        exchange->generation++;
        pthread_cond_broadcast(&exchange->changed);
    } else {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += FUZZ_WAIT_SECONDS;
        while (generation == exchange->generation) {
            if (pthread_cond_timedwait(&exchange->changed, &exchange->lock, &deadline) ==
                ETIMEDOUT) {
                fprintf(stderr, "fuzz_cooperative_api: replica %u waited %d s in a collective "
                                "the other replica never entered\n",
                        fuzz_thread_rank, FUZZ_WAIT_SECONDS);
                abort();
            }
        }
    }
    pthread_mutex_unlock(&exchange->lock);
}

static int fuzz_threads_allgather(void *context, const void *bytes, size_t size,
                                  struct replica_gathered *gathered, char *error,
                                  size_t error_size)
{
    struct fuzz_exchange *exchange = context;
    unsigned rank = fuzz_thread_rank;
    exchange->bytes[rank] = bytes;
    exchange->sizes[rank] = size;
    fuzz_exchange_wait(exchange);   /* everyone has posted */
    gathered->replicas = exchange->replicas;
    gathered->rank = rank;
    gathered->parts = calloc(exchange->replicas, sizeof *gathered->parts);
    gathered->sizes = calloc(exchange->replicas, sizeof *gathered->sizes);
    bool complete = gathered->parts != NULL && gathered->sizes != NULL;
    for (unsigned r = 0; complete && r < exchange->replicas; r++) {
        gathered->parts[r] = malloc(exchange->sizes[r] ? exchange->sizes[r] : 1);
        complete = gathered->parts[r] != NULL;
        if (complete) {
            memcpy(gathered->parts[r], exchange->bytes[r], exchange->sizes[r]);
            gathered->sizes[r] = exchange->sizes[r];
        }
    }
    fuzz_exchange_wait(exchange);   /* everyone has copied */
    if (!complete) {
        replica_gathered_free(gathered);
        snprintf(error, error_size, "out of memory gathering in the fuzz target");
        return -1;
    }
    return 0;
}

/* --- one replica's process ---------------------------------------------------------- */

struct fuzz_owned_bytes {
    char text[24];
    unsigned saves;
};

struct fuzz_process {
    unsigned rank, replicas;
    struct cooperative_state state;
    struct data_loop *loops[FUZZ_LOOPS];
    struct accumulator *accumulators[FUZZ_ACCUMULATORS];
    double buffers[FUZZ_REGISTERED][4];
    struct fuzz_owned_bytes owned[FUZZ_REGISTERED];
    char error[512];
};

/* AdaptDL's _sync_local_bsz with adaptation on, as the API does it: rank
 * 0's proposal, agreed on by every replica (a collective), else the plain
 * share. */
static uint64_t fuzz_choose_local_batch(void *context, const struct data_loop *loop)
{
    (void)context;
    uint64_t plain = (loop->batch_size + loop->replicas - 1) / loop->replicas;
    if (loop->max_batch_size == 0)
        return plain;
    uint64_t proposal = plain + loop->current_index % 3;
    uint64_t agreed = plain;
    char error[256] = "";
    if (replica_collective_agree_u64(proposal, 0, &agreed, error, sizeof error) != 0) {
        fuzz_check_refusal(error);
        agreed = plain;
    }
    return agreed > 0 ? agreed : 1;
}

static double fuzz_progress(void *context)
{
    return ((const struct fuzz_process *)context)->state.progress;
}

static void fuzz_process_start(struct fuzz_process *process)
{
    cooperative_state_init(&process->state);
    process->state.loops.choose_local_batch = fuzz_choose_local_batch;
    process->state.loops.progress = fuzz_progress;
    process->state.loops.context = process;
}

static void fuzz_destroy_loop(struct fuzz_process *process, unsigned which)
{
    struct data_loop *loop = process->loops[which];
    if (loop == NULL)
        return;
    data_loop_leave(&process->state.loops, loop);
    cooperative_state_remove_loop(&process->state, loop);
    data_loop_free(loop);
    free(loop);
    process->loops[which] = NULL;
}

static void fuzz_destroy_accumulator(struct fuzz_process *process, unsigned which)
{
    struct accumulator *accumulator = process->accumulators[which];
    if (accumulator == NULL)
        return;
    cooperative_state_remove_accumulator(&process->state, accumulator);
    accumulator_free(accumulator);
    free(accumulator);
    process->accumulators[which] = NULL;
}

/* The process ends: every object destroyed, its state freed. */
static void fuzz_process_end(struct fuzz_process *process)
{
    for (unsigned i = 0; i < FUZZ_LOOPS; i++)
        fuzz_destroy_loop(process, i);
    for (unsigned i = 0; i < FUZZ_ACCUMULATORS; i++)
        fuzz_destroy_accumulator(process, i);
    cooperative_state_free(&process->state);
}

/* --- the calls -------------------------------------------------------------------- */

static const char *const fuzz_keys[] = {"loss", "count", "", "a-rather-long-key-name"};
static const char *const fuzz_names[FUZZ_REGISTERED] = {"weights", "optimizer", "broken"};

static void fuzz_create_loop(struct fuzz_process *process, uint8_t a, uint8_t b)
{
    unsigned which = a % FUZZ_LOOPS;
    if (process->loops[which] != NULL)
        return;
    struct data_loop *loop = calloc(1, sizeof *loop);
    if (loop == NULL)
        return;
    uint64_t records = a / FUZZ_LOOPS % 40;          /* 0 is refused */
    uint64_t batch = b % 13;                          /* 0 is refused */
    process->error[0] = '\0';
    if (data_loop_create(&process->state.loops, loop,
                         epoch_loop_current(&process->state.epochs), records, batch, b & 0x80,
                         7, process->error, sizeof process->error) != 0 ||
        cooperative_state_add_loop(&process->state, loop, process->error,
                                   sizeof process->error) != 0) {
        fuzz_check_refusal(process->error);
        data_loop_free(loop);
        free(loop);
        return;
    }
    process->loops[which] = loop;
}

/* After a batch of a training loop: AdaptDL's progress grows by the
 * global batch over the initial one (efficiency 1), as the API counts it. */
static void fuzz_count_progress(struct fuzz_process *process, const struct data_loop *loop)
{
    if (loop->batch_in_hand && process->state.loops.current == loop && loop->batch_size > 0)
        process->state.progress +=
            (double)(loop->local_batch * loop->replicas) / (double)loop->batch_size;
}

static void fuzz_loop_call(struct fuzz_process *process, unsigned call, uint8_t a, uint8_t b)
{
    struct data_loop *loop = process->loops[a % FUZZ_LOOPS];
    if (loop == NULL)
        return;
    process->error[0] = '\0';
    int status = 0;
    switch (call) {
    case 0: {
        int64_t max = (int64_t)loop->batch_size + b % 24 - 4;   /* below the batch too */
        status = data_loop_autoscale(loop, max > 0 ? (uint64_t)max : 0, process->error,
                                     sizeof process->error);
        break;
    }
    case 1: {
        bool skipped;
        status = data_loop_begin(&process->state.loops, loop,
                                 epoch_loop_current(&process->state.epochs), process->replicas,
                                 process->rank, &skipped, process->error,
                                 sizeof process->error);
        break;
    }
    case 2: {
        uint64_t indices[FUZZ_INDICES];
        size_t capacity = b % (FUZZ_INDICES + 1);
        fuzz_count_progress(process, loop);
        long count = data_loop_next_batch(&process->state.loops, loop, indices, capacity,
                                          process->error, sizeof process->error);
        if (count > (long)capacity)
            abort();
        for (long i = 0; i < count; i++)
            if (indices[i] >= loop->records)
                abort();
        status = count < 0 ? -1 : 0;
        break;
    }
    case 3:
        data_loop_leave(&process->state.loops, loop);
        break;
    default:
        fuzz_destroy_loop(process, a % FUZZ_LOOPS);
        break;
    }
    fuzz_check_status(status, process->error);
}

static bool fuzz_same_epochs(const struct epoch_loop *one, const struct epoch_loop *other)
{
    return one->finished == other->finished && one->current == other->current &&
           one->end == other->end && one->running == other->running &&
           one->begun == other->begun;
}

/* A refused epoch call changes nothing. */
static void fuzz_epoch_call(struct fuzz_process *process, unsigned call, uint8_t a)
{
    struct epoch_loop before = process->state.epochs;
    process->error[0] = '\0';
    int64_t result;
    switch (call) {
    case 0:
        result = cooperative_state_begin_epochs(&process->state, a % 7, process->error,
                                                sizeof process->error);
        break;
    case 1:
        result = cooperative_state_next_epoch(&process->state, process->error,
                                              sizeof process->error);
        break;
    default:
        result = cooperative_state_leave_epochs(&process->state, process->error,
                                                sizeof process->error) == 0
                     ? 0
                     : EPOCH_LOOP_ERROR;
        break;
    }
    if (result == EPOCH_LOOP_ERROR) {
        fuzz_check_refusal(process->error);
        if (!fuzz_same_epochs(&before, &process->state.epochs)) {
            fprintf(stderr, "fuzz_cooperative_api: a refused epoch call changed the epochs\n");
            abort();
        }
    }
}

/* As adaptdl_accumulator_create(_with_values): refused inside an iteration,
 * named per epoch, initial values before it is tracked. */
static void fuzz_create_accumulator(struct fuzz_process *process, uint8_t a, uint8_t b)
{
    unsigned which = a % FUZZ_ACCUMULATORS;
    if (process->accumulators[which] != NULL || process->state.loops.current != NULL)
        return;
    uint64_t count;
    int64_t epoch = epoch_loop_current(&process->state.epochs);
    struct accumulator *accumulator = calloc(1, sizeof *accumulator);
    if (accumulator == NULL ||
        epoch_counters_take(&process->state.loops.accumulators_created, epoch, &count) != 0) {
        free(accumulator);
        return;
    }
    accumulator_init(accumulator, epoch, (unsigned)count);
    process->error[0] = '\0';
    int status = 0;
    for (unsigned i = 0; i < (b & 3u) && status == 0; i++)
        status = accumulator_set_initial(accumulator, fuzz_keys[((b >> 2) % 4 + i) % 4],
                                         (double)(b >> 4) - 3, process->error,
                                         sizeof process->error);
    if (status == 0)
        status = cooperative_state_add_accumulator(&process->state, accumulator, process->error,
                                                   sizeof process->error);
    if (status != 0) {
        fuzz_check_refusal(process->error);
        accumulator_free(accumulator);
        free(accumulator);
        return;
    }
    process->accumulators[which] = accumulator;
}

static void fuzz_accumulator_read(const struct accumulator *accumulator, const char *key)
{
    double value = 12345;
    if (!accumulator_get(accumulator, key, &value) && value != 12345)
        abort();   /* a miss leaves the value alone */
    size_t count = accumulator_size(accumulator);
    for (size_t i = 0; i < count; i++)
        if (accumulator_key(accumulator, i) == NULL)
            abort();
    if (accumulator_key(accumulator, count) != NULL)
        abort();
}

static void fuzz_accumulator_call(struct fuzz_process *process, unsigned call, uint8_t a,
                                  uint8_t b)
{
    unsigned which = a % FUZZ_ACCUMULATORS;
    struct accumulator *accumulator = process->accumulators[which];
    if (accumulator == NULL)
        return;
    /* updates in accumulation mode may differ between replicas; what a
     * synchronized block does must not, as AdaptDL requires */
    unsigned spread = accumulator->synchronized ? 0 : process->rank;
    const char *key = fuzz_keys[(b + spread) % 4];
    double value = (double)(b >> 2) - 16;
    process->error[0] = '\0';
    int status = 0;
    switch (call) {
    case 0:
        status = accumulator_add(accumulator, key, value, process->error, sizeof process->error);
        break;
    case 1:
        status = accumulator_set(accumulator, key, value, process->error, sizeof process->error);
        break;
    case 2:
        status = accumulator_remove(accumulator, b & 0x80 ? NULL : key, process->error,
                                    sizeof process->error);
        break;
    case 3:
        status = accumulator_clear(accumulator, process->error, sizeof process->error);
        break;
    case 4:
        fuzz_accumulator_read(accumulator, key);
        break;
    case 5:
        status = accumulator_synchronize(accumulator, epoch_loop_current(&process->state.epochs),
                                         process->state.loops.current != NULL, process->error,
                                         sizeof process->error);
        break;
    case 6:
        accumulator_desynchronize(accumulator);
        break;
    default:
        fuzz_destroy_accumulator(process, which);
        break;
    }
    fuzz_check_status(status, process->error);
}

/* --- registered state ----------------------------------------------------------------- */

static const char fuzz_static_bytes[] = "static state";

static int fuzz_save_static(void *context, void **bytes, size_t *size)
{
    (void)context;
    *bytes = (void *)fuzz_static_bytes;
    *size = sizeof fuzz_static_bytes;
    return 0;
}

static int fuzz_save_owned(void *context, void **bytes, size_t *size)
{
    struct fuzz_owned_bytes *owned = context;
    owned->saves++;
    snprintf(owned->text, sizeof owned->text, "save %u", owned->saves % 1000);
    *bytes = owned->text;
    *size = strlen(owned->text) + 1;
    return 0;
}

static int fuzz_save_without_pointer(void *context, void **bytes, size_t *size)
{
    (void)context;
    *bytes = NULL;
    *size = 4;
    return 0;
}

static int fuzz_save_failing(void *context, void **bytes, size_t *size)
{
    (void)context, (void)bytes, (void)size;
    return -1;
}

static int fuzz_load(void *context, const void *bytes, size_t size)
{
    (void)context;
    return size > 0 && ((const char *)bytes)[0] == 'x' ? -1 : 0;   /* refuses some */
}

static void fuzz_register(struct fuzz_process *process, uint8_t a, uint8_t b)
{
    unsigned which = a % FUZZ_REGISTERED;
    struct registered_state registered = {.name = (char *)fuzz_names[which]};
    switch (b % 5) {
    case 0:
    case 1:
        registered.buffer = process->buffers[which];
        registered.size = b % 5 == 0 ? sizeof process->buffers[which] : sizeof(double);
        break;
    case 2:
        registered.save = fuzz_save_static;
        break;
    case 3:
        registered.save = fuzz_save_owned;
        registered.context = &process->owned[which];
        break;
    default:
        registered.save = b & 0x80 ? fuzz_save_without_pointer : fuzz_save_failing;
        break;
    }
    if (registered.save != NULL)
        registered.load = fuzz_load;
    process->error[0] = '\0';
    fuzz_check_status(cooperative_state_register(&process->state, &registered, process->error,
                                                 sizeof process->error),
                      process->error);
}

/* --- checkpoints ------------------------------------------------------------------------ */

/* Rank 0's capture, encoded as a snapshot file holds it and handed to every
 * replica through the collective (as a restarted job loads one checkpoint);
 * NULL when there is none.  A collective even when the capture failed, so
 * that every replica enters it. */
static void *fuzz_shared_snapshot(struct fuzz_process *process, size_t *size)
{
    struct adaptdl_snapshot snapshot;
    memset(&snapshot, 0, sizeof snapshot);
    snapshot.version = STATE_FORMAT_VERSION;
    snapshot.replicas = process->replicas;
    snapshot.checkpoint_path = strdup("/fuzz/ck");
    void *encoded = NULL;
    size_t encoded_size = 0;
    process->error[0] = '\0';
    int captured = cooperative_state_capture(&process->state, &snapshot, process->error,
                                             sizeof process->error);
    if (captured != 0)
        fuzz_check_refusal(process->error);
    else if (snapshot.checkpoint_path == NULL ||
             snapshot_encode(&snapshot, &encoded, &encoded_size) != 0)
        encoded_size = 0;
    snapshot_free(&snapshot);
    struct replica_gathered gathered;
    char error[512] = "";
    void *shared = NULL;
    if (replica_collective_allgather(encoded ? encoded : "", encoded_size, &gathered, error,
                                     sizeof error) != 0) {
        /* refused (no world to reach the others): this replica's own file */
        fuzz_check_refusal(error);
        shared = encoded;
        *size = encoded_size;
        return shared;
    }
    if (gathered.sizes[0] > 0) {
        *size = gathered.sizes[0];
        shared = gathered.parts[0];
        gathered.parts[0] = NULL;
    }
    replica_gathered_free(&gathered);
    free(encoded);
    return shared;
}

/* A load of the checkpoint: into this process as it is (`fresh` false, a
 * load at any point), or into a fresh one (a restart) whose objects are
 * created again later. */
static void fuzz_checkpoint(struct fuzz_process *process, bool fresh)
{
    size_t size = 0;
    void *bytes = fuzz_shared_snapshot(process, &size);
    if (bytes == NULL)
        return;
    struct adaptdl_snapshot snapshot;
    char error[512] = "";
    if (snapshot_decode(bytes, size, &snapshot, error, sizeof error) != 0) {
        fuzz_check_refusal(error);
        free(bytes);
        return;
    }
    free(bytes);
    if (snapshot_check_ranges(&snapshot, error, sizeof error) != 0) {
        fuzz_check_refusal(error);
        snapshot_free(&snapshot);
        return;
    }
    if (fresh) {
        fuzz_process_end(process);
        fuzz_process_start(process);
    }
    process->error[0] = '\0';
    fuzz_check_status(cooperative_state_restore(&process->state, &snapshot, process->error,
                                                sizeof process->error),
                      process->error);
    snapshot_free(&snapshot);
}

/* --- the sequence ----------------------------------------------------------------------- */

struct fuzz_run {
    const uint8_t *calls;
    size_t size;
    unsigned replicas;
};

static void fuzz_call(struct fuzz_process *process, uint8_t opcode, uint8_t a, uint8_t b)
{
    switch (opcode % 23) {
    case 0:
        fuzz_create_loop(process, a, b);
        break;
    case 1: case 2: case 3: case 4: case 5:
        fuzz_loop_call(process, opcode % 23 - 1u, a, b);
        break;
    case 6: case 7: case 8:
        fuzz_epoch_call(process, opcode % 23 - 6u, a);
        break;
    case 9:
        fuzz_create_accumulator(process, a, b);
        break;
    case 10: case 11: case 12: case 13: case 14: case 15: case 16: case 17:
        fuzz_accumulator_call(process, opcode % 23 - 10u, a, b);
        break;
    case 18:
        fuzz_register(process, a, b);
        break;
    case 19: {
        process->error[0] = '\0';
        fuzz_check_status(cooperative_state_synchronize(&process->state, process->error,
                                                        sizeof process->error),
                          process->error);
        break;
    }
    case 20:
        fuzz_checkpoint(process, false);
        break;
    case 21:
        fuzz_checkpoint(process, true);
        break;
    default: {
        /* a capture alone, as a commit makes it */
        struct adaptdl_snapshot snapshot;
        memset(&snapshot, 0, sizeof snapshot);
        process->error[0] = '\0';
        fuzz_check_status(cooperative_state_capture(&process->state, &snapshot, process->error,
                                                    sizeof process->error),
                          process->error);
        snapshot_free(&snapshot);
        break;
    }
    }
}

static void fuzz_replica(unsigned rank, const struct fuzz_run *run)
{
    struct fuzz_process *process = calloc(1, sizeof *process);
    if (process == NULL)
        return;
    process->rank = rank;
    process->replicas = run->replicas;
    fuzz_process_start(process);
    for (size_t at = 0; at + 3 <= run->size; at += 3)
        fuzz_call(process, run->calls[at], run->calls[at + 1], run->calls[at + 2]);
    fuzz_process_end(process);
    free(process);
}

struct fuzz_thread_start {
    unsigned rank;
    const struct fuzz_run *run;
};

static void *fuzz_thread_main(void *pointer)
{
    const struct fuzz_thread_start *start = pointer;
    fuzz_thread_rank = start->rank;
    fuzz_replica(start->rank, start->run);
    return NULL;
}

static void fuzz_two_replicas(const struct fuzz_run *run)
{
    fuzz_exchange.replicas = FUZZ_MAX_REPLICAS;
    fuzz_exchange.arrived = 0;
    replica_collective.context = &fuzz_exchange;
    replica_collective.allgather = fuzz_threads_allgather;
    replica_collective_expect(0, 0);   /* the ranks differ per thread: unchecked */
    pthread_t threads[FUZZ_MAX_REPLICAS];
    struct fuzz_thread_start starts[FUZZ_MAX_REPLICAS];
    for (unsigned rank = 0; rank < FUZZ_MAX_REPLICAS; rank++) {
        starts[rank] = (struct fuzz_thread_start){.rank = rank, .run = run};
        if (pthread_create(&threads[rank], NULL, fuzz_thread_main, &starts[rank]) != 0)
            abort();
    }
    for (unsigned rank = 0; rank < FUZZ_MAX_REPLICAS; rank++)
        pthread_join(threads[rank], NULL);
    replica_collective_use_single();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool quiet;
    if (!quiet)   /* every line formatted (trace), none shown */
        quiet = log_configure(LOG_LEVEL_TRACE, "/dev/null", 0, NULL, 0) == 0;
    if (size < 1)
        return 0;
    struct fuzz_run run = {.calls = data + 1, .size = size - 1, .replicas = 1};
    switch (data[0] % 3) {
    case 0:   /* one replica */
        replica_collective_use_single();
        replica_collective_expect(1, 0);
        fuzz_replica(0, &run);
        break;
    case 1:   /* two replicas sharing a world */
        run.replicas = 2;
        fuzz_two_replicas(&run);
        break;
    default:  /* replica 1 of 2 with no world: every collective is refused */
        run.replicas = 2;
        replica_collective_use_single();
        replica_collective_expect(2, 1);
        fuzz_replica(1, &run);
        break;
    }
    replica_collective_expect(0, 0);
    return 0;
}
