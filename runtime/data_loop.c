/* data_loop.c - loops with AdaptiveDataLoaderHelper semantics (see
 * data_loop.h). */
#include "data_loop.h"
#include "error_message.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* --- per-epoch counters ---------------------------------------------------------- */

void epoch_counters_free(struct epoch_counters *counters)
{
    free(counters->entries);
    counters->entries = NULL;
    counters->count = 0;
}

static struct epoch_counter *epoch_counters_find(const struct epoch_counters *counters,
                                                 int64_t epoch)
{
    for (size_t i = 0; i < counters->count; i++)
        if (counters->entries[i].epoch == epoch)
            return &counters->entries[i];
    return NULL;
}

uint64_t epoch_counters_get(const struct epoch_counters *counters, int64_t epoch)
{
    const struct epoch_counter *entry = epoch_counters_find(counters, epoch);
    return entry ? entry->count : 0;
}

int epoch_counters_take(struct epoch_counters *counters, int64_t epoch, uint64_t *before)
{
    struct epoch_counter *entry = epoch_counters_find(counters, epoch);
    if (entry == NULL) {
        struct epoch_counter *entries =
            realloc(counters->entries, (counters->count + 1) * sizeof *entries);
        if (entries == NULL)
            return -1;
        counters->entries = entries;
        entry = &entries[counters->count++];
        entry->epoch = epoch;
        entry->count = 0;
    }
    *before = entry->count++;
    return 0;
}

/* --- the registry ----------------------------------------------------------------- */

void data_loop_registry_init(struct data_loop_registry *registry)
{
    memset(registry, 0, sizeof *registry);
}

void data_loop_registry_free(struct data_loop_registry *registry)
{
    epoch_counters_free(&registry->positions);
    epoch_counters_free(&registry->loops_created);
    epoch_counters_free(&registry->accumulators_created);
    memset(registry, 0, sizeof *registry);
}

static void data_loop_format_epoch(char *text, size_t size, int64_t epoch)
{
    if (epoch < 0)
        snprintf(text, size, "None");
    else
        snprintf(text, size, "%lld", (long long)epoch);
}

int data_loop_create(struct data_loop_registry *registry, struct data_loop *loop, int64_t epoch,
                     uint64_t records, uint64_t batch_size, bool shuffle, uint64_t seed,
                     char *error, size_t error_size)
{
    memset(loop, 0, sizeof *loop);
    if (registry->current != NULL) {
        return error_message(error, error_size,
                             "a data loop may not be created while %s is being "
                             "iterated; create loops before the loop that uses them",
                             registry->current->name);
    }
    if (records == 0 || batch_size == 0) {
        return error_message(error, error_size,
                             "a data loop needs at least one record and a batch size "
                             "of at least 1 (got %llu records, batch size %llu)",
                             (unsigned long long)records, (unsigned long long)batch_size);
    }
    uint64_t count;
    if (epoch_counters_take(&registry->loops_created, epoch, &count) != 0) {
        return error_message(error, error_size, "out of memory creating a data loop");
    }
    char epoch_text[24];
    data_loop_format_epoch(epoch_text, sizeof epoch_text, epoch);
    snprintf(loop->name, sizeof loop->name, "adaptdl-dataloader-epoch%s-%llu", epoch_text,
             (unsigned long long)count);
    loop->records = records;
    loop->batch_size = batch_size;
    loop->shuffle = shuffle;
    loop->seed = seed;
    loop->replicas = 1;
    loop->epoch = -1;
    return 0;
}

void data_loop_free(struct data_loop *loop)
{
    free(loop->last_positions);
    loop->last_positions = NULL;
    loop->position_count = 0;
}

int data_loop_autoscale(struct data_loop *loop, uint64_t max_batch_size, char *error,
                        size_t error_size)
{
    if (max_batch_size < loop->batch_size) {
        return error_message(error, error_size,
                             "%s: the largest batch size %llu is below its batch size "
                             "%llu; accepted: a maximum of at least the batch size",
                             loop->name, (unsigned long long)max_batch_size,
                             (unsigned long long)loop->batch_size);
    }
    loop->max_batch_size = max_batch_size;
    return 0;
}

