/* test_delivery_record.c - delivered records of a pass: the prefix that is
 * progress, coverage, and the bits a reader out of order costs. */
#include <criterion/criterion.h>

#include <string.h>

#include "delivery_record.h"

static uint64_t storage[4];

static void record_start(struct delivery_record *record, uint64_t length)
{
    memset(storage, 0, sizeof storage);
    delivery_record_init(record, storage, 64 * 4, NULL, 0);
    delivery_record_reset(record, length);
}

Test(delivery_record, in_order_deliveries_need_no_bits)
{
    struct delivery_record record;
    record_start(&record, 10);
    cr_expect_eq(delivery_record_mark(&record, 0, 3), 3);
    cr_expect_eq(delivery_record_mark(&record, 2, 6), 3, "overlap counts once");
    cr_expect_eq(record.prefix, 6);
    cr_expect_not(record.bits_in_use);
    cr_expect_eq(delivery_record_mark(&record, 6, 99), 4, "clamped to the view");
    cr_expect(delivery_record_covered(&record));
}

Test(delivery_record, out_of_order_deliveries_join_the_prefix_when_the_gap_fills)
{
    struct delivery_record record;
    record_start(&record, 200);
    cr_expect_eq(delivery_record_mark(&record, 100, 101), 1);
    cr_expect_eq(record.prefix, 0, "progress stops at the first undelivered record");
    cr_expect(record.bits_in_use);
    cr_expect(delivery_record_any_delivered(&record, 90, 101));
    cr_expect_not(delivery_record_any_delivered(&record, 0, 100));
    cr_expect_eq(delivery_record_mark(&record, 0, 100), 100);
    cr_expect_eq(record.prefix, 101);
    cr_expect_eq(record.delivered, 101);
    cr_expect_eq(delivery_record_mark(&record, 50, 150), 49);
    cr_expect_eq(record.prefix, 150);
    cr_expect_not(delivery_record_covered(&record));
    /* a shuffled visit of the rest, as a map-style Dataset makes */
    for (uint64_t k = 0; k < 50; k++)
        delivery_record_mark(&record, 150 + (k * 7) % 50, 151 + (k * 7) % 50);
    cr_expect(delivery_record_covered(&record));
    cr_expect_eq(record.prefix, 200);
    delivery_record_reset(&record, 5);
    cr_expect_not(record.bits_in_use, "a new pass starts in order");
    cr_expect_eq(storage[0] | storage[1] | storage[2] | storage[3], 0, "and clean bits");
    cr_expect_eq(record.delivered, 0);
    cr_expect_eq(delivery_record_mark(&record, 3, 4), 1);
    cr_expect_eq(delivery_record_mark(&record, 0, 3), 3);
    cr_expect_eq(record.prefix, 4);
    cr_expect_not(delivery_record_covered(&record));
    cr_expect_eq(delivery_record_mark(&record, 4, 5), 1);
    cr_expect(delivery_record_covered(&record));
}

Test(delivery_record, an_empty_view_is_never_covered)
{
    struct delivery_record record;
    record_start(&record, 0);
    cr_expect_eq(delivery_record_mark(&record, 0, 1), 0);
    cr_expect_not(delivery_record_covered(&record));
    cr_expect_not(delivery_record_any_delivered(&record, 0, 1));
}

Test(delivery_record, a_view_longer_than_its_storage_keeps_the_prefix_only)
{
    struct delivery_record record;
    record_start(&record, 1000);
    cr_expect_eq(delivery_record_mark(&record, 500, 501), 0, "not remembered");
    cr_expect_eq(delivery_record_mark(&record, 0, 10), 10);
    cr_expect_eq(record.prefix, 10, "progress never counts what it cannot remember");
}

/* The storage a caller must provide: one bit per record, rounded up to
 * whole 64-bit words; and that much is enough for a view read backwards,
 * with nothing written past it. */
Test(delivery_record, words_round_the_bits_up_to_whole_words)
{
    cr_expect_eq(delivery_record_words(0), 0);
    cr_expect_eq(delivery_record_words(1), 1);
    cr_expect_eq(delivery_record_words(63), 1);
    cr_expect_eq(delivery_record_words(64), 1);
    cr_expect_eq(delivery_record_words(65), 2);
    cr_expect_eq(delivery_record_words(128), 2);
    cr_expect_eq(delivery_record_words(129), 3);
    cr_expect_eq(delivery_record_words((uint64_t)1 << 40), (uint64_t)1 << 34);
    cr_expect_eq(delivery_record_words(((uint64_t)1 << 40) + 1), ((uint64_t)1 << 34) + 1);
}

