/* test_dataset_registry.c - registered data files, snapshot capture and
 * restore (adaptshim(7) "CHECKPOINT BINDING").
 *
 * Capture reports (pass, current_index) per file and the epoch; restore
 * re-fixes registered files that have not delivered a record, keeps the
 * positions of files not registered yet and applies them when they are
 * (matched by basename), refuses a different record count, and keeps
 * untouched pending positions in later captures.  The whole-run tests go
 * through real cursors and bytes: a run reads part of a pass, a snapshot is
 * captured, and runs with other replica counts restore it and finish; every
 * record of the pass is read exactly once plus the padding. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataset_registry.h"
#include "log.h"
#include "view_cursor.h"

#define DR_SEED 99

static unsigned char *dr_records(uint64_t header, uint64_t count, uint64_t *size)
{
    *size = header + 8 * count;
    unsigned char *bytes = malloc(*size ? *size : 1);
    cr_assert_not_null(bytes);
    memset(bytes, 'H', header);
    for (uint64_t index = 0; index < count; index++)
        memcpy(bytes + header + 8 * index, &index, 8);
    return bytes;
}

static struct data_entry dr_entry(uint64_t header, enum data_role role)
{
    return (struct data_entry){
        .record_size = 8,
        .header_size = header,
        .role = role,
        .shuffle = true,
        .shard = true,
        .tail = TAIL_ERROR,
    };
}

/* Creates and registers a file; returns the add status through *status. */
static struct dataset_file *dr_add(struct dataset_registry *registry,
                                   const struct data_entry *entry, const char *path,
                                   const unsigned char *bytes, uint64_t size,
                                   uint32_t replicas, uint32_t rank, uint64_t inode,
                                   int *status, char *error, size_t error_size)
{
    struct dataset_file *file = malloc(sizeof *file);
    cr_assert_not_null(file);
    char init_error[256] = "";
    cr_assert_eq(dataset_file_init(file, entry, path, bytes, size, DR_SEED, replicas, rank,
                                   init_error, sizeof init_error), 0, "%s", init_error);
    file->device = 1;
    file->inode = inode;
    pthread_mutex_lock(&registry->lock);
    *status = dataset_registry_add(registry, file, error, error_size);
    pthread_mutex_unlock(&registry->lock);
    return file;
}

static struct dataset_file *dr_add_ok(struct dataset_registry *registry,
                                      const struct data_entry *entry, const char *path,
                                      const unsigned char *bytes, uint64_t size,
                                      uint32_t replicas, uint32_t rank, uint64_t inode)
{
    char error[512] = "";
    int status;
    struct dataset_file *file = dr_add(registry, entry, path, bytes, size, replicas, rank,
                                       inode, &status, error, sizeof error);
    cr_assert_eq(status, 0, "dataset_registry_add: %s", error);
    return file;
}

static void dr_release(struct dataset_registry *registry)
{
    struct dataset_file *file = registry->files;
    while (file != NULL) {
        struct dataset_file *next = file->next;
        dataset_file_release(file);
        free(file);
        file = next;
    }
    for (size_t i = 0; i < registry->pending_count; i++) {
        free(registry->pending[i].position.name);
        free(registry->pending[i].position.delivered_after);
    }
    free(registry->pending);
    pass_state_arena_destroy(registry->arena);
    pthread_mutex_destroy(&registry->lock);
    memset(registry, 0, sizeof *registry);
}

static void dr_capture(struct dataset_registry *registry, unconsumed_records_fn unconsumed,
                       void *context, struct adaptdl_snapshot *snapshot)
{
    memset(snapshot, 0, sizeof *snapshot);
    pthread_mutex_lock(&registry->lock);
    int status = dataset_registry_capture(registry, unconsumed, context, snapshot);
    pthread_mutex_unlock(&registry->lock);
    cr_assert_eq(status, 0);
}

static int dr_restore(struct dataset_registry *registry, const struct adaptdl_snapshot *snapshot,
                      char *error, size_t error_size)
{
    pthread_mutex_lock(&registry->lock);
    int status = dataset_registry_restore(registry, snapshot, error, error_size);
    pthread_mutex_unlock(&registry->lock);
    return status;
}

static const struct snapshot_file_position *dr_find(const struct adaptdl_snapshot *snapshot,
                                                    const char *name)
{
    const struct snapshot_file_position *found = NULL;
    for (size_t i = 0; i < snapshot->file_count; i++)
        if (strcmp(snapshot->files[i].name, name) == 0) {
            cr_assert_null(found, "%s is in the snapshot twice", name);
            found = &snapshot->files[i];
        }
    cr_assert_not_null(found, "%s is not in the snapshot", name);
    return found;
}

static void dr_expect_position(const struct adaptdl_snapshot *snapshot, const char *name,
                               uint64_t pass, uint64_t index)
{
    const struct snapshot_file_position *position = dr_find(snapshot, name);
    cr_expect_eq(position->pass, pass, "%s: pass %llu, expected %llu", name,
                 (unsigned long long)position->pass, (unsigned long long)pass);
    cr_expect_eq(position->current_index, index, "%s: index %llu, expected %llu", name,
                 (unsigned long long)position->current_index, (unsigned long long)index);
}

/* A snapshot built by hand, as a restore would decode it. */
static void dr_snapshot(struct adaptdl_snapshot *snapshot, size_t count, const char **names,
                        const uint64_t *record_counts, const uint64_t *passes,
                        const uint64_t *indices)
{
    memset(snapshot, 0, sizeof *snapshot);
    snapshot->version = STATE_FORMAT_VERSION;
    snapshot->seed = DR_SEED;
    snapshot->files = calloc(count, sizeof *snapshot->files);
    cr_assert_not_null(snapshot->files);
    snapshot->file_count = count;
    for (size_t i = 0; i < count; i++) {
        snapshot->files[i].name = strdup(names[i]);
        snapshot->files[i].record_count = record_counts[i];
        snapshot->files[i].pass = passes[i];
        snapshot->files[i].current_index = indices[i];
        snapshot->files[i].role = DATA_ROLE_TRAIN;
    }
}

