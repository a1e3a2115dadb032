/* pass_tracker.h - pass and epoch model of one data file (adaptshim(7)
 * "Passes", "CHECKPOINT BINDING").
 *
 * The counterpart of AdaptDL's _AdaptiveDataLoaderState: which pass a file
 * is in, where that pass's view starts (s), how many records this replica has
 * consumed in order, and a bound position restored from a snapshot under
 * `replay` or `continue`.  It does no I/O: the data view reports records
 * delivered and pass ends, and asks which view the current pass has.
 *
 * A pass has a length M in logical records: N for a plain pass; for a train
 * file under statistical epochs (adaptshim(7) "Statistical epochs") the length a planner chose,
 * which may exceed N (the pass then wraps around the records with a fresh
 * permutation per wrap) or fall short of it.  Start and current indices
 * count in [0, M]. */
#ifndef ADAPTSHIM_PASS_TRACKER_H
#define ADAPTSHIM_PASS_TRACKER_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

/* The longest pass, in sweeps over the records: a statistical epoch
 * (adaptshim(7) "Statistical epochs") runs for about N / efficiency records, and efficiency
 * falls to 1/2048 only at a batch thousands of times the initial one.  The cap keeps every
 * view's per-record state (line offsets, delivery bits) within reach of its
 * file's size, and lets a restore refuse any longer pass as one no run
 * could have planned. */
#define PASS_TRACKER_MAX_SWEEPS 4096u

/* N * PASS_TRACKER_MAX_SWEEPS, saturated. */
uint64_t pass_tracker_longest_pass(uint64_t record_count);

struct pass_tracker {
    uint64_t record_count;     /* N */
    uint32_t replicas;         /* K (1 when the file is not sharded) */
    uint32_t rank;             /* r (0 when the file is not sharded) */
    uint64_t pass;             /* the pass whose view is fixed now */
    uint64_t pass_length;      /* M of that pass */
    uint64_t start_index;      /* s of that pass; M means header-only */
    bool skipped;              /* header-only because replay skips it */
    uint64_t delivered;        /* records consumed in order in this pass */
    bool started;              /* a payload byte was read in this pass */
    uint64_t passes_completed; /* in this run, for the summary */
    uint64_t records_served;   /* in this run, for the summary */
    bool statistical;          /* fresh passes take their length from the planner */
    /* 0: the pass's view holds its indices [s, M); otherwise it holds only
     * this many of them: those of [s, M0) a snapshot did not name delivered
     * (record_selection.h), then every index of [M0, M) when the pass was
     * lengthened past its bound end M0 */
    uint64_t selected;

    /* The pass before this one, when it ended in this run with records
     * delivered: a loader that read it to the end may still hold its last
     * records when the trainer commits (lookahead). */
    bool has_previous;
    uint64_t previous_pass;
    uint64_t previous_length; /* its M */
    uint64_t previous_start;  /* its s */
    uint64_t previous_delivered;

    bool has_bound;            /* a snapshot position was restored */
    enum resume_mode resume;
    uint64_t bound_pass;
    uint64_t bound_index;
    uint64_t bound_length;     /* M of the bound pass */
    uint64_t bound_selected;   /* `selected` of the bound pass */
};

/* The counters other threads read without the file's lock (the records
 * consumed at every step boundary, the epoch, the exit summary, whether
 * training has begun): written under the lock with atomic stores, read
 * with these. */
static inline uint64_t pass_tracker_records_served(const struct pass_tracker *tracker)
{
    return __atomic_load_n(&tracker->records_served, __ATOMIC_RELAXED);
}

static inline uint64_t pass_tracker_passes_completed(const struct pass_tracker *tracker)
{
    return __atomic_load_n(&tracker->passes_completed, __ATOMIC_RELAXED);
}

static inline uint64_t pass_tracker_current_pass(const struct pass_tracker *tracker)
{
    return __atomic_load_n(&tracker->pass, __ATOMIC_RELAXED);
}

static inline bool pass_tracker_started(const struct pass_tracker *tracker)
{
    return __atomic_load_n(&tracker->started, __ATOMIC_RELAXED);
}

/* Chooses the length M of a fresh pass of a file with `statistical` set
 * (adaptshim(7) "Statistical epochs"); NULL, or a return of 0, means N.  Called
 * with the file's lock held: it must not take the registry lock. */
extern uint64_t (*pass_tracker_length_planner)(uint64_t record_count, uint64_t pass);
/* Chooses the length of a restored pass of such a file, from the global
 * index `consumed` it resumes at and the length `bound_length` it was bound
 * with; NULL keeps the bound length, and so does any answer below
 * `consumed` (what was consumed stays consumed).  Same locking rule. */
extern uint64_t (*pass_tracker_resumed_length_planner)(uint64_t record_count, uint64_t pass,
                                                       uint64_t consumed,
                                                       uint64_t bound_length);

