/* log.h - leveled, per-rank logging (adaptshim(7) "Logging").
 *
 * A disabled level costs one predictable branch: the macros compare against
 * a global threshold before evaluating any argument.  Lines carry the rank,
 * the pid and a monotonic timestamp, and go to stderr or ADAPTDL_LOG_FILE
 * (with %r and %p expanded), always through the real write(2). */
#ifndef ADAPTSHIM_LOG_H
#define ADAPTSHIM_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

extern int log_threshold;

#define LOG_AT(level, ...)                                              \
    do {                                                                \
        if (__builtin_expect((int)(level) <= log_threshold, 0))         \
            log_emit((level), __VA_ARGS__);                             \
    } while (0)

#define log_error(...) LOG_AT(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...)  LOG_AT(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...)  LOG_AT(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) LOG_AT(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_trace(...) LOG_AT(LOG_LEVEL_TRACE, __VA_ARGS__)

#define log_enabled(level) (__builtin_expect((int)(level) <= log_threshold, 0))

/* Sets the threshold, rank and destination.  `file_pattern` NULL means
 * stderr.  Returns 0, or -1 with a message when the file cannot be opened
 * (logging then stays on stderr). */
int log_configure(enum log_level level, const char *file_pattern, uint32_t rank,
                  char *error, size_t error_size);
void log_set_rank(uint32_t rank);
/* Closes a log file (used before exec and at exit). */
void log_close(void);
/* The descriptor log lines go to (stderr's unless a file was opened). */
int log_descriptor(void);

void log_emit(enum log_level level, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Async-signal-safe: formats nothing beyond the fixed prefix, builds the line
 * in a stack buffer and writes it with one write(2). */
void log_signal_safe(enum log_level level, const char *message);

/* Expands %r (rank) and %p (pid) of a pattern.  -1 when it does not fit. */
int log_expand_pattern(const char *pattern, uint32_t rank, long pid, char *out,
                       size_t out_size);

/* Opens the file `pattern` names for `rank` and this process (%r, %p),
 * for appending, created 0644 when missing.  The descriptor, or -1 with a
 * one-line message that names the variable the pattern came from. */
int log_open_pattern_file(const char *variable, const char *pattern, uint32_t rank,
                          char *error, size_t error_size);

/* Seconds since the library started, from CLOCK_MONOTONIC. */
double log_monotonic_seconds(void);

#endif
