/* session.c - checkpoint binding for one process (see session.h). */
#include "session.h"
#include "error_message.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock_time.h"
#include "config_text.h"
#include "log.h"
#include "path_normalize.h"

void session_init(struct runtime_session *session)
{
    memset(session, 0, sizeof *session);
    dataset_registry_init(&session->registry, RESUME_REPLAY);
    cooperative_state_init(&session->cooperative);
    statistical_epochs_init(&session->epochs);
}

/* `glob` made absolute against `cwd`, or NULL for an absolute glob (and
 * when it does not fit: errno ENAMETOOLONG, or ENOMEM). */
static char *session_anchor_glob(const char *glob, const char *cwd, int *error)
{
    if (glob[0] == '/')
        return NULL;
    char anchored[PATH_MAX];
    if (path_normalize_absolute(cwd, glob, anchored, sizeof anchored) != 0) {
        *error = ENAMETOOLONG;
        return NULL;
    }
    char *copy = strdup(anchored);
    if (copy == NULL)
        *error = ENOMEM;
    return copy;
}

int session_prepare_globs(struct runtime_session *session, const char *cwd)
{
    int error = 0;
    size_t count = session->config.data_count;
    session->data_entry_matched = calloc(count ? count : 1, sizeof(bool));
    session->data_entry_overlap_warned = calloc(count ? count : 1, sizeof(bool));
    session->data_anchored_globs = calloc(count ? count : 1, sizeof(char *));
    if (session->data_anchored_globs == NULL || session->data_entry_matched == NULL ||
        session->data_entry_overlap_warned == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        session->data_anchored_globs[i] =
            session_anchor_glob(session->config.data[i].glob, cwd, &error);
    if (session->config.save_glob != NULL)
        session->save_anchored_glob = session_anchor_glob(session->config.save_glob, cwd,
                                                          &error);
    errno = error;
    return error == 0 ? 0 : -1;
}

static bool session_glob_matches(const char *glob, const char *anchored, const char *path,
                                 const char *absolute_path)
{
    if (fnmatch(glob, path, 0) == 0)
        return true;
    if (absolute_path == NULL)
        return false;
    return fnmatch(glob, absolute_path, 0) == 0 ||
           (anchored != NULL && fnmatch(anchored, absolute_path, 0) == 0);
}

/* A glob matched a path: the first match of all tells serving_begins. */
static void session_note_match(struct runtime_session *session, bool *matched)
{
    __atomic_store_n(matched, true, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&session->serving, true, __ATOMIC_ACQ_REL) &&
        session->serving_begins != NULL)
        session->serving_begins();
}

static bool session_data_entry_matches(const struct runtime_session *session, size_t index,
                                       const char *path, const char *absolute_path)
{
    const char *anchored =
        session->data_anchored_globs != NULL ? session->data_anchored_globs[index] : NULL;
    return session_glob_matches(session->config.data[index].glob, anchored, path,
                                absolute_path);
}

/* Entry `used` took the path; a later entry whose glob matches it too never
 * applies to it, and its keys (a record size, a role) are ignored without a
 * word.  Each later entry is named once, with the first path it lost (the
 * globs differ: identical ones are refused at start-up). */
static void session_warn_overlapping_entries(struct runtime_session *session, size_t used,
                                             const char *path, const char *absolute_path)
{
    const struct data_entry *data = session->config.data;
    char used_quoted[QUOTED_SIZE], other_quoted[QUOTED_SIZE], path_quoted[QUOTED_SIZE];

    if (session->data_entry_overlap_warned == NULL)
        return;
    for (size_t other = used + 1; other < session->config.data_count; other++) {
        if (__atomic_load_n(&session->data_entry_overlap_warned[other], __ATOMIC_RELAXED) ||
            !session_data_entry_matches(session, other, path, absolute_path) ||
            __atomic_exchange_n(&session->data_entry_overlap_warned[other], true,
                                __ATOMIC_ACQ_REL))
            continue;
        log_warn("ADAPTDL_DATA entries %zu (\"%s\") and %zu (\"%s\") both match \"%s\": "
                 "entry %zu, the first, applies and entry %zu's keys are ignored for it; "
                 "accepted: globs that no file matches twice",
                 used + 1,
                 config_quote_for_message(used_quoted, sizeof used_quoted, data[used].glob,
                                          strlen(data[used].glob)),
                 other + 1,
                 config_quote_for_message(other_quoted, sizeof other_quoted, data[other].glob,
                                          strlen(data[other].glob)),
                 config_quote_for_message(path_quoted, sizeof path_quoted, path, strlen(path)),
                 used + 1, other + 1);
    }
}

