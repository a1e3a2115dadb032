/* tracking.c - deciding what an opened path is: a data file (tracked as a
 * view), a trainer checkpoint being written (committed on close) or read
 * (restore), or anything else (left alone). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault_injection.h"
#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "stdio_streams.h"
#include "steps.h"
#include "events.h"
#include "path_normalize.h"
#include "rejected_files.h"
#include "sysio.h"

/* The absolute form of path as the trainer named it (adaptshim(7) "ENVIRONMENT"): the base is
 * the working directory or the directory dirfd refers to; the joining is
 * runtime/path_normalize.c's. */
int shim_absolute_path(int dirfd, const char *path, char *out, size_t out_size)
{
    char base[PATH_MAX] = "/";
    if (path[0] == '/') {
        /* the base is not used */
    } else if (dirfd == AT_FDCWD) {
        if (getcwd(base, sizeof base) == NULL)
            return -1;
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t got = readlink(link, base, sizeof base - 1);
        if (got <= 0)
            return -1;
        base[got] = '\0';
    }
    return path_normalize_absolute(base, path, out, out_size);
}

/* _exit, not exit: the trainer's atexit handlers could overwrite its
 * checkpoint with a model trained on different data. */
static void shim_refuse_different_data(const char *message)
{
    log_error("%s", message);
    shim_exit_with_message(message);
}

