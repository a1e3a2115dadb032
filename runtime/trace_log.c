/* trace_log.c - reading a delivery trace back (see trace_log.h). */
#include "trace_log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "delivery_trace.h"
#include "error_message.h"
#include "growable_array.h"
#include "sysio.h"

/* A trace larger than this is not a short verification run's. */
#define TRACE_LOG_MAX_BYTES ((uint64_t)1 << 34)

/* Where the parser is: for messages. */
struct trace_parse {
    const char *source;
    size_t line_number;
    const char *cursor;      /* next unread byte of the line */
    const char *end;         /* the line's end (its newline) */
    char *error;
    size_t error_size;
};

static int trace_parse_error(struct trace_parse *parse, const char *what, const char *accepted)
{
    return error_message(parse->error, parse->error_size, "%s line %zu: %s; accepted: %s",
                         parse->source, parse->line_number, what, accepted);
}

/* The next space-separated token of the line; false at the line's end. */
static bool trace_next_token(struct trace_parse *parse, const char **token, size_t *length)
{
    if (parse->cursor >= parse->end)
        return false;
    if (*parse->cursor == ' ')
        parse->cursor++;
    const char *start = parse->cursor;
    while (parse->cursor < parse->end && *parse->cursor != ' ')
        parse->cursor++;
    *token = start;
    *length = (size_t)(parse->cursor - start);
    return *length > 0;
}

static bool trace_token_is(const char *token, size_t length, const char *word)
{
    return strlen(word) == length && memcmp(token, word, length) == 0;
}

/* A decimal (base 10) or hexadecimal (base 16) number filling the token. */
static bool trace_token_number(const char *token, size_t length, int base, uint64_t *value)
{
    if (length == 0 || length > 20)
        return false;
    uint64_t result = 0;
    for (size_t i = 0; i < length; i++) {
        char c = token[i];
        unsigned digit;
        if (c >= '0' && c <= '9')
            digit = (unsigned)(c - '0');
        else if (base == 16 && c >= 'a' && c <= 'f')
            digit = (unsigned)(c - 'a' + 10);
        else if (base == 16 && c >= 'A' && c <= 'F')
            digit = (unsigned)(c - 'A' + 10);
        else
            return false;
        if (result > (UINT64_MAX - digit) / (uint64_t)base)
            return false;
        result = result * (uint64_t)base + digit;
    }
    *value = result;
    return true;
}

static int trace_expect_number(struct trace_parse *parse, const char *field, int base,
                               uint64_t *value)
{
    const char *token;
    size_t length;
    if (trace_next_token(parse, &token, &length) &&
        trace_token_number(token, length, base, value))
        return 0;
    char what[160];
    snprintf(what, sizeof what, "%s is missing or not a number", field);
    return trace_parse_error(parse, what,
                             base == 16 ? "hexadecimal digits" : "a decimal number");
}

static int trace_expect_text(struct trace_parse *parse, const char *field, char **value)
{
    const char *token;
    size_t length;
    if (trace_next_token(parse, &token, &length)) {
        *value = trace_log_unescape(token, length);
        if (*value != NULL)
            return 0;
    }
    char what[160];
    snprintf(what, sizeof what, "%s is missing or badly escaped", field);
    return trace_parse_error(parse, what, "text with %XX escapes");
}

static int trace_expect_end(struct trace_parse *parse)
{
    const char *token;
    size_t length;
    if (!trace_next_token(parse, &token, &length))
        return 0;
    return trace_parse_error(parse, "more fields than the line's kind has",
                             "the fields of delivery_trace.h");
}

static int trace_expect_identity(struct trace_parse *parse, struct content_identity *identity)
{
    if (trace_expect_number(parse, "the content size", 10, &identity->size) < 0)
        return -1;
    return trace_expect_number(parse, "the content hash", 16, &identity->hash);
}

char *trace_log_unescape(const char *text, size_t length)
{
    char *out = malloc(length + 1);
    if (out == NULL)
        return NULL;
    size_t used = 0;
    for (size_t i = 0; i < length; i++) {
        if (text[i] != '%') {
            out[used++] = text[i];
            continue;
        }
        /* a NUL would cut the string short: no name or path holds one */
        uint64_t byte;
        if (length - i < 3 || !trace_token_number(text + i + 1, 2, 16, &byte) || byte == 0) {
            free(out);
            return NULL;
        }
        out[used++] = (char)byte;
        i += 2;
    }
    out[used] = '\0';
    return out;
}

