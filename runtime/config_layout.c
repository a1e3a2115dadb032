/* config_layout.c - where this process stands in the job: the
 * replica count and rank, from adaptshim's variables or the launcher's
 * (Open MPI, PMI, Slurm's srun, torchrun), the node count srun or torchrun
 * implies, and that there are no more nodes than replicas.  Read after config.c's table,
 * with its readers and messages. */
#include "config.h"
#include "config_parse.h"
#include "config_text.h"
#include "error_message.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define COUNT_OF CONFIG_COUNT_OF

/* Where one number of the replica layout comes from, best source first:
 * our own variables, then the MPI launchers', then torchrun's, then
 * Slurm's srun.  Each number is resolved on its own: the wrapper may export
 * ADAPTDL_NUM_REPLICAS for all ranks while mpirun gives each its rank.
 * Only Open MPI's, PMI's and PMIx's variables say that MPI started the
 * process: torchrun and srun --mpi=none start plain processes, and such a
 * job must not be taken for an MPI one.
 *
 * Slurm's SLURM_NTASKS and SLURM_PROCID are also in a batch script's
 * environment (the job's task count, and 0), and so in every process the
 * script starts, mpirun's ranks included: they describe a process only
 * inside a task of an srun step, which SLURM_STEP_ID marks.  The step's own
 * task count (SLURM_STEP_NUM_TASKS) comes before the job's, since `srun -n 2`
 * in an allocation of 4 tasks starts 2 replicas.  torchrun's come before
 * them: `srun -N 2 torchrun --nproc-per-node 4` is a common recipe, and its
 * processes carry the srun task's variables and torchrun's, of which only
 * torchrun's describe them. */
struct layout_source {
    const char *name;
    bool set_by_mpi_launcher;
    bool only_in_slurm_step;
};
static const struct layout_source replica_count_sources[] = {
    {"ADAPTDL_NUM_REPLICAS", false, false},
    {"OMPI_COMM_WORLD_SIZE", true, false},
    {"PMI_SIZE", true, false},
    {"WORLD_SIZE", false, false},
    {"SLURM_STEP_NUM_TASKS", false, true},
    {"SLURM_NTASKS", false, true},
};
static const struct layout_source replica_rank_sources[] = {
    {"ADAPTDL_REPLICA_RANK", false, false},
    {"OMPI_COMM_WORLD_RANK", true, false},
    {"PMI_RANK", true, false},
    {"PMIX_RANK", true, false},
    {"RANK", false, false},
    {"SLURM_PROCID", false, true},
};

/* Whether this process is a task of an srun step (not the batch script, nor
 * a process it started some other way). */
static bool in_slurm_step(const struct config_parse_state *state)
{
    return config_lookup(state->envp, "SLURM_STEP_ID") != NULL;
}

/* The first variable of sources that is set: the one the number came
 * from (NULL: none, the number kept its default). */
static const struct layout_source *find_layout_source(const struct config_parse_state *state,
                                                      const struct layout_source sources[],
                                                      size_t source_count)
{
    for (size_t i = 0; i < source_count; i++) {
        if (sources[i].only_in_slurm_step && !in_slurm_step(state))
            continue;
        if (config_lookup(state->envp, sources[i].name) != NULL)
            return &sources[i];
    }
    return NULL;
}

/* Reads the first variable of sources that is set; *source stays NULL (and
 * *out untouched) when none is. */
static int resolve_layout_number(struct config_parse_state *state,
                                 const struct layout_source sources[], size_t source_count,
                                 uint64_t minimum, uint64_t maximum, uint32_t *out,
                                 const struct layout_source **source)
{
    *source = find_layout_source(state, sources, source_count);
    if (*source == NULL)
        return 0;
    return config_parse_u32_variable(state, (*source)->name,
                                     config_lookup(state->envp, (*source)->name), minimum,
                                     maximum, out);
}

/* "ADAPTDL_NUM_REPLICAS \"4\"", or what the default count is, for messages
 * that compare another number with the replica count. */
static const char *describe_replica_count(const struct adaptdl_config *config,
                                          const struct layout_source *count_source, char *out,
                                          size_t out_size)
{
    if (count_source != NULL)
        snprintf(out, out_size, "%s \"%" PRIu32 "\"", count_source->name, config->num_replicas);
    else
        snprintf(out, out_size, "the default replica count 1 (ADAPTDL_NUM_REPLICAS unset)");
    return out;
}

