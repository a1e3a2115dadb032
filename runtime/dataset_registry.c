/* dataset_registry.c - registered data files and snapshot capture/restore
 * (see dataset_registry.h). */
#include "dataset_registry.h"
#include "error_message.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "delivered_set.h"
#include "log.h"

void dataset_registry_init(struct dataset_registry *registry, enum resume_mode resume)
{
    memset(registry, 0, sizeof *registry);
    pthread_mutex_init(&registry->lock, NULL);
    registry->files_tail = &registry->files;
    registry->resume = resume;
}

int dataset_registry_share_across_fork(struct dataset_registry *registry, size_t bytes)
{
    if (registry->arena != NULL)
        return 0;
    registry->arena = pass_state_arena_create(bytes);
    return registry->arena != NULL ? 0 : -1;
}

/* A deep copy of a position (its name and its delivered set): 0, or -1
 * when out of memory, with *copy holding nothing to free. */
static int dataset_registry_copy_position(struct snapshot_file_position *copy,
                                          const struct snapshot_file_position *position)
{
    *copy = *position;
    copy->name = strdup(position->name);
    copy->delivered_after = NULL;
    if (position->delivered_after_size > 0)
        copy->delivered_after = malloc(position->delivered_after_size);
    if (copy->name == NULL ||
        (position->delivered_after_size > 0 && copy->delivered_after == NULL)) {
        free(copy->name);
        free(copy->delivered_after);
        *copy = (struct snapshot_file_position){0};
        return -1;
    }
    if (position->delivered_after_size > 0)
        memcpy(copy->delivered_after, position->delivered_after,
               position->delivered_after_size);
    return 0;
}

struct dataset_file *dataset_registry_find(struct dataset_registry *registry,
                                           uint64_t device, uint64_t inode)
{
    for (struct dataset_file *file = registry->files; file; file = file->next)
        if (file->device == device && file->inode == inode)
            return file;
    return NULL;
}

static int dataset_registry_check_same_dataset(const struct dataset_file *file,
                                               const struct snapshot_file_position *position,
                                               char *error, size_t error_size)
{
    if (position->record_count == file->record_count)
        return 0;
    return error_message(
        error, error_size,
        "data file %s has %llu records but the restored snapshot was taken on %llu "
        "records of \"%s\": refusing to resume into different data; restore the "
        "original dataset or remove the trainer checkpoint to start fresh",
        file->path, (unsigned long long)file->record_count,
        (unsigned long long)position->record_count, position->name);
}

/* A loader that checks a count= field (llm.c asserts a positive token
 * count) stops at the first skipped pass, whose count reads 0: say at once
 * what to do instead, once per file, rather than leave the user with the
 * loader's assertion. */
static void dataset_registry_warn_empty_count_replay(struct dataset_file *file)
{
    if (file->warned_empty_count_replay || !dataset_view_replay_empties_count_field(file))
        return;
    file->warned_empty_count_replay = true;
    log_warn("restore: replay shows the passes before pass %llu of %s as empty files, with "
             "its count= field reading 0; a loader that requires a positive count fails on "
             "them: set ADAPTDL_RESUME=continue and let the trainer restore its own epoch "
             "counter", (unsigned long long)file->shared->tracker.bound_pass, file->path);
}

