/* log.c - leveled, per-rank logging (see log.h). */
#include "log.h"
#include "error_message.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock_time.h"
#include "sysio.h"

int log_threshold = LOG_LEVEL_WARN;

static int log_fd = STDERR_FILENO;
static int log_fd_owned;
static uint32_t log_rank;
/* The monotonic reading of the first call: log times count from it. */
static double log_epoch_seconds;

double log_monotonic_seconds(void)
{
    double now = clock_monotonic_seconds();
    if (log_epoch_seconds == 0)
        log_epoch_seconds = now;
    return now - log_epoch_seconds;
}

int log_expand_pattern(const char *pattern, uint32_t rank, long pid, char *out,
                       size_t out_size)
{
    size_t used = 0;
    for (const char *cursor = pattern; *cursor; cursor++) {
        char piece[32];
        const char *text = piece;
        if (cursor[0] == '%' && cursor[1] == 'r') {
            snprintf(piece, sizeof piece, "%u", rank);
            cursor++;
        } else if (cursor[0] == '%' && cursor[1] == 'p') {
            snprintf(piece, sizeof piece, "%ld", pid);
            cursor++;
        } else {
            piece[0] = *cursor;
            piece[1] = '\0';
        }
        size_t length = strlen(text);
        if (used + length + 1 > out_size)
            return -1;
        memcpy(out + used, text, length);
        used += length;
    }
    out[used] = '\0';
    return 0;
}

void log_close(void)
{
    if (log_fd_owned)
        runtime_sysio.close(log_fd);
    log_fd = STDERR_FILENO;
    log_fd_owned = 0;
}

int log_descriptor(void)
{
    return log_fd;
}

int log_open_pattern_file(const char *variable, const char *pattern, uint32_t rank,
                          char *error, size_t error_size)
{
    char path[4096];
    if (log_expand_pattern(pattern, rank, (long)getpid(), path, sizeof path) != 0) {
        /* what is wrong first: a pattern this long would cut the message */
        return error_message(error, error_size,
                             "%s: too long once expanded (at most %zu bytes): \"%s\"", variable,
                             sizeof path - 1, pattern);
    }
    int fd = runtime_sysio.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        error_message(error, error_size, "%s: cannot open \"%s\": %s", variable, path,
                      strerror(errno));
    return fd;
}

int log_configure(enum log_level level, const char *file_pattern, uint32_t rank,
                  char *error, size_t error_size)
{
    log_threshold = (int)level;
    log_rank = rank;
    log_monotonic_seconds();
    if (file_pattern == NULL)
        return 0;
    int fd = log_open_pattern_file("ADAPTDL_LOG_FILE", file_pattern, rank, error, error_size);
    if (fd < 0)
        return -1;
    log_close();
    log_fd = fd;
    log_fd_owned = 1;
    return 0;
}

void log_set_rank(uint32_t rank)
{
    log_rank = rank;
}

static const char *const log_level_labels[] = {"error", "warn", "info", "debug", "trace"};

void log_emit(enum log_level level, const char *format, ...)
{
    int saved_errno = errno;
    char line[2048];
    int prefix = snprintf(line, sizeof line, "adaptshim[r%u p%ld %.6f] %s: ", log_rank,
                          (long)getpid(), log_monotonic_seconds(), log_level_labels[level]);
    va_list arguments;
    va_start(arguments, format);
    int body = vsnprintf(line + prefix, sizeof line - (size_t)prefix - 1, format, arguments);
    va_end(arguments);
    size_t length = (size_t)prefix;
    if (body > 0)
        length += (size_t)body < sizeof line - (size_t)prefix - 1 ? (size_t)body
                                                                 : sizeof line - (size_t)prefix - 2;
    line[length++] = '\n';
    sysio_write_all(log_fd, line, length);
    errno = saved_errno;
}

static size_t log_append_text(char *buffer, size_t used, size_t size, const char *text)
{
    while (*text && used + 1 < size)
        buffer[used++] = *text++;
    return used;
}

static size_t log_append_unsigned(char *buffer, size_t used, size_t size, unsigned long value)
{
    char digits[24];
    size_t count = 0;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value > 0);
    while (count > 0 && used + 1 < size)
        buffer[used++] = digits[--count];
    return used;
}

void log_signal_safe(enum log_level level, const char *message)
{
    if ((int)level > log_threshold)
        return;
    int saved_errno = errno;
    char line[512];
    size_t used = log_append_text(line, 0, sizeof line, "adaptshim[r");
    used = log_append_unsigned(line, used, sizeof line, log_rank);
    used = log_append_text(line, used, sizeof line, " p");
    used = log_append_unsigned(line, used, sizeof line, (unsigned long)getpid());
    used = log_append_text(line, used, sizeof line, "] ");
    used = log_append_text(line, used, sizeof line, log_level_labels[level]);
    used = log_append_text(line, used, sizeof line, ": ");
    used = log_append_text(line, used, sizeof line - 1, message);
    line[used++] = '\n';
    ssize_t ignored = runtime_sysio.write(log_fd, line, used);
    (void)ignored;
    errno = saved_errno;
}
