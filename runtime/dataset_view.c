/* dataset_view.c - one data file and the view of its current pass (see
 * dataset_view.h).  Everything here works on memory: the shim maps the file
 * and hands the mapping in, tests hand in a buffer. */
#include "dataset_view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sysio.h"

static int dataset_file_count_records_fixed(struct dataset_file *file, char *error,
                                            size_t error_size)
{
    if (file->record_size == 0) {
        snprintf(error, error_size, "data file %s: record size 0; accepted: record=BYTES "
                 "(at least 1) or lines", file->path);
        return -1;
    }
    uint64_t payload = file->file_size - file->header_size;
    uint64_t remainder = payload % file->record_size;
    if (remainder != 0 && file->entry->tail == TAIL_ERROR) {
        snprintf(error, error_size,
                 "data file %s: size %llu minus header %llu is not a multiple of record "
                 "size %llu (%llu trailing bytes); fix the file or its entry, or add "
                 ":tail=drop to ignore them",
                 file->path, (unsigned long long)file->file_size,
                 (unsigned long long)file->header_size,
                 (unsigned long long)file->record_size, (unsigned long long)remainder);
        return -1;
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
        snprintf(error, error_size, "data file %s: no memory for a %llu-line index",
                 file->path, (unsigned long long)count);
        return -1;
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
        snprintf(error, error_size,
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

/* Bytes of a pass-state block: the struct, then the delivery bits. */
static size_t dataset_pass_state_size(uint64_t record_count)
{
    return sizeof(struct dataset_pass_state) +
           (size_t)delivery_record_words(record_count) * sizeof(uint64_t);
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
    delivery_record_init(&shared->delivery, (uint64_t *)(shared + 1), file->record_count);
    pass_tracker_init(&shared->tracker, file->record_count, file->replicas, file->rank);
    pass_tracker_set_statistical(&shared->tracker, file->entry->role == DATA_ROLE_TRAIN);
    shared->header_read_to_end = false;
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
    size_t size = dataset_pass_state_size(file->record_count);
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
        snprintf(error, error_size, "data file %s: out of memory", absolute_path);
        return -1;
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
        snprintf(error, error_size, "data file %s: size %llu is smaller than its header "
                 "of %llu bytes; accepted: files of at least header= bytes",
                 file->path, (unsigned long long)file_size,
                 (unsigned long long)file->header_size);
        dataset_file_release(file);
        return -1;
    }
    int status = entry->lines ? dataset_file_index_lines(file, error, error_size)
                              : dataset_file_count_records_fixed(file, error, error_size);
    if (status == 0 && entry->has_count_field) {
        unsigned width = entry->count_type == COUNT_FIELD_U64LE ||
                                 entry->count_type == COUNT_FIELD_U64BE ? 8 : 4;
        if (entry->count_unit == 0) {
            snprintf(error, error_size, "data file %s: count field unit 0; accepted: "
                     "count=OFFSET,TYPE,UNIT with UNIT at least 1", file->path);
            status = -1;
        } else if (entry->count_offset + width > file->header_size) {
            snprintf(error, error_size, "data file %s: count field at %llu does not fit "
                     "in the %llu-byte header", file->path,
                     (unsigned long long)entry->count_offset,
                     (unsigned long long)file->header_size);
            status = -1;
        }
    }
    if (status == 0) {
        file->header = malloc(file->header_size ? file->header_size : 1);
        if (file->header == NULL) {
            snprintf(error, error_size, "data file %s: out of memory", file->path);
            status = -1;
        }
    }
    if (status == 0 && dataset_file_map_own_pass_state(file) != 0) {
        snprintf(error, error_size, "data file %s: cannot map memory for its pass state: %s",
                 file->path, strerror(errno));
        status = -1;
    }
    if (status != 0) {
        dataset_file_release(file);
        return -1;
    }
    if (dataset_view_fix(file) != 0) {
        snprintf(error, error_size, "data file %s: out of memory building its view",
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

static uint64_t dataset_view_logical_to_physical(struct dataset_file *file, uint64_t position)
{
    uint64_t logical = view_logical_index(file->view_pass_length, file->replicas, file->rank,
                                          file->view_start_index, position);
    if (logical < file->record_count || file->record_count == 0)
        return record_permutation_apply(&file->permutation, logical);
    const struct record_permutation *sweep =
        dataset_view_sweep_permutation(file, logical / file->record_count);
    return record_permutation_apply(sweep, logical % file->record_count);
}

/* Physical record index of view position j, computed a block at a time. */
/* True when the page holding `offset` of the file is in the page cache. */
static bool dataset_view_page_resident(const struct dataset_file *file, uint64_t offset)
{
    long page_size = sysconf(_SC_PAGESIZE);
    uint64_t page_start = offset - offset % (uint64_t)page_size;
    unsigned char resident = 0;
    if (mincore((void *)(file->map + page_start), (size_t)page_size, &resident) != 0)
        return false;
    return (resident & 1) != 0;
}

/* Asks the kernel to start reading the records the trainer will want next
 * (the shim knows the order), a window of about 32 MiB at a time.  Only for
 * records large enough that one advice call per record is cheap next to the
 * data it brings in, and only when the data is not cached already: one
 * residency probe per window decides, since advising cached pages costs a
 * system call per record for nothing. */
static void dataset_view_prefetch_ahead(struct dataset_file *file, uint64_t position)
{
    if (file->record_size < VIEW_PREAD_MIN_CHUNK || file->source_fd < 0 ||
        position < file->prefetched_until)
        return;
    uint64_t window = VIEW_PREFETCH_BYTES / file->record_size;
    if (window == 0)
        window = 1;
    uint64_t until = position + window < file->view_length ? position + window
                                                           : file->view_length;
    uint64_t first = dataset_view_logical_to_physical(file, position);
    bool cached = dataset_view_page_resident(file, file->header_size +
                                                       first * file->record_size);
    for (uint64_t ahead = position; !cached && ahead < until; ahead++) {
        uint64_t physical = dataset_view_logical_to_physical(file, ahead);
        posix_fadvise(file->source_fd,
                      (off_t)(file->header_size + physical * file->record_size),
                      (off_t)file->record_size, POSIX_FADV_WILLNEED);
    }
    file->prefetched_until = until;
}

static uint64_t dataset_view_physical_record(struct dataset_file *file, uint64_t position)
{
    dataset_view_prefetch_ahead(file, position);
    if (position - file->block_first < file->block_count)
        return file->block_indices[position - file->block_first];
    /* Only a reader going in view order gets the block refilled (a miss at
     * the position after the last one looked up): a map-style Dataset at
     * shuffled positions would otherwise pay VIEW_INDEX_BLOCK permutation
     * evaluations for every record it reads. */
    bool in_order = position == file->last_lookup + 1;
    file->last_lookup = position;
    if (!in_order)
        return dataset_view_logical_to_physical(file, position);
    uint64_t count = file->view_length - position;
    if (count > VIEW_INDEX_BLOCK)
        count = VIEW_INDEX_BLOCK;
    for (uint64_t i = 0; i < count; i++)
        file->block_indices[i] = dataset_view_logical_to_physical(file, position + i);
    file->block_first = position;
    file->block_count = count;
    return file->block_indices[0];
}

static void dataset_view_store_count(unsigned char *field, enum count_field_type type,
                                     uint64_t value)
{
    switch (type) {
    case COUNT_FIELD_U32LE:
    case COUNT_FIELD_I32LE:
        for (int i = 0; i < 4; i++)
            field[i] = (unsigned char)(value >> (8 * i));
        break;
    case COUNT_FIELD_U32BE:
        for (int i = 0; i < 4; i++)
            field[i] = (unsigned char)(value >> (8 * (3 - i)));
        break;
    case COUNT_FIELD_U64LE:
        for (int i = 0; i < 8; i++)
            field[i] = (unsigned char)(value >> (8 * i));
        break;
    case COUNT_FIELD_U64BE:
        for (int i = 0; i < 8; i++)
            field[i] = (unsigned char)(value >> (8 * (7 - i)));
        break;
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
    shared->mapped = false;
    reader_processes_reset(&shared->readers);
    delivery_record_reset(&shared->delivery, file->view_length);
    return status;
}

void dataset_file_lock(struct dataset_file *file)
{
    struct dataset_pass_state *shared = file->shared;
    /* EOWNERDEAD: a process died holding the lock (a DataLoader worker
     * killed mid-read).  What it guarded are counters and bits that every
     * update leaves meaningful, so the state is made consistent as it is. */
    if (pthread_mutex_lock(&shared->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&shared->lock);
    if (file->view_generation != shared->view_generation)
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
    size_t size = dataset_pass_state_size(file->record_count);
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
static uint64_t dataset_view_line_at(const struct dataset_file *file, uint64_t payload_offset)
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

/* A place in a list of destination vectors. */
struct view_destination {
    const struct iovec *vector;
    int count;
    int index;                    /* vector[index], `within` bytes into it */
    size_t within;
};

static void view_destination_at(struct view_destination *destination,
                                const struct iovec *vector, int count, uint64_t position)
{
    *destination = (struct view_destination){.vector = vector, .count = count};
    while (destination->index < count && position >= vector[destination->index].iov_len) {
        position -= vector[destination->index].iov_len;
        destination->index++;
    }
    destination->within = (size_t)position;
}

/* The next contiguous stretch of the destination, at most `length` bytes;
 * NULL when the vectors are full. */
static unsigned char *view_destination_next(struct view_destination *destination,
                                            uint64_t length, size_t *stretch)
{
    while (destination->index < destination->count &&
           destination->within == destination->vector[destination->index].iov_len) {
        destination->index++;
        destination->within = 0;
    }
    if (destination->index == destination->count)
        return NULL;
    const struct iovec *part = &destination->vector[destination->index];
    size_t left = part->iov_len - destination->within;
    *stretch = length < left ? (size_t)length : left;
    unsigned char *out = (unsigned char *)part->iov_base + destination->within;
    destination->within += *stretch;
    return out;
}

static void view_destination_put(struct view_destination *destination, const void *source,
                                 uint64_t length)
{
    const unsigned char *from = source;
    size_t stretch;
    unsigned char *out;
    while (length > 0 && (out = view_destination_next(destination, length, &stretch)) != NULL) {
        memcpy(out, from, stretch);
        from += stretch;
        length -= stretch;
    }
}

/* Where a copy writes: one buffer (the common case, no vector walk per
 * record, which small records would feel) or several vectors. */
struct view_sink {
    const struct dataset_file *file;
    unsigned char *out;           /* one buffer: its next byte; NULL: `vectors` */
    struct view_destination vectors;
    int fd;                       /* large pieces by pread from it; -1: the mapping */
    bool by_pread;                /* some bytes came from pread */
};

static void view_sink_open(struct view_sink *sink, const struct dataset_file *file,
                           const struct view_copy_plan *plan, const struct iovec *vector,
                           int count, uint64_t position, int fd)
{
    position += plan->direct_bytes;
    uint64_t bytes = plan->bytes - plan->direct_bytes;
    *sink = (struct view_sink){.file = file, .fd = fd};
    if (count == 1 && position + bytes <= vector[0].iov_len)
        sink->out = (unsigned char *)vector[0].iov_base + position;
    else
        view_destination_at(&sink->vectors, vector, count, position);
}

/* Large pieces by pread (the kernel copies page-cached data faster than a
 * first touch of mapped pages faults it in), the rest, and whatever pread
 * did not fill, from the mapping. */
static void view_sink_copy(struct view_sink *sink, unsigned char *out, uint64_t file_offset,
                           size_t length, bool large)
{
    if (large && sink->fd >= 0 &&
        sysio_pread_full(sink->fd, out, length, (off_t)file_offset) == (ssize_t)length)
        sink->by_pread = true;
    else
        memcpy(out, sink->file->map + file_offset, length);
}

static void view_sink_put(struct view_sink *sink, uint64_t file_offset, uint64_t length)
{
    bool large = length >= VIEW_PREAD_MIN_CHUNK;
    if (sink->out != NULL) {
        view_sink_copy(sink, sink->out, file_offset, (size_t)length, large);
        sink->out += length;
        return;
    }
    size_t stretch;
    unsigned char *out;
    while (length > 0 && (out = view_destination_next(&sink->vectors, length, &stretch)) != NULL) {
        view_sink_copy(sink, out, file_offset, stretch, large);
        file_offset += stretch;
        length -= stretch;
    }
}

static void view_record_layout_of(const struct dataset_file *file,
                                  struct view_record_layout *layout)
{
    *layout = (struct view_record_layout){
        .header_size = file->header_size,
        .record_size = file->record_size,
        .record_count = file->record_count,
        .pass = file->view_pass,
        .pass_length = file->view_pass_length,
        .start_index = file->view_start_index,
        .replicas = file->replicas,
        .rank = file->rank,
        .shuffle = file->entry->shuffle,
        .seed = file->seed,
        .basename = file->basename,
        .permutation = file->permutation,
    };
}

/* Physical record of view position j, as dataset_view_logical_to_physical
 * computes it, from a layout; `sweep` caches the permutation of the latest
 * later sweep (*sweep_wrap, 0: none). */
static uint64_t view_record_layout_physical(const struct view_record_layout *layout,
                                            struct record_permutation *sweep,
                                            uint64_t *sweep_wrap, uint64_t position)
{
    uint64_t logical = view_logical_index(layout->pass_length, layout->replicas, layout->rank,
                                          layout->start_index, position);
    if (logical < layout->record_count || layout->record_count == 0)
        return record_permutation_apply(&layout->permutation, logical);
    uint64_t wrap = logical / layout->record_count;
    if (*sweep_wrap != wrap) {
        record_permutation_init(sweep, layout->record_count, layout->shuffle, layout->seed,
                                layout->basename, layout->pass, wrap);
        *sweep_wrap = wrap;
    }
    return record_permutation_apply(sweep, logical % layout->record_count);
}

/* The planned run of fixed-size records, each record's place computed here:
 * a few dozen places first, then their copies, so that the copies' cache
 * misses overlap (computing a place between two copies would stall on each). */
#define VIEW_RUN_STRIDE 64
static void view_sink_put_run(struct view_sink *sink, const struct view_copy_plan *plan)
{
    const struct view_record_layout *layout = &plan->layout;
    struct record_permutation sweep;
    uint64_t sweep_wrap = 0;
    uint64_t offset = plan->run_payload_offset;
    uint64_t left = plan->run_bytes;
    struct view_copy_piece places[VIEW_RUN_STRIDE];
    while (left > 0) {
        size_t count = 0;
        for (; count < VIEW_RUN_STRIDE && left > 0; count++) {
            uint64_t position = offset / layout->record_size;
            uint64_t within = offset % layout->record_size;
            uint64_t physical = view_record_layout_physical(layout, &sweep, &sweep_wrap,
                                                            position);
            uint64_t chunk = layout->record_size - within < left ? layout->record_size - within
                                                                  : left;
            places[count] = (struct view_copy_piece){
                layout->header_size + physical * layout->record_size + within, chunk};
            offset += chunk;
            left -= chunk;
        }
        for (size_t i = 0; i < count; i++)
            view_sink_put(sink, places[i].file_offset, places[i].length);
    }
}

uint64_t dataset_view_plan_copy(struct dataset_file *file, uint64_t offset, uint64_t size,
                                const struct iovec *vector, int count, uint64_t position,
                                struct view_copy_plan *plan)
{
    plan->bytes = 0;
    plan->direct_bytes = 0;
    plan->piece_count = 0;
    plan->run_bytes = 0;
    plan->source_fd = file->source_fd;
    plan->source_fd_changes = __atomic_load_n(&file->source_fd_changes, __ATOMIC_SEQ_CST);
    /* without count= the view's header is the file's first bytes */
    bool header_is_file = !file->entry->has_count_field;
    while (plan->bytes < size && offset < file->view_size) {
        uint64_t want = size - plan->bytes;
        uint64_t file_offset;
        uint64_t available;
        if (offset < file->header_size) {
            available = file->header_size - offset;
            if (!header_is_file) {
                /* the header comes first: nothing is planned before it */
                uint64_t chunk = available < want ? available : want;
                struct view_destination destination;
                view_destination_at(&destination, vector, count, position + plan->bytes);
                view_destination_put(&destination, file->header + offset, chunk);
                plan->direct_bytes += chunk;
                plan->bytes += chunk;
                offset += chunk;
                continue;
            }
            file_offset = offset;
        } else if (file->record_size != 0) {
            /* the rest is one run of records, the last thing planned */
            uint64_t payload_offset = offset - file->header_size;
            uint64_t run = file->view_size - offset < want ? file->view_size - offset : want;
            uint64_t longest = VIEW_COPY_RUN_RECORDS * file->record_size;
            if (longest > VIEW_COPY_RUN_BYTES)
                longest = VIEW_COPY_RUN_BYTES > file->record_size ? VIEW_COPY_RUN_BYTES
                                                                  : file->record_size;
            if (run > longest)
                run = longest;
            view_record_layout_of(file, &plan->layout);
            plan->run_payload_offset = payload_offset;
            plan->run_bytes = run;
            plan->bytes += run;
            /* the kernel's read-ahead follows the records the run will want */
            dataset_view_prefetch_ahead(file, payload_offset / file->record_size);
            dataset_view_prefetch_ahead(file, (payload_offset + run - 1) / file->record_size);
            break;
        } else {
            uint64_t payload_offset = offset - file->header_size;
            uint64_t position_in_view = dataset_view_line_at(file, payload_offset);
            uint64_t within = payload_offset - file->view_line_prefix[position_in_view];
            uint64_t physical = dataset_view_physical_record(file, position_in_view);
            file_offset = file->line_offsets[physical] + within;
            available = file->view_line_prefix[position_in_view + 1] - payload_offset;
        }
        if (plan->piece_count == VIEW_COPY_PLAN_PIECES)
            break;
        uint64_t chunk = available < want ? available : want;
        plan->pieces[plan->piece_count++] = (struct view_copy_piece){file_offset, chunk};
        plan->bytes += chunk;
        offset += chunk;
    }
    return plan->bytes;
}

/* Everything planned after the direct bytes, from `fd` for large pieces.
 * True when some bytes came from pread. */
static bool view_copy_planned(const struct dataset_file *file, const struct view_copy_plan *plan,
                              const struct iovec *vector, int count, uint64_t position, int fd)
{
    struct view_sink sink;
    view_sink_open(&sink, file, plan, vector, count, position, fd);
    for (size_t i = 0; i < plan->piece_count; i++)
        view_sink_put(&sink, plan->pieces[i].file_offset, plan->pieces[i].length);
    if (plan->run_bytes > 0)
        view_sink_put_run(&sink, plan);
    return sink.by_pread;
}

void dataset_view_run_copy(const struct dataset_file *file, const struct view_copy_plan *plan,
                           const struct iovec *vector, int count, uint64_t position)
{
    bool by_pread = view_copy_planned(file, plan, vector, count, position, plan->source_fd);
    /* The descriptor moves (dataset_view_set_source_fd) before its number
     * may become another file's: unchanged now means every pread above read
     * this file. */
    if (by_pread && __atomic_load_n(&file->source_fd_changes, __ATOMIC_SEQ_CST) !=
                        plan->source_fd_changes)
        view_copy_planned(file, plan, vector, count, position, -1);
}

void dataset_view_set_source_fd(struct dataset_file *file, int fd)
{
    file->source_fd = fd;
    __atomic_add_fetch(&file->source_fd_changes, 1, __ATOMIC_SEQ_CST);
}

size_t dataset_view_copy(struct dataset_file *file, uint64_t offset, void *buffer,
                         size_t size)
{
    struct iovec whole = {.iov_base = buffer, .iov_len = size};
    struct view_copy_plan plan;
    uint64_t copied = 0;
    while (copied < size) {
        uint64_t planned = dataset_view_plan_copy(file, offset + copied, size - copied, &whole,
                                                  1, copied, &plan);
        if (planned == 0)
            break;
        dataset_view_run_copy(file, &plan, &whole, 1, copied);
        copied += planned;
    }
    return (size_t)copied;
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

/* Puts this process in the view's readers, once per process and view. */
static void dataset_view_note_reader(struct dataset_file *file)
{
    pid_t self = reader_process_self();
    if (file->reader_noted_pid == self &&
        file->reader_noted_generation == file->shared->view_generation)
        return;
    reader_processes_add(&file->shared->readers, self);
    file->reader_noted_pid = self;
    file->reader_noted_generation = file->shared->view_generation;
}

void dataset_view_note_read(struct dataset_file *file, uint64_t offset, uint64_t count)
{
    if (count == 0)
        return;
    uint64_t end = offset + count;
    uint64_t first = dataset_view_records_before(file, offset);
    uint64_t last = dataset_view_records_before(file, end);
    delivery_record_mark(&file->shared->delivery, first, last);
    if (last > first)
        dataset_view_note_reader(file);
    /* A header-only view read to its end counts as begun, so that a rewind or
     * reopen ends it like any other pass (see view_cursor.c). */
    if (file->view_length == 0 && file->view_size > 0 && end >= file->view_size)
        file->shared->header_read_to_end = true;
    pass_tracker_note_delivered(&file->shared->tracker, file->shared->delivery.prefix,
                                file->shared->delivery.delivered > 0 || file->shared->header_read_to_end);
}

void dataset_view_note_mapped(struct dataset_file *file)
{
    file->shared->mapped = true;
    pass_tracker_note_delivered(&file->shared->tracker, file->shared->delivery.prefix, true);
}

bool dataset_view_readers_finished_pass(const struct dataset_file *file)
{
    const struct reader_processes *readers = &file->shared->readers;
    if (file->view_length == 0 || !delivery_record_covered(&file->shared->delivery))
        return false;
    pid_t self = reader_process_self();
    if (reader_processes_others_exited(readers, self))
        return true;
    return reader_processes_only(readers, self) &&
           __atomic_load_n(&file->open_cursors, __ATOMIC_RELAXED) == 0;
}

uint64_t dataset_view_records_in_flight(const struct dataset_file *file)
{
    uint64_t lookahead = file->entry->lookahead;
    if (lookahead == 0 || dataset_view_readers_finished_pass(file))
        return 0;
    return lookahead;
}

bool dataset_view_end_pass_finished_by_readers(struct dataset_file *file)
{
    if (!dataset_view_readers_finished_pass(file))
        return false;
    dataset_view_end_pass(file);
    return true;
}

bool dataset_view_covered(const struct dataset_file *file)
{
    if (file->shared->mapped)
        return true;
    if (file->view_length == 0)
        return file->shared->header_read_to_end;
    return delivery_record_covered(&file->shared->delivery);
}

bool dataset_view_read_repeats_covered_pass(const struct dataset_file *file, uint64_t offset,
                                            uint64_t count)
{
    if (file->view_length == 0 || !delivery_record_covered(&file->shared->delivery))
        return false;
    return delivery_record_any_delivered(&file->shared->delivery,
                                         dataset_view_records_before(file, offset),
                                         dataset_view_records_before(file, offset + count));
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

int dataset_view_end_pass(struct dataset_file *file)
{
    pass_tracker_end_pass(&file->shared->tracker);
    return dataset_view_fix(file);
}

bool dataset_view_replay_empties_count_field(const struct dataset_file *file)
{
    return file->entry->has_count_field && pass_tracker_replay_skips_passes(&file->shared->tracker);
}

bool dataset_view_restore(struct dataset_file *file, enum resume_mode resume,
                          uint64_t pass, uint64_t current_index, uint64_t pass_length)
{
    if (!pass_tracker_restore(&file->shared->tracker, resume, pass, current_index, pass_length))
        return false;
    dataset_view_fix(file);
    return true;
}
