/* resume_history.c - a job's trained history from its delivery traces, and
 * its comparison with an uninterrupted run's (see resume_history.h). */
#include "resume_history.h"

#include <stdlib.h>
#include <string.h>

#include "error_message.h"
#include "growable_array.h"

void resume_history_init(struct resume_history *history)
{
    *history = (struct resume_history){0};
}

void resume_history_free(struct resume_history *history)
{
    for (size_t i = 0; i < history->file_count; i++) {
        free(history->files[i].name);
        free(history->files[i].deliveries);
    }
    for (size_t i = 0; i < history->commit_count; i++) {
        free(history->commits[i].path);
        free(history->commits[i].bindings);
    }
    free(history->files);
    free(history->commits);
    free(history->runs);
    *history = (struct resume_history){0};
}

/* The index of the file named `name`, added when new; -1 out of memory. */
static long history_file_index(struct resume_history *history, const char *name)
{
    for (size_t i = 0; i < history->file_count; i++)
        if (strcmp(history->files[i].name, name) == 0)
            return (long)i;
    struct history_file *files = growable_array_make_room(
        history->files, history->file_count, &history->file_capacity, sizeof *files, 4);
    if (files == NULL)
        return -1;
    history->files = files;
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    files[history->file_count] = (struct history_file){.name = copy};
    return (long)history->file_count++;
}

static int history_append(struct history_file *file, uint64_t pass,
                          const struct trace_record *record)
{
    struct history_delivery *deliveries = growable_array_make_room(
        file->deliveries, file->count, &file->capacity, sizeof *deliveries, 256);
    if (deliveries == NULL)
        return -1;
    file->deliveries = deliveries;
    deliveries[file->count++] = (struct history_delivery){pass, record->physical,
                                                          record->padding};
    return 0;
}

/* The run's first checkpoint load: of the first trace that has one. */
static const struct trace_event *history_first_load(const struct trace_log *const *traces,
                                                    size_t trace_count)
{
    for (size_t t = 0; t < trace_count; t++)
        for (size_t i = 0; i < traces[t]->count; i++)
            if (traces[t]->events[i].kind == TRACE_EVENT_LOAD)
                return &traces[t]->events[i];
    return NULL;
}

/* The latest commit of that content whose history still stands; -1 none. */
static long history_find_commit(const struct resume_history *history,
                                const struct content_identity *identity)
{
    for (size_t i = history->commit_count; i-- > 0;)
        if (!history->commits[i].superseded &&
            content_identity_equal(&history->commits[i].identity, identity))
            return (long)i;
    return -1;
}

/* Takes every file's list back to where the commit `kept` left it (-1: to
 * nothing), less the records its snapshot counted in flight; the commits
 * after it stood on what is dropped now. */
static void history_take_back(struct resume_history *history, long kept)
{
    for (size_t i = 0; i < history->file_count; i++) {
        size_t length = 0;
        if (kept >= 0) {
            const struct history_commit *commit = &history->commits[kept];
            for (size_t b = 0; b < commit->binding_count; b++) {
                const struct history_binding *binding = &commit->bindings[b];
                if (binding->file != i)
                    continue;
                length = binding->length;
                if (binding->bound)
                    length = binding->in_flight < length ? length - (size_t)binding->in_flight
                                                         : 0;
            }
        }
        if (length < history->files[i].count)
            history->files[i].count = length;
    }
    for (size_t i = (size_t)(kept + 1); i < history->commit_count; i++)
        history->commits[i].superseded = true;
}

/* A B line waiting for its C line. */
struct pending_binding {
    struct content_identity identity;
    struct history_binding binding;
};

struct pending_bindings {
    struct pending_binding *items;
    size_t count, capacity;
};

static int history_note_binding(struct resume_history *history,
                                struct pending_bindings *pending,
                                const struct trace_event *event)
{
    long file = history_file_index(history, event->name);
    if (file < 0)
        return -1;
    /* a later capture of the same content replaces an earlier one that
     * was never committed (its snapshot failed to be written) */
    struct pending_binding *slot = NULL;
    for (size_t i = 0; i < pending->count; i++)
        if (pending->items[i].binding.file == (size_t)file &&
            content_identity_equal(&pending->items[i].identity, &event->identity))
            slot = &pending->items[i];
    if (slot == NULL) {
        struct pending_binding *items = growable_array_make_room(
            pending->items, pending->count, &pending->capacity, sizeof *items, 8);
        if (items == NULL)
            return -1;
        pending->items = items;
        slot = &items[pending->count++];
    }
    *slot = (struct pending_binding){
        .identity = event->identity,
        .binding = {.file = (size_t)file, .length = history->files[file].count, .bound = true,
                    .train = event->train, .pass = event->pass, .index = event->index,
                    .pass_length = event->length, .in_flight = event->in_flight}};
    return 0;
}

