/* test_caller_collective.c - the trainer's own all-gather as the
 * cooperative API's transport (runtime/caller_collective.h).
 *
 * A fake trainer function stands for torch.distributed: it hands back a
 * fixed world of three replicas (or fails, or hands back a wrong size).
 * The runtime must copy every replica's bytes in rank order out of the
 * trainer's memory, pass the trainer's reason on in one line, refuse a
 * layout that cannot be, and leave the collectives to MPI's transport
 * while one is installed over it. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "caller_collective.h"
#include "replica_collective.h"

/* Rank 0 sent "a", rank 1 (this replica) its own bytes, rank 2 "ccc". */
static char fake_world[64];
static int fake_calls;

static int three_replicas(void *context, const void *bytes, size_t size, size_t *sizes,
                          const void **gathered, char *error, size_t error_size)
{
    (void)error, (void)error_size;
    fake_calls++;
    cr_assert_str_eq(context, "context");
    cr_assert_leq(size, 32);
    memcpy(fake_world, "a", 1);
    memcpy(fake_world + 1, bytes, size);
    memcpy(fake_world + 1 + size, "ccc", 3);
    sizes[0] = 1;
    sizes[1] = size;
    sizes[2] = 3;
    *gathered = fake_world;
    return 0;
}

static int refusing(void *context, const void *bytes, size_t size, size_t *sizes,
                    const void **gathered, char *error, size_t error_size)
{
    (void)context, (void)bytes, (void)size, (void)sizes, (void)gathered;
    strncpy(error, "gloo: connection closed by peer", error_size);
    return 7;
}

static int short_own_part(void *context, const void *bytes, size_t size, size_t *sizes,
                          const void **gathered, char *error, size_t error_size)
{
    (void)context, (void)bytes, (void)error, (void)error_size;
    sizes[0] = 1;
    sizes[1] = size - 1;
    sizes[2] = 1;
    *gathered = "xyz";
    return 0;
}

static int mpi_calls;
static int fake_mpi(void *context, const void *bytes, size_t size,
                    struct replica_gathered *gathered, char *error, size_t error_size)
{
    (void)context, (void)bytes, (void)size, (void)error, (void)error_size;
    mpi_calls++;
    gathered->replicas = 0;
    return -1;
}

Test(caller_collective, a_layout_that_cannot_be_is_refused_in_one_line)
{
    char error[512] = "";
    unsigned replicas = 9, rank = 9;
    cr_expect_eq(caller_collective_install(0, 0, three_replicas, "context", error, sizeof error),
                 -1);
    cr_expect_not_null(strstr(error, "0 replicas with this one at rank 0 is not a layout; "
                                     "accepted: at least 1 replica"),
                       "%s", error);
    cr_expect_eq(caller_collective_install(3, 3, three_replicas, "context", error, sizeof error),
                 -1);
    cr_expect_not_null(strstr(error, "3 replicas with this one at rank 3"), "%s", error);
    cr_expect_null(strchr(error, '\n'));
    cr_expect_not(caller_collective_world(&replicas, &rank), "nothing installed");
    cr_expect_eq(replicas, 9, "untouched");
}

Test(caller_collective, every_replica_s_bytes_come_back_copied_in_rank_order)
{
    char error[512] = "";
    cr_assert_eq(caller_collective_install(3, 1, three_replicas, "context", error, sizeof error),
                 0, "%s", error);
    unsigned replicas = 0, rank = 0;
    cr_assert(caller_collective_world(&replicas, &rank));
    cr_expect_eq(replicas, 3);
    cr_expect_eq(rank, 1);
    replica_collective_expect(3, 1);
    struct replica_gathered gathered;
    cr_assert_eq(replica_collective_allgather("bb", 2, &gathered, error, sizeof error), 0, "%s",
                 error);
    memset(fake_world, 0, sizeof fake_world);   /* the trainer's memory, reused */
    cr_assert_eq(gathered.replicas, 3);
    cr_expect_eq(gathered.rank, 1);
    cr_expect_eq(gathered.sizes[0], 1);
    cr_expect_eq(gathered.sizes[1], 2);
    cr_expect_eq(gathered.sizes[2], 3);
    cr_expect_eq(memcmp(gathered.parts[0], "a", 1), 0);
    cr_expect_eq(memcmp(gathered.parts[1], "bb", 2), 0);
    cr_expect_eq(memcmp(gathered.parts[2], "ccc", 3), 0);
    replica_gathered_free(&gathered);

    uint64_t agreed = 0;
    cr_expect_eq(replica_collective_agree_u64(11, 1, &agreed, error, sizeof error), 0, "%s",
                 error);
    cr_expect_eq(agreed, 11, "this replica's own value at its rank");
    cr_expect_eq(fake_calls, 2);

    cr_expect_eq(caller_collective_install(0, 0, NULL, NULL, error, sizeof error), 0);
    cr_expect_not(caller_collective_world(&replicas, &rank), "removed");
    replica_collective_expect(1, 0);
    cr_expect_eq(replica_collective_allgather("bb", 2, &gathered, error, sizeof error), 0);
    cr_expect_eq(gathered.replicas, 1, "the single replica again");
    cr_expect_eq(fake_calls, 2);
    replica_gathered_free(&gathered);
    replica_collective_expect(0, 0);
}

Test(caller_collective, the_trainer_s_failure_and_wrong_sizes_are_one_line_errors)
{
    char error[512] = "";
    struct replica_gathered gathered;
    cr_assert_eq(caller_collective_install(3, 1, refusing, NULL, error, sizeof error), 0);
    cr_expect_eq(replica_collective_allgather("bb", 2, &gathered, error, sizeof error), -1);
    cr_expect_str_eq(error, "the all-gather given to adaptdl_use_allgather failed (it returned "
                            "7): gloo: connection closed by peer");
    cr_expect_null(gathered.parts);

    cr_assert_eq(caller_collective_install(3, 1, short_own_part, NULL, error, sizeof error), 0);
    cr_expect_eq(replica_collective_allgather("bb", 2, &gathered, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "handed back 1 bytes at this replica's rank 1, given 2"),
                       "%s", error);
    cr_expect_null(strchr(error, '\n'));
    cr_expect_null(gathered.parts);
    caller_collective_install(0, 0, NULL, NULL, error, sizeof error);
}

/* MPI's transport, installed over the fallback, keeps the collectives; the
 * trainer's comes in when MPI leaves (MPI_Finalize). */
Test(caller_collective, mpi_s_transport_wins_while_it_is_installed)
{
    replica_collective_use_single();
    replica_collective.context = NULL;
    replica_collective.allgather = fake_mpi;
    char error[512] = "";
    cr_expect_eq(caller_collective_install(3, 1, three_replicas, "context", error, sizeof error),
                 1, "MPI carries the collectives");
    struct replica_gathered gathered;
    cr_expect_eq(replica_collective_allgather("bb", 2, &gathered, error, sizeof error), -1);
    cr_expect_eq(mpi_calls, 1);
    cr_expect_eq(fake_calls, 0);
    replica_collective_use_fallback();
    replica_collective_expect(3, 1);
    cr_expect_eq(replica_collective_allgather("bb", 2, &gathered, error, sizeof error), 0, "%s",
                 error);
    cr_expect_eq(fake_calls, 1, "the trainer's all-gather after MPI left");
    replica_gathered_free(&gathered);
    replica_collective_expect(0, 0);
    replica_collective_use_single();
    caller_collective_install(0, 0, NULL, NULL, error, sizeof error);
}
