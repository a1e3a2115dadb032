/* real_functions.h - the libc functions the shim wraps, resolved once with
 * dlsym(RTLD_NEXT, ...).
 *
 * One X-macro lists every wrapped function with its type; it generates the
 * table of pointers and the table of names the resolver walks, so adding a
 * wrapper is one line here plus the wrapper itself. */
#ifndef ADAPTSHIM_REAL_FUNCTIONS_H
#define ADAPTSHIM_REAL_FUNCTIONS_H

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

struct statx;

#define SHIM_REAL_FUNCTION_LIST(X)                                                         \
    X(open, int, (const char *, int, ...))                                                 \
    X(open64, int, (const char *, int, ...))                                               \
    X(openat, int, (int, const char *, int, ...))                                          \
    X(openat64, int, (int, const char *, int, ...))                                        \
    X(__open_2, int, (const char *, int))                                                  \
    X(__open64_2, int, (const char *, int))                                                \
    X(__openat_2, int, (int, const char *, int))                                           \
    X(__openat64_2, int, (int, const char *, int))                                         \
    X(creat, int, (const char *, mode_t))                                                  \
    X(creat64, int, (const char *, mode_t))                                                \
    X(close, int, (int))                                                                   \
    X(close_range, int, (unsigned int, unsigned int, int))                                 \
    X(closefrom, void, (int))                                                              \
    X(dup, int, (int))                                                                     \
    X(dup2, int, (int, int))                                                               \
    X(dup3, int, (int, int, int))                                                          \
    X(fcntl, int, (int, int, ...))                                                         \
    X(fcntl64, int, (int, int, ...))                                                       \
    X(read, ssize_t, (int, void *, size_t))                                                \
    X(__read_chk, ssize_t, (int, void *, size_t, size_t))                                  \
    X(pread, ssize_t, (int, void *, size_t, off_t))                                        \
    X(pread64, ssize_t, (int, void *, size_t, off64_t))                                    \
    X(__pread_chk, ssize_t, (int, void *, size_t, off_t, size_t))                          \
    X(__pread64_chk, ssize_t, (int, void *, size_t, off64_t, size_t))                      \
    X(readv, ssize_t, (int, const struct iovec *, int))                                    \
    X(preadv, ssize_t, (int, const struct iovec *, int, off_t))                            \
    X(preadv64, ssize_t, (int, const struct iovec *, int, off64_t))                        \
    X(preadv2, ssize_t, (int, const struct iovec *, int, off_t, int))                      \
    X(preadv64v2, ssize_t, (int, const struct iovec *, int, off64_t, int))                 \
    X(write, ssize_t, (int, const void *, size_t))                                         \
    X(pwrite64, ssize_t, (int, const void *, size_t, off64_t))                             \
    X(copy_file_range, ssize_t, (int, off64_t *, int, off64_t *, size_t, unsigned int))    \
    X(sendfile, ssize_t, (int, int, off_t *, size_t))                                      \
    X(sendfile64, ssize_t, (int, int, off64_t *, size_t))                                  \
    X(splice, ssize_t, (int, off64_t *, int, off64_t *, size_t, unsigned int))             \
    X(lseek, off_t, (int, off_t, int))                                                     \
    X(lseek64, off64_t, (int, off64_t, int))                                               \
    X(fstat, int, (int, struct stat *))                                                    \
    X(fstat64, int, (int, struct stat64 *))                                                \
    X(stat, int, (const char *, struct stat *))                                            \
    X(stat64, int, (const char *, struct stat64 *))                                        \
    X(lstat, int, (const char *, struct stat *))                                           \
    X(lstat64, int, (const char *, struct stat64 *))                                       \
    X(fstatat, int, (int, const char *, struct stat *, int))                               \
    X(fstatat64, int, (int, const char *, struct stat64 *, int))                           \
    X(statx, int, (int, const char *, int, unsigned int, struct statx *))                  \
    X(__fxstat, int, (int, int, struct stat *))                                            \
    X(__fxstat64, int, (int, int, struct stat64 *))                                        \
    X(__xstat, int, (int, const char *, struct stat *))                                    \
    X(__xstat64, int, (int, const char *, struct stat64 *))                                \
    X(__lxstat, int, (int, const char *, struct stat *))                                   \
    X(__lxstat64, int, (int, const char *, struct stat64 *))                               \
    X(__fxstatat, int, (int, int, const char *, struct stat *, int))                       \
    X(__fxstatat64, int, (int, int, const char *, struct stat64 *, int))                   \
    X(mmap, void *, (void *, size_t, int, int, int, off_t))                                \
    X(mmap64, void *, (void *, size_t, int, int, int, off64_t))                            \
    X(munmap, int, (void *, size_t))                                                       \
    X(mremap, void *, (void *, size_t, size_t, int, ...))                                  \
    X(fsync, int, (int))                                                                   \
    X(rename, int, (const char *, const char *))                                           \
    X(renameat, int, (int, const char *, int, const char *))                               \
    X(renameat2, int, (int, const char *, int, const char *, unsigned int))                \
    X(unlink, int, (const char *))                                                         \
    X(mkdir, int, (const char *, mode_t))                                                  \
    X(opendir, DIR *, (const char *))                                                      \
    X(readdir, struct dirent *, (DIR *))                                                   \
    X(closedir, int, (DIR *))                                                              \
    X(fopen, FILE *, (const char *, const char *))                                         \
    X(fopen64, FILE *, (const char *, const char *))                                       \
    X(freopen, FILE *, (const char *, const char *, FILE *))                               \
    X(freopen64, FILE *, (const char *, const char *, FILE *))                             \
    X(fdopen, FILE *, (int, const char *))                                                 \
    X(fclose, int, (FILE *))                                                               \
    X(fseek, int, (FILE *, long, int))                                                     \
    X(fseeko, int, (FILE *, off_t, int))                                                   \
    X(fseeko64, int, (FILE *, off64_t, int))                                               \
    X(rewind, void, (FILE *))                                                              \
    X(fsetpos, int, (FILE *, const fpos_t *))                                              \
    X(fsetpos64, int, (FILE *, const fpos64_t *))                                          \
    X(fileno, int, (FILE *))

