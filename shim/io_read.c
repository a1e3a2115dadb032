/* io_read.c - wrappers of the read family.  Untracked descriptors take the
 * fast path: one table lookup and a branch, then the real function.  A
 * tracked one is held (a reference on its slot) for the whole call, so a
 * close() of it on another thread cannot free the slot under the read. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <unistd.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "steps.h"

extern void __chk_fail(void) __attribute__((noreturn));

/* Lets go of the slot and passes the call's result through, errno intact. */
static inline ssize_t shim_view_done(struct fd_slot *slot, ssize_t result)
{
    int saved = errno;
    fd_slot_release(slot);
    errno = saved;
    return result;
}

/* Reads of a train view are where steps end (for trainers whose reads run on
 * their MPI thread) and where an unsynchronized stop happens. */
static inline void shim_before_view_read(struct fd_slot *slot)
{
    if (slot->cursor.file->entry->role == DATA_ROLE_TRAIN && shim_configured())
        shim_steps_before_train_read();
}

static ssize_t shim_view_read(struct fd_slot *slot, int fd, void *buffer, size_t size)
{
    shim_before_view_read(slot);
    ssize_t got = view_cursor_read(&slot->cursor, buffer, size);
    /* (the offset under the file's lock: another thread may read this cursor) */
    log_trace("read fd %d: %zu requested, %zd delivered, offset now %lld", fd, size, got,
              (long long)view_cursor_seek(&slot->cursor, 0, SEEK_CUR));
    return got;
}

SHIM_EXPORT ssize_t read(int fd, void *buffer, size_t size)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(read)(fd, buffer, size);
    return shim_view_done(slot, shim_view_read(slot, fd, buffer, size));
}

SHIM_EXPORT ssize_t __read_chk(int fd, void *buffer, size_t size, size_t buffer_size)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(__read_chk)(fd, buffer, size, buffer_size);
    if (size > buffer_size)
        __chk_fail();
    return shim_view_done(slot, shim_view_read(slot, fd, buffer, size));
}

static ssize_t shim_view_pread(struct fd_slot *slot, int fd, void *buffer, size_t size,
                               int64_t offset)
{
    if (offset < 0) {
        errno = EINVAL;
        return -1;
    }
    shim_before_view_read(slot);
    ssize_t got = view_cursor_pread(&slot->cursor, buffer, size, (uint64_t)offset);
    log_trace("pread fd %d: %zu at %" PRId64 ", %zd delivered", fd, size, offset, got);
    return got;
}

SHIM_EXPORT ssize_t pread(int fd, void *buffer, size_t size, off_t offset)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(pread)(fd, buffer, size, offset);
    return shim_view_done(slot, shim_view_pread(slot, fd, buffer, size, offset));
}

/* With a 64-bit off_t glibc's pread64 is pread under a second name; so is
 * ours, and likewise for the other 64-bit twins below. */
SHIM_EXPORT ssize_t pread64(int fd, void *buffer, size_t size, off64_t offset)
    __attribute__((alias("pread")));

SHIM_EXPORT ssize_t __pread_chk(int fd, void *buffer, size_t size, off_t offset,
                                size_t buffer_size)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(__pread_chk)(fd, buffer, size, offset, buffer_size);
    if (size > buffer_size)
        __chk_fail();
    return shim_view_done(slot, shim_view_pread(slot, fd, buffer, size, offset));
}

SHIM_EXPORT ssize_t __pread64_chk(int fd, void *buffer, size_t size, off64_t offset,
                                  size_t buffer_size) __attribute__((alias("__pread_chk")));

static ssize_t shim_view_readv(struct fd_slot *slot, const struct iovec *vector, int count)
{
    if (count < 0 || count > IOV_MAX) {
        errno = EINVAL;
        return -1;
    }
    shim_before_view_read(slot);
    return view_cursor_readv(&slot->cursor, vector, count);
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *vector, int count)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(readv)(fd, vector, count);
    return shim_view_done(slot, shim_view_readv(slot, vector, count));
}

static ssize_t shim_view_preadv(struct fd_slot *slot, const struct iovec *vector, int count,
                                int64_t offset)
{
    if (count < 0 || count > IOV_MAX || offset < 0) {
        errno = EINVAL;
        return -1;
    }
    shim_before_view_read(slot);
    return view_cursor_preadv(&slot->cursor, vector, count, (uint64_t)offset);
}

SHIM_EXPORT ssize_t preadv(int fd, const struct iovec *vector, int count, off_t offset)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(preadv)(fd, vector, count, offset);
    return shim_view_done(slot, shim_view_preadv(slot, vector, count, offset));
}

SHIM_EXPORT ssize_t preadv64(int fd, const struct iovec *vector, int count, off64_t offset)
    __attribute__((alias("preadv")));

/* preadv2 with offset -1 reads at (and moves) the current offset. */
SHIM_EXPORT ssize_t preadv2(int fd, const struct iovec *vector, int count, off_t offset,
                            int flags)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(preadv2)(fd, vector, count, offset, flags);
    if (offset == -1)
        return shim_view_done(slot, shim_view_readv(slot, vector, count));
    return shim_view_done(slot, shim_view_preadv(slot, vector, count, offset));
}

SHIM_EXPORT ssize_t preadv64v2(int fd, const struct iovec *vector, int count, off64_t offset,
                               int flags) __attribute__((alias("preadv2")));

static off64_t shim_view_seek(struct fd_slot *slot, int fd, off64_t offset, int whence)
{
    off64_t result = view_cursor_seek(&slot->cursor, offset, whence);
    log_trace("lseek fd %d: %" PRId64 " whence %d -> %" PRId64, fd, (int64_t)offset, whence,
              (int64_t)result);
    return result;
}

SHIM_EXPORT off_t lseek(int fd, off_t offset, int whence)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(lseek)(fd, offset, whence);
    return shim_view_done(slot, shim_view_seek(slot, fd, offset, whence));
}

SHIM_EXPORT off64_t lseek64(int fd, off64_t offset, int whence) __attribute__((alias("lseek")));
