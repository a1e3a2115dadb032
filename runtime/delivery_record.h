/* delivery_record.h - which records of one pass's view have been delivered
 * (SPEC §3 "Progress").
 *
 * A record is delivered when a read hands its last byte to the trainer.
 * Progress is the longest delivered prefix of the view; the pass is covered
 * when every record of the view was delivered.  An in-order reader costs two
 * counters; the first delivery out of order allocates one bit per record of
 * the view, which is all a reader that jumps around (a map-style Dataset, a
 * loader with its own batch order) ever costs. */
#ifndef ADAPTSHIM_DELIVERY_RECORD_H
#define ADAPTSHIM_DELIVERY_RECORD_H

#include <stdbool.h>
#include <stdint.h>

struct delivery_record {
    uint64_t length;      /* L: records of the view */
    uint64_t prefix;      /* records [0, prefix) are all delivered */
    uint64_t delivered;   /* distinct records delivered, prefix included */
    uint64_t *bits;       /* one bit per record, NULL while delivery is in order */
    bool bits_unavailable; /* allocating the bits failed: out-of-order deliveries
                            * are not remembered (progress stays the prefix) */
};

/* Starts an empty record of a view of `length` records (frees old bits). */
void delivery_record_reset(struct delivery_record *record, uint64_t length);
void delivery_record_release(struct delivery_record *record);

/* Records [first, end) were delivered.  Returns how many of them had not
 * been delivered before. */
uint64_t delivery_record_mark(struct delivery_record *record, uint64_t first, uint64_t end);

/* True when some record in [first, end) was delivered already. */
bool delivery_record_any_delivered(const struct delivery_record *record, uint64_t first,
                                   uint64_t end);

/* Every record of the view was delivered (false for an empty view: it has
 * nothing to cover, and its callers decide on their own rule). */
static inline bool delivery_record_covered(const struct delivery_record *record)
{
    return record->length > 0 && record->delivered == record->length;
}

#endif
