/* pass_tracker.c - pass and epoch model of one data file (see pass_tracker.h).
 *
 * The rules, from SPEC §4:
 *   replay:   pass p <  bound pass -> header-only (skipped)
 *             pass p == bound pass -> starts at the bound index
 *             pass p >  bound pass -> starts at 0
 *   continue: the first pass after the restore *is* the bound pass, from the
 *             bound index; later passes start at 0.
 * A bound index equal to N means "all records delivered": the bound pass is
 * header-only and ends at once, which is exactly what the trainer's loop
 * expects whichever way it counted its epochs. */
#include "pass_tracker.h"

#include "permutation.h"

static uint64_t pass_tracker_start_index_for(const struct pass_tracker *tracker,
                                             uint64_t pass, bool *skipped)
{
    *skipped = false;
    if (!tracker->has_bound || pass > tracker->bound_pass)
        return 0;
    if (pass == tracker->bound_pass)
        return tracker->bound_index;
    *skipped = true;
    return tracker->record_count;
}

static void pass_tracker_fix_current_pass(struct pass_tracker *tracker)
{
    tracker->start_index = pass_tracker_start_index_for(tracker, tracker->pass,
                                                        &tracker->skipped);
    tracker->delivered = 0;
    tracker->started = false;
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

void pass_tracker_plan(const struct pass_tracker *tracker, struct pass_plan *plan)
{
    plan->pass = tracker->pass;
    plan->start_index = tracker->start_index;
    plan->skipped = tracker->skipped;
    plan->length = view_length(tracker->record_count, tracker->replicas,
                               tracker->start_index);
}

void pass_tracker_note_delivered(struct pass_tracker *tracker, uint64_t delivered,
                                 bool any_payload)
{
    if (delivered > tracker->delivered) {
        tracker->records_served += delivered - tracker->delivered;
        tracker->delivered = delivered;
    }
    if (any_payload)
        tracker->started = true;
}

void pass_tracker_end_pass(struct pass_tracker *tracker)
{
    tracker->pass++;
    tracker->passes_completed++;
    pass_tracker_fix_current_pass(tracker);
}

void pass_tracker_position(const struct pass_tracker *tracker, uint64_t unconsumed,
                           uint64_t *pass, uint64_t *current_index)
{
    if (tracker->has_bound && tracker->resume == RESUME_REPLAY &&
        tracker->pass < tracker->bound_pass) {
        *pass = tracker->bound_pass;
        *current_index = tracker->bound_index;
        return;
    }
    uint64_t consumed = tracker->delivered > unconsumed ? tracker->delivered - unconsumed : 0;
    *pass = tracker->pass;
    *current_index = view_current_index(tracker->record_count, tracker->replicas,
                                        tracker->start_index, consumed);
}

bool pass_tracker_restore(struct pass_tracker *tracker, enum resume_mode resume,
                          uint64_t bound_pass, uint64_t current_index)
{
    if (tracker->started)
        return false;
    tracker->has_bound = true;
    tracker->resume = resume;
    tracker->bound_pass = bound_pass;
    tracker->bound_index = current_index > tracker->record_count ? tracker->record_count
                                                                 : current_index;
    if (resume == RESUME_CONTINUE)
        tracker->pass = bound_pass;
    pass_tracker_fix_current_pass(tracker);
    return true;
}
