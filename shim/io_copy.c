/* io_copy.c - kernel-side copies out of a data file (copy_file_range,
 * sendfile, splice) would read the physical file behind the shim's back:
 * when the source is a view they are emulated with a read of the view into a
 * bounce buffer and a write to the destination.  cat(1) and Python's
 * shutil use them.  The view gives up only the bytes the destination took:
 * a full non-blocking pipe leaves the rest unread, to be copied again. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "real_functions.h"
#include "shim.h"

#define SHIM_COPY_CHUNK 65536

/* Writes what it can of buffer[0, size) to out_fd (at *out_offset + the
 * bytes written so far, if out_offset is not NULL).  Returns the bytes
 * written; *error is 0, or the errno that stopped it short. */
static size_t shim_copy_write(int out_fd, const int64_t *out_offset, const char *buffer,
                              size_t size, int *error)
{
    size_t written = 0;
    *error = 0;
    while (written < size) {
        ssize_t put = out_offset != NULL
                          ? REAL(pwrite64)(out_fd, buffer + written, size - written,
                                           *out_offset + (int64_t)written)
                          : REAL(write)(out_fd, buffer + written, size - written);
        if (put < 0) {
            *error = errno;
            break;
        }
        if (put == 0) {
            *error = EAGAIN;   /* a destination that takes nothing, without saying why */
            break;
        }
        written += (size_t)put;
    }
    return written;
}

static ssize_t shim_copy_done(struct fd_slot *slot, ssize_t result)
{
    int saved = errno;
    fd_slot_release(slot);
    errno = saved;
    return result;
}

/* Copies up to `length` view bytes to out_fd, from *offset (advanced) or
 * from the cursor when offset is NULL.  Only the bytes out_fd took are
 * consumed: a full non-blocking pipe or socket (EAGAIN), a signal (EINTR) or
 * any other write error stops the copy with the view where the destination
 * left it.  As the kernel's copies, it returns the bytes copied when there
 * are any, otherwise -1 with the destination's errno. */
static ssize_t shim_copy_from_view(struct fd_slot *slot, int64_t *offset, int out_fd,
                                   int64_t *out_offset, size_t length)
{
    if (offset != NULL && *offset < 0) {
        errno = EINVAL;
        return -1;
    }
    char buffer[SHIM_COPY_CHUNK];
    size_t total = 0;
    while (total < length) {
        size_t want = length - total < sizeof buffer ? length - total : sizeof buffer;
        uint64_t at = offset != NULL ? (uint64_t)*offset : 0;
        struct view_cursor_peek peek;
        ssize_t got = view_cursor_peek(&slot->cursor, buffer, want, offset != NULL ? &at : NULL,
                                       &peek);
        if (got <= 0)
            break;
        int error;
        size_t written = shim_copy_write(out_fd, out_offset, buffer, (size_t)got, &error);
        view_cursor_consume(&slot->cursor, &peek, written);
        if (offset != NULL)
            *offset += (int64_t)written;
        if (out_offset != NULL)
            *out_offset += (int64_t)written;
        total += written;
        if (error != 0) {
            if (total > 0)
                break;
            errno = error;
            return -1;
        }
        if ((size_t)got < want)
            break;
    }
    return (ssize_t)total;
}

/* The destinations the kernel's own call accepts: copy_file_range writes
 * regular files only, splice from a file writes pipes only (EINVAL
 * otherwise, as without the shim). */
static bool shim_copy_destination_is(int out_fd, mode_t type)
{
    struct stat status;
    if (REAL(fstat)(out_fd, &status) != 0)
        return false;   /* errno EBADF: as the kernel's */
    if ((status.st_mode & S_IFMT) == type)
        return true;
    errno = EINVAL;
    return false;
}

/* copy_file_range and splice take the same arguments; each accepts one
 * kind of destination (a regular file, a pipe). */
typedef ssize_t (*shim_range_copy_fn)(int, off64_t *, int, off64_t *, size_t, unsigned int);

static ssize_t shim_copy_range(shim_range_copy_fn real, mode_t destination_type, int in_fd,
                               off64_t *in_offset, int out_fd, off64_t *out_offset,
                               size_t length, unsigned int flags)
{
    struct fd_slot *slot = shim_view_slot_acquire(in_fd);
    if (SHIM_LIKELY(slot == NULL))
        return real(in_fd, in_offset, out_fd, out_offset, length, flags);
    if (!shim_copy_destination_is(out_fd, destination_type))
        return shim_copy_done(slot, -1);
    return shim_copy_done(slot, shim_copy_from_view(slot, (int64_t *)in_offset, out_fd,
                                                    (int64_t *)out_offset, length));
}

SHIM_EXPORT ssize_t copy_file_range(int in_fd, off64_t *in_offset, int out_fd,
                                    off64_t *out_offset, size_t length, unsigned int flags)
{
    return shim_copy_range(REAL(copy_file_range), S_IFREG, in_fd, in_offset, out_fd,
                           out_offset, length, flags);
}

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
    struct fd_slot *slot = shim_view_slot_acquire(in_fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(sendfile)(out_fd, in_fd, offset, count);
    return shim_copy_done(slot,
                          shim_copy_from_view(slot, (int64_t *)offset, out_fd, NULL, count));
}

/* With a 64-bit off_t glibc's sendfile64 is sendfile under a second name;
 * so is ours. */
SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
    __attribute__((alias("sendfile")));

SHIM_EXPORT ssize_t splice(int in_fd, off64_t *in_offset, int out_fd, off64_t *out_offset,
                           size_t length, unsigned int flags)
{
    return shim_copy_range(REAL(splice), S_IFIFO, in_fd, in_offset, out_fd, out_offset, length,
                           flags);
}
