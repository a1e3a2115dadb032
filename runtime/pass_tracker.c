/* pass_tracker.c - pass and epoch model of one data file (see pass_tracker.h).
 *
 * The rules (adaptshim(7) "CHECKPOINT BINDING"):
 *   replay:   pass p <  bound pass -> header-only (skipped)
 *             pass p == bound pass -> starts at the bound index
 *             pass p >  bound pass -> starts at 0
 *   continue: the first pass after the restore *is* the bound pass, from the
 *             bound index; later passes start at 0.
 * A bound index equal to the pass length means "all records delivered": the
 * bound pass is header-only and ends at once, which is exactly what the
 * trainer's loop expects whichever way it counted its epochs.
 *
 * The bound pass keeps the length it had when it was captured (a
 * statistical epoch planned in the previous run) unless the resumed-length
 * planner re-plans its rest; skipped passes are header-only whatever their
 * length; fresh passes ask the planner.  Any pass that has not begun may be
 * lengthened to the count a trainer took from an earlier view
 * (pass_tracker_lengthen, see stale_size.h). */
#include "pass_tracker.h"

#include "permutation.h"

uint64_t (*pass_tracker_length_planner)(uint64_t record_count, uint64_t pass);
uint64_t (*pass_tracker_resumed_length_planner)(uint64_t record_count, uint64_t pass,
                                                uint64_t consumed, uint64_t bound_length);

uint64_t pass_tracker_longest_pass(uint64_t record_count)
{
    uint64_t longest;
    if (__builtin_mul_overflow(record_count, (uint64_t)PASS_TRACKER_MAX_SWEEPS, &longest))
        return UINT64_MAX;
    return longest;
}

static uint64_t pass_tracker_fresh_length(const struct pass_tracker *tracker, uint64_t pass)
{
    uint64_t length = 0;
    if (tracker->statistical && pass_tracker_length_planner != NULL)
        length = pass_tracker_length_planner(tracker->record_count, pass);
    if (length == 0)
        return tracker->record_count;
    uint64_t longest = pass_tracker_longest_pass(tracker->record_count);
    return length > longest ? longest : length;
}

static void pass_tracker_fix_current_pass(struct pass_tracker *tracker)
{
    uint64_t pass = tracker->pass;
    tracker->skipped = false;
    if (!tracker->has_bound || pass > tracker->bound_pass) {
        tracker->pass_length = pass_tracker_fresh_length(tracker, pass);
        tracker->start_index = 0;
    } else if (pass == tracker->bound_pass) {
        tracker->pass_length = tracker->bound_length;
        tracker->start_index = tracker->bound_index;
    } else {
        tracker->skipped = true;
        tracker->pass_length = tracker->record_count;
        tracker->start_index = tracker->record_count;
    }
    tracker->selected = tracker->has_bound && pass == tracker->bound_pass && !tracker->skipped
                            ? tracker->bound_selected
                            : 0;
    tracker->delivered = 0;
    __atomic_store_n(&tracker->started, false, __ATOMIC_RELAXED);
}

void pass_tracker_init(struct pass_tracker *tracker, uint64_t record_count,
                       uint32_t replicas, uint32_t rank)
{
    *tracker = (struct pass_tracker){
        .record_count = record_count,
        .replicas = replicas == 0 ? 1 : replicas,
        .rank = rank,
    };
    pass_tracker_fix_current_pass(tracker);
}

void pass_tracker_set_statistical(struct pass_tracker *tracker, bool statistical)
{
    tracker->statistical = statistical;
    if (!tracker->started)
        pass_tracker_fix_current_pass(tracker);
}

void pass_tracker_plan(const struct pass_tracker *tracker, struct pass_plan *plan)
{
    plan->pass = tracker->pass;
    plan->pass_length = tracker->pass_length;
    plan->start_index = tracker->start_index;
    plan->skipped = tracker->skipped;
    plan->selected = tracker->selected;
    /* ceil(selected / K): AdaptDL pads the shorter replicas */
    plan->length = tracker->selected > 0
                       ? tracker->selected / tracker->replicas +
                             (tracker->selected % tracker->replicas != 0)
                       : view_length(tracker->pass_length, tracker->replicas,
                                     tracker->start_index);
}

void pass_tracker_note_delivered(struct pass_tracker *tracker, uint64_t delivered,
                                 bool any_payload)
{
    if (delivered > tracker->delivered) {
        __atomic_store_n(&tracker->records_served,
                         tracker->records_served + (delivered - tracker->delivered),
                         __ATOMIC_RELAXED);
        tracker->delivered = delivered;
    }
    if (any_payload && !tracker->started)
        __atomic_store_n(&tracker->started, true, __ATOMIC_RELAXED);
}