static bool layout_source_is_mpi(const struct layout_source *source)
{
    return source != NULL && source->set_by_mpi_launcher;
}

static int check_rank_below_count(struct config_parse_state *state,
                                  const struct layout_source *count_source,
                                  const struct layout_source *rank_source)
{
    const struct adaptdl_config *config = state->config;
    char count_text[96];

    if (config->replica_rank < config->num_replicas)
        return 0;
    /* The default rank 0 is below any count, so a rank variable is set. */
    return error_message(state->error, state->error_size,
                        "%s: \"%" PRIu32 "\" is not below %s; accepted: a rank from 0 to %" PRIu32,
                        rank_source->name, config->replica_rank,
                        describe_replica_count(config, count_source, count_text,
                                               sizeof count_text),
                        config->num_replicas - 1);
}

int config_parse_replica_layout(struct config_parse_state *state)
{
    struct adaptdl_config *config = state->config;
    const struct layout_source *count_source, *rank_source;

    if (resolve_layout_number(state, replica_count_sources, COUNT_OF(replica_count_sources), 1,
                              REPLICA_LIMIT, &config->num_replicas, &count_source) < 0 ||
        resolve_layout_number(state, replica_rank_sources, COUNT_OF(replica_rank_sources), 0,
                              REPLICA_LIMIT - 1, &config->replica_rank, &rank_source) < 0)
        return -1;
    config->layout_from_mpi =
        layout_source_is_mpi(count_source) || layout_source_is_mpi(rank_source);
    config->replica_count_given = count_source != NULL;
    config->replica_rank_given = rank_source != NULL;
    return check_rank_below_count(state, count_source, rank_source);
}

/* Open MPI's launcher tells each rank how many nodes the job's ranks were
 * mapped to (OMPI_MCA_orte_num_nodes, Open MPI 4): the hosts in use, which
 * only the mapping knows (mpirun fills a host's slots before the next one
 * by default, so 2 ranks on a hostfile of 2 hosts x 2 slots use 1 host).
 * Used when ADAPTDL_NUM_NODES is not set and the process is an Open MPI
 * rank; a value that is not a count from 1 to the ranks is not Open MPI's
 * and is passed over. */
int config_parse_open_mpi_node_count(struct config_parse_state *state)
{
    const char *nodes_text = config_lookup(state->envp, "OMPI_MCA_orte_num_nodes");
    uint64_t nodes;

    if (config_lookup(state->envp, "ADAPTDL_NUM_NODES") != NULL || nodes_text == NULL ||
        config_lookup(state->envp, "OMPI_COMM_WORLD_SIZE") == NULL)
        return 0;
    if (config_parse_decimal(nodes_text, 1, REPLICA_LIMIT, &nodes) != NUMBER_OK ||
        nodes > state->config->num_replicas)
        return 0;
    state->config->num_nodes = (uint32_t)nodes;
    return 0;
}

/* torchrun exports WORLD_SIZE (processes in the job) and LOCAL_WORLD_SIZE
 * (processes on this node, the same on every node): their ratio is the node
 * count, used when ADAPTDL_NUM_NODES is not set.  Both must be set; a
 * LOCAL_WORLD_SIZE that does not divide WORLD_SIZE is refused rather than
 * rounded, since the node count feeds the throughput model (§7). */
