/* test_growable_array.c - the one doubling array of the runtime
 * (runtime/growable_array.h).
 *
 * What would hurt: an array that is not grown when it is full (a write past
 * its end), a capacity that is updated although the allocation failed (the
 * next append writes past the end), or a size that overflows into a small
 * allocation. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "growable_array.h"

Test(growable_array, an_empty_array_gets_the_first_capacity)
{
    size_t capacity = 0;
    int *items = growable_array_make_room(NULL, 0, &capacity, sizeof *items, 8);
    cr_assert_not_null(items);
    cr_expect_eq(capacity, 8);
    items[7] = 1; /* the whole first capacity is usable (ASan checks) */
    free(items);
}

Test(growable_array, a_first_capacity_of_zero_still_makes_room_for_one)
{
    size_t capacity = 0;
    int *items = growable_array_make_room(NULL, 0, &capacity, sizeof *items, 0);
    cr_assert_not_null(items);
    cr_expect_eq(capacity, 1);
    free(items);
}

Test(growable_array, an_array_with_room_is_returned_as_it_is)
{
    size_t capacity = 4;
    int *items = calloc(capacity, sizeof *items);
    cr_assert_not_null(items);
    cr_expect_eq(growable_array_make_room(items, 3, &capacity, sizeof *items, 8), items);
    cr_expect_eq(capacity, 4);
    free(items);
}

Test(growable_array, a_full_array_doubles_and_keeps_its_items)
{
    size_t capacity = 0;
    size_t count = 0;
    int *items = NULL;
    for (int value = 0; value < 100; value++) {
        int *grown = growable_array_make_room(items, count, &capacity, sizeof *items, 4);
        cr_assert_not_null(grown);
        items = grown;
        items[count++] = value;
        cr_assert(count <= capacity);
    }
    cr_expect_eq(capacity, 128, "4, 8, ... 128: doubled each time it was full");
    for (int value = 0; value < 100; value++)
        cr_assert_eq(items[value], value);
    free(items);
}

Test(growable_array, an_overflowing_size_fails_and_leaves_the_array_alone)
{
    size_t capacity = 2;
    char *items = malloc(capacity);
    cr_assert_not_null(items);
    items[0] = 'a';
    /* 2 * 2 items of SIZE_MAX / 2 bytes do not fit in a size_t */
    errno = 0;
    cr_expect_null(growable_array_make_room(items, 2, &capacity, SIZE_MAX / 2, 8));
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(capacity, 2, "the capacity is only raised with the allocation");
    cr_expect_eq(items[0], 'a');
    free(items);
}

Test(growable_array, a_capacity_that_cannot_double_fails)
{
    size_t capacity = SIZE_MAX / 2 + 1;
    char item = 'a';
    errno = 0;
    cr_expect_null(growable_array_make_room(&item, capacity, &capacity, 1, 8));
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(capacity, SIZE_MAX / 2 + 1);
}
