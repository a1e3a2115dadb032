/* delivered_set.c - what a snapshot binds of a pass read out of order (see
 * delivered_set.h). */
#include "delivered_set.h"

#include <stdbool.h>
#include <stdlib.h>

#include "permutation.h"

static bool bit_is_set(const uint64_t *words, uint64_t index)
{
    return (words[index / 64] >> (index % 64)) & 1u;
}

static void set_byte_bit(unsigned char *bytes, uint64_t index)
{
    bytes[index / 8] |= (unsigned char)(1u << (index % 8));
}

static bool byte_bit_is_set(const unsigned char *bytes, uint64_t index)
{
    return (bytes[index / 8] >> (index % 8)) & 1u;
}

static uint64_t count_set_bits(const uint64_t *words, uint64_t length)
{
    uint64_t count = 0;
    for (uint64_t word = 0; word < (length + 63) / 64; word++)
        count += (uint64_t)__builtin_popcountll(words[word]);
    return count;
}

/* Keeps only the in-order prefix of `consumed` (`length` view positions). */
static void keep_consumed_prefix(uint64_t *consumed, uint64_t length)
{
    uint64_t prefix = 0;
    while (prefix < length && bit_is_set(consumed, prefix))
        prefix++;
    for (uint64_t index = prefix; index < length; index++)
        consumed[index / 64] &= ~((uint64_t)1 << (index % 64));
}

/* The prefix less what is in flight: what the position says without a ring. */
static void consumed_from_prefix(const struct delivery_record *delivery, uint64_t unconsumed,
                                 uint64_t *consumed)
{
    uint64_t words = delivery_record_words(delivery->length);
    for (uint64_t word = 0; word < words; word++)
        consumed[word] = 0;
    uint64_t prefix = delivery->prefix > unconsumed ? delivery->prefix - unconsumed : 0;
    for (uint64_t index = 0; index < prefix; index++)
        consumed[index / 64] |= (uint64_t)1 << (index % 64);
}

/* Pass indices [base, M) consumed, as bits relative to base (the
 * selection's start): those the resumed selection had, and the index every
 * consumed view position stands for, on every replica.  The view's k-th
 * index (view position k / K of replica k % K) is the k-th free one of the
 * selection, then, past them, the indices a lengthening added after its
 * end (record_selection_view_index). */
static void mark_selected_pass(const struct pass_tracker *tracker,
                               const struct record_selection *selection,
                               const uint64_t *consumed, uint64_t length, uint64_t span,
                               unsigned char *bits)
{
    uint64_t k = 0;
    for (uint64_t bit = 0; bit < selection->span; bit++) {
        if (record_selection_was_delivered(selection, selection->start + bit)) {
            set_byte_bit(bits, bit);
            continue;
        }
        uint64_t position = k++ / tracker->replicas;
        if (position < length && bit_is_set(consumed, position))
            set_byte_bit(bits, bit);
    }
    for (uint64_t bit = selection->span; bit < span && k < tracker->selected; bit++) {
        uint64_t position = k++ / tracker->replicas;
        if (position < length && bit_is_set(consumed, position))
            set_byte_bit(bits, bit);
    }
}

/* One replica's plain view: position j is pass index s + j. */
static void mark_plain_pass(const struct pass_tracker *tracker, const uint64_t *consumed,
                            uint64_t length, uint64_t base, uint64_t span, unsigned char *bits)
{
    for (uint64_t position = 0; position < length; position++) {
        if (!bit_is_set(consumed, position))
            continue;
        uint64_t index = view_logical_index(tracker->pass_length, 1, 0, tracker->start_index,
                                            position);
        if (index >= base && index - base < span)
            set_byte_bit(bits, index - base);
    }
}

/* From bits relative to base: the first clear one is the current index,
 * the set ones after it become the set's bytes. */
static int delivered_set_from_bits(const unsigned char *bits, uint64_t base, uint64_t span,
                                   struct delivered_set *set)
{
    uint64_t first_clear = 0;
    while (first_clear < span && byte_bit_is_set(bits, first_clear))
        first_clear++;
    set->current_index = base + first_clear;
    set->bytes = NULL;
    set->size = 0;
    uint64_t last_set = first_clear;
    for (uint64_t bit = first_clear; bit < span; bit++)
        if (byte_bit_is_set(bits, bit))
            last_set = bit;
    if (last_set == first_clear)
        return 1;
    size_t size = (size_t)((last_set - first_clear) / 8 + 1);
    set->bytes = calloc(size, 1);
    if (set->bytes == NULL)
        return -1;
    for (uint64_t bit = first_clear + 1; bit <= last_set; bit++)
        if (byte_bit_is_set(bits, bit))
            set_byte_bit(set->bytes, bit - first_clear);
    set->size = size;
    return 1;
}

/* How many of the latest deliveries may hold `in_flight` records.  Parallel
 * readers finish out of order: a DataLoader with W workers and prefetch
 * factor F asks for batch b + W*F when batch b comes back, so the batches
 * in flight began before the last W*F - 1 consumed ones were all delivered,
 * and their records are among the last twice `in_flight` deliveries (at
 * most `in_flight` consumed records among them come again). */
uint64_t delivered_set_reordered(uint64_t in_flight)
{
    return in_flight > UINT64_MAX / 2 ? UINT64_MAX : 2 * in_flight;
}

int delivered_set_capture(const struct pass_tracker *tracker,
                          const struct delivery_record *delivery,
                          const struct record_selection *selection, uint64_t unconsumed,
                          struct delivered_set *set)
{
    bool selected = tracker->selected > 0;
    if (tracker->skipped || pass_tracker_replay_skips_passes(tracker))
        return 0;
    if (!selected && !(delivery->bits_in_use && tracker->replicas == 1))
        return 0;
    /* records in flight from before this pass's deliveries: the previous
     * pass's end, which pass_tracker_position counts back to */
    if (unconsumed > delivery->delivered && tracker->has_previous &&
        tracker->previous_pass + 1 == tracker->pass)
        return 0;
    uint64_t base = selected ? selection->start : tracker->start_index;
    uint64_t span = tracker->pass_length > base ? tracker->pass_length - base : 0;
    /* a resume loads at most N bits (record_selection's storage) */
    if (span == 0 || span > tracker->record_count)
        return 0;
    uint64_t length = delivery->length;
    uint64_t *consumed = calloc((size_t)delivery_record_words(length) + 1, sizeof *consumed);
    unsigned char *bits = calloc((size_t)(span + 7) / 8, 1);
    int status = -1;
    if (consumed != NULL && bits != NULL) {
        /* the set leaves out twice the records in flight, the prefix only
         * those: a reader in order (a DataLoader's workers interleave its
         * batches) binds more with the prefix, and keeps it */
        bool known = delivery_record_consumed(delivery, delivered_set_reordered(unconsumed),
                                              consumed);
        uint64_t by_prefix = delivery->prefix > unconsumed ? delivery->prefix - unconsumed : 0;
        if (!known || count_set_bits(consumed, length) <= by_prefix) {
            if (!selected) {
                free(consumed);
                free(bits);
                return 0;
            }
            consumed_from_prefix(delivery, unconsumed, consumed);
        }
        if (tracker->replicas > 1)
            keep_consumed_prefix(consumed, length);
        if (selected)
            mark_selected_pass(tracker, selection, consumed, length, span, bits);
        else
            mark_plain_pass(tracker, consumed, length, base, span, bits);
        set->pass = tracker->pass;
        set->pass_length = tracker->pass_length;
        status = delivered_set_from_bits(bits, base, span, set);
    }
    free(consumed);
    free(bits);
    return status;
}
