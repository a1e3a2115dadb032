/* record_selection.h - the records a resumed pass still owes (adaptshim(7) "Readers in their
 * own order", loaders that visit their own order).
 *
 * A snapshot of a pass whose reader went out of order keeps, beside the
 * first index not delivered (current_index c), which later indices of the
 * pass were delivered.  The resumed pass then serves exactly the others: the
 * k-th index of its order is the k-th index of [c, M) not delivered.  This
 * holds those bits (one per index of [c, M), in storage the caller
 * provides: memory shared across fork, as the delivery bits are) and finds
 * the k-th free index in a few popcounts, with the count of free indices
 * before every block of SELECTION_BLOCK_BITS. */
#ifndef ADAPTSHIM_RECORD_SELECTION_H
#define ADAPTSHIM_RECORD_SELECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SELECTION_BLOCK_BITS 4096u

struct record_selection {
    uint64_t start;          /* c: the pass index of bit 0 */
    uint64_t span;           /* M - c bits in use */
    uint64_t remaining;      /* indices of [c, M) not delivered */
    uint64_t *delivered;     /* `capacity` bits */
    uint64_t *free_before;   /* per block: free indices before it */
    uint64_t capacity;       /* bits the storage holds */
};

/* Words of bit storage and of block counts for `capacity` bits. */
uint64_t record_selection_bit_words(uint64_t capacity);
uint64_t record_selection_block_words(uint64_t capacity);

/* Binds the selection to its storage; it holds nothing yet. */
void record_selection_init(struct record_selection *selection, uint64_t *delivered,
                           uint64_t *free_before, uint64_t capacity);

/* Fills the selection for the pass indices [start, start + span) from a
 * snapshot's bitmap (`bytes`, bit i of byte b standing for index start +
 * 8b + i; bytes past `size` are all clear).  Returns false, holding nothing,
 * when the span is longer than the storage or no index is free. */
bool record_selection_load(struct record_selection *selection, uint64_t start, uint64_t span,
                           const unsigned char *bytes, size_t size);

/* The k-th pass index not delivered, for k < remaining. */
uint64_t record_selection_free_index(const struct record_selection *selection, uint64_t k);

/* The pass index at view position `position` of replica `rank` of
 * `replicas` in a view of `total` indices: the free ones, then those past
 * the selection's end (a pass lengthened after its resume: total exceeds
 * remaining).  Index k = rank + position * replicas of that sequence,
 * counted again from its first past its last (AdaptDL's padding). */
uint64_t record_selection_view_index(const struct record_selection *selection, uint64_t total,
                                     uint64_t replicas, uint64_t rank, uint64_t position);

/* Whether pass index `index` was delivered before the resume (indices
 * below start were, those at or past start + span were not). */
bool record_selection_was_delivered(const struct record_selection *selection, uint64_t index);

#endif