/* Applies one position to a file under the file's lock. */
static int dataset_registry_apply_position(struct dataset_registry *registry,
                                           struct dataset_file *file,
                                           const struct snapshot_file_position *position,
                                           char *error, size_t error_size)
{
    if (dataset_registry_check_same_dataset(file, position, error, error_size) != 0)
        return -1;
    dataset_file_lock(file);
    bool applied = dataset_view_restore(file, registry->resume, position->pass,
                                        position->current_index, position->pass_length);
    bool selected = applied && position->delivered_after_size > 0 &&
                    dataset_view_select_undelivered(file, position->pass_length,
                                                    position->delivered_after,
                                                    position->delivered_after_size);
    dataset_file_unlock(file);
    if (selected)
        log_debug("restore: %s pass %llu serves the %llu records from index %llu its "
                  "snapshot did not name delivered", file->path,
                  (unsigned long long)position->pass,
                  (unsigned long long)file->shared->tracker.bound_selected,
                  (unsigned long long)position->current_index);
    else if (applied && position->delivered_after_size > 0)
        log_debug("restore: %s pass %llu serves every record from index %llu, also those "
                  "its snapshot named delivered after it", file->path,
                  (unsigned long long)position->pass,
                  (unsigned long long)position->current_index);
    if (!applied) {
        log_warn("restore: %s has already delivered records in this run; its position "
                 "is left as it is", file->path);
        return 0;
    }
    log_debug("restore: %s bound to pass %llu index %llu of %llu (%s); this pass now "
              "starts at %llu with %llu records on replica %u of %u",
              file->path, (unsigned long long)position->pass,
              (unsigned long long)position->current_index,
              (unsigned long long)file->shared->tracker.bound_length,
              registry->resume == RESUME_REPLAY ? "replay" : "continue",
              (unsigned long long)file->view_start_index,
              (unsigned long long)file->view_length, file->rank, file->replicas);
    dataset_registry_warn_empty_count_replay(file);
    return 0;
}

/* The unapplied pending position for a file: same basename, preferably the
 * same record count (so that two data sets whose files share a basename do
 * not swap positions); the first in snapshot order among equals.  NULL when
 * the snapshot does not name the file. */
static struct pending_position *dataset_registry_match_pending(struct dataset_registry *registry,
                                                               const struct dataset_file *file)
{
    struct pending_position *same_name = NULL;
    for (size_t i = 0; i < registry->pending_count; i++) {
        struct pending_position *pending = &registry->pending[i];
        if (pending->applied || strcmp(pending->position.name, file->basename) != 0)
            continue;
        if (pending->position.record_count == file->record_count)
            return pending;
        if (same_name == NULL)
            same_name = pending;
    }
    return same_name;
}

/* A file the restored snapshot does not name, registered while a position of
 * the same role is still waiting for its file: most likely the dataset was
 * renamed since the checkpoint.  Positions are keyed by basename, and so is
 * the shuffle order, so taking the waiting position would be a guess
 * (adaptshim(7) "Checkpoint binding"): the file starts fresh, loudly. */
static void dataset_registry_warn_not_in_snapshot(struct dataset_registry *registry,
                                                  const struct dataset_file *file)
{
    if (!registry->restored)
        return;
    for (size_t i = 0; i < registry->pending_count; i++)
        if (strcmp(registry->pending[i].position.name, file->basename) == 0)
            return; /* named (its position may have gone to a namesake) */
    for (size_t i = 0; i < registry->pending_count; i++) {
        const struct pending_position *pending = &registry->pending[i];
        if (pending->applied || pending->position.role != (uint32_t)file->entry->role)
            continue;
        log_warn("restore: data file %s (%llu records) is not named in the restored snapshot, "
                 "whose position for \"%s\" (%llu records) no file of this run has taken: %s "
                 "starts fresh; positions and the shuffle order follow the file's name, so a "
                 "dataset renamed since the checkpoint must get its name back to resume",
                 file->path, (unsigned long long)file->record_count, pending->position.name,
                 (unsigned long long)pending->position.record_count, file->basename);
        return;
    }
}

/* The order of file locks taken together (dataset_registry_lock_files_for_fork):
 * by identity, the same in every process of the job whatever order each
 * registered the files in. */
static bool dataset_file_locks_before(const struct dataset_file *a, const struct dataset_file *b)
{
    if (a->device != b->device)
        return a->device < b->device;
    return a->inode < b->inode;
}

/* Registration is rare and files few: an insertion into a sorted chain. */
static void dataset_registry_link_in_lock_order(struct dataset_registry *registry,
                                                struct dataset_file *file)
{
    struct dataset_file **place = &registry->files_in_lock_order;
    while (*place != NULL && dataset_file_locks_before(*place, file))
        place = &(*place)->next_in_lock_order;
    file->next_in_lock_order = *place;
    *place = file;
}

