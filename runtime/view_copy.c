/* view_copy.c - copying a view's bytes out to the trainer (see
 * dataset_view.h, "copies"): planning a read under the file's lock, then
 * copying the plan without it from the mapping or with pread, while
 * advising the kernel of the records the trainer will want next. */
#include "dataset_view.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sysio.h"

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

/* Physical record index of view position j, computed a block at a time. */
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
        .selection = file->view_selected > 0 ? &file->shared->selection : NULL,
        .selected = file->view_selected,
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
    uint64_t logical =
        layout->selection != NULL
            ? record_selection_view_index(layout->selection, layout->selected,
                                          layout->replicas, layout->rank, position)
            : view_logical_index(layout->pass_length, layout->replicas, layout->rank,
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
