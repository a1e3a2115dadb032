/* io_stdio.c - the stdio wrappers: fopen, freopen, fdopen, fclose, fileno
 * and the repositioning calls, on data files and on checkpoints.
 *
 * A data file opened with fopen (or fdopen'ed from a tracked descriptor)
 * becomes a view stream (stdio_streams.c), so every stdio function reads
 * the view.  A real read-only descriptor is kept behind it and tracked, so
 * that fileno() (wrapped here) and fstat(fileno(f)) work.  The wrapped
 * fseek/fseeko/rewind/fsetpos hand the trainer's own target to the view
 * stream, which applies the pass rules before it seeks.
 *
 * A checkpoint opened for writing with fopen is remembered until its fclose,
 * which commits it.  A stream made with fdopen from a checkpoint descriptor
 * the trainer opened for writing commits at its fclose too: glibc closes the
 * descriptor inside fclose, where the close wrapper never sees it, so fclose
 * (and freopen, which closes it as well) commits and forgets it itself. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "stdio_streams.h"

static bool shim_mode_writes(const char *mode)
{
    return mode[0] != 'r' || strchr(mode, '+') != NULL;
}

/* glibc opened the stream's descriptor where no wrapper saw it: a number
 * handed out again, so whatever the table remembers there is stale. */
static FILE *shim_stream_opened(FILE *stream)
{
    int fd = stream != NULL ? REAL(fileno)(stream) : -1;
    if (fd >= 0 && SHIM_UNLIKELY(fd_table_tracked(fd)) && !shim_in_vfork_child())
        shim_forget_descriptor(fd);
    return stream;
}

static FILE *shim_fopen_common(FILE *(*real_fopen)(const char *, const char *),
                               const char *path, const char *mode)
{
    if (!shim_paths_active())
        return real_fopen(path, mode);
    char absolute_path[PATH_MAX];
    const char *absolute = shim_absolute_path(AT_FDCWD, path, absolute_path,
                                              sizeof absolute_path) == 0 ? absolute_path
                                                                          : NULL;
    if (absolute != NULL && session_match_save(&shim_session, path, absolute)) {
        FILE *stream = shim_stream_opened(real_fopen(path, mode));
        if (stream == NULL)
            return NULL;
        shim_guard_enter();
        if (shim_mode_writes(mode)) {
            shim_stream_watch_checkpoint(stream, absolute);
            shim_guard_leave();
            log_debug("checkpoint %s opened for writing with fopen", absolute);
            return stream;
        }
        shim_guard_leave();
        /* restore: hash through the stream's descriptor, as an open would */
        int fd = REAL(fileno)(stream);
        if (fd >= 0)
            shim_track_opened(fd, AT_FDCWD, path, O_RDONLY);
        return stream;
    }
    if (session_match_data(&shim_session, path, absolute) == NULL)
        return shim_stream_opened(real_fopen(path, mode));
    if (shim_mode_writes(mode)) {
        log_warn("data file %s opened for writing (mode \"%s\"): not virtualized", path, mode);
        return shim_stream_opened(real_fopen(path, mode));
    }
    int flags = O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0);
    int fd = REAL(open)(path, flags);
    if (fd < 0)
        return NULL;
    if (shim_track_opened(fd, AT_FDCWD, path, flags) < 0)
        return NULL;  /* descriptor already closed, errno set */
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (slot == NULL) {
        /* matched by glob but not a regular file (a directory, a FIFO...):
         * the real thing, on the descriptor already open -- closing it and
         * opening the path again would drop a FIFO's unread bytes and wait
         * for a writer that already left */
        FILE *stream = REAL(fdopen)(fd, mode);
        if (stream == NULL) {
            int saved = errno;
            REAL(close)(fd);
            errno = saved;
        }
        return stream;
    }
    FILE *stream = shim_open_view_stream(slot->cursor.file, fd, mode);
    fd_slot_release(slot);
    if (stream == NULL) {
        int saved = errno;
        fd_slot_release(fd_table_remove(fd, NULL));
        REAL(close)(fd);
        errno = saved;
        return NULL;
    }
    log_trace("fopen %s -> view stream on fd %d", path, fd);
    return stream;
}

SHIM_EXPORT FILE *fopen(const char *path, const char *mode)
{
    return shim_fopen_common(REAL(fopen), path, mode);
}

SHIM_EXPORT FILE *fopen64(const char *path, const char *mode)
{
    return shim_fopen_common(REAL(fopen64), path, mode);
}

/* A stream on a real descriptor is about to be closed (fclose, freopen):
 * glibc closes the descriptor itself, behind the close wrapper.  Commits
 * the checkpoint it writes -- remembered from fopen (`fopen_checkpoint`),
 * or by its descriptor, opened for writing and fdopen'd -- once its content
 * is complete (flushed).  Returns the descriptor whose slot the caller
 * forgets once the stream is closed, or -1. */
static int shim_stream_closing(FILE *stream, const char *fopen_checkpoint, int *commit_errno)
{
    *commit_errno = 0;
    int fd = REAL(fileno)(stream);
    struct fd_slot *slot = fd >= 0 ? fd_table_acquire(fd) : NULL;
    const char *checkpoint = fopen_checkpoint;
    /* the table's reference and ours: no other descriptor holds the slot */
    bool last = slot != NULL && __atomic_load_n(&slot->references, __ATOMIC_ACQUIRE) == 2;
    if (checkpoint == NULL && slot != NULL && shim_close_commits(fd, slot, last))
        checkpoint = slot->checkpoint_path;
    /* A checkpoint's content is complete once flushed: bind the snapshot
     * before the stream closes (see close() in io_fd.c).  A snapshot that
     * cannot be written is reported as the write's errno; the stream is
     * closed all the same, as after any failed fclose. */
    if (checkpoint != NULL && fflush(stream) == 0 &&
        shim_commit_checkpoint_path(checkpoint, checkpoint) != 0)
        *commit_errno = errno;
    int forget = slot != NULL ? fd : -1;
    fd_slot_release(slot);
    return forget;
}

