/* io_stdio.c - stdio on data files and on checkpoints.
 *
 * A data file opened with fopen (or fdopen'ed from a tracked descriptor)
 * becomes a fopencookie stream over a view cursor, so every stdio function,
 * including inlined getc_unlocked, reads the view.  A real read-only
 * descriptor is kept behind it and tracked, so that fileno() (wrapped here)
 * and fstat(fileno(f)) work.  glibc seeks a cookie stream to buffer
 * boundaries on its own, so pass rules are applied in the wrapped
 * fseek/fseeko/rewind/fsetpos with the trainer's own target, and the cookie's
 * seek only moves.
 *
 * Bytes the cookie hands to the stream's buffer are not delivered yet (SPEC
 * §3): each stream remembers its last fetch, and delivers the part its
 * trainer consumed when that is known -- at the next fetch (glibc refills
 * only an empty buffer), at a reposition, at fclose and when a snapshot is
 * taken.
 *
 * A checkpoint opened for writing with fopen is remembered until its fclose,
 * which commits it.  A stream made with fdopen from a checkpoint descriptor
 * the trainer opened for writing commits at its fclose too: glibc closes the
 * descriptor inside fclose, where the close wrapper never sees it, so fclose
 * (and freopen, which closes it as well) commits and forgets it itself. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"
#include "steps.h"
#include "stream_fetch.h"

/* The cookie of a view stream: its slot and its last fetch, the view bytes
 * that went into the stream's buffer (or straight to the trainer, for large
 * freads). */
struct shim_view_cookie {
    /* Over the fields below.  glibc runs the cookie functions under the
     * stream's own lock, and every access from outside a cookie function
     * takes that lock first (flockfile) -- it also keeps the stream's
     * buffer pointers still while they are read -- but that lock lives in
     * glibc, where ThreadSanitizer cannot see it: this one says the same
     * thing where it can.  Taken after the stream's lock, before the file's. */
    pthread_mutex_t lock;
    struct fd_slot *slot;
    FILE *stream;
    struct stream_fetch fetch;
};

struct shim_stream {
    FILE *stream;
    struct fd_slot *slot;        /* view streams */
    struct shim_view_cookie *cookie; /* view streams */
    int fd;                      /* descriptor closed with the stream, or -1 */
    char *checkpoint_path;       /* checkpoint writer streams */
};

static pthread_mutex_t shim_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_stream *shim_streams;
static size_t shim_stream_count;
static size_t shim_stream_capacity;
static int shim_streams_in_use;  /* fast path: no stream ever registered */

void shim_streams_after_fork_in_child(void)
{
    pthread_mutex_init(&shim_streams_lock, NULL);
}

static int shim_stream_register(const struct shim_stream *entry)
{
    pthread_mutex_lock(&shim_streams_lock);
    if (shim_stream_count == shim_stream_capacity) {
        size_t capacity = shim_stream_capacity ? shim_stream_capacity * 2 : 16;
        struct shim_stream *grown = realloc(shim_streams, capacity * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&shim_streams_lock);
            return -1;
        }
        shim_streams = grown;
        shim_stream_capacity = capacity;
    }
    shim_streams[shim_stream_count++] = *entry;
    __atomic_store_n(&shim_streams_in_use, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&shim_streams_lock);
    return 0;
}

/* Removes and returns the entry of a stream (entry.stream NULL if none). */
static struct shim_stream shim_stream_unregister(FILE *stream)
{
    struct shim_stream found = {.stream = NULL, .fd = -1};
    pthread_mutex_lock(&shim_streams_lock);
    for (size_t i = 0; i < shim_stream_count; i++) {
        if (shim_streams[i].stream != stream)
            continue;
        found = shim_streams[i];
        shim_streams[i] = shim_streams[--shim_stream_count];
        break;
    }
    pthread_mutex_unlock(&shim_streams_lock);
    return found;
}