int config_parse_torchrun_node_count(struct config_parse_state *state)
{
    const char *world_text = config_lookup(state->envp, "WORLD_SIZE");
    const char *local_text = config_lookup(state->envp, "LOCAL_WORLD_SIZE");
    char world_quoted[QUOTED_SIZE], local_quoted[QUOTED_SIZE];
    uint64_t world, local;

    if (config_lookup(state->envp, "ADAPTDL_NUM_NODES") != NULL || world_text == NULL ||
        local_text == NULL)
        return 0;
    if (config_parse_integer_variable(state, "WORLD_SIZE", world_text, 1, REPLICA_LIMIT,
                                      &world) < 0)
        return -1;
    config_quote_for_message(world_quoted, sizeof world_quoted, world_text, strlen(world_text));
    config_quote_for_message(local_quoted, sizeof local_quoted, local_text, strlen(local_text));
    const char *problem =
        config_describe_number_problem(config_parse_decimal(local_text, 1, REPLICA_LIMIT, &local), 1);
    if (problem != NULL)
        return error_message(state->error, state->error_size,
                            "LOCAL_WORLD_SIZE: \"%s\" %s; accepted: the processes per node, a "
                            "divisor of WORLD_SIZE \"%s\" (or set ADAPTDL_NUM_NODES)",
                            local_quoted, problem, world_quoted);
    if (world % local != 0)
        return error_message(state->error, state->error_size,
                            "LOCAL_WORLD_SIZE: \"%s\" does not divide WORLD_SIZE \"%s\"; "
                            "accepted: the processes per node, a divisor of WORLD_SIZE (or set "
                            "ADAPTDL_NUM_NODES)",
                            local_quoted, world_quoted);
    state->config->num_nodes = (uint32_t)(world / local);
    return 0;
}

/* A replica count srun gave (the processes are the tasks of an srun step)
 * comes with srun's node count: SLURM_STEP_NUM_NODES, else the job's
 * SLURM_NNODES, used when ADAPTDL_NUM_NODES is not set.  A count from
 * another source (the wrapper's ADAPTDL_NUM_REPLICAS for one trainer
 * started by a task, torchrun's processes inside a task) says nothing of
 * how srun spread its tasks, so the node count is left alone then. */
int config_parse_slurm_node_count(struct config_parse_state *state)
{
    static const char *const node_count_names[] = {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"};
    const struct layout_source *count_source;
    uint64_t nodes;

    if (config_lookup(state->envp, "ADAPTDL_NUM_NODES") != NULL)
        return 0;
    count_source = find_layout_source(state, replica_count_sources,
                                      COUNT_OF(replica_count_sources));
    if (count_source == NULL || !count_source->only_in_slurm_step)
        return 0;
    for (size_t i = 0; i < COUNT_OF(node_count_names); i++) {
        const char *text = config_lookup(state->envp, node_count_names[i]);
        if (text == NULL)
            continue;
        if (config_parse_integer_variable(state, node_count_names[i], text, 1, REPLICA_LIMIT,
                                          &nodes) < 0)
            return -1;
        state->config->num_nodes = (uint32_t)nodes;
        return 0;
    }
    return 0;
}

/* Every node runs at least one replica, so more nodes than replicas is a
 * launch that does not exist: the throughput model (§7) would be fitted to
 * a layout the job never had.  The node count comes from ADAPTDL_NUM_NODES,
 * else from torchrun's sizes (config_parse_torchrun_node_count) or srun's
 * (config_parse_slurm_node_count), and the message names whichever set it. */
int config_check_node_count(struct config_parse_state *state)
{
    const struct adaptdl_config *config = state->config;
    const struct layout_source *count_source;
    char count_text[96];

    if (config->num_nodes <= config->num_replicas)
        return 0;
    count_source = find_layout_source(state, replica_count_sources,
                                      COUNT_OF(replica_count_sources));
    describe_replica_count(config, count_source, count_text, sizeof count_text);
    if (config_lookup(state->envp, "ADAPTDL_NUM_NODES") != NULL)
        return error_message(state->error, state->error_size,
                             "ADAPTDL_NUM_NODES: \"%" PRIu32 "\" is above %s; accepted: a node "
                             "count from 1 to %" PRIu32 ", since every node runs at least one "
                             "replica",
                             config->num_nodes, count_text, config->num_replicas);
    if (count_source != NULL && count_source->only_in_slurm_step)
        return error_message(state->error, state->error_size,
                             "SLURM_STEP_NUM_NODES: %" PRIu32 " nodes, above %s; accepted: at "
                             "most %" PRIu32 " nodes, since every node runs at least one "
                             "replica (or set ADAPTDL_NUM_NODES)",
                             config->num_nodes, count_text, config->num_replicas);
    return error_message(state->error, state->error_size,
                         "LOCAL_WORLD_SIZE: WORLD_SIZE / LOCAL_WORLD_SIZE make %" PRIu32
                         " nodes, above %s; accepted: at most %" PRIu32 " nodes, since every "
                         "node runs at least one replica (or set ADAPTDL_NUM_NODES)",
                         config->num_nodes, count_text, config->num_replicas);
}