void pass_tracker_end_pass(struct pass_tracker *tracker)
{
    /* a selected pass's coordinates are not s + K*j: records in flight
     * from it cannot be counted back */
    tracker->has_previous = !tracker->skipped && tracker->delivered > 0 && tracker->selected == 0;
    tracker->previous_pass = tracker->pass;
    tracker->previous_length = tracker->pass_length;
    tracker->previous_start = tracker->start_index;
    tracker->previous_delivered = tracker->delivered;
    __atomic_store_n(&tracker->pass, tracker->pass + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&tracker->passes_completed, tracker->passes_completed + 1,
                     __ATOMIC_RELAXED);
    pass_tracker_fix_current_pass(tracker);
}

void pass_tracker_position(const struct pass_tracker *tracker, uint64_t unconsumed,
                           uint64_t *pass, uint64_t *current_index, uint64_t *pass_length)
{
    if (tracker->has_bound && tracker->resume == RESUME_REPLAY &&
        tracker->pass < tracker->bound_pass) {
        *pass = tracker->bound_pass;
        *current_index = tracker->bound_index;
        *pass_length = tracker->bound_length;
        return;
    }
    if (unconsumed > tracker->delivered && tracker->has_previous &&
        tracker->previous_pass + 1 == tracker->pass) {
        uint64_t excess = unconsumed - tracker->delivered;
        uint64_t consumed =
            tracker->previous_delivered > excess ? tracker->previous_delivered - excess : 0;
        *pass = tracker->previous_pass;
        *pass_length = tracker->previous_length;
        *current_index = view_current_index(tracker->previous_length, tracker->replicas,
                                            tracker->previous_start, consumed);
        return;
    }
    uint64_t consumed = tracker->delivered > unconsumed ? tracker->delivered - unconsumed : 0;
    *pass = tracker->pass;
    *pass_length = tracker->pass_length;
    if (tracker->selected > 0) {
        /* its positions are not s + K*j (delivered_set.h binds them); its
         * start repeats what this run delivered and loses nothing */
        *current_index = tracker->start_index;
        return;
    }
    *current_index = view_current_index(tracker->pass_length, tracker->replicas,
                                        tracker->start_index, consumed);
}

bool pass_tracker_restore(struct pass_tracker *tracker, enum resume_mode resume,
                          uint64_t bound_pass, uint64_t current_index, uint64_t pass_length)
{
    if (tracker->started)
        return false;
    tracker->has_previous = false;
    tracker->has_bound = true;
    tracker->bound_selected = 0;
    tracker->resume = resume;
    tracker->bound_pass = bound_pass;
    tracker->bound_length = pass_length == 0 ? tracker->record_count : pass_length;
    /* restores check positions first (snapshot_check.h); this only keeps a
     * caller that did not from building a view no file could back */
    if (tracker->bound_length > pass_tracker_longest_pass(tracker->record_count))
        tracker->bound_length = pass_tracker_longest_pass(tracker->record_count);
    tracker->bound_index = current_index > tracker->bound_length ? tracker->bound_length
                                                                 : current_index;
    if (tracker->statistical && pass_tracker_resumed_length_planner != NULL) {
        uint64_t length = pass_tracker_resumed_length_planner(
            tracker->record_count, bound_pass, tracker->bound_index, tracker->bound_length);
        uint64_t longest = pass_tracker_longest_pass(tracker->record_count);
        if (length > longest)
            length = longest;
        if (length >= tracker->bound_index)
            tracker->bound_length = length;
    }
    if (resume == RESUME_CONTINUE)
        __atomic_store_n(&tracker->pass, bound_pass, __ATOMIC_RELAXED);
    pass_tracker_fix_current_pass(tracker);
    return true;
}

bool pass_tracker_select_undelivered(struct pass_tracker *tracker, uint64_t remaining)
{
    if (!tracker->has_bound || tracker->started || remaining == 0 ||
        tracker->bound_index >= tracker->bound_length ||
        remaining > tracker->bound_length - tracker->bound_index)
        return false;
    tracker->bound_selected = remaining;
    if (tracker->pass == tracker->bound_pass && !tracker->skipped)
        tracker->selected = remaining;
    return true;
}

