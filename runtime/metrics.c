/* metrics.c - JSON lines for ADAPTDL_METRICS_FILE (see metrics.h).
 *
 * Building a line.  Every append goes through json_line_append_bytes, the one
 * place that checks the capacity.  When something does not fit, the line is
 * marked invalid and every later append is ignored: the caller keeps adding
 * members without checking, and the writer drops the whole line at the end.
 * A truncated object would be worse than a missing one for whoever parses
 * the file, so no attempt is made to salvage a prefix.
 *
 * Writing a line.  The line already ends in '\n' and is handed to one
 * write(2) (sysio_write_all only loops on the short writes a full disk can
 * cause).  The file is opened with O_APPEND, so each write lands at the end
 * atomically with respect to the other processes appending to the same file;
 * lines never interleave.  errno is saved and restored around every write
 * because the shim writes metrics from inside intercepted calls whose errno
 * the trainer is about to look at.
 *
 * Rate limiting.  Step lines come once per optimizer step, possibly
 * thousands per second; adaptshim(7) "Metrics file" promises at most four a second, the
 * latest one always written before exit.  A step line that is not due is
 * copied into a pending slot; the next due step supersedes it, and
 * metrics_flush_latest_step (exit path, MPI_Finalize, preemption signal)
 * writes it.  Two slots are used so that a signal arriving in the middle of a
 * copy finds the previous, complete, line published rather than a torn one.
 *
 * Threads.  metrics_write_event may run on any thread at any time: one
 * write(2) per line, atomic counters.  Step lines are the rate limiter's
 * state, so metrics_offer_step and metrics_flush_latest_step of one writer
 * must not run on two threads at once (the shim calls both under its step
 * lock); a signal handler flushing on the thread that offers is fine. */
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sysio.h"

/* metrics_flush_latest_step may run in a signal handler, where only
 * lock-free atomics are safe to touch. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "pending_step_slot must be lock-free");

/* ---------------------------------------------------------------------------
 * Building lines
 * ------------------------------------------------------------------------ */

static void json_line_append_bytes(struct json_line *line, const char *bytes, size_t count)
{
    if (line->invalid)
        return;
    if (count > JSON_LINE_CAPACITY - line->length) {
        line->invalid = true;
        return;
    }
    memcpy(line->text + line->length, bytes, count);
    line->length += count;
}

static void json_line_append_text(struct json_line *line, const char *text)
{
    json_line_append_bytes(line, text, strlen(text));
}

/* Appends `text` as a quoted JSON string.  Only '"', '\\' and the control
 * characters below 0x20 must be escaped; everything else, UTF-8 sequences
 * included, is copied as is.  Safe runs are copied in one piece. */
static void json_line_append_quoted(struct json_line *line, const char *text)
{
    static const char hex_digits[] = "0123456789abcdef";
    json_line_append_bytes(line, "\"", 1);
    const char *run_start = text;
    const char *cursor = text;
    for (; *cursor; cursor++) {
        unsigned char byte = (unsigned char)*cursor;
        if (byte >= 0x20 && byte != '"' && byte != '\\')
            continue;
        json_line_append_bytes(line, run_start, (size_t)(cursor - run_start));
        run_start = cursor + 1;
        char escape[6] = {'\\', 0, 0, 0, 0, 0};
        size_t escape_length = 2;
        switch (byte) {
        case '"':  escape[1] = '"'; break;
        case '\\': escape[1] = '\\'; break;
        case '\n': escape[1] = 'n'; break;
        case '\r': escape[1] = 'r'; break;
        case '\t': escape[1] = 't'; break;
        case '\b': escape[1] = 'b'; break;
        case '\f': escape[1] = 'f'; break;
        default:
            escape[1] = 'u';
            escape[2] = '0';
            escape[3] = '0';
            escape[4] = hex_digits[byte >> 4];
            escape[5] = hex_digits[byte & 0xf];
            escape_length = 6;
            break;
        }
        json_line_append_bytes(line, escape, escape_length);
    }
    json_line_append_bytes(line, run_start, (size_t)(cursor - run_start));
    json_line_append_bytes(line, "\"", 1);
}

/* `, "key": ` (without the comma for the first member of an object).  Also
 * where misuse is caught: nothing may follow json_line_end. */
static void json_line_begin_member(struct json_line *line, const char *key)
{
    if (line->complete)
        line->invalid = true;
    if (line->invalid)
        return;
    if (line->needs_separator)
        json_line_append_bytes(line, ", ", 2);
    json_line_append_quoted(line, key);
    json_line_append_bytes(line, ": ", 2);
    line->needs_separator = true;
}

