/* test_replica_placement.c - the hosts of a hostfile and the replicas
 * spread over their slots (runtime/replica_placement.h): comments, default
 * and repeated slots, refused lines named by number; hosts filled in order,
 * torchrun's numbers per rank, more replicas than slots refused. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "replica_placement.h"

static struct hostfile *parse_ok(const char *text)
{
    struct hostfile *hosts = malloc(sizeof *hosts);
    char error[256] = "";
    cr_assert_eq(hostfile_parse(text, strlen(text), hosts, error, sizeof error), 0, "%s",
                 error);
    return hosts;
}

static void expect_refused(const char *text, const char *expected)
{
    struct hostfile *hosts = malloc(sizeof *hosts);
    char error[256] = "";
    cr_expect_eq(hostfile_parse(text, strlen(text), hosts, error, sizeof error), -1,
                 "accepted: %s", text);
    cr_expect(strstr(error, expected) != NULL, "\"%s\" lacks \"%s\"", error, expected);
    cr_expect(strchr(error, '\n') == NULL, "one line: %s", error);
    free(hosts);
}

Test(replica_placement, hostfile_lines_comments_and_slots)
{
    struct hostfile *hosts = parse_ok("# the cluster\n\nalpha slots=2\n"
                                      "  beta   # one slot\ngamma slots=3 max_slots=4\n"
                                      "alpha slots=1\n");
    cr_assert_eq(hosts->host_count, 3);
    cr_expect_str_eq(hosts->hosts[0].name, "alpha");
    cr_expect_eq(hosts->hosts[0].slots, 3, "a host named twice adds its slots");
    cr_expect_str_eq(hosts->hosts[1].name, "beta");
    cr_expect_eq(hosts->hosts[1].slots, 1, "no slots= is one slot");
    cr_expect_str_eq(hosts->hosts[2].name, "gamma");
    cr_expect_eq(hosts->hosts[2].slots, 3);
    free(hosts);
}

Test(replica_placement, bad_hostfiles_are_one_line_naming_the_line)
{
    expect_refused("alpha slots=2\nbeta slots=zero\n", "line 2: \"slots=zero\"");
    expect_refused("alpha slots=0\n", "slots=N with N from 1");
    expect_refused("alpha cores=2\n", "line 1: \"cores=2\" is not accepted");
    expect_refused("slots=2\n", "is not a host name");
    expect_refused("# nothing\n\n", "names no host");
}

Test(replica_placement, replicas_fill_the_hosts_in_order)
{
    struct hostfile *hosts = parse_ok("alpha slots=2\nbeta slots=2\ngamma slots=2\n");
    struct replica_placement placement;
    char error[256] = "";
    cr_assert_eq(replica_placement_plan(hosts, 3, &placement, error, sizeof error), 0, "%s",
                 error);
    cr_expect_eq(placement.host_count, 2, "as few hosts as the slots allow");
    cr_expect_eq(replica_placement_is_even(&placement), 0, "2 + 1 replicas");
    static const struct replica_place expected[] = {
        {.rank = 0, .group_rank = 0, .local_rank = 0, .local_world_size = 2, .host = 0},
        {.rank = 1, .group_rank = 0, .local_rank = 1, .local_world_size = 2, .host = 0},
        {.rank = 2, .group_rank = 1, .local_rank = 0, .local_world_size = 1, .host = 1},
    };
    for (uint32_t rank = 0; rank < 3; rank++) {
        struct replica_place place;
        replica_placement_of_rank(&placement, rank, &place);
        cr_expect_eq(memcmp(&place, &expected[rank], sizeof place), 0,
                     "rank %u: group %u local %u of %u on host %u", rank, place.group_rank,
                     place.local_rank, place.local_world_size, place.host);
    }
    cr_assert_eq(replica_placement_plan(hosts, 4, &placement, error, sizeof error), 0);
    cr_expect_eq(replica_placement_is_even(&placement), 1, "2 + 2 replicas");
    free(hosts);
}

Test(replica_placement, more_replicas_than_slots_are_refused)
{
    struct hostfile *hosts = parse_ok("alpha slots=2\nbeta\n");
    struct replica_placement placement;
    char error[256] = "";
    cr_expect_eq(replica_placement_plan(hosts, 4, &placement, error, sizeof error), -1);
    cr_expect(strstr(error, "4 replicas need more than the 3 slots") != NULL, "%s", error);
    cr_expect_eq(replica_placement_plan(hosts, 0, &placement, error, sizeof error), -1);
    free(hosts);
}

Test(replica_placement, without_a_hostfile_every_replica_is_local)
{
    struct hostfile *hosts = malloc(sizeof *hosts);
    hostfile_single_local(hosts, 5);
    struct replica_placement placement;
    char error[256] = "";
    cr_assert_eq(replica_placement_plan(hosts, 5, &placement, error, sizeof error), 0);
    cr_expect_eq(placement.host_count, 1);
    struct replica_place place;
    replica_placement_of_rank(&placement, 4, &place);
    cr_expect_eq(place.local_rank, 4);
    cr_expect_eq(place.local_world_size, 5);
    cr_expect_eq(place.group_rank, 0);
    cr_expect_str_eq(hosts->hosts[0].name, "localhost");
    free(hosts);
}