void dataset_registry_lock_files_for_fork(struct dataset_registry *registry)
{
    for (struct dataset_file *file = registry->files_in_lock_order; file;
         file = file->next_in_lock_order)
        dataset_file_lock_without_refresh(file);
}

void dataset_registry_unlock_files_after_fork(struct dataset_registry *registry)
{
    for (struct dataset_file *file = registry->files_in_lock_order; file;
         file = file->next_in_lock_order)
        dataset_file_unlock(file);
}

int dataset_registry_add(struct dataset_registry *registry, struct dataset_file *file,
                         char *error, size_t error_size)
{
    if (registry->files_tail == NULL) {  /* zero-initialised, never init'ed */
        registry->files_tail = &registry->files;
        while (*registry->files_tail != NULL)
            registry->files_tail = &(*registry->files_tail)->next;
    }
    if (registry->arena != NULL &&
        dataset_file_share_pass_state_in_arena(file, registry->arena) != 0 &&
        !registry->warned_arena_full) {
        registry->warned_arena_full = true;
        log_warn("data file %s: no room left to share its pass state with processes "
                 "forked before it was opened (%s): a DataLoader worker that opens it "
                 "first keeps its deliveries to itself", file->path, strerror(errno));
    }
    file->next = NULL;
    *registry->files_tail = file;
    registry->files_tail = &file->next;
    registry->file_count++;
    dataset_registry_link_in_lock_order(registry, file);
    struct pending_position *pending = dataset_registry_match_pending(registry, file);
    if (pending == NULL) {
        dataset_registry_warn_not_in_snapshot(registry, file);
        return 0;
    }
    pending->applied = true;
    if (file->pass_state_adopted) {
        /* the process that registered it first applied this position */
        return dataset_registry_check_same_dataset(file, &pending->position, error,
                                                   error_size);
    }
    return dataset_registry_apply_position(registry, file, &pending->position, error,
                                           error_size);
}

uint64_t dataset_registry_epoch(struct dataset_registry *registry)
{
    uint64_t epoch = 0;
    pthread_mutex_lock(&registry->lock);
    for (struct dataset_file *file = registry->files; file; file = file->next) {
        uint64_t pass = pass_tracker_current_pass(&file->shared->tracker);
        if (file->entry->role == DATA_ROLE_TRAIN && pass > epoch)
            epoch = pass;
    }
    pthread_mutex_unlock(&registry->lock);
    return epoch;
}

/* A reader out of order binds the set of records it consumed, not only
 * their in-order prefix (delivered_set.h).  File lock held. */
static int dataset_registry_capture_delivered_set(struct dataset_file *file,
                                                  uint64_t unconsumed,
                                                  struct snapshot_file_position *position)
{
    struct dataset_pass_state *shared = file->shared;
    struct delivered_set set;
    int status = delivered_set_capture(&shared->tracker, &shared->delivery, &shared->selection,
                                       unconsumed, &set);
    if (status <= 0)
        return status;
    position->pass = set.pass;
    position->pass_length = set.pass_length;
    position->current_index = set.current_index;
    position->delivered_after = set.bytes;
    position->delivered_after_size = set.size;
    log_debug("snapshot: %s pass %llu binds index %llu and %zu bytes of records delivered "
              "after it (a reader in its own order)", file->path,
              (unsigned long long)position->pass, (unsigned long long)set.current_index,
              set.size);
    return 0;
}