const struct data_entry *session_match_data(struct runtime_session *session,
                                            const char *path, const char *absolute_path)
{
    for (size_t i = 0; i < session->config.data_count; i++) {
        if (!session_data_entry_matches(session, i, path, absolute_path))
            continue;
        if (session->data_entry_matched != NULL)
            session_note_match(session, &session->data_entry_matched[i]);
        session_warn_overlapping_entries(session, i, path, absolute_path);
        return &session->config.data[i];
    }
    return NULL;
}

bool session_match_save(struct runtime_session *session, const char *path,
                        const char *absolute_path)
{
    bool matched = session->config.save_glob != NULL &&
                   session_glob_matches(session->config.save_glob, session->save_anchored_glob,
                                        path, absolute_path);
    if (matched)
        session_note_match(session, &session->save_matched);
    return matched;
}

bool session_describe_unmatched_globs(struct runtime_session *session, bool with_data,
                                      bool with_save, char *message, size_t message_size)
{
    char item[PATH_MAX + 32];
    message[0] = '\0';
    for (size_t i = 0; with_data && i < session->config.data_count &&
                       session->data_entry_matched != NULL; i++) {
        if (session->config.data[i].role != DATA_ROLE_TRAIN ||
            __atomic_load_n(&session->data_entry_matched[i], __ATOMIC_RELAXED))
            continue;
        snprintf(item, sizeof item, "ADAPTDL_DATA entry \"%s\"", session->config.data[i].glob);
        config_append_to_list(message, message_size, item);
    }
    if (with_save && session->config.save_glob != NULL &&
        !__atomic_load_n(&session->save_matched, __ATOMIC_RELAXED)) {
        snprintf(item, sizeof item, "ADAPTDL_SAVE \"%s\"", session->config.save_glob);
        config_append_to_list(message, message_size, item);
    }
    size_t used = strlen(message);
    if (used == 0)
        return false;
    snprintf(message + used, message_size - used,
             ": matched no file this process opened, stat'ed or renamed (its data is neither "
             "sharded nor shuffled, its checkpoints bind nothing); a glob is matched against "
             "the path as the trainer passes it and its absolute form, a relative glob also "
             "against the directory the process started in");
    return true;
}

bool session_train_record_delivered(struct runtime_session *session)
{
    bool delivered = false;
    pthread_mutex_lock(&session->registry.lock);
    for (struct dataset_file *file = session->registry.files; file; file = file->next)
        if (file->entry->role == DATA_ROLE_TRAIN &&
            (pass_tracker_records_served(&file->shared->tracker) > 0 ||
             pass_tracker_started(&file->shared->tracker)))
            delivered = true;
    pthread_mutex_unlock(&session->registry.lock);
    return delivered;
}

bool session_close_commits(const struct file_identity *opened, const struct file_identity *now)
{
    return opened != NULL && now != NULL && opened->device == now->device &&
           opened->inode == now->inode;
}

