/* cooperative_state.c - the cooperative API's state in bound snapshots, and
 * the epoch loop kept apart from open data loop iterations (see
 * cooperative_state.h).  Callers hold state->lock, except around init and
 * free. */
#include "cooperative_state.h"
#include "error_message.h"
#include "growable_array.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void cooperative_state_init(struct cooperative_state *state)
{
    memset(state, 0, sizeof *state);
    pthread_mutex_init(&state->lock, NULL);
    epoch_loop_init(&state->epochs);
    data_loop_registry_init(&state->loops);
}

static void cooperative_state_forget_restored(struct cooperative_state *state)
{
    struct cooperative_restored *restored = &state->restored;
    for (size_t i = 0; i < restored->loop_count; i++) {
        free(restored->loops[i].name);
        free(restored->loops[i].positions);
    }
    for (size_t i = 0; i < restored->accumulator_count; i++) {
        struct restored_accumulator *saved = &restored->accumulators[i];
        free(saved->name);
        accumulator_dict_free(&saved->results);
        for (size_t h = 0; h < saved->history_count; h++)
            accumulator_dict_free(&saved->history[h].values);
        free(saved->history);
    }
    for (size_t i = 0; i < restored->registered_count; i++) {
        free(restored->registered[i].name);
        free(restored->registered[i].bytes);
    }
    free(restored->loops);
    free(restored->accumulators);
    free(restored->registered);
    *restored = (struct cooperative_restored){0};
}

void cooperative_state_free(struct cooperative_state *state)
{
    cooperative_state_forget_restored(state);
    for (size_t i = 0; i < state->registered_count; i++)
        free(state->registered[i].name);
    free(state->registered);
    free(state->loop_list.items);
    free(state->accumulator_list.items);
    data_loop_registry_free(&state->loops);
    pthread_mutex_destroy(&state->lock);
    memset(state, 0, sizeof *state);
}

/* Appends to a tracked list; -1 on allocation failure. */
static int tracked_list_append(struct tracked_list *list, void *item)
{
    void **items =
        growable_array_make_room(list->items, list->count, &list->capacity, sizeof *items, 8);
    if (items == NULL)
        return -1;
    list->items = items;
    list->items[list->count++] = item;
    return 0;
}

static void tracked_list_remove(struct tracked_list *list, const void *item)
{
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i] == item) {
            memmove(list->items + i, list->items + i + 1,
                    (list->count - i - 1) * sizeof *list->items);
            list->count--;
            return;
        }
    }
}

static int cooperative_out_of_memory(char *error, size_t error_size, const char *what)
{
    return error_message(error, error_size, "out of memory %s", what);
}

/* --- applying restored state ------------------------------------------------------- */

/* A tracked object takes its restored state: 0, or -1 when it cannot (out
 * of memory).  The item is a struct data_loop * or a struct accumulator *,
 * as its list holds it. */
typedef int cooperative_apply_function(const struct cooperative_state *state, void *item);

static int cooperative_apply_loop(const struct cooperative_state *state, void *item)
{
    struct data_loop *loop = item;
    for (size_t i = 0; i < state->restored.loop_count; i++) {
        const struct restored_loop *saved = &state->restored.loops[i];
        if (strcmp(saved->name, loop->name) == 0)
            return data_loop_set_saved(loop, saved->current_index, saved->end_index,
                                       saved->positions, saved->position_count);
    }
    return 0;
}

static int cooperative_apply_accumulator(const struct cooperative_state *state, void *item)
{
    struct accumulator *accumulator = item;
    for (size_t i = 0; i < state->restored.accumulator_count; i++) {
        const struct restored_accumulator *saved = &state->restored.accumulators[i];
        if (strcmp(saved->name, accumulator->name) == 0)
            return accumulator_restore(accumulator, &saved->results, saved->history,
                                       saved->history_count);
    }
    return 0;
}

static int cooperative_apply_registered(const struct cooperative_state *state,
                                        const struct registered_state *registered, char *error,
                                        size_t error_size)
{
    for (size_t i = 0; i < state->restored.registered_count; i++) {
        const struct restored_bytes *saved = &state->restored.registered[i];
        if (strcmp(saved->name, registered->name) != 0)
            continue;
        if (registered->load != NULL) {
            if (registered->load(registered->context, saved->bytes, saved->size) == 0)
                return 0;
            return error_message(error, error_size,
                                 "registered state \"%s\": its load callback refused "
                                 "the %zu saved bytes",
                                 registered->name, saved->size);
        }
        if (saved->size != registered->size) {
            return error_message(error, error_size,
                                 "registered state \"%s\" has %zu bytes but the "
                                 "restored snapshot holds %zu; register a buffer of the saved size",
                                 registered->name, registered->size, saved->size);
        }
        memcpy(registered->buffer, saved->bytes, saved->size);
        return 0;
    }
    return 0;
}

