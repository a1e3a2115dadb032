/* test_log.c - leveled, per-rank logging (runtime/log.h): the threshold, the
 * destination pattern with %r and %p, one line per message carrying rank
 * and level, the rank changed later, and the monotonic clock.  The lines
 * themselves (log_emit, and log_signal_safe for signal handlers) are
 * caught by a fake write(2) in the runtime_sysio table: each must be one
 * write of one whole line, cut to its buffer when too long, and must leave
 * the errno of the trainer's call it logs from as it was. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sysio.h"

Test(log, the_pattern_expands_rank_and_pid)
{
    char out[128];
    cr_assert_eq(log_expand_pattern("/tmp/x.%r.%p.log", 3, 4242, out, sizeof out), 0);
    cr_expect_str_eq(out, "/tmp/x.3.4242.log");
    cr_expect_eq(log_expand_pattern("%r%r%r%r%r", 12345, 1, out, 8), -1, "does not fit");
}

/* A new directory (removed by the test) with `pattern`, the file name
 * `name` with %r in place of the rank, and `path`, that file for `rank`. */
static void make_pattern_directory(char *directory, const char *name, unsigned rank,
                                   char pattern[256], char path[256])
{
    cr_assert_not_null(mkdtemp(directory));
    snprintf(pattern, 256, "%s/%s.%%r", directory, name);
    snprintf(path, 256, "%s/%s.%u", directory, name, rank);
}

Test(log, lines_go_to_the_file_with_rank_and_level_and_the_threshold_holds)
{
    char directory[] = "/tmp/adaptshim-test-log-XXXXXX";
    char pattern[256], path[256];
    make_pattern_directory(directory, "log", 7, pattern, path);
    char error[256];
    cr_assert_eq(log_configure(LOG_LEVEL_INFO, pattern, 7, error, sizeof error), 0, "%s",
                 error);
    cr_expect_neq(log_descriptor(), STDERR_FILENO, "the file's own descriptor");
    cr_expect(log_enabled(LOG_LEVEL_INFO));
    cr_expect(!log_enabled(LOG_LEVEL_DEBUG));
    log_info("first %d", 1);
    log_debug("not written %d", 2);
    log_set_rank(8);
    log_warn("second");
    log_close();
    cr_expect_eq(log_descriptor(), STDERR_FILENO, "closed: stderr again");
    FILE *file = fopen(path, "r");
    cr_assert_not_null(file);
    char line[512];
    cr_assert_not_null(fgets(line, sizeof line, file));
    cr_expect(strstr(line, "[r7 ") != NULL && strstr(line, "info: first 1\n") != NULL, "%s",
              line);
    cr_assert_not_null(fgets(line, sizeof line, file));
    cr_expect(strstr(line, "[r8 ") != NULL && strstr(line, "warn: second\n") != NULL, "%s",
              line);
    cr_expect_null(fgets(line, sizeof line, file), "the debug line was not written");
    fclose(file);
    unlink(path);
    rmdir(directory);
}

Test(log, an_unwritable_destination_is_an_error_and_stderr_stays)
{
    char error[256] = "";
    cr_expect_eq(log_configure(LOG_LEVEL_WARN, "/nonexistent-dir/log.%r", 0, error,
                               sizeof error), -1);
    cr_expect_neq(error[0], '\0');
}

Test(log, a_pattern_file_opens_for_appending_and_errors_name_the_variable)
{
    char directory[] = "/tmp/adaptshim-test-log-XXXXXX";
    char pattern[256], path[256];
    make_pattern_directory(directory, "out", 5, pattern, path);
    char error[256] = "";
    for (int round = 0; round < 2; round++) {
        int fd = log_open_pattern_file("ADAPTDL_X_FILE", pattern, 5, error, sizeof error);
        cr_assert_geq(fd, 0, "%s", error);
        cr_expect_eq(write(fd, "ab", 2), 2);
        close(fd);
    }
    struct stat status;
    cr_assert_eq(stat(path, &status), 0);
    cr_expect_eq(status.st_size, 4, "the second open appended");
    cr_expect_eq(status.st_mode & 0777, 0644 & ~umask(022));

    cr_expect_eq(log_open_pattern_file("ADAPTDL_X_FILE", "/nonexistent-dir/out.%r", 0, error,
                                       sizeof error), -1);
    cr_expect(strncmp(error, "ADAPTDL_X_FILE: cannot open \"/nonexistent-dir/out.0\"", 49) == 0,
              "%s", error);
    char long_pattern[5000];
    memset(long_pattern, 'x', sizeof long_pattern - 1);
    long_pattern[sizeof long_pattern - 1] = '\0';
    cr_expect_eq(log_open_pattern_file("ADAPTDL_X_FILE", long_pattern, 0, error, sizeof error),
                 -1);
    cr_expect(strstr(error, "ADAPTDL_X_FILE: ") == error && strstr(error, "too long") != NULL,
              "%s", error);
    unlink(path);
    rmdir(directory);
}

