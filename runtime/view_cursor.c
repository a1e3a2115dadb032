/* view_cursor.c - descriptor operations on a data view (see view_cursor.h). */
#include "view_cursor.h"

#include <errno.h>
#include <stdio.h>

#include "log.h"
#include "stale_size.h"

void (*view_cursor_pass_observer)(const struct dataset_file *file, bool begins, uint64_t pass,
                                  uint64_t records_consumed, const char *why);

static void view_cursor_end_pass_locked(struct dataset_file *file, const char *why)
{
    uint64_t ended = file->view_pass;
    uint64_t served = file->shared->tracker.delivered;
    if (dataset_view_end_moves_start(file)) {
        dataset_view_end_pass(file);
        log_debug("epoch end inside a pass: %s pass %llu (%s), the %llu records the trainer "
                  "counts consumed; the pass goes on from index %llu, %llu records on this "
                  "replica", file->path, (unsigned long long)ended, why,
                  (unsigned long long)served, (unsigned long long)file->view_start_index,
                  (unsigned long long)file->view_length);
        return;
    }
    if (view_cursor_pass_observer != NULL)
        view_cursor_pass_observer(file, false, ended, served, why);
    dataset_view_end_pass(file);
    log_debug("pass end: %s pass %llu (%s), %llu records consumed; next pass %llu starts at "
              "index %llu, %llu records on this replica%s",
              file->path, (unsigned long long)ended, why, (unsigned long long)served,
              (unsigned long long)file->view_pass,
              (unsigned long long)file->view_start_index,
              (unsigned long long)file->view_length,
              file->shared->tracker.skipped ? " (skipped: replay)" : "");
}

/* The trainer starts reading the file again from its header (a reopen, a
 * rewind) right after reading a pass to its end: with nothing trained
 * since that pass began, that is a loader reading its data twice, and it
 * gets the same pass again (lock held;
 * dataset_view_read_again_without_training). */
static void view_cursor_read_again_locked(struct dataset_file *file)
{
    if (!dataset_view_read_again_without_training(file))
        return;
    log_info("%s: read again from its start with nothing trained since it began (a loader "
             "that counts its records, then reads them): pass %llu is served a second time, "
             "%llu records on this replica", file->path, (unsigned long long)file->view_pass,
             (unsigned long long)file->view_length);
}

/* The trainer looks at the file again (a reopen, a size question): a
 * replica that read only its share of its own view shards the data itself
 * (dataset_view_read_one_replica_share).  Lock held. */
static void view_cursor_check_own_sharding_locked(struct dataset_file *file)
{
    if (!dataset_view_read_one_replica_share(file))
        return;
    log_warn("%s: replica %u of %u read %llu of the %llu records of its view in pass %llu, "
             "then began again: the trainer seems to shard the data itself "
             "(DistributedSampler, process_rank/num_processes, index %% world_size) on top of "
             "the shim's sharding, so each epoch covers 1/%u of the data; add shard=0 to the "
             "file's ADAPTDL_DATA entry, or give the trainer a world of one",
             file->path, file->rank, file->replicas,
             (unsigned long long)file->shared->delivery.delivered,
             (unsigned long long)file->view_length, (unsigned long long)file->view_pass,
             file->replicas);
}

void view_cursor_open(struct view_cursor *cursor, struct dataset_file *file)
{
    dataset_file_lock(file);
    view_cursor_check_own_sharding_locked(file);
    view_cursor_read_again_locked(file);
    if (dataset_view_reopen_ends_pass(file))
        view_cursor_end_pass_locked(file, "reopened");
    dataset_view_note_opened(file);
    cursor->file = file;
    cursor->offset = 0;
    cursor->pass = file->view_pass;
    cursor->at_end = false;
    cursor->repositioned = false;
    cursor->trainer_moved_pass = 0;
    cursor->references = 1;
    dataset_file_unlock(file);
    __atomic_add_fetch(&file->open_cursors, 1, __ATOMIC_RELAXED);
}

void view_cursor_close(struct view_cursor *cursor)
{
    __atomic_sub_fetch(&cursor->file->open_cursors, 1, __ATOMIC_RELAXED);
}

