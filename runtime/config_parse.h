/* config_parse.h - what the readers of the ADAPTDL_* environment share
 * (config.c, config_layout.c): the state of one parse, and the integer
 * readers whose one-line messages every variable uses.
 *
 * Who includes it: config.c, config_layout.c and their tests.  It does
 * not include config.h (config.c includes this header): the configuration
 * is only pointed to here, and its users include config.h themselves. */
#ifndef ADAPTSHIM_CONFIG_PARSE_H
#define ADAPTSHIM_CONFIG_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* The configuration being filled (config.h); only pointed to here. */
struct adaptdl_config;

/* The most replicas (and nodes) a job may have. */
#define REPLICA_LIMIT ((uint64_t)1 << 20)

struct config_parse_state {
    struct adaptdl_config *config;
    char *const *envp;
    char *error;        /* the first problem, one line */
    size_t error_size;
};

/* value as an unsigned decimal in [minimum, maximum]; -1 with the message
 * "NAME: \"value\" ...; accepted: an integer from MIN to MAX". */
int config_parse_integer_variable(struct config_parse_state *state, const char *name,
                                  const char *value, uint64_t minimum, uint64_t maximum,
                                  uint64_t *out);
/* The same for 32-bit fields; maximum must fit in uint32_t. */
int config_parse_u32_variable(struct config_parse_state *state, const char *name,
                              const char *value, uint64_t minimum, uint64_t maximum,
                              uint32_t *out);

/* ADAPTDL_NUM_REPLICAS and ADAPTDL_REPLICA_RANK, or the launcher's
 * variables for them (config_layout.c). */
int config_parse_replica_layout(struct config_parse_state *state);
/* The node count Open MPI's launcher mapped the ranks to, when
 * ADAPTDL_NUM_NODES is not set. */
int config_parse_open_mpi_node_count(struct config_parse_state *state);
/* The node count torchrun implies, when ADAPTDL_NUM_NODES is not set. */
int config_parse_torchrun_node_count(struct config_parse_state *state);
/* The node count of the tasks of an srun step (SLURM_STEP_NUM_NODES). */
int config_parse_slurm_node_count(struct config_parse_state *state);
/* Refuses a node count above the replica count, once both are read. */
int config_check_node_count(struct config_parse_state *state);

#endif
