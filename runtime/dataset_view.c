/* dataset_view.c - one data file and the view of its current pass (see
 * dataset_view.h): its records, the view's index map and its pass state.
 * What readers delivered of the view, and the signs that end its pass, are
 * view_deliveries.c; copying the view's bytes out is view_copy.c.  Everything here works on memory: the shim maps the file
 * and hands the mapping in, tests hand in a buffer. */
#include "dataset_view.h"
#include "delivered_set.h"
#include "error_message.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stale_size.h"
#include "sysio.h"

/* Bytes of a header's count field of this type. */
static unsigned dataset_view_count_width(enum count_field_type type)
{
    return type == COUNT_FIELD_U64LE || type == COUNT_FIELD_U64BE ? 8 : 4;
}

static int dataset_file_count_records_fixed(struct dataset_file *file, char *error,
                                            size_t error_size)
{
    if (file->record_size == 0) {
        return error_message(error, error_size,
                             "data file %s: record size 0; accepted: record=BYTES "
                             "(at least 1) or lines",
                             file->path);
    }
    uint64_t payload = file->file_size - file->header_size;
    uint64_t remainder = payload % file->record_size;
    if (remainder != 0 && file->entry->tail == TAIL_ERROR) {
        return error_message(
            error, error_size,
            "data file %s: size %llu minus header %llu is not a multiple of record "
            "size %llu (%llu trailing bytes); fix the file or its entry, or add "
            ":tail=drop to ignore them",
            file->path, (unsigned long long)file->file_size, (unsigned long long)file->header_size,
            (unsigned long long)file->record_size, (unsigned long long)remainder);
    }
    file->record_count = payload / file->record_size;
    file->payload_size = file->record_count * file->record_size;
    return 0;
}

/* Builds the line index: offsets of the start of every newline-terminated
 * line, plus one past the last.  A final line without its newline is a
 * partial record, handled by the tail policy like a partial fixed record. */
static int dataset_file_index_lines(struct dataset_file *file, char *error, size_t error_size)
{
    const unsigned char *cursor = file->map + file->header_size;
    const unsigned char *end = file->map + file->file_size;
    uint64_t count = 0;
    for (const unsigned char *scan = cursor; scan < end;) {
        const unsigned char *newline = memchr(scan, '\n', (size_t)(end - scan));
        if (newline == NULL)
            break;
        count++;
        scan = newline + 1;
    }
    file->line_offsets = malloc((count + 1) * sizeof *file->line_offsets);
    if (file->line_offsets == NULL) {
        return error_message(error, error_size, "data file %s: no memory for a %llu-line index",
                             file->path, (unsigned long long)count);
    }
    uint64_t line = 0;
    uint64_t offset = file->header_size;
    file->line_offsets[0] = offset;
    while (line < count) {
        const unsigned char *newline =
            memchr(file->map + offset, '\n', (size_t)(file->file_size - offset));
        offset = (uint64_t)(newline - file->map) + 1;
        file->line_offsets[++line] = offset;
    }
    uint64_t trailing = file->file_size - offset;
    if (trailing != 0 && file->entry->tail == TAIL_ERROR) {
        error_message(error, error_size,
                      "data file %s: size %llu, header %llu: the last %llu bytes are not a "
                      "newline-terminated line; end the file with a newline, or add :tail=drop",
                      file->path, (unsigned long long)file->file_size,
                      (unsigned long long)file->header_size, (unsigned long long)trailing);
        free(file->line_offsets);
        file->line_offsets = NULL;
        return -1;
    }
    file->record_count = count;
    file->payload_size = offset - file->header_size;
    return 0;
}

/* The latest deliveries a pass state remembers: enough for the records a
 * loader's declared lookahead may be among (delivered_set.h), one record a
 * read, and a margin. */
static uint64_t dataset_pass_state_recent_ranges(const struct dataset_file *file)
{
    return delivered_set_reordered(file->entry->lookahead) + 64;
}

