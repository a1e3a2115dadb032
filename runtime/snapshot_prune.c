/* snapshot_prune.c - the snapshots of the state directory as a set: the
 * newest of them (snapshot_load_latest), and deleting those no checkpoint
 * needs any more (adaptshim(7) "Pruning"): only after a newer commit,
 * and never while a file matching ADAPTDL_SAVE (a copy such as ck.bak,
 * another replica's checkpoint) still holds the content a snapshot is
 * bound to. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock_time.h"
#include "error_message.h"
#include "growable_array.h"
#include "state_files.h"
#include "state_store.h"
#include "sysio.h"

/* ------------------------------------------------------------------------- */
/* Pruning                                                                     */
/* ------------------------------------------------------------------------- */

struct prune_candidate {
    char *file_name;
    struct adaptdl_snapshot snapshot; /* decoded; undecodable files are not listed */
};

/* What a checkpoint path holds right now; stat and hash are done lazily and
 * at most once per path. */
struct checkpoint_probe {
    char *path;
    bool stat_done, exists;
    uint64_t size;
    bool hash_done, hash_failed;
    struct content_identity identity;
};

struct prune_state {
    const char *directory;
    struct prune_candidate *candidates;
    size_t candidate_count, candidate_capacity;
    struct checkpoint_probe *probes;
    size_t probe_count, probe_capacity;
};


static bool is_snapshot_file_name(const char *name)
{
    return state_file_is_snapshot_name(name, strlen(name));
}

static int prune_add_candidate(struct prune_state *state, const char *file_name)
{
    void *data;
    size_t size;
    struct adaptdl_snapshot snapshot;
    /* Unreadable or corrupt: leave it alone; only a decoded snapshot can
     * prove that its content is gone. */
    if (state_file_read(state->directory, file_name, &data, &size, NULL, 0) != 0)
        return 0;
    int decoded = snapshot_decode(data, size, &snapshot, NULL, 0);
    free(data);
    if (decoded != 0)
        return 0;
    struct prune_candidate *grown = growable_array_make_room(
        state->candidates, state->candidate_count, &state->candidate_capacity, sizeof *grown, 16);
    if (grown == NULL) {
        snapshot_free(&snapshot);
        return -1;
    }
    state->candidates = grown;
    char *name_copy = strdup(file_name);
    if (name_copy == NULL) {
        snapshot_free(&snapshot);
        return -1;
    }
    state->candidates[state->candidate_count++] =
        (struct prune_candidate){.file_name = name_copy, .snapshot = snapshot};
    return 0;
}

static int prune_list_snapshots(struct prune_state *state, char *error, size_t error_size)
{
    DIR *listing = runtime_sysio.opendir(state->directory);
    if (listing == NULL) {
        int saved_errno = errno;
        error_message(error, error_size, "cannot list state directory '%s': %s", state->directory,
                  strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    int result = 0;
    struct dirent *entry;
    while (result == 0 && (entry = runtime_sysio.readdir(listing)) != NULL) {
        if (is_snapshot_file_name(entry->d_name))
            result = prune_add_candidate(state, entry->d_name);
    }
    runtime_sysio.closedir(listing);
    if (result != 0)
        error_message(error, error_size, "pruning snapshots in '%s': out of memory", state->directory);
    return result;
}

/* Adds a probe for path unless there is one already.  -1 out of memory. */
static int prune_add_probe(struct prune_state *state, const char *path)
{
    for (size_t probe = 0; probe < state->probe_count; probe++)
        if (strcmp(state->probes[probe].path, path) == 0)
            return 0;
    struct checkpoint_probe *grown = growable_array_make_room(
        state->probes, state->probe_count, &state->probe_capacity, sizeof *grown, 16);
    if (grown == NULL)
        return -1;
    state->probes = grown;
    char *copy = strdup(path);
    if (copy == NULL)
        return -1;
    state->probes[state->probe_count++] = (struct checkpoint_probe){.path = copy};
    return 0;
}

/* The save glob is matched as the shim matches it (the path as the trainer
 * passed it, or its absolute form): here the absolute form, the form
 * relative to the current directory, and the bare name for a glob without a
 * slash (a trainer that names its checkpoint relative to a directory).
 * Matching too much only keeps a snapshot longer. */
static bool prune_path_matches_save_glob(const char *glob, const char *path, const char *cwd)
{
    if (fnmatch(glob, path, 0) == 0)
        return true;
    size_t cwd_length = cwd != NULL ? strlen(cwd) : 0;
    if (cwd_length > 0 && strncmp(path, cwd, cwd_length) == 0 && path[cwd_length] == '/' &&
        fnmatch(glob, path + cwd_length + 1, 0) == 0)
        return true;
    const char *name = strrchr(path, '/');
    return strchr(glob, '/') == NULL && name != NULL && fnmatch(glob, name + 1, 0) == 0;
}

/* Probes every file of `directory` that matches the save glob. */
static int prune_probe_directory(struct prune_state *state, const char *directory,
                                 const char *glob, const char *cwd)
{
    DIR *listing = runtime_sysio.opendir(directory);
    if (listing == NULL)
        return 0; /* gone or unreadable: it holds nothing we could see */
    int result = 0;
    struct dirent *entry;
    while (result == 0 && (entry = runtime_sysio.readdir(listing)) != NULL) {
        char path[PATH_MAX];
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0 ||
            state_file_join_path(path, sizeof path, strcmp(directory, "/") == 0 ? "" : directory,
                      entry->d_name) != 0)
            continue;
        if (prune_path_matches_save_glob(glob, path, cwd))
            result = prune_add_probe(state, path);
    }
    runtime_sysio.closedir(listing);
    return result;
}

/* The directory part of path ("/" for "/name"), or false for a bare name. */
static bool directory_of(const char *path, char *directory, size_t directory_size)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return false;
    size_t length = slash == path ? 1 : (size_t)(slash - path);
    if (length >= directory_size)
        return false;
    memcpy(directory, path, length);
    directory[length] = '\0';
    return true;
}