int dataset_registry_capture(struct dataset_registry *registry,
                             unconsumed_records_fn unconsumed, void *context,
                             struct adaptdl_snapshot *snapshot)
{
    size_t capacity = registry->file_count + registry->pending_count;
    snapshot->files = calloc(capacity ? capacity : 1, sizeof *snapshot->files);
    if (snapshot->files == NULL)
        return -1;
    snapshot->file_count = 0;
    for (struct dataset_file *file = registry->files; file; file = file->next) {
        struct snapshot_file_position *position = &snapshot->files[snapshot->file_count];
        position->name = strdup(file->basename);
        if (position->name == NULL)
            return -1;
        snapshot->file_count++;
        uint64_t unconsumed_records = unconsumed ? unconsumed(file, context) : 0;
        dataset_file_lock(file);
        bool moves_start = dataset_view_end_moves_start(file);
        if (dataset_view_end_pass_finished_by_readers(file)) {
            if (moves_start)
                log_debug("snapshot: the trainer's count of %s was delivered and its readers "
                          "are done with it: pass %llu goes on from index %llu", file->path,
                          (unsigned long long)file->view_pass,
                          (unsigned long long)file->view_start_index);
            else
                log_debug("snapshot: every record of pass %llu of %s was delivered and its "
                          "readers are done with it: the pass is over",
                          (unsigned long long)file->shared->tracker.pass - 1, file->path);
        }
        position->record_count = file->record_count;
        position->role = (uint32_t)file->entry->role;
        pass_tracker_position(&file->shared->tracker, unconsumed_records, &position->pass,
                              &position->current_index, &position->pass_length);
        if (dataset_registry_capture_delivered_set(file, unconsumed_records, position) != 0) {
            dataset_file_unlock(file);
            return -1;
        }
        delivery_trace_binding(&snapshot->binding, file, position, unconsumed_records);
        dataset_file_unlock(file);
    }
    /* Files restored but not touched yet in this run keep their bound
     * position: the trainer has consumed nothing new from them. */
    for (size_t i = 0; i < registry->pending_count; i++) {
        if (registry->pending[i].applied)
            continue;
        if (dataset_registry_copy_position(&snapshot->files[snapshot->file_count],
                                           &registry->pending[i].position) != 0)
            return -1;
        snapshot->file_count++;
    }
    /* The epoch as the snapshot binds it: while replay skips towards a
     * restored pass, the live pass counters are behind the positions. */
    snapshot->epoch = 0;
    for (size_t i = 0; i < snapshot->file_count; i++)
        if (snapshot->files[i].role == DATA_ROLE_TRAIN &&
            snapshot->files[i].pass > snapshot->epoch)
            snapshot->epoch = snapshot->files[i].pass;
    return 0;
}

static void dataset_registry_clear_pending(struct dataset_registry *registry)
{
    for (size_t i = 0; i < registry->pending_count; i++) {
        free(registry->pending[i].position.name);
        free(registry->pending[i].position.delivered_after);
    }
    free(registry->pending);
    registry->pending = NULL;
    registry->pending_count = 0;
}

int dataset_registry_restore(struct dataset_registry *registry,
                             const struct adaptdl_snapshot *snapshot,
                             char *error, size_t error_size)
{
    dataset_registry_clear_pending(registry);
    registry->pending = calloc(snapshot->file_count ? snapshot->file_count : 1,
                               sizeof *registry->pending);
    if (registry->pending == NULL) {
        return error_message(error, error_size, "out of memory restoring a snapshot");
    }
    for (size_t i = 0; i < snapshot->file_count; i++) {
        struct pending_position *pending = &registry->pending[registry->pending_count];
        if (dataset_registry_copy_position(&pending->position, &snapshot->files[i]) != 0)
            return error_message(error, error_size, "out of memory restoring a snapshot");
        registry->pending_count++;
    }
    registry->restored = true;
    registry->restored_sequence = snapshot->sequence;
    for (struct dataset_file *file = registry->files; file; file = file->next) {
        struct pending_position *pending = dataset_registry_match_pending(registry, file);
        if (pending == NULL)
            continue;
        pending->applied = true;
        if (dataset_registry_apply_position(registry, file, &pending->position, error,
                                            error_size) != 0)
            return -1;
    }
    /* only once every registered file has taken its position */
    for (struct dataset_file *file = registry->files; file; file = file->next)
        dataset_registry_warn_not_in_snapshot(registry, file);
    return 0;
}