Test(log, the_clock_is_monotonic)
{
    double first = log_monotonic_seconds();
    double second = log_monotonic_seconds();
    cr_expect_geq(first, 0);
    cr_expect_geq(second, first);
}

/* --- the lines themselves --------------------------------------------------- */

static struct {
    char text[8192];
    size_t size;
    unsigned writes;
    int fd;
    bool fail;                /* every write fails with EAGAIN */
} written;

static ssize_t capture_write(int fd, const void *buffer, size_t size)
{
    written.writes++;
    written.fd = fd;
    if (written.fail) {
        errno = EAGAIN;
        return -1;
    }
    cr_assert_leq(written.size + size, sizeof written.text - 1);
    memcpy(written.text + written.size, buffer, size);
    written.size += size;
    written.text[written.size] = '\0';
    return (ssize_t)size;
}

static void capture_lines(void)
{
    memset(&written, 0, sizeof written);
    written.fd = -1;
    runtime_sysio.write = capture_write;
    char error[256] = "";
    cr_assert_eq(log_configure(LOG_LEVEL_INFO, NULL, 0, error, sizeof error), 0, "%s", error);
}

Test(log, log_emit_writes_one_line_with_rank_pid_time_and_level_to_stderr)
{
    capture_lines();
    log_set_rank(5);
    log_emit(LOG_LEVEL_ERROR, "cannot %s: %d", "bind", 42);
    cr_expect_eq(written.writes, 1, "one write per line");
    cr_expect_eq(written.fd, STDERR_FILENO, "no file configured: stderr");
    char prefix[64];
    snprintf(prefix, sizeof prefix, "adaptshim[r5 p%ld ", (long)getpid());
    cr_expect_eq(strncmp(written.text, prefix, strlen(prefix)), 0, "%s", written.text);
    double seconds = -1;
    cr_expect_eq(sscanf(written.text + strlen(prefix), "%lf]", &seconds), 1, "%s",
                 written.text);
    cr_expect_geq(seconds, 0, "a monotonic timestamp: %s", written.text);
    const char *tail = strstr(written.text, "] error: cannot bind: 42\n");
    cr_expect_not_null(tail, "%s", written.text);
    cr_expect(tail != NULL && tail[strlen("] error: cannot bind: 42\n")] == '\0',
              "exactly one line: %s", written.text);

    written.size = 0;
    log_emit(LOG_LEVEL_TRACE, "deep");
    cr_expect_not_null(strstr(written.text, "] trace: deep\n"),
                       "log_emit writes what it is given; the macros apply the threshold: %s",
                       written.text);
}

Test(log, log_emit_cuts_a_long_message_and_still_ends_the_line)
{
    capture_lines();
    char message[4000];
    memset(message, 'x', sizeof message - 1);
    message[sizeof message - 1] = '\0';
    log_emit(LOG_LEVEL_WARN, "%s", message);
    cr_expect_eq(written.writes, 1);
    cr_expect_eq(written.size, 2047, "its 2048-byte buffer less the NUL: %zu", written.size);
    cr_expect_eq(written.text[written.size - 1], '\n');
    cr_expect_eq(written.text[written.size - 2], 'x', "the message fills the rest");
    cr_expect_eq(strchr(written.text, '\n'), written.text + written.size - 1, "one line");

    /* a message that just fits is not cut */
    written.size = 0;
    log_emit(LOG_LEVEL_WARN, "%s", "");
    size_t prefix = written.size - 1;   /* everything before the newline */
    size_t fits = 2046 - prefix;
    message[fits] = '\0';
    written.size = 0;
    log_emit(LOG_LEVEL_WARN, "%s", message);
    cr_expect_eq(written.size, prefix + fits + 1, "%zu", written.size);
    cr_expect_eq(written.text[written.size - 1], '\n');
}

