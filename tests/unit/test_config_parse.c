/* test_config_parse.c - the readers config.c and config_layout.c share
 * (runtime/config_parse.h), called on their own: the integer readers'
 * messages, and the replica layout and torchrun node count read from a
 * parse state without the rest of the table. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "config.h"
#include "config_parse.h"

#define ENV(...) ((char *const[]){__VA_ARGS__, NULL})

struct parse_fixture {
    struct adaptdl_config config;
    char error[512];
    struct config_parse_state state;
};

static void parse_fixture_init(struct parse_fixture *fixture, char *const *envp)
{
    memset(fixture, 0, sizeof *fixture);
    fixture->config.num_replicas = 1;
    fixture->config.num_nodes = 1;
    fixture->state = (struct config_parse_state){.config = &fixture->config,
                                                 .envp = envp,
                                                 .error = fixture->error,
                                                 .error_size = sizeof fixture->error};
}

Test(config_parse, integer_reader_stores_a_value_in_range)
{
    struct parse_fixture fixture;
    parse_fixture_init(&fixture, ENV("X=1"));
    uint64_t wide = 0;
    uint32_t narrow = 0;
    cr_assert_eq(config_parse_integer_variable(&fixture.state, "NAME", "42", 1, 100, &wide), 0);
    cr_expect_eq(wide, 42);
    cr_assert_eq(config_parse_u32_variable(&fixture.state, "NAME", "4000000000", 0, UINT32_MAX,
                                           &narrow),
                 0);
    cr_expect_eq(narrow, 4000000000u);
    cr_expect_str_eq(fixture.error, "");
}

Test(config_parse, integer_reader_names_the_variable_the_value_and_the_range)
{
    struct parse_fixture fixture;
    parse_fixture_init(&fixture, ENV("X=1"));
    uint64_t wide = 7;
    cr_assert_eq(config_parse_integer_variable(&fixture.state, "NAME", "4x", 1, 10, &wide), -1);
    cr_expect_str_eq(fixture.error, "NAME: \"4x\" is not an unsigned decimal integer; accepted: "
                                    "an integer from 1 to 10");
    cr_assert_eq(config_parse_integer_variable(&fixture.state, "NAME", "11", 1, 10, &wide), -1);
    cr_expect_str_eq(fixture.error,
                     "NAME: \"11\" is out of range; accepted: an integer from 1 to 10");
    uint32_t narrow = 3;
    cr_assert_eq(config_parse_u32_variable(&fixture.state, "SMALL", "0", 1, 5, &narrow), -1);
    cr_expect_str_eq(fixture.error,
                     "SMALL: \"0\" is out of range; accepted: an integer from 1 to 5");
    cr_expect_eq(narrow, 3, "a refused value leaves the field alone");
}

Test(config_parse, replica_layout_prefers_our_variables_then_the_mpi_launchers)
{
    struct parse_fixture fixture;
    parse_fixture_init(&fixture, ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2"));
    cr_assert_eq(config_parse_replica_layout(&fixture.state), 0, "%s", fixture.error);
    cr_expect_eq(fixture.config.num_replicas, 4);
    cr_expect_eq(fixture.config.replica_rank, 2);
    cr_expect(fixture.config.layout_from_mpi);

    parse_fixture_init(&fixture, ENV("ADAPTDL_NUM_REPLICAS=3", "OMPI_COMM_WORLD_SIZE=4",
                                     "WORLD_SIZE=5", "RANK=1"));
    cr_assert_eq(config_parse_replica_layout(&fixture.state), 0, "%s", fixture.error);
    cr_expect_eq(fixture.config.num_replicas, 3);
    cr_expect_eq(fixture.config.replica_rank, 1);
    cr_expect_not(fixture.config.layout_from_mpi, "torchrun's RANK is not an MPI launcher's");
}

Test(config_parse, replica_layout_refuses_a_rank_outside_the_count)
{
    struct parse_fixture fixture;
    parse_fixture_init(&fixture, ENV("ADAPTDL_NUM_REPLICAS=2", "ADAPTDL_REPLICA_RANK=2"));
    cr_assert_eq(config_parse_replica_layout(&fixture.state), -1);
    cr_expect_str_eq(fixture.error, "ADAPTDL_REPLICA_RANK: \"2\" is not below "
                                    "ADAPTDL_NUM_REPLICAS \"2\"; accepted: a rank from 0 to 1");
    parse_fixture_init(&fixture, ENV("PMI_RANK=1"));
    cr_assert_eq(config_parse_replica_layout(&fixture.state), -1);
    cr_expect_str_eq(fixture.error, "PMI_RANK: \"1\" is not below the default replica count 1 "
                                    "(ADAPTDL_NUM_REPLICAS unset); accepted: a rank from 0 to 0");
}

Test(config_parse, torchrun_node_count_is_the_ratio_of_its_sizes)
{
    struct parse_fixture fixture;
    parse_fixture_init(&fixture, ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=4"));
    cr_assert_eq(config_parse_torchrun_node_count(&fixture.state), 0, "%s", fixture.error);
    cr_expect_eq(fixture.config.num_nodes, 2);

    parse_fixture_init(&fixture, ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=4",
                                     "ADAPTDL_NUM_NODES=3"));
    cr_assert_eq(config_parse_torchrun_node_count(&fixture.state), 0);
    cr_expect_eq(fixture.config.num_nodes, 1, "ADAPTDL_NUM_NODES is the table's to read");

    parse_fixture_init(&fixture, ENV("WORLD_SIZE=8"));
    cr_assert_eq(config_parse_torchrun_node_count(&fixture.state), 0);
    cr_expect_eq(fixture.config.num_nodes, 1, "both sizes are needed");
}

Test(config_parse, torchrun_node_count_refuses_a_size_that_does_not_divide)
{
    struct parse_fixture fixture;
    parse_fixture_init(&fixture, ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=3"));
    cr_assert_eq(config_parse_torchrun_node_count(&fixture.state), -1);
    cr_expect_str_eq(fixture.error,
                     "LOCAL_WORLD_SIZE: \"3\" does not divide WORLD_SIZE \"8\"; accepted: the "
                     "processes per node, a divisor of WORLD_SIZE (or set ADAPTDL_NUM_NODES)");
    parse_fixture_init(&fixture, ENV("WORLD_SIZE=8", "LOCAL_WORLD_SIZE=0"));
    cr_assert_eq(config_parse_torchrun_node_count(&fixture.state), -1);
    cr_expect_not_null(strstr(fixture.error, "LOCAL_WORLD_SIZE: \"0\""), "%s", fixture.error);
    cr_expect_eq(fixture.config.num_nodes, 1);
}
