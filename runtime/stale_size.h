/* stale_size.h - a loader that takes a data file's size once.
 *
 * Every pass of a data file is a view with a size of its own (adaptshim(7) "Loaders that take
 * the size once"): a pass resumed after a restore holds the records left, a pass that replay
 * skips holds none, and statistical epochs plan each pass's length.  A
 * loader that asks the size in each epoch (llm.c's fseek(SEEK_END), a
 * PyTorch Dataset built inside the epoch loop) reads every view whole.  One
 * that asks once and keeps the count (a Dataset built before the loop, its
 * length from os.path.getsize) reads each later view with the count of the
 * first: after a resumed pass it reads only part of every later pass,
 * and after a replay that began with a skipped pass it reads nothing.
 *
 * Two cases are served.  A loader told the size of a longer view than the
 * one it then reads without asking again (a Dataset built before the
 * trainer loads its checkpoint, whose restore shortened the view) would
 * find nothing past the short view's end, so the pass is lengthened to the
 * count it was told: at its first read when it asked
 * (stale_size_first_payload_read), at a read it positioned past the end
 * when it only had an fstat (stale_size_positioned_past_end).  A loader
 * told the size of a shorter view (a Dataset built once after the restore)
 * would read the same first records of the next pass in every epoch, since
 * the pass is never covered; instead, once it has delivered its count, the
 * signs that end a covered pass move the pass's start past them
 * (stale_size_count_covered), so each epoch continues the pass where the
 * last one stopped.  A pass replay skips cannot be served: the shim says
 * so in one line, as it does for the loss it cannot prevent.  These
 * functions decide when and what; the callers log.  They expect the file's
 * lock held (dataset_file_lock), except where said. */
#ifndef ADAPTSHIM_STALE_SIZE_H
#define ADAPTSHIM_STALE_SIZE_H

#include <stdbool.h>
#include <stddef.h>

#include "dataset_view.h"

/* Who wanted the size of the current view. */
enum size_question {
    SIZE_QUESTION_ANY,       /* any answer, fstat's included: noted as reported */
    SIZE_QUESTION_TRAINER,   /* the trainer asked itself (a stat of the path, a seek
                              * to the end): noted as the size it counts with, and
                              * as reported.  The fstat every Python open() makes
                              * for its buffer is no such question. */
};

/* Notes that the trainer was given the size of the current view. */
void stale_size_note_answer(struct dataset_file *file, enum size_question question);

/* What the first read of a pass's payload should find, decided before the
 * read is served. */
enum stale_size_answer {
    STALE_SIZE_SERVE_AS_IS,        /* the view the trainer reads is the one it was told */
    STALE_SIZE_END_COMPLETE_PASS,  /* the pass is complete (header-only): end it, then ask
                                    * again about the next one */
    STALE_SIZE_LENGTHEN,           /* lengthen the pass to *told_records on this replica */
    STALE_SIZE_CANNOT_REPLAY,      /* a pass replay skips: nothing can serve the count */
};

/* Before a read that reaches past the header of a pass that has not begun
 * (a train file's): when the trainer last asked the size of another view,
 * which held more records, and has not asked about this one, it reads with
 * that count.  A pass resumed at its index (or planned short) is then
 * lengthened to it, the records past its old end coming from the next
 * sweep of the pass (seen again, none lost); a complete one gives way to
 * the next pass first.  A pass replay skips must stay empty.  `message`
 * gets a line to log at warn for LENGTHEN and CANNOT_REPLAY, once per file
 * (empty otherwise). */
enum stale_size_answer stale_size_first_payload_read(struct dataset_file *file,
                                                     uint64_t *told_records, char *message,
                                                     size_t message_size);

/* Before a read the trainer positioned (a seek, a pread) at `offset`, at
 * or past the end of the current view of a train file: true, with the
 * count in *reported_records, when the last size answer the trainer had
 * (an fstat counts here) was of another view, with more records, that
 * reach past `offset`.  Such a loader counts with that size, and nobody
 * seeks past the end of a file they know; the pass may have begun.
 * `message` as for stale_size_first_payload_read. */
bool stale_size_positioned_past_end(struct dataset_file *file, uint64_t offset,
                                    uint64_t *reported_records, char *message,
                                    size_t message_size);

/* True when the trainer reads the current view of a train file with the
 * count of another, shorter view it last asked about, and has delivered
 * exactly that count, in order: its epoch is over though the view is not,
 * and the signs that end a covered pass (a rewind, a reopen, a record read
 * again, its workers gone) move the pass's start past those records
 * instead, so that its next epoch continues the pass (none lost). */
bool stale_size_count_covered(const struct dataset_file *file);

/* At the first records a pass delivers: true once per file, with a line in
 * `message`, when the trainer last asked the size of another view, which
 * held a different number of records. */
bool stale_size_pass_begins_unasked(struct dataset_file *file, char *message,
                                    size_t message_size);

/* At a normal exit of the trainer (takes the lock itself): true, with a
 * line in `message`, when replay never reached the pass the restored
 * snapshot binds inside (at a record other than its first): the trainer
 * ended without reading the records left there, as one does whose loader
 * counted the records of a skipped, empty pass.  A pass bound at its first
 * record is not named: a finished job restarted ends the same way. */
bool stale_size_replay_unfinished(struct dataset_file *file, char *message,
                                  size_t message_size);

#endif
