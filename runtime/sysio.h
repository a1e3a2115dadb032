/* sysio.h - the libc entry points the runtime itself uses for its own files.
 *
 * Inside the preloaded library a plain call to open() or rename() would land
 * in the shim's own wrapper.  The runtime therefore calls through this table;
 * it starts out pointing at whatever the names resolve to (libc, in tests),
 * and the shim replaces every entry with the RTLD_NEXT function at start-up. */
#ifndef ADAPTSHIM_SYSIO_H
#define ADAPTSHIM_SYSIO_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <dirent.h>

struct runtime_sysio {
    int (*open)(const char *path, int flags, ...);
    int (*close)(int fd);
    ssize_t (*read)(int fd, void *buffer, size_t size);
    ssize_t (*write)(int fd, const void *buffer, size_t size);
    ssize_t (*pread)(int fd, void *buffer, size_t size, off_t offset);
    int (*fstat)(int fd, struct stat *status);
    int (*stat)(const char *path, struct stat *status);
    int (*fsync)(int fd);
    int (*rename)(const char *from, const char *to);
    int (*unlink)(const char *path);
    int (*mkdir)(const char *path, mode_t mode);
    DIR *(*opendir)(const char *path);
    struct dirent *(*readdir)(DIR *directory);
    int (*closedir)(DIR *directory);
    void *(*mmap)(void *address, size_t length, int protection, int flags, int fd,
                  off_t offset);
    int (*munmap)(void *address, size_t length);
};

extern struct runtime_sysio runtime_sysio;

/* Writes all of buffer, retrying on EINTR and short writes.  0, or -1 with
 * errno (EIO for a write that moves nothing). */
int sysio_write_all(int fd, const void *buffer, size_t size);
/* Reads exactly size bytes at offset unless EOF comes first; returns bytes read or -1. */
ssize_t sysio_pread_full(int fd, void *buffer, size_t size, off_t offset);

#endif
