/* delivery_record.c - delivered records of a pass (see delivery_record.h). */
#include "delivery_record.h"

#include <string.h>

static bool delivery_bit(const uint64_t *bits, uint64_t index)
{
    return (bits[index / 64] >> (index % 64)) & 1u;
}

static void delivery_set_bit(uint64_t *bits, uint64_t index)
{
    bits[index / 64] |= (uint64_t)1 << (index % 64);
}

uint64_t delivery_record_words(uint64_t capacity)
{
    return (capacity + 63) / 64;
}

void delivery_record_init(struct delivery_record *record, uint64_t *bits, uint64_t capacity,
                          struct delivery_range *recent, uint64_t recent_capacity)
{
    *record = (struct delivery_record){
        .bits = bits,
        .capacity = bits != NULL ? capacity : 0,
        .recent = recent,
        .recent_capacity = recent != NULL ? recent_capacity : 0,
    };
}

void delivery_record_reset(struct delivery_record *record, uint64_t length)
{
    if (record->bits_in_use)
        memset(record->bits, 0,
               (size_t)delivery_record_words(record->length < record->capacity
                                                 ? record->length
                                                 : record->capacity) * sizeof *record->bits);
    record->length = length;
    record->prefix = 0;
    record->delivered = 0;
    record->bits_in_use = false;
    record->recent_count = 0;
    record->recent_next = 0;
    record->recent_dropped = false;
}

/* Bits past the old length were cleared by the reset that began the view
 * and never set since (marks stop at the length), so they are free. */
void delivery_record_extend(struct delivery_record *record, uint64_t length)
{
    if (length > record->length)
        record->length = length;
}

static bool delivery_record_has_bits(const struct delivery_record *record)
{
    return record->bits != NULL && record->length <= record->capacity;
}

/* Records below the prefix are delivered whether or not their bit is set:
 * bits are only ever read at or past the prefix. */
static bool delivery_record_is_delivered(const struct delivery_record *record, uint64_t index)
{
    if (index < record->prefix)
        return true;
    return record->bits_in_use && delivery_bit(record->bits, index);
}

static void delivery_record_extend_prefix(struct delivery_record *record)
{
    if (!record->bits_in_use)
        return;
    while (record->prefix < record->length && delivery_bit(record->bits, record->prefix))
        record->prefix++;
}

/* The ring slot `back` ranges before the newest (0: the newest). */
static struct delivery_range *delivery_record_recent_at(const struct delivery_record *record,
                                                        uint64_t back)
{
    uint64_t slot = (record->recent_next + record->recent_capacity - 1 - back) %
                    record->recent_capacity;
    return &record->recent[slot];
}

/* Remembers [first, end) as the latest delivery; a read that continues the
 * one before it (an in-order reader) only moves that one's end. */
static void delivery_record_remember(struct delivery_record *record, uint64_t first,
                                     uint64_t end)
{
    if (record->recent_capacity == 0)
        return;
    if (record->recent_count > 0) {
        struct delivery_range *newest = delivery_record_recent_at(record, 0);
        if (newest->end == first) {
            newest->end = end;
            return;
        }
    }
    record->recent[record->recent_next] = (struct delivery_range){first, end};
    record->recent_next = (record->recent_next + 1) % record->recent_capacity;
    if (record->recent_count < record->recent_capacity)
        record->recent_count++;
    else
        record->recent_dropped = true;
}

static uint64_t delivery_record_mark_bits(struct delivery_record *record, uint64_t first,
                                          uint64_t end);

uint64_t delivery_record_mark(struct delivery_record *record, uint64_t first, uint64_t end)
{
    if (end > record->length)
        end = record->length;
    if (first >= end)
        return 0;
    uint64_t added = delivery_record_mark_bits(record, first, end);
    if (added > 0)
        delivery_record_remember(record, first, end);
    return added;
}

static uint64_t delivery_record_mark_bits(struct delivery_record *record, uint64_t first,
                                          uint64_t end)
{
    if (!record->bits_in_use && first <= record->prefix) {
        /* the in-order path: no bits, no loop */
        uint64_t added = end > record->prefix ? end - record->prefix : 0;
        if (added > 0)
            record->prefix = end;
        record->delivered += added;
        return added;
    }
    if (!delivery_record_has_bits(record)) {
        /* only what continues the prefix can be remembered */
        return 0;
    }
    record->bits_in_use = true;
    uint64_t added = 0;
    for (uint64_t index = first; index < end; index++) {
        if (delivery_record_is_delivered(record, index))
            continue;
        delivery_set_bit(record->bits, index);
        added++;
    }
    record->delivered += added;
    delivery_record_extend_prefix(record);
    return added;
}

bool delivery_record_any_delivered(const struct delivery_record *record, uint64_t first,
                                   uint64_t end)
{
    if (end > record->length)
        end = record->length;
    if (first >= end)
        return false;
    if (first < record->prefix)
        return true;
    if (!record->bits_in_use)
        return false;
    for (uint64_t index = first; index < end; index++)
        if (delivery_bit(record->bits, index))
            return true;
    return false;
}

static void delivery_clear_bit(uint64_t *bits, uint64_t index)
{
    bits[index / 64] &= ~((uint64_t)1 << (index % 64));
}

bool delivery_record_consumed(const struct delivery_record *record, uint64_t unconsumed,
                              uint64_t *consumed)
{
    uint64_t words = delivery_record_words(record->length);
    for (uint64_t word = 0; word < words; word++)
        consumed[word] = record->bits_in_use ? record->bits[word] : 0;
    for (uint64_t index = 0; index < record->prefix; index++)
        delivery_set_bit(consumed, index);
    /* the newest deliveries first, each from its end */
    for (uint64_t back = 0; back < record->recent_count && unconsumed > 0; back++) {
        const struct delivery_range *range = delivery_record_recent_at(record, back);
        for (uint64_t index = range->end; index > range->first && unconsumed > 0; index--) {
            delivery_clear_bit(consumed, index - 1);
            unconsumed--;
        }
    }
    /* the rest were delivered before the oldest range the ring still has */
    return unconsumed == 0 || !record->recent_dropped;
}