/* Maps and registers a data file.  Caller holds the registry lock. */
static struct dataset_file *shim_register_dataset(const struct data_entry *entry,
                                                  const char *absolute_path,
                                                  const struct stat *status)
{
    int fd = REAL(open)(absolute_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    const void *map = NULL;
    if (status->st_size > 0) {
        map = REAL(mmap)(NULL, (size_t)status->st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            int saved = errno;
            REAL(close)(fd);
            log_error("data file %s: cannot map %lld bytes: %s", absolute_path,
                      (long long)status->st_size, strerror(saved));
            errno = saved;
            return NULL;
        }
    }
    struct dataset_file *file = malloc(sizeof *file);
    char error[1024];
    const struct adaptdl_config *config = &shim_session.config;
    /* counted before its first pass is planned (statistical epochs correct
     * their length only while there is one train file) */
    if (entry->role == DATA_ROLE_TRAIN)
        statistical_epochs_note_train_file(&shim_session.epochs);
    if (file == NULL ||
        dataset_file_init(file, entry, absolute_path, map, (uint64_t)status->st_size,
                          __atomic_load_n(&config->seed, __ATOMIC_RELAXED),
                          config->num_replicas, config->replica_rank,
                          error, sizeof error) != 0) {
        if (file != NULL)
            log_error("%s", error);
        free(file);
        if (map != NULL)
            REAL(munmap)((void *)map, (size_t)status->st_size);
        REAL(close)(fd);
        errno = EINVAL;
        return NULL;
    }
    /* Large pieces are pread from this descriptor (dataset_view.h); it is
     * tracked so that the trainer's close() or dup2() cannot disturb it. */
    struct fd_slot *internal = fd_slot_new_internal(file);
    if (internal != NULL && fd_table_install(fd, internal) == 0) {
        file->source_fd = fd;
    } else {
        free(internal);
        REAL(close)(fd);
    }
    file->device = (uint64_t)status->st_dev;
    file->inode = (uint64_t)status->st_ino;
    if (dataset_registry_add(&shim_session.registry, file, error, sizeof error) != 0)
        shim_refuse_different_data(error);
    log_debug("data file %s matched \"%s\": %" PRIu64 " records of %s, header %" PRIu64
              ", %s, %s, %s, pass %" PRIu64 " view: %" PRIu64 " records from index %" PRIu64,
              absolute_path, entry->glob, file->record_count,
              entry->lines ? "one line" : "fixed size", file->header_size,
              entry->role == DATA_ROLE_TRAIN ? "train" : "eval",
              entry->shuffle ? "shuffled" : "in order",
              file->pass_state_adopted ? "pass of another process of the job" : "a new pass state",
              file->view_pass, file->view_length,
              file->view_start_index);
    return file;
}

/* Files whose registration failed (runtime/rejected_files.h).  Caller holds
 * the registry lock. */
static struct rejected_files shim_rejected;

static struct file_version shim_file_version(const struct stat *status)
{
    return (struct file_version){
        .device = (uint64_t)status->st_dev,
        .inode = (uint64_t)status->st_ino,
        .size = (uint64_t)status->st_size,
        .modified_seconds = (int64_t)status->st_mtim.tv_sec,
        .modified_nanoseconds = (int64_t)status->st_mtim.tv_nsec,
    };
}

struct dataset_file *shim_dataset_for_path(int dirfd, const char *path, bool *matched)
{
    *matched = false;
    char absolute_path[PATH_MAX];
    const char *absolute = shim_absolute_path(dirfd, path, absolute_path,
                                              sizeof absolute_path) == 0 ? absolute_path
                                                                          : NULL;
    const struct data_entry *entry = session_match_data(&shim_session, path, absolute);
    if (entry == NULL)
        return NULL;
    struct stat status;
    if (REAL(fstatat)(dirfd, path, &status, 0) != 0 || !S_ISREG(status.st_mode))
        return NULL;  /* not there, or not a regular file: the trainer sees the real thing */
    *matched = true;
    if (absolute == NULL) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    shim_guard_enter();
    pthread_mutex_lock(&shim_session.registry.lock);
    struct dataset_file *file = dataset_registry_find(&shim_session.registry,
                                                      (uint64_t)status.st_dev,
                                                      (uint64_t)status.st_ino);
    struct file_version version = shim_file_version(&status);
    if (file == NULL && rejected_files_contains(&shim_rejected, &version)) {
        log_debug("data file %s: rejected before, refused again", absolute);
        errno = EINVAL;
    } else if (file == NULL) {
        file = shim_register_dataset(entry, absolute, &status);
        if (file == NULL && errno == EINVAL)
            rejected_files_remember(&shim_rejected, &version);
    }
    int saved = errno;
    pthread_mutex_unlock(&shim_session.registry.lock);
    shim_guard_leave();
    errno = saved;
    return file;
}

static bool shim_flags_write(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY;
}

static void shim_restore_from_checkpoint_fd(int fd, const char *absolute_path)
{
    struct content_identity identity;
    if (content_identity_of_fd(fd, &identity) != 0) {
        log_warn("checkpoint %s: cannot hash its content (%s): data position unchanged",
                 absolute_path, strerror(errno));
        return;
    }
    char error[1024];
    int status = session_restore_checkpoint(&shim_session, absolute_path, &identity, error,
                                            sizeof error);
    shim_events_restore(absolute_path, status);
    if (status < 0)
        shim_refuse_different_data(error);
}

int shim_track_opened(int fd, int dirfd, const char *path, int flags)
{
    /* The kernel just handed out this number: anything remembered there was
     * closed where no wrapper saw it, and must not outlive it. */
    if (SHIM_UNLIKELY(fd_table_tracked(fd)) && !shim_in_vfork_child())
        shim_forget_descriptor(fd);
    /* an O_PATH descriptor reads nothing (read gives EBADF): neither a view
     * nor the load of a checkpoint */
    if (flags & O_PATH)
        return fd;
    char absolute_path[PATH_MAX];
    const char *absolute = shim_absolute_path(dirfd, path, absolute_path,
                                              sizeof absolute_path) == 0 ? absolute_path
                                                                          : NULL;
    if (session_match_save(&shim_session, path, absolute) && absolute != NULL) {
        shim_guard_enter();
        if (shim_flags_write(flags)) {
            struct stat status;
            struct fd_slot *slot = NULL;
            if (REAL(fstat)(fd, &status) == 0) {
                struct file_identity file = {(uint64_t)status.st_dev, (uint64_t)status.st_ino};
                slot = fd_slot_new_checkpoint_writer(absolute, &file);
            }
            if (slot != NULL && fd_table_install(fd, slot) == 0) {
                log_debug("checkpoint %s opened for writing (fd %d)", absolute, fd);
            } else {
                log_warn("checkpoint %s opened for writing (fd %d): cannot remember it (%s); "
                         "its close will not bind a snapshot", absolute, fd, strerror(errno));
                fd_slot_release(slot);
            }
        } else {
            shim_restore_from_checkpoint_fd(fd, absolute);
        }
        shim_guard_leave();
        return fd;
    }
    if (session_match_data(&shim_session, path, absolute) == NULL)
        return fd;
    if (shim_flags_write(flags)) {
        log_warn("data file %s opened for writing: not virtualized", path);
        return fd;
    }
    bool matched;
    struct dataset_file *file = shim_dataset_for_path(dirfd, path, &matched);
    if (!matched)
        return fd;
    if (file == NULL) {
        int saved = errno;
        REAL(close)(fd);
        errno = saved;
        return -1;
    }
    shim_guard_enter();
    struct fd_slot *slot = fd_slot_new_view(file);
    int status = slot != NULL ? fd_table_install(fd, slot) : -1;
    /* EMFILE from a number past the table, ENOMEM from the slot's allocation */
    int saved = errno;
    shim_guard_leave();
    if (status != 0) {
        free(slot);
        REAL(close)(fd);
        errno = saved;
        return -1;
    }
    log_trace("open %s -> fd %d (view of pass %" PRIu64 ", %" PRIu64 " bytes)", path, fd,
              file->view_pass, file->view_size);
    return fd;
}

int shim_commit_checkpoint_path(const char *content_path, const char *checkpoint_path)
{
    shim_guard_enter();
    struct content_identity identity;
    /* streams hand over what their trainers consumed, before any lock of
     * the snapshot's is taken (stdio_streams.c) */
    shim_streams_deliver_consumed();
    fault_injection_reach(FAULT_BEFORE_SNAPSHOT);
    int status = session_commit_checkpoint_file(&shim_session, content_path, checkpoint_path,
                                                shim_unconsumed_records, NULL, &identity);
    int saved = errno;
    if (status == 0)
        fault_injection_reach(FAULT_AFTER_SNAPSHOT);
    shim_events_snapshot(checkpoint_path, &identity, status == 0);
    /* a failed commit is no checkpoint: draining and restarts wait on */
    if (status >= 0)
        shim_steps_note_commit();
    shim_guard_leave();
    errno = saved;
    return status < 0 ? -1 : 0;
}
