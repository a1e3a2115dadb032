/* delivery_record.h - which records of one pass's view have been delivered
 * (adaptshim(7) "Progress").
 *
 * A record is delivered when a read hands its last byte to the trainer.
 * Progress is the longest delivered prefix of the view; the pass is covered
 * when every record of the view was delivered.  An in-order reader costs two
 * counters; a reader that jumps around (a map-style Dataset, a loader with
 * its own batch order) uses one bit per record of the view, in storage the
 * caller provides (memory shared across fork, see dataset_view.h), which is
 * touched, and cleared at the next pass, only once a delivery came out of
 * order.  A ring of the latest deliveries, in the same storage, tells which
 * records a prefetching loader may still hold when a snapshot is taken
 * (`lookahead`): the last ones handed out. */
#ifndef ADAPTSHIM_DELIVERY_RECORD_H
#define ADAPTSHIM_DELIVERY_RECORD_H

#include <stdbool.h>
#include <stdint.h>

/* Records [first, end) of the view, delivered by one read. */
struct delivery_range {
    uint64_t first;
    uint64_t end;
};

struct delivery_record {
    uint64_t length;      /* L: records of the view */
    uint64_t prefix;      /* records [0, prefix) are all delivered */
    uint64_t delivered;   /* distinct records delivered, prefix included */
    uint64_t *bits;       /* storage for `capacity` bits, or NULL */
    uint64_t capacity;
    bool bits_in_use;     /* a delivery came out of order in this pass */
    struct delivery_range *recent; /* ring of the latest deliveries, or NULL */
    uint64_t recent_capacity;
    uint64_t recent_count;  /* ranges in the ring */
    uint64_t recent_next;   /* where the next one goes */
    bool recent_dropped;    /* the ring was full: older deliveries left it */
};

/* Binds the record to bit storage for up to `capacity` records (zeroed;
 * NULL and 0 for none: then deliveries out of order are not remembered and
 * progress stays the in-order prefix) and to a ring of `recent_capacity`
 * ranges (NULL and 0 for none), and starts an empty view. */
void delivery_record_init(struct delivery_record *record, uint64_t *bits, uint64_t capacity,
                          struct delivery_range *recent, uint64_t recent_capacity);
/* Starts an empty record of a view of `length` records; a view longer than
 * the storage remembers only its in-order prefix. */
void delivery_record_reset(struct delivery_record *record, uint64_t length);
/* The view grew to `length` records (a pass lengthened after it began):
 * what was delivered stays delivered. */
void delivery_record_extend(struct delivery_record *record, uint64_t length);
/* Words of storage a record of `capacity` records needs. */
uint64_t delivery_record_words(uint64_t capacity);

/* Records [first, end) were delivered.  Returns how many of them had not
 * been delivered before. */
uint64_t delivery_record_mark(struct delivery_record *record, uint64_t first, uint64_t end);

/* The records consumed: those delivered, less the `unconsumed` delivered
 * last (a prefetching loader's batches in flight), as bits of the view in
 * `consumed` (delivery_record_words(length) words, overwritten).  Returns
 * false, leaving `consumed` undefined, when the ring no longer knows which
 * records were the last `unconsumed` ones. */
bool delivery_record_consumed(const struct delivery_record *record, uint64_t unconsumed,
                              uint64_t *consumed);

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
