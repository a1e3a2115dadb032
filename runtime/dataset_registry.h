/* dataset_registry.h - every data file the trainer has touched, and the
 * translation between their pass states and a bound snapshot (adaptshim(7) "CHECKPOINT BINDING").
 *
 * Files are registered when first opened or stat'ed and live until exit, so
 * that pass state survives closes and reopens.  A restored snapshot may name
 * files this run has not touched yet: their positions wait here, keyed by
 * basename (replicas may mount the data at different paths), until the file
 * is registered.  When several files share a basename, a position goes to
 * the file with the same record count, and among those to the one registered
 * in the same order as in the run that captured it (captures list files in
 * registration order). */
#ifndef ADAPTSHIM_DATASET_REGISTRY_H
#define ADAPTSHIM_DATASET_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "dataset_view.h"
#include "state_store.h"

struct pending_position {
    struct snapshot_file_position position;
    bool applied;
};

struct dataset_registry {
    pthread_mutex_t lock;
    struct dataset_file *files;      /* singly linked, in registration order */
    struct dataset_file **files_tail; /* where the next file is linked */
    /* the same files by identity (device, inode): the order in which every
     * process of the job takes their locks before a fork (chained through
     * next_in_lock_order) */
    struct dataset_file *files_in_lock_order;
    size_t file_count;
    enum resume_mode resume;
    bool restored;                   /* a snapshot was restored in this run */
    bool train_record_delivered;     /* restores are refused after this */
    struct pending_position *pending;
    size_t pending_count;
    uint64_t restored_sequence;
    struct pass_state_arena *arena;  /* pass states shared across fork, or NULL */
    bool warned_arena_full;
};

void dataset_registry_init(struct dataset_registry *registry, enum resume_mode resume);

/* Maps the arena in which registered files keep their pass state, so that
 * processes forked from now on share the pass of every file whichever of
 * them registers it first (pass_state_arena.h).  Call before the trainer
 * can fork.  -1 with errno when the memory cannot be mapped: files then
 * share their state only with processes forked after their registration. */
int dataset_registry_share_across_fork(struct dataset_registry *registry, size_t bytes);

/* Finds a registered file by identity.  Caller holds registry->lock. */
struct dataset_file *dataset_registry_find(struct dataset_registry *registry,
                                           uint64_t device, uint64_t inode);
/* Adds an initialised file (takes ownership), moving its pass state into the
 * arena when there is one, and applies a pending restored position to it,
 * unless it adopted the pass state of another process of the job (which
 * applied the position itself).  Returns -1 with a message when the pending position
 * belongs to a different dataset (record count differs): the caller refuses
 * to resume into different data.  Caller holds registry->lock. */
int dataset_registry_add(struct dataset_registry *registry, struct dataset_file *file,
                         char *error, size_t error_size);

/* Before a fork: takes the lock of every registered file, ordered by file
 * identity, so that no thread of this process is inside a file's
 * process-local view while the child's copy of it is made, and two
 * processes of the job forking at once wait for each other's locks in one
 * order.  Caller holds registry->lock (so no file is being registered).
 * The locks are process-shared and robust: they belong to the thread that
 * forks, and only the parent gives them back
 * (dataset_registry_unlock_files_after_fork); the child, whose thread is
 * not their owner, waits for that as for any other holder. */
void dataset_registry_lock_files_for_fork(struct dataset_registry *registry);
void dataset_registry_unlock_files_after_fork(struct dataset_registry *registry);

/* Highest pass number among train files: the epoch.  Takes registry->lock. */
uint64_t dataset_registry_epoch(struct dataset_registry *registry);

/* Records still unconsumed in a file's view (unread stdio buffers plus
 * lookahead), supplied by the shim which knows its streams. */
typedef uint64_t (*unconsumed_records_fn)(struct dataset_file *file, void *context);

/* Fills the data-position part of a snapshot (files in registration order,
 * then restored positions of files not registered yet; epoch = the highest
 * pass among the captured train positions, so that a snapshot taken while
 * replay is still skipping carries the restored epoch).  Caller frees with
 * snapshot_free.  -1 on allocation failure. */
int dataset_registry_capture(struct dataset_registry *registry,
                             unconsumed_records_fn unconsumed, void *context,
                             struct adaptdl_snapshot *snapshot);

/* Applies a restored snapshot: registered files that have not delivered a
 * payload byte are re-fixed at once; the others keep their state (logged);
 * unregistered files wait as pending positions.  -1 with a message when a
 * registered file's record count differs from the snapshot's. */
int dataset_registry_restore(struct dataset_registry *registry,
                             const struct adaptdl_snapshot *snapshot,
                             char *error, size_t error_size);

#endif