#define SHIM_DECLARE_REAL_POINTER(name, return_type, arguments) return_type(*name) arguments;
struct shim_real_functions {
    SHIM_REAL_FUNCTION_LIST(SHIM_DECLARE_REAL_POINTER)
};
#undef SHIM_DECLARE_REAL_POINTER

extern struct shim_real_functions shim_real;

/* glibc entry points that its headers declare only under _FORTIFY_SOURCE, or
 * no longer declare at all (the legacy stat names), but that compiled
 * programs call and the shim therefore defines. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buffer, size_t size, size_t buffer_size);
ssize_t __pread_chk(int fd, void *buffer, size_t size, off_t offset, size_t buffer_size);
ssize_t __pread64_chk(int fd, void *buffer, size_t size, off64_t offset, size_t buffer_size);
int __fxstat(int version, int fd, struct stat *status);
int __fxstat64(int version, int fd, struct stat64 *status);
int __xstat(int version, const char *path, struct stat *status);
int __xstat64(int version, const char *path, struct stat64 *status);
int __lxstat(int version, const char *path, struct stat *status);
int __lxstat64(int version, const char *path, struct stat64 *status);
int __fxstatat(int version, int dirfd, const char *path, struct stat *status, int flags);
int __fxstatat64(int version, int dirfd, const char *path, struct stat64 *status, int flags);

/* Resolves every entry once (idempotent, thread-safe).  Entries glibc does
 * not export stay NULL; their wrappers then fail with ENOSYS. */
void shim_resolve_real_functions(void);

/* The real function, resolving the table on first use. */
#define REAL(name) (__builtin_expect(shim_real.name != NULL, 1) ? shim_real.name \
                    : (shim_resolve_real_functions(), shim_real.name))

#endif
