/* io_fd.c - descriptor bookkeeping: close, dup*, fcntl(F_DUPFD*),
 * close_range, closefrom.  The real call happens first; the table follows what the
 * kernel did.  Closing a checkpoint descriptor that was opened for writing
 * commits the checkpoint (the snapshot is written just before the close).
 *
 * A descriptor can also be closed where no wrapper sees it (glibc's fclose
 * of an fdopen'd stream, which io_stdio.c handles; a raw system call) and
 * its number handed out again.  Every number a wrapper sees handed out
 * (open, dup) is forgotten first, and a close commits only while the
 * descriptor still refers to the checkpoint it was opened on: a stale entry
 * never commits a snapshot. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"

void shim_forget_descriptor(int fd)
{
    struct fd_slot *slot = fd_table_remove(fd, NULL);
    if (slot == NULL)
        return;
    if (slot->kind == FD_SLOT_INTERNAL) {
        dataset_file_lock(slot->file);
        if (slot->file->source_fd == fd)
            slot->file->source_fd = -1;
        dataset_file_unlock(slot->file);
    }
    log_debug("fd %d was closed where no close wrapper saw it: forgotten", fd);
    fd_slot_release(slot);
}

bool shim_close_commits(int fd, const struct fd_slot *slot, bool last_descriptor)
{
    if (slot->kind != FD_SLOT_CHECKPOINT_WRITER || !last_descriptor || shim_guarded())
        return false;
    struct stat status;
    bool known = REAL(fstat)(fd, &status) == 0;
    struct file_identity now = {(uint64_t)status.st_dev, (uint64_t)status.st_ino};
    if (session_close_commits(&slot->checkpoint_file, known ? &now : NULL))
        return true;
    log_debug("fd %d no longer refers to checkpoint %s (closed where no wrapper saw it, "
              "number reused): not a commit", fd, slot->checkpoint_path);
    return false;
}

SHIM_EXPORT int close(int fd)
{
    if (SHIM_LIKELY(!fd_table_tracked(fd)) || shim_in_vfork_child())
        return REAL(close)(fd);
    struct fd_slot *slot = fd_table_acquire(fd);
    bool internal = slot != NULL && slot->kind == FD_SLOT_INTERNAL;
    bool checkpoint = slot != NULL && slot->kind == FD_SLOT_CHECKPOINT_WRITER;
    fd_slot_release(slot);
    if (internal && !shim_guarded()) {
        /* the trainer never opened it: to the trainer it is not open */
        errno = EBADF;
        return -1;
    }
    struct fd_slot *removed;
    int result;
    int commit = 0, commit_errno = 0;
    if (checkpoint) {
        /* The content is complete once the trainer closes: the snapshot is
         * written before the close returns, so a crash after the trainer's
         * close never finds a checkpoint without its snapshot.  Only the
         * last descriptor on it commits, and only while it still refers to
         * the checkpoint.  If the snapshot cannot be written, the close
         * still closes (the descriptor is gone either way, as after any
         * failed close) but reports the write's errno, as a deferred write
         * error of the trainer's own would be. */
        bool last;
        removed = fd_table_remove(fd, &last);
        if (removed != NULL && shim_close_commits(fd, removed, last)) {
            commit = shim_commit_checkpoint_path(removed->checkpoint_path,
                                                 removed->checkpoint_path);
            commit_errno = errno;
        }
        result = REAL(close)(fd);
    } else {
        result = fd_table_close(fd, REAL(close), &removed, NULL);
    }
    int saved = errno;
    fd_slot_release(removed);
    if (commit != 0 && result == 0) {
        result = -1;
        saved = commit_errno;
    }
    errno = saved;
    return result;
}

/* The entry at fd is an internal descriptor of the shim's. */
static bool shim_is_internal_fd(int fd)
{
    struct fd_slot *slot = fd_table_acquire(fd);
    bool internal = slot != NULL && slot->kind == FD_SLOT_INTERNAL;
    fd_slot_release(slot);
    return internal;
}