/* A pass-state block: the struct, the delivery bits, the bits and block
 * counts of a resumed pass's selection, then the ring of latest deliveries
 * (all uint64_t words).  Pages a pass never touches cost nothing. */
struct pass_state_layout {
    uint64_t delivery_words;
    uint64_t selection_words;
    uint64_t block_words;
    uint64_t recent_ranges;
};

static struct pass_state_layout dataset_pass_state_layout(const struct dataset_file *file)
{
    return (struct pass_state_layout){
        .delivery_words = delivery_record_words(file->record_count),
        .selection_words = record_selection_bit_words(file->record_count),
        .block_words = record_selection_block_words(file->record_count),
        .recent_ranges = dataset_pass_state_recent_ranges(file),
    };
}

static size_t dataset_pass_state_size(const struct dataset_file *file)
{
    struct pass_state_layout layout = dataset_pass_state_layout(file);
    return sizeof(struct dataset_pass_state) +
           (size_t)(layout.delivery_words + layout.selection_words + layout.block_words) *
               sizeof(uint64_t) +
           (size_t)layout.recent_ranges * sizeof(struct delivery_range);
}

/* Makes a fresh pass state for `context` (a dataset_file) in `block`: pass
 * 0, nothing delivered, a process-shared robust lock. */
static int dataset_pass_state_initialize(void *block, void *context)
{
    const struct dataset_file *file = context;
    struct dataset_pass_state *shared = block;
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    int status = pthread_mutex_init(&shared->lock, &attributes);
    pthread_mutexattr_destroy(&attributes);
    if (status != 0) {
        errno = status;
        return -1;
    }
    struct pass_state_layout layout = dataset_pass_state_layout(file);
    uint64_t *words = (uint64_t *)(shared + 1);
    uint64_t *selection_bits = words + layout.delivery_words;
    uint64_t *selection_blocks = selection_bits + layout.selection_words;
    struct delivery_range *recent =
        (struct delivery_range *)(selection_blocks + layout.block_words);
    delivery_record_init(&shared->delivery, words, file->record_count, recent,
                         layout.recent_ranges);
    record_selection_init(&shared->selection, selection_bits, selection_blocks,
                          file->record_count);
    pass_tracker_init(&shared->tracker, file->record_count, file->replicas, file->rank);
    pass_tracker_set_statistical(&shared->tracker, file->entry->role == DATA_ROLE_TRAIN);
    shared->header_read_to_end = false;
    shared->header_only_first_sign = VIEW_SIGN_NONE;
    shared->mapped = false;
    shared->view_generation = 0;
    reader_processes_reset(&shared->readers);
    return 0;
}

/* A pass state of the file's own, in anonymous shared memory that processes
 * forked after now inherit; bit pages cost nothing until a reader goes out
 * of order.  dataset_file_share_pass_state_in_arena moves it into the job's
 * arena for processes forked before. */
static int dataset_file_map_own_pass_state(struct dataset_file *file)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = dataset_pass_state_size(file);
    size = (size + page - 1) / page * page;
    void *memory = runtime_sysio.mmap(NULL, size, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED)
        return -1;
    if (dataset_pass_state_initialize(memory, file) != 0) {
        int saved = errno;
        runtime_sysio.munmap(memory, size);
        errno = saved;
        return -1;
    }
    file->shared = memory;
    file->shared_size = size;
    return 0;
}