/* The directory the save glob itself names, when its directory part has no
 * wildcard ("/ckpt/model-*.pt" names "/ckpt"; "ck*" the current directory). */
static bool save_glob_directory(const char *glob, const char *cwd, char *directory,
                                size_t directory_size)
{
    const char *slash = strrchr(glob, '/');
    size_t part_length = slash == NULL ? 0 : (size_t)(slash - glob);
    for (size_t index = 0; index < part_length; index++)
        if (strchr("*?[\\", glob[index]) != NULL)
            return false;
    int length;
    if (glob[0] == '/')
        length = snprintf(directory, directory_size, "%.*s", (int)(part_length ? part_length : 1),
                          glob);
    else if (cwd == NULL)
        return false;
    else if (part_length == 0)
        length = snprintf(directory, directory_size, "%s", cwd);
    else
        length = snprintf(directory, directory_size, "%s/%.*s", cwd, (int)part_length, glob);
    return length > 0 && (size_t)length < directory_size;
}

/* One probe per checkpoint path named by any snapshot, and, with a save
 * glob, per file matching it in the directories of those paths and in the
 * glob's own directory: a copy such as ck.bak, or the checkpoint another
 * replica keeps, holds content as much as the path a snapshot recorded. */
static int prune_collect_probes(struct prune_state *state, const char *save_glob)
{
    for (size_t index = 0; index < state->candidate_count; index++) {
        const char *path = state->candidates[index].snapshot.checkpoint_path;
        if (path != NULL && path[0] != '\0' && prune_add_probe(state, path) != 0)
            return -1;
    }
    if (save_glob == NULL || save_glob[0] == '\0')
        return 0;
    char cwd_buffer[PATH_MAX];
    const char *cwd = getcwd(cwd_buffer, sizeof cwd_buffer);
    size_t directory_count = state->candidate_count + 1;
    char (*directories)[PATH_MAX] = calloc(directory_count, sizeof *directories);
    if (directories == NULL)
        return -1;
    size_t used = 0;
    if (save_glob_directory(save_glob, cwd, directories[used], sizeof directories[used]))
        used++;
    for (size_t index = 0; index < state->candidate_count; index++) {
        const char *path = state->candidates[index].snapshot.checkpoint_path;
        if (path != NULL && directory_of(path, directories[used], sizeof directories[used]))
            used++;
    }
    int result = 0;
    for (size_t index = 0; index < used && result == 0; index++) {
        bool seen = false;
        for (size_t earlier = 0; earlier < index && !seen; earlier++)
            seen = strcmp(directories[earlier], directories[index]) == 0;
        if (!seen)
            result = prune_probe_directory(state, directories[index], save_glob, cwd);
    }
    free(directories);
    return result;
}

/* Does the file at probe->path hold `binding`?  Unknown (unreadable file of
 * the right size) counts as yes: a snapshot is deleted only on proof. */
static bool probe_holds_content(struct checkpoint_probe *probe,
                                const struct content_identity *binding)
{
    if (!probe->stat_done) {
        struct stat status;
        probe->stat_done = true;
        probe->exists = runtime_sysio.stat(probe->path, &status) == 0 && S_ISREG(status.st_mode);
        probe->size = probe->exists ? (uint64_t)status.st_size : 0;
    }
    if (!probe->exists || probe->size != binding->size)
        return false; /* a size mismatch settles it without reading a byte */
    if (!probe->hash_done) {
        probe->hash_done = true;
        probe->hash_failed = content_identity_of_path(probe->path, &probe->identity) != 0;
    }
    return probe->hash_failed || content_identity_equal(&probe->identity, binding);
}