/* Tracks an object in `list`, then gives it its restored state. */
static int cooperative_track(struct cooperative_state *state, struct tracked_list *list,
                             void *item, cooperative_apply_function *apply, const char *what,
                             char *error, size_t error_size)
{
    state->used = true;
    if (tracked_list_append(list, item) != 0 || apply(state, item) != 0)
        return cooperative_out_of_memory(error, error_size, what);
    return 0;
}

int cooperative_state_add_loop(struct cooperative_state *state, struct data_loop *loop,
                               char *error, size_t error_size)
{
    return cooperative_track(state, &state->loop_list, loop, cooperative_apply_loop,
                             "creating a data loop", error, error_size);
}

int cooperative_state_add_accumulator(struct cooperative_state *state,
                                      struct accumulator *accumulator, char *error,
                                      size_t error_size)
{
    return cooperative_track(state, &state->accumulator_list, accumulator,
                             cooperative_apply_accumulator, "creating an accumulator", error,
                             error_size);
}

int cooperative_state_register(struct cooperative_state *state,
                               const struct registered_state *registered, char *error,
                               size_t error_size)
{
    state->used = true;
    for (size_t i = 0; i < state->registered_count; i++) {
        if (strcmp(state->registered[i].name, registered->name) == 0) {
            return error_message(error, error_size,
                                 "state \"%s\" is registered already; names must be "
                                 "unique",
                                 registered->name);
        }
    }
    if (cooperative_apply_registered(state, registered, error, error_size) != 0)
        return -1;
    struct registered_state *items = growable_array_make_room(
        state->registered, state->registered_count, &state->registered_capacity, sizeof *items, 8);
    if (items == NULL)
        return cooperative_out_of_memory(error, error_size, "registering state");
    state->registered = items;
    struct registered_state *copy = &state->registered[state->registered_count];
    *copy = *registered;
    copy->name = strdup(registered->name);
    if (copy->name == NULL)
        return cooperative_out_of_memory(error, error_size, "registering state");
    state->registered_count++;
    return 0;
}

void cooperative_state_remove_loop(struct cooperative_state *state, struct data_loop *loop)
{
    tracked_list_remove(&state->loop_list, loop);
}

void cooperative_state_remove_accumulator(struct cooperative_state *state,
                                          struct accumulator *accumulator)
{
    tracked_list_remove(&state->accumulator_list, accumulator);
}

/* --- the epoch loop -------------------------------------------------------------------- */

/* -1 with a message naming the open iteration and what was asked (`what`,
 * e.g. "epoch 2 cannot end"), or 0 when no data loop is being iterated. */
static int cooperative_refuse_open_iteration(const struct cooperative_state *state,
                                             const char *what, char *error, size_t error_size)
{
    const struct data_loop *open = state->loops.current;
    if (open == NULL)
        return 0;
    return error_message(error, error_size,
                         "%s while %s is being iterated: an iteration may not stay open "
                         "across epochs; finish it (its batch requests return 0) or leave it "
                         "(break) first",
                         what, open->name);
}

int64_t cooperative_state_begin_epochs(struct cooperative_state *state, int64_t end,
                                       char *error, size_t error_size)
{
    state->used = true;
    if (cooperative_refuse_open_iteration(state, "an epoch loop cannot begin", error,
                                          error_size) != 0)
        return EPOCH_LOOP_ERROR;
    return epoch_loop_begin(&state->epochs, end, error, error_size);
}

int64_t cooperative_state_next_epoch(struct cooperative_state *state, char *error,
                                     size_t error_size)
{
    char what[64];
    snprintf(what, sizeof what, "epoch %lld cannot end", (long long)state->epochs.current);
    if (state->epochs.running &&
        cooperative_refuse_open_iteration(state, what, error, error_size) != 0)
        return EPOCH_LOOP_ERROR;
    return epoch_loop_next(&state->epochs);
}