/* What the current pass looks like, for building its view. */
struct pass_plan {
    uint64_t pass;
    uint64_t pass_length;      /* M */
    uint64_t start_index;
    uint64_t length;           /* L records on this replica */
    uint64_t selected;         /* as the tracker's */
    bool skipped;
};

void pass_tracker_init(struct pass_tracker *tracker, uint64_t record_count,
                       uint32_t replicas, uint32_t rank);
void pass_tracker_plan(const struct pass_tracker *tracker, struct pass_plan *plan);
/* Marks a train file whose fresh passes follow statistical epochs and
 * re-plans the current pass when it has not started. */
void pass_tracker_set_statistical(struct pass_tracker *tracker, bool statistical);

/* The replica has now consumed `delivered` records of the current pass in
 * order (a running total, never decreasing); `any_payload` when at least one
 * payload byte was read. */
void pass_tracker_note_delivered(struct pass_tracker *tracker, uint64_t delivered,
                                 bool any_payload);
/* Ends the current pass and fixes the next one. */
void pass_tracker_end_pass(struct pass_tracker *tracker);

/* Position a snapshot binds: (pass, current_index, pass length),
 * `unconsumed` records fewer than delivered (stdio buffer and lookahead),
 * never before s.  When `unconsumed` exceeds what the current pass
 * delivered and the previous pass ended in this run, the rest is counted
 * back from the end of that pass, which the position then names: records
 * a loader read ahead before the end are not lost.  While replay is still
 * skipping towards a bound position, the bound position itself (the replay
 * consumes nothing new).  A selected pass binds its start: its records
 * are bound by delivered_set.h. */
void pass_tracker_position(const struct pass_tracker *tracker, uint64_t unconsumed,
                           uint64_t *pass, uint64_t *current_index, uint64_t *pass_length);

/* Applies a restored position.  Only meaningful before the current pass has
 * delivered a record; returns false (and changes nothing) otherwise.  Under
 * replay the pass counter keeps running from where this run is and earlier
 * passes become header-only; under continue the current pass becomes the
 * bound one.  The bound pass keeps its length `pass_length` (0: N), unless
 * the resumed-length planner re-plans it; `current_index` beyond it is
 * clamped to it. */
bool pass_tracker_restore(struct pass_tracker *tracker, enum resume_mode resume,
                          uint64_t bound_pass, uint64_t current_index, uint64_t pass_length);

/* The bound pass of the restore just applied serves only `remaining` of
 * its indices from the bound index on: those its snapshot did not name
 * delivered (adaptshim(7) "Readers in their own order").  Returns
 * false, changing nothing, when nothing was restored, the bound pass has
 * begun, or `remaining` is 0. */
bool pass_tracker_select_undelivered(struct pass_tracker *tracker, uint64_t remaining);

/* Lengthens the current pass so that this replica's view holds
 * `view_records` records from the same start: M becomes s + K *
 * view_records (at most the longest pass), and the positions past the old
 * end continue into the next sweep of the pass, as a statistical epoch's
 * do.  Positions already in the view keep their records, and what was
 * delivered stays delivered.  A selected pass gets the indices past its
 * end added to its selection.  A pass that is not shorter or is skipped by
 * replay is left alone; returns whether the pass changed. */
bool pass_tracker_lengthen(struct pass_tracker *tracker, uint64_t view_records);

/* Moves the current pass's start past the records delivered in order, as
 * if it had been restored there: the same pass, a view of what is left of
 * it, nothing delivered yet.  For a loader whose count covers only part of
 * the view (stale_size.h): its next epoch continues the pass.  The
 * records it delivered are not reached back for (no `lookahead` across the
 * move).  Returns false, changing nothing, when nothing was delivered or
 * nothing of the pass would be left. */
bool pass_tracker_advance_start(struct pass_tracker *tracker);

/* The trainer of a pass restored under continue at index s (0 < s < M,
 * nothing of it read yet) places its first read at record `position` of
 * the view (adaptshim(7) "Own positioning"): it seeks to where its interrupted
 * epoch stopped, counted in its own records.  When that is exactly where
 * the pass's own coordinates (from index 0) put this replica's first record
 * not consumed, the pass takes those coordinates back, the positions before
 * it counted as delivered.  Returns false, changing nothing, otherwise: a
 * position anywhere else is a loader's own order (a random first record),
 * or a count of records done under another replica count, which names no
 * record of this view. */
bool pass_tracker_resume_at_own_position(struct pass_tracker *tracker, uint64_t position);

/* Makes the pass that ended last the current one again, from its start
 * with nothing delivered: its view (records, order, length) is served a
 * second time.  Only when that pass ended in this run with every record of
 * its view delivered and the current one has not begun.  Returns false,
 * changing nothing, otherwise. */
bool pass_tracker_repeat_previous_pass(struct pass_tracker *tracker);

/* True while a restore under replay still has passes to skip: the current
 * pass and those up to the bound one are header-only views.  False without a
 * restore, under continue, and once replay has reached the bound pass. */
bool pass_tracker_replay_skips_passes(const struct pass_tracker *tracker);

#endif
