/* full_disk.c - a preload library for tests: the disk under one directory is
 * full.
 *
 *   LD_PRELOAD="libadaptshim.so full_disk.so" FULL_DISK_DIRECTORY=/abs/dir
 *
 * Every write(2)-family call on a descriptor whose file lies under the
 * directory fails with ENOSPC, as on a full filesystem (creating, renaming
 * and removing files still works, as it usually does on one).  Listed after
 * the shim, it is what the shim's own RTLD_NEXT lookups resolve to, so the
 * shim's writes of its state files meet the full disk as well as the
 * trainer's.  Integration tests use it where they cannot mount a small
 * filesystem of their own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* True when fd's file is under FULL_DISK_DIRECTORY. */
static bool on_full_disk(int fd)
{
    const char *directory = getenv("FULL_DISK_DIRECTORY");
    if (directory == NULL || directory[0] == '\0')
        return false;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, target, sizeof target - 1);
    if (length <= 0)
        return false;
    target[length] = '\0';
    size_t prefix = strlen(directory);
    return strncmp(target, directory, prefix) == 0 && target[prefix] == '/';
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

EXPORT ssize_t write(int fd, const void *buffer, size_t size)
{
    if (size > 0 && on_full_disk(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return NEXT(write)(fd, buffer, size);
}

EXPORT ssize_t pwrite(int fd, const void *buffer, size_t size, off_t offset)
{
    if (size > 0 && on_full_disk(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return NEXT(pwrite)(fd, buffer, size, offset);
}

EXPORT ssize_t pwrite64(int fd, const void *buffer, size_t size, off_t offset)
{
    if (size > 0 && on_full_disk(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return NEXT(pwrite64)(fd, buffer, size, offset);
}

EXPORT ssize_t writev(int fd, const struct iovec *vector, int count)
{
    if (count > 0 && on_full_disk(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return NEXT(writev)(fd, vector, count);
}