static void dr_read(struct view_cursor *cursor, size_t size)
{
    unsigned char buffer[512];
    cr_assert_leq(size, sizeof buffer);
    size_t total = 0;
    while (total < size) {   /* reads may be short, at the header's end */
        ssize_t got = view_cursor_read(cursor, buffer + total, size - total);
        cr_assert_gt(got, 0);
        total += (size_t)got;
    }
}

/* Reads records until the pass ends (read returns 0) or `limit` records;
 * counts each record index read.  The header is read first if not yet. */
static uint64_t dr_read_records(struct view_cursor *cursor, uint64_t header, uint64_t limit,
                                unsigned *counts, uint64_t count)
{
    unsigned char buffer[64];
    if (cursor->offset < header)
        dr_read(cursor, header - cursor->offset);
    uint64_t records = 0;
    while (records < limit) {
        ssize_t got = view_cursor_read(cursor, buffer, 8);
        if (got == 0)
            break;
        cr_assert_eq(got, 8);
        uint64_t index;
        memcpy(&index, buffer, 8);
        cr_assert_lt(index, count);
        if (counts != NULL)
            counts[index]++;
        records++;
    }
    return records;
}

Test(dataset_registry, find_by_device_and_inode)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    uint64_t size;
    unsigned char *bytes = dr_records(0, 4, &size);
    struct data_entry entry = dr_entry(0, DATA_ROLE_TRAIN);
    struct dataset_file *a = dr_add_ok(&registry, &entry, "/d/a.bin", bytes, size, 1, 0, 10);
    struct dataset_file *b = dr_add_ok(&registry, &entry, "/d/b.bin", bytes, size, 1, 0, 11);
    cr_expect_eq(dataset_registry_find(&registry, 1, 10), a);
    cr_expect_eq(dataset_registry_find(&registry, 1, 11), b);
    cr_expect_null(dataset_registry_find(&registry, 2, 10));
    cr_expect_eq(registry.file_count, 2);
    cr_expect_eq(registry.files, a, "files are kept in registration order");
    dr_release(&registry);
    free(bytes);
}

Test(dataset_registry, capture_reports_each_file_and_the_train_epoch)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    uint64_t size;
    unsigned char *bytes = dr_records(4, 20, &size);
    struct data_entry train = dr_entry(4, DATA_ROLE_TRAIN);
    struct data_entry eval = dr_entry(4, DATA_ROLE_EVAL);
    struct dataset_file *a = dr_add_ok(&registry, &train, "/d/a.bin", bytes, size, 2, 0, 1);
    struct dataset_file *b = dr_add_ok(&registry, &train, "/d/b.bin", bytes, size, 2, 0, 2);
    struct dataset_file *c = dr_add_ok(&registry, &eval, "/d/c.bin", bytes, size, 2, 0, 3);
    struct view_cursor ca, cb, cc;
    view_cursor_open(&ca, a);
    view_cursor_open(&cb, b);
    view_cursor_open(&cc, c);
    cr_assert_eq(dr_read_records(&ca, 4, 3, NULL, 20), 3);
    dr_read_records(&cb, 4, UINT64_MAX, NULL, 20);
    cr_assert_eq(view_cursor_seek(&cb, 0, SEEK_SET), 0);
    cr_assert_eq(dr_read_records(&cb, 4, 1, NULL, 20), 1);
    for (int pass = 0; pass < 5; pass++) {
        dr_read_records(&cc, 4, UINT64_MAX, NULL, 20);
        cr_assert_eq(view_cursor_seek(&cc, 0, SEEK_SET), 0);
    }
    struct adaptdl_snapshot snapshot;
    dr_capture(&registry, NULL, NULL, &snapshot);
    cr_assert_eq(snapshot.file_count, 3);
    dr_expect_position(&snapshot, "a.bin", 0, 6);
    dr_expect_position(&snapshot, "b.bin", 1, 2);
    dr_expect_position(&snapshot, "c.bin", 5, 0);
    cr_expect_eq(dr_find(&snapshot, "a.bin")->record_count, 20);
    cr_expect_eq(dr_find(&snapshot, "c.bin")->role, DATA_ROLE_EVAL);
    cr_expect_eq(snapshot.epoch, 1, "eval passes do not count");
    cr_expect_eq(dataset_registry_epoch(&registry), 1);
    cr_expect_str_eq(snapshot.files[0].name, "a.bin", "registration order");
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
}

static uint64_t dr_two_unconsumed(struct dataset_file *file, void *context)
{
    (void)file;
    (*(int *)context)++;
    return 2;
}

Test(dataset_registry, capture_subtracts_unconsumed_records)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    uint64_t size;
    unsigned char *bytes = dr_records(0, 30, &size);
    struct data_entry train = dr_entry(0, DATA_ROLE_TRAIN);
    struct dataset_file *a = dr_add_ok(&registry, &train, "/d/a.bin", bytes, size, 3, 1, 1);
    struct view_cursor cursor;
    view_cursor_open(&cursor, a);
    dr_read_records(&cursor, 0, 5, NULL, 30);
    int calls = 0;
    struct adaptdl_snapshot snapshot;
    dr_capture(&registry, dr_two_unconsumed, &calls, &snapshot);
    cr_expect_eq(calls, 1);
    dr_expect_position(&snapshot, "a.bin", 0, 9);
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
}

