/* session.h - the runtime's state for one process: configuration, data
 * files, and the binding of snapshots to the trainer's checkpoints (adaptshim(7) "CHECKPOINT
 * BINDING").
 *
 * The shim owns one session and calls into it from its wrappers; tests build
 * sessions of their own. */
#ifndef ADAPTSHIM_SESSION_H
#define ADAPTSHIM_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "cooperative_state.h"
#include "dataset_registry.h"
#include "state_store.h"
#include "statistical_epoch.h"

/* Steps the trainer has finished that the step counter has not counted yet
 * (their agreed sums are still in flight), and their records on all
 * replicas: a checkpoint committed now includes them. */
typedef void (*uncounted_steps_fn)(uint64_t *steps, uint64_t *records);

struct runtime_session {
    struct adaptdl_config config;
    struct dataset_registry registry;
    bool restore_attempted;          /* the first checkpoint read-open happened
                                      * (test-and-set atomically) */
    uint64_t commit_sequence;
    bool warned_no_checkpoint_path;
    uint64_t snapshots_written;
    /* progress and step counter: data positions bound with the files' */
    struct statistical_epochs epochs;
    uncounted_steps_fn uncounted_steps;  /* NULL: every finished step is counted */
    /* the cooperative API's epochs, loops, accumulators and registered state */
    struct cooperative_state cooperative;
    /* relative globs made absolute against the working directory at
     * start-up (session_anchor_relative_globs); NULL for absolute ones */
    char **data_anchored_globs;      /* one per config.data entry */
    char *save_anchored_glob;
    /* which globs a path opened, stat'ed or renamed onto has matched
     * (atomic; NULL before session_prepare_globs) */
    bool *data_entry_matched;        /* one per config.data entry */
    /* which entries were named as matching a path an earlier entry took
     * (atomic; NULL before session_prepare_globs: nothing is said) */
    bool *data_entry_overlap_warned; /* one per config.data entry */
    bool save_matched;
    bool warned_unmatched_data;
    /* called once, at the first path any glob matches: from then on the
     * library serves this process (NULL: nobody to tell) */
    void (*serving_begins)(void);
    bool serving;
};

void session_init(struct runtime_session *session);

/* A relative ADAPTDL_DATA or ADAPTDL_SAVE glob matches relative paths as
 * the trainer passes them; `data.bin` does not match `./data.bin`, nor
 * `ck0` the trainer's `$PWD/ck0`, and nothing would say so.  So each
 * relative glob is also made absolute against `cwd`, the working
 * directory at start-up, and matched against the absolute form of the
 * path (lexically normalized, as path_normalize_absolute makes it).  -1
 * with errno when memory or a path's length runs out (the globs then match
 * as written). */
int session_prepare_globs(struct runtime_session *session, const char *cwd);

/* As adaptshim(7) "ENVIRONMENT" says, a setting never silently matches nothing: one line naming
 * the train entries of ADAPTDL_DATA that no path has matched (at the first
 * checkpoint commit: the trainer checkpoints without having read that data
 * through the shim; `with_data`), and ADAPTDL_SAVE when no path matched
 * it (`with_save`: at the exit of a process that read train records).
 * False when every one asked about matched. */
bool session_describe_unmatched_globs(struct runtime_session *session, bool with_data,
                                      bool with_save, char *message, size_t message_size);

/* The ADAPTDL_DATA entry whose glob matches the path as passed or its
 * absolute form (or whose anchored glob matches the absolute form); NULL
 * when none.  The first such entry applies; a later one that matches too
 * is named in one warn line (once per entry, after session_prepare_globs). */
const struct data_entry *session_match_data(struct runtime_session *session,
                                            const char *path, const char *absolute_path);
bool session_match_save(struct runtime_session *session, const char *path,
                        const char *absolute_path);

/* True once any train view delivered a payload byte in this run. */
bool session_train_record_delivered(struct runtime_session *session);

/* The file a descriptor refers to (st_dev, st_ino). */
struct file_identity {
    uint64_t device;
    uint64_t inode;
};

/* Whether the last close of a descriptor remembered as a checkpoint opened
 * for writing is the commit of that checkpoint (adaptshim(7) "CHECKPOINT BINDING"): only while the
 * descriptor still refers to the file it was opened on (`now`; NULL when it
 * cannot be told, e.g. fstat failed).  A number that was closed where no
 * wrapper saw it (glibc's fclose of a stream, a raw system call) and was
 * handed out again by the kernel refers to another file: what the shim
 * remembers of it is stale and must never commit a snapshot. */
bool session_close_commits(const struct file_identity *opened, const struct file_identity *now);

/* Prepares ADAPTDL_CHECKPOINT_PATH (state_directory_prepare) when it is set.
 * -1 with errno and a one-line message that names the variable, what is
 * wrong and what is accepted. */
int session_prepare_state_directory(struct runtime_session *session, char *error,
                                    size_t error_size);

/* The trainer committed a checkpoint whose content has `identity`: writes the
 * bound snapshot.  0 written, 1 nothing to do (no checkpoint directory),
 * -1 with errno (ENOSPC, EIO... of the failed write; ENOMEM) when no
 * snapshot could be written, reported in error; nothing is pruned then. */
int session_commit_checkpoint(struct runtime_session *session, const char *checkpoint_path,
                              const struct content_identity *identity,
                              unconsumed_records_fn unconsumed, void *context,
                              char *error, size_t error_size);

/* A commit as the shim sees it: the file at content_path (a rename's
 * source, or the checkpoint itself) becomes checkpoint_path.  Hashes it
 * into *identity and commits.  0 written; 1 nothing to bind (no checkpoint
 * directory, or content_path is gone or not a regular file); -1 with errno
 * when the content cannot be read or the snapshot cannot be written: the
 * trainer's commit (its rename, close or fclose) must then fail with that
 * errno (adaptshim(7) "CHECKPOINT BINDING"), so that its previous checkpoint stays the one that
 * resumes.  Failures are logged. */
int session_commit_checkpoint_file(struct runtime_session *session, const char *content_path,
                                   const char *checkpoint_path,
                                   unconsumed_records_fn unconsumed, void *context,
                                   struct content_identity *identity);

/* A restarted trainer that is about to train without its checkpoint: true,
 * with one line in `message`, when ADAPTDL_CHECKPOINT_PATH holds snapshots
 * of this job (the newest is named) and no checkpoint matching
 * ADAPTDL_SAVE has been opened for reading in this run, so nothing was
 * restored.  False otherwise (no state directory, nothing in it, or a
 * checkpoint was loaded, whether or not a snapshot matched it: that case
 * has its own warning). */
bool session_describe_unloaded_snapshots(struct runtime_session *session, char *message,
                                         size_t message_size);

/* The trainer opened a checkpoint for reading.  Returns 0 restored, 1 not a
 * restore (too late, already done, no directory, no matching snapshot: each
 * logged), -1 refusal (the data differs from the snapshot's; message in error). */
int session_restore_checkpoint(struct runtime_session *session, const char *checkpoint_path,
                               const struct content_identity *identity,
                               char *error, size_t error_size);

#endif