SHIM_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    if (shim_in_vfork_child())
        return REAL(close_range)(first, last, flags);
    unsigned capacity = __atomic_load_n(&fd_table_capacity, __ATOMIC_ACQUIRE);
    /* keep the shim's own descriptors out of the range first */
    if (capacity != 0 && !(flags & CLOSE_RANGE_CLOEXEC)) {
        unsigned top = last < capacity ? last : capacity - 1;
        for (unsigned fd = first; fd <= top; fd++)
            if (shim_is_internal_fd((int)fd))
                shim_relocate_internal_fd((int)fd, last >= (unsigned)INT32_MAX ? -1
                                                                             : (int)last);
    }
    int result = REAL(close_range)(first, last, flags);
    if (result != 0 || (flags & CLOSE_RANGE_CLOEXEC) || capacity == 0)
        return result;
    if (last >= capacity)
        last = capacity - 1;
    for (unsigned fd = first; fd <= last && fd < capacity; fd++)
        if (fd_table_tracked((int)fd))
            fd_slot_release(fd_table_remove((int)fd, NULL));
    return result;
}

/* closefrom (glibc 2.34) closes through the close_range system call inside
 * libc, which the close_range wrapper never sees: forget every tracked
 * descriptor it closed, or a file opened later in one of those numbers would
 * be read as the old view.  The shim's own descriptors there are gone too
 * (no number above `lowest` survives): their files copy from the mapping,
 * told so before the descriptors close, so that no copy in progress on
 * another thread reads from a number that may already be another file's. */
SHIM_EXPORT void closefrom(int lowest)
{
    if (shim_in_vfork_child()) {
        REAL(closefrom)(lowest);
        return;
    }
    if (lowest < 0)
        lowest = 0;
    unsigned capacity = __atomic_load_n(&fd_table_capacity, __ATOMIC_ACQUIRE);
    for (unsigned fd = (unsigned)lowest; fd < capacity; fd++) {
        struct fd_slot *slot = fd_table_acquire((int)fd);
        if (slot != NULL && slot->kind == FD_SLOT_INTERNAL) {
            dataset_file_lock(slot->file);
            if (slot->file->source_fd == (int)fd)
                dataset_view_set_source_fd(slot->file, -1);
            dataset_file_unlock(slot->file);
        }
        fd_slot_release(slot);
    }
    REAL(closefrom)(lowest);
    for (unsigned fd = (unsigned)lowest; fd < capacity; fd++)
        if (fd_table_tracked((int)fd))
            fd_slot_release(fd_table_remove((int)fd, NULL));
}

static int shim_duplicated(int result, int source)
{
    if (result < 0 || shim_in_vfork_child())
        return result;
    if (fd_table_tracked(source))
        fd_table_share(source, result);
    else if (SHIM_UNLIKELY(fd_table_tracked(result)))
        shim_forget_descriptor(result);   /* a fresh number: what was there is stale */
    return result;
}

SHIM_EXPORT int dup(int fd)
{
    return shim_duplicated(REAL(dup)(fd), fd);
}

static int shim_duplicated_onto(int result, int source, int target)
{
    if (result < 0 || source == target || shim_in_vfork_child())
        return result;
    if (fd_table_tracked(source) || fd_table_tracked(target))
        fd_table_share(source, target);
    return result;
}

/* dup2 onto the shim's own descriptor: move it away first. */
static void shim_protect_target(int fd, int target)
{
    if (SHIM_UNLIKELY(fd_table_tracked(target)) && fd != target && !shim_guarded() &&
        !shim_in_vfork_child() && shim_is_internal_fd(target))
        shim_relocate_internal_fd(target, target);
}

SHIM_EXPORT int dup2(int fd, int target)
{
    shim_protect_target(fd, target);
    return shim_duplicated_onto(REAL(dup2)(fd, target), fd, target);
}

SHIM_EXPORT int dup3(int fd, int target, int flags)
{
    shim_protect_target(fd, target);
    return shim_duplicated_onto(REAL(dup3)(fd, target, flags), fd, target);
}

/* fcntl's third argument is an int or a pointer depending on the command;
 * passing it on as a pointer-sized value is what the kernel ABI expects. */
static int shim_fcntl_common(int (*real_fcntl)(int, int, ...), int fd, int command,
                             void *argument)
{
    int result = real_fcntl(fd, command, argument);
    if (command == F_DUPFD || command == F_DUPFD_CLOEXEC)
        return shim_duplicated(result, fd);
    return result;
}

SHIM_EXPORT int fcntl(int fd, int command, ...)
{
    va_list arguments;
    va_start(arguments, command);
    void *argument = va_arg(arguments, void *);
    va_end(arguments);
    return shim_fcntl_common(REAL(fcntl), fd, command, argument);
}

/* With a 64-bit off_t glibc's fcntl64 is fcntl under a second name (the
 * struct flock of F_GETLK and friends is the same); so is ours. */
SHIM_EXPORT int fcntl64(int fd, int command, ...) __attribute__((alias("fcntl")));
