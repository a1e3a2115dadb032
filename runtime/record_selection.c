/* record_selection.c - the records a resumed pass still owes (see
 * record_selection.h). */
#include "record_selection.h"

#include <string.h>

#define WORDS_PER_BLOCK (SELECTION_BLOCK_BITS / 64u)

uint64_t record_selection_bit_words(uint64_t capacity)
{
    return (capacity + 63) / 64;
}

uint64_t record_selection_block_words(uint64_t capacity)
{
    return capacity / SELECTION_BLOCK_BITS + 1;
}

void record_selection_init(struct record_selection *selection, uint64_t *delivered,
                           uint64_t *free_before, uint64_t capacity)
{
    *selection = (struct record_selection){
        .delivered = delivered, .free_before = free_before, .capacity = capacity};
}

/* Free (not delivered) bits of word `word`, counting only bits below span. */
static uint64_t record_selection_free_bits(const struct record_selection *selection,
                                           uint64_t word)
{
    uint64_t free_bits = ~selection->delivered[word];
    uint64_t used = selection->span - word * 64;
    if (used < 64)
        free_bits &= ((uint64_t)1 << used) - 1;
    return free_bits;
}

bool record_selection_load(struct record_selection *selection, uint64_t start, uint64_t span,
                           const unsigned char *bytes, size_t size)
{
    selection->span = 0;
    selection->remaining = 0;
    if (span == 0 || span > selection->capacity || selection->delivered == NULL)
        return false;
    uint64_t words = record_selection_bit_words(span);
    memset(selection->delivered, 0, (size_t)words * sizeof *selection->delivered);
    uint64_t used_bytes = (span + 7) / 8;
    if (size > used_bytes)
        size = (size_t)used_bytes;
    for (size_t byte = 0; byte < size; byte++)
        selection->delivered[byte / 8] |= (uint64_t)bytes[byte] << (8 * (byte % 8));
    selection->start = start;
    selection->span = span;
    uint64_t free_count = 0;
    for (uint64_t word = 0; word < words; word++) {
        if (word % WORDS_PER_BLOCK == 0)
            selection->free_before[word / WORDS_PER_BLOCK] = free_count;
        free_count += (uint64_t)__builtin_popcountll(record_selection_free_bits(selection, word));
    }
    if (free_count == 0) {
        selection->span = 0;
        return false;
    }
    selection->remaining = free_count;
    return true;
}

/* Position of the n-th set bit of `bits` (n counted from 0; n < popcount). */
static unsigned word_select(uint64_t bits, uint64_t n)
{
    for (; n > 0; n--)
        bits &= bits - 1;   /* clears the lowest set bit */
    return (unsigned)__builtin_ctzll(bits);
}

uint64_t record_selection_free_index(const struct record_selection *selection, uint64_t k)
{
    /* the last block with fewer than k + 1 free indices before it */
    uint64_t low = 0, high = (selection->span - 1) / SELECTION_BLOCK_BITS;
    while (low < high) {
        uint64_t middle = low + (high - low + 1) / 2;
        if (selection->free_before[middle] <= k)
            low = middle;
        else
            high = middle - 1;
    }
    uint64_t left = k - selection->free_before[low];
    uint64_t words = record_selection_bit_words(selection->span);
    for (uint64_t word = low * WORDS_PER_BLOCK; word < words; word++) {
        uint64_t free_bits = record_selection_free_bits(selection, word);
        uint64_t count = (uint64_t)__builtin_popcountll(free_bits);
        if (left < count)
            return selection->start + word * 64 + word_select(free_bits, left);
        left -= count;
    }
    /* k >= remaining: callers never ask; the last index of the span */
    return selection->start + selection->span - 1;
}

uint64_t record_selection_view_index(const struct record_selection *selection, uint64_t total,
                                     uint64_t replicas, uint64_t rank, uint64_t position)
{
    if (replicas == 0)
        replicas = 1;
    if (total < selection->remaining)
        total = selection->remaining;
    /* rank + position * replicas < total + replicas for positions of the
     * view (ceil(total / replicas) of them): no overflow */
    uint64_t k = rank + position * replicas;
    if (k >= total)
        k = (k - total) % total;
    if (k < selection->remaining)
        return record_selection_free_index(selection, k);
    return selection->start + selection->span + (k - selection->remaining);
}

bool record_selection_was_delivered(const struct record_selection *selection, uint64_t index)
{
    if (index < selection->start)
        return true;
    uint64_t bit = index - selection->start;
    if (bit >= selection->span)
        return false;
    return (selection->delivered[bit / 64] >> (bit % 64)) & 1u;
}
