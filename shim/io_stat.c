/* io_stat.c - wrappers of the stat family: a data file reports the size of
 * its view (adaptshim(7) "WHAT THE TRAINER SEES"), by descriptor or by path; a stat of the path
 * once the trainer is done with a pass reports the view of the next one
 * (view_cursor_path_stat).  Everything else is untouched. */
#include <fcntl.h>
#include <sys/stat.h>

#include "real_functions.h"
#include "shim.h"

/* The view's size, and its block size: buffered readers that size their
 * buffer from st_blksize then read one record at a time (adaptshim(7) "Read-ahead outside the
 * shim"). */
/* The block size a view reports in st_blksize and stx_blksize; 0: keep
 * the file's own. */
static uint32_t shim_view_block_size(const struct dataset_file *file)
{
    uint64_t block_size = dataset_view_block_size(file);
    return block_size <= INT32_MAX ? (uint32_t)block_size : 0;
}

static void shim_stat_set_view(struct stat *status, struct dataset_file *file, uint64_t size)
{
    status->st_size = (off_t)size;
    status->st_blocks = (blkcnt_t)((size + 511) / 512);
    uint32_t block_size = shim_view_block_size(file);
    if (block_size != 0)
        status->st_blksize = (blksize_t)block_size;
}

static int shim_stat_fd_result(int result, int fd, struct stat *status)
{
    if (result != 0)
        return result;
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (slot != NULL)
        shim_stat_set_view(status, slot->cursor.file,
                           view_cursor_size(&slot->cursor, SIZE_QUESTION_ANY));
    fd_slot_release(slot);
    return result;
}

/* After a successful path stat: a regular data file gets its view's size. */
static int shim_stat_path_result(int result, int dirfd, const char *path, struct stat *status)
{
    if (result != 0 || !S_ISREG(status->st_mode) || !shim_paths_active())
        return result;
    bool matched;
    struct dataset_file *file = shim_dataset_for_path(dirfd, path, &matched);
    if (file != NULL)
        shim_stat_set_view(status, file, view_cursor_path_stat(file));
    return result;
}

SHIM_EXPORT int fstat(int fd, struct stat *status)
{
    return shim_stat_fd_result(REAL(fstat)(fd, status), fd, status);
}

SHIM_EXPORT int fstat64(int fd, struct stat64 *status)
{
    return shim_stat_fd_result(REAL(fstat64)(fd, status), fd, (struct stat *)status);
}

SHIM_EXPORT int __fxstat(int version, int fd, struct stat *status)
{
    return shim_stat_fd_result(REAL(__fxstat)(version, fd, status), fd, status);
}

SHIM_EXPORT int __fxstat64(int version, int fd, struct stat64 *status)
{
    return shim_stat_fd_result(REAL(__fxstat64)(version, fd, status), fd,
                               (struct stat *)status);
}

SHIM_EXPORT int stat(const char *path, struct stat *status)
{
    return shim_stat_path_result(REAL(stat)(path, status), AT_FDCWD, path, status);
}

SHIM_EXPORT int stat64(const char *path, struct stat64 *status)
{
    return shim_stat_path_result(REAL(stat64)(path, status), AT_FDCWD, path,
                                 (struct stat *)status);
}

SHIM_EXPORT int lstat(const char *path, struct stat *status)
{
    return shim_stat_path_result(REAL(lstat)(path, status), AT_FDCWD, path, status);
}

SHIM_EXPORT int lstat64(const char *path, struct stat64 *status)
{
    return shim_stat_path_result(REAL(lstat64)(path, status), AT_FDCWD, path,
                                 (struct stat *)status);
}

SHIM_EXPORT int __xstat(int version, const char *path, struct stat *status)
{
    return shim_stat_path_result(REAL(__xstat)(version, path, status), AT_FDCWD, path, status);
}

SHIM_EXPORT int __xstat64(int version, const char *path, struct stat64 *status)
{
    return shim_stat_path_result(REAL(__xstat64)(version, path, status), AT_FDCWD, path,
                                 (struct stat *)status);
}

SHIM_EXPORT int __lxstat(int version, const char *path, struct stat *status)
{
    return shim_stat_path_result(REAL(__lxstat)(version, path, status), AT_FDCWD, path,
                                 status);
}

SHIM_EXPORT int __lxstat64(int version, const char *path, struct stat64 *status)
{
    return shim_stat_path_result(REAL(__lxstat64)(version, path, status), AT_FDCWD, path,
                                 (struct stat *)status);
}

/* glibc declares the path of statx and fstatat nonnull, yet passes NULL on
 * with AT_EMPTY_PATH (current kernels accept it): the pointer goes through
 * an empty asm so that the compiler cannot drop a test of it for NULL. */
static const char *shim_path_maybe_null(const char *path)
{
    __asm__("" : "+r"(path));
    return path;
}

/* With AT_EMPTY_PATH an empty path, or none at all, names the descriptor
 * itself. */
static bool shim_names_the_descriptor(const char *path, int flags)
{
    path = shim_path_maybe_null(path);
    return (flags & AT_EMPTY_PATH) && (path == NULL || path[0] == '\0');
}

/* fstatat of the descriptor itself, or of a path. */
static int shim_statat_result(int result, int dirfd, const char *path, struct stat *status,
                              int flags)
{
    if (shim_names_the_descriptor(path, flags))
        return shim_stat_fd_result(result, dirfd, status);
    return shim_stat_path_result(result, dirfd, path, status);
}

SHIM_EXPORT int fstatat(int dirfd, const char *path, struct stat *status, int flags)
{
    return shim_statat_result(REAL(fstatat)(dirfd, path, status, flags), dirfd, path, status,
                              flags);
}

SHIM_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *status, int flags)
{
    return shim_statat_result(REAL(fstatat64)(dirfd, path, status, flags), dirfd, path,
                              (struct stat *)status, flags);
}

SHIM_EXPORT int __fxstatat(int version, int dirfd, const char *path, struct stat *status,
                           int flags)
{
    return shim_statat_result(REAL(__fxstatat)(version, dirfd, path, status, flags), dirfd,
                              path, status, flags);
}

SHIM_EXPORT int __fxstatat64(int version, int dirfd, const char *path,
                             struct stat64 *status, int flags)
{
    return shim_statat_result(REAL(__fxstatat64)(version, dirfd, path, status, flags),
                              dirfd, path, (struct stat *)status, flags);
}

SHIM_EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask,
                      struct statx *status)
{
    int result = REAL(statx)(dirfd, path, flags, mask, status);
    if (result != 0 || !(status->stx_mask & STATX_TYPE) || !S_ISREG(status->stx_mode))
        return result;
    uint64_t size;
    struct dataset_file *file;
    if (shim_names_the_descriptor(path, flags)) {
        struct fd_slot *slot = shim_view_slot_acquire(dirfd);
        if (slot == NULL)
            return result;
        file = slot->cursor.file;
        size = view_cursor_size(&slot->cursor, SIZE_QUESTION_ANY);
        fd_slot_release(slot);
    } else {
        if (shim_path_maybe_null(path) == NULL || !shim_paths_active())
            return result;
        bool matched;
        file = shim_dataset_for_path(dirfd, path, &matched);
        if (file == NULL)
            return result;
        size = view_cursor_path_stat(file);
    }
    status->stx_size = size;
    status->stx_blocks = (size + 511) / 512;
    /* the record size, as fstat reports it */
    uint32_t block_size = shim_view_block_size(file);
    if (block_size != 0)
        status->stx_blksize = block_size;
    return result;
}