int cooperative_state_leave_epochs(struct cooperative_state *state, char *error,
                                   size_t error_size)
{
    char what[64];
    snprintf(what, sizeof what, "the epoch loop cannot be left in epoch %lld",
             (long long)state->epochs.current);
    if (state->epochs.running &&
        cooperative_refuse_open_iteration(state, what, error, error_size) != 0)
        return -1;
    epoch_loop_leave(&state->epochs);
    return 0;
}

int cooperative_state_synchronize(struct cooperative_state *state, char *error,
                                  size_t error_size)
{
    for (size_t i = 0; i < state->accumulator_list.count; i++)
        if (accumulator_sum_updates(state->accumulator_list.items[i], error, error_size) != 0)
            return -1;
    return 0;
}

/* --- capture -------------------------------------------------------------------------- */

static int capture_values(const struct accumulator_dict *dict, size_t *count,
                          struct snapshot_value **values)
{
    *count = 0;
    *values = calloc(dict->count ? dict->count : 1, sizeof **values);
    if (*values == NULL)
        return -1;
    for (size_t i = 0; i < dict->count; i++) {
        (*values)[i].key = strdup(dict->keys[i]);
        if ((*values)[i].key == NULL)
            return -1;
        (*values)[i].value = dict->values[i];
        (*count)++;
    }
    return 0;
}

static int capture_accumulator(const struct accumulator *accumulator,
                               struct snapshot_accumulator *saved)
{
    saved->name = strdup(accumulator->name);
    if (saved->name == NULL || capture_values(&accumulator->results, &saved->value_count,
                                              &saved->values) != 0)
        return -1;
    saved->history = calloc(accumulator->history_count ? accumulator->history_count : 1,
                            sizeof *saved->history);
    if (saved->history == NULL)
        return -1;
    for (size_t h = 0; h < accumulator->history_count; h++) {
        struct snapshot_result_set *set = &saved->history[h];
        saved->history_count++;
        set->epoch = accumulator->history[h].epoch;
        if (capture_values(&accumulator->history[h].values, &set->value_count,
                           &set->values) != 0)
            return -1;
    }
    return 0;
}

static int capture_loop(const struct data_loop *loop, struct snapshot_loop *saved)
{
    saved->name = strdup(loop->name);
    if (saved->name == NULL)
        return -1;
    saved->current_index = loop->current_index;
    saved->end_index = loop->end_index;
    saved->last_positions = calloc(loop->position_count ? loop->position_count : 1,
                                   sizeof *saved->last_positions);
    if (saved->last_positions == NULL)
        return -1;
    for (size_t p = 0; p < loop->position_count; p++) {
        saved->last_positions[p].epoch = loop->last_positions[p].epoch;
        saved->last_positions[p].position = loop->last_positions[p].position;
    }
    saved->position_count = loop->position_count;
    return 0;
}

/* The snapshot keeps a copy of its own: the memory a buffer or a save
 * callback points at stays the trainer's, which may be static, on its
 * stack or reused at the next save (adaptdl.h). */
static int capture_copy_bytes(const void *bytes, size_t size, struct snapshot_named_bytes *saved,
                              char *error, size_t error_size)
{
    saved->bytes = malloc(size ? size : 1);
    if (saved->bytes == NULL)
        return cooperative_out_of_memory(error, error_size, "saving registered state");
    if (size > 0)
        memcpy(saved->bytes, bytes, size);
    saved->size = size;
    return 0;
}

/* Calls a save callback and copies what it hands back; the library never
 * frees the callback's bytes (a static or caller-owned buffer used to be
 * freed at the commit and abort the process). */
static int capture_callback_bytes(const struct registered_state *registered,
                                  struct snapshot_named_bytes *saved, char *error,
                                  size_t error_size)
{
    void *bytes = NULL;
    size_t size = 0;
    if (registered->save(registered->context, &bytes, &size) != 0) {
        return error_message(error, error_size,
                             "registered state \"%s\": its save callback failed",
                             registered->name);
    }
    if (bytes == NULL && size > 0) {
        return error_message(error, error_size,
                             "registered state \"%s\": its save callback gave %zu bytes but "
                             "no pointer to them; accepted: a pointer to size bytes, or size 0",
                             registered->name, size);
    }
    return capture_copy_bytes(bytes, size, saved, error, error_size);
}