/* A cursor whose pass is over may join the current one only from the header,
 * and only if it did not read to the end itself: anywhere else, or at the
 * end of a header-only view it read to its 0, it still stands at the end of
 * the pass it finished (a second read at EOF must not swallow the next pass,
 * nor end it when it is header-only too). */
static bool view_cursor_is_current_locked(struct view_cursor *cursor)
{
    struct dataset_file *file = cursor->file;
    if (cursor->pass == file->view_pass)
        return true;
    if (cursor->offset <= file->header_size && !cursor->at_end) {
        cursor->pass = file->view_pass;
        return true;
    }
    return false;
}

/* Marks view bytes [offset, offset + count) delivered and tells the observer
 * when that began the pass (its first delivered record).  `placed`: the
 * trainer positioned this read itself (a seek, then a read; a pread). */
static void view_cursor_deliver_locked(struct dataset_file *file, uint64_t offset,
                                       uint64_t count, bool placed)
{
    bool was_started = dataset_view_started(file);
    if (placed)
        dataset_view_note_placed_read(file, offset, count);
    dataset_view_note_read(file, offset, count);
    log_trace("delivered view bytes [%llu, %llu) of %s pass %llu: %llu of %llu records",
              (unsigned long long)offset, (unsigned long long)(offset + count), file->path,
              (unsigned long long)file->view_pass,
              (unsigned long long)file->shared->delivery.delivered,
              (unsigned long long)file->view_length);
    if (was_started || !dataset_view_started(file))
        return;
    if (view_cursor_pass_observer != NULL)
        view_cursor_pass_observer(file, true, file->view_pass, 0, "first record read");
    log_debug("pass begin: %s pass %llu, indices from %llu, %llu records on replica %u of %u",
              file->path, (unsigned long long)file->view_pass,
              (unsigned long long)file->view_start_index,
              (unsigned long long)file->view_length, file->rank, file->replicas);
}

/* A read that would hand out again a record of a covered pass belongs to the
 * next pass: end this one first, and let the cursor join the next. */
static void view_cursor_begin_next_pass_if_repeating_locked(struct view_cursor *cursor,
                                                           size_t size)
{
    struct dataset_file *file = cursor->file;
    bool repositioned = cursor->repositioned;
    cursor->repositioned = false;
    if (!repositioned || !dataset_view_read_repeats_covered_pass(file, cursor->offset, size))
        return;
    view_cursor_end_pass_locked(file, "read again after every record was delivered");
    cursor->pass = file->view_pass;
}

/* The trainer placed the cursor's next read at `target` (a seek, an fseek,
 * a pread; lock held): the first placement inside a pass restored under
 * continue may take back the pass's coordinates
 * (dataset_view_resume_at_own_position), and the cursor joins the view. */
static void view_cursor_placed_locked(struct view_cursor *cursor, uint64_t target)
{
    struct dataset_file *file = cursor->file;
    uint64_t restored_at = file->view_start_index;
    if (!dataset_view_resume_at_own_position(file, target))
        return;
    cursor->pass = file->view_pass;
    log_info("%s: the trainer placed its first read after the restore where its epoch "
             "stopped (its record %llu): pass %llu keeps its coordinates from index %llu, so "
             "that the read reaches index %llu, the first record not consumed",
             file->path, (unsigned long long)file->shared->tracker.delivered,
             (unsigned long long)file->view_pass, (unsigned long long)file->view_start_index,
             (unsigned long long)restored_at);
}

static void view_cursor_lengthen_locked(struct dataset_file *file, uint64_t records)
{
    if (dataset_view_lengthen(file, records))
        log_debug("pass lengthened: %s pass %llu from index %llu, %llu records on this "
                  "replica, pass length %llu", file->path, (unsigned long long)file->view_pass,
                  (unsigned long long)file->view_start_index,
                  (unsigned long long)file->view_length,
                  (unsigned long long)file->view_pass_length);
}

/* Before a read of `size` bytes at `first` (lock held; `positioned`: the
 * trainer placed it, by a seek or a pread): a pass the trainer reads with
 * the count of a longer view gets that count (stale_size.h).  One it asked
 * about is decided at the first read from past the header (reading the
 * header, as a Dataset that asks the size afterwards does, decides
 * nothing); a complete pass ends first, and the cursor joins the next.
 * One it only had an fstat of is decided by a read placed past the end. */
