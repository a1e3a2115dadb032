/* io_copy.c - kernel-side copies out of a data file (copy_file_range,
 * sendfile, splice) would read the physical file behind the shim's back:
 * when the source is a view they are emulated with a read of the view into a
 * bounce buffer and a write to the destination.  cat(1) and Python's
 * shutil use them. */
#include <errno.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "real_functions.h"
#include "shim.h"

#define SHIM_COPY_CHUNK 65536

/* The view slot of fd, held until shim_copy_done; NULL when not a view. */
static inline struct fd_slot *shim_copy_source_slot(int fd)
{
    if (SHIM_LIKELY(!fd_table_tracked(fd)) || shim_guarded())
        return NULL;
    struct fd_slot *slot = fd_table_acquire(fd);
    if (slot != NULL && slot->kind != FD_SLOT_VIEW) {
        fd_slot_release(slot);
        return NULL;
    }
    return slot;
}

static ssize_t shim_copy_done(struct fd_slot *slot, ssize_t result)
{
    int saved = errno;
    fd_slot_release(slot);
    errno = saved;
    return result;
}

/* Copies up to `length` view bytes to out_fd, from *offset (advanced) or
 * from the cursor's offset when offset is NULL. */
static ssize_t shim_copy_from_view(struct fd_slot *slot, int64_t *offset, int out_fd,
                                   int64_t *out_offset, size_t length)
{
    char buffer[SHIM_COPY_CHUNK];
    size_t total = 0;
    while (total < length) {
        size_t want = length - total < sizeof buffer ? length - total : sizeof buffer;
        ssize_t got;
        if (offset != NULL)
            got = view_cursor_pread(&slot->cursor, buffer, want, (uint64_t)*offset);
        else
            got = view_cursor_read(&slot->cursor, buffer, want);
        if (got <= 0)
            break;
        size_t written = 0;
        while (written < (size_t)got) {
            ssize_t put = out_offset != NULL
                              ? REAL(pwrite64)(out_fd, buffer + written, (size_t)got - written,
                                               *out_offset + (int64_t)written)
                              : REAL(write)(out_fd, buffer + written, (size_t)got - written);
            if (put < 0) {
                if (errno == EINTR)
                    continue;
                return total > 0 ? (ssize_t)total : -1;
            }
            written += (size_t)put;
        }
        if (offset != NULL)
            *offset += got;
        if (out_offset != NULL)
            *out_offset += got;
        total += (size_t)got;
        if ((size_t)got < want)
            break;
    }
    return (ssize_t)total;
}

SHIM_EXPORT ssize_t copy_file_range(int in_fd, off64_t *in_offset, int out_fd,
                                    off64_t *out_offset, size_t length, unsigned int flags)
{
    struct fd_slot *slot = shim_copy_source_slot(in_fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(copy_file_range)(in_fd, in_offset, out_fd, out_offset, length, flags);
    return shim_copy_done(slot, shim_copy_from_view(slot, (int64_t *)in_offset, out_fd,
                                                    (int64_t *)out_offset, length));
}

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
    struct fd_slot *slot = shim_copy_source_slot(in_fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(sendfile)(out_fd, in_fd, offset, count);
    return shim_copy_done(slot,
                          shim_copy_from_view(slot, (int64_t *)offset, out_fd, NULL, count));
}

SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
    struct fd_slot *slot = shim_copy_source_slot(in_fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(sendfile64)(out_fd, in_fd, offset, count);
    return shim_copy_done(slot,
                          shim_copy_from_view(slot, (int64_t *)offset, out_fd, NULL, count));
}

SHIM_EXPORT ssize_t splice(int in_fd, off64_t *in_offset, int out_fd, off64_t *out_offset,
                           size_t length, unsigned int flags)
{
    struct fd_slot *slot = shim_copy_source_slot(in_fd);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(splice)(in_fd, in_offset, out_fd, out_offset, length, flags);
    return shim_copy_done(slot, shim_copy_from_view(slot, (int64_t *)in_offset, out_fd,
                                                    (int64_t *)out_offset, length));
}
