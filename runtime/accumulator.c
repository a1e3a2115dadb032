/* accumulator.c - AdaptDL's Accumulator (see accumulator.h).  Replicas
 * exchange their updates as msgpack maps through replica_collective and
 * sum them in rank order, so every replica computes bit-identical results. */
#include "accumulator.h"
#include "error_message.h"
#include "growable_array.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replica_collective.h"

/* --- the dictionary ---------------------------------------------------------- */

void accumulator_dict_init(struct accumulator_dict *dict)
{
    memset(dict, 0, sizeof *dict);
}

void accumulator_dict_free(struct accumulator_dict *dict)
{
    for (size_t i = 0; i < dict->count; i++)
        free(dict->keys[i]);
    free(dict->keys);
    free(dict->values);
    accumulator_dict_init(dict);
}

long accumulator_dict_find(const struct accumulator_dict *dict, const char *key)
{
    for (size_t i = 0; i < dict->count; i++)
        if (strcmp(dict->keys[i], key) == 0)
            return (long)i;
    return -1;
}

static int accumulator_dict_append(struct accumulator_dict *dict, const char *key, size_t length,
                                   double value)
{
    /* two arrays of one capacity: it is raised once both have grown */
    size_t keys_capacity = dict->capacity;
    size_t values_capacity = dict->capacity;
    char **keys =
        growable_array_make_room(dict->keys, dict->count, &keys_capacity, sizeof *keys, 8);
    if (keys == NULL)
        return -1;
    dict->keys = keys;
    double *values =
        growable_array_make_room(dict->values, dict->count, &values_capacity, sizeof *values, 8);
    if (values == NULL)
        return -1;
    dict->values = values;
    dict->capacity = keys_capacity;
    char *copy = strndup(key, length);
    if (copy == NULL)
        return -1;
    dict->keys[dict->count] = copy;
    dict->values[dict->count] = value;
    dict->count++;
    return 0;
}

int accumulator_dict_add(struct accumulator_dict *dict, const char *key, double delta)
{
    long index = accumulator_dict_find(dict, key);
    if (index >= 0) {
        dict->values[index] += delta;
        return 0;
    }
    return accumulator_dict_append(dict, key, strlen(key), delta);
}

int accumulator_dict_copy(struct accumulator_dict *to, const struct accumulator_dict *from)
{
    accumulator_dict_init(to);
    for (size_t i = 0; i < from->count; i++) {
        if (accumulator_dict_append(to, from->keys[i], strlen(from->keys[i]),
                                    from->values[i]) != 0) {
            accumulator_dict_free(to);
            return -1;
        }
    }
    return 0;
}

static void accumulator_dict_remove_at(struct accumulator_dict *dict, size_t index)
{
    free(dict->keys[index]);
    memmove(dict->keys + index, dict->keys + index + 1,
            (dict->count - index - 1) * sizeof *dict->keys);
    memmove(dict->values + index, dict->values + index + 1,
            (dict->count - index - 1) * sizeof *dict->values);
    dict->count--;
}

/* --- exchanging updates -------------------------------------------------------- */

static int accumulator_dict_pack(const struct accumulator_dict *dict, msgpack_sbuffer *buffer)
{
    msgpack_packer packer;
    msgpack_packer_init(&packer, buffer, msgpack_sbuffer_write);
    int status = msgpack_pack_map(&packer, dict->count);
    for (size_t i = 0; i < dict->count && status == 0; i++) {
        size_t length = strlen(dict->keys[i]);
        status = msgpack_pack_str(&packer, length);
        if (status == 0)
            status = msgpack_pack_str_body(&packer, dict->keys[i], length);
        if (status == 0)
            status = msgpack_pack_double(&packer, dict->values[i]);
    }
    return status;
}

static bool accumulator_object_number(const msgpack_object *object, double *value)
{
    switch (object->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        *value = object->via.f64;
        return true;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *value = (double)object->via.u64;
        return true;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *value = (double)object->via.i64;
        return true;
    default:
        return false;
    }
}

