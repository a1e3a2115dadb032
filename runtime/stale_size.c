/* stale_size.c - the signs of a loader that took a data file's size once,
 * and the pass it gets where its count can be served (see stale_size.h). */
#include "stale_size.h"

#include <stdio.h>

/* What the trainer can do about either sign. */
static const char stale_size_remedy[] =
    "ask the size in each epoch (build the PyTorch Dataset inside the epoch loop), or add "
    "resume=whole-pass to the file's ADAPTDL_DATA entry: adaptshim(7) \"Loaders that take "
    "the size once\"";

static void stale_size_record_answer(struct size_answer *answer, const struct dataset_file *file)
{
    answer->given = true;
    answer->view_generation = file->shared->view_generation;
    answer->records = file->view_length;
}

void stale_size_note_answer(struct dataset_file *file, enum size_question question)
{
    if (question == SIZE_QUESTION_TRAINER)
        stale_size_record_answer(&file->shared->size_told, file);
    stale_size_record_answer(&file->shared->size_reported, file);
}

/* The answer was about a view other than the current one. */
static bool stale_size_answer_of_other_view(const struct size_answer *answer,
                                            const struct dataset_file *file)
{
    return answer->given && answer->view_generation != file->shared->view_generation;
}

/* The trainer last asked about another view, which held more records. */
static bool stale_size_told_more(const struct dataset_file *file)
{
    const struct size_answer *told = &file->shared->size_told;
    return stale_size_answer_of_other_view(told, file) && told->records > file->view_length;
}

/* The line of a read that the answer changes, once per file; `told` is the
 * count the trainer reads with. */
static void stale_size_describe(struct dataset_file *file, enum stale_size_answer answer,
                                uint64_t told_records, char *message, size_t message_size)
{
    struct dataset_pass_state *shared = file->shared;
    if (shared->stale_size_warned)
        return;
    shared->stale_size_warned = true;
    unsigned long long pass = file->view_pass, told = told_records;
    if (answer == STALE_SIZE_CANNOT_REPLAY)
        snprintf(message, message_size,
                 "%s: replay skips pass %llu, an empty file, but the trainer reads it with "
                 "the %llu records it was told of an earlier view: a loader that keeps its "
                 "count cannot replay; set ADAPTDL_RESUME=continue if the trainer restores "
                 "its epoch, or %s",
                 file->path, pass, told, stale_size_remedy);
    else
        snprintf(message, message_size,
                 "%s: pass %llu from index %llu holds %llu records, but the trainer reads it "
                 "with the %llu it was told of an earlier view: the pass is lengthened to "
                 "%llu, the last %llu from the next sweep over the file (seen again, none "
                 "lost); to resume exactly, %s",
                 file->path, pass, (unsigned long long)file->view_start_index,
                 (unsigned long long)file->view_length, told, told,
                 told - (unsigned long long)file->view_length, stale_size_remedy);
}

enum stale_size_answer stale_size_first_payload_read(struct dataset_file *file,
                                                     uint64_t *told_records, char *message,
                                                     size_t message_size)
{
    const struct pass_tracker *tracker = &file->shared->tracker;
    if (message_size > 0)
        message[0] = '\0';
    if (file->entry->role != DATA_ROLE_TRAIN || tracker->started || !stale_size_told_more(file))
        return STALE_SIZE_SERVE_AS_IS;
    enum stale_size_answer answer;
    if (tracker->skipped)
        answer = STALE_SIZE_CANNOT_REPLAY;
    else if (file->view_length == 0)
        return STALE_SIZE_END_COMPLETE_PASS;
    else
        answer = STALE_SIZE_LENGTHEN;
    *told_records = file->shared->size_told.records;
    stale_size_describe(file, answer, *told_records, message, message_size);
    return answer;
}

bool stale_size_positioned_past_end(struct dataset_file *file, uint64_t offset,
                                    uint64_t *reported_records, char *message,
                                    size_t message_size)
{
    const struct dataset_pass_state *shared = file->shared;
    const struct size_answer *reported = &shared->size_reported;
    if (message_size > 0)
        message[0] = '\0';
    /* lines have no size to place an offset among the reported records */
    if (file->entry->role != DATA_ROLE_TRAIN || file->record_size == 0 ||
        shared->tracker.skipped || shared->mapped || offset < file->view_size ||
        !stale_size_answer_of_other_view(reported, file) ||
        reported->records <= file->view_length)
        return false;
    uint64_t reported_end = file->header_size + reported->records * file->record_size;
    if (offset >= reported_end)
        return false;
    *reported_records = reported->records;
    stale_size_describe(file, STALE_SIZE_LENGTHEN, *reported_records, message, message_size);
    return true;
}

bool stale_size_count_covered(const struct dataset_file *file)
{
    const struct dataset_pass_state *shared = file->shared;
    uint64_t count = shared->size_told.records;
    return file->entry->role == DATA_ROLE_TRAIN && !shared->tracker.skipped && !shared->mapped &&
           stale_size_answer_of_other_view(&shared->size_told, file) && count > 0 &&
           count < file->view_length && shared->delivery.prefix == count &&
           shared->delivery.delivered == count;
}

bool stale_size_pass_begins_unasked(struct dataset_file *file, char *message,
                                    size_t message_size)
{
    struct dataset_pass_state *shared = file->shared;
    uint64_t told_records = shared->size_told.records;
    if (shared->stale_size_warned || !stale_size_answer_of_other_view(&shared->size_told, file) ||
        told_records == file->view_length)
        return false;
    shared->stale_size_warned = true;
    /* a shorter count moves the pass's start at each epoch's end
     * (stale_size_count_covered); a longer one is served unless the view
     * could not grow */
    const char *consequence =
        told_records < file->view_length
            ? "per epoch, and the pass goes on in its next epoch from where it stopped (none "
              "lost, but its epochs no longer match the file's passes)"
            : "and the view cannot grow to it";
    snprintf(message, message_size,
             "%s: pass %llu holds %llu records, but the trainer last asked the file's size "
             "when its view held %llu: a loader that keeps that count reads %llu of them %s; "
             "%s",
             file->path, (unsigned long long)file->view_pass,
             (unsigned long long)file->view_length, (unsigned long long)told_records,
             (unsigned long long)told_records, consequence, stale_size_remedy);
    return true;
}

bool stale_size_replay_unfinished(struct dataset_file *file, char *message,
                                  size_t message_size)
{
    dataset_file_lock(file);
    const struct pass_tracker *tracker = &file->shared->tracker;
    /* a pass bound at its first record looks the same as a finished job
     * that ends at once: only a pass begun and left is named */
    bool bound_left = tracker->has_bound && tracker->resume == RESUME_REPLAY &&
                      tracker->bound_index > 0 && tracker->bound_index < tracker->bound_length;
    bool unread = tracker->pass < tracker->bound_pass ||
                  (tracker->pass == tracker->bound_pass && !tracker->started);
    bool unfinished = bound_left && unread;
    if (unfinished)
        snprintf(message, message_size,
                 "%s: the trainer ended before replay reached pass %llu, bound at record %llu "
                 "of %llu: unless it was done, those records were never read, as by a loader "
                 "that took its count from a skipped (empty) pass; set ADAPTDL_RESUME=continue "
                 "if the trainer restores its epoch, or %s",
                 file->path, (unsigned long long)tracker->bound_pass,
                 (unsigned long long)tracker->bound_index,
                 (unsigned long long)tracker->bound_length, stale_size_remedy);
    dataset_file_unlock(file);
    return unfinished;
}