/* "adaptshim-trace 1 pid PID rank R replicas K" */
static int trace_parse_start(struct trace_parse *parse, struct trace_event *event)
{
    const char *token;
    size_t length;
    uint64_t version = 0, rank = 0, replicas = 0;
    if (trace_expect_number(parse, "the format version", 10, &version) < 0)
        return -1;
    if (version != DELIVERY_TRACE_VERSION) {
        char what[96];
        snprintf(what, sizeof what, "format version %" PRIu64, version);
        return trace_parse_error(parse, what, "version 1");
    }
    const char *const words[] = {"pid", "rank", "replicas"};
    uint64_t *values[] = {&event->pid, &rank, &replicas};
    for (size_t i = 0; i < 3; i++) {
        if (!trace_next_token(parse, &token, &length) || !trace_token_is(token, length, words[i]))
            return trace_parse_error(parse, "a start line without its pid, rank and replicas",
                                     DELIVERY_TRACE_MAGIC " 1 pid PID rank R replicas K");
        if (trace_expect_number(parse, words[i], 10, values[i]) < 0)
            return -1;
    }
    if (rank > UINT32_MAX || replicas == 0 || replicas > UINT32_MAX || rank >= replicas)
        return trace_parse_error(parse, "a rank outside its replica count",
                                 "0 <= rank < replicas");
    event->rank = (uint32_t)rank;
    event->replicas = (uint32_t)replicas;
    return trace_expect_end(parse);
}

/* "D NAME PASS INDEX[*] ..." */
static int trace_parse_delivery(struct trace_parse *parse, struct trace_event *event)
{
    if (trace_expect_text(parse, "the data file's name", &event->name) < 0 ||
        trace_expect_number(parse, "the pass", 10, &event->pass) < 0)
        return -1;
    size_t capacity = 0;
    const char *token;
    size_t length;
    while (trace_next_token(parse, &token, &length)) {
        bool padding = token[length - 1] == '*';
        uint64_t physical;
        if (!trace_token_number(token, length - (padding ? 1 : 0), 10, &physical))
            return trace_parse_error(parse, "a record index that is not a number",
                                     "decimal record indices, each with `*` when padding");
        struct trace_record *records = growable_array_make_room(
            event->records, event->record_count, &capacity, sizeof *records, 64);
        if (records == NULL)
            return trace_parse_error(parse, "out of memory", "a smaller trace");
        event->records = records;
        records[event->record_count++] = (struct trace_record){physical, padding};
    }
    if (event->record_count == 0)
        return trace_parse_error(parse, "a delivery line without a record",
                                 "D NAME PASS INDEX...");
    return 0;
}

/* "B SIZE HASH NAME ROLE PASS INDEX LENGTH IN_FLIGHT" */
static int trace_parse_binding(struct trace_parse *parse, struct trace_event *event)
{
    if (trace_expect_identity(parse, &event->identity) < 0 ||
        trace_expect_text(parse, "the data file's name", &event->name) < 0)
        return -1;
    const char *token;
    size_t length;
    if (!trace_next_token(parse, &token, &length) ||
        !(trace_token_is(token, length, "train") || trace_token_is(token, length, "eval")))
        return trace_parse_error(parse, "a binding without its file's role", "train or eval");
    event->train = trace_token_is(token, length, "train");
    if (trace_expect_number(parse, "the pass", 10, &event->pass) < 0 ||
        trace_expect_number(parse, "the index", 10, &event->index) < 0 ||
        trace_expect_number(parse, "the pass length", 10, &event->length) < 0 ||
        trace_expect_number(parse, "the records in flight", 10, &event->in_flight) < 0)
        return -1;
    return trace_expect_end(parse);
}

/* "C SIZE HASH PATH" and "L SIZE HASH PATH" */
static int trace_parse_checkpoint(struct trace_parse *parse, struct trace_event *event)
{
    if (trace_expect_identity(parse, &event->identity) < 0 ||
        trace_expect_text(parse, "the checkpoint path", &event->path) < 0)
        return -1;
    return trace_expect_end(parse);
}

/* "P PID COMMITS" */
static int trace_parse_stop(struct trace_parse *parse, struct trace_event *event)
{
    if (trace_expect_number(parse, "the pid", 10, &event->pid) < 0 ||
        trace_expect_number(parse, "the commits", 10, &event->commits) < 0)
        return -1;
    return trace_expect_end(parse);
}