int dataset_file_init(struct dataset_file *file, const struct data_entry *entry,
                      const char *absolute_path, const void *map, uint64_t file_size,
                      uint64_t seed, uint32_t replicas, uint32_t rank,
                      char *error, size_t error_size)
{
    memset(file, 0, sizeof *file);
    file->source_fd = -1;
    file->path = strdup(absolute_path);
    if (file->path == NULL) {
        return error_message(error, error_size, "data file %s: out of memory", absolute_path);
    }
    const char *slash = strrchr(file->path, '/');
    file->basename = slash ? slash + 1 : file->path;
    file->entry = entry;
    file->map = map;
    file->file_size = file_size;
    file->header_size = entry->header_size;
    file->record_size = entry->lines ? 0 : entry->record_size;
    file->seed = seed;
    file->replicas = entry->shard ? replicas : 1;
    file->rank = entry->shard ? rank : 0;

    if (file_size < file->header_size) {
        error_message(error, error_size,
                      "data file %s: size %llu is smaller than its header "
                      "of %llu bytes; accepted: files of at least header= bytes",
                      file->path, (unsigned long long)file_size,
                      (unsigned long long)file->header_size);
        dataset_file_release(file);
        return -1;
    }
    int status = entry->lines ? dataset_file_index_lines(file, error, error_size)
                              : dataset_file_count_records_fixed(file, error, error_size);
    if (status == 0 && entry->has_count_field) {
        unsigned width = dataset_view_count_width(entry->count_type);
        if (entry->count_unit == 0) {
            error_message(error, error_size,
                          "data file %s: count field unit 0; accepted: "
                          "count=OFFSET,TYPE,UNIT with UNIT at least 1",
                          file->path);
            status = -1;
        } else if (entry->count_offset + width > file->header_size) {
            error_message(error, error_size,
                          "data file %s: count field at %llu does not fit "
                          "in the %llu-byte header",
                          file->path, (unsigned long long)entry->count_offset,
                          (unsigned long long)file->header_size);
            status = -1;
        }
    }
    if (status == 0) {
        file->header = malloc(file->header_size ? file->header_size : 1);
        if (file->header == NULL) {
            error_message(error, error_size, "data file %s: out of memory", file->path);
            status = -1;
        }
    }
    if (status == 0 && dataset_file_map_own_pass_state(file) != 0) {
        error_message(error, error_size, "data file %s: cannot map memory for its pass state: %s",
                      file->path, strerror(errno));
        status = -1;
    }
    if (status != 0) {
        dataset_file_release(file);
        return -1;
    }
    if (dataset_view_fix(file) != 0) {
        error_message(error, error_size, "data file %s: out of memory building its view",
                      file->path);
        dataset_file_release(file);
        return -1;
    }
    return 0;
}

void dataset_file_release(struct dataset_file *file)
{
    free(file->path);
    free(file->line_offsets);
    free(file->view_line_prefix);
    free(file->header);
    /* never destroyed: a forked child that releases its copy must leave the
     * lock working for the processes that still share it; a block in the
     * arena stays for the others */
    if (file->shared != NULL && file->shared_size != 0)
        runtime_sysio.munmap(file->shared, file->shared_size);
    memset(file, 0, sizeof *file);
    file->source_fd = -1;
}

/* The permutation of sweep `wrap` of the current pass: sweeps after the
 * first are keyed by their wrap count; the latest one is cached, since a
 * view walks its sweeps in order. */
static const struct record_permutation *dataset_view_sweep_permutation(struct dataset_file *file,
                                                                      uint64_t wrap)
{
    if (wrap == 0)
        return &file->permutation;
    if (file->wrap_cached != wrap) {
        record_permutation_init(&file->wrap_permutation, file->record_count,
                                file->entry->shuffle, file->seed, file->basename,
                                file->view_pass, wrap);
        file->wrap_cached = wrap;
    }
    return &file->wrap_permutation;
}

uint64_t dataset_view_logical_to_physical(struct dataset_file *file, uint64_t position)
{
    uint64_t logical =
        file->view_selected > 0
            ? record_selection_view_index(&file->shared->selection, file->view_selected,
                                          file->replicas, file->rank, position)
            : view_logical_index(file->view_pass_length, file->replicas, file->rank,
                                 file->view_start_index, position);
    if (logical < file->record_count || file->record_count == 0)
        return record_permutation_apply(&file->permutation, logical);
    const struct record_permutation *sweep =
        dataset_view_sweep_permutation(file, logical / file->record_count);
    return record_permutation_apply(sweep, logical % file->record_count);
}