static bool shim_stream_find(FILE *stream, struct shim_stream *out)
{
    if (SHIM_LIKELY(!__atomic_load_n(&shim_streams_in_use, __ATOMIC_ACQUIRE)))
        return false;
    bool found = false;
    pthread_mutex_lock(&shim_streams_lock);
    for (size_t i = 0; i < shim_stream_count; i++) {
        if (shim_streams[i].stream == stream) {
            *out = shim_streams[i];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&shim_streams_lock);
    return found;
}

/* The entry of a view stream (not of a checkpoint writer). */
static bool shim_view_stream_find(FILE *stream, struct shim_stream *out)
{
    return shim_stream_find(stream, out) && out->cookie != NULL;
}

struct fd_slot *shim_stream_slot(FILE *stream)
{
    struct shim_stream entry;
    if (!shim_stream_find(stream, &entry))
        return NULL;
    return entry.slot;
}

void shim_stream_watch_checkpoint(FILE *stream, const char *absolute_path)
{
    struct shim_stream entry = {.stream = stream, .fd = -1,
                                .checkpoint_path = strdup(absolute_path)};
    if (entry.checkpoint_path == NULL || shim_stream_register(&entry) != 0)
        free(entry.checkpoint_path);
}

char *shim_stream_take_checkpoint(FILE *stream)
{
    struct shim_stream entry;
    if (!shim_stream_find(stream, &entry) || entry.checkpoint_path == NULL)
        return NULL;
    shim_stream_unregister(stream);
    return entry.checkpoint_path;
}

/* Delivers the part of the last fetch that the trainer consumed: what lies
 * before the stream's read pointer.  The unread rest stays undelivered.
 * Stream lock and cookie->lock held. */
static void shim_view_cookie_deliver_consumed(struct shim_view_cookie *cookie)
{
    FILE *stream = cookie->stream;
    uint64_t unread = 0;
    if (stream != NULL && stream->_IO_read_end > stream->_IO_read_ptr)
        unread = (uint64_t)(stream->_IO_read_end - stream->_IO_read_ptr);
    uint64_t pass, start, consumed;
    if (stream_fetch_consumed(&cookie->fetch, unread, &pass, &start, &consumed))
        view_cursor_deliver(&cookie->slot->cursor, pass, start, consumed);
}

/* The trainer moves its stream: what it consumed is delivered.  glibc never
 * serves a seek on a cookie stream from its buffer (it forgets the stream's
 * offset first): it discards the buffer and reads again from a block
 * boundary at or before the target, which shim_cookie_read counts from the
 * target on. */
static void shim_view_cookie_repositioned(struct shim_view_cookie *cookie)
{
    shim_view_cookie_deliver_consumed(cookie);
    stream_fetch_forget(&cookie->fetch);
}

/* Before a snapshot is taken: streams deliver what their trainer has
 * consumed, so that unread buffer bytes never count (SPEC §3).  Each under
 * its stream's lock, which glibc holds while a read on another thread runs
 * the cookie: the fetch and the buffer pointers are then its own.  This
 * runs before the registry's lock is taken (a reader holding its stream's
 * lock may be waiting for that lock in its step boundary), and the cookie
 * functions never take shim_streams_lock, so the order is always
 * shim_streams_lock, then a stream's lock, then the shim's other locks. */
void shim_streams_deliver_consumed(void)
{
    if (SHIM_LIKELY(!__atomic_load_n(&shim_streams_in_use, __ATOMIC_ACQUIRE)))
        return;
    pthread_mutex_lock(&shim_streams_lock);
    for (size_t i = 0; i < shim_stream_count; i++) {
        struct shim_stream *entry = &shim_streams[i];
        if (entry->cookie == NULL)
            continue;
        flockfile(entry->stream);
        pthread_mutex_lock(&entry->cookie->lock);
        shim_view_cookie_deliver_consumed(entry->cookie);
        pthread_mutex_unlock(&entry->cookie->lock);
        funlockfile(entry->stream);
    }
    pthread_mutex_unlock(&shim_streams_lock);
}

/* Called while a snapshot is taken: what streams had consumed was delivered
 * just before (shim_streams_deliver_consumed); records a prefetching loader
 * may hold are declared with lookahead (dataset_view_records_in_flight says
 * when they still can be). */
uint64_t shim_unconsumed_records(struct dataset_file *file, void *context)
{
    (void)context;
    dataset_file_lock(file);
    uint64_t in_flight = dataset_view_records_in_flight(file);
    dataset_file_unlock(file);
    return in_flight;
}

/* --- the cookie ---------------------------------------------------------------- */

static ssize_t shim_cookie_read(void *cookie_pointer, char *buffer, size_t size)
{
    struct shim_view_cookie *cookie = cookie_pointer;
    struct view_cursor *cursor = &cookie->slot->cursor;
    if (cursor->file->entry->role == DATA_ROLE_TRAIN && shim_configured())
        shim_steps_before_train_read();
    pthread_mutex_lock(&cookie->lock);
    /* glibc refills only an empty buffer (and empties it before asking):
     * the last fetch was consumed whole */
    shim_view_cookie_deliver_consumed(cookie);
    uint64_t pass = 0, start = 0;
    ssize_t got = view_cursor_fetch(cursor, buffer, size, &pass, &start);
    /* the fetch may have joined the next pass: its start is where it read */
    stream_fetch_record(&cookie->fetch, pass, start, got > 0 ? (uint64_t)got : 0);
    pthread_mutex_unlock(&cookie->lock);
    return got;
}

static int shim_cookie_seek(void *cookie_pointer, off64_t *position, int whence)
{
    struct shim_view_cookie *cookie = cookie_pointer;
    off_t result = view_cursor_move(&cookie->slot->cursor, *position, whence);
    if (result < 0)
        return -1;
    *position = result;
    return 0;
}

static int shim_cookie_close(void *cookie)
{
    (void)cookie;  /* the fclose wrapper releases the slot and descriptor */
    return 0;
}

static const cookie_io_functions_t shim_cookie_functions = {
    .read = shim_cookie_read,
    .write = NULL,
    .seek = shim_cookie_seek,
    .close = shim_cookie_close,
};

FILE *shim_open_view_stream(struct dataset_file *file, int fd, const char *mode)
{
    (void)file;
    /* the cookie keeps this reference until fclose */
    struct fd_slot *slot = fd_table_acquire(fd);
    if (slot == NULL) {
        errno = EBADF;
        return NULL;
    }
    struct shim_view_cookie *cookie = calloc(1, sizeof *cookie);
    if (cookie == NULL) {
        fd_slot_release(slot);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&cookie->lock, NULL);
    cookie->slot = slot;
    FILE *stream = fopencookie(cookie, strchr(mode, 'e') ? "re" : "r", shim_cookie_functions);
    cookie->stream = stream;
    struct shim_stream entry = {.stream = stream, .slot = slot, .cookie = cookie, .fd = fd};
    if (stream == NULL || shim_stream_register(&entry) != 0) {
        int saved = errno;
        if (stream != NULL)
            REAL(fclose)(stream);
        fd_slot_release(slot);
        pthread_mutex_destroy(&cookie->lock);
        free(cookie);
        errno = saved ? saved : ENOMEM;
        return NULL;
    }
    return stream;
}

/* The view slot of fd, held until released; NULL when fd is not a view. */
static struct fd_slot *shim_stdio_view_slot(int fd)
{
    struct fd_slot *slot = fd_table_acquire(fd);
    if (slot != NULL && slot->kind != FD_SLOT_VIEW) {
        fd_slot_release(slot);
        return NULL;
    }
    return slot;
}

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
    struct fd_slot *slot = shim_stdio_view_slot(fd);
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
    if (SHIM_LIKELY(!fd_table_tracked(fd)) || shim_guarded())
        return REAL(fdopen)(fd, mode);
    struct fd_slot *slot = shim_stdio_view_slot(fd);
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
    bool streams = __atomic_load_n(&shim_streams_in_use, __ATOMIC_ACQUIRE);
    if (shim_guarded() || SHIM_LIKELY(!streams && fd_table_capacity == 0))
        return REAL(fclose)(stream);
    struct shim_stream entry = {.stream = NULL, .fd = -1};
    if (streams)
        entry = shim_stream_unregister(stream);
    int forget = -1, commit_errno = 0;
    if (entry.cookie != NULL) {
        flockfile(stream);
        pthread_mutex_lock(&entry.cookie->lock);
        shim_view_cookie_deliver_consumed(entry.cookie);
        pthread_mutex_unlock(&entry.cookie->lock);
        funlockfile(stream);
    } else {
        forget = shim_stream_closing(stream, entry.checkpoint_path, &commit_errno);
    }
    int result = REAL(fclose)(stream);
    int saved = errno;
    if (commit_errno != 0 && result == 0) {
        result = EOF;
        saved = commit_errno;
    }
    if (entry.slot != NULL) {
        fd_slot_release(entry.slot);
        if (entry.fd >= 0) {
            struct fd_slot *removed;
            fd_table_close(entry.fd, REAL(close), &removed, NULL);
            fd_slot_release(removed);
        }
    }
    if (forget >= 0)
        shim_forget_descriptor(forget);
    free(entry.checkpoint_path);
    if (entry.cookie != NULL)
        pthread_mutex_destroy(&entry.cookie->lock);
    free(entry.cookie);
    errno = saved;
    return result;
}

