/* test_pass_state_arena.c - pass-state blocks shared across fork, found by
 * file identity (runtime/pass_state_arena.h).
 *
 * A key claimed twice gets one block, initialized once; different keys get
 * disjoint blocks; a size mismatch and a full arena fail with EINVAL and
 * ENOSPC; a failing initializer gives the block back.  Across fork: a block
 * claimed first by a child, after the fork, is the block the parent gets
 * for the same key, with what the child wrote in it - the case of a
 * DataLoader worker that opens the data file before its parent does. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pass_state_arena.h"

static int initialize_calls;

static int count_and_fill(void *block, void *context)
{
    initialize_calls++;
    memset(block, *(const int *)context, 64);
    return 0;
}

static int refuse(void *block, void *context)
{
    errno = EIO;
    return -1;
}

/* Claims the block of key, filled with zeros by count_and_fill when it is
 * created. */
static unsigned char *claim_zero_filled(struct pass_state_arena *arena,
                                        const struct pass_state_key *key, size_t size,
                                        bool *created)
{
    static int zero = 0;
    return pass_state_arena_claim(arena, key, size, count_and_fill, &zero, created);
}

Test(pass_state_arena, one_key_gets_one_block_initialized_once)
{
    struct pass_state_arena *arena = pass_state_arena_create(1 << 20);
    cr_assert_not_null(arena);
    initialize_calls = 0;
    struct pass_state_key key = {.device = 3, .inode = 77, .record_count = 1000};
    int fill = 0x5a;
    bool created;
    unsigned char *first = pass_state_arena_claim(arena, &key, 200, count_and_fill, &fill,
                                                  &created);
    cr_assert_not_null(first);
    cr_expect(created);
    first[0] = 1;
    unsigned char *again = pass_state_arena_claim(arena, &key, 200, count_and_fill, &fill,
                                                  &created);
    cr_expect_eq(again, first);
    cr_expect(!created);
    cr_expect_eq(initialize_calls, 1);
    cr_expect_eq(again[0], 1, "the block is not initialized again");
    cr_expect_eq(again[1], 0x5a);
    pass_state_arena_destroy(arena);
}

Test(pass_state_arena, different_keys_get_disjoint_aligned_blocks)
{
    struct pass_state_arena *arena = pass_state_arena_create(1 << 20);
    bool created;
    struct pass_state_key a = {.device = 1, .inode = 2, .record_count = 10};
    struct pass_state_key b = a, c = a;
    b.inode = 3;
    c.record_count = 11;   /* a file replaced by one of another size */
    unsigned char *block_a = claim_zero_filled(arena, &a, 100, &created);
    unsigned char *block_b = claim_zero_filled(arena, &b, 100, &created);
    unsigned char *block_c = claim_zero_filled(arena, &c, 100, &created);
    cr_assert(block_a && block_b && block_c);
    cr_expect_geq(block_b - block_a, 100);
    cr_expect_geq(block_c - block_b, 100);
    cr_expect_eq((uintptr_t)block_a % 64, 0);
    cr_expect_eq((uintptr_t)block_b % 64, 0);
    cr_expect_eq((uintptr_t)block_c % 64, 0);
    pass_state_arena_destroy(arena);
}

Test(pass_state_arena, a_size_mismatch_a_full_arena_and_a_failed_initializer_fail)
{
    struct pass_state_arena *arena = pass_state_arena_create(1 << 20);
    bool created;
    struct pass_state_key key = {.device = 1, .inode = 2, .record_count = 10};
    cr_assert_not_null(claim_zero_filled(arena, &key, 100, &created));
    errno = 0;
    cr_expect_null(claim_zero_filled(arena, &key, 101, &created));
    cr_expect_eq(errno, EINVAL);

    struct pass_state_key big = {.device = 1, .inode = 5, .record_count = 10};
    size_t available = pass_state_arena_available(arena);
    errno = 0;
    cr_expect_null(claim_zero_filled(arena, &big, available + 1, &created));
    cr_expect_eq(errno, ENOSPC);

    struct pass_state_key refused = {.device = 1, .inode = 6, .record_count = 10};
    errno = 0;
    cr_expect_null(pass_state_arena_claim(arena, &refused, 100, refuse, NULL, &created));
    cr_expect_eq(errno, EIO);
    cr_expect_eq(pass_state_arena_available(arena), available, "nothing was used");
    pass_state_arena_destroy(arena);
}

Test(pass_state_arena, the_slot_table_fills_with_enospc)
{
    struct pass_state_arena *arena = pass_state_arena_create(4 << 20);
    bool created;
    for (uint64_t i = 0; i < PASS_STATE_ARENA_FILES; i++) {
        struct pass_state_key key = {.device = 9, .inode = i, .record_count = 1};
        cr_assert_not_null(claim_zero_filled(arena, &key, 64, &created), "file %llu",
                           (unsigned long long)i);
    }
    struct pass_state_key one_more = {.device = 9, .inode = 99999, .record_count = 1};
    errno = 0;
    cr_expect_null(claim_zero_filled(arena, &one_more, 64, &created));
    cr_expect_eq(errno, ENOSPC);
    pass_state_arena_destroy(arena);
}

Test(pass_state_arena, a_block_a_child_claims_first_is_the_parent_s_block)
{
    struct pass_state_arena *arena = pass_state_arena_create(1 << 20);
    struct pass_state_key key = {.device = 4, .inode = 44, .record_count = 400};
    int fill = 0;
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        bool created;
        unsigned char *block = pass_state_arena_claim(arena, &key, 128, count_and_fill,
                                                      &fill, &created);
        if (block == NULL || !created)
            _exit(1);
        block[7] = 42;
        _exit(0);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    bool created;
    initialize_calls = 0;
    unsigned char *block = pass_state_arena_claim(arena, &key, 128, count_and_fill, &fill,
                                                  &created);
    cr_assert_not_null(block);
    cr_expect(!created, "the child's claim is visible to the parent");
    cr_expect_eq(initialize_calls, 0);
    cr_expect_eq(block[7], 42, "with what the child wrote");
    pass_state_arena_destroy(arena);
}