/* %.17g of a finite double.  printf uses the locale's decimal point, and a
 * trainer may well have called setlocale(LC_ALL, "") with a locale that uses
 * ',' (or a multi-byte separator); a %g conversion otherwise only produces
 * digits, signs and 'e', so any other run of bytes is the decimal point and
 * becomes '.'. */
static void json_line_append_finite_double(struct json_line *line, double value)
{
    char formatted[64];
    char sanitized[64];
    int formatted_length = snprintf(formatted, sizeof formatted, "%.17g", value);
    if (formatted_length < 0 || (size_t)formatted_length >= sizeof formatted) {
        line->invalid = true;
        return;
    }
    size_t used = 0;
    bool in_separator = false;
    for (int index = 0; index < formatted_length; index++) {
        char character = formatted[index];
        bool plain = (character >= '0' && character <= '9') || character == '-' ||
                     character == '+' || character == 'e';
        if (plain) {
            sanitized[used++] = character;
            in_separator = false;
        } else if (!in_separator) {
            sanitized[used++] = '.';
            in_separator = true;
        }
    }
    json_line_append_bytes(line, sanitized, used);
}

static void json_line_append_double_value(struct json_line *line, double value)
{
    if (isfinite(value))
        json_line_append_finite_double(line, value);
    else
        json_line_append_bytes(line, "null", 4);
}

void json_line_begin(struct json_line *line, const char *type, double time_seconds)
{
    line->length = 0;
    line->invalid = false;
    line->complete = false;
    line->needs_separator = false;
    line->open_objects = 0;
    json_line_append_bytes(line, "{", 1);
    json_line_add_string(line, "type", type);
    json_line_add_double(line, "time", time_seconds);
}

void json_line_add_uint(struct json_line *line, const char *key, uint64_t value)
{
    char digits[24];
    json_line_begin_member(line, key);
    int length = snprintf(digits, sizeof digits, "%" PRIu64, value);
    json_line_append_bytes(line, digits, (size_t)length);
}

void json_line_add_int(struct json_line *line, const char *key, int64_t value)
{
    char digits[24];
    json_line_begin_member(line, key);
    int length = snprintf(digits, sizeof digits, "%" PRId64, value);
    json_line_append_bytes(line, digits, (size_t)length);
}

void json_line_add_double(struct json_line *line, const char *key, double value)
{
    json_line_begin_member(line, key);
    json_line_append_double_value(line, value);
}

void json_line_add_double_or_null_if(struct json_line *line, const char *key,
                                     bool present, double value)
{
    json_line_begin_member(line, key);
    if (present)
        json_line_append_double_value(line, value);
    else
        json_line_append_bytes(line, "null", 4);
}

void json_line_add_bool(struct json_line *line, const char *key, bool value)
{
    json_line_begin_member(line, key);
    json_line_append_text(line, value ? "true" : "false");
}

void json_line_add_null(struct json_line *line, const char *key)
{
    json_line_begin_member(line, key);
    json_line_append_bytes(line, "null", 4);
}

void json_line_add_string(struct json_line *line, const char *key, const char *value)
{
    json_line_begin_member(line, key);
    if (value == NULL)
        json_line_append_bytes(line, "null", 4);
    else
        json_line_append_quoted(line, value);
}

void json_line_begin_object(struct json_line *line, const char *key)
{
    json_line_begin_member(line, key);
    if (line->open_objects >= JSON_LINE_MAX_DEPTH)
        line->invalid = true;
    json_line_append_bytes(line, "{", 1);
    line->open_objects++;
    line->needs_separator = false;
}

void json_line_end_object(struct json_line *line)
{
    if (line->open_objects == 0 || line->complete)
        line->invalid = true;
    if (line->invalid)
        return;
    json_line_append_bytes(line, "}", 1);
    line->open_objects--;
    line->needs_separator = true;
}

void json_line_end(struct json_line *line)
{
    if (line->open_objects != 0 || line->complete)
        line->invalid = true;
    json_line_append_bytes(line, "}\n", 2);
    line->complete = true;
}

bool json_line_is_writable(const struct json_line *line)
{
    return line->complete && !line->invalid;
}

/* Copies only the used part of the buffer: a step line is a few hundred
 * bytes, the buffer 4 KiB, and this runs once per step. */
