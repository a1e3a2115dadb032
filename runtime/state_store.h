/* state_store.h - the shim's two kinds of persistent state (SPEC §5):
 * bound snapshots (data positions tied to one trainer checkpoint) and the
 * job record (statistics and decisions, not tied to any checkpoint).
 *
 * Both are msgpack maps carrying a format-version field.  Encoding and
 * decoding are pure functions on memory buffers; saving is atomic (temp file,
 * fsync, rename, fsync of the directory) and loading validates everything,
 * returning either a complete structure or an error, never a half-filled one. */
#ifndef ADAPTSHIM_STATE_STORE_H
#define ADAPTSHIM_STATE_STORE_H

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
    /* A reader in its own order (SPEC §4.1): bit i of byte b says index
     * current_index + 8b + i of the pass was consumed too (bit 0 never);
     * empty for readers in order.  Optional in the file: snapshots of
     * earlier builds have none. */
    unsigned char *delivered_after;
    size_t delivered_after_size;
};

/* The cooperative API's state (SPEC §11), part of a bound snapshot. */
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
    /* the cooperative API (SPEC §11); empty for a transparent trainer */
    bool cooperative;                /* the trainer used it: finished_epochs is meaningful */
    uint64_t finished_epochs;
    double cooperative_progress;     /* statistical progress of adaptive loops */
    size_t loop_count;
    struct snapshot_loop *loops;
    size_t accumulator_count;
    struct snapshot_accumulator *accumulators;
    size_t registered_count;
    struct snapshot_named_bytes *registered;
    /* statistical-epoch state (SPEC §7), zero when adaptation is off */
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

/* --- files ---------------------------------------------------------------- */
/* Creates the state directory if its parent exists, proves it writable and
 * removes the leftovers of killed writers (state_directory_remove_leftovers).
 * -1 with a message. */
int state_directory_prepare(const char *directory, char *error, size_t error_size);

/* Temp files and writability probes younger than this may belong to a write
 * in flight (on any host sharing the directory); older ones are leftovers of
 * a writer that was killed between creating and renaming them. */
#define STATE_LEFTOVER_GRACE_SECONDS 600.0

/* Removes the temp files (".NAME.tmp.PID.N") and probes (".adaptshim-probe.PID.N")
 * of this module's writers whose modification time is older than the grace
 * period at `now` (Unix seconds); nothing else in the directory is touched.
 * Returns how many were removed, or -1 with a message when the directory
 * cannot be listed. */
int state_directory_remove_leftovers(const char *directory, double now, char *error,
                                     size_t error_size);

/* Atomic write of `name` inside `directory`: temp file, fsync, rename, fsync
 * of the directory.  The previous file stays intact until the rename. */
int state_file_write_atomic(const char *directory, const char *name, const void *data,
                            size_t size, char *error, size_t error_size);
/* Reads a whole file; *data is malloc'd.  -1 with a message (ENOENT kept in errno). */
int state_file_read(const char *directory, const char *name, void **data, size_t *size,
                    char *error, size_t error_size);

/* File name of the snapshot bound to an identity ("snapshot-<size>-<hash>.msgpack").
 * Any replica that loads the same checkpoint content finds the same name. */
void snapshot_file_name(const struct content_identity *binding, char *name, size_t name_size);
#define JOB_RECORD_FILE_NAME "job.msgpack"

int snapshot_save(const char *directory, const struct adaptdl_snapshot *snapshot,
                  char *error, size_t error_size);
/* 0: found, decoded and in range (snapshot_check.h); 1: no snapshot bound
 * to that identity; -1: error (corrupt, truncated, wrong version, a value
 * out of range...) with a message. */
int snapshot_load_bound(const char *directory, const struct content_identity *binding,
                        struct adaptdl_snapshot *snapshot, char *error, size_t error_size);
int job_record_save(const char *directory, const struct adaptdl_job_record *record,
                    char *error, size_t error_size);
/* 0: loaded; 1: no job record yet (record initialised); -1: error (record
 * initialised too, so a caller that only warns can carry on with it). */
int job_record_load(const char *directory, struct adaptdl_job_record *record,
                    char *error, size_t error_size);

/* The most recently created decodable snapshot in the directory (for
 * messages).  0 found, 1 none, -1 error with a message. */
int snapshot_load_latest(const char *directory, struct adaptdl_snapshot *snapshot,
                         char *error, size_t error_size);

/* Snapshots younger than this are never pruned (see snapshot_prune). */
#define SNAPSHOT_PRUNE_GRACE_SECONDS 30.0

/* Deletes snapshots other than `keep`, older than the grace period, whose
 * bound content no longer exists in any file that could resume: the
 * checkpoint paths named by the snapshots in the directory and, when
 * save_glob (ADAPTDL_SAVE) is given, every file matching it in the
 * directories of those paths and in the glob's own directory (a copy such as
 * ck.bak, a checkpoint another replica keeps).  Returns the number deleted,
 * or -1.  Undecodable snapshot files are left alone, and so is any snapshot
 * with a higher sequence than keep's (its commit may still be in flight).
 * keep may be NULL (keep nothing in particular), save_glob too.  Leftovers
 * of killed writers are removed on the way (state_directory_remove_leftovers). */
int snapshot_prune(const char *directory, const struct content_identity *keep,
                   const char *save_glob, char *error, size_t error_size);

#endif