static void view_cursor_serve_told_length_locked(struct view_cursor *cursor, uint64_t first,
                                                 uint64_t size, bool positioned)
{
    struct dataset_file *file = cursor->file;
    bool begun = dataset_view_started(file);
    /* the path of every read of a pass under way: nothing to decide */
    if (size == 0 || first < file->header_size ||
        (begun && (!positioned || first < file->view_size)))
        return;
    char message[1024];
    message[0] = '\0';
    uint64_t records = 0;
    if (!begun) {
        enum stale_size_answer answer =
            stale_size_first_payload_read(file, &records, message, sizeof message);
        if (answer == STALE_SIZE_END_COMPLETE_PASS) {
            view_cursor_end_pass_locked(file,
                                        "complete, and read with the count of a longer view");
            cursor->pass = file->view_pass;
            answer = stale_size_first_payload_read(file, &records, message, sizeof message);
        }
        if (answer == STALE_SIZE_LENGTHEN)
            view_cursor_lengthen_locked(file, records);
    }
    if (positioned && message[0] == '\0' &&
        stale_size_positioned_past_end(file, first, &records, message, sizeof message))
        view_cursor_lengthen_locked(file, records);
    if (message[0] != '\0')
        log_warn("%s", message);
}

/* A read at the end of the view ends the pass (adaptshim(7) "Passes", rule 1): records of
 * the view that were never delivered are lost to this epoch, and the
 * accounting can see it (one warn line per pass).  A pass whose
 * rest is out of the loader's reach (llm.c's last record) is no loss the
 * trainer could have read.  Lock held. */
static void view_cursor_end_pass_at_end_locked(struct dataset_file *file)
{
    const struct delivery_record *delivery = &file->shared->delivery;
    if (file->view_length > 0 && !dataset_view_covered(file) &&
        !dataset_view_rest_is_less_than_a_placed_read(file))
        log_warn("%s: pass %llu was read to its end with %llu of the %llu records of this "
                 "replica's view never read: they are lost to this epoch (the trainer moved "
                 "past them, by a seek or by a count of records done under another replica "
                 "count); let the trainer read each epoch from its first record, or run "
                 "adaptdl-verify on it",
                 file->path, (unsigned long long)file->view_pass,
                 (unsigned long long)(delivery->length - delivery->delivered),
                 (unsigned long long)file->view_length);
    view_cursor_end_pass_locked(file, "read to the end");
}

/* Copies view bytes [first, first + span) to the vectors, `span` at most
 * what is left of the view: planned a batch at a time under the file's lock
 * (held on entry and on return), copied with it released (see
 * dataset_view.h).  Returns the bytes copied; *replaced when the view was
 * replaced by the time the copy was done (another thread or process ended
 * the pass, or a restore re-fixed it): the bytes are then the old view's,
 * and the copy stops at the end of the batch in progress, since the rest of
 * the old view can no longer be planned. */
static uint64_t view_cursor_copy(struct dataset_file *file, uint64_t first, uint64_t span,
                                 const struct iovec *vector, int count, bool *replaced)
{
    uint64_t generation = file->view_generation;
    uint64_t done = 0;
    struct view_copy_plan plan;
    while (done < span) {
        uint64_t planned = dataset_view_plan_copy(file, first + done, span - done, vector,
                                                  count, done, &plan);
        if (planned == 0)
            break;
        dataset_file_unlock(file);
        dataset_view_run_copy(file, &plan, vector, count, done);
        done += planned;
        dataset_file_lock(file);
        if (file->view_generation != generation)
            break;
    }
    *replaced = file->view_generation != generation;
    return done;
}

/* Copies at most the vectors' size of view bytes at the cursor and advances
 * it; a read returning 0 ends the pass.  `deliver`: the bytes reach the
 * trainer now (read(2), readv(2)); otherwise a stdio buffer holds them and
 * the stream delivers what its trainer consumes later
 * (view_cursor_deliver).
 *
 * The rule for threads: the range a read will copy is fixed and taken from
 * the cursor under the lock (a read of the same cursor on another thread
 * gets the range after it, as with the kernel's file offset), the copy runs
 * without the lock, and the records are delivered after the copy, under the
 * lock again, only if the view is still the one the range was planned in.
 * If another thread ended the pass meanwhile, the read still returns bytes
 * of the view it began in (it was under way when the pass ended, as a read
 * that had finished just before would have been), but they count for
 * nothing: that pass is over, and the next one must not be credited with
 * records of the old one.  A read cut short that way returns what it copied
 * and leaves the cursor right after it. */