Test(log, log_emit_keeps_errno_even_when_its_write_fails)
{
    capture_lines();
    written.fail = true;
    errno = ENOENT;
    log_emit(LOG_LEVEL_ERROR, "open failed");
    cr_expect_eq(errno, ENOENT, "the trainer's call set it: %d", errno);
    cr_expect_eq(written.writes, 1, "a write that fails is not retried");
    written.fail = false;
    errno = ERANGE;
    log_emit(LOG_LEVEL_ERROR, "again");
    cr_expect_eq(errno, ERANGE);
}

Test(log, log_signal_safe_writes_the_fixed_prefix_and_the_message_in_one_write)
{
    capture_lines();
    log_set_rank(12);
    errno = EINTR;
    log_signal_safe(LOG_LEVEL_WARN, "second SIGINT: exiting");
    cr_expect_eq(errno, EINTR, "errno is kept");
    cr_expect_eq(written.writes, 1);
    cr_expect_eq(written.fd, STDERR_FILENO);
    char expected[128];
    snprintf(expected, sizeof expected, "adaptshim[r12 p%ld] warn: second SIGINT: exiting\n",
             (long)getpid());
    cr_expect_str_eq(written.text, expected, "no timestamp, nothing formatted");
}

Test(log, log_signal_safe_applies_the_threshold_itself)
{
    capture_lines();   /* threshold: info */
    log_signal_safe(LOG_LEVEL_DEBUG, "not written");
    cr_expect_eq(written.writes, 0);
    log_signal_safe(LOG_LEVEL_INFO, "written");
    cr_expect_eq(written.writes, 1);
    cr_expect_not_null(strstr(written.text, "] info: written\n"), "%s", written.text);
    log_threshold = LOG_LEVEL_ERROR;
    log_signal_safe(LOG_LEVEL_WARN, "not written either");
    cr_expect_eq(written.writes, 1);
    log_signal_safe(LOG_LEVEL_ERROR, "an error");
    cr_expect_eq(written.writes, 2);
}

Test(log, log_signal_safe_cuts_a_long_message_and_still_ends_the_line)
{
    capture_lines();
    char message[2000];
    memset(message, 'y', sizeof message - 1);
    message[sizeof message - 1] = '\0';
    log_signal_safe(LOG_LEVEL_ERROR, message);
    cr_expect_eq(written.writes, 1);
    cr_expect_eq(written.size, 511, "its 512-byte buffer, newline included: %zu", written.size);
    cr_expect_eq(written.text[written.size - 1], '\n');
    cr_expect_eq(written.text[written.size - 2], 'y');
    cr_expect_eq(strchr(written.text, '\n'), written.text + written.size - 1, "one line");
}

Test(log, both_kinds_of_line_go_to_the_configured_file)
{
    char directory[] = "/tmp/adaptshim-test-log-XXXXXX";
    cr_assert_not_null(mkdtemp(directory));
    char path[256];
    snprintf(path, sizeof path, "%s/log", directory);
    char error[256];
    cr_assert_eq(log_configure(LOG_LEVEL_WARN, path, 2, error, sizeof error), 0, "%s", error);
    log_emit(LOG_LEVEL_WARN, "from %s", "a wrapper");
    log_signal_safe(LOG_LEVEL_WARN, "from a handler");
    log_close();
    FILE *file = fopen(path, "r");
    cr_assert_not_null(file);
    char line[512];
    cr_assert_not_null(fgets(line, sizeof line, file));
    cr_expect(strncmp(line, "adaptshim[r2 p", 14) == 0 &&
              strstr(line, "] warn: from a wrapper\n") != NULL, "%s", line);
    cr_assert_not_null(fgets(line, sizeof line, file));
    cr_expect(strncmp(line, "adaptshim[r2 p", 14) == 0 &&
              strstr(line, "] warn: from a handler\n") != NULL, "%s", line);
    cr_expect_null(fgets(line, sizeof line, file));
    fclose(file);
    unlink(path);
    rmdir(directory);
}
