/* test_replica_collective.c - the all-gather of the cooperative API and the
 * agreement built on it (runtime/replica_collective.h).
 *
 * Every replica must receive every replica's bytes in rank order, or the
 * accumulator's merge and the batch-size decision differ between replicas;
 * an agreement on a root that sent nothing must fail rather than hand out
 * garbage.  Replicas run as threads joined by the in-process all-gather of
 * thread_replicas.h; a fake transport stands for an MPI one that fails or
 * sends a wrong-sized part.  Results are recorded per rank and checked on
 * the test's own thread. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replica_collective.h"
#include "thread_replicas.h"

#define RC_REPLICAS 4

Test(replica_collective, a_single_replica_gathers_a_copy_of_its_own_bytes)
{
    replica_collective_use_single();
    struct replica_gathered gathered;
    memset(&gathered, 0x5a, sizeof gathered);
    char error[256] = "";
    static const char bytes[] = "rank zero";
    cr_assert_eq(replica_collective_allgather(bytes, sizeof bytes, &gathered, error,
                                              sizeof error), 0, "%s", error);
    cr_assert_eq(gathered.replicas, 1);
    cr_assert_eq(gathered.sizes[0], sizeof bytes);
    cr_expect_neq((void *)gathered.parts[0], (void *)bytes, "a copy the caller may free");
    cr_expect_eq(memcmp(gathered.parts[0], bytes, sizeof bytes), 0);
    replica_gathered_free(&gathered);
    cr_expect_eq(gathered.replicas, 0, "freed and zeroed");
    cr_expect_null(gathered.parts);
    cr_expect_null(gathered.sizes);
    replica_gathered_free(&gathered);   /* again: harmless */

    cr_assert_eq(replica_collective_allgather("", 0, &gathered, error, sizeof error), 0);
    cr_expect_eq(gathered.replicas, 1);
    cr_expect_eq(gathered.sizes[0], 0, "nothing to send is a part of size 0");
    cr_expect_not_null(gathered.parts[0]);
    replica_gathered_free(&gathered);
}

Test(replica_collective, a_single_replica_agrees_with_itself_and_has_no_other_root)
{
    replica_collective_use_single();
    uint64_t agreed = 0;
    char error[256] = "";
    cr_assert_eq(replica_collective_agree_u64(UINT64_MAX - 1, 0, &agreed, error, sizeof error),
                 0, "%s", error);
    cr_expect_eq(agreed, UINT64_MAX - 1);
    agreed = 17;
    cr_expect_eq(replica_collective_agree_u64(5, 1, &agreed, error, sizeof error), -1);
    cr_expect_str_eq(error, "replica 1 sent no value to agree on");
    cr_expect_eq(agreed, 17, "untouched on failure");
}

/* --- replicas as threads ---------------------------------------------------- */

struct gather_run {
    int status[RC_REPLICAS];
    unsigned replicas[RC_REPLICAS];
    size_t sizes[RC_REPLICAS][RC_REPLICAS];
    char parts[RC_REPLICAS][RC_REPLICAS][32];
};

/* Rank r sends r + 1 bytes of the letter 'a' + r. */
static void gather_body(unsigned rank, unsigned replicas, void *argument)
{
    struct gather_run *run = argument;
    char bytes[RC_REPLICAS];
    memset(bytes, 'a' + (int)rank, sizeof bytes);
    struct replica_gathered gathered;
    char error[256];
    run->status[rank] = replica_collective_allgather(bytes, rank + 1, &gathered, error,
                                                     sizeof error);
    if (run->status[rank] != 0)
        return;
    run->replicas[rank] = gathered.replicas;
    for (unsigned r = 0; r < gathered.replicas && r < replicas; r++) {
        run->sizes[rank][r] = gathered.sizes[r];
        memcpy(run->parts[rank][r], gathered.parts[r],
               gathered.sizes[r] < 32 ? gathered.sizes[r] : 32);
    }
    replica_gathered_free(&gathered);
}

Test(replica_collective, every_replica_gathers_everyones_bytes_in_rank_order)
{
    struct gather_run run;
    memset(&run, 0, sizeof run);
    thread_replicas_run(RC_REPLICAS, gather_body, &run);
    for (unsigned rank = 0; rank < RC_REPLICAS; rank++) {
        cr_assert_eq(run.status[rank], 0, "rank %u", rank);
        cr_expect_eq(run.replicas[rank], RC_REPLICAS);
        for (unsigned r = 0; r < RC_REPLICAS; r++) {
            cr_expect_eq(run.sizes[rank][r], r + 1, "rank %u, part %u", rank, r);
            char expected[RC_REPLICAS];
            memset(expected, 'a' + (int)r, sizeof expected);
            cr_expect_eq(memcmp(run.parts[rank][r], expected, r + 1), 0, "rank %u, part %u",
                         rank, r);
        }
    }
}

