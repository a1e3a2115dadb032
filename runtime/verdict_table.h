/* verdict_table.h - adaptdl-verify's report (adaptdl-verify(1)): one row per case
 * (and per setting tried to fix it), then, for every case that is not
 * exact, the records lost or repeated in each pass, against the
 * uninterrupted run.
 *
 *   case                          runs  killed after                             verdict
 *   mid-epoch kill                2     commit 30: records.bin pass 1 at 500...  not exact: 1000 lost, 0 repeated
 *     with ADAPTDL_RESUME=continue 2    commit 30: ...                           exact
 *
 * Columns are as wide as their widest cell. */
#ifndef ADAPTSHIM_VERDICT_TABLE_H
#define ADAPTSHIM_VERDICT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "resume_history.h"

enum verdict_kind {
    VERDICT_EXACT,          /* nothing lost or repeated beyond AdaptDL's padding */
    VERDICT_NOT_EXACT,      /* records lost or repeated: comparison says how many */
    VERDICT_FAILED,         /* the trainer did not end with status 0 (note says why) */
    VERDICT_NOT_RUN,        /* the case could not be made (note says why) */
};

struct verdict_row {
    char label[128];          /* "mid-epoch kill", or "  with ADAPTDL_RESUME=continue" */
    size_t runs;              /* runs started; 0 when not run */
    char killed_after[160];   /* verify_describe_commit, or "" */
    enum verdict_kind kind;
    const struct resume_comparison *comparison; /* EXACT and NOT_EXACT */
    char note[256];           /* FAILED, NOT_RUN */
};

/* The verdict cell: "exact", "exact (3 padding)", "not exact: 10 lost,
 * 0 repeated", "failed: ...", "not run: ...". */
void verdict_cell(const struct verdict_row *row, char *out, size_t out_size);

/* Prints the table, then the per-pass lines of every NOT_EXACT row.
 * Returns 0, or -1 when writing failed. */
int verdict_table_print(FILE *out, const struct verdict_row *rows, size_t count);

#endif
