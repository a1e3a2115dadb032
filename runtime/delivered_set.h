/* delivered_set.h - what a snapshot binds of a pass read out of order
 * (adaptshim(7) "Readers in their own order"; "CHECKPOINT BINDING").
 *
 * A reader in its own order (llm.c's shuffle, a shuffling DataLoader) has
 * been handed records all over its view when its trainer checkpoints; the
 * delivered prefix alone would make the resumed pass serve most of them
 * again.  This turns the view's consumed records into pass indices: the
 * first index not consumed (the position's current_index) and a bitmap of
 * the consumed ones after it, which the resumed pass leaves out
 * (record_selection.h).
 *
 * Only what this replica saw is known, so the bitmap is made for a file
 * read by one replica; a pass that was itself resumed from a bitmap keeps
 * that bitmap under any replica count, with the in-order prefix of each
 * replica (the same on every replica in lock-step training, as the progress of
 * adaptshim(7) "Progress" assumes). */
#ifndef ADAPTSHIM_DELIVERED_SET_H
#define ADAPTSHIM_DELIVERED_SET_H

#include <stddef.h>
#include <stdint.h>

#include "delivery_record.h"
#include "pass_tracker.h"
#include "record_selection.h"

struct delivered_set {
    uint64_t pass;          /* the tracker's current pass, and its M */
    uint64_t pass_length;
    uint64_t current_index;
    unsigned char *bytes;   /* malloc'd; bit i of byte b: index current_index + 8b + i */
    size_t size;            /* 0: no index after current_index was consumed */
};

/* The latest deliveries that may hold `in_flight` records: twice as many
 * (parallel readers finish out of order; see delivered_set.c). */
uint64_t delivered_set_reordered(uint64_t in_flight);

/* The position of the tracker's current pass as a delivered set, with the
 * `unconsumed` records in flight left out: the last
 * delivered_set_reordered(unconsumed) deliveries.  When the in-order prefix
 * less `unconsumed` counts at least as many consumed records, it is bound
 * instead (a plain pass returns 0, a selected one binds that prefix).  `selection` is the one the
 * pass resumed from (used only when the tracker says the pass is selected).
 * Returns 1 with *set filled (a whole position: it replaces every field of
 * pass_tracker_position's), 0 when the delivered prefix says it all (an
 * in-order reader, several replicas without a resumed selection, a pass
 * that replay skips, records in flight from the previous pass): the caller
 * then binds pass_tracker_position's answer; -1 when out of memory. */
int delivered_set_capture(const struct pass_tracker *tracker,
                          const struct delivery_record *delivery,
                          const struct record_selection *selection, uint64_t unconsumed,
                          struct delivered_set *set);

#endif