SHIM_EXPORT int fileno(FILE *stream)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_stream_find(stream, &entry)) || entry.slot == NULL)
        return REAL(fileno)(stream);
    return entry.fd;
}

/* The trainer's own repositioning: pass rules first, with its target.
 * Under the stream's lock (glibc's is recursive), as a read on another
 * thread would be: the cookie's fetch is the stream's own state. */
static int shim_stream_reposition_locked(FILE *stream, struct shim_stream *entry,
                                         int64_t offset, int whence);

static int shim_stream_reposition(FILE *stream, struct shim_stream *entry, int64_t offset,
                                  int whence)
{
    flockfile(stream);
    int result = shim_stream_reposition_locked(stream, entry, offset, whence);
    int saved = errno;
    funlockfile(stream);
    errno = saved;
    return result;
}

static int shim_stream_reposition_locked(FILE *stream, struct shim_stream *entry,
                                         int64_t offset, int whence)
{
    struct fd_slot *slot = entry->slot;
    off64_t current = ftello64(stream);
    if (current < 0)
        return -1;
    int64_t target;
    switch (whence) {
    case SEEK_SET:
        target = offset;
        break;
    case SEEK_CUR:
        target = current + offset;
        break;
    case SEEK_END:
        target = (int64_t)view_cursor_size(&slot->cursor) + offset;
        break;
    default:
        errno = EINVAL;
        return -1;
    }
    if (target < 0) {
        errno = EINVAL;
        return -1;
    }
    struct shim_view_cookie *cookie = entry->cookie;
    pthread_mutex_lock(&cookie->lock);
    shim_view_cookie_repositioned(cookie);
    pthread_mutex_unlock(&cookie->lock);
    if (view_cursor_reposition_rule(&slot->cursor, (uint64_t)current, (uint64_t)target))
        __fpurge(stream);
    /* (not held across the seek: glibc reads through the cookie in it) */
    pthread_mutex_lock(&cookie->lock);
    stream_fetch_seek_begins(&cookie->fetch, (uint64_t)target);
    pthread_mutex_unlock(&cookie->lock);
    int result = REAL(fseeko64)(stream, target, SEEK_SET);
    int saved = errno;
    pthread_mutex_lock(&cookie->lock);
    stream_fetch_seek_ends(&cookie->fetch);
    pthread_mutex_unlock(&cookie->lock);
    errno = saved;
    return result;
}

