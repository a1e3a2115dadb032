/* test_pending_gradients.c - the table of posted gradient all-reduces
 * (runtime/pending_gradients.h): an entry comes back whole, once, by its
 * handle; a reused handle replaces the stale entry; a full table refuses
 * and keeps what it has; taking from an empty table is the fast path. */
#include <criterion/criterion.h>

#include <stdint.h>

#include "pending_gradients.h"

static const void *handle(uintptr_t number)
{
    return (const void *)(number * 16);
}

static struct pending_gradient gradient_of(uintptr_t request, double local_sqr)
{
    return (struct pending_gradient){.request = handle(request), .count = 10,
                                     .start = {.measuring = true, .local_sqr = local_sqr,
                                               .started = 1.5, .norm_seconds = 0.25}};
}

Test(pending_gradients, an_entry_is_taken_once_by_its_handle_and_whole)
{
    static struct pending_gradients table = PENDING_GRADIENTS_INITIALIZER;
    cr_expect(pending_gradients_is_empty(&table));
    struct pending_gradient first = gradient_of(1, 4.0), second = gradient_of(2, 9.0);
    cr_assert(pending_gradients_add(&table, &first));
    cr_assert(pending_gradients_add(&table, &second));
    cr_expect(!pending_gradients_is_empty(&table));
    struct pending_gradient taken = {0};
    cr_assert(pending_gradients_take(&table, handle(2), &taken));
    cr_expect_eq(taken.request, handle(2));
    cr_expect_eq(taken.start.local_sqr, 9.0);
    cr_expect_eq(taken.count, 10);
    cr_expect(taken.start.measuring);
    cr_expect_eq(taken.start.started, 1.5);
    cr_expect_eq(taken.start.norm_seconds, 0.25);
    cr_expect(!pending_gradients_take(&table, handle(2), &taken), "taken once");
    cr_expect(!pending_gradients_take(&table, handle(3), NULL), "never added");
    cr_assert(pending_gradients_take(&table, handle(1), NULL), "taken without a copy");
    cr_expect(pending_gradients_is_empty(&table));
}

Test(pending_gradients, a_handle_added_again_replaces_its_stale_entry)
{
    static struct pending_gradients table = PENDING_GRADIENTS_INITIALIZER;
    struct pending_gradient stale = gradient_of(7, 1.0), fresh = gradient_of(7, 2.0);
    cr_assert(pending_gradients_add(&table, &stale));
    cr_assert(pending_gradients_add(&table, &fresh));
    struct pending_gradient taken = {0};
    cr_assert(pending_gradients_take(&table, handle(7), &taken));
    cr_expect_eq(taken.start.local_sqr, 2.0, "the later post");
    cr_expect(pending_gradients_is_empty(&table), "one entry per handle");
}

Test(pending_gradients, a_full_table_refuses_and_keeps_every_entry_it_holds)
{
    static struct pending_gradients table = PENDING_GRADIENTS_INITIALIZER;
    for (uintptr_t request = 1; request <= PENDING_GRADIENTS_MAX; request++) {
        struct pending_gradient gradient = gradient_of(request, (double)request);
        cr_assert(pending_gradients_add(&table, &gradient), "entry %zu", (size_t)request);
    }
    struct pending_gradient one_more = gradient_of(PENDING_GRADIENTS_MAX + 1, 0);
    cr_expect(!pending_gradients_add(&table, &one_more));
    struct pending_gradient again = gradient_of(5, 50.0);
    cr_expect(pending_gradients_add(&table, &again), "a reused handle still fits: it "
              "replaces its own entry");
    /* taken in another order than added: the slot a taken entry leaves is filled */
    for (uintptr_t request = PENDING_GRADIENTS_MAX; request >= 1; request--) {
        struct pending_gradient taken = {0};
        cr_assert(pending_gradients_take(&table, handle(request), &taken), "entry %zu",
                  (size_t)request);
        cr_expect_eq(taken.start.local_sqr, request == 5 ? 50.0 : (double)request);
    }
    cr_expect(pending_gradients_is_empty(&table));
    cr_expect(!pending_gradients_take(&table, handle(PENDING_GRADIENTS_MAX + 1), NULL),
              "the refused entry was never kept");
}