static int capture_registered(const struct registered_state *registered,
                              struct snapshot_named_bytes *saved, char *error, size_t error_size)
{
    saved->name = strdup(registered->name);
    if (saved->name == NULL)
        return cooperative_out_of_memory(error, error_size, "saving registered state");
    if (registered->save != NULL)
        return capture_callback_bytes(registered, saved, error, error_size);
    return capture_copy_bytes(registered->buffer, registered->size, saved, error, error_size);
}

int cooperative_state_capture(struct cooperative_state *state, struct adaptdl_snapshot *snapshot,
                              char *error, size_t error_size)
{
    snapshot->cooperative = state->used;
    snapshot->finished_epochs = state->used ? (uint64_t)state->epochs.finished : 0;
    snapshot->cooperative_progress = state->used ? state->progress : 0;
    if (!state->used)
        return 0;
    snapshot->loops =
        calloc(state->loop_list.count ? state->loop_list.count : 1, sizeof *snapshot->loops);
    snapshot->accumulators =
        calloc(state->accumulator_list.count ? state->accumulator_list.count : 1,
               sizeof *snapshot->accumulators);
    snapshot->registered = calloc(state->registered_count ? state->registered_count : 1,
                                  sizeof *snapshot->registered);
    if (snapshot->loops == NULL || snapshot->accumulators == NULL || snapshot->registered == NULL)
        return cooperative_out_of_memory(error, error_size, "capturing the cooperative state");
    for (size_t i = 0; i < state->loop_list.count; i++) {
        snapshot->loop_count++;
        if (capture_loop(state->loop_list.items[i], &snapshot->loops[i]) != 0)
            return cooperative_out_of_memory(error, error_size, "capturing a data loop");
    }
    for (size_t i = 0; i < state->accumulator_list.count; i++) {
        snapshot->accumulator_count++;
        if (capture_accumulator(state->accumulator_list.items[i], &snapshot->accumulators[i]) != 0)
            return cooperative_out_of_memory(error, error_size, "capturing an accumulator");
    }
    for (size_t i = 0; i < state->registered_count; i++) {
        snapshot->registered_count++;
        if (capture_registered(&state->registered[i], &snapshot->registered[i], error,
                               error_size) != 0)
            return -1;
    }
    return 0;
}

/* --- restore -------------------------------------------------------------------------- */

static int restore_values(struct accumulator_dict *dict, const struct snapshot_value *values,
                          size_t count)
{
    accumulator_dict_init(dict);
    for (size_t i = 0; i < count; i++)
        if (accumulator_dict_add(dict, values[i].key, values[i].value) != 0)
            return -1;
    return 0;
}

static int restore_copy(struct cooperative_state *state, const struct adaptdl_snapshot *snapshot)
{
    state->restored.loops = calloc(snapshot->loop_count + 1, sizeof *state->restored.loops);
    state->restored.accumulators = calloc(snapshot->accumulator_count + 1,
                                          sizeof *state->restored.accumulators);
    state->restored.registered = calloc(snapshot->registered_count + 1,
                                        sizeof *state->restored.registered);
    if (!state->restored.loops || !state->restored.accumulators || !state->restored.registered)
        return -1;
    for (size_t i = 0; i < snapshot->loop_count; i++) {
        const struct snapshot_loop *from = &snapshot->loops[i];
        struct restored_loop *to = &state->restored.loops[state->restored.loop_count++];
        to->name = strdup(from->name);
        to->current_index = from->current_index;
        to->end_index = from->end_index;
        to->positions = calloc(from->position_count + 1, sizeof *to->positions);
        if (to->name == NULL || to->positions == NULL)
            return -1;
        for (size_t p = 0; p < from->position_count; p++) {
            to->positions[p].epoch = from->last_positions[p].epoch;
            to->positions[p].position = from->last_positions[p].position;
        }
        to->position_count = from->position_count;
    }
    for (size_t i = 0; i < snapshot->accumulator_count; i++) {
        const struct snapshot_accumulator *from = &snapshot->accumulators[i];
        struct restored_accumulator *to =
            &state->restored.accumulators[state->restored.accumulator_count++];
        to->name = strdup(from->name);
        to->history = calloc(from->history_count + 1, sizeof *to->history);
        if (to->name == NULL || to->history == NULL ||
            restore_values(&to->results, from->values, from->value_count) != 0)
            return -1;
        for (size_t h = 0; h < from->history_count; h++) {
            to->history[h].epoch = from->history[h].epoch;
            to->history_count++;
            if (restore_values(&to->history[h].values, from->history[h].values,
                               from->history[h].value_count) != 0)
                return -1;
        }
    }
    for (size_t i = 0; i < snapshot->registered_count; i++) {
        const struct snapshot_named_bytes *from = &snapshot->registered[i];
        struct restored_bytes *to =
            &state->restored.registered[state->restored.registered_count++];
        to->name = strdup(from->name);
        to->bytes = malloc(from->size ? from->size : 1);
        if (to->name == NULL || to->bytes == NULL)
            return -1;
        memcpy(to->bytes, from->bytes, from->size);
        to->size = from->size;
    }
    return 0;
}