Test(delivery_record, words_of_storage_hold_a_view_read_backwards)
{
    static const uint64_t lengths[] = {1, 63, 64, 65, 130};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        uint64_t length = lengths[i];
        uint64_t words = delivery_record_words(length);
        uint64_t bits[4];
        memset(bits, 0, sizeof bits);
        bits[words] = 0x5a5a5a5a5a5a5a5aULL;   /* a guard after the storage */
        struct delivery_record record;
        delivery_record_init(&record, bits, length, NULL, 0);
        delivery_record_reset(&record, length);
        for (uint64_t j = length; j-- > 0;)
            cr_expect_eq(delivery_record_mark(&record, j, j + 1), 1, "record %llu of %llu",
                         (unsigned long long)j, (unsigned long long)length);
        cr_expect(delivery_record_covered(&record), "%llu records", (unsigned long long)length);
        cr_expect_eq(record.prefix, length);
        cr_expect_eq(bits[words], 0x5a5a5a5a5a5a5a5aULL, "%llu records: the guard was written",
                     (unsigned long long)length);
    }
}

Test(delivery_record, a_view_that_grows_keeps_what_was_delivered)
{
    struct delivery_record record;
    record_start(&record, 4);
    cr_expect_eq(delivery_record_mark(&record, 0, 1), 1);
    cr_expect_eq(delivery_record_mark(&record, 2, 4), 2, "out of order: bits");
    cr_expect_eq(delivery_record_mark(&record, 5, 7), 0, "past the view");
    delivery_record_extend(&record, 10);
    cr_expect_eq(record.length, 10);
    cr_expect_eq(record.delivered, 3);
    cr_expect_not(delivery_record_any_delivered(&record, 4, 10), "nothing past the old end");
    cr_expect_eq(delivery_record_mark(&record, 1, 2), 1);
    cr_expect_eq(record.prefix, 4, "the gap filled");
    cr_expect_eq(delivery_record_mark(&record, 4, 10), 6);
    cr_expect(delivery_record_covered(&record));
    delivery_record_extend(&record, 3);
    cr_expect_eq(record.length, 10, "it never shrinks");
}

/* --- what a prefetching loader may still hold (lookahead) ------------------- */

static bool consumed_bit(const uint64_t *bits, uint64_t index)
{
    return (bits[index / 64] >> (index % 64)) & 1u;
}

/* A record of 128 bits with a ring of the last `ring` deliveries (at most
 * 8), reset for a view of 100 records; `consumed` receives the answers of
 * delivery_record_consumed. */
struct lookahead_record {
    uint64_t bits[2], consumed[2];
    struct delivery_range recent[8];
    struct delivery_record record;
};

static void lookahead_record_start(struct lookahead_record *lookahead, uint64_t ring)
{
    memset(lookahead->bits, 0, sizeof lookahead->bits);
    delivery_record_init(&lookahead->record, lookahead->bits, 128, lookahead->recent, ring);
    delivery_record_reset(&lookahead->record, 100);
}

Test(delivery_record, the_records_delivered_last_are_not_consumed)
{
    struct lookahead_record lookahead;
    lookahead_record_start(&lookahead, 8);
    delivery_record_mark(&lookahead.record, 0, 3);      /* in order */
    delivery_record_mark(&lookahead.record, 3, 5);      /* continues the range before */
    delivery_record_mark(&lookahead.record, 50, 52);    /* out of order */
    delivery_record_mark(&lookahead.record, 20, 21);
    /* the last 4: record 20, 51, 50, then 4 */
    cr_assert(delivery_record_consumed(&lookahead.record, 4, lookahead.consumed));
    for (uint64_t index = 0; index < 100; index++)
        cr_assert_eq(consumed_bit(lookahead.consumed, index), index < 4, "record %llu",
                     (unsigned long long)index);
    cr_assert(delivery_record_consumed(&lookahead.record, 0, lookahead.consumed));
    cr_assert(consumed_bit(lookahead.consumed, 51) && consumed_bit(lookahead.consumed, 20) &&
              consumed_bit(lookahead.consumed, 4) && !consumed_bit(lookahead.consumed, 5));
    /* more in flight than ever delivered: none consumed, and that is known */
    cr_assert(delivery_record_consumed(&lookahead.record, 50, lookahead.consumed));
    for (uint64_t index = 0; index < 100; index++)
        cr_assert_not(consumed_bit(lookahead.consumed, index));
}

Test(delivery_record, a_ring_that_forgot_the_oldest_cannot_count_past_them)
{
    struct lookahead_record lookahead;
    lookahead_record_start(&lookahead, 2);
    for (uint64_t index = 90; index >= 80; index -= 2)
        delivery_record_mark(&lookahead.record, index, index + 1);
    cr_assert(delivery_record_consumed(&lookahead.record, 2, lookahead.consumed),
              "the ring knows the last 2");
    cr_assert_not(delivery_record_consumed(&lookahead.record, 3, lookahead.consumed));
    /* a new view starts with an empty ring */
    delivery_record_reset(&lookahead.record, 100);
    cr_assert(delivery_record_consumed(&lookahead.record, 3, lookahead.consumed));
}