/* sum += the map a replica sent. */
static int accumulator_dict_add_packed(struct accumulator_dict *sum, const unsigned char *bytes,
                                       size_t size, unsigned rank, char *error,
                                       size_t error_size)
{
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    int status = -1;
    if (msgpack_unpack_next(&unpacked, (const char *)bytes, size, &offset) ==
            MSGPACK_UNPACK_SUCCESS &&
        unpacked.data.type == MSGPACK_OBJECT_MAP) {
        status = 0;
        const msgpack_object_map *map = &unpacked.data.via.map;
        for (uint32_t i = 0; i < map->size && status == 0; i++) {
            const msgpack_object *key = &map->ptr[i].key;
            double value;
            if (key->type != MSGPACK_OBJECT_STR || key->via.str.size > ACCUMULATOR_KEY_MAX ||
                !accumulator_object_number(&map->ptr[i].val, &value)) {
                status = -1;
                break;
            }
            char name[ACCUMULATOR_KEY_MAX + 1];
            memcpy(name, key->via.str.ptr, key->via.str.size);
            name[key->via.str.size] = '\0';
            status = accumulator_dict_add(sum, name, value);
        }
    }
    msgpack_unpacked_destroy(&unpacked);
    if (status != 0)
        error_message(error, error_size,
                      "accumulator: the updates replica %u sent are not a map of "
                      "names to numbers (or memory ran out summing them)",
                      rank);
    return status;
}

int accumulator_sum_updates(struct accumulator *accumulator, char *error, size_t error_size)
{
    msgpack_sbuffer buffer;
    msgpack_sbuffer_init(&buffer);
    if (accumulator_dict_pack(&accumulator->updates, &buffer) != 0) {
        msgpack_sbuffer_destroy(&buffer);
        return error_message(error, error_size, "accumulator %s: out of memory packing its updates",
                             accumulator->name);
    }
    struct replica_gathered gathered;
    int status = replica_collective_allgather(buffer.data, buffer.size, &gathered, error,
                                              error_size);
    msgpack_sbuffer_destroy(&buffer);
    if (status != 0)
        return -1;
    struct accumulator_dict sum;
    accumulator_dict_init(&sum);
    for (unsigned rank = 0; rank < gathered.replicas && status == 0; rank++)
        status = accumulator_dict_add_packed(&sum, gathered.parts[rank], gathered.sizes[rank],
                                             rank, error, error_size);
    replica_gathered_free(&gathered);
    for (size_t i = 0; i < sum.count && status == 0; i++)
        status = accumulator_dict_add(&accumulator->results, sum.keys[i], sum.values[i]);
    accumulator_dict_free(&sum);
    if (status != 0)
        return -1;
    accumulator_dict_free(&accumulator->updates);
    return 0;
}

/* --- the accumulator --------------------------------------------------------- */

void accumulator_init(struct accumulator *accumulator, int64_t epoch, unsigned count)
{
    memset(accumulator, 0, sizeof *accumulator);
    if (epoch < 0)
        snprintf(accumulator->name, sizeof accumulator->name,
                 "adaptdl-accumulator-epochNone-%u", count);
    else
        snprintf(accumulator->name, sizeof accumulator->name,
                 "adaptdl-accumulator-epoch%lld-%u", (long long)epoch, count);
}

void accumulator_free(struct accumulator *accumulator)
{
    accumulator_dict_free(&accumulator->results);
    accumulator_dict_free(&accumulator->updates);
    for (size_t i = 0; i < accumulator->history_count; i++)
        accumulator_dict_free(&accumulator->history[i].values);
    free(accumulator->history);
    free(accumulator->sync_counts);
    memset(accumulator, 0, sizeof *accumulator);
}

static int accumulator_check_key(const struct accumulator *accumulator, const char *key,
                                 char *error, size_t error_size)
{
    if (key != NULL && key[0] != '\0' && strlen(key) <= ACCUMULATOR_KEY_MAX)
        return 0;
    return error_message(error, error_size,
                         "accumulator %s: a key must be a string of 1 to %d bytes",
                         accumulator->name, ACCUMULATOR_KEY_MAX);
}

static int accumulator_out_of_memory(const struct accumulator *accumulator, char *error,
                                     size_t error_size)
{
    return error_message(error, error_size, "accumulator %s: out of memory", accumulator->name);
}

int accumulator_set_initial(struct accumulator *accumulator, const char *key, double value,
                            char *error, size_t error_size)
{
    if (accumulator_check_key(accumulator, key, error, error_size) != 0)
        return -1;
    if (accumulator->synchronized != NULL || accumulator->sync_count_used > 0 ||
        accumulator->history_count > 0 || accumulator->updates.count > 0) {
        return error_message(error, error_size,
                             "accumulator %s: initial values are given at its creation only",
                             accumulator->name);
    }
    long index = accumulator_dict_find(&accumulator->results, key);
    if (index >= 0) {
        accumulator->results.values[index] = value;
        return 0;
    }
    if (accumulator_dict_append(&accumulator->results, key, strlen(key), value) != 0)
        return accumulator_out_of_memory(accumulator, error, error_size);
    return 0;
}