static void dataset_view_store_count(unsigned char *field, enum count_field_type type,
                                     uint64_t value)
{
    unsigned width = dataset_view_count_width(type);
    bool big_endian = type == COUNT_FIELD_U32BE || type == COUNT_FIELD_U64BE;
    for (unsigned i = 0; i < width; i++) {
        /* byte i counts 256^i: first in little-endian order, last in big */
        unsigned place = big_endian ? width - 1 - i : i;
        field[place] = (unsigned char)(value >> (8 * i));
    }
}

static int dataset_view_build_line_prefix(struct dataset_file *file)
{
    free(file->view_line_prefix);
    file->view_line_prefix = malloc((file->view_length + 1) * sizeof(uint64_t));
    if (file->view_line_prefix == NULL)
        return -1;
    uint64_t total = 0;
    file->view_line_prefix[0] = 0;
    for (uint64_t j = 0; j < file->view_length; j++) {
        uint64_t physical = dataset_view_logical_to_physical(file, j);
        total += file->line_offsets[physical + 1] - file->line_offsets[physical];
        file->view_line_prefix[j + 1] = total;
    }
    return 0;
}

/* Builds this process's view of the shared tracker's current pass. */
static int dataset_view_build_local(struct dataset_file *file)
{
    struct pass_plan plan;
    pass_tracker_plan(&file->shared->tracker, &plan);
    record_permutation_init(&file->permutation, file->record_count, file->entry->shuffle,
                            file->seed, file->basename, plan.pass, 0);
    file->wrap_cached = 0;
    file->view_pass = plan.pass;
    file->view_pass_length = plan.pass_length;
    file->view_start_index = plan.start_index;
    file->view_length = plan.length;
    file->view_selected = plan.selected;
    file->block_first = 0;
    file->block_count = 0;
    file->last_lookup = UINT64_MAX;   /* position 0 comes next in order */
    file->prefetched_until = 0;
    file->view_generation = file->shared->view_generation;

    int status = 0;
    uint64_t payload;
    if (file->entry->lines) {
        if (dataset_view_build_line_prefix(file) == 0) {
            payload = file->view_line_prefix[file->view_length];
        } else {
            /* never leave a view whose records have no offsets: header only */
            file->view_length = 0;
            payload = 0;
            status = -1;
        }
    } else {
        payload = file->view_length * file->record_size;
    }
    file->view_size = file->header_size + payload;

    if (file->header_size != 0)  /* an empty file has no mapping at all */
        memcpy(file->header, file->map, file->header_size);
    if (file->entry->has_count_field)
        dataset_view_store_count(file->header + file->entry->count_offset,
                                 file->entry->count_type, payload / file->entry->count_unit);
    return status;
}

int dataset_view_fix(struct dataset_file *file)
{
    struct dataset_pass_state *shared = file->shared;
    shared->view_generation++;
    int status = dataset_view_build_local(file);
    shared->header_read_to_end = false;
    shared->header_only_first_sign = VIEW_SIGN_NONE;
    shared->mapped = false;
    reader_processes_reset(&shared->readers);
    delivery_record_reset(&shared->delivery, file->view_length);
    return status;
}