Test(dataset_registry, restore_refixes_registered_files_not_started)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_CONTINUE);
    uint64_t size;
    unsigned char *bytes = dr_records(4, 20, &size);
    struct data_entry train = dr_entry(4, DATA_ROLE_TRAIN);
    struct dataset_file *a = dr_add_ok(&registry, &train, "/d/a.bin", bytes, size, 2, 1, 1);
    struct dataset_file *b = dr_add_ok(&registry, &train, "/d/b.bin", bytes, size, 2, 1, 2);
    struct view_cursor ca, cb;
    view_cursor_open(&ca, a);
    view_cursor_open(&cb, b);
    dr_read_records(&ca, 4, 1, NULL, 20);
    dr_read(&cb, 4);  /* the header only: not started */
    log_threshold = LOG_LEVEL_ERROR;  /* a's refusal is a warning, expected here */
    const char *names[] = {"a.bin", "b.bin"};
    const uint64_t counts[] = {20, 20}, passes[] = {3, 2}, indices[] = {5, 4};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 2, names, counts, passes, indices);
    char error[512] = "";
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0, "%s", error);
    cr_expect(registry.restored);
    cr_expect_eq(a->view_pass, 0, "a had delivered a record: unchanged");
    cr_expect_eq(a->view_start_index, 0);
    cr_expect_eq(b->view_pass, 2);
    cr_expect_eq(b->view_start_index, 4);
    cr_expect_eq(b->view_length, 8);
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
}

/* A train entry whose 4-byte header counts the payload's 8-byte records. */
static struct data_entry dr_counted_entry(void)
{
    struct data_entry entry = dr_entry(4, DATA_ROLE_TRAIN);
    entry.has_count_field = true;
    entry.count_offset = 0;
    entry.count_type = COUNT_FIELD_U32LE;
    entry.count_unit = 8;
    return entry;
}

/* Registers one file of `entry` in a registry under `resume`, restores a
 * snapshot binding pass `pass` index `index`, and reports whether the
 * restore left the file's count=-under-replay warning logged. */
static bool dr_restore_warns_empty_count(const struct data_entry *entry,
                                         enum resume_mode resume, uint64_t pass,
                                         uint64_t index)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, resume);
    uint64_t size;
    unsigned char *bytes = dr_records(4, 20, &size);
    struct dataset_file *file = dr_add_ok(&registry, entry, "/d/tokens.bin", bytes, size, 1,
                                          0, 1);
    const char *names[] = {"tokens.bin"};
    const uint64_t counts[] = {20}, passes[] = {pass}, indices[] = {index};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 1, names, counts, passes, indices);
    char error[512] = "";
    log_threshold = LOG_LEVEL_ERROR;  /* the warning itself is not under test here */
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0, "%s", error);
    cr_expect_eq(dataset_view_replay_empties_count_field(file),
                 file->warned_empty_count_replay);
    bool warned = file->warned_empty_count_replay;
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
    return warned;
}

Test(dataset_registry, replay_restore_past_pass_zero_of_a_count_file_warns)
{
    struct data_entry counted = dr_counted_entry();
    cr_expect(dr_restore_warns_empty_count(&counted, RESUME_REPLAY, 1, 0));
    cr_expect(dr_restore_warns_empty_count(&counted, RESUME_REPLAY, 3, 7));
}

Test(dataset_registry, no_count_warning_without_skipped_passes_count_or_replay)
{
    struct data_entry counted = dr_counted_entry();
    struct data_entry plain = dr_entry(4, DATA_ROLE_TRAIN);
    cr_expect_not(dr_restore_warns_empty_count(&counted, RESUME_REPLAY, 0, 7),
                  "bound to the current pass: nothing skipped");
    cr_expect_not(dr_restore_warns_empty_count(&counted, RESUME_CONTINUE, 2, 7),
                  "continue skips nothing");
    cr_expect_not(dr_restore_warns_empty_count(&plain, RESUME_REPLAY, 2, 7),
                  "no count= field: an empty view is no problem");
}

Test(dataset_registry, the_count_warning_is_logged_once_per_file)
{
    char directory[] = "/tmp/adaptshim-unit-XXXXXX";
    cr_assert_not_null(mkdtemp(directory));
    char log_path[sizeof directory + 16];
    snprintf(log_path, sizeof log_path, "%s/log", directory);
    char error[512] = "";
    cr_assert_eq(log_configure(LOG_LEVEL_WARN, log_path, 0, error, sizeof error), 0, "%s",
                 error);

    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    uint64_t size;
    unsigned char *bytes = dr_records(4, 20, &size);
    struct data_entry counted = dr_counted_entry();
    dr_add_ok(&registry, &counted, "/d/tokens.bin", bytes, size, 1, 0, 1);
    const char *names[] = {"tokens.bin"};
    const uint64_t counts[] = {20}, passes[] = {2}, indices[] = {0};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 1, names, counts, passes, indices);
    /* a second restore before the file starts replaces the first (as a
     * second checkpoint load would): still one warning */
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0, "%s", error);
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0, "%s", error);
    log_close();
    log_threshold = LOG_LEVEL_ERROR;

    FILE *log = fopen(log_path, "r");
    cr_assert_not_null(log);
    char text[4096] = "";
    size_t length = fread(text, 1, sizeof text - 1, log);
    fclose(log);
    text[length] = '\0';
    size_t warnings = 0;
    for (const char *at = text; (at = strstr(at, "ADAPTDL_RESUME=continue")) != NULL; at++)
        warnings++;
    cr_expect_eq(warnings, 1, "log: %s", text);
    cr_expect_not_null(strstr(text, "/d/tokens.bin"), "log names the file: %s", text);
    unlink(log_path);
    rmdir(directory);
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
}

