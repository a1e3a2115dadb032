/* config.h - the ADAPTDL_* environment contract (every variable the shim
 * reads, with its accepted values and defaults) as one struct.
 *
 * Parsing is pure: it reads variables through a lookup over an envp-style
 * array, so tests can feed any environment without touching the process's
 * own.  Every malformed value yields a one-line message naming the variable,
 * the bad value and the accepted forms. */
#ifndef ADAPTSHIM_CONFIG_H
#define ADAPTSHIM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN = 1,
    LOG_LEVEL_INFO = 2,
    LOG_LEVEL_DEBUG = 3,
    LOG_LEVEL_TRACE = 4,
};

enum resume_mode { RESUME_REPLAY = 0, RESUME_CONTINUE = 1 };
enum data_role { DATA_ROLE_TRAIN = 0, DATA_ROLE_EVAL = 1 };
enum tail_policy { TAIL_ERROR = 0, TAIL_DROP = 1 };

enum count_field_type {
    COUNT_FIELD_U32LE = 0,
    COUNT_FIELD_U32BE,
    COUNT_FIELD_I32LE,
    COUNT_FIELD_U64LE,
    COUNT_FIELD_U64BE,
};

/* One `GLOB[:key=value...]` entry of ADAPTDL_DATA. */
struct data_entry {
    char *glob;              /* unescaped: `\:` and `\;` already turned into `:` `;` */
    uint64_t record_size;    /* 0 when `lines` */
    bool lines;
    uint64_t header_size;
    enum data_role role;
    bool shuffle;
    bool shard;
    enum tail_policy tail;
    uint64_t lookahead;
    /* resume=whole-pass: a pass interrupted by a restart is served whole
     * again after the restore (for loaders that take a file's size once) */
    bool resume_whole_pass;
    bool has_count_field;
    uint64_t count_offset;
    enum count_field_type count_type;
    uint64_t count_unit;
};

/* Where a batch size or learning rate is injected (ADAPTDL_BSZ_ARG, _LR_ARG). */
enum injection_kind { INJECT_NONE = 0, INJECT_ARGV, INJECT_ENV };
struct injection_target {
    enum injection_kind kind;
    char *name;              /* "--batch-size", "-b", "BATCH_SIZE" */
};

enum lr_rule { LR_RULE_NONE = 0, LR_RULE_LINEAR, LR_RULE_SQRT, LR_RULE_ADASCALE };

struct adaptdl_config {
    struct data_entry *data;
    size_t data_count;

    char *checkpoint_path;   /* NULL: no snapshots, no restore */
    char *save_glob;         /* NULL: no checkpoint binding */
    enum resume_mode resume;
    uint64_t seed;

    uint32_t num_replicas;
    uint32_t replica_rank;
    uint32_t num_nodes;
    bool layout_from_mpi;    /* taken from OMPI_, PMI_ or PMIX_ variables
                              * (never torchrun's WORLD_SIZE/RANK nor srun's
                              * SLURM_*: not necessarily MPI) */
    /* a variable (ours or a launcher's) gave the count, the rank: else
     * they are the defaults 1 and 0, which MPI's world replaces for the
     * cooperative API once MPI is up */
    bool replica_count_given;
    bool replica_rank_given;
    uint32_t num_restarts;

    enum log_level log_level;
    char *log_file;          /* NULL: stderr; may hold %r and %p */
    bool disabled;
    char *target;            /* NULL: every process */

    uint64_t grad_min;       /* ADAPTDL_GRAD_MIN, or 1024 */
    bool grad_min_given;     /* set by the user: no automatic gradient sizes */
    double drain_seconds;
    double stop_seconds;     /* longest wait of a stop signal for an agreement point */
    char *metrics_file;
    char *hints_file;
    char *trace_file;        /* ADAPTDL_TRACE_FILE: NULL, no delivery trace */
    uint64_t trace_stop_after; /* ADAPTDL_TRACE_STOP_AFTER: 0, never stop */

    uint64_t batch_size;          /* 0: unset */
    uint64_t max_batch_size;      /* 0: unset, no adaptation */
    uint64_t local_bsz_min;       /* 0: unset */
    uint64_t local_bsz_max;       /* 0: unset */
    struct injection_target bsz_arg;
    struct injection_target lr_arg;
    enum lr_rule lr_rule;
    double speedup_threshold;     /* default 1.05 */
    double decide_seconds;        /* default 30 */
    bool decide_seconds_given;    /* set explicitly: a fixed period, from the start */
    double payback_seconds;       /* default 600 */

    /* ADAPTDL_REPLICAS_RANGE (set by adaptdl-wrap -n MIN:MAX): the replica
     * counts the launcher may relaunch with; rank 0 requests a restart when
     * another of them pays (adaptdl-wrap(1) "The replica count").  0/0: unset. */
    uint32_t replicas_min;
    uint32_t replicas_max;
};

/* Parses the configuration from an envp-style NULL-terminated array.
 * Returns 0 and fills *config, or -1 with a one-line message in error
 * (never a partially filled config: on failure *config is left freed).
 * With ADAPTDL_DISABLE=1 nothing else is read: the result is the defaults
 * with disabled set, so a broken variable cannot stop a disabled shim. */
int config_parse(struct adaptdl_config *config, char *const *envp,
                 char *error, size_t error_size);

/* Parses only ADAPTDL_DATA's grammar (exposed for tests and for tools). */
int config_parse_data(const char *value, struct data_entry **entries,
                      size_t *entry_count, char *error, size_t error_size);
/* Frees what config_parse_data returned. */
void config_free_data_entries(struct data_entry *entries, size_t count);

void config_free(struct adaptdl_config *config);

/* Looks a variable up in an envp-style array; NULL when absent. */
const char *config_lookup(char *const *envp, const char *name);

/* True when any ADAPTDL_* variable is present: processes without one are
 * left exactly as they are. */
bool config_any_adaptdl_variable(char *const *envp);

/* Unknown variables (config_typos.c).  Whether `name` (name_length bytes,
 * no "=value") is an ADAPTDL_* variable the shim reads or one its
 * launcher sets. */
bool config_is_known_variable(const char *name, size_t name_length);
/* The known variable nearest to `name` by edit distance (a transposition
 * counts as one edit); ties go to the one listed first. */
const char *config_closest_variable(const char *name, size_t name_length);
/* Walks envp from *cursor (start at 0) to the next ADAPTDL_* variable that
 * is not known (a typo: warned about, never refused): true with a one-line warning in message
 * naming it and the closest known variable, *cursor moved past it; false
 * when there is none left. */
bool config_next_unknown_variable(char *const *envp, size_t *cursor, char *message,
                                  size_t message_size);

const char *log_level_name(enum log_level level);

#endif