int accumulator_add(struct accumulator *accumulator, const char *key, double delta,
                    char *error, size_t error_size)
{
    if (accumulator_check_key(accumulator, key, error, error_size) != 0)
        return -1;
    if (accumulator->synchronized == NULL) {
        if (accumulator_dict_add(&accumulator->updates, key, delta) != 0)
            return accumulator_out_of_memory(accumulator, error, error_size);
        return 0;
    }
    /* synchronized: the results read as a plain dictionary, and a missing
     * key has no value to add to (every replica refuses alike) */
    long index = accumulator_dict_find(accumulator->synchronized, key);
    if (index < 0) {
        return error_message(error, error_size,
                             "accumulator %s: no key \"%s\" to add to in synchronized mode; "
                             "set it first, or add before synchronizing (AdaptDL raises "
                             "KeyError)",
                             accumulator->name, key);
    }
    accumulator->synchronized->values[index] += delta;
    return 0;
}

static int accumulator_require_synchronized(const struct accumulator *accumulator,
                                            const char *what, char *error, size_t error_size)
{
    if (accumulator->synchronized != NULL)
        return 0;
    return error_message(error, error_size,
                         "accumulator %s: %s is only allowed in synchronized mode; "
                         "outside it, use add or subtract",
                         accumulator->name, what);
}

int accumulator_set(struct accumulator *accumulator, const char *key, double value,
                    char *error, size_t error_size)
{
    if (accumulator_require_synchronized(accumulator, "setting a value", error, error_size) != 0 ||
        accumulator_check_key(accumulator, key, error, error_size) != 0)
        return -1;
    struct accumulator_dict *dict = accumulator->synchronized;
    long index = accumulator_dict_find(dict, key);
    if (index >= 0) {
        dict->values[index] = value;
        return 0;
    }
    if (accumulator_dict_append(dict, key, strlen(key), value) != 0)
        return accumulator_out_of_memory(accumulator, error, error_size);
    return 0;
}

int accumulator_remove(struct accumulator *accumulator, const char *key, char *error,
                       size_t error_size)
{
    if (accumulator_require_synchronized(accumulator, "removing a key", error, error_size) != 0)
        return -1;
    long index = key ? accumulator_dict_find(accumulator->synchronized, key) : -1;
    if (index < 0) {
        return error_message(error, error_size, "accumulator %s: no key \"%s\" to remove",
                             accumulator->name, key ? key : "(null)");
    }
    accumulator_dict_remove_at(accumulator->synchronized, (size_t)index);
    return 0;
}

int accumulator_clear(struct accumulator *accumulator, char *error, size_t error_size)
{
    if (accumulator->synchronized == NULL)
        return 0;  /* an empty dictionary, as AdaptDL's accumulation mode reads */
    accumulator_dict_free(accumulator->synchronized);
    return 0;
}

bool accumulator_get(const struct accumulator *accumulator, const char *key, double *value)
{
    if (accumulator->synchronized == NULL || key == NULL)
        return false;
    long index = accumulator_dict_find(accumulator->synchronized, key);
    if (index < 0)
        return false;
    *value = accumulator->synchronized->values[index];
    return true;
}

size_t accumulator_size(const struct accumulator *accumulator)
{
    return accumulator->synchronized ? accumulator->synchronized->count : 0;
}

const char *accumulator_key(const struct accumulator *accumulator, size_t index)
{
    if (accumulator->synchronized == NULL || index >= accumulator->synchronized->count)
        return NULL;
    return accumulator->synchronized->keys[index];
}

/* The k-th synchronization of `epoch` in this run: returns k, counts one more. */
static long accumulator_next_sync_index(struct accumulator *accumulator, int64_t epoch)
{
    for (size_t i = 0; i < accumulator->sync_count_used; i++)
        if (accumulator->sync_counts[i].epoch == epoch)
            return (long)accumulator->sync_counts[i].count++;
    struct accumulator_sync_count *counts =
        realloc(accumulator->sync_counts,
                (accumulator->sync_count_used + 1) * sizeof *accumulator->sync_counts);
    if (counts == NULL)
        return -1;
    accumulator->sync_counts = counts;
    counts[accumulator->sync_count_used].epoch = epoch;
    counts[accumulator->sync_count_used].count = 1;
    accumulator->sync_count_used++;
    return 0;
}

/* A synchronization that failed (its collective refused) did not happen:
 * the next one of the epoch takes its place in the replay order. */