/* freopen is passed through: it replaces a stream in place, which a cookie
 * stream cannot do (EBADF on a view stream); a warning names a data file
 * reopened this way.  Reopening a stream that writes a checkpoint onto
 * another path closes that checkpoint: it commits, as at fclose; a stream
 * reopened for writing onto a checkpoint name is watched as fopen's are. */
static FILE *shim_freopen_common(FILE *(*real_freopen)(const char *, const char *, FILE *),
                                 const char *path, const char *mode, FILE *stream)
{
    struct shim_stream entry;
    if (shim_view_stream_find(stream, &entry)) {
        errno = EBADF;
        return NULL;
    }
    if (path == NULL || shim_guarded() || !shim_paths_active())
        return real_freopen(path, mode, stream);   /* a new mode on the same file */
    if (session_match_data(&shim_session, path, NULL) != NULL)
        log_warn("freopen of data file %s is not virtualized", path);
    char *fopen_checkpoint = shim_stream_take_checkpoint(stream);
    int commit_errno;
    int forget = shim_stream_closing(stream, fopen_checkpoint, &commit_errno);
    free(fopen_checkpoint);
    FILE *reopened = real_freopen(path, mode, stream);
    int saved = errno;
    if (forget >= 0)
        shim_forget_descriptor(forget);
    shim_stream_opened(reopened);
    char absolute_path[PATH_MAX];
    if (reopened != NULL && shim_mode_writes(mode) &&
        shim_absolute_path(AT_FDCWD, path, absolute_path, sizeof absolute_path) == 0 &&
        session_match_save(&shim_session, path, absolute_path)) {
        shim_guard_enter();
        shim_stream_watch_checkpoint(reopened, absolute_path);
        shim_guard_leave();
    }
    errno = saved;
    return reopened;
}

SHIM_EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
    return shim_freopen_common(REAL(freopen), path, mode, stream);
}

SHIM_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
    return shim_freopen_common(REAL(freopen64), path, mode, stream);
}

SHIM_EXPORT FILE *fdopen(int fd, const char *mode)
{
    struct fd_slot *slot = shim_view_slot_acquire(fd);
    if (slot == NULL)
        return REAL(fdopen)(fd, mode);
    FILE *stream = shim_open_view_stream(slot->cursor.file, fd, mode);
    int saved = errno;
    fd_slot_release(slot);
    errno = saved;
    return stream;
}

SHIM_EXPORT int fclose(FILE *stream)
{
    bool streams = shim_streams_maybe_any();
    if (shim_guarded() || SHIM_LIKELY(!streams && fd_table_capacity == 0))
        return REAL(fclose)(stream);
    struct shim_stream entry = {.stream = NULL, .fd = -1};
    if (streams)
        entry = shim_stream_unregister(stream);
    int forget = -1, commit_errno = 0;
    if (entry.cookie != NULL) {
        shim_view_stream_deliver_consumed(&entry);
    } else {
        forget = shim_stream_closing(stream, entry.checkpoint_path, &commit_errno);
    }
    int result = REAL(fclose)(stream);
    int saved = errno;
    if (commit_errno != 0 && result == 0) {
        result = EOF;
        saved = commit_errno;
    }
    shim_stream_entry_release(&entry);
    if (forget >= 0)
        shim_forget_descriptor(forget);
    errno = saved;
    return result;
}

/* fcloseall(3) closes every stream: those the shim follows go through
 * fclose first (a view stream is forgotten, a checkpoint written with
 * stdio commits), then glibc closes the rest. */
SHIM_EXPORT int fcloseall(void)
{
    int result = 0;
    if (!shim_guarded()) {
        FILE *stream;
        while ((stream = shim_stream_first()) != NULL)
            if (fclose(stream) != 0)
                result = EOF;
    }
    if (REAL(fcloseall)() != 0)
        result = EOF;
    return result;
}

SHIM_EXPORT int fileno(FILE *stream)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_stream_find(stream, &entry)) || entry.slot == NULL)
        return REAL(fileno)(stream);
    return entry.fd;
}

SHIM_EXPORT int fseek(FILE *stream, long offset, int whence)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fseek)(stream, offset, whence);
    return shim_view_stream_seek(stream, &entry, offset, whence);
}

SHIM_EXPORT int fseeko(FILE *stream, off_t offset, int whence)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fseeko)(stream, offset, whence);
    return shim_view_stream_seek(stream, &entry, offset, whence);
}

SHIM_EXPORT int fseeko64(FILE *stream, off64_t offset, int whence)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fseeko64)(stream, offset, whence);
    return shim_view_stream_seek(stream, &entry, offset, whence);
}

SHIM_EXPORT void rewind(FILE *stream)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry))) {
        REAL(rewind)(stream);
        return;
    }
    shim_view_stream_seek(stream, &entry, 0, SEEK_SET);
    clearerr(stream);
}

SHIM_EXPORT int fsetpos(FILE *stream, const fpos_t *position)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fsetpos)(stream, position);
    return shim_view_stream_seek(stream, &entry, position->__pos, SEEK_SET);
}

SHIM_EXPORT int fsetpos64(FILE *stream, const fpos64_t *position)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fsetpos64)(stream, position);
    return shim_view_stream_seek(stream, &entry, position->__pos, SEEK_SET);
}
