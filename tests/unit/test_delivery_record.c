/* test_delivery_record.c - delivered records of a pass: the prefix that is
 * progress, coverage, and the bits a reader out of order costs. */
#include <criterion/criterion.h>

#include "delivery_record.h"

Test(delivery_record, in_order_deliveries_need_no_bits)
{
    struct delivery_record record = {0};
    delivery_record_reset(&record, 10);
    cr_expect_eq(delivery_record_mark(&record, 0, 3), 3);
    cr_expect_eq(delivery_record_mark(&record, 2, 6), 3, "overlap counts once");
    cr_expect_eq(record.prefix, 6);
    cr_expect_null(record.bits);
    cr_expect_eq(delivery_record_mark(&record, 6, 99), 4, "clamped to the view");
    cr_expect(delivery_record_covered(&record));
    delivery_record_release(&record);
}

Test(delivery_record, out_of_order_deliveries_join_the_prefix_when_the_gap_fills)
{
    struct delivery_record record = {0};
    delivery_record_reset(&record, 200);
    cr_expect_eq(delivery_record_mark(&record, 100, 101), 1);
    cr_expect_eq(record.prefix, 0, "progress stops at the first undelivered record");
    cr_expect_not_null(record.bits);
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
    cr_expect_null(record.bits, "a new pass starts in order");
    cr_expect_eq(record.delivered, 0);
    delivery_record_release(&record);
}

Test(delivery_record, an_empty_view_is_never_covered)
{
    struct delivery_record record = {0};
    delivery_record_reset(&record, 0);
    cr_expect_eq(delivery_record_mark(&record, 0, 1), 0);
    cr_expect_not(delivery_record_covered(&record));
    cr_expect_not(delivery_record_any_delivered(&record, 0, 1));
    delivery_record_release(&record);
}
