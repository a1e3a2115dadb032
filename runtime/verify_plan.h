/* verify_plan.h - adaptdl-verify's choices (adaptdl-verify(1)): where in an
 * uninterrupted run a case is killed (the reference run's commits, told
 * apart by what they bound), how a commit is named in the verdict, and the
 * ADAPTDL_DATA a fix trial runs with.
 *
 * A commit's place, from the positions its snapshot bound for the train
 * files (every file when none is train) and the records of the bound pass
 * they had delivered:
 *   mid-epoch    some file is bound strictly inside a pass (0 < index < M),
 *                or had delivered some but not all records of its bound
 *                pass (a reader in its own order binds its in-order prefix);
 *   epoch end    none is, and some file is bound at a pass boundary: the
 *                start of a pass after the first (index 0, pass > 0) or a
 *                complete pass (index M);
 *   before training  every file at index 0 of pass 0. */
#ifndef ADAPTSHIM_VERIFY_PLAN_H
#define ADAPTSHIM_VERIFY_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "resume_history.h"

enum commit_place {
    COMMIT_BEFORE_TRAINING,
    COMMIT_MID_EPOCH,
    COMMIT_EPOCH_END,
};

enum commit_place verify_commit_place(const struct resume_history *history,
                                      const struct history_commit *commit);

/* The ordinal (1-based) of the reference's commit a case is killed after:
 * the first commit at `place` that is not the run's last (something is
 * left to resume), preferring one in a pass after the first (the passes
 * before it are then resumed over too); the last commit when it is the
 * only one at that place; 0 when there is none. */
size_t verify_choose_commit(const struct resume_history *reference, enum commit_place place);

/* "commit 3: train.bin pass 1 at 500 of 1000" (the first train file, and
 * how many more files were bound; "at 0 (480 read) of 1000" when the
 * records delivered of the pass were more than its bound index), into out. */
void verify_describe_commit(const struct resume_history *history,
                            const struct history_commit *commit, char *out, size_t out_size);

/* ADAPTDL_DATA `value` with `key` (e.g. "resume=whole-pass") added to every
 * train entry.  A new string, or NULL with a one-line message: the value
 * does not parse, or the parser rejects the key (this library does not know
 * it: its message is in error). */
char *verify_data_with_key(const char *value, const char *key, char *error, size_t error_size);

#endif
