/* io_open.c - wrappers of the open family.  Each calls the real function
 * first; a successful open of a data file or a checkpoint is then tracked
 * (shim_track_opened).  openat's mode argument exists only with O_CREAT or
 * O_TMPFILE, so it is read only then. */
#include <fcntl.h>
#include <stdarg.h>

#include "real_functions.h"
#include "shim.h"

static inline int shim_opened(int fd, int dirfd, const char *path, int flags)
{
    if (fd < 0 || !shim_paths_active())
        return fd;
    return shim_track_opened(fd, dirfd, path, flags);
}

static inline bool shim_flags_take_mode(int flags)
{
    return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
}

#define SHIM_READ_MODE(flags, last_argument, mode)       \
    mode_t mode = 0;                                     \
    if (shim_flags_take_mode(flags)) {                   \
        va_list arguments;                               \
        va_start(arguments, last_argument);              \
        mode = (mode_t)va_arg(arguments, int);           \
        va_end(arguments);                               \
    }

SHIM_EXPORT int open(const char *path, int flags, ...)
{
    SHIM_READ_MODE(flags, flags, mode);
    return shim_opened(REAL(open)(path, flags, mode), AT_FDCWD, path, flags);
}

SHIM_EXPORT int open64(const char *path, int flags, ...)
{
    SHIM_READ_MODE(flags, flags, mode);
    return shim_opened(REAL(open64)(path, flags, mode), AT_FDCWD, path, flags);
}

SHIM_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    SHIM_READ_MODE(flags, flags, mode);
    return shim_opened(REAL(openat)(dirfd, path, flags, mode), dirfd, path, flags);
}

SHIM_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    SHIM_READ_MODE(flags, flags, mode);
    return shim_opened(REAL(openat64)(dirfd, path, flags, mode), dirfd, path, flags);
}

SHIM_EXPORT int __open_2(const char *path, int flags)
{
    return shim_opened(REAL(__open_2)(path, flags), AT_FDCWD, path, flags);
}

SHIM_EXPORT int __open64_2(const char *path, int flags)
{
    return shim_opened(REAL(__open64_2)(path, flags), AT_FDCWD, path, flags);
}

SHIM_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    return shim_opened(REAL(__openat_2)(dirfd, path, flags), dirfd, path, flags);
}

SHIM_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    return shim_opened(REAL(__openat64_2)(dirfd, path, flags), dirfd, path, flags);
}

SHIM_EXPORT int creat(const char *path, mode_t mode)
{
    return shim_opened(REAL(creat)(path, mode), AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC);
}

SHIM_EXPORT int creat64(const char *path, mode_t mode)
{
    return shim_opened(REAL(creat64)(path, mode), AT_FDCWD, path,
                       O_WRONLY | O_CREAT | O_TRUNC);
}
