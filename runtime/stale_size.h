/* stale_size.h - a loader that takes a data file's size once.
 *
 * Every pass of a data file is a view with a size of its own (SPEC §3): a
 * pass resumed after a restore holds the records left, a pass that replay
 * skips holds none, and statistical epochs plan each pass's length.  A
 * loader that asks the size in each epoch (llm.c's fseek(SEEK_END), a
 * PyTorch Dataset built inside the epoch loop) reads every view whole.  One
 * that asks once and keeps the count (a Dataset built before the loop, its
 * length from os.path.getsize) reads each later view with the count of the
 * first: after a resumed pass it leaves records of every later pass unread,
 * and after a replay that began with a skipped pass it reads nothing.
 *
 * The shim cannot serve such a loader better than the views the contract
 * defines; it can say so, at the moment the loss is certain, in one line.
 * These functions decide when and what; the callers log.  They expect the
 * file's lock held (dataset_file_lock), except where said. */
#ifndef ADAPTSHIM_STALE_SIZE_H
#define ADAPTSHIM_STALE_SIZE_H

#include <stdbool.h>
#include <stddef.h>

#include "dataset_view.h"

/* The trainer asked the size of the current view itself (a stat of the
 * path, a seek to the end).  The fstat every Python open() makes for its
 * buffer is not such a question, and is not noted. */
void stale_size_note_told(struct dataset_file *file);

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