static int history_note_commit(struct resume_history *history, struct pending_bindings *pending,
                               const struct trace_event *event)
{
    struct history_commit *commits = growable_array_make_room(
        history->commits, history->commit_count, &history->commit_capacity, sizeof *commits, 16);
    if (commits == NULL)
        return -1;
    history->commits = commits;
    struct history_commit commit = {
        .identity = event->identity,
        .path = strdup(event->path),
        .run = history->run_count - 1,
        .ordinal = history->commit_count + 1,
        .bindings = calloc(history->file_count ? history->file_count : 1,
                           sizeof(struct history_binding)),
        .binding_count = history->file_count,
    };
    if (commit.path == NULL || commit.bindings == NULL) {
        free(commit.path);
        free(commit.bindings);
        return -1;
    }
    for (size_t i = 0; i < history->file_count; i++)
        commit.bindings[i] = (struct history_binding){.file = i,
                                                      .length = history->files[i].count};
    size_t kept = 0;
    for (size_t i = 0; i < pending->count; i++) {
        if (content_identity_equal(&pending->items[i].identity, &event->identity))
            commit.bindings[pending->items[i].binding.file] = pending->items[i].binding;
        else
            pending->items[kept++] = pending->items[i];
    }
    pending->count = kept;
    commits[history->commit_count++] = commit;
    return 0;
}

static int history_add_trace(struct resume_history *history, struct history_run *run,
                             const struct trace_log *trace)
{
    struct pending_bindings pending = {0};
    int status = 0;
    for (size_t i = 0; i < trace->count && status == 0; i++) {
        const struct trace_event *event = &trace->events[i];
        switch (event->kind) {
        case TRACE_EVENT_DELIVERY: {
            long file = history_file_index(history, event->name);
            if (file < 0) {
                status = -1;
                break;
            }
            for (size_t r = 0; r < event->record_count && status == 0; r++)
                status = history_append(&history->files[file], event->pass, &event->records[r]);
            run->deliveries += event->record_count;
            break;
        }
        case TRACE_EVENT_BINDING:
            status = history_note_binding(history, &pending, event);
            break;
        case TRACE_EVENT_COMMIT:
            status = history_note_commit(history, &pending, event);
            if (status == 0)
                run->commit_count++;
            break;
        case TRACE_EVENT_STOP:
            run->stopped = true;
            break;
        case TRACE_EVENT_START:
        case TRACE_EVENT_LOAD:
            break;
        }
    }
    free(pending.items);
    run->cut_short += trace->cut_short;
    return status;
}

int resume_history_add_run(struct resume_history *history, const struct trace_log *const *traces,
                           size_t trace_count, char *error, size_t error_size)
{
    struct history_run *runs = growable_array_make_room(
        history->runs, history->run_count, &history->run_capacity, sizeof *runs, 8);
    if (runs == NULL)
        return error_message(error, error_size, "comparing traces: out of memory");
    history->runs = runs;
    struct history_run *run = &runs[history->run_count++];
    *run = (struct history_run){.start = HISTORY_START_FRESH,
                                .first_commit = history->commit_count};
    const struct trace_event *load = history_first_load(traces, trace_count);
    long kept = -1;
    if (load != NULL) {
        run->loaded = load->identity;
        kept = history_find_commit(history, &load->identity);
        run->start = kept >= 0 ? HISTORY_START_RESTORED : HISTORY_START_UNKNOWN;
        run->restored_commit = kept >= 0 ? (size_t)kept : 0;
    }
    history_take_back(history, kept);
    for (size_t t = 0; t < trace_count; t++)
        if (history_add_trace(history, run, traces[t]) != 0)
            return error_message(error, error_size, "comparing traces: out of memory");
    return 0;
}

uint64_t resume_history_records(const struct resume_history *history, uint64_t *padding)
{
    uint64_t records = 0, padded = 0;
    for (size_t i = 0; i < history->file_count; i++) {
        records += history->files[i].count;
        for (size_t d = 0; d < history->files[i].count; d++)
            padded += history->files[i].deliveries[d].padding;
    }
    if (padding != NULL)
        *padding = padded;
    return records;
}

uint64_t resume_history_passes(const struct resume_history *history, size_t file)
{
    uint64_t passes = 0;
    if (file >= history->file_count)
        return 0;
    for (size_t d = 0; d < history->files[file].count; d++)
        if (history->files[file].deliveries[d].pass + 1 > passes)
            passes = history->files[file].deliveries[d].pass + 1;
    return passes;
}

/* --- comparison ------------------------------------------------------------- */

struct compare_key {
    const char *name;
    uint64_t pass;
    bool padding;
    uint64_t physical;
};

static int compare_keys(const void *left, const void *right)
{
    const struct compare_key *a = left, *b = right;
    int by_name = strcmp(a->name, b->name);
    if (by_name != 0)
        return by_name;
    if (a->pass != b->pass)
        return a->pass < b->pass ? -1 : 1;
    if (a->padding != b->padding)
        return a->padding ? 1 : -1;
    if (a->physical != b->physical)
        return a->physical < b->physical ? -1 : 1;
    return 0;
}

