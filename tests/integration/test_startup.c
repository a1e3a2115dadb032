/* test_startup.c - what every process sees at start-up: untouched without
 * ADAPTDL_* variables, exit 2 with one line on a malformed value (a
 * malformed ADAPTDL_TARGET glob included), nothing at all with
 * ADAPTDL_DISABLE=1 or a non-matching ADAPTDL_TARGET. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static void expect_config_error(char *const environment[], const char *variable)
{
    struct run_result result;
    char *argv[] = {"/bin/echo", "main-ran", NULL};
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 2, "status %d for %s, stderr: %s", result.status, variable,
                 result.err);
    cr_expect(strstr(result.err, variable) != NULL, "stderr names %s: %s", variable,
              result.err);
    cr_expect(strstr(result.out, "main-ran") == NULL, "main must not run: %s", result.out);
    /* exactly one line */
    char *newline = strchr(result.err, '\n');
    cr_expect(newline != NULL && newline[1] == '\0', "one line: [%s]", result.err);
    run_result_free(&result);
}

Test(startup, programs_without_variables_run_untouched)
{
    struct run_result result;
    char *argv[] = {"/bin/sh", "-c", "echo hello; cat /proc/self/maps | grep -c libmpi; true",
                    NULL};
    harness_run(&result, argv, NULL, true, 20);
    cr_expect_eq(result.status, 0);
    cr_expect_str_eq(result.out, "hello\n0\n");
    cr_expect_str_eq(result.err, "");
    run_result_free(&result);
}

Test(startup, malformed_log_level_exits_2_before_main)
{
    char *environment[] = {"ADAPTDL_LOG=verbose", NULL};
    expect_config_error(environment, "ADAPTDL_LOG");
}

Test(startup, malformed_data_entry_exits_2)
{
    char *environment[] = {"ADAPTDL_DATA=/tmp/x.bin:record=abc", NULL};
    expect_config_error(environment, "ADAPTDL_DATA");
}

Test(startup, lines_with_record_exits_2)
{
    char *environment[] = {"ADAPTDL_DATA=/tmp/x.txt:lines:record=4", NULL};
    expect_config_error(environment, "ADAPTDL_DATA");
}

Test(startup, unknown_resume_mode_exits_2)
{
    char *environment[] = {"ADAPTDL_RESUME=sometimes", NULL};
    expect_config_error(environment, "ADAPTDL_RESUME");
}

Test(startup, missing_checkpoint_parent_exits_2)
{
    char *environment[] = {"ADAPTDL_CHECKPOINT_PATH=/nonexistent-parent/state", NULL};
    expect_config_error(environment, "/nonexistent-parent");
}

Test(startup, checkpoint_directory_is_created_when_parent_exists)
{
    const char *directory = harness_temp_dir();
    char *state = harness_path_in(directory, "state");
    char *setting = NULL;
    cr_assert(asprintf(&setting, "ADAPTDL_CHECKPOINT_PATH=%s", state) > 0);
    char *environment[] = {setting, NULL};
    struct run_result result;
    char *argv[] = {"/bin/true", NULL};
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 0, "stderr: %s", result.err);
    struct stat status;
    cr_expect(stat(state, &status) == 0 && S_ISDIR(status.st_mode));
    run_result_free(&result);
}

Test(startup, disable_ignores_everything_else)
{
    char *environment[] = {"ADAPTDL_DISABLE=1", "ADAPTDL_LOG=verbose", NULL};
    struct run_result result;
    char *argv[] = {"/bin/echo", "ran", NULL};
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 0);
    cr_expect_str_eq(result.out, "ran\n");
    run_result_free(&result);
}

Test(startup, target_mismatch_leaves_process_alone)
{
    char *environment[] = {"ADAPTDL_TARGET=trainer*", "ADAPTDL_LOG=verbose", NULL};
    struct run_result result;
    char *argv[] = {"/bin/echo", "ran", NULL};
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 0, "stderr %s", result.err);
    cr_expect_str_eq(result.out, "ran\n");
    run_result_free(&result);
}

Test(startup, target_match_applies_configuration)
{
    char *environment[] = {"ADAPTDL_TARGET=ech?", "ADAPTDL_LOG=verbose", NULL};
    struct run_result result;
    char *argv[] = {"/bin/echo", "ran", NULL};
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 2);
    run_result_free(&result);
}

/* A target glob fnmatch cannot match as written (an unclosed '[') used to
 * leave every program untouched without a word: now an error. */
Test(startup, malformed_target_exits_2)
{
    char *environment[] = {"ADAPTDL_TARGET=ech[o", NULL};
    expect_config_error(environment, "ADAPTDL_TARGET");
}

/* A process that only runs a helper (here setpriv, which drops to another
 * user and group before it execs /bin/true) gets no thread of the library:
 * it serves nothing there.  With the stop deadline's thread started before
 * main, glibc aborted setpriv's setresgid (status 134). */
Test(startup, a_helper_that_changes_its_user_gets_no_thread_and_runs)
{
    if (access("/usr/bin/setpriv", X_OK) != 0)
        cr_skip("no /usr/bin/setpriv (util-linux) on this machine");
    const char *directory = harness_temp_dir();
    char data[700], save[700];
    snprintf(data, sizeof data, "ADAPTDL_DATA=%s/train.bin:record=8", directory);
    snprintf(save, sizeof save, "ADAPTDL_SAVE=%s/ck*", directory);
    char *environment[] = {data, save, NULL};
    char *argv[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    "/bin/true", NULL};
    struct run_result result;
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 0, "status %d: %s", result.status, result.err);
    run_result_free(&result);
    harness_remove_temp_dir(directory);
}
