/* real_functions.h - the libc functions the shim wraps, resolved once with
 * dlsym(RTLD_NEXT, ...).
 *
 * One X-macro lists every wrapped function with its type; it generates the
 * table of pointers, the table of names the resolver walks and a stand-in
 * for each function, so adding a wrapper is one line here plus the wrapper
 * itself.
 *
 * A function the resolver cannot find (a C library older than the function,
 * or the library loaded after libc, e.g. by dlopen, so that RTLD_NEXT finds
 * nothing) is never called through a NULL pointer: its slot holds the
 * stand-in, which writes one line on stderr naming the function and then,
 * by the entry's policy,
 *   required  aborts: the shim's own files (snapshots, the job record, its
 *             descriptor of each data file) need it, or the function returns
 *             nothing through which a failure could be reported (closefrom,
 *             rewind); running on would lose or corrupt state silently;
 *   optional  fails with ENOSYS (once per function the line is written),
 *             as the kernel answers a system call it does not have.
 * The last column is what the stand-in returns. */
#ifndef ADAPTSHIM_REAL_FUNCTIONS_H
#define ADAPTSHIM_REAL_FUNCTIONS_H

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

struct statx;

#define SHIM_REAL_FUNCTION_LIST(X)                                                                \
    X(open, required, int, (const char *, int, ...), -1)                                          \
    X(open64, optional, int, (const char *, int, ...), -1)                                        \
    X(openat, optional, int, (int, const char *, int, ...), -1)                                   \
    X(openat64, optional, int, (int, const char *, int, ...), -1)                                 \
    X(__open_2, optional, int, (const char *, int), -1)                                           \
    X(__open64_2, optional, int, (const char *, int), -1)                                         \
    X(__openat_2, optional, int, (int, const char *, int), -1)                                    \
    X(__openat64_2, optional, int, (int, const char *, int), -1)                                  \
    X(creat, optional, int, (const char *, mode_t), -1)                                           \
    X(creat64, optional, int, (const char *, mode_t), -1)                                         \
    X(close, required, int, (int), -1)                                                            \
    X(close_range, optional, int, (unsigned, unsigned, int), -1)                                  \
    X(closefrom, required, void, (int), )                                                         \
    X(dup, optional, int, (int), -1)                                                              \
    X(dup2, optional, int, (int, int), -1)                                                        \
    X(dup3, optional, int, (int, int, int), -1)                                                   \
    X(fcntl, required, int, (int, int, ...), -1)                                                  \
    X(read, required, ssize_t, (int, void *, size_t), -1)                                         \
    X(__read_chk, optional, ssize_t, (int, void *, size_t, size_t), -1)                           \
    X(pread, required, ssize_t, (int, void *, size_t, off_t), -1)                                 \
    X(__pread_chk, optional, ssize_t, (int, void *, size_t, off_t, size_t), -1)                   \
    X(readv, optional, ssize_t, (int, const struct iovec *, int), -1)                             \
    X(preadv, optional, ssize_t, (int, const struct iovec *, int, off_t), -1)                     \
    X(preadv2, optional, ssize_t, (int, const struct iovec *, int, off_t, int), -1)               \
    X(write, required, ssize_t, (int, const void *, size_t), -1)                                  \
    X(pwrite64, optional, ssize_t, (int, const void *, size_t, off64_t), -1)                      \
    X(copy_file_range, optional, ssize_t, (int, off64_t *, int, off64_t *, size_t, unsigned), -1) \
    X(sendfile, optional, ssize_t, (int, int, off_t *, size_t), -1)                               \
    X(splice, optional, ssize_t, (int, off64_t *, int, off64_t *, size_t, unsigned), -1)          \
    X(lseek, optional, off_t, (int, off_t, int), -1)                                              \
    X(fstat, required, int, (int, struct stat *), -1)                                             \
    X(fstat64, optional, int, (int, struct stat64 *), -1)                                         \
    X(stat, required, int, (const char *, struct stat *), -1)                                     \
    X(stat64, optional, int, (const char *, struct stat64 *), -1)                                 \
    X(lstat, optional, int, (const char *, struct stat *), -1)                                    \
    X(lstat64, optional, int, (const char *, struct stat64 *), -1)                                \
    X(fstatat, required, int, (int, const char *, struct stat *, int), -1)                        \
    X(fstatat64, optional, int, (int, const char *, struct stat64 *, int), -1)                    \
    X(statx, optional, int, (int, const char *, int, unsigned, struct statx *), -1)               \
    X(__fxstat, optional, int, (int, int, struct stat *), -1)                                     \
    X(__fxstat64, optional, int, (int, int, struct stat64 *), -1)                                 \
    X(__xstat, optional, int, (int, const char *, struct stat *), -1)                             \
    X(__xstat64, optional, int, (int, const char *, struct stat64 *), -1)                         \
    X(__lxstat, optional, int, (int, const char *, struct stat *), -1)                            \
    X(__lxstat64, optional, int, (int, const char *, struct stat64 *), -1)                        \
    X(__fxstatat, optional, int, (int, int, const char *, struct stat *, int), -1)                \
    X(__fxstatat64, optional, int, (int, int, const char *, struct stat64 *, int), -1)            \
    X(mmap, required, void *, (void *, size_t, int, int, int, off_t), MAP_FAILED)                 \
    X(munmap, required, int, (void *, size_t), -1)                                                \
    X(mremap, optional, void *, (void *, size_t, size_t, int, ...), MAP_FAILED)                   \
    X(fsync, required, int, (int), -1)                                                            \
    X(rename, required, int, (const char *, const char *), -1)                                    \
    X(renameat, optional, int, (int, const char *, int, const char *), -1)                        \
    X(renameat2, optional, int, (int, const char *, int, const char *, unsigned), -1)             \
    X(unlink, required, int, (const char *), -1)                                                  \
    X(mkdir, required, int, (const char *, mode_t), -1)                                           \
    X(opendir, required, DIR *, (const char *), NULL)                                             \
    X(readdir, required, struct dirent *, (DIR *), NULL)                                          \
    X(closedir, required, int, (DIR *), -1)                                                       \
    X(fopen, required, FILE *, (const char *, const char *), NULL)                                \
    X(fopen64, optional, FILE *, (const char *, const char *), NULL)                              \
    X(freopen, optional, FILE *, (const char *, const char *, FILE *), NULL)                      \
    X(freopen64, optional, FILE *, (const char *, const char *, FILE *), NULL)                    \
    X(fdopen, required, FILE *, (int, const char *), NULL)                                        \
    X(fclose, required, int, (FILE *), -1)                                                        \
    X(fcloseall, optional, int, (void), -1)                                                       \
    X(fseek, optional, int, (FILE *, long, int), -1)                                              \
    X(fseeko, optional, int, (FILE *, off_t, int), -1)                                            \
    X(fseeko64, required, int, (FILE *, off64_t, int), -1)                                        \
    X(rewind, required, void, (FILE *), )                                                         \
    X(fsetpos, optional, int, (FILE *, const fpos_t *), -1)                                       \
    X(fsetpos64, optional, int, (FILE *, const fpos64_t *), -1)                                   \
    X(fileno, required, int, (FILE *), -1)

