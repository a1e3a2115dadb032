/* accumulator.h - AdaptDL's Accumulator (adaptdl(3)): a named dictionary of
 * numbers whose updates are summed over every replica and whose
 * synchronized results are replayed after a restart.
 *
 * Accumulation mode (the default): add/subtract collect local updates, and
 * reads behave as on an empty dictionary.  Synchronized mode, entered with
 * accumulator_synchronize (a collective: every replica must enter it at the
 * same point): the updates of every replica are summed into the results,
 * which then read and write like a plain dictionary, the same on every
 * replica.  Each synchronization entered outside any loop appends a copy of
 * its results to a per-epoch history; after a restart the replayed code's
 * k-th synchronization of the epoch gets the k-th saved results back,
 * without communicating (its local updates are discarded, as they were
 * counted before the restart).  Entering a synchronization drops the
 * history of finished epochs. */
#ifndef ADAPTSHIM_ACCUMULATOR_H
#define ADAPTSHIM_ACCUMULATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACCUMULATOR_NAME_SIZE 80
#define ACCUMULATOR_KEY_MAX 255

/* Keys in insertion order. */
struct accumulator_dict {
    size_t count, capacity;
    char **keys;
    double *values;
};

struct accumulator_results {
    int64_t epoch;               /* -1: outside every epoch loop */
    struct accumulator_dict values;
};

struct accumulator_sync_count {
    int64_t epoch;
    uint64_t count;
};

struct accumulator {
    char name[ACCUMULATOR_NAME_SIZE];
    struct accumulator_dict results;
    struct accumulator_dict updates;
    struct accumulator_results *history;
    size_t history_count, history_capacity;
    /* this run only: synchronizations entered per epoch */
    struct accumulator_sync_count *sync_counts;
    size_t sync_count_used;
    struct accumulator_dict *synchronized;  /* NULL in accumulation mode */
    unsigned synchronized_depth;
};

/* --- the dictionary ---------------------------------------------------------- */
void accumulator_dict_init(struct accumulator_dict *dict);
void accumulator_dict_free(struct accumulator_dict *dict);
/* Index of key, or -1. */
long accumulator_dict_find(const struct accumulator_dict *dict, const char *key);
/* dict[key] += delta, creating key at 0.  -1 on allocation failure. */
int accumulator_dict_add(struct accumulator_dict *dict, const char *key, double delta);
int accumulator_dict_copy(struct accumulator_dict *to, const struct accumulator_dict *from);

/* --- the accumulator --------------------------------------------------------- */
/* Names it AdaptDL's way, adaptdl-accumulator-epoch{epoch}-{count}, with
 * "None" for an epoch of -1. */
void accumulator_init(struct accumulator *accumulator, int64_t epoch, unsigned count);
void accumulator_free(struct accumulator *accumulator);

/* AdaptDL's Accumulator(initial_dict): results[key] = value, for a new
 * accumulator before it is tracked (a restore then replaces the results,
 * as AdaptDL's load_state does after its constructor).  A key given twice
 * takes the last value.  -1 with a message for a bad key, an accumulator
 * already used, or on allocation failure. */
int accumulator_set_initial(struct accumulator *accumulator, const char *key, double value,
                            char *error, size_t error_size);

/* Accumulation mode: a local update of key (created at 0).  Synchronized
 * mode: results[key] += delta, for a key the results hold; a missing one is
 * refused, as AdaptDL's accum[key] += delta raises KeyError there.  -1 with
 * a message for a bad or missing key or on allocation failure. */
int accumulator_add(struct accumulator *accumulator, const char *key, double delta,
                    char *error, size_t error_size);
/* Synchronized mode only: results[key] = value, remove key, remove all.
 * -1 with a message in accumulation mode (or for a key that is absent). */
int accumulator_set(struct accumulator *accumulator, const char *key, double value,
                    char *error, size_t error_size);
int accumulator_remove(struct accumulator *accumulator, const char *key, char *error,
                       size_t error_size);
int accumulator_clear(struct accumulator *accumulator, char *error, size_t error_size);
/* Reads: as an empty dictionary in accumulation mode.  A key that is
 * absent (or any key in accumulation mode) reads false and leaves *value
 * untouched: AdaptDL's accum[key] raises KeyError, accum.get(key) is None. */
bool accumulator_get(const struct accumulator *accumulator, const char *key, double *value);
size_t accumulator_size(const struct accumulator *accumulator);
/* The i-th key (i < accumulator_size), or NULL. */
const char *accumulator_key(const struct accumulator *accumulator, size_t index);

/* Enters synchronized mode in `epoch` (see above); `in_loop`: a data loop
 * is being iterated, so the results are not kept for replay.  Nested
 * entries are counted and change nothing.  -1 with a message when the
 * collective fails. */
int accumulator_synchronize(struct accumulator *accumulator, int64_t epoch, bool in_loop,
                            char *error, size_t error_size);
/* Leaves the innermost synchronized block. */
void accumulator_desynchronize(struct accumulator *accumulator);

/* Replaces the saved part (results and history) with copies of the given
 * ones, as a restore does; a synchronized block open across it reads the
 * restored results from then on.  -1 on allocation failure (nothing
 * changed). */
int accumulator_restore(struct accumulator *accumulator, const struct accumulator_dict *results,
                        const struct accumulator_results *history, size_t history_count);

/* Sums every replica's pending updates into the results (a collective;
 * AdaptDL's State.sync, run before a checkpoint is saved). */
int accumulator_sum_updates(struct accumulator *accumulator, char *error, size_t error_size);

#endif
