/* test_log.c - leveled, per-rank logging (runtime/log.h): the threshold, the
 * destination pattern with %r and %p, one line per message carrying rank
 * and level, the rank changed later, and the monotonic clock. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

Test(log, the_pattern_expands_rank_and_pid)
{
    char out[128];
    cr_assert_eq(log_expand_pattern("/tmp/x.%r.%p.log", 3, 4242, out, sizeof out), 0);
    cr_expect_str_eq(out, "/tmp/x.3.4242.log");
    cr_expect_eq(log_expand_pattern("%r%r%r%r%r", 12345, 1, out, 8), -1, "does not fit");
}

Test(log, lines_go_to_the_file_with_rank_and_level_and_the_threshold_holds)
{
    char directory[] = "/tmp/adaptshim-test-log-XXXXXX";
    cr_assert_not_null(mkdtemp(directory));
    char pattern[256], path[256];
    snprintf(pattern, sizeof pattern, "%s/log.%%r", directory);
    snprintf(path, sizeof path, "%s/log.7", directory);
    char error[256];
    cr_assert_eq(log_configure(LOG_LEVEL_INFO, pattern, 7, error, sizeof error), 0, "%s",
                 error);
    cr_expect(log_enabled(LOG_LEVEL_INFO));
    cr_expect(!log_enabled(LOG_LEVEL_DEBUG));
    log_info("first %d", 1);
    log_debug("not written %d", 2);
    log_set_rank(8);
    log_warn("second");
    log_close();
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

Test(log, the_clock_is_monotonic)
{
    double first = log_monotonic_seconds();
    double second = log_monotonic_seconds();
    cr_expect_geq(first, 0);
    cr_expect_geq(second, first);
}
