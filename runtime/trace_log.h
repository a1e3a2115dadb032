/* trace_log.h - a delivery trace read back (the format is delivery_trace.h's):
 * the events of one trace file, in file order, for adaptdl-verify's
 * comparison (resume_history.h).
 *
 * Every malformed line is an error naming the source, the line number, what
 * is wrong and what is accepted.  A last line without its newline is what a
 * process killed in the middle of a write leaves: it is left out and
 * counted, never half-read. */
#ifndef ADAPTSHIM_TRACE_LOG_H
#define ADAPTSHIM_TRACE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "content_hash.h"

enum trace_event_kind {
    TRACE_EVENT_START,      /* a process opened the trace */
    TRACE_EVENT_DELIVERY,   /* records delivered (D) */
    TRACE_EVENT_BINDING,    /* a data file's position bound by a snapshot (B) */
    TRACE_EVENT_COMMIT,     /* a snapshot written: a checkpoint committed (C) */
    TRACE_EVENT_LOAD,       /* the trainer opened its checkpoint for reading (L) */
    TRACE_EVENT_STOP,       /* the process stopped itself to be killed (P) */
};

struct trace_record {
    uint64_t physical;      /* record index in the file */
    bool padding;           /* AdaptDL's padding: a record the pass already holds */
};

struct trace_event {
    enum trace_event_kind kind;
    char *name;                      /* DELIVERY, BINDING: the data file's basename */
    char *path;                      /* COMMIT, LOAD: the checkpoint */
    struct content_identity identity; /* BINDING, COMMIT, LOAD */
    uint64_t pass;                   /* DELIVERY, BINDING */
    bool train;                      /* BINDING: the file's role is train */
    uint64_t index;                  /* BINDING: current_index */
    uint64_t length;                 /* BINDING: the pass's length */
    uint64_t in_flight;              /* BINDING: records not counted as consumed */
    uint64_t pid;                    /* START, STOP */
    uint64_t commits;                /* STOP: commits seen when it stopped */
    uint32_t rank, replicas;         /* START */
    size_t record_count;             /* DELIVERY */
    struct trace_record *records;
};

struct trace_log {
    struct trace_event *events;
    size_t count;
    size_t capacity;
    bool cut_short;          /* the last line had no newline: left out */
};

/* Parses `length` bytes of trace text; `source` names it in messages.
 * 0, or -1 with a one-line message (the log is then empty). */
int trace_log_parse(struct trace_log *log, const char *text, size_t length,
                    const char *source, char *error, size_t error_size);
/* Reads and parses the trace file at `path`. */
int trace_log_read(struct trace_log *log, const char *path, char *error, size_t error_size);
void trace_log_free(struct trace_log *log);

/* Decodes the trace's %XX escapes of `text` (length bytes) into a new
 * string; NULL when an escape is malformed or memory runs out. */
char *trace_log_unescape(const char *text, size_t length);

#endif
