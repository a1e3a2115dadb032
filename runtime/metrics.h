/* metrics.h - machine-readable JSON lines for ADAPTDL_METRICS_FILE (adaptshim(7)
 * "Metrics file").
 *
 * Two small pieces:
 *
 *   struct json_line       builds one JSON object in a fixed buffer, ready
 *                          to be written with a single write(2).  Building
 *                          never allocates; a line that does not fit is
 *                          marked invalid and is never written, so a reader
 *                          only ever sees complete objects.
 *
 *   struct metrics_writer  owns the per-rank file (%r and %p expanded),
 *                          writes event lines immediately and rate-limits
 *                          step lines, keeping the latest step that was not
 *                          written so that it can be flushed before exit.
 *
 * Line format: `{"type": "step", "time": 12.5, "step": 3, ...}\n`, i.e. the
 * separators of Python's json.dumps.  Doubles use %.17g, enough digits for
 * strtod to give back the very same double; NaN and infinities, which JSON
 * cannot express, become null (adaptshim(7) "Metrics file": numbers that are not finite
 * are written as null).
 *
 * All file I/O goes through runtime_sysio (see sysio.h): inside the preloaded
 * library open() and write() are the shim's own wrappers. */
#ifndef ADAPTSHIM_METRICS_H
#define ADAPTSHIM_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One line, newline included.  4096 is PIPE_BUF on Linux, so even when the
 * metrics "file" is a FIFO a line is written atomically; a decision event
 * with all its inputs and outputs needs well under 1 KiB. */
#define JSON_LINE_CAPACITY 4096

/* Nested objects a line may open ("perf_params": {...} needs one). */
#define JSON_LINE_MAX_DEPTH 8

/* Step lines are written at most this often by default (adaptshim(7) "Metrics file": at most four
 * times a second). */
#define METRICS_DEFAULT_STEP_INTERVAL_SECONDS 0.25

struct json_line {
    char text[JSON_LINE_CAPACITY];
    size_t length;
    /* Set when the line overflowed the buffer, or was built out of order
     * (a member after json_line_end, unbalanced objects).  Sticky: every
     * later call is a no-op and writers drop the line. */
    bool invalid;
    /* json_line_end has appended the closing brace and the newline. */
    bool complete;
    /* The next member needs a ", " in front (false right after a '{'). */
    bool needs_separator;
    unsigned open_objects;
};

/* Starts `{"type": "<type>", "time": <time_seconds>`.  Resets the line, so a
 * stack-allocated struct json_line needs no other initialization. */
void json_line_begin(struct json_line *line, const char *type, double time_seconds);

void json_line_add_uint(struct json_line *line, const char *key, uint64_t value);
void json_line_add_int(struct json_line *line, const char *key, int64_t value);
/* %.17g; null when value is NaN or infinite. */
void json_line_add_double(struct json_line *line, const char *key, double value);
/* null unless `present` (for fields that exist only once a model does). */
void json_line_add_double_or_null_if(struct json_line *line, const char *key,
                                     bool present, double value);
void json_line_add_bool(struct json_line *line, const char *key, bool value);
void json_line_add_null(struct json_line *line, const char *key);
/* JSON-escaped; bytes >= 0x80 (UTF-8) are copied unchanged.  NULL -> null. */
void json_line_add_string(struct json_line *line, const char *key, const char *value);

/* `"key": {` ... `}` */
void json_line_begin_object(struct json_line *line, const char *key);
void json_line_end_object(struct json_line *line);

/* Appends "}\n".  The line is invalid if objects are still open. */
void json_line_end(struct json_line *line);

/* True when the line is complete and was not invalidated: safe to write. */
bool json_line_is_writable(const struct json_line *line);

struct metrics_writer {
    /* A zero-initialized writer is disabled (fd 0 is never taken for ours). */
    bool enabled;
    int fd;
    /* Minimum time between two written step lines; set to the default by
     * metrics_writer_open, may be changed afterwards. */
    double min_step_interval_seconds;
    double last_step_written_seconds;
    bool step_written_once;
    /* Counters for the exit summary (atomic: events come from any thread).
     * Dropped lines are invalid ones and ones whose write failed. */
    uint64_t lines_written;
    uint64_t lines_dropped;
    /* The latest step line that was not written, double-buffered so that a
     * flush from a signal handler never sees a half-copied line: offering
     * fills the slot that is not published, then publishes it.  0 means
     * nothing pending, otherwise slot index + 1. */
    atomic_int pending_step_slot;
    struct json_line pending_steps[2];
};

/* Opens the file named by `pattern` (%r = rank, %p = pid) for appending.
 * Returns 0, or -1 with a one-line message naming ADAPTDL_METRICS_FILE, the
 * path and the reason; the writer is then disabled. */
int metrics_writer_open(struct metrics_writer *writer, const char *pattern, uint32_t rank,
                        char *error, size_t error_size);

/* Flushes the pending step line, then closes the file.  The writer is left
 * disabled; closing a disabled writer does nothing. */
void metrics_writer_close(struct metrics_writer *writer);

bool metrics_writer_enabled(const struct metrics_writer *writer);

/* Writes one complete line with one write(2): with O_APPEND, lines of
 * several processes sharing the file never interleave.  Returns 0 when
 * written (or when the writer is disabled), -1 when the line was dropped. */
int metrics_write_event(struct metrics_writer *writer, const struct json_line *line);

/* Writes the step line if at least min_step_interval_seconds passed since
 * the last written one (or none was written yet); otherwise keeps a copy as
 * the pending latest step, replacing an older one.  It and
 * metrics_flush_latest_step must not run on two threads at once; event
 * lines may be written from any thread meanwhile. */
void metrics_offer_step(struct metrics_writer *writer, const struct json_line *line,
                        double now_seconds);

/* Writes the pending step line, if any, exactly once.  Async-signal-safe:
 * one write(2) of a prepared buffer, no allocation, no stdio, errno kept. */
void metrics_flush_latest_step(struct metrics_writer *writer);

#endif