int64_t data_loop_last_position(const struct data_loop *loop, int64_t epoch)
{
    for (size_t i = 0; i < loop->position_count; i++)
        if (loop->last_positions[i].epoch == epoch)
            return loop->last_positions[i].position;
    return -1;
}

static int data_loop_record_position(struct data_loop *loop, int64_t epoch, int64_t position)
{
    for (size_t i = 0; i < loop->position_count; i++) {
        if (loop->last_positions[i].epoch == epoch) {
            loop->last_positions[i].position = position;
            return 0;
        }
    }
    struct data_loop_position *positions =
        realloc(loop->last_positions, (loop->position_count + 1) * sizeof *positions);
    if (positions == NULL)
        return -1;
    loop->last_positions = positions;
    positions[loop->position_count].epoch = epoch;
    positions[loop->position_count].position = position;
    loop->position_count++;
    return 0;
}

int data_loop_set_saved(struct data_loop *loop, uint64_t current_index, uint64_t end_index,
                        const struct data_loop_position *positions, size_t count)
{
    struct data_loop_position *copy = NULL;
    if (count > 0) {
        copy = malloc(count * sizeof *copy);
        if (copy == NULL)
            return -1;
        memcpy(copy, positions, count * sizeof *copy);
    }
    free(loop->last_positions);
    loop->last_positions = copy;
    loop->position_count = count;
    loop->current_index = current_index;
    loop->end_index = end_index;
    return 0;
}

/* --- iterating -------------------------------------------------------------------- */

static uint64_t data_loop_default_local_batch(const struct data_loop *loop)
{
    return (loop->batch_size + loop->replicas - 1) / loop->replicas;
}

/* Starts a sweep of the records from the current index (AdaptDL's
 * set_epoch(epoch, index) plus _sync_local_bsz). */
static void data_loop_start_sweep(struct data_loop_registry *registry, struct data_loop *loop)
{
    loop->sweep_base = loop->current_index;
    loop->sweep_batches = 0;
    uint64_t wrap = loop->current_index / loop->records;
    record_permutation_init(&loop->permutation, loop->records, loop->shuffle, loop->seed,
                            loop->name, (uint64_t)(loop->epoch < 0 ? 0 : loop->epoch), wrap);
    uint64_t local = registry->choose_local_batch
                         ? registry->choose_local_batch(registry->context, loop)
                         : data_loop_default_local_batch(loop);
    loop->local_batch = local > 0 ? local : 1;
}

int data_loop_begin(struct data_loop_registry *registry, struct data_loop *loop, int64_t epoch,
                    uint32_t replicas, uint32_t rank, bool *skipped, char *error,
                    size_t error_size)
{
    *skipped = false;
    if (registry->current != NULL) {
        return error_message(error, error_size,
                             "overlapping data loop iterations: %s began while %s "
                             "was being iterated; finish or leave the first one",
                             loop->name, registry->current->name);
    }
    if (replicas == 0 || rank >= replicas) {
        return error_message(error, error_size, "%s: replica %u of %u does not exist", loop->name,
                             rank, replicas);
    }
    registry->current = loop;
    loop->epoch = epoch;
    loop->replicas = replicas;
    loop->rank = rank;
    loop->batch_in_hand = false;
    int64_t position = (int64_t)epoch_counters_get(&registry->positions, epoch);
    loop->skip = position <= data_loop_last_position(loop, epoch);
    if (loop->skip) {
        /* The skipped iteration is over at once: it takes its position
         * (AdaptDL's context exit, which runs around skipdone's return) and
         * is no longer current, so the next loop of the epoch gets the next
         * position.  Its finished position stays what it was, the later of
         * the two.  A batch asked of it afterwards is none. */
        uint64_t ignored;
        registry->current = NULL;
        if (epoch_counters_take(&registry->positions, epoch, &ignored) != 0) {
            loop->skip = false;
            return error_message(error, error_size, "out of memory beginning %s", loop->name);
        }
        log_info("skipping %s at position %lld in epoch %lld: finished before the restart",
                 loop->name, (long long)position, (long long)epoch);
        *skipped = true;
        return 0;
    }
    data_loop_start_sweep(registry, loop);
    return 0;
}