int session_commit_checkpoint(struct runtime_session *session, const char *checkpoint_path,
                              const struct content_identity *identity,
                              unconsumed_records_fn unconsumed, void *context,
                              char *error, size_t error_size)
{
    if (session->config.checkpoint_path == NULL) {
        /* commits may come from several threads: one warning */
        if (!__atomic_exchange_n(&session->warned_no_checkpoint_path, true, __ATOMIC_RELAXED))
            log_warn("checkpoint %s committed, but ADAPTDL_CHECKPOINT_PATH is unset: no "
                     "snapshot is written and a restart cannot resume the data position",
                     checkpoint_path);
        return 1;
    }
    struct adaptdl_snapshot snapshot = {0};
    snapshot.version = STATE_FORMAT_VERSION;
    snapshot.seed = __atomic_load_n(&session->config.seed, __ATOMIC_RELAXED);
    snapshot.replicas = session->config.num_replicas;
    snapshot.binding = *identity;
    snapshot.created_unix_time = clock_unix_seconds();
    pthread_mutex_lock(&session->registry.lock);
    if (session->commit_sequence < session->registry.restored_sequence)
        session->commit_sequence = session->registry.restored_sequence;
    snapshot.sequence = ++session->commit_sequence;
    char unmatched[1024];
    if (!session->warned_unmatched_data &&
        session_describe_unmatched_globs(session, true, false, unmatched, sizeof unmatched)) {
        session->warned_unmatched_data = true;
        log_warn("at the first checkpoint commit, %s", unmatched);
    }
    int captured = dataset_registry_capture(&session->registry, unconsumed, context, &snapshot);
    pthread_mutex_unlock(&session->registry.lock);
    uint64_t pending_steps = 0, pending_records = 0;
    if (session->uncounted_steps)
        session->uncounted_steps(&pending_steps, &pending_records);
    struct statistical_epoch_position position;
    statistical_epochs_capture_with_pending(&session->epochs, pending_steps, pending_records,
                                            &position);
    snapshot.progress = position.progress;
    snapshot.step = position.step;
    snapshot.global_bsz = position.global_bsz;
    snapshot.checkpoint_path = strdup(checkpoint_path);
    char cooperative_error[256] = "";
    pthread_mutex_lock(&session->cooperative.lock);
    int cooperative = cooperative_state_capture(&session->cooperative, &snapshot,
                                                cooperative_error, sizeof cooperative_error);
    pthread_mutex_unlock(&session->cooperative.lock);
    if (cooperative != 0) {
        error_message(error, error_size, "capturing the cooperative state for %s: %s",
                      checkpoint_path, cooperative_error);
        snapshot_free(&snapshot);
        return -1;
    }
    if (captured != 0 || snapshot.checkpoint_path == NULL) {
        error_message(error, error_size, "out of memory capturing a snapshot for %s",
                      checkpoint_path);
        snapshot_free(&snapshot);
        errno = ENOMEM;
        return -1;
    }
    int status = snapshot_save(session->config.checkpoint_path, &snapshot, error, error_size);
    if (status == 0) {
        __atomic_add_fetch(&session->snapshots_written, 1, __ATOMIC_RELAXED);
        delivery_trace_commit(checkpoint_path, identity);
        if (log_enabled(LOG_LEVEL_DEBUG)) {
            log_debug("snapshot %" PRIu64 " bound to %s (size %" PRIu64 ", hash %016" PRIx64
                      "), epoch %" PRIu64 ", step %" PRIu64 ", progress %.6g",
                      snapshot.sequence, checkpoint_path, identity->size, identity->hash,
                      snapshot.epoch, snapshot.step, snapshot.progress);
            for (size_t i = 0; i < snapshot.file_count; i++)
                log_debug("snapshot %" PRIu64 ":   %s pass %" PRIu64 " index %" PRIu64
                          " of %" PRIu64 " (%" PRIu64 " records)", snapshot.sequence,
                          snapshot.files[i].name, snapshot.files[i].pass,
                          snapshot.files[i].current_index, snapshot.files[i].pass_length,
                          snapshot.files[i].record_count);
        }
        char prune_error[256];
        if (snapshot_prune(session->config.checkpoint_path, identity, session->config.save_glob,
                           prune_error, sizeof prune_error) < 0)
            log_warn("snapshot pruning: %s", prune_error);
    }
    int saved_errno = errno; /* a failed write's: the caller fails the commit with it */
    snapshot_free(&snapshot);
    errno = saved_errno;
    return status;
}