static ssize_t view_cursor_read_vectors(struct view_cursor *cursor, const struct iovec *vector,
                                        int count, bool deliver, uint64_t *read_pass,
                                        uint64_t *read_offset)
{
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    if (!view_cursor_is_current_locked(cursor)) {
        dataset_file_unlock(file);
        return 0;
    }
    size_t requested = 0;
    for (int i = 0; i < count; i++)
        requested += vector[i].iov_len;
    bool positioned = cursor->repositioned;
    view_cursor_begin_next_pass_if_repeating_locked(cursor, requested);
    view_cursor_serve_told_length_locked(cursor, cursor->offset, requested, positioned);
    size_t size = deliver ? dataset_view_read_limit(file, cursor->offset, requested) : requested;
    uint64_t first = cursor->offset;
    uint64_t left = first < file->view_size ? file->view_size - first : 0;
    uint64_t span = size < left ? size : left;
    if (span == 0) {
        /* a stream the trainer moved may reach the end with the last batch
         * of its own order, wherever that falls; a header-only view has
         * no record for such an order to leave out */
        bool trainer_moved = cursor->trainer_moved_pass == file->view_pass + 1;
        if (size > 0 && (deliver || !trainer_moved || file->view_length == 0 ||
                         dataset_view_covered(file))) {
            view_cursor_end_pass_at_end_locked(file);
            cursor->at_end = true;
        }
        dataset_file_unlock(file);
        return 0;
    }
    cursor->offset = first + span;
    uint64_t pass = cursor->pass;
    if (read_pass != NULL)
        *read_pass = pass;
    if (read_offset != NULL)
        *read_offset = first;
    bool replaced;
    uint64_t copied = view_cursor_copy(file, first, span, vector, count, &replaced);
    if (!replaced) {
        if (deliver)
            view_cursor_deliver_locked(file, first, copied, positioned);
    } else if (copied < span && cursor->pass == pass && cursor->offset == first + span) {
        cursor->offset = first + copied;
    }
    dataset_file_unlock(file);
    return (ssize_t)copied;
}

ssize_t view_cursor_peek(struct view_cursor *cursor, void *buffer, size_t size,
                         const uint64_t *offset, struct view_cursor_peek *peek)
{
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    peek->at_cursor = offset == NULL;
    peek->pass = file->view_pass;
    if (offset != NULL) {
        peek->offset = *offset;
        size_t copied = dataset_view_copy(file, *offset, buffer, size);
        dataset_file_unlock(file);
        return (ssize_t)copied;
    }
    if (!view_cursor_is_current_locked(cursor)) {
        peek->offset = cursor->offset;
        dataset_file_unlock(file);
        return 0;
    }
    bool positioned = cursor->repositioned;
    view_cursor_begin_next_pass_if_repeating_locked(cursor, size);
    view_cursor_serve_told_length_locked(cursor, cursor->offset, size, positioned);
    size_t copied = dataset_view_copy(file, cursor->offset, buffer, size);
    peek->pass = file->view_pass;
    peek->offset = cursor->offset;
    if (copied == 0 && size > 0) {
        view_cursor_end_pass_at_end_locked(file);
        cursor->at_end = true;
    }
    dataset_file_unlock(file);
    return (ssize_t)copied;
}

void view_cursor_consume(struct view_cursor *cursor, const struct view_cursor_peek *peek,
                         uint64_t count)
{
    if (count == 0)
        return;
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    if (peek->pass == file->view_pass)
        view_cursor_deliver_locked(file, peek->offset, count, !peek->at_cursor);
    if (peek->at_cursor && cursor->pass == peek->pass && cursor->offset == peek->offset)
        cursor->offset += count;
    dataset_file_unlock(file);
}

