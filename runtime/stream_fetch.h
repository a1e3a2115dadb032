/* stream_fetch.h - the last fetch of a buffered stream over a view, and how
 * much of it its trainer has consumed (adaptshim(7) "Delivery": bytes that sit unread in a
 * stdio buffer are not delivered).
 *
 * A fetch is the view bytes [start, end) of one pass that a read of the
 * stream's cookie handed to the buffer.  glibc's fseek on a cookie stream
 * reads again from a block boundary at or before its target and skips to
 * the target, so a fetch made inside a seek starts, for the trainer, at the
 * seek's target.  What the trainer consumed of a fetch is what lies before
 * the buffer's read pointer: the fetch less the bytes still unread. */
#ifndef ADAPTSHIM_STREAM_FETCH_H
#define ADAPTSHIM_STREAM_FETCH_H

#include <stdbool.h>
#include <stdint.h>

struct stream_fetch {
    bool present;                /* a fetch not delivered yet */
    uint64_t pass;
    uint64_t start, end;         /* view offsets, start <= end */
    bool seeking;                /* inside the trainer's fseek ... */
    uint64_t seek_target;        /* ... towards this view offset */
    bool placed;                 /* the fetch was made inside such a seek: what the
                                  * trainer consumes of it is one read it placed */
};

/* The trainer's fseek towards `target` begins or ends. */
void stream_fetch_seek_begins(struct stream_fetch *fetch, uint64_t target);
void stream_fetch_seek_ends(struct stream_fetch *fetch);

/* A read of the cookie put `length` bytes from view offset `start` of
 * `pass` into the buffer (length 0: nothing, the fetch is gone). */
void stream_fetch_record(struct stream_fetch *fetch, uint64_t pass, uint64_t start,
                         uint64_t length);

/* The range of the fetch the trainer consumed, with `unread` bytes still in
 * the buffer: true with *pass, *start and *length set (length may be 0),
 * false when there is no fetch. */
bool stream_fetch_consumed(const struct stream_fetch *fetch, uint64_t unread, uint64_t *pass,
                           uint64_t *start, uint64_t *length);

/* The buffer was discarded (a reposition): the fetch is forgotten. */
void stream_fetch_forget(struct stream_fetch *fetch);

#endif
