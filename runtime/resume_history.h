/* resume_history.h - what a trainer's model was trained on, from the
 * delivery traces (trace_log.h) of a job's runs, and how that differs, pass
 * by pass, from an uninterrupted run's (adaptdl-verify(1)).
 *
 * The history is, per data file, the list of records delivered for the
 * first time in their pass, in order.  A run that loads a checkpoint takes
 * the history back to the commit that wrote that content (the first load of
 * the run counts): deliveries after that commit were trained on by a model
 * that was thrown away, and of the deliveries before it, the last
 * IN_FLIGHT of each file (the records the snapshot counted as not consumed,
 * lookahead=) are dropped too, since the shim serves them again.  A run that
 * loads no checkpoint starts the history over, as its model does.  Then the
 * run's own deliveries are added, and each of its commits remembers where
 * every file's list stood, for a later run to return to.
 *
 * So a delivery counts once it was handed to the trainer before the
 * checkpoint its successor resumed from: what the trace cannot see is what
 * a prefetching loader had not yet trained on at that moment (declare it
 * with lookahead=; without it, such records count as trained).
 *
 * Comparison: for each data file and pass, the multiset of physical record
 * indices of the run's history against the reference's.  Records the
 * reference has more of are lost, records the run has more of repeated;
 * AdaptDL's padding (a replica count that does not divide the records left)
 * is counted apart and is neither. */
#ifndef ADAPTSHIM_RESUME_HISTORY_H
#define ADAPTSHIM_RESUME_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "content_hash.h"
#include "trace_log.h"

struct history_delivery {
    uint64_t pass;
    uint64_t physical;
    bool padding;
};

struct history_file {
    char *name;                      /* the data file's basename */
    struct history_delivery *deliveries;
    size_t count;
    size_t capacity;
};

/* Where one file's list stood at a commit, and what its snapshot bound. */
struct history_binding {
    size_t file;                     /* index into resume_history.files */
    size_t length;                   /* the file's list length at the B line */
    bool bound;                      /* a B line named the file (else: untouched) */
    bool train;
    uint64_t pass, index, pass_length, in_flight;
};

struct history_commit {
    struct content_identity identity;
    char *path;                      /* the checkpoint committed */
    size_t run;                      /* 0-based run that made it */
    size_t ordinal;                  /* 1-based, over the job's commits */
    bool superseded;                 /* the history it stood on was taken back */
    struct history_binding *bindings; /* every file of the history, in file order */
    size_t binding_count;
};

/* How a run began. */
enum history_start {
    HISTORY_START_FRESH,             /* it loaded no checkpoint */
    HISTORY_START_RESTORED,          /* it loaded one a traced commit wrote */
    HISTORY_START_UNKNOWN,           /* it loaded one no traced commit wrote (or one
                                      * whose history was already taken back) */
};

struct history_run {
    enum history_start start;
    size_t restored_commit;          /* index into commits when RESTORED */
    struct content_identity loaded;  /* the content loaded, unless FRESH */
    size_t first_commit;             /* the run's commits: [first, first + count) */
    size_t commit_count;
    uint64_t deliveries;             /* records it added (padding included) */
    bool stopped;                    /* a process stopped itself (P line) */
    size_t cut_short;                /* traces whose last line was cut off */
};

struct resume_history {
    struct history_file *files;
    size_t file_count, file_capacity;
    struct history_commit *commits;
    size_t commit_count, commit_capacity;
    struct history_run *runs;
    size_t run_count, run_capacity;
};

void resume_history_init(struct resume_history *history);
void resume_history_free(struct resume_history *history);

/* Adds one run: the traces of its processes (one per rank, rank 0 first;
 * each may hold its forked workers' lines).  Its start is taken from the
 * first checkpoint load of the first trace that has one.  0, or -1 with a
 * one-line message (out of memory). */
int resume_history_add_run(struct resume_history *history, const struct trace_log *const *traces,
                           size_t trace_count, char *error, size_t error_size);

/* The records of the history: deliveries, padding among them. */
uint64_t resume_history_records(const struct resume_history *history, uint64_t *padding);
/* Passes of the history of file `file`: the highest pass + 1 (0: none). */
uint64_t resume_history_passes(const struct resume_history *history, size_t file);

/* One data file's pass, compared with the reference. */
struct pass_difference {
    const char *name;                /* points into the run's or reference's history */
    uint64_t pass;
    uint64_t reference_records;      /* the reference's deliveries (no padding) */
    uint64_t run_records;            /* the run's (no padding) */
    uint64_t lost;                   /* reference count above the run's, summed over records */
    uint64_t repeated;               /* run count above the reference's */
    uint64_t padding;                /* the run's padding deliveries */
};

struct resume_comparison {
    struct pass_difference *passes;  /* every (file, pass) of either, by name then pass */
    size_t count;
    uint64_t lost, repeated, padding;
};

/* Compares `run` with `reference` (both stay alive while the comparison
 * is used: names point into them).  0, or -1 with a message. */
int resume_compare(const struct resume_history *reference, const struct resume_history *run,
                   struct resume_comparison *comparison, char *error, size_t error_size);
void resume_comparison_free(struct resume_comparison *comparison);

static inline bool resume_comparison_exact(const struct resume_comparison *comparison)
{
    return comparison->lost == 0 && comparison->repeated == 0;
}

#endif
