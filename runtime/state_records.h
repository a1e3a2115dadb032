/* state_records.h - the shim's two kinds of persistent state as
 * structures, and their memory encoding: bound snapshots (data positions
 * tied to one trainer checkpoint) and the job record (statistics and
 * decisions, not tied to any checkpoint).
 *
 * Both are msgpack maps carrying a format-version field.  Encoding and
 * decoding are pure functions on memory buffers (state_schema.c,
 * state_encode.c, state_decode.c); decoding returns either a complete
 * structure or an error, never a half-filled one.
 *
 * Who includes it: anything that holds a snapshot or a job record.  It is
 * the bottom of the state store: it includes only content_hash.h, and the
 * codec (state_schema.h), the range checks (snapshot_check.h) and the files
 * (state_store.h) include it, never the other way round. */
#ifndef ADAPTSHIM_STATE_RECORDS_H
#define ADAPTSHIM_STATE_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "content_hash.h"

#define STATE_FORMAT_VERSION 1u

/* Every encoded state ends with the map entry "checksum": uint64, always in
 * its 18-byte form (0xa8 "checksum" 0xcf + 8 big-endian bytes).  The value is
 * content_hash_bytes(every byte before that entry, STATE_CHECKSUM_SEED). */
#define STATE_CHECKSUM_TRAILER_SIZE 18u
#define STATE_CHECKSUM_SEED UINT64_C(0x61646170742d7374) /* "adapt-st" */

/* Position of one data file inside a snapshot. */
struct snapshot_file_position {
    char *name;              /* basename of the data file */
    uint64_t record_count;   /* N of the physical file, checked at restore */
    uint64_t pass;           /* bound pass number */
    uint64_t current_index;  /* 0..pass_length within that pass */
    uint64_t pass_length;    /* M of that pass: N, or a statistical epoch's length */
    uint32_t role;           /* enum data_role */
    /* A reader in its own order (one that consumes a pass's
     * records out of sequence): bit i of byte b says index
     * current_index + 8b + i of the pass was consumed too (bit 0 never);
     * empty for readers in order.  Optional in the file: snapshots of
     * earlier builds have none. */
    unsigned char *delivered_after;
    size_t delivered_after_size;
};

/* The cooperative API's state (shim/adaptdl.h), part of a bound snapshot. */
struct snapshot_value {
    char *key;
    double value;
};

/* The results one synchronization outside any loop produced in `epoch`
 * (-1: outside every epoch loop), replayed after a restart. */
struct snapshot_result_set {
    int64_t epoch;
    size_t value_count;
    struct snapshot_value *values;
};

struct snapshot_accumulator {
    char *name;                      /* adaptdl-accumulator-epoch{e}-{k} */
    size_t value_count;              /* the results */
    struct snapshot_value *values;
    size_t history_count;            /* in the order they were produced */
    struct snapshot_result_set *history;
};

struct snapshot_loop_position {
    int64_t epoch;
    int64_t position;                /* of the last loop this one finished in it */
};

struct snapshot_loop {
    char *name;                      /* adaptdl-dataloader-epoch{e}-{k} */
    uint64_t current_index;          /* records of every replica done in the loop */
    uint64_t end_index;
    size_t position_count;
    struct snapshot_loop_position *last_positions;
};

struct snapshot_named_bytes {
    char *name;
    size_t size;
    unsigned char *bytes;
};

struct adaptdl_snapshot {
    uint32_t version;
    uint64_t seed;
    uint64_t epoch;
    uint32_t replicas;               /* K when it was taken */
    uint64_t sequence;               /* commit counter, increasing within a job */
    double created_unix_time;
    char *checkpoint_path;           /* trainer checkpoint it is bound to */
    struct content_identity binding;
    size_t file_count;
    struct snapshot_file_position *files;
    /* the cooperative API (shim/adaptdl.h); empty for a transparent trainer */
    bool cooperative;                /* the trainer used it: finished_epochs is meaningful */
    uint64_t finished_epochs;
    double cooperative_progress;     /* statistical progress of adaptive loops */
    size_t loop_count;
    struct snapshot_loop *loops;
    size_t accumulator_count;
    struct snapshot_accumulator *accumulators;
    size_t registered_count;
    struct snapshot_named_bytes *registered;
    /* statistical-epoch state (the steps and the progress counted so
     * far), zero when adaptation is off */
    uint64_t step;
    double progress;
    uint64_t global_bsz;             /* the global batch of the committing run */
};

/* One step-time profile bucket, as AdaptDL's _metrics profile. */
struct step_profile {
    uint32_t nodes;
    uint32_t replicas;
    uint64_t local_bsz;
    uint64_t count;
    double step_time_sum;    /* seconds, whole steps */
    double sync_time_sum;    /* seconds inside gradient all-reduces */
};

struct adaptdl_job_record {
    uint32_t version;
    uint32_t restarts;
    double last_exit_unix_time;      /* 0: never exited yet */
    double restart_cost_seconds;     /* < 0: not measured yet */
    /* gradient statistics (exponential averages with bias correction) */
    double grad_sqr;
    double grad_var;                 /* per sample */
    double grad_sqr_biased;
    double grad_var_biased;
    double grad_ema_weight;          /* bias-correction accumulator */
    /* for the confidence of the estimates (grad_noise_standard_errors) */
    double grad_sqr_square_biased;
    double grad_var_square_biased;
    double grad_weight_square_sum;
    uint32_t max_replicas_profiled;
    size_t profile_count;
    struct step_profile *profiles;
    /* batch-size decision */
    uint64_t initial_global_bsz;     /* 0: not known yet */
    uint64_t decided_global_bsz;     /* 0: no decision yet */
    uint64_t decided_local_bsz;
    uint32_t decided_replicas;
    uint64_t previous_global_bsz;    /* the global batch before the last change; 0: none */
    bool perf_params_valid;
    double perf_params[7];           /* alpha_c beta_c alpha_n beta_n alpha_r beta_r gamma */
};

/* --- memory encoding ---------------------------------------------------- */
/* Encoders return a malloc'd buffer in *data (caller frees) or -1. */
int snapshot_encode(const struct adaptdl_snapshot *snapshot, void **data, size_t *size);
int snapshot_decode(const void *data, size_t size, struct adaptdl_snapshot *snapshot,
                    char *error, size_t error_size);
void snapshot_free(struct adaptdl_snapshot *snapshot);

int job_record_encode(const struct adaptdl_job_record *record, void **data, size_t *size);
int job_record_decode(const void *data, size_t size, struct adaptdl_job_record *record,
                      char *error, size_t error_size);
void job_record_free(struct adaptdl_job_record *record);
void job_record_init(struct adaptdl_job_record *record);

#endif