#define SHIM_DECLARE_REAL_POINTER(name, policy, return_type, arguments, failure) \
    return_type(*name) arguments;
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

#define SHIM_REAL_INDEX(name, policy, return_type, arguments, failure) SHIM_REAL_INDEX_##name,
enum shim_real_index { SHIM_REAL_FUNCTION_LIST(SHIM_REAL_INDEX) SHIM_REAL_COUNT };
#undef SHIM_REAL_INDEX

/* Resolves every entry once (idempotent, thread-safe).  An entry the C
 * library does not export gets its stand-in (see the top of this file). */
void shim_resolve_real_functions(void);

/* Entry `index`, never NULL: resolves the table on first use; called from
 * inside that resolution (dlsym reached a wrapper through an allocator), it
 * looks up that one entry on its own.  Returns a function pointer. */
void *shim_real_function(enum shim_real_index index);

/* mmap64, pread64, __pread64_chk, preadv64, preadv64v2, lseek64, fcntl64
 * and sendfile64 are aliases of the wrappers without 64, as glibc's own
 * are, and have no entry here: that holds only where off_t is off64_t. */
_Static_assert(sizeof(off_t) == sizeof(off64_t),
               "the 64-bit twins are aliases only for a 64-bit off_t");

/* The real function, resolving the table on first use. */
#define REAL(name) (__builtin_expect(shim_real.name != NULL, 1) \
                    ? shim_real.name \
                    : (__typeof__(shim_real.name))shim_real_function(SHIM_REAL_INDEX_##name))

#endif