Test(dataset_registry, pending_positions_apply_when_the_file_is_registered)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    const char *names[] = {"train.bin"};
    const uint64_t counts[] = {16}, passes[] = {1}, indices[] = {7};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 1, names, counts, passes, indices);
    char error[512] = "";
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0, "%s", error);
    snapshot_free(&snapshot);
    cr_expect_eq(registry.pending_count, 1);

    /* mounted somewhere else than in the run that took the snapshot */
    uint64_t size;
    unsigned char *bytes = dr_records(0, 16, &size);
    struct data_entry train = dr_entry(0, DATA_ROLE_TRAIN);
    struct dataset_file *file =
        dr_add_ok(&registry, &train, "/mnt/other/place/train.bin", bytes, size, 3, 2, 1);
    cr_expect(registry.pending[0].applied);
    cr_expect_eq(file->view_length, 0, "replay: pass 0 is skipped");
    cr_expect(file->shared->tracker.skipped);
    cr_assert_eq(dataset_view_end_pass(file), 0);
    cr_expect_eq(file->view_pass, 1);
    cr_expect_eq(file->view_start_index, 7);
    cr_expect_eq(file->view_length, 3);
    dr_release(&registry);
    free(bytes);
}

Test(dataset_registry, a_different_record_count_is_refused_at_restore)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    uint64_t size;
    unsigned char *bytes = dr_records(0, 20, &size);
    struct data_entry train = dr_entry(0, DATA_ROLE_TRAIN);
    dr_add_ok(&registry, &train, "/d/data.bin", bytes, size, 1, 0, 1);
    const char *names[] = {"data.bin"};
    const uint64_t counts[] = {21}, passes[] = {0}, indices[] = {3};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 1, names, counts, passes, indices);
    char error[512] = "";
    cr_expect_eq(dr_restore(&registry, &snapshot, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "/d/data.bin"), "%s", error);
    cr_expect_not_null(strstr(error, "20"), "%s", error);
    cr_expect_not_null(strstr(error, "21"), "%s", error);
    cr_expect_eq(registry.files->view_start_index, 0, "nothing applied");
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
}

Test(dataset_registry, a_different_record_count_is_refused_at_registration)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    const char *names[] = {"data.bin"};
    const uint64_t counts[] = {19}, passes[] = {0}, indices[] = {3};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 1, names, counts, passes, indices);
    char error[512] = "";
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0);
    snapshot_free(&snapshot);
    uint64_t size;
    unsigned char *bytes = dr_records(0, 20, &size);
    struct data_entry train = dr_entry(0, DATA_ROLE_TRAIN);
    int status;
    struct dataset_file *file = dr_add(&registry, &train, "/e/data.bin", bytes, size, 1, 0, 1,
                                       &status, error, sizeof error);
    cr_expect_eq(status, -1);
    cr_expect_not_null(strstr(error, "/e/data.bin"), "%s", error);
    cr_expect_not_null(strstr(error, "19"), "%s", error);
    cr_expect_eq(file->view_start_index, 0);
    dr_release(&registry);
    free(bytes);
}

Test(dataset_registry, untouched_pending_positions_survive_a_capture)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    const char *names[] = {"a.bin", "b.bin"};
    const uint64_t counts[] = {10, 12}, passes[] = {2, 4}, indices[] = {3, 5};
    struct adaptdl_snapshot restored;
    dr_snapshot(&restored, 2, names, counts, passes, indices);
    char error[512] = "";
    cr_assert_eq(dr_restore(&registry, &restored, error, sizeof error), 0);
    snapshot_free(&restored);
    uint64_t size;
    unsigned char *bytes = dr_records(0, 10, &size);
    struct data_entry train = dr_entry(0, DATA_ROLE_TRAIN);
    struct dataset_file *a = dr_add_ok(&registry, &train, "/d/a.bin", bytes, size, 2, 0, 1);
    /* replay skips a.bin's pass 0; a checkpoint meanwhile binds the
     * restored positions, of the registered file and of the pending one */
    struct view_cursor cursor;
    view_cursor_open(&cursor, a);
    dr_read_records(&cursor, 0, UINT64_MAX, NULL, 10);
    cr_assert_eq(a->view_pass, 1);
    struct adaptdl_snapshot snapshot;
    dr_capture(&registry, NULL, NULL, &snapshot);
    cr_expect_eq(snapshot.file_count, 2);
    dr_expect_position(&snapshot, "a.bin", 2, 3);
    dr_expect_position(&snapshot, "b.bin", 4, 5);
    cr_expect_eq(dr_find(&snapshot, "b.bin")->record_count, 12);
    cr_expect_eq(snapshot.epoch, 4, "the epoch the snapshot binds, not the replay's");
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
}

Test(dataset_registry, files_sharing_a_basename_get_their_own_positions)
{
    /* shard0/data.bin (12 records) and shard1/data.bin (20 records) */
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_CONTINUE);
    const char *names[] = {"data.bin", "data.bin"};
    const uint64_t counts[] = {20, 12}, passes[] = {1, 2}, indices[] = {6, 4};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 2, names, counts, passes, indices);
    char error[512] = "";
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0);
    snapshot_free(&snapshot);
    uint64_t small_size, large_size;
    unsigned char *small = dr_records(0, 12, &small_size);
    unsigned char *large = dr_records(0, 20, &large_size);
    struct data_entry train = dr_entry(0, DATA_ROLE_TRAIN);
    struct dataset_file *first =
        dr_add_ok(&registry, &train, "/d/shard0/data.bin", small, small_size, 1, 0, 1);
    struct dataset_file *second =
        dr_add_ok(&registry, &train, "/d/shard1/data.bin", large, large_size, 1, 0, 2);
    cr_expect_eq(first->view_pass, 2);
    cr_expect_eq(first->view_start_index, 4);
    cr_expect_eq(second->view_pass, 1);
    cr_expect_eq(second->view_start_index, 6);
    dr_release(&registry);
    free(small);
    free(large);
}