static void trace_event_free(struct trace_event *event)
{
    free(event->name);
    free(event->path);
    free(event->records);
}

static int trace_parse_line(struct trace_parse *parse, struct trace_event *event)
{
    const char *token;
    size_t length;
    *event = (struct trace_event){0};
    if (!trace_next_token(parse, &token, &length))
        return trace_parse_error(parse, "an empty line", "one event per line");
    if (trace_token_is(token, length, DELIVERY_TRACE_MAGIC)) {
        event->kind = TRACE_EVENT_START;
        return trace_parse_start(parse, event);
    }
    if (length == 1) {
        switch (token[0]) {
        case 'D':
            event->kind = TRACE_EVENT_DELIVERY;
            return trace_parse_delivery(parse, event);
        case 'B':
            event->kind = TRACE_EVENT_BINDING;
            return trace_parse_binding(parse, event);
        case 'C':
            event->kind = TRACE_EVENT_COMMIT;
            return trace_parse_checkpoint(parse, event);
        case 'L':
            event->kind = TRACE_EVENT_LOAD;
            return trace_parse_checkpoint(parse, event);
        case 'P':
            event->kind = TRACE_EVENT_STOP;
            return trace_parse_stop(parse, event);
        default:
            break;
        }
    }
    return trace_parse_error(parse, "an unknown kind of line",
                             "lines starting with " DELIVERY_TRACE_MAGIC ", D, B, C, L or P");
}

int trace_log_parse(struct trace_log *log, const char *text, size_t length,
                    const char *source, char *error, size_t error_size)
{
    *log = (struct trace_log){0};
    struct trace_parse parse = {.source = source, .error = error, .error_size = error_size};
    const char *cursor = text, *end = text + length;
    while (cursor < end) {
        const char *newline = memchr(cursor, '\n', (size_t)(end - cursor));
        if (newline == NULL) {
            log->cut_short = true;
            break;
        }
        parse.line_number++;
        parse.cursor = cursor;
        parse.end = newline;
        struct trace_event event;
        int status = trace_parse_line(&parse, &event);
        if (status == 0 && log->count == 0 && event.kind != TRACE_EVENT_START)
            status = error_message(error, error_size, "%s line 1: not a delivery trace; "
                                   "accepted: a file that starts with \"" DELIVERY_TRACE_MAGIC
                                   " 1\"", source);
        struct trace_event *events = status == 0 ? growable_array_make_room(
            log->events, log->count, &log->capacity, sizeof *events, 256) : NULL;
        if (status == 0 && events == NULL)
            status = error_message(error, error_size, "%s: out of memory", source);
        if (status != 0) {
            trace_event_free(&event);
            trace_log_free(log);
            return -1;
        }
        log->events = events;
        events[log->count++] = event;
        cursor = newline + 1;
    }
    if (log->count == 0) {
        trace_log_free(log);
        return error_message(error, error_size, "%s: no complete line; accepted: a delivery "
                             "trace written by a process under the library", source);
    }
    return 0;
}

int trace_log_read(struct trace_log *log, const char *path, char *error, size_t error_size)
{
    *log = (struct trace_log){0};
    int fd = runtime_sysio.open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_message(error, error_size, "cannot open the trace %s: %s", path,
                             strerror(errno));
    struct stat status;
    if (runtime_sysio.fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) ||
        (uint64_t)status.st_size > TRACE_LOG_MAX_BYTES) {
        runtime_sysio.close(fd);
        return error_message(error, error_size, "the trace %s is not a regular file of at "
                             "most %" PRIu64 " bytes", path, TRACE_LOG_MAX_BYTES);
    }
    size_t size = (size_t)status.st_size;
    char *text = malloc(size + 1);
    if (text == NULL) {
        runtime_sysio.close(fd);
        return error_message(error, error_size, "the trace %s: out of memory", path);
    }
    ssize_t got = sysio_pread_full(fd, text, size, 0);
    int saved_errno = errno;
    runtime_sysio.close(fd);
    if (got < 0) {
        free(text);
        return error_message(error, error_size, "reading the trace %s: %s", path,
                             strerror(saved_errno));
    }
    int result = trace_log_parse(log, text, (size_t)got, path, error, error_size);
    free(text);
    return result;
}

void trace_log_free(struct trace_log *log)
{
    for (size_t i = 0; i < log->count; i++)
        trace_event_free(&log->events[i]);
    free(log->events);
    *log = (struct trace_log){0};
}
