/* stdio_streams.c - the streams the shim follows (stdio_streams.h): view
 * streams over data files, and checkpoints being written with stdio.
 *
 * A data file opened with fopen (or fdopen'ed from a tracked descriptor)
 * becomes a fopencookie stream over a view cursor, so every stdio function,
 * including inlined getc_unlocked, reads the view.  glibc seeks a cookie
 * stream to buffer boundaries on its own, so pass rules are applied in
 * shim_view_stream_seek, with the trainer's own target, and the cookie's
 * seek only moves.
 *
 * Bytes the cookie hands to the stream's buffer are not delivered yet
 * (adaptshim(7) "Delivery"): each stream remembers its last fetch, and delivers the part its
 * trainer consumed when that is known -- at the next fetch (glibc refills
 * only an empty buffer), at a reposition, at fclose and when a snapshot is
 * taken. */
#include <errno.h>
#include <pthread.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#include "fork_locks.h"
#include "growable_array.h"
#include "real_functions.h"
#include "shim.h"
#include "stdio_streams.h"
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

static pthread_mutex_t shim_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_stream *shim_streams;
static size_t shim_stream_count;
static size_t shim_stream_capacity;
int shim_streams_in_use;
static bool shim_streams_frozen;    /* under shim_streams_lock */

void shim_streams_freeze(void)
{
    pthread_mutex_lock(&shim_streams_lock);
    shim_streams_frozen = true;
    __atomic_store_n(&shim_streams_in_use, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&shim_streams_lock);
}

void shim_streams_fork_prepare_list(void)
{
    fork_lock_before(&shim_streams_lock);
}

/* Every cookie lock of a followed stream (the list's lock held).  A cookie
 * lock is taken under glibc's lock of its stream, which is not taken here:
 * a reader holding the stream's lock takes no lock of the shim's before
 * its cookie lock but the steps' (taken earlier in the fork's order), and
 * glibc's fork makes its streams' locks anew in the child by itself.  A
 * stream being closed (unregistered, its cookie lock still taken by
 * fclose) is no longer reachable from the child's list. */
void shim_streams_fork_prepare_cookies(void)
{
    for (size_t i = 0; i < shim_stream_count; i++)
        if (shim_streams[i].cookie != NULL)
            fork_lock_before(&shim_streams[i].cookie->lock);
}

void shim_streams_fork_parent_cookies(void)
{
    for (size_t i = shim_stream_count; i-- > 0;)
        if (shim_streams[i].cookie != NULL)
            fork_lock_after_in_parent(&shim_streams[i].cookie->lock);
}

void shim_streams_fork_parent_list(void)
{
    fork_lock_after_in_parent(&shim_streams_lock);
}

void shim_streams_fork_child(void)
{
    for (size_t i = 0; i < shim_stream_count; i++)
        if (shim_streams[i].cookie != NULL)
            fork_lock_after_in_child(&shim_streams[i].cookie->lock);
    fork_lock_after_in_child(&shim_streams_lock);
}

static int shim_stream_register(const struct shim_stream *entry)
{
    pthread_mutex_lock(&shim_streams_lock);
    struct shim_stream *grown = growable_array_make_room(shim_streams, shim_stream_count,
                                                         &shim_stream_capacity, sizeof *grown, 16);
    if (grown == NULL) {
        pthread_mutex_unlock(&shim_streams_lock);
        return -1;
    }
    shim_streams = grown;
    shim_streams[shim_stream_count++] = *entry;
    if (!shim_streams_frozen)
        __atomic_store_n(&shim_streams_in_use, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&shim_streams_lock);
    return 0;
}

struct shim_stream shim_stream_unregister(FILE *stream)
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

FILE *shim_stream_first(void)
{
    if (!__atomic_load_n(&shim_streams_in_use, __ATOMIC_ACQUIRE))
        return NULL;
    pthread_mutex_lock(&shim_streams_lock);
    FILE *stream = shim_stream_count > 0 ? shim_streams[0].stream : NULL;
    pthread_mutex_unlock(&shim_streams_lock);
    return stream;
}

bool shim_stream_find(FILE *stream, struct shim_stream *out)
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

bool shim_view_stream_find(FILE *stream, struct shim_stream *out)
{
    return shim_stream_find(stream, out) && out->cookie != NULL;
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
        view_cursor_deliver(&cookie->slot->cursor, pass, start, consumed,
                            cookie->fetch.placed);
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

void shim_view_stream_deliver_consumed(const struct shim_stream *entry)
{
    flockfile(entry->stream);
    pthread_mutex_lock(&entry->cookie->lock);
    shim_view_cookie_deliver_consumed(entry->cookie);
    pthread_mutex_unlock(&entry->cookie->lock);
    funlockfile(entry->stream);
}

void shim_stream_entry_release(struct shim_stream *entry)
{
    if (entry->slot != NULL) {
        fd_slot_release(entry->slot);
        if (entry->fd >= 0) {
            struct fd_slot *removed;
            fd_table_close(entry->fd, REAL(close), &removed, NULL);
            fd_slot_release(removed);
        }
    }
    free(entry->checkpoint_path);
    if (entry->cookie != NULL)
        pthread_mutex_destroy(&entry->cookie->lock);
    free(entry->cookie);
    *entry = (struct shim_stream){.stream = NULL, .fd = -1};
}

/* Before a snapshot is taken: streams deliver what their trainer has
 * consumed, so that unread buffer bytes never count (adaptshim(7) "Delivery").  Each under
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
        shim_view_stream_deliver_consumed(entry);
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

/* A view stream has no file underneath: once the process froze (freeze.c)
 * it still reads its view, but no step boundary or stop runs from it (MPI
 * may be gone). */
static ssize_t shim_cookie_read(void *cookie_pointer, char *buffer, size_t size)
{
    struct shim_view_cookie *cookie = cookie_pointer;
    struct view_cursor *cursor = &cookie->slot->cursor;
    if (cursor->file->entry->role == DATA_ROLE_TRAIN && shim_configured() && !shim_frozen())
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

/* --- repositioning ---------------------------------------------------------- */

/* The seek itself, under the stream's lock. */
static int shim_view_stream_seek_locked(FILE *stream, const struct shim_stream *entry,
                                        int64_t offset, int whence)
{
    struct fd_slot *slot = entry->slot;
    struct shim_view_cookie *cookie = entry->cookie;
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
        /* what the trainer took from the buffer counts before a size
         * question: its last record may be what makes the pass covered */
        pthread_mutex_lock(&cookie->lock);
        shim_view_cookie_deliver_consumed(cookie);
        pthread_mutex_unlock(&cookie->lock);
        target = (int64_t)view_cursor_size(&slot->cursor, SIZE_QUESTION_TRAINER) + offset;
        break;
    default:
        errno = EINVAL;
        return -1;
    }
    if (target < 0) {
        errno = EINVAL;
        return -1;
    }
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

int shim_view_stream_seek(FILE *stream, const struct shim_stream *entry, int64_t offset,
                          int whence)
{
    flockfile(stream);
    int result = shim_view_stream_seek_locked(stream, entry, offset, whence);
    int saved = errno;
    funlockfile(stream);
    errno = saved;
    return result;
}
