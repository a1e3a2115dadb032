/* view_cursor.h - an open file description on a data view, and the pass rules
 * that descriptor operations trigger (adaptshim(7) "Passes").
 *
 * dup'd descriptors share one cursor (as they share one kernel file offset);
 * every cursor of a file shares the file's pass state.  A cursor remembers
 * which pass its offset refers to: after the pass it read to the end is over,
 * it keeps reporting end-of-file until the trainer moves it back to the
 * header (or anywhere, explicitly), so a second read at the old end does not
 * swallow the next pass. */
#ifndef ADAPTSHIM_VIEW_CURSOR_H
#define ADAPTSHIM_VIEW_CURSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "dataset_view.h"
#include "stale_size.h"

struct view_cursor {
    struct dataset_file *file;
    uint64_t offset;
    uint64_t pass;               /* pass of the view `offset` refers to */
    bool at_end;                 /* a read on this cursor returned 0 and it has not
                                  * moved since: it stands at the end of `pass`
                                  * even when that end is the header (a skipped
                                  * or empty pass) */
    bool repositioned;           /* moved by a seek since its last read */
    uint64_t trainer_moved_pass; /* 1 + the pass in which the trainer last moved a
                                  * stream on this cursor (0: never) */
    int references;              /* descriptors sharing this cursor */
};

/* Told (under the file's lock) when a pass of a file begins (its first
 * payload byte is read) or ends (`why`: "read to the end", "rewound",
 * "reopened").  NULL: nobody listens.  The shim writes metrics events. */
extern void (*view_cursor_pass_observer)(const struct dataset_file *file, bool begins,
                                         uint64_t pass, uint64_t records_consumed,
                                         const char *why);

/* A cursor whose pass is over joins the current pass on its next read only
 * when it is still at most at the header and has not itself read to the end
 * (a cursor opened before another one finished the pass); otherwise it keeps
 * returning 0 until it is moved (view_cursor_seek, view_cursor_move).
 *
 * Opening a data file: a reopen after every record of the current pass was
 * delivered ends that pass.  The cursor starts at offset 0 of the current view. */
void view_cursor_open(struct view_cursor *cursor, struct dataset_file *file);
/* The trainer closed the cursor's last descriptor or stream: the file has
 * one cursor fewer open in this process (dataset_view_readers_finished_pass). */
void view_cursor_close(struct view_cursor *cursor);

/* read(2) semantics on the view; a read returning 0 ends the pass.  A read
 * may be short (dataset_view_read_limit).  A read right after a seek that
 * would deliver again a record of a covered pass ends that pass first and
 * reads the next (a reader that visits records in its own order and keeps
 * the file open across epochs); one that just continues does not. */
ssize_t view_cursor_read(struct view_cursor *cursor, void *buffer, size_t size);
ssize_t view_cursor_readv(struct view_cursor *cursor, const struct iovec *vector, int count);
/* read(2) for a stdio stream's buffer: the same bytes and pass rules, but
 * nothing is delivered (no read limit either: the stream knows what its
 * trainer consumed, and reports it with view_cursor_deliver).  One rule
 * differs: a fetch returning 0 ends the pass only when it is covered or the
 * trainer has not moved the stream in this pass.  A loader that visits its
 * own batch order through stdio reaches the end of the view with its last
 * batch, wherever that falls in the epoch, and glibc asks for more.
 * When it returns bytes, *pass and *offset tell which pass's view they
 * are of and where in it they start (the cursor may have moved on by the
 * time the caller looks, if another thread reads it too). */
ssize_t view_cursor_fetch(struct view_cursor *cursor, void *buffer, size_t size,
                          uint64_t *pass, uint64_t *offset);
/* The trainer consumed view bytes [offset, offset + count) of pass `pass`
 * (fetched earlier); nothing happens when that pass is over.  `placed`: the
 * trainer positioned the stream for these bytes (an fseek, then a read):
 * they are one read of a loader that places its reads
 * (dataset_view_note_placed_read). */
void view_cursor_deliver(struct view_cursor *cursor, uint64_t pass, uint64_t offset,
                         uint64_t count, bool placed);
/* pread(2): positionless, never ends a pass. */
ssize_t view_cursor_pread(struct view_cursor *cursor, void *buffer, size_t size,
                          uint64_t offset);
ssize_t view_cursor_preadv(struct view_cursor *cursor, const struct iovec *vector,
                           int count, uint64_t offset);
/* --- copies to a destination that may take fewer bytes ------------------------
 * sendfile, splice and copy_file_range out of a view are served through a
 * bounce buffer, and the destination (a full non-blocking pipe, a socket)
 * may take fewer bytes than it was offered, or none.  view_cursor_peek copies
 * what view_cursor_read (or, at an explicit offset, view_cursor_pread) would
 * return, under the same pass rules, but delivers nothing and leaves the
 * cursor where it is; view_cursor_consume then delivers the bytes the
 * destination took and moves the cursor past them.  Bytes it refused stay
 * unread, to be offered again.  No read limit applies: the bytes go to
 * another file, not into a reader's read-ahead buffer. */
struct view_cursor_peek {
    uint64_t pass;               /* the pass the peeked bytes belong to */
    uint64_t offset;             /* view offset of the first one */
    bool at_cursor;              /* read at the cursor (false: at an explicit offset) */
};
/* `offset` NULL: at the cursor (a read returning 0 ends the pass, as
 * view_cursor_read's); otherwise at *offset (never ends a pass). */
ssize_t view_cursor_peek(struct view_cursor *cursor, void *buffer, size_t size,
                         const uint64_t *offset, struct view_cursor_peek *peek);
/* The destination took the first `count` peeked bytes.  The cursor moves
 * only if nothing else moved it since the peek. */
void view_cursor_consume(struct view_cursor *cursor, const struct view_cursor_peek *peek,
                         uint64_t count);
/* lseek(2) semantics (SEEK_SET, SEEK_CUR, SEEK_END; SEEK_DATA/SEEK_HOLE treat
 * the view as one data extent).  Returns the new offset or -1 with errno.
 * Moving back to at most the header after every record of the pass was
 * delivered ends it; before that, a seek anywhere is just a seek. */
off_t view_cursor_seek(struct view_cursor *cursor, off_t offset, int whence);
/* Size of the view the cursor would read now, noted as the answer to
 * `question` (stale_size_note_answer): SIZE_QUESTION_ANY for fstat,
 * SIZE_QUESTION_TRAINER for a seek of a stream to its end, where the
 * stream code computes the target.  A seek to the end through
 * view_cursor_seek and a stat of the path are noted as the trainer's
 * own. */
uint64_t view_cursor_size(struct view_cursor *cursor, enum size_question question);
/* A stat of the file's path, not of a descriptor: first ends a pass the
 * trainer is done with (dataset_view_path_stat_ends_pass), so that a loader
 * asking for its next epoch's size gets the next pass's; returns the size
 * of the view that is current then. */
uint64_t view_cursor_path_stat(struct dataset_file *file);

/* --- for stdio streams built on a cursor ------------------------------------ */
/* Moves the cursor without applying pass rules (glibc seeks a cookie stream
 * on its own, to buffer boundaries); joins the current pass.  Returns the
 * new offset or -1 with errno. */
off_t view_cursor_move(struct view_cursor *cursor, off_t offset, int whence);
/* The trainer moved its stream position from `from` to `to`: applies the
 * rewind rule.  Returns true when the stream's buffer holds bytes of a view
 * that is over (a pass ended now or earlier) and must be discarded. */
bool view_cursor_reposition_rule(struct view_cursor *cursor, uint64_t from, uint64_t to);

#endif