/* Every delivery of the history as a key, sorted; NULL when out of memory
 * (or for an empty history, with *count 0). */
static struct compare_key *compare_keys_of(const struct resume_history *history, size_t *count)
{
    size_t total = (size_t)resume_history_records(history, NULL);
    *count = total;
    if (total == 0)
        return NULL;
    struct compare_key *keys = malloc(total * sizeof *keys);
    if (keys == NULL)
        return NULL;
    size_t used = 0;
    for (size_t i = 0; i < history->file_count; i++)
        for (size_t d = 0; d < history->files[i].count; d++) {
            const struct history_delivery *delivery = &history->files[i].deliveries[d];
            keys[used++] = (struct compare_key){history->files[i].name, delivery->pass,
                                                delivery->padding, delivery->physical};
        }
    qsort(keys, total, sizeof *keys, compare_keys);
    return keys;
}

static bool same_group(const struct compare_key *a, const struct compare_key *b)
{
    return a->pass == b->pass && strcmp(a->name, b->name) == 0;
}

/* The end of the group (file and pass) that starts at `start`. */
static size_t group_end(const struct compare_key *keys, size_t count, size_t start)
{
    size_t end = start;
    while (end < count && same_group(&keys[start], &keys[end]))
        end++;
    return end;
}

/* Counts one group: the records of reference[0, reference_count) and
 * run[0, run_count), each sorted with the padding last. */
static void compare_group(const struct compare_key *reference, size_t reference_count,
                          const struct compare_key *run, size_t run_count,
                          struct pass_difference *difference)
{
    size_t i = 0, j = 0;
    while (i < reference_count && !reference[i].padding)
        i++;
    size_t reference_end = i;
    while (j < run_count && !run[j].padding)
        j++;
    size_t run_end = j;
    difference->padding = run_count - run_end;
    difference->reference_records = reference_end;
    difference->run_records = run_end;
    i = j = 0;
    while (i < reference_end || j < run_end) {
        uint64_t value = i < reference_end && (j >= run_end ||
                                               reference[i].physical <= run[j].physical)
                             ? reference[i].physical : run[j].physical;
        uint64_t in_reference = 0, in_run = 0;
        for (; i < reference_end && reference[i].physical == value; i++)
            in_reference++;
        for (; j < run_end && run[j].physical == value; j++)
            in_run++;
        if (in_reference > in_run)
            difference->lost += in_reference - in_run;
        else
            difference->repeated += in_run - in_reference;
    }
}

int resume_compare(const struct resume_history *reference, const struct resume_history *run,
                   struct resume_comparison *comparison, char *error, size_t error_size)
{
    *comparison = (struct resume_comparison){0};
    size_t reference_count, run_count;
    struct compare_key *reference_keys = compare_keys_of(reference, &reference_count);
    struct compare_key *run_keys = compare_keys_of(run, &run_count);
    if ((reference_count > 0 && reference_keys == NULL) || (run_count > 0 && run_keys == NULL)) {
        free(reference_keys);
        free(run_keys);
        return error_message(error, error_size, "comparing traces: out of memory");
    }
    size_t capacity = 0;
    size_t i = 0, j = 0;
    int status = 0;
    while (i < reference_count || j < run_count) {
        int order = i >= reference_count ? 1 : j >= run_count ? -1 : 0;
        if (order == 0 && !same_group(&reference_keys[i], &run_keys[j])) {
            struct compare_key left = reference_keys[i], right = run_keys[j];
            left.padding = right.padding = false;
            left.physical = right.physical = 0;
            order = compare_keys(&left, &right);
        }
        size_t reference_end = order <= 0 ? group_end(reference_keys, reference_count, i) : i;
        size_t run_end = order >= 0 ? group_end(run_keys, run_count, j) : j;
        const struct compare_key *first = order <= 0 ? &reference_keys[i] : &run_keys[j];
        struct pass_difference difference = {.name = first->name, .pass = first->pass};
        compare_group(reference_keys + i, reference_end - i, run_keys + j, run_end - j,
                      &difference);
        struct pass_difference *passes = growable_array_make_room(
            comparison->passes, comparison->count, &capacity, sizeof *passes, 8);
        if (passes == NULL) {
            status = error_message(error, error_size, "comparing traces: out of memory");
            break;
        }
        comparison->passes = passes;
        passes[comparison->count++] = difference;
        comparison->lost += difference.lost;
        comparison->repeated += difference.repeated;
        comparison->padding += difference.padding;
        i = reference_end;
        j = run_end;
    }
    free(reference_keys);
    free(run_keys);
    if (status != 0)
        resume_comparison_free(comparison);
    return status;
}

void resume_comparison_free(struct resume_comparison *comparison)
{
    free(comparison->passes);
    *comparison = (struct resume_comparison){0};
}
