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
 * A checkpoint opened for writing with fopen is remembered until its fclose,
 * which commits it. */
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

struct shim_stream {
    FILE *stream;
    struct fd_slot *slot;        /* view streams */
    int fd;                      /* descriptor closed with the stream, or -1 */
    char *checkpoint_path;       /* checkpoint writer streams */
};

static pthread_mutex_t shim_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_stream *shim_streams;
static size_t shim_stream_count;
static size_t shim_stream_capacity;
static int shim_streams_in_use;  /* fast path: no stream ever registered */

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

/* Unread bytes in a stream's buffer belong to the view but not yet to the
 * trainer; a snapshot must not count them as consumed. */
uint64_t shim_unconsumed_records(struct dataset_file *file, void *context)
{
    (void)context;
    uint64_t unread_bytes = 0;
    pthread_mutex_lock(&shim_streams_lock);
    for (size_t i = 0; i < shim_stream_count; i++) {
        struct shim_stream *entry = &shim_streams[i];
        if (entry->slot == NULL || entry->slot->cursor.file != file)
            continue;
        FILE *stream = entry->stream;
        if (stream->_IO_read_end > stream->_IO_read_ptr)
            unread_bytes += (uint64_t)(stream->_IO_read_end - stream->_IO_read_ptr);
    }
    pthread_mutex_unlock(&shim_streams_lock);
    pthread_mutex_lock(&file->lock);
    uint64_t consumed_end = file->frontier > unread_bytes ? file->frontier - unread_bytes : 0;
    uint64_t unconsumed = dataset_view_records_before(file, file->frontier) -
                          dataset_view_records_before(file, consumed_end);
    pthread_mutex_unlock(&file->lock);
    return unconsumed + file->entry->lookahead;
}

/* --- the cookie ---------------------------------------------------------------- */

static ssize_t shim_cookie_read(void *cookie, char *buffer, size_t size)
{
    struct fd_slot *slot = cookie;
    if (slot->cursor.file->entry->role == DATA_ROLE_TRAIN && shim_configured())
        shim_steps_before_train_read();
    return view_cursor_read(&slot->cursor, buffer, size);
}

static int shim_cookie_seek(void *cookie, off64_t *position, int whence)
{
    struct fd_slot *slot = cookie;
    off_t result = view_cursor_move(&slot->cursor, *position, whence);
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
    struct fd_slot *slot = fd_table_lookup(fd);
    if (slot == NULL) {
        errno = EBADF;
        return NULL;
    }
    __atomic_add_fetch(&slot->references, 1, __ATOMIC_ACQ_REL);
    FILE *stream = fopencookie(slot, strchr(mode, 'e') ? "re" : "r", shim_cookie_functions);
    struct shim_stream entry = {.stream = stream, .slot = slot, .fd = fd};
    if (stream == NULL || shim_stream_register(&entry) != 0) {
        int saved = errno;
        if (stream != NULL)
            REAL(fclose)(stream);
        fd_slot_release(slot);
        errno = saved ? saved : ENOMEM;
        return NULL;
    }
    return stream;
}