/* Hash failures that mean "nothing here to bind" rather than "the snapshot
 * cannot be written": the path is gone (a rename source that does not
 * exist fails the trainer's rename by itself; a file renamed away before
 * its close was bound by that rename), or it is not a regular file. */
static const struct {
    int error_number;
    const char *what;
} session_unbindable_contents[] = {
    {ENOENT, "no longer exists"},
    {EISDIR, "is a directory"},
    {EINVAL, "is not a regular file"},
};

int session_commit_checkpoint_file(struct runtime_session *session, const char *content_path,
                                   const char *checkpoint_path,
                                   unconsumed_records_fn unconsumed, void *context,
                                   struct content_identity *identity)
{
    *identity = (struct content_identity){0, 0};
    if (content_identity_of_path(content_path, identity) != 0) {
        int saved_errno = errno;
        for (size_t i = 0; i < sizeof session_unbindable_contents /
                                   sizeof session_unbindable_contents[0]; i++) {
            if (session_unbindable_contents[i].error_number != saved_errno)
                continue;
            log_debug("checkpoint %s: %s %s: no snapshot to bind", checkpoint_path,
                      content_path, session_unbindable_contents[i].what);
            return 1;
        }
        log_error("checkpoint %s: cannot read %s to bind a snapshot to it (%s): the "
                  "trainer's commit fails with that error", checkpoint_path, content_path,
                  strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    char error[1024];
    int status = session_commit_checkpoint(session, checkpoint_path, identity, unconsumed,
                                           context, error, sizeof error);
    if (status >= 0)
        return status;
    int saved_errno = errno;
    /* adaptshim(7) "Full disks and hostile state files": the trainer learns it as a failed
     * write of its own. */
    log_error("checkpoint %s: snapshot not written: %s; the trainer's commit (its rename, "
              "close or fclose) fails with \"%s\"", checkpoint_path, error,
              strerror(saved_errno));
    errno = saved_errno;
    return -1;
}

int session_prepare_state_directory(struct runtime_session *session, char *error,
                                    size_t error_size)
{
    const char *directory = session->config.checkpoint_path;
    if (directory == NULL)
        return 0;
    char problem[768];
    if (state_directory_prepare(directory, problem, sizeof problem) == 0)
        return 0;
    int saved_errno = errno;
    error_message(error, error_size,
                  "ADAPTDL_CHECKPOINT_PATH: %s; accepted: a writable directory, or a path whose "
                  "parent directory exists (the directory is then created)",
                  problem);
    errno = saved_errno;
    return -1;
}

bool session_describe_unloaded_snapshots(struct runtime_session *session, char *message,
                                         size_t message_size)
{
    const char *directory = session->config.checkpoint_path;
    if (directory == NULL || __atomic_load_n(&session->restore_attempted, __ATOMIC_RELAXED))
        return false;
    struct adaptdl_snapshot newest;
    char error[256];
    if (snapshot_load_latest(directory, &newest, error, sizeof error) != 0)
        return false;   /* none, or none readable: nothing a load could have restored */
    snprintf(message, message_size,
             "ADAPTDL_CHECKPOINT_PATH %s holds snapshots of this job (the newest bound to "
             "%s, size %" PRIu64 ", hash %016" PRIx64 "), but no checkpoint matching "
             "ADAPTDL_SAVE was loaded, so nothing is restored and training starts fresh",
             directory, newest.checkpoint_path ? newest.checkpoint_path : "(unnamed)",
             newest.binding.size, newest.binding.hash);
    snapshot_free(&newest);
    return true;
}

int session_restore_checkpoint(struct runtime_session *session, const char *checkpoint_path,
                               const struct content_identity *identity,
                               char *error, size_t error_size)
{
    delivery_trace_load(checkpoint_path, identity);
    if (session_train_record_delivered(session)) {
        log_debug("checkpoint %s read after the start of training: the data position is "
                  "unchanged", checkpoint_path);
        return 1;
    }
    /* Threads that load checkpoint shards at once race here: one test-and-set
     * lets exactly one of them restore (a plain flag, read then set, let
     * both through). */
    if (__atomic_exchange_n(&session->restore_attempted, true, __ATOMIC_ACQ_REL)) {
        log_debug("checkpoint %s read again: the data position was restored (or is being "
                  "restored on another thread) from the first checkpoint loaded",
                  checkpoint_path);
        return 1;
    }
    if (session->config.checkpoint_path == NULL) {
        log_warn("checkpoint %s loaded, but ADAPTDL_CHECKPOINT_PATH is unset: the data "
                 "position starts fresh", checkpoint_path);
        return 1;
    }
    struct adaptdl_snapshot snapshot;
    char load_error[512];
    int found = snapshot_load_bound(session->config.checkpoint_path, identity, &snapshot,
                                    load_error, sizeof load_error);
    if (found == 1) {
        struct adaptdl_snapshot newest;
        char newest_error[256];
        if (snapshot_load_latest(session->config.checkpoint_path, &newest, newest_error,
                                 sizeof newest_error) == 0) {
            log_warn("checkpoint %s (size %" PRIu64 ", hash %016" PRIx64 ") has no bound "
                     "snapshot in %s (the newest one is bound to %s, size %" PRIu64
                     ", hash %016" PRIx64 "): the data position starts fresh",
                     checkpoint_path, identity->size, identity->hash,
                     session->config.checkpoint_path, newest.checkpoint_path,
                     newest.binding.size, newest.binding.hash);
            snapshot_free(&newest);
        } else {
            log_warn("checkpoint %s (size %" PRIu64 ", hash %016" PRIx64 ") has no bound "
                     "snapshot in %s (it holds none): the data position starts fresh",
                     checkpoint_path, identity->size, identity->hash,
                     session->config.checkpoint_path);
        }
        return 1;
    }
    if (found < 0) {
        log_error("checkpoint %s: its snapshot cannot be used (%s): the data position "
                  "starts fresh", checkpoint_path, load_error);
        return 1;
    }
    /* The remaining records of a pass are only the right ones under the
     * order they were drawn from: the snapshot's seed wins. */
    uint64_t seed_now = __atomic_load_n(&session->config.seed, __ATOMIC_RELAXED);
    if (snapshot.seed != seed_now)
        log_warn("restore: snapshot was taken with ADAPTDL_SEED=%" PRIu64 ", this run has "
                 "%" PRIu64 ": continuing with the snapshot's seed", snapshot.seed, seed_now);
    pthread_mutex_lock(&session->registry.lock);
    /* (atomic: a commit on another thread reads it without the lock; each
     * file's copy is read under the file's lock by its readers) */
    __atomic_store_n(&session->config.seed, snapshot.seed, __ATOMIC_RELAXED);
    for (struct dataset_file *file = session->registry.files; file; file = file->next)
        dataset_file_set_seed(file, snapshot.seed);
    session->registry.resume = session->config.resume;
    /* before the views are re-fixed: a fresh pass is planned from it */
    struct statistical_epoch_position position = {
        .progress = snapshot.progress, .step = snapshot.step, .global_bsz = snapshot.global_bsz};
    statistical_epochs_restore(&session->epochs, &position);
    int status = dataset_registry_restore(&session->registry, &snapshot, error, error_size);
    pthread_mutex_unlock(&session->registry.lock);
    if (status == 0) {
        pthread_mutex_lock(&session->cooperative.lock);
        status = cooperative_state_restore(&session->cooperative, &snapshot, error, error_size);
        pthread_mutex_unlock(&session->cooperative.lock);
    }
    if (status == 0)
        log_info("restored snapshot %" PRIu64 " bound to %s: epoch %" PRIu64 ", %zu data "
                 "files, taken with %u replicas, now %u", snapshot.sequence, checkpoint_path,
                 snapshot.epoch, snapshot.file_count, snapshot.replicas,
                 session->config.num_replicas);
    snapshot_free(&snapshot);
    return status == 0 ? 0 : -1;
}