struct agree_run {
    unsigned root;
    int status[RC_REPLICAS];
    uint64_t agreed[RC_REPLICAS];
    char error[RC_REPLICAS][128];
};

static void agree_body(unsigned rank, unsigned replicas, void *argument)
{
    (void)replicas;
    struct agree_run *run = argument;
    run->agreed[rank] = UINT64_MAX;
    run->status[rank] = replica_collective_agree_u64(1000 + rank, run->root, &run->agreed[rank],
                                                     run->error[rank], sizeof run->error[rank]);
}

Test(replica_collective, every_replica_receives_the_roots_value)
{
    for (unsigned root = 0; root < RC_REPLICAS; root++) {
        struct agree_run run = {.root = root};
        thread_replicas_run(RC_REPLICAS, agree_body, &run);
        for (unsigned rank = 0; rank < RC_REPLICAS; rank++) {
            cr_expect_eq(run.status[rank], 0, "root %u rank %u: %s", root, rank,
                         run.error[rank]);
            cr_expect_eq(run.agreed[rank], 1000 + root, "root %u rank %u", root, rank);
        }
    }
}

Test(replica_collective, a_root_beyond_the_replicas_fails_on_every_replica)
{
    struct agree_run run = {.root = RC_REPLICAS};
    thread_replicas_run(RC_REPLICAS, agree_body, &run);
    for (unsigned rank = 0; rank < RC_REPLICAS; rank++) {
        cr_expect_eq(run.status[rank], -1, "rank %u", rank);
        cr_expect_str_eq(run.error[rank], "replica 4 sent no value to agree on");
        cr_expect_eq(run.agreed[rank], UINT64_MAX, "untouched");
    }
}

/* --- a transport that fails or misbehaves ------------------------------------ */

static unsigned fake_calls;
static bool fake_saw_zeroed;

static int failing_allgather(void *context, const void *bytes, size_t size,
                             struct replica_gathered *gathered, char *error, size_t error_size)
{
    (void)bytes;
    fake_calls++;
    fake_saw_zeroed = gathered->replicas == 0 && gathered->parts == NULL &&
                      gathered->sizes == NULL;
    snprintf(error, error_size, "MPI_Allgather of %zu bytes: %s", size, (const char *)context);
    return -1;
}

/* Two replicas; replica 1 sent 4 bytes instead of 8. */
static int short_part_allgather(void *context, const void *bytes, size_t size,
                                struct replica_gathered *gathered, char *error,
                                size_t error_size)
{
    (void)context, (void)error, (void)error_size;
    fake_calls++;
    gathered->replicas = 2;
    gathered->parts = calloc(2, sizeof *gathered->parts);
    gathered->sizes = calloc(2, sizeof *gathered->sizes);
    cr_assert(gathered->parts != NULL && gathered->sizes != NULL);
    for (unsigned r = 0; r < 2; r++) {
        gathered->sizes[r] = r == 0 ? size : 4;
        gathered->parts[r] = malloc(size);
        cr_assert_not_null(gathered->parts[r]);
        memcpy(gathered->parts[r], bytes, size);
    }
    return 0;
}

Test(replica_collective, a_failing_transport_fails_the_gather_and_the_agreement)
{
    struct replica_gathered gathered;
    memset(&gathered, 0x5a, sizeof gathered);
    replica_collective.context = "connection reset";
    replica_collective.allgather = failing_allgather;
    char error[256] = "";
    cr_expect_eq(replica_collective_allgather("abc", 3, &gathered, error, sizeof error), -1);
    cr_expect(fake_saw_zeroed, "the transport gets a zeroed result to fill");
    cr_expect_str_eq(error, "MPI_Allgather of 3 bytes: connection reset");
    uint64_t agreed = 3;
    cr_expect_eq(replica_collective_agree_u64(9, 0, &agreed, error, sizeof error), -1);
    cr_expect_str_eq(error, "MPI_Allgather of 8 bytes: connection reset", "its message passed on");
    cr_expect_eq(agreed, 3);
    cr_expect_eq(fake_calls, 2);
    replica_collective_use_single();
    cr_expect_eq(replica_collective_agree_u64(9, 0, &agreed, error, sizeof error), 0,
                 "the single replica is back: %s", error);
    cr_expect_eq(agreed, 9);
    cr_expect_eq(fake_calls, 2);
}