/* --- whole runs through cursors -------------------------------------------- */

#define DR_RUN_MAX_REPLICAS 5

/* One run: K replicas (one registry each, as K processes), restoring
 * `restore` when given, reads `records` per replica of the pass it is in
 * after skipping, then captures (all replicas must agree). */
static void dr_run(uint64_t record_count, uint32_t replicas, enum resume_mode resume,
                   const struct adaptdl_snapshot *restore, uint64_t full_passes_first,
                   uint64_t records, unsigned *counts, struct adaptdl_snapshot *captured)
{
    uint64_t size;
    unsigned char *bytes = dr_records(6, record_count, &size);
    struct data_entry train = dr_entry(6, DATA_ROLE_TRAIN);
    struct adaptdl_snapshot snapshots[DR_RUN_MAX_REPLICAS];
    for (uint32_t rank = 0; rank < replicas; rank++) {
        struct dataset_registry registry;
        dataset_registry_init(&registry, resume);
        char error[512] = "";
        if (restore != NULL)
            cr_assert_eq(dr_restore(&registry, restore, error, sizeof error), 0, "%s", error);
        struct dataset_file *file = dr_add_ok(&registry, &train, "/data/run/train.bin", bytes,
                                              size, replicas, rank, 1);
        struct view_cursor cursor;
        view_cursor_open(&cursor, file);
        /* the trainer's loop: whole passes (skipped ones deliver nothing) */
        for (uint64_t pass = 0; pass < full_passes_first; pass++) {
            dr_read_records(&cursor, 6, UINT64_MAX, NULL, record_count);
            cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
        }
        dr_read_records(&cursor, 6, records, counts, record_count);
        dr_capture(&registry, NULL, NULL, &snapshots[rank]);
        dr_release(&registry);
    }
    for (uint32_t rank = 1; rank < replicas; rank++) {
        cr_assert_eq(snapshots[rank].files[0].pass, snapshots[0].files[0].pass);
        cr_assert_eq(snapshots[rank].files[0].current_index,
                     snapshots[0].files[0].current_index, "replicas agree");
        snapshot_free(&snapshots[rank]);
    }
    *captured = snapshots[0];
    free(bytes);
}

static void dr_expect_exactly_once_plus_padding(const unsigned *counts, uint64_t record_count,
                                                unsigned max_padding)
{
    unsigned padding = 0;
    for (uint64_t record = 0; record < record_count; record++) {
        cr_assert_geq(counts[record], 1, "record %llu never delivered",
                      (unsigned long long)record);
        cr_assert_leq(counts[record], 2, "record %llu delivered %u times",
                      (unsigned long long)record, counts[record]);
        padding += counts[record] - 1;
    }
    cr_assert_lt(padding, max_padding, "%u padding records", padding);
}

Test(dataset_registry_runs, restart_1_4_2_replay_covers_the_pass_once)
{
    const uint64_t record_count = 37;
    unsigned counts[37] = {0};
    struct adaptdl_snapshot first, second, third;
    /* run 1: one replica, pass 0 whole (not counted), 9 records of pass 1 */
    dr_run(record_count, 1, RESUME_REPLAY, NULL, 1, 9, counts, &first);
    cr_assert_eq(first.files[0].pass, 1);
    cr_assert_eq(first.files[0].current_index, 9);
    /* run 2: four replicas replay: pass 0 skipped, 3 records each of pass 1 */
    dr_run(record_count, 4, RESUME_REPLAY, &first, 1, 3, counts, &second);
    cr_assert_eq(second.files[0].pass, 1);
    cr_assert_eq(second.files[0].current_index, 21);
    /* run 3: two replicas finish pass 1 */
    dr_run(record_count, 2, RESUME_REPLAY, &second, 1, UINT64_MAX, counts, &third);
    cr_expect_eq(third.files[0].pass, 2, "the read returning 0 ended pass 1");
    cr_expect_eq(third.files[0].current_index, 0);
    cr_expect_eq(third.epoch, 2);
    dr_expect_exactly_once_plus_padding(counts, record_count, 2);
    snapshot_free(&first);
    snapshot_free(&second);
    snapshot_free(&third);
}

Test(dataset_registry_runs, every_k_to_every_k_prime_continue)
{
    for (uint32_t k1 = 1; k1 <= 3; k1++)
        for (uint32_t k2 = 1; k2 <= 4; k2++) {
            const uint64_t record_count = 23;
            unsigned counts[23] = {0};
            struct adaptdl_snapshot first, second;
            dr_run(record_count, k1, RESUME_CONTINUE, NULL, 2, 2, counts, &first);
            cr_assert_eq(first.files[0].pass, 2);
            cr_assert_eq(first.files[0].current_index, 2 * k1);
            /* continue: the trainer itself skips to its epoch 2 */
            dr_run(record_count, k2, RESUME_CONTINUE, &first, 0, UINT64_MAX, counts, &second);
            cr_expect_eq(second.files[0].pass, 3);
            dr_expect_exactly_once_plus_padding(counts, record_count, k2);
            snapshot_free(&first);
            snapshot_free(&second);
        }
}