bool pass_tracker_resume_at_own_position(struct pass_tracker *tracker, uint64_t position)
{
    if (tracker->started || tracker->selected > 0 || tracker->skipped || !tracker->has_bound ||
        tracker->resume != RESUME_CONTINUE || tracker->pass != tracker->bound_pass ||
        tracker->start_index != tracker->bound_index || tracker->start_index == 0 ||
        tracker->start_index >= tracker->pass_length || position == 0)
        return false;
    /* this replica's positions r + j*K below s, in the pass's own coordinates */
    uint64_t start = tracker->start_index, replicas = tracker->replicas;
    uint64_t consumed = start > tracker->rank ? (start - tracker->rank + replicas - 1) / replicas
                                              : 0;
    if (position != consumed)
        return false;
    tracker->start_index = 0;
    tracker->bound_index = 0;
    tracker->delivered = position;
    return true;
}

bool pass_tracker_repeat_previous_pass(struct pass_tracker *tracker)
{
    if (!tracker->has_previous || tracker->started || tracker->pass != tracker->previous_pass + 1 ||
        tracker->previous_delivered !=
            view_length(tracker->previous_length, tracker->replicas, tracker->previous_start))
        return false;
    __atomic_store_n(&tracker->pass, tracker->previous_pass, __ATOMIC_RELAXED);
    __atomic_store_n(&tracker->passes_completed, tracker->passes_completed - 1,
                     __ATOMIC_RELAXED);
    tracker->pass_length = tracker->previous_length;
    tracker->start_index = tracker->previous_start;
    tracker->skipped = false;
    tracker->delivered = 0;
    tracker->has_previous = false;
    return true;
}

/* A selected pass holds `selected` indices: those its snapshot did not
 * name delivered, then the indices past its old end.  Lengthening adds more
 * of the latter. */
static bool pass_tracker_lengthen_selected(struct pass_tracker *tracker, uint64_t view_records)
{
    uint64_t wanted;
    if (__builtin_mul_overflow(view_records, (uint64_t)tracker->replicas, &wanted))
        wanted = UINT64_MAX;
    if (wanted <= tracker->selected)
        return false;
    uint64_t longest = pass_tracker_longest_pass(tracker->record_count);
    uint64_t room = longest > tracker->pass_length ? longest - tracker->pass_length : 0;
    uint64_t extra = wanted - tracker->selected;
    if (extra > room)
        extra = room;
    if (extra == 0)
        return false;
    tracker->pass_length += extra;
    tracker->selected += extra;
    if (tracker->has_bound && tracker->pass == tracker->bound_pass) {
        tracker->bound_length = tracker->pass_length;
        tracker->bound_selected = tracker->selected;
    }
    return true;
}

bool pass_tracker_lengthen(struct pass_tracker *tracker, uint64_t view_records)
{
    if (tracker->skipped)
        return false;
    if (tracker->selected > 0)
        return pass_tracker_lengthen_selected(tracker, view_records);
    uint64_t length;
    if (__builtin_mul_overflow(view_records, (uint64_t)tracker->replicas, &length) ||
        __builtin_add_overflow(length, tracker->start_index, &length))
        length = UINT64_MAX;
    uint64_t longest = pass_tracker_longest_pass(tracker->record_count);
    if (length > longest)
        length = longest;
    if (length <= tracker->pass_length)
        return false;
    tracker->pass_length = length;
    /* a later re-fix of the bound pass (pass_tracker_set_statistical) keeps it */
    if (tracker->has_bound && tracker->pass == tracker->bound_pass)
        tracker->bound_length = length;
    return true;
}

bool pass_tracker_advance_start(struct pass_tracker *tracker)
{
    if (tracker->skipped || tracker->delivered == 0 || tracker->selected > 0)
        return false;
    uint64_t start = view_current_index(tracker->pass_length, tracker->replicas,
                                        tracker->start_index, tracker->delivered);
    if (start >= tracker->pass_length)
        return false;
    tracker->start_index = start;
    tracker->delivered = 0;
    tracker->has_previous = false;
    /* a re-fix of the bound pass (pass_tracker_set_statistical) keeps it */
    if (tracker->has_bound && tracker->pass == tracker->bound_pass)
        tracker->bound_index = start;
    __atomic_store_n(&tracker->started, false, __ATOMIC_RELAXED);
    return true;
}

bool pass_tracker_replay_skips_passes(const struct pass_tracker *tracker)
{
    return tracker->has_bound && tracker->resume == RESUME_REPLAY &&
           tracker->pass < tracker->bound_pass;
}