/* AdaptDL's context exit: the iteration's position becomes the loop's last
 * finished one in its epoch, and the next iteration gets the next position. */
static void data_loop_end_iteration(struct data_loop_registry *registry, struct data_loop *loop)
{
    loop->current_index = 0;
    loop->end_index = 0;
    loop->batch_in_hand = false;
    uint64_t position;
    if (epoch_counters_take(&registry->positions, loop->epoch, &position) != 0 ||
        data_loop_record_position(loop, loop->epoch, (int64_t)position) != 0)
        log_error("%s: out of memory recording its finished position; after a restart it "
                  "runs again", loop->name);
    registry->current = NULL;
}

void data_loop_leave(struct data_loop_registry *registry, struct data_loop *loop)
{
    if (registry->current == loop)
        data_loop_end_iteration(registry, loop);
}

/* Records one replica sees in the sweep: ceil((N - base mod N) / K). */
static uint64_t data_loop_sweep_length(const struct data_loop *loop)
{
    uint64_t base = loop->sweep_base % loop->records;
    return (loop->records - base + loop->replicas - 1) / loop->replicas;
}

static bool data_loop_progress_reached(const struct data_loop_registry *registry,
                                       const struct data_loop *loop)
{
    if (loop->max_batch_size == 0)
        return false;
    double progress = registry->progress ? registry->progress(registry->context) : 0.0;
    double epoch = (double)(loop->epoch < 0 ? 0 : loop->epoch);
    return progress >= (double)loop->records * (epoch + 1.0) / (double)loop->batch_size;
}

/* current_index rounded up to a whole number of sweeps (AdaptDL's
 * `current_index -= current_index % -len(dataset)`). */
static void data_loop_round_up_to_sweep(struct data_loop *loop)
{
    uint64_t remainder = loop->current_index % loop->records;
    if (remainder != 0)
        loop->current_index += loop->records - remainder;
}

long data_loop_next_batch(struct data_loop_registry *registry, struct data_loop *loop,
                          uint64_t *indices, size_t capacity, char *error, size_t error_size)
{
    if (loop->skip)
        return 0;   /* its iteration was skipped, and is over */
    if (registry->current != loop) {
        return error_message(error, error_size,
                             "%s: a batch was asked for outside its iteration; begin "
                             "the loop first",
                             loop->name);
    }
    bool done = false;
    if (loop->batch_in_hand) {
        loop->batch_in_hand = false;
        loop->current_index += (uint64_t)loop->replicas * loop->local_batch;
        done = data_loop_progress_reached(registry, loop);
    }
    uint64_t length = data_loop_sweep_length(loop);
    uint64_t first = loop->sweep_batches * loop->local_batch;
    if (!done && first >= length) {
        /* the sweep is over: one sweep without adaptation, else sweep again */
        data_loop_round_up_to_sweep(loop);
        if (loop->max_batch_size == 0) {
            done = true;
        } else {
            data_loop_start_sweep(registry, loop);
            length = data_loop_sweep_length(loop);
            first = 0;
        }
    }
    if (done) {
        data_loop_round_up_to_sweep(loop);
        data_loop_end_iteration(registry, loop);
        return 0;
    }
    uint64_t count = length - first < loop->local_batch ? length - first : loop->local_batch;
    if (count > capacity) {
        return error_message(error, error_size,
                             "%s: room for %zu indices, the batch has %llu; pass room "
                             "for the local batch size",
                             loop->name, capacity, (unsigned long long)count);
    }
    uint64_t base = loop->sweep_base % loop->records;
    for (uint64_t j = 0; j < count; j++) {
        uint64_t position = base + loop->rank + (first + j) * loop->replicas;
        /* ElasticSampler pads the shorter replicas with indices[rank] */
        uint64_t logical = position < loop->records ? position : loop->rank % loop->records;
        indices[j] = record_permutation_apply(&loop->permutation, logical);
    }
    loop->sweep_batches++;
    loop->batch_in_hand = true;
    return (long)count;
}