Test(dataset_registry_runs, a_complete_pass_restores_header_only_then_moves_on)
{
    const uint64_t record_count = 10;
    unsigned counts[10] = {0};
    struct adaptdl_snapshot first, second;
    /* all records of pass 0 read, the read returning 0 not yet */
    dr_run(record_count, 2, RESUME_REPLAY, NULL, 0, 5, counts, &first);
    cr_assert_eq(first.files[0].pass, 0);
    cr_assert_eq(first.files[0].current_index, 10);
    unsigned again[10] = {0};
    dr_run(record_count, 3, RESUME_REPLAY, &first, 1, UINT64_MAX, again, &second);
    cr_expect_eq(second.files[0].pass, 2);
    /* pass 1 is a whole fresh pass over K = 3: 12 slots, 2 of them padding */
    dr_expect_exactly_once_plus_padding(again, record_count, 3);
    snapshot_free(&first);
    snapshot_free(&second);
}

/* A DataLoader worker may open the data file before its parent does (a
 * Dataset that opens lazily in __getitem__): with the registry's arena, the
 * parent that registers the file later adopts the pass the worker began,
 * restored position and deliveries included, and does not apply the
 * restored position a second time (adaptshim(7) "WHAT THE TRAINER SEES", adaptshim(7)
 * "CHECKPOINT BINDING"). */
Test(dataset_registry, a_file_a_forked_child_registers_first_is_the_parent_s_pass)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_CONTINUE);
    cr_assert_eq(dataset_registry_share_across_fork(&registry, 1 << 20), 0);
    uint64_t size;
    unsigned char *bytes = dr_records(4, 20, &size);
    struct data_entry train = dr_entry(4, DATA_ROLE_TRAIN);
    const char *names[] = {"a.bin"};
    const uint64_t counts[] = {20}, passes[] = {2}, indices[] = {6};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 1, names, counts, passes, indices);
    char error[512] = "";
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0, "%s", error);

    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        struct dataset_file *file = dr_add_ok(&registry, &train, "/d/a.bin", bytes, size, 1,
                                              0, 7);
        struct view_cursor cursor;
        view_cursor_open(&cursor, file);
        dr_read_records(&cursor, 4, 3, NULL, 20);   /* three records of pass 2 */
        _exit(file->pass_state_adopted || file->view_pass != 2 ? 1 : 0);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's own checks");

    struct dataset_file *file = dr_add_ok(&registry, &train, "/d/a.bin", bytes, size, 1, 0, 7);
    cr_expect(file->pass_state_adopted);
    dataset_file_lock(file);
    cr_expect_eq(file->view_pass, 2, "the pass the child restored");
    cr_expect_eq(file->view_start_index, 6);
    cr_expect_eq(file->shared->tracker.delivered, 3, "and the child's three deliveries");
    dataset_file_unlock(file);
    struct adaptdl_snapshot captured;
    dr_capture(&registry, NULL, NULL, &captured);
    cr_assert_eq(captured.file_count, 1, "the position is not pending any more");
    cr_expect_eq(captured.files[0].pass, 2);
    cr_expect_eq(captured.files[0].current_index, 9);
    snapshot_free(&captured);
    snapshot_free(&snapshot);
    dr_release(&registry);
    free(bytes);
}

/* A dataset renamed since the checkpoint: its position is keyed by the old
 * name, which no file of this run has.  Taking it anyway would be a guess
 * (adaptshim(7) "CHECKPOINT BINDING"), so the file starts fresh, with a warning naming both names;
 * files the snapshot names, or new files while nothing is waiting, say
 * nothing. */
static char *dr_warnings_of_registering(const char *restored_name, const char *path,
                                        bool register_before_restore)
{
    char directory[] = "/tmp/adaptshim-unit-XXXXXX";
    cr_assert_not_null(mkdtemp(directory));
    char log_path[sizeof directory + 16];
    snprintf(log_path, sizeof log_path, "%s/log", directory);
    char error[512] = "";
    cr_assert_eq(log_configure(LOG_LEVEL_WARN, log_path, 0, error, sizeof error), 0, "%s",
                 error);
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    uint64_t size;
    unsigned char *bytes = dr_records(0, 16, &size);
    struct data_entry train = dr_entry(0, DATA_ROLE_TRAIN);
    struct dataset_file *file = NULL;
    if (register_before_restore)
        file = dr_add_ok(&registry, &train, path, bytes, size, 1, 0, 1);
    const char *names[] = {restored_name};
    const uint64_t counts[] = {16}, passes[] = {1}, indices[] = {7};
    struct adaptdl_snapshot snapshot;
    dr_snapshot(&snapshot, 1, names, counts, passes, indices);
    cr_assert_eq(dr_restore(&registry, &snapshot, error, sizeof error), 0, "%s", error);
    snapshot_free(&snapshot);
    if (!register_before_restore)
        file = dr_add_ok(&registry, &train, path, bytes, size, 1, 0, 1);
    bool named = strcmp(file->basename, restored_name) == 0;
    cr_expect_eq(file->shared->tracker.has_bound, named, "a position only by name");
    log_close();
    log_threshold = LOG_LEVEL_ERROR;
    FILE *log = fopen(log_path, "r");
    cr_assert_not_null(log);
    char *text = calloc(1, 4096);
    text[fread(text, 1, 4095, log)] = '\0';
    fclose(log);
    unlink(log_path);
    rmdir(directory);
    dr_release(&registry);
    free(bytes);
    return text;
}

