/* delivery_record.c - delivered records of a pass (see delivery_record.h). */
#include "delivery_record.h"

#include <stdlib.h>

static bool delivery_bit(const uint64_t *bits, uint64_t index)
{
    return (bits[index / 64] >> (index % 64)) & 1u;
}

static void delivery_set_bit(uint64_t *bits, uint64_t index)
{
    bits[index / 64] |= (uint64_t)1 << (index % 64);
}

void delivery_record_release(struct delivery_record *record)
{
    free(record->bits);
    record->bits = NULL;
}

void delivery_record_reset(struct delivery_record *record, uint64_t length)
{
    delivery_record_release(record);
    *record = (struct delivery_record){.length = length};
}

/* Records below the prefix are delivered whether or not their bit is set:
 * bits are only ever read at or past the prefix. */
static bool delivery_record_is_delivered(const struct delivery_record *record, uint64_t index)
{
    if (index < record->prefix)
        return true;
    return record->bits != NULL && delivery_bit(record->bits, index);
}

static void delivery_record_extend_prefix(struct delivery_record *record)
{
    if (record->bits == NULL)
        return;
    while (record->prefix < record->length && delivery_bit(record->bits, record->prefix))
        record->prefix++;
}

uint64_t delivery_record_mark(struct delivery_record *record, uint64_t first, uint64_t end)
{
    if (end > record->length)
        end = record->length;
    if (first >= end)
        return 0;
    if (record->bits == NULL && first <= record->prefix) {
        /* the in-order path: no bits, no loop */
        uint64_t added = end > record->prefix ? end - record->prefix : 0;
        if (added > 0)
            record->prefix = end;
        record->delivered += added;
        return added;
    }
    if (record->bits == NULL && !record->bits_unavailable) {
        record->bits = calloc((size_t)((record->length + 63) / 64), sizeof *record->bits);
        record->bits_unavailable = record->bits == NULL;
    }
    if (record->bits == NULL) {
        /* only what continues the prefix can be remembered */
        return 0;
    }
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
    if (record->bits == NULL)
        return false;
    for (uint64_t index = first; index < end; index++)
        if (delivery_bit(record->bits, index))
            return true;
    return false;
}