/* The snapshot's epoch-bound part (finished epochs, progress, loops and
 * accumulators) only makes sense from the start of the epoch loop: once it
 * began, the epochs already run would not be skipped, and a loop's saved
 * index or an accumulator's results from a later epoch would leak into the
 * epoch running now.  So a restore that comes after the epoch loop began
 * applies only the registered state (the trainer's own, which goes with
 * the model it just loaded) and says so in one line. */
static bool restore_comes_too_late(const struct cooperative_state *state,
                                   const struct adaptdl_snapshot *snapshot)
{
    if (!state->epochs.begun)
        return false;
    char position[64];
    if (state->epochs.running)
        snprintf(position, sizeof position, "(in epoch %lld)", (long long)state->epochs.current);
    else
        snprintf(position, sizeof position, "(and ended with %lld epochs finished)",
                 (long long)state->epochs.finished);
    log_error("restore: checkpoint %s was loaded after the epoch loop began %s: its %llu "
              "finished epochs, data loops and accumulators are not applied, so epochs that "
              "were finished run again (only its registered state is restored); load the "
              "checkpoint before adaptdl_remaining_epochs_until",
              snapshot->checkpoint_path && snapshot->checkpoint_path[0] != '\0'
                  ? snapshot->checkpoint_path
                  : "(unnamed)",
              position,
              (unsigned long long)snapshot->finished_epochs);
    return true;
}

/* Drops the restored loops and accumulators (a late restore), keeping the
 * registered bytes for state registered from now on. */
static void cooperative_state_forget_restored_epoch_objects(struct cooperative_state *state)
{
    struct cooperative_restored kept = {.registered = state->restored.registered,
                                        .registered_count = state->restored.registered_count};
    state->restored.registered = NULL;
    state->restored.registered_count = 0;
    cooperative_state_forget_restored(state);
    state->restored = kept;
}

static int cooperative_apply_registered_all(struct cooperative_state *state, char *error,
                                            size_t error_size)
{
    for (size_t i = 0; i < state->registered_count; i++)
        if (cooperative_apply_registered(state, &state->registered[i], error, error_size) != 0)
            return -1;
    return 0;
}

int cooperative_state_restore(struct cooperative_state *state,
                              const struct adaptdl_snapshot *snapshot, char *error,
                              size_t error_size)
{
    cooperative_state_forget_restored(state);
    if (!snapshot->cooperative)
        return 0;
    if (restore_copy(state, snapshot) != 0) {
        cooperative_state_forget_restored(state);
        return cooperative_out_of_memory(error, error_size, "restoring the cooperative state");
    }
    if (restore_comes_too_late(state, snapshot)) {
        cooperative_state_forget_restored_epoch_objects(state);
        return cooperative_apply_registered_all(state, error, error_size);
    }
    state->epochs.finished = (int64_t)snapshot->finished_epochs;
    state->progress = snapshot->cooperative_progress;
    for (size_t i = 0; i < state->loop_list.count; i++)
        if (cooperative_apply_loop(state, state->loop_list.items[i]) != 0)
            return cooperative_out_of_memory(error, error_size, "restoring a data loop");
    for (size_t i = 0; i < state->accumulator_list.count; i++)
        if (cooperative_apply_accumulator(state, state->accumulator_list.items[i]) != 0)
            return cooperative_out_of_memory(error, error_size, "restoring an accumulator");
    if (cooperative_apply_registered_all(state, error, error_size) != 0)
        return -1;
    log_debug("restore: cooperative state with %llu finished epochs, %zu loops, %zu "
              "accumulators, %zu registered states", (unsigned long long)snapshot->finished_epochs,
              snapshot->loop_count, snapshot->accumulator_count, snapshot->registered_count);
    return 0;
}
