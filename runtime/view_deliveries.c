/* view_deliveries.c - what the readers of a data file delivered of its
 * current view, and the signs that end its pass (see dataset_view.h): the
 * records each read covers, the processes that read them, a mapping, a
 * reread of a covered pass, a reopen, a stat of the path, a size asked of
 * an open descriptor. */
#include "dataset_view.h"

#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "stale_size.h"

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
    delivery_trace_deliveries(file, first, last);
    delivery_record_mark(&file->shared->delivery, first, last);
    if (last > first)
        dataset_view_note_reader(file);
    char stale[1024];
    if (last > first && !file->shared->tracker.started &&
        stale_size_pass_begins_unasked(file, stale, sizeof stale))
        log_warn("%s", stale);
    /* A header-only view read to its end counts as begun, so that a rewind or
     * reopen ends it like any other pass (see view_cursor.c). */
    if (file->view_length == 0 && file->view_size > 0 && end >= file->view_size)
        file->shared->header_read_to_end = true;
    bool was_started = file->shared->tracker.started;
    pass_tracker_note_delivered(&file->shared->tracker, file->shared->delivery.prefix,
                                file->shared->delivery.delivered > 0 || file->shared->header_read_to_end);
    if (!was_started && file->shared->tracker.started)
        dataset_view_note_first_read(file);
}

void dataset_view_note_placed_read(struct dataset_file *file, uint64_t offset, uint64_t count)
{
    uint64_t end = offset + count;
    uint64_t start = offset > file->header_size ? offset : file->header_size;
    if (file->record_size == 0 || end <= start)
        return;
    uint64_t payload = end - start;
    if (payload % file->record_size != 0 && payload > file->shared->placed_read_unit)
        file->shared->placed_read_unit = payload;
}

bool dataset_view_rest_is_less_than_a_placed_read(const struct dataset_file *file)
{
    const struct delivery_record *delivery = &file->shared->delivery;
    if (file->record_size == 0 || delivery->delivered == 0 ||
        delivery->delivered >= delivery->length)
        return false;
    uint64_t rest = delivery->length - delivery->delivered;
    return rest < file->shared->placed_read_unit / file->record_size +
                      (file->shared->placed_read_unit % file->record_size != 0);
}

bool dataset_view_read_one_replica_share(struct dataset_file *file)
{
    const struct delivery_record *delivery = &file->shared->delivery;
    uint64_t replicas = file->replicas, share = file->view_length / file->replicas;
    if (file->shared->own_sharding_warned || replicas < 2 ||
        file->view_length < 2 * replicas || delivery->delivered == 0 ||
        delivery->delivered + 1 < share || delivery->delivered > share + 1)
        return false;
    file->shared->own_sharding_warned = true;
    return true;
}

void dataset_view_note_mapped(struct dataset_file *file)
{
    file->shared->mapped = true;
    pass_tracker_note_delivered(&file->shared->tracker, file->shared->delivery.prefix, true);
}

/* Every record of the view was delivered, or every record of a loader
 * counting fewer of them (stale_size_count_covered), or all but fewer than
 * one of its reads (dataset_view_rest_is_less_than_a_placed_read). */
static bool dataset_view_delivered_all(const struct dataset_file *file)
{
    return delivery_record_covered(&file->shared->delivery) || stale_size_count_covered(file) ||
           dataset_view_rest_is_less_than_a_placed_read(file);
}

/* Every record of the view was delivered, and the processes other than
 * this one that delivered some have all exited (*only_self: there were
 * none, this process delivered every record itself). */
static bool dataset_view_covered_by_gone_readers(const struct dataset_file *file, bool *only_self)
{
    const struct reader_processes *readers = &file->shared->readers;
    *only_self = false;
    if (file->view_length == 0 || !dataset_view_delivered_all(file))
        return false;
    pid_t self = reader_process_self();
    if (reader_processes_others_exited(readers, self))
        return true;
    *only_self = reader_processes_only(readers, self);
    return *only_self;
}

bool dataset_view_readers_finished_pass(const struct dataset_file *file)
{
    /* such a loader keeps its file open until its next reset (llm.c) */
    if (dataset_view_rest_is_less_than_a_placed_read(file))
        return true;
    bool only_self;
    if (!dataset_view_covered_by_gone_readers(file, &only_self))
        return false;
    return !only_self || __atomic_load_n(&file->open_cursors, __ATOMIC_RELAXED) == 0;
}

uint64_t dataset_view_records_in_flight(const struct dataset_file *file)
{
    uint64_t lookahead = file->entry->lookahead;
    if (lookahead == 0 || dataset_view_readers_finished_pass(file))
        return 0;
    /* every record delivered in the pass, not only its in-order prefix: a
     * loader in its own order holds records from anywhere in the view */
    uint64_t delivered = file->shared->delivery.delivered;
    if (delivered < lookahead && __atomic_load_n(&file->open_cursors, __ATOMIC_RELAXED) == 0)
        return delivered;
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
    return dataset_view_delivered_all(file);
}

bool dataset_view_reopen_ends_pass(const struct dataset_file *file)
{
    if (dataset_view_covered(file))
        return true;
    return file->view_length == 0 && file->shared->header_only_first_sign == VIEW_SIGN_OPEN;
}

static void dataset_view_note_sign(struct dataset_file *file, enum view_sign sign)
{
    if (file->view_length == 0 && file->shared->header_only_first_sign == VIEW_SIGN_NONE)
        file->shared->header_only_first_sign = sign;
}

void dataset_view_note_opened(struct dataset_file *file)
{
    dataset_view_note_sign(file, VIEW_SIGN_OPEN);
}

/* Every record of a view with records was delivered, and the readers are
 * done with it.  This process may still hold the file open: a Dataset made
 * anew at each epoch asks for the size before the old one, and its file, is
 * released.  Its descriptors stay on the pass just ended, and read 0 until
 * moved. */
static bool dataset_view_readers_done_with_records(const struct dataset_file *file)
{
    bool only_self;
    return dataset_view_covered_by_gone_readers(file, &only_self);
}

bool dataset_view_path_stat_ends_pass(const struct dataset_file *file)
{
    if (file->view_length == 0)
        return __atomic_load_n(&file->open_cursors, __ATOMIC_RELAXED) == 0 &&
               file->shared->header_only_first_sign == VIEW_SIGN_PATH_STAT;
    return dataset_view_readers_done_with_records(file);
}

void dataset_view_note_path_stat(struct dataset_file *file)
{
    dataset_view_note_sign(file, VIEW_SIGN_PATH_STAT);
}

bool dataset_view_size_question_ends_pass(const struct dataset_file *file)
{
    if (file->view_length == 0)
        return file->shared->header_only_first_sign == VIEW_SIGN_SIZE_QUESTION;
    return dataset_view_readers_done_with_records(file);
}

void dataset_view_note_size_question(struct dataset_file *file)
{
    dataset_view_note_sign(file, VIEW_SIGN_SIZE_QUESTION);
}

bool dataset_view_read_repeats_covered_pass(const struct dataset_file *file, uint64_t offset,
                                            uint64_t count)
{
    if (file->view_length == 0 || !dataset_view_delivered_all(file))
        return false;
    return delivery_record_any_delivered(&file->shared->delivery,
                                         dataset_view_records_before(file, offset),
                                         dataset_view_records_before(file, offset + count));
}