static bool shim_mode_writes(const char *mode)
{
    return mode[0] != 'r' || strchr(mode, '+') != NULL;
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
        FILE *stream = real_fopen(path, mode);
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
        return real_fopen(path, mode);
    if (shim_mode_writes(mode)) {
        log_warn("data file %s opened for writing (mode \"%s\"): not virtualized", path, mode);
        return real_fopen(path, mode);
    }
    int flags = O_RDONLY | (strchr(mode, 'e') ? O_CLOEXEC : 0);
    int fd = REAL(open)(path, flags);
    if (fd < 0)
        return NULL;
    if (shim_track_opened(fd, AT_FDCWD, path, flags) < 0)
        return NULL;  /* descriptor already closed, errno set */
    struct fd_slot *slot = fd_table_lookup(fd);
    if (slot == NULL || slot->kind != FD_SLOT_VIEW) {
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
    if (stream == NULL) {
        int saved = errno;
        fd_slot_release(fd_table_remove(fd));
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

/* freopen is passed through: it replaces a stream in place, which a cookie
 * stream cannot do; a warning names a data file reopened this way. */
static FILE *shim_freopen_common(FILE *(*real_freopen)(const char *, const char *, FILE *),
                                 const char *path, const char *mode, FILE *stream)
{
    struct shim_stream entry;
    if (shim_stream_find(stream, &entry)) {
        errno = EBADF;
        return NULL;
    }
    if (path != NULL && shim_paths_active() &&
        session_match_data(&shim_session, path, NULL) != NULL)
        log_warn("freopen of data file %s is not virtualized", path);
    return real_freopen(path, mode, stream);
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
    struct fd_slot *slot = fd_table_lookup(fd);
    if (SHIM_LIKELY(slot == NULL) || slot->kind != FD_SLOT_VIEW || shim_guarded())
        return REAL(fdopen)(fd, mode);
    return shim_open_view_stream(slot->cursor.file, fd, mode);
}

SHIM_EXPORT int fclose(FILE *stream)
{
    if (SHIM_LIKELY(!__atomic_load_n(&shim_streams_in_use, __ATOMIC_ACQUIRE)) ||
        shim_guarded())
        return REAL(fclose)(stream);
    struct shim_stream entry = shim_stream_unregister(stream);
    /* A checkpoint's content is complete once flushed: bind the snapshot
     * before the stream closes (see close() in io_fd.c). */
    if (entry.checkpoint_path != NULL && fflush(stream) == 0)
        shim_commit_checkpoint_path(entry.checkpoint_path, entry.checkpoint_path);
    int result = REAL(fclose)(stream);
    int saved = errno;
    if (entry.slot != NULL) {
        fd_slot_release(entry.slot);
        if (entry.fd >= 0) {
            fd_slot_release(fd_table_remove(entry.fd));
            REAL(close)(entry.fd);
        }
    }
    free(entry.checkpoint_path);
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

/* The trainer's own repositioning: pass rules first, with its target. */
static int shim_stream_reposition(FILE *stream, struct fd_slot *slot, int64_t offset,
                                  int whence)
{
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
    if (view_cursor_reposition_rule(&slot->cursor, (uint64_t)current, (uint64_t)target))
        __fpurge(stream);
    return REAL(fseeko64)(stream, target, SEEK_SET);
}

SHIM_EXPORT int fseek(FILE *stream, long offset, int whence)
{
    struct fd_slot *slot = shim_stream_slot(stream);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(fseek)(stream, offset, whence);
    return shim_stream_reposition(stream, slot, offset, whence);
}

SHIM_EXPORT int fseeko(FILE *stream, off_t offset, int whence)
{
    struct fd_slot *slot = shim_stream_slot(stream);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(fseeko)(stream, offset, whence);
    return shim_stream_reposition(stream, slot, offset, whence);
}

SHIM_EXPORT int fseeko64(FILE *stream, off64_t offset, int whence)
{
    struct fd_slot *slot = shim_stream_slot(stream);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(fseeko64)(stream, offset, whence);
    return shim_stream_reposition(stream, slot, offset, whence);
}

SHIM_EXPORT void rewind(FILE *stream)
{
    struct fd_slot *slot = shim_stream_slot(stream);
    if (SHIM_LIKELY(slot == NULL)) {
        REAL(rewind)(stream);
        return;
    }
    shim_stream_reposition(stream, slot, 0, SEEK_SET);
    clearerr(stream);
}

SHIM_EXPORT int fsetpos(FILE *stream, const fpos_t *position)
{
    struct fd_slot *slot = shim_stream_slot(stream);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(fsetpos)(stream, position);
    return shim_stream_reposition(stream, slot, position->__pos, SEEK_SET);
}

SHIM_EXPORT int fsetpos64(FILE *stream, const fpos64_t *position)
{
    struct fd_slot *slot = shim_stream_slot(stream);
    if (SHIM_LIKELY(slot == NULL))
        return REAL(fsetpos64)(stream, position);
    return shim_stream_reposition(stream, slot, position->__pos, SEEK_SET);
}