static void accumulator_return_sync_index(struct accumulator *accumulator, int64_t epoch)
{
    for (size_t i = 0; i < accumulator->sync_count_used; i++)
        if (accumulator->sync_counts[i].epoch == epoch && accumulator->sync_counts[i].count > 0)
            accumulator->sync_counts[i].count--;
}

/* Finished epochs are never replayed: their results are dropped. */
static void accumulator_drop_finished_history(struct accumulator *accumulator, int64_t epoch)
{
    if (epoch < 0)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < accumulator->history_count; i++) {
        struct accumulator_results *entry = &accumulator->history[i];
        if (entry->epoch >= 0 && entry->epoch < epoch)
            accumulator_dict_free(&entry->values);
        else
            accumulator->history[kept++] = *entry;
    }
    accumulator->history_count = kept;
}

/* The index-th saved results of `epoch`, or NULL. */
static struct accumulator_dict *accumulator_saved_results(struct accumulator *accumulator,
                                                          int64_t epoch, long index)
{
    long seen = 0;
    for (size_t i = 0; i < accumulator->history_count; i++)
        if (accumulator->history[i].epoch == epoch && seen++ == index)
            return &accumulator->history[i].values;
    return NULL;
}

static int accumulator_keep_results(struct accumulator *accumulator, int64_t epoch)
{
    struct accumulator_results *history =
        growable_array_make_room(accumulator->history, accumulator->history_count,
                                 &accumulator->history_capacity, sizeof *history, 4);
    if (history == NULL)
        return -1;
    accumulator->history = history;
    struct accumulator_results *entry = &accumulator->history[accumulator->history_count];
    entry->epoch = epoch;
    if (accumulator_dict_copy(&entry->values, &accumulator->results) != 0)
        return -1;
    accumulator->history_count++;
    return 0;
}

int accumulator_synchronize(struct accumulator *accumulator, int64_t epoch, bool in_loop,
                            char *error, size_t error_size)
{
    if (accumulator->synchronized != NULL) {
        accumulator->synchronized_depth++;
        return 0;
    }
    accumulator_drop_finished_history(accumulator, epoch);
    long index = accumulator_next_sync_index(accumulator, epoch);
    if (index < 0)
        return accumulator_out_of_memory(accumulator, error, error_size);
    struct accumulator_dict *saved = accumulator_saved_results(accumulator, epoch, index);
    if (saved != NULL) {
        /* replayed: these updates were counted before the restart */
        accumulator_dict_free(&accumulator->updates);
        accumulator->synchronized = saved;
    } else {
        if (accumulator_sum_updates(accumulator, error, error_size) != 0) {
            accumulator_return_sync_index(accumulator, epoch);
            return -1;
        }
        if (!in_loop && accumulator_keep_results(accumulator, epoch) != 0)
            return accumulator_out_of_memory(accumulator, error, error_size);
        accumulator->synchronized = &accumulator->results;
    }
    accumulator->synchronized_depth = 1;
    return 0;
}

void accumulator_desynchronize(struct accumulator *accumulator)
{
    if (accumulator->synchronized_depth > 0 && --accumulator->synchronized_depth == 0)
        accumulator->synchronized = NULL;
}

int accumulator_restore(struct accumulator *accumulator, const struct accumulator_dict *results,
                        const struct accumulator_results *history, size_t history_count)
{
    struct accumulator_dict results_copy;
    if (accumulator_dict_copy(&results_copy, results) != 0)
        return -1;
    struct accumulator_results *history_copy =
        calloc(history_count ? history_count : 1, sizeof *history_copy);
    if (history_copy == NULL) {
        accumulator_dict_free(&results_copy);
        return -1;
    }
    for (size_t i = 0; i < history_count; i++) {
        history_copy[i].epoch = history[i].epoch;
        if (accumulator_dict_copy(&history_copy[i].values, &history[i].values) != 0) {
            for (size_t j = 0; j < i; j++)
                accumulator_dict_free(&history_copy[j].values);
            free(history_copy);
            accumulator_dict_free(&results_copy);
            return -1;
        }
    }
    accumulator_dict_free(&accumulator->results);
    for (size_t i = 0; i < accumulator->history_count; i++)
        accumulator_dict_free(&accumulator->history[i].values);
    free(accumulator->history);
    accumulator->results = results_copy;
    accumulator->history = history_copy;
    accumulator->history_count = history_count;
    accumulator->history_capacity = history_count ? history_count : 1;
    /* a synchronized block open across the restore pointed at the results
     * or a history entry just freed: it reads the restored results now */
    if (accumulator->synchronized != NULL)
        accumulator->synchronized = &accumulator->results;
    return 0;
}