Test(dataset_registry, a_renamed_dataset_starts_fresh_with_a_warning_naming_both_names)
{
    for (int before = 0; before < 2; before++) {
        char *text = dr_warnings_of_registering("train.bin", "/d/train-v2.bin", before);
        cr_expect_not_null(strstr(text, "warn:"), "%s", text);
        cr_expect_not_null(strstr(text, "/d/train-v2.bin"), "names the file: %s", text);
        cr_expect_not_null(strstr(text, "\"train.bin\""), "names the snapshot's: %s", text);
        cr_expect_not_null(strstr(text, "starts fresh"), "%s", text);
        cr_expect_eq(strchr(text, '\n'), text + strlen(text) - 1, "one line: %s", text);
        free(text);
        text = dr_warnings_of_registering("train.bin", "/elsewhere/train.bin", before);
        cr_expect_str_eq(text, "", "the same name: restored, silently");
        free(text);
    }
}

/* --- readers in their own order (adaptshim(7) "Readers in their own order") ------------------- */

/* The snapshot as a restart reads it: through the file format. */
static void dr_through_the_file_format(struct adaptdl_snapshot *snapshot)
{
    void *data = NULL;
    size_t size = 0;
    cr_assert_eq(snapshot_encode(snapshot, &data, &size), 0);
    snapshot_free(snapshot);
    char error[256] = "";
    cr_assert_eq(snapshot_decode(data, size, snapshot, error, sizeof error), 0, "%s", error);
    free(data);
}

struct dr_own_order_run {
    uint32_t replicas;
    uint64_t records;         /* positions each replica reads, in its own order */
    uint64_t in_flight;       /* the last ones read, not consumed at the capture */
    bool in_order;            /* positions 0, 1, 2... instead */
    uint64_t passes_first;    /* whole passes read in order before */
};

static uint64_t dr_in_flight_records(struct dataset_file *file, void *context)
{
    (void)file;
    return *(const uint64_t *)context;
}

/* One run of K replicas (one registry each), restoring `restore` when
 * given: each reads `records` positions of its view by pread, in the order
 * 7 * i mod L (its own order; the same on every replica, in lock-step),
 * counting all but the last `in_flight` as consumed, then captures. */
static void dr_own_order_run(uint64_t record_count, const struct dr_own_order_run *run,
                             const struct adaptdl_snapshot *restore, unsigned *counts,
                             struct adaptdl_snapshot *captured)
{
    uint64_t size;
    unsigned char *bytes = dr_records(6, record_count, &size);
    struct data_entry train = dr_entry(6, DATA_ROLE_TRAIN);
    train.lookahead = run->in_flight;
    for (uint32_t rank = 0; rank < run->replicas; rank++) {
        struct dataset_registry registry;
        dataset_registry_init(&registry, RESUME_CONTINUE);
        char error[512] = "";
        if (restore != NULL)
            cr_assert_eq(dr_restore(&registry, restore, error, sizeof error), 0, "%s", error);
        struct dataset_file *file = dr_add_ok(&registry, &train, "/data/own/train.bin", bytes,
                                              size, run->replicas, rank, 1);
        struct view_cursor cursor;
        view_cursor_open(&cursor, file);
        for (uint64_t pass = 0; pass < run->passes_first; pass++) {
            dr_read_records(&cursor, 6, UINT64_MAX, NULL, record_count);
            cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
        }
        uint64_t length = file->view_length;
        cr_assert(run->in_order || length % 7 != 0, "7 must not divide the view's %llu records",
                  (unsigned long long)length);
        uint64_t reads = run->records < length ? run->records : length;
        for (uint64_t i = 0; i < reads; i++) {
            uint64_t position = run->in_order ? i : 7 * i % length, index;
            cr_assert_eq(view_cursor_pread(&cursor, &index, 8, 6 + 8 * position), 8);
            cr_assert_lt(index, record_count);
            if (i + run->in_flight < reads)
                counts[index]++;
        }
        struct adaptdl_snapshot snapshot;
        uint64_t in_flight = run->in_flight;
        dr_capture(&registry, dr_in_flight_records, &in_flight, &snapshot);
        view_cursor_close(&cursor);
        dr_release(&registry);
        if (rank == 0)
            *captured = snapshot;
        else
            snapshot_free(&snapshot);
    }
    dr_through_the_file_format(captured);
    free(bytes);
}

/* Reads every replica's whole view of the restored pass in order. */
static void dr_finish_pass(uint64_t record_count, uint32_t replicas,
                           const struct adaptdl_snapshot *restore, unsigned *counts)
{
    struct dr_own_order_run whole = {
        .replicas = replicas, .records = UINT64_MAX, .in_order = true};
    struct adaptdl_snapshot last;
    dr_own_order_run(record_count, &whole, restore, counts, &last);
    snapshot_free(&last);
}

Test(dataset_registry_runs, a_reader_in_its_own_order_resumes_with_exactly_the_rest)
{
    for (uint32_t resumed_replicas = 1; resumed_replicas <= 3; resumed_replicas++) {
        const uint64_t record_count = 37;
        unsigned counts[37] = {0};
        struct adaptdl_snapshot first;
        struct dr_own_order_run partial = {.replicas = 1, .records = 20};
        dr_own_order_run(record_count, &partial, NULL, counts, &first);
        const struct snapshot_file_position *position = &first.files[0];
        cr_assert_gt(position->delivered_after_size, 0, "the delivered set is bound");
        cr_assert_lt(position->current_index, 20, "records out of order lie past the prefix");
        dr_finish_pass(record_count, resumed_replicas, &first, counts);
        /* the resumed pass served the 17 others, padded to a multiple of K */
        dr_expect_exactly_once_plus_padding(counts, record_count, resumed_replicas);
        snapshot_free(&first);
    }
}