static bool content_still_held(struct prune_state *state, const struct content_identity *binding)
{
    for (size_t probe = 0; probe < state->probe_count; probe++)
        if (probe_holds_content(&state->probes[probe], binding))
            return true;
    return false;
}

static void prune_state_free(struct prune_state *state)
{
    for (size_t index = 0; index < state->candidate_count; index++) {
        free(state->candidates[index].file_name);
        snapshot_free(&state->candidates[index].snapshot);
    }
    free(state->candidates);
    for (size_t probe = 0; probe < state->probe_count; probe++)
        free(state->probes[probe].path);
    free(state->probes);
}

int snapshot_prune(const char *directory, const struct content_identity *keep,
                   const char *save_glob, char *error, size_t error_size)
{
    struct prune_state state = {.directory = directory};
    struct content_identity no_keep = {0, 0};
    char keep_name[SNAPSHOT_FILE_NAME_SIZE];
    if (keep == NULL)
        keep = &no_keep;
    snapshot_file_name(keep, keep_name, sizeof keep_name);
    if (prune_list_snapshots(&state, error, error_size) != 0) {
        prune_state_free(&state);
        return -1;
    }
    if (prune_collect_probes(&state, save_glob) != 0) {
        error_message(error, error_size, "pruning snapshots in '%s': out of memory", directory);
        prune_state_free(&state);
        errno = ENOMEM;
        return -1;
    }

    /* A snapshot newer than `keep` may belong to a commit still in flight
     * (a rename-commit writes its snapshot before the rename): spare it. */
    bool keep_found = false;
    uint64_t keep_sequence = 0;
    for (size_t index = 0; index < state.candidate_count; index++) {
        if (strcmp(state.candidates[index].file_name, keep_name) == 0) {
            keep_found = true;
            keep_sequence = state.candidates[index].snapshot.sequence;
        }
    }

    double now = clock_unix_seconds();
    /* A long job commits often but starts rarely: leftovers of a writer
     * killed in this run's lifetime go here too. */
    state_directory_remove_leftovers(directory, now, NULL, 0);
    int deleted = 0;
    for (size_t index = 0; index < state.candidate_count; index++) {
        const struct prune_candidate *candidate = &state.candidates[index];
        if (strcmp(candidate->file_name, keep_name) == 0 ||
            content_identity_equal(&candidate->snapshot.binding, keep))
            continue;
        if (keep_found && candidate->snapshot.sequence > keep_sequence)
            continue;
        /* Replicas that commit their own checkpoints into one directory
         * have sequence numbers of their own: a young snapshot of another
         * process may be a rename-commit still in flight (its content still
         * at the temporary name), so only snapshots older than a grace
         * period are candidates. */
        if (candidate->snapshot.created_unix_time > now - SNAPSHOT_PRUNE_GRACE_SECONDS)
            continue;
        if (content_still_held(&state, &candidate->snapshot.binding))
            continue;
        char path[PATH_MAX];
        if (state_file_join_path(path, sizeof path, directory, candidate->file_name) != 0)
            continue;
        if (runtime_sysio.unlink(path) == 0) {
            deleted++;
        } else if (errno != ENOENT) { /* ENOENT: another replica pruned it first */
            int saved_errno = errno;
            error_message(error, error_size, "cannot delete stale snapshot '%s': %s", path,
                      strerror(saved_errno));
            prune_state_free(&state);
            errno = saved_errno;
            return -1;
        }
    }
    prune_state_free(&state);
    return deleted;
}

int snapshot_load_latest(const char *directory, struct adaptdl_snapshot *snapshot,
                         char *error, size_t error_size)
{
    memset(snapshot, 0, sizeof *snapshot);
    struct prune_state state = {.directory = directory};
    if (prune_list_snapshots(&state, error, error_size) != 0) {
        prune_state_free(&state);
        return -1;
    }
    size_t newest = state.candidate_count;
    for (size_t index = 0; index < state.candidate_count; index++)
        if (newest == state.candidate_count ||
            state.candidates[index].snapshot.created_unix_time >
                state.candidates[newest].snapshot.created_unix_time)
            newest = index;
    if (newest == state.candidate_count) {
        prune_state_free(&state);
        return 1;
    }
    /* hand the decoded snapshot over, so freeing the state leaves it alone */
    *snapshot = state.candidates[newest].snapshot;
    memset(&state.candidates[newest].snapshot, 0, sizeof state.candidates[newest].snapshot);
    prune_state_free(&state);
    return 0;
}