static void json_line_copy(struct json_line *destination, const struct json_line *source)
{
    memcpy(destination->text, source->text, source->length);
    destination->length = source->length;
    destination->invalid = source->invalid;
    destination->complete = source->complete;
    destination->needs_separator = source->needs_separator;
    destination->open_objects = source->open_objects;
}

/* ---------------------------------------------------------------------------
 * Writing lines
 * ------------------------------------------------------------------------ */

int metrics_writer_open(struct metrics_writer *writer, const char *pattern, uint32_t rank,
                        char *error, size_t error_size)
{
    int saved_errno = errno;
    writer->enabled = false;
    writer->fd = -1;
    writer->min_step_interval_seconds = METRICS_DEFAULT_STEP_INTERVAL_SECONDS;
    writer->last_step_written_seconds = 0.0;
    writer->step_written_once = false;
    writer->lines_written = 0;
    writer->lines_dropped = 0;
    atomic_store(&writer->pending_step_slot, 0);

    int fd = log_open_pattern_file("ADAPTDL_METRICS_FILE", pattern, rank, error, error_size);
    if (fd < 0) {
        errno = saved_errno;
        return -1;
    }
    writer->fd = fd;
    writer->enabled = true;
    errno = saved_errno;
    return 0;
}

void metrics_writer_close(struct metrics_writer *writer)
{
    if (!writer->enabled)
        return;
    int saved_errno = errno;
    metrics_flush_latest_step(writer);
    /* Disabled before the descriptor goes away, so that a late flush from a
     * signal handler cannot write into a descriptor number reused since. */
    writer->enabled = false;
    runtime_sysio.close(writer->fd);
    writer->fd = -1;
    errno = saved_errno;
}

bool metrics_writer_enabled(const struct metrics_writer *writer)
{
    return writer->enabled;
}

/* The single write path; async-signal-safe.  The counters are atomic: events
 * are written from any thread (a pass ends under its file's lock wherever
 * the read that ended it ran). */
static int metrics_write_prepared_line(struct metrics_writer *writer,
                                       const struct json_line *line)
{
    if (!json_line_is_writable(line)) {
        __atomic_add_fetch(&writer->lines_dropped, 1, __ATOMIC_RELAXED);
        return -1;
    }
    int saved_errno = errno;
    int status = sysio_write_all(writer->fd, line->text, line->length);
    errno = saved_errno;
    if (status != 0) {
        __atomic_add_fetch(&writer->lines_dropped, 1, __ATOMIC_RELAXED);
        return -1;
    }
    __atomic_add_fetch(&writer->lines_written, 1, __ATOMIC_RELAXED);
    return 0;
}

int metrics_write_event(struct metrics_writer *writer, const struct json_line *line)
{
    if (!writer->enabled)
        return 0;
    return metrics_write_prepared_line(writer, line);
}

static bool metrics_step_is_due(const struct metrics_writer *writer, double now_seconds)
{
    if (!writer->step_written_once)
        return true;
    return now_seconds - writer->last_step_written_seconds >=
           writer->min_step_interval_seconds;
}

/* Copies the line into the slot that is not published, then publishes it.
 * A signal handler flushing meanwhile sees either the previous pending line
 * or nothing, never the slot being filled. */
static void metrics_keep_pending_step(struct metrics_writer *writer,
                                      const struct json_line *line)
{
    int published = atomic_load(&writer->pending_step_slot);
    int free_slot = published == 1 ? 1 : 0;
    json_line_copy(&writer->pending_steps[free_slot], line);
    atomic_store(&writer->pending_step_slot, free_slot + 1);
}

void metrics_offer_step(struct metrics_writer *writer, const struct json_line *line,
                        double now_seconds)
{
    if (!writer->enabled)
        return;
    if (!json_line_is_writable(line)) {
        __atomic_add_fetch(&writer->lines_dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    if (!metrics_step_is_due(writer, now_seconds)) {
        metrics_keep_pending_step(writer, line);
        return;
    }
    /* This line is newer than anything pending, which is therefore stale. */
    atomic_store(&writer->pending_step_slot, 0);
    writer->step_written_once = true;
    writer->last_step_written_seconds = now_seconds;
    metrics_write_prepared_line(writer, line);
}

void metrics_flush_latest_step(struct metrics_writer *writer)
{
    if (!writer->enabled)
        return;
    /* Taking the slot with an exchange makes the flush happen once even when
     * a signal handler and the exit path both call this. */
    int published = atomic_exchange(&writer->pending_step_slot, 0);
    if (published == 0)
        return;
    metrics_write_prepared_line(writer, &writer->pending_steps[published - 1]);
}