Test(dataset_registry_runs, records_in_flight_at_the_capture_are_served_again)
{
    const uint64_t record_count = 37;
    unsigned counts[37] = {0};
    struct adaptdl_snapshot first;
    struct dr_own_order_run partial = {.replicas = 1, .records = 20, .in_flight = 5};
    dr_own_order_run(record_count, &partial, NULL, counts, &first);
    dr_finish_pass(record_count, 1, &first, counts);
    /* the 5 read last were never counted: they come again, and so do at
     * most 5 consumed before them (the last 10 deliveries are not bound,
     * delivered_set_reordered: parallel readers finish out of order) */
    dr_expect_exactly_once_plus_padding(counts, record_count, 6);
    snapshot_free(&first);
}

Test(dataset_registry_runs, own_order_1_2_1_keeps_the_first_set_and_loses_nothing)
{
    const uint64_t record_count = 37;
    unsigned counts[37] = {0};
    struct adaptdl_snapshot first, second;
    struct dr_own_order_run one = {.replicas = 1, .records = 15};
    dr_own_order_run(record_count, &one, NULL, counts, &first);
    /* two replicas read 4 records each of the 22 left, in order: their
     * prefix, in lock-step, adds to the set the first run bound */
    struct dr_own_order_run two = {.replicas = 2, .records = 4, .in_order = true};
    dr_own_order_run(record_count, &two, &first, counts, &second);
    cr_assert_gt(second.files[0].delivered_after_size, 0, "the first run's set is kept");
    dr_finish_pass(record_count, 1, &second, counts);
    dr_expect_exactly_once_plus_padding(counts, record_count, 2);
    snapshot_free(&first);
    snapshot_free(&second);
}

/* Several replicas cannot see which records the others delivered out of
 * order: their snapshot binds the prefix, so the rest comes again. */
Test(dataset_registry_runs, replicas_out_of_order_repeat_but_never_lose)
{
    const uint64_t record_count = 37;
    unsigned counts[37] = {0};
    struct adaptdl_snapshot first;
    struct dr_own_order_run two = {.replicas = 2, .records = 6};
    dr_own_order_run(record_count, &two, NULL, counts, &first);
    cr_assert_eq(first.files[0].delivered_after_size, 0);
    dr_finish_pass(record_count, 2, &first, counts);
    for (uint64_t record = 0; record < record_count; record++)
        cr_assert_geq(counts[record], 1, "record %llu lost", (unsigned long long)record);
    snapshot_free(&first);
}

/* Records in flight, more than the pass's in-order prefix, right after a
 * pass that ended in this run: the set is that of the pass they were read
 * in, and binds that pass (not the one before, where a prefix reader's
 * in-flight records would be counted back to). */
Test(dataset_registry_runs, a_set_binds_the_pass_its_records_were_read_in)
{
    const uint64_t record_count = 37;
    unsigned counts[37] = {0};
    struct adaptdl_snapshot first;
    struct dr_own_order_run partial = {
        .replicas = 1, .records = 20, .in_flight = 5, .passes_first = 1};
    dr_own_order_run(record_count, &partial, NULL, counts, &first);
    cr_assert_eq(first.files[0].pass, 1);
    cr_assert_gt(first.files[0].delivered_after_size, 0);
    dr_finish_pass(record_count, 1, &first, counts);
    dr_expect_exactly_once_plus_padding(counts, record_count, 6);
    snapshot_free(&first);
}

/* A loader that counts with the whole file (a Dataset built before its
 * checkpoint is loaded) reads a resumed selected pass past its end: the
 * pass is lengthened into its next sweep, the selected records first, each
 * once, and the resumed pass's record still binds what the first run had
 * consumed. */
Test(dataset_registry_runs, a_selected_pass_read_with_a_stale_count_is_lengthened)
{
    const uint64_t record_count = 37;
    unsigned counts[37] = {0};
    struct adaptdl_snapshot first;
    struct dr_own_order_run partial = {.replicas = 1, .records = 20};
    dr_own_order_run(record_count, &partial, NULL, counts, &first);
    uint64_t undelivered = 0;
    for (uint64_t record = 0; record < record_count; record++)
        undelivered += counts[record] == 0;

    uint64_t size;
    unsigned char *bytes = dr_records(6, record_count, &size);
    struct data_entry train = dr_entry(6, DATA_ROLE_TRAIN);
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_CONTINUE);
    char error[256] = "";
    cr_assert_eq(dr_restore(&registry, &first, error, sizeof error), 0, "%s", error);
    struct dataset_file *file =
        dr_add_ok(&registry, &train, "/data/own/train.bin", bytes, size, 1, 0, 1);
    cr_assert_eq(file->view_length, undelivered);
    dataset_file_lock(file);
    cr_assert(dataset_view_lengthen(file, record_count));
    dataset_file_unlock(file);
    cr_assert_eq(file->view_length, record_count);
    struct view_cursor cursor;
    view_cursor_open(&cursor, file);
    unsigned resumed[37] = {0};
    cr_assert_eq(dr_read_records(&cursor, 6, undelivered, resumed, record_count), undelivered);
    for (uint64_t record = 0; record < record_count; record++)
        cr_assert_eq(counts[record] + resumed[record], 1, "record %llu",
                     (unsigned long long)record);
    /* the rest of the view: the next sweep's records, in its own order */
    cr_assert_eq(dr_read_records(&cursor, 6, UINT64_MAX, NULL, record_count),
                 record_count - undelivered);
    struct adaptdl_snapshot second;
    dr_capture(&registry, NULL, NULL, &second);
    /* read to its end, it is over: the next pass is whole */
    cr_expect_eq(second.files[0].pass, first.files[0].pass + 1);
    cr_expect_eq(second.files[0].current_index, 0);
    view_cursor_close(&cursor);
    dr_release(&registry);
    free(bytes);
    snapshot_free(&first);
    snapshot_free(&second);
}