SHIM_EXPORT int fseek(FILE *stream, long offset, int whence)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fseek)(stream, offset, whence);
    return shim_stream_reposition(stream, &entry, offset, whence);
}

SHIM_EXPORT int fseeko(FILE *stream, off_t offset, int whence)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fseeko)(stream, offset, whence);
    return shim_stream_reposition(stream, &entry, offset, whence);
}

SHIM_EXPORT int fseeko64(FILE *stream, off64_t offset, int whence)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fseeko64)(stream, offset, whence);
    return shim_stream_reposition(stream, &entry, offset, whence);
}

SHIM_EXPORT void rewind(FILE *stream)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry))) {
        REAL(rewind)(stream);
        return;
    }
    shim_stream_reposition(stream, &entry, 0, SEEK_SET);
    clearerr(stream);
}

SHIM_EXPORT int fsetpos(FILE *stream, const fpos_t *position)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fsetpos)(stream, position);
    return shim_stream_reposition(stream, &entry, position->__pos, SEEK_SET);
}

SHIM_EXPORT int fsetpos64(FILE *stream, const fpos64_t *position)
{
    struct shim_stream entry;
    if (SHIM_LIKELY(!shim_view_stream_find(stream, &entry)))
        return REAL(fsetpos64)(stream, position);
    return shim_stream_reposition(stream, &entry, position->__pos, SEEK_SET);
}