Test(replica_collective, a_root_that_sent_a_wrong_sized_value_fails_the_agreement)
{
    replica_collective.context = NULL;
    replica_collective.allgather = short_part_allgather;
    uint64_t agreed = 0;
    char error[256] = "";
    cr_expect_eq(replica_collective_agree_u64(42, 0, &agreed, error, sizeof error), 0, "%s",
                 error);
    cr_expect_eq(agreed, 42);
    agreed = 0;
    cr_expect_eq(replica_collective_agree_u64(42, 1, &agreed, error, sizeof error), -1);
    cr_expect_str_eq(error, "replica 1 sent no value to agree on");
    cr_expect_eq(agreed, 0);
    replica_collective_use_single();
}

/* --- the job's layout against what a collective reaches ---------------------- */

/* A job of 2 replicas with no transport beyond this process (two processes
 * told ADAPTDL_NUM_REPLICAS=2 but sharing no MPI world): the gather and the
 * agreement fail with a message rather than hand back this replica's bytes
 * alone; a job of 1 replica, and an unchecked one, gather as before. */
Test(replica_collective, a_job_of_two_replicas_refuses_a_single_replica_transport)
{
    replica_collective_use_single();
    replica_collective_expect(2, 1);
    struct replica_gathered gathered;
    char error[512] = "";
    cr_expect_eq(replica_collective_allgather("abc", 3, &gathered, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "the job has 2 replicas (this one rank 1) but the "
                                     "collective over them reaches 1 (this one rank 0): no MPI "
                                     "world joins this process to the others"), "%s", error);
    cr_expect_not_null(strstr(error, "accepted: every replica in one MPI world"), "%s", error);
    cr_expect_null(strchr(error, '\n'), "one line");
    cr_expect_eq(gathered.replicas, 0, "nothing handed back");
    cr_expect_null(gathered.parts);
    uint64_t agreed = 5;
    cr_expect_eq(replica_collective_agree_u64(9, 0, &agreed, error, sizeof error), -1);
    cr_expect_eq(agreed, 5, "untouched");

    replica_collective_expect(1, 0);
    cr_expect_eq(replica_collective_agree_u64(9, 0, &agreed, error, sizeof error), 0, "%s",
                 error);
    cr_expect_eq(agreed, 9);
    replica_collective_expect(0, 0);
    cr_expect_eq(replica_collective_allgather("abc", 3, &gathered, error, sizeof error), 0);
    replica_gathered_free(&gathered);
}

/* A world of the job's size that puts this replica at another rank (a rank
 * variable that contradicts MPI's) is refused too: rank 0's decisions and
 * the records each replica takes would be someone else's. */
static int world_of_two_at_rank_one(void *context, const void *bytes, size_t size,
                                    struct replica_gathered *gathered, char *error,
                                    size_t error_size)
{
    (void)context, (void)error, (void)error_size;
    gathered->replicas = 2;
    gathered->rank = 1;
    gathered->parts = calloc(2, sizeof *gathered->parts);
    gathered->sizes = calloc(2, sizeof *gathered->sizes);
    cr_assert(gathered->parts != NULL && gathered->sizes != NULL);
    for (unsigned r = 0; r < 2; r++) {
        gathered->parts[r] = malloc(size ? size : 1);
        cr_assert_not_null(gathered->parts[r]);
        memcpy(gathered->parts[r], bytes, size);
        gathered->sizes[r] = size;
    }
    return 0;
}

Test(replica_collective, a_world_that_puts_this_replica_at_another_rank_is_refused)
{
    replica_collective.context = NULL;
    replica_collective.allgather = world_of_two_at_rank_one;
    replica_collective_expect(2, 0);
    struct replica_gathered gathered;
    char error[512] = "";
    cr_expect_eq(replica_collective_allgather("abc", 3, &gathered, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "the job has 2 replicas (this one rank 0) but the "
                                     "collective over them reaches 2 (this one rank 1), so"),
                       "%s", error);
    cr_expect_null(gathered.parts, "freed");
    replica_collective_expect(2, 1);
    cr_expect_eq(replica_collective_allgather("abc", 3, &gathered, error, sizeof error), 0,
                 "%s", error);
    cr_expect_eq(gathered.replicas, 2);
    replica_gathered_free(&gathered);
    replica_collective_expect(0, 0);
    replica_collective_use_single();
}