/* The rewind rule's "from past the header back to at most the header".  A
 * header-only view (a pass skipped on replay, or a complete one) has nothing
 * past its header: there, moving back from its end counts, so that a trainer
 * that reads the header, finds no records and rewinds still ends the pass. */
static bool view_cursor_moves_back_over_header(const struct dataset_file *file,
                                               uint64_t from, uint64_t to)
{
    if (to > file->header_size)
        return false;
    if (from > file->header_size)
        return true;
    return file->view_length == 0 && to < from && from >= file->view_size;
}

ssize_t view_cursor_read(struct view_cursor *cursor, void *buffer, size_t size)
{
    struct iovec whole = {.iov_base = buffer, .iov_len = size};
    return view_cursor_read_vectors(cursor, &whole, 1, true, NULL, NULL);
}

ssize_t view_cursor_fetch(struct view_cursor *cursor, void *buffer, size_t size,
                          uint64_t *pass, uint64_t *offset)
{
    struct iovec whole = {.iov_base = buffer, .iov_len = size};
    return view_cursor_read_vectors(cursor, &whole, 1, false, pass, offset);
}

void view_cursor_deliver(struct view_cursor *cursor, uint64_t pass, uint64_t offset,
                         uint64_t count, bool placed)
{
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    if (pass == file->view_pass)
        view_cursor_deliver_locked(file, offset, count, placed);
    dataset_file_unlock(file);
}

/* readv(2) as one read of the vectors' total size: the limit applies to the
 * whole, and the pieces are filled in order. */
ssize_t view_cursor_readv(struct view_cursor *cursor, const struct iovec *vector, int count)
{
    return view_cursor_read_vectors(cursor, vector, count, true, NULL, NULL);
}

/* pread(2) and preadv(2): the copy runs without the lock, and its records
 * are delivered afterwards if the view is still the same (the rule of
 * view_cursor_read_vectors). */
static ssize_t view_cursor_pread_vectors(struct view_cursor *cursor, const struct iovec *vector,
                                         int count, uint64_t offset)
{
    struct dataset_file *file = cursor->file;
    uint64_t requested = 0;
    for (int i = 0; i < count; i++)
        requested += vector[i].iov_len;
    dataset_file_lock(file);
    view_cursor_placed_locked(cursor, offset);
    view_cursor_serve_told_length_locked(cursor, offset, requested, true);
    uint64_t left = offset < file->view_size ? file->view_size - offset : 0;
    uint64_t span = requested < left ? requested : left;
    uint64_t copied = 0;
    if (span > 0) {
        bool replaced;
        copied = view_cursor_copy(file, offset, span, vector, count, &replaced);
        if (!replaced)
            view_cursor_deliver_locked(file, offset, copied, true);
    }
    dataset_file_unlock(file);
    return (ssize_t)copied;
}

ssize_t view_cursor_pread(struct view_cursor *cursor, void *buffer, size_t size,
                          uint64_t offset)
{
    struct iovec whole = {.iov_base = buffer, .iov_len = size};
    return view_cursor_pread_vectors(cursor, &whole, 1, offset);
}

ssize_t view_cursor_preadv(struct view_cursor *cursor, const struct iovec *vector,
                           int count, uint64_t offset)
{
    return view_cursor_pread_vectors(cursor, vector, count, offset);
}

/* The trainer asked the size of a descriptor or stream it has open on the
 * file (lock held): a loader that keeps its file open across epochs asks it
 * at each epoch, so a question about a pass it is done with ends that pass
 * first, and the answer is the next pass's.  The descriptor itself stays on
 * the pass it finished, as after a stat of the path.  Returns the size of
 * the view, noted as the answer to `question` (stale_size_note_answer). */
static uint64_t view_cursor_answer_size_locked(struct dataset_file *file,
                                               enum size_question question)
{
    view_cursor_check_own_sharding_locked(file);
    if (dataset_view_size_question_ends_pass(file))
        view_cursor_end_pass_locked(file, "size asked again after the readers were done");
    dataset_view_note_size_question(file);
    stale_size_note_answer(file, question);
    return file->view_size;
}

