/* sysio.c - default table of libc entry points for the runtime's own I/O. */
#include "sysio.h"

#include <sys/mman.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

struct runtime_sysio runtime_sysio = {
    .open = open,
    .close = close,
    .read = read,
    .write = write,
    .pread = pread,
    .fstat = fstat,
    .stat = stat,
    .fsync = fsync,
    .rename = rename,
    .unlink = unlink,
    .mkdir = mkdir,
    .opendir = opendir,
    .readdir = readdir,
    .closedir = closedir,
    .mmap = mmap,
    .munmap = munmap,
};

int sysio_write_all(int fd, const void *buffer, size_t size)
{
    const char *cursor = buffer;
    while (size > 0) {
        ssize_t written = runtime_sysio.write(fd, cursor, size);
        if (written < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (written == 0) {
            /* no progress and no error: do not spin; report it as an I/O error */
            errno = EIO;
            return -1;
        }
        cursor += written;
        size -= (size_t)written;
    }
    return 0;
}

ssize_t sysio_pread_full(int fd, void *buffer, size_t size, off_t offset)
{
    char *cursor = buffer;
    size_t total = 0;
    while (total < size) {
        ssize_t got = runtime_sysio.pread(fd, cursor + total, size - total, offset + (off_t)total);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (got == 0)
            break;
        total += (size_t)got;
    }
    return (ssize_t)total;
}
