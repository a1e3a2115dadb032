/* stdio_streams.h - the stdio streams the shim follows (stdio_streams.c):
 * view streams, which read a data file's view through a fopencookie
 * cookie, and checkpoint streams, remembered from their fopen until their
 * fclose commits them.  io_stdio.c's wrappers look streams up here. */
#ifndef ADAPTSHIM_STDIO_STREAMS_H
#define ADAPTSHIM_STDIO_STREAMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shim.h"

struct shim_view_cookie;

/* One followed stream, as the registry hands out copies of it. */
struct shim_stream {
    FILE *stream;
    struct fd_slot *slot;            /* view streams */
    struct shim_view_cookie *cookie; /* view streams */
    int fd;                          /* descriptor closed with the stream, or -1 */
    char *checkpoint_path;           /* checkpoint writer streams */
};

/* Nonzero once any stream was registered: the wrappers' fast path reads it
 * (atomically) before looking a stream up. */
extern int shim_streams_in_use;

static inline bool shim_streams_maybe_any(void)
{
    return __atomic_load_n(&shim_streams_in_use, __ATOMIC_ACQUIRE) != 0;
}

/* A view stream over `fd`, a tracked view descriptor of `file`; NULL with
 * errno when it cannot be made. */
FILE *shim_open_view_stream(struct dataset_file *file, int fd, const char *mode);

/* Checkpoint streams (opened for writing): remembered until fclose. */
void shim_stream_watch_checkpoint(FILE *stream, const char *absolute_path);
/* The checkpoint path of a checkpoint stream, which is forgotten (the
 * caller frees the path); NULL for any other stream. */
char *shim_stream_take_checkpoint(FILE *stream);

/* A copy of the entry of `stream`; false when the shim does not follow it. */
bool shim_stream_find(FILE *stream, struct shim_stream *out);
/* The same for view streams only (not checkpoint writers). */
bool shim_view_stream_find(FILE *stream, struct shim_stream *out);
/* Removes and returns the entry of a stream (entry.stream NULL if none). */
struct shim_stream shim_stream_unregister(FILE *stream);
/* One stream the shim follows, or NULL when it follows none (fcloseall). */
FILE *shim_stream_first(void);
/* After the stream is closed: releases what an unregistered entry holds
 * (its slot and descriptor, its cookie, its checkpoint path). */
void shim_stream_entry_release(struct shim_stream *entry);

/* A view stream delivers what its trainer consumed (the bytes before its
 * read pointer), under the stream's lock. */
void shim_view_stream_deliver_consumed(const struct shim_stream *entry);
/* Every view stream does so; called before a snapshot is taken, with none
 * of the shim's other locks held. */
void shim_streams_deliver_consumed(void);
/* Records of `file` the trainer has read but not consumed beyond what its
 * streams delivered: the entry's lookahead. */
uint64_t shim_unconsumed_records(struct dataset_file *file, void *context);

/* The trainer's own repositioning of a view stream (fseek, rewind,
 * fsetpos...): pass rules first, with its target, then the seek.  Under the
 * stream's lock (glibc's is recursive), as a read on another thread would
 * be: the cookie's fetch is the stream's own state. */
int shim_view_stream_seek(FILE *stream, const struct shim_stream *entry, int64_t offset,
                          int whence);

/* Freezing (freeze.c): no stream is followed any more for the wrappers'
 * fast path, nor will be; view streams opened before keep reading their
 * views through glibc. */
void shim_streams_freeze(void);

/* Around fork (shim/fork_safety.c): the list's lock, then, later in the
 * order, the cookie locks of every followed view stream; given back in the
 * parent, made anew in the child. */
void shim_streams_fork_prepare_list(void);
void shim_streams_fork_prepare_cookies(void);
void shim_streams_fork_parent_cookies(void);
void shim_streams_fork_parent_list(void);
void shim_streams_fork_child(void);

#endif
