/* fuzz_restore.c - libFuzzer target: the restore path.  The input is a
 * snapshot (sealed as fuzz_seal.h says); one that decodes and passes the
 * range check, as a load requires, is applied to a registry of two data
 * files (registered before or after the restore, as a trainer may open its
 * data before or after loading its checkpoint), then every view is read
 * through a cursor for a few passes, by reads of varied sizes and by
 * preads.  Whatever the values, nothing may crash, read out of bounds or
 * run forever. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset_registry.h"
#include "fuzz_seal.h"
#include "snapshot_check.h"
#include "view_cursor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FUZZ_FILES = 2 };

/* a.bin: 12 train records of 8 bytes behind a 16-byte header; b.bin: 7
 * records of 12 bytes, no header, an evaluation file. */
static const struct {
    const char *path;
    uint64_t header, record_size, count;
    enum data_role role;
} fuzz_files[FUZZ_FILES] = {
    {"/fuzz/a.bin", 16, 8, 12, DATA_ROLE_TRAIN},
    {"/fuzz/b.bin", 0, 12, 7, DATA_ROLE_EVAL},
};

static unsigned char *fuzz_file_bytes(unsigned which, uint64_t *size)
{
    *size = fuzz_files[which].header + fuzz_files[which].record_size * fuzz_files[which].count;
    unsigned char *bytes = malloc(*size);
    if (bytes == NULL)
        abort();
    for (uint64_t i = 0; i < *size; i++)
        bytes[i] = (unsigned char)(i * 31 + which);
    return bytes;
}

static void fuzz_register(struct dataset_registry *registry, unsigned which,
                          const unsigned char *bytes, uint64_t size, uint32_t replicas,
                          uint32_t rank)
{
    /* a file keeps a pointer to its entry, as to the parsed configuration */
    static struct data_entry entries[FUZZ_FILES];
    struct data_entry *entry = &entries[which];
    *entry = (struct data_entry){
        .record_size = fuzz_files[which].record_size,
        .header_size = fuzz_files[which].header,
        .role = fuzz_files[which].role,
        .shuffle = true,
        .shard = fuzz_files[which].role == DATA_ROLE_TRAIN,
        .tail = TAIL_ERROR,
    };
    struct dataset_file *file = malloc(sizeof *file);
    if (file == NULL)
        abort();
    char error[512];
    if (dataset_file_init(file, entry, fuzz_files[which].path, bytes, size, 5, replicas, rank,
                          error, sizeof error) != 0) {
        free(file);
        return;
    }
    file->device = 1;
    file->inode = 10 + which;
    /* the registry owns the file even when it refuses the position (the
     * shim then exits: different data) */
    pthread_mutex_lock(&registry->lock);
    (void)dataset_registry_add(registry, file, error, sizeof error);
    pthread_mutex_unlock(&registry->lock);
}

/* Reads a few passes of one file's view; every result must fit its buffer. */
static void fuzz_read_passes(struct dataset_file *file, uint64_t salt)
{
    struct view_cursor cursor;
    view_cursor_open(&cursor, file);
    unsigned char buffer[64];
    for (int pass = 0; pass < 3; pass++) {
        for (int reads = 0; reads < 400; reads++) {
            size_t want = 1 + (size_t)((salt >> (reads % 32)) % sizeof buffer);
            ssize_t got = view_cursor_read(&cursor, buffer, want);
            if (got < 0 || (size_t)got > want)
                abort();
            if (got == 0)
                break;
        }
        uint64_t view = view_cursor_size(&cursor, SIZE_QUESTION_ANY);
        ssize_t got = view_cursor_pread(&cursor, buffer, sizeof buffer, view > 8 ? view - 8 : 0);
        if (got > (ssize_t)sizeof buffer)
            abort();
        view_cursor_seek(&cursor, 0, SEEK_SET);
    }
    view_cursor_close(&cursor);
}

static void fuzz_release(struct dataset_registry *registry)
{
    struct dataset_file *file = registry->files;
    while (file != NULL) {
        struct dataset_file *next = file->next;
        dataset_file_release(file);
        free(file);
        file = next;
    }
    for (size_t i = 0; i < registry->pending_count; i++)
        free(registry->pending[i].position.name);
    free(registry->pending);
    pass_state_arena_destroy(registry->arena);
    pthread_mutex_destroy(&registry->lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_quiet_logs();
    struct adaptdl_snapshot snapshot;
    char error[1024];
    if (fuzz_decode_sealed(data, size, &snapshot, error, sizeof error) != 0)
        return 0;
    if (snapshot_check_ranges(&snapshot, error, sizeof error) != 0) {
        snapshot_free(&snapshot);
        return 0;
    }
    /* the run restoring it: its own replica count and rank, its resume mode */
    uint32_t replicas = 1 + (uint32_t)(snapshot.sequence % 4);
    uint32_t rank = (uint32_t)(snapshot.seed % replicas);
    bool register_first = snapshot.sequence & 4;
    struct dataset_registry registry;
    dataset_registry_init(&registry, snapshot.sequence & 8 ? RESUME_CONTINUE : RESUME_REPLAY);
    unsigned char *bytes[FUZZ_FILES];
    uint64_t sizes[FUZZ_FILES];
    for (unsigned which = 0; which < FUZZ_FILES; which++)
        bytes[which] = fuzz_file_bytes(which, &sizes[which]);
    if (register_first)
        for (unsigned which = 0; which < FUZZ_FILES; which++)
            fuzz_register(&registry, which, bytes[which], sizes[which], replicas, rank);
    pthread_mutex_lock(&registry.lock);
    (void)dataset_registry_restore(&registry, &snapshot, error, sizeof error);
    pthread_mutex_unlock(&registry.lock);
    if (!register_first)
        for (unsigned which = 0; which < FUZZ_FILES; which++)
            fuzz_register(&registry, which, bytes[which], sizes[which], replicas, rank);
    for (struct dataset_file *file = registry.files; file != NULL; file = file->next)
        fuzz_read_passes(file, snapshot.seed ^ snapshot.sequence);
    /* and a capture of what was restored, as the next commit takes */
    struct adaptdl_snapshot captured;
    memset(&captured, 0, sizeof captured);
    pthread_mutex_lock(&registry.lock);
    if (dataset_registry_capture(&registry, NULL, NULL, &captured) == 0)
        snapshot_free(&captured);
    pthread_mutex_unlock(&registry.lock);
    fuzz_release(&registry);
    for (unsigned which = 0; which < FUZZ_FILES; which++)
        free(bytes[which]);
    snapshot_free(&snapshot);
    return 0;
}