void dataset_file_lock_without_refresh(struct dataset_file *file)
{
    struct dataset_pass_state *shared = file->shared;
    /* EOWNERDEAD: a process died holding the lock (a DataLoader worker
     * killed mid-read).  What it guarded are counters and bits that every
     * update leaves meaningful, so the state is made consistent as it is. */
    if (pthread_mutex_lock(&shared->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&shared->lock);
}

void dataset_file_set_seed(struct dataset_file *file, uint64_t seed)
{
    dataset_file_lock(file);
    file->seed = seed;
    file->wrap_cached = 0;   /* a later sweep's order is drawn again, from the new seed */
    dataset_file_unlock(file);
}

void dataset_file_lock(struct dataset_file *file)
{
    dataset_file_lock_without_refresh(file);
    if (file->view_generation != file->shared->view_generation)
        dataset_view_build_local(file);
}

void dataset_file_unlock(struct dataset_file *file)
{
    pthread_mutex_unlock(&file->shared->lock);
}

int dataset_file_share_pass_state_in_arena(struct dataset_file *file,
                                           struct pass_state_arena *arena)
{
    struct pass_state_key key = {
        .device = file->device, .inode = file->inode, .record_count = file->record_count,
    };
    size_t size = dataset_pass_state_size(file);
    bool created = false;
    struct dataset_pass_state *block =
        pass_state_arena_claim(arena, &key, size, dataset_pass_state_initialize, file, &created);
    if (block == NULL)
        return -1;
    /* Nothing happened on the file's own state yet (it was made by
     * dataset_file_init just before): it is dropped, not copied. */
    runtime_sysio.munmap(file->shared, file->shared_size);
    file->shared = block;
    file->shared_size = 0;
    file->pass_state_adopted = !created;
    dataset_file_lock(file);
    int status = created ? dataset_view_fix(file) : dataset_view_build_local(file);
    dataset_file_unlock(file);
    return status;
}


/* Index of the view record holding payload offset p (lines mode): the last
 * j with prefix[j] <= p. */
uint64_t dataset_view_line_at(const struct dataset_file *file, uint64_t payload_offset)
{
    uint64_t low = 0;
    uint64_t high = file->view_length;
    while (high - low > 1) {
        uint64_t middle = low + (high - low) / 2;
        if (file->view_line_prefix[middle] <= payload_offset)
            low = middle;
        else
            high = middle;
    }
    return low;
}

uint64_t dataset_view_records_before(const struct dataset_file *file, uint64_t offset)
{
    if (offset <= file->header_size)
        return 0;
    uint64_t payload_offset = offset - file->header_size;
    if (file->record_size != 0) {
        uint64_t records = payload_offset / file->record_size;
        return records < file->view_length ? records : file->view_length;
    }
    if (file->view_length == 0)
        return 0;
    if (payload_offset >= file->view_line_prefix[file->view_length])
        return file->view_length;
    return dataset_view_line_at(file, payload_offset);
}

/* Bytes from `offset` (in the payload) to the end of the record holding it. */
static uint64_t dataset_view_bytes_to_record_end(const struct dataset_file *file,
                                                 uint64_t offset)
{
    uint64_t payload_offset = offset - file->header_size;
    if (file->record_size != 0)
        return file->record_size - payload_offset % file->record_size;
    uint64_t position = dataset_view_line_at(file, payload_offset);
    return file->view_line_prefix[position + 1] - payload_offset;
}

size_t dataset_view_read_limit(const struct dataset_file *file, uint64_t offset, size_t size)
{
    /* a read of exactly what is left (a program that reads st_size bytes at
     * once) is whole; a buffer that happens to be larger than the rest is a
     * reader's read-ahead like any other */
    if (offset >= file->view_size || size == file->view_size - offset)
        return size;
    if (offset < file->header_size) {
        uint64_t to_header_end = file->header_size - offset;
        return size < to_header_end ? size : (size_t)to_header_end;
    }
    if (file->record_size != 0 && (offset - file->header_size) % file->record_size == 0 &&
        size % file->record_size == 0)
        return size;
    uint64_t to_record_end = dataset_view_bytes_to_record_end(file, offset);
    return size < to_record_end ? size : (size_t)to_record_end;
}

uint64_t dataset_view_block_size(const struct dataset_file *file)
{
    return file->record_size;
}

bool dataset_view_end_moves_start(const struct dataset_file *file)
{
    return !delivery_record_covered(&file->shared->delivery) && stale_size_count_covered(file);
}

int dataset_view_end_pass(struct dataset_file *file)
{
    if (!dataset_view_end_moves_start(file) ||
        !pass_tracker_advance_start(&file->shared->tracker))
        pass_tracker_end_pass(&file->shared->tracker);
    return dataset_view_fix(file);
}

bool dataset_view_lengthen(struct dataset_file *file, uint64_t view_records)
{
    struct dataset_pass_state *shared = file->shared;
    if (shared->mapped || !pass_tracker_lengthen(&shared->tracker, view_records))
        return false;
    if (!dataset_view_started(file)) {
        dataset_view_fix(file);
        return true;
    }
    shared->view_generation++;
    dataset_view_build_local(file);
    delivery_record_extend(&shared->delivery, file->view_length);
    return true;
}

bool dataset_view_replay_empties_count_field(const struct dataset_file *file)
{
    return file->entry->has_count_field && pass_tracker_replay_skips_passes(&file->shared->tracker);
}

uint64_t (*dataset_view_training_events)(void);

/* UINT64_MAX where it cannot be told. */
static uint64_t dataset_view_training_events_now(void)
{
    return dataset_view_training_events != NULL ? dataset_view_training_events() : UINT64_MAX;
}

void dataset_view_note_first_read(struct dataset_file *file)
{
    file->shared->training_events_at_first_read = dataset_view_training_events_now();
}

bool dataset_view_read_again_without_training(struct dataset_file *file)
{
    struct dataset_pass_state *shared = file->shared;
    const struct pass_tracker *tracker = &shared->tracker;
    uint64_t now = dataset_view_training_events_now();
    if (now == UINT64_MAX || now != shared->training_events_at_first_read ||
        shared->served_again_pass_plus_one == tracker->previous_pass + 1 ||
        !pass_tracker_repeat_previous_pass(&shared->tracker))
        return false;
    shared->served_again_pass_plus_one = tracker->pass + 1;
    dataset_view_fix(file);
    return true;
}

bool dataset_view_resume_at_own_position(struct dataset_file *file, uint64_t target)
{
    struct dataset_pass_state *shared = file->shared;
    if (file->record_size == 0 || shared->tracker.started || target <= file->header_size ||
        (target - file->header_size) % file->record_size != 0)
        return false;
    uint64_t position = (target - file->header_size) / file->record_size;
    if (!pass_tracker_resume_at_own_position(&shared->tracker, position))
        return false;
    uint64_t delivered = shared->tracker.delivered;
    dataset_view_fix(file);
    delivery_record_mark(&shared->delivery, 0, delivered);
    return true;
}

bool dataset_view_restore(struct dataset_file *file, enum resume_mode resume,
                          uint64_t pass, uint64_t current_index, uint64_t pass_length)
{
    /* resume=whole-pass: the interrupted pass from its start, in its order */
    uint64_t length = pass_length == 0 ? file->record_count : pass_length;
    if (file->entry->resume_whole_pass && current_index < length)
        current_index = 0;
    if (!pass_tracker_restore(&file->shared->tracker, resume, pass, current_index, pass_length))
        return false;
    dataset_view_fix(file);
    return true;
}

bool dataset_view_select_undelivered(struct dataset_file *file, uint64_t pass_length,
                                     const unsigned char *delivered_after, size_t size)
{
    struct dataset_pass_state *shared = file->shared;
    struct pass_tracker *tracker = &shared->tracker;
    uint64_t length = pass_length == 0 ? file->record_count : pass_length;
    if (size == 0 || file->entry->resume_whole_pass || tracker->bound_length != length ||
        tracker->bound_index >= length)
        return false;
    if (!record_selection_load(&shared->selection, tracker->bound_index,
                               length - tracker->bound_index, delivered_after, size) ||
        !pass_tracker_select_undelivered(tracker, shared->selection.remaining))
        return false;
    dataset_view_fix(file);
    return true;
}
