/* test_record_selection.c - the records a resumed pass still owes (adaptshim(7)
 * "Readers in their own order"): the k-th free index of a bitmap, across blocks, against a plain
 * count; the padding of shorter replicas; bitmaps that do not fit or leave
 * nothing. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "record_selection.h"

struct selection_storage {
    struct record_selection selection;
    uint64_t *bits;
    uint64_t *blocks;
};

static void storage_make(struct selection_storage *storage, uint64_t capacity)
{
    storage->bits = calloc(record_selection_bit_words(capacity), sizeof(uint64_t));
    storage->blocks = calloc(record_selection_block_words(capacity), sizeof(uint64_t));
    cr_assert(storage->bits != NULL && storage->blocks != NULL);
    record_selection_init(&storage->selection, storage->bits, storage->blocks, capacity);
}

static void storage_free(struct selection_storage *storage)
{
    free(storage->bits);
    free(storage->blocks);
}

Test(record_selection, the_kth_free_index_matches_a_plain_count_across_blocks)
{
    const uint64_t span = 3 * SELECTION_BLOCK_BITS + 77, start = 1000;
    struct selection_storage storage;
    storage_make(&storage, span + 5);
    unsigned char *bytes = calloc((span + 7) / 8, 1);
    cr_assert_not_null(bytes);
    /* dense and sparse stretches: all of block 1 delivered */
    uint64_t state = 12345;
    for (uint64_t bit = 1; bit < span; bit++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        bool in_full_block = bit / SELECTION_BLOCK_BITS == 1;
        if (in_full_block || (state >> 61) < 5)
            bytes[bit / 8] |= (unsigned char)(1u << (bit % 8));
    }
    cr_assert(record_selection_load(&storage.selection, start, span, bytes, (span + 7) / 8));
    uint64_t k = 0;
    for (uint64_t bit = 0; bit < span; bit++) {
        bool delivered = (bytes[bit / 8] >> (bit % 8)) & 1u;
        cr_assert_eq(record_selection_was_delivered(&storage.selection, start + bit), delivered);
        if (delivered)
            continue;
        cr_assert_eq(record_selection_free_index(&storage.selection, k), start + bit,
                     "free index %llu", (unsigned long long)k);
        k++;
    }
    cr_assert_eq(storage.selection.remaining, k);
    cr_assert(record_selection_was_delivered(&storage.selection, start - 1));
    cr_assert_not(record_selection_was_delivered(&storage.selection, start + span));
    free(bytes);
    storage_free(&storage);
}

Test(record_selection, a_short_bitmap_leaves_the_rest_free)
{
    struct selection_storage storage;
    storage_make(&storage, 100);
    const unsigned char bytes[] = {0xfe};  /* indices 1..7 of 0..39 */
    cr_assert(record_selection_load(&storage.selection, 0, 40, bytes, sizeof bytes));
    cr_assert_eq(storage.selection.remaining, 33);
    cr_assert_eq(record_selection_free_index(&storage.selection, 0), 0);
    cr_assert_eq(record_selection_free_index(&storage.selection, 1), 8);
    cr_assert_eq(record_selection_free_index(&storage.selection, 32), 39);
    storage_free(&storage);
}

Test(record_selection, replicas_take_every_kth_free_index_and_pad_from_the_first)
{
    struct selection_storage storage;
    storage_make(&storage, 64);
    const unsigned char bytes[] = {0x0a};  /* 10..19: 11 and 13 delivered: 8 free */
    cr_assert(record_selection_load(&storage.selection, 10, 10, bytes, sizeof bytes));
    const uint64_t free_indices[] = {10, 12, 14, 15, 16, 17, 18, 19};
    /* three replicas: ceil(8/3) = 3 positions each, 1 padded */
    for (uint64_t rank = 0; rank < 3; rank++)
        for (uint64_t position = 0; position < 3; position++) {
            uint64_t k = rank + 3 * position;
            uint64_t expected = free_indices[k < 8 ? k : k - 8];
            cr_assert_eq(record_selection_view_index(&storage.selection, 8, 3, rank, position),
                         expected, "rank %llu position %llu", (unsigned long long)rank,
                         (unsigned long long)position);
        }
    storage_free(&storage);
}

/* A pass lengthened after its resume: past the free indices come those
 * after the selection's end, then the padding from the first. */
Test(record_selection, a_lengthened_view_continues_past_the_selection_s_end)
{
    struct selection_storage storage;
    storage_make(&storage, 64);
    const unsigned char bytes[] = {0x0a};  /* 10..19: 8 free, as above */
    cr_assert(record_selection_load(&storage.selection, 10, 10, bytes, sizeof bytes));
    /* 11 indices: the 8 free, then 20, 21, 22; two replicas pad one */
    const uint64_t expected[] = {10, 12, 14, 15, 16, 17, 18, 19, 20, 21, 22, 10};
    for (uint64_t k = 0; k < 12; k++)
        cr_assert_eq(record_selection_view_index(&storage.selection, 11, 2, k % 2, k / 2),
                     expected[k], "index %llu", (unsigned long long)k);
    storage_free(&storage);
}

Test(record_selection, a_bitmap_too_long_or_leaving_nothing_is_not_loaded)
{
    struct selection_storage storage;
    storage_make(&storage, 16);
    const unsigned char none[] = {0x00, 0x00, 0x00};
    cr_assert_not(record_selection_load(&storage.selection, 0, 17, none, sizeof none));
    const unsigned char all[] = {0xff, 0xff};
    cr_assert_not(record_selection_load(&storage.selection, 0, 16, all, sizeof all));
    cr_assert_eq(storage.selection.remaining, 0);
    /* bytes past the span are ignored, not read as indices */
    const unsigned char spill[] = {0x00, 0xff};
    cr_assert(record_selection_load(&storage.selection, 0, 8, spill, sizeof spill));
    cr_assert_eq(storage.selection.remaining, 8);
    storage_free(&storage);
}