off_t view_cursor_seek(struct view_cursor *cursor, off_t offset, int whence)
{
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    int64_t base;
    switch (whence) {
    case SEEK_SET:
        base = 0;
        break;
    case SEEK_CUR:
        base = (int64_t)cursor->offset;
        if (offset == 0) {      /* a query: moves nothing, ends nothing */
            dataset_file_unlock(file);
            return (off_t)cursor->offset;
        }
        break;
    case SEEK_END:
        base = (int64_t)view_cursor_answer_size_locked(file, SIZE_QUESTION_TRAINER);
        break;
    case SEEK_DATA:
    case SEEK_HOLE:
        if (offset < 0 || (uint64_t)offset >= file->view_size) {
            dataset_file_unlock(file);
            errno = ENXIO;
            return -1;
        }
        base = 0;
        if (whence == SEEK_HOLE)
            offset = (off_t)file->view_size;
        break;
    default:
        dataset_file_unlock(file);
        errno = EINVAL;
        return -1;
    }
    if ((offset > 0 && base > INT64_MAX - offset) || base + offset < 0) {
        dataset_file_unlock(file);
        errno = offset > 0 ? EOVERFLOW : EINVAL;
        return -1;
    }
    uint64_t target = (uint64_t)(base + offset);
    if (whence != SEEK_END)
        view_cursor_placed_locked(cursor, target);
    bool moves_back_to_header = view_cursor_moves_back_over_header(file, cursor->offset,
                                                                   target);
    if (moves_back_to_header && cursor->pass == file->view_pass && dataset_view_covered(file))
        view_cursor_end_pass_locked(file, "rewound");
    else if (moves_back_to_header && cursor->at_end)
        view_cursor_read_again_locked(file);
    cursor->pass = file->view_pass;
    cursor->at_end = false;
    cursor->repositioned = true;
    cursor->offset = target;
    dataset_file_unlock(file);
    return (off_t)target;
}

uint64_t view_cursor_size(struct view_cursor *cursor, enum size_question question)
{
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    uint64_t size = view_cursor_answer_size_locked(file, question);
    dataset_file_unlock(file);
    return size;
}

uint64_t view_cursor_path_stat(struct dataset_file *file)
{
    dataset_file_lock(file);
    view_cursor_check_own_sharding_locked(file);
    if (dataset_view_path_stat_ends_pass(file))
        view_cursor_end_pass_locked(file, "size asked for after the readers were done");
    dataset_view_note_path_stat(file);
    stale_size_note_answer(file, SIZE_QUESTION_TRAINER);
    uint64_t size = file->view_size;
    dataset_file_unlock(file);
    return size;
}

off_t view_cursor_move(struct view_cursor *cursor, off_t offset, int whence)
{
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    int64_t base = whence == SEEK_SET   ? 0
                   : whence == SEEK_CUR ? (int64_t)cursor->offset
                   : whence == SEEK_END ? (int64_t)file->view_size
                                        : -1;
    if (base < 0 || (offset > 0 && base > INT64_MAX - offset) || base + offset < 0) {
        dataset_file_unlock(file);
        errno = base >= 0 && offset > 0 ? EOVERFLOW : EINVAL;
        return -1;
    }
    if (!(whence == SEEK_CUR && offset == 0)) {
        cursor->pass = file->view_pass;
        cursor->at_end = false;
        cursor->repositioned = true;
    }
    cursor->offset = (uint64_t)(base + offset);
    dataset_file_unlock(file);
    return (off_t)cursor->offset;
}

bool view_cursor_reposition_rule(struct view_cursor *cursor, uint64_t from, uint64_t to)
{
    struct dataset_file *file = cursor->file;
    dataset_file_lock(file);
    uint64_t generation = file->shared->view_generation;
    view_cursor_placed_locked(cursor, to);
    if (cursor->pass != file->view_pass && view_cursor_moves_back_over_header(file, from, to))
        view_cursor_read_again_locked(file);
    /* a view re-fixed there leaves the stream's buffer with the old one's bytes */
    bool stale = cursor->pass != file->view_pass || generation != file->shared->view_generation;
    cursor->trainer_moved_pass = file->view_pass + 1;
    if (!stale && view_cursor_moves_back_over_header(file, from, to) &&
        dataset_view_covered(file)) {
        view_cursor_end_pass_locked(file, "rewound");
        stale = true;
    }
    dataset_file_unlock(file);
    return stale;
}
