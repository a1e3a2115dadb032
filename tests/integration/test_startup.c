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

/* The case `name`: a program run with environment exits 2 before main, with
 * one line on stderr that names `variable`. */
static void expect_config_error(const char *name, char *const environment[],
                                const char *variable)
{
    struct run_result result;
    char *argv[] = {"/bin/echo", "main-ran", NULL};
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 2, "%s: status %d for %s, stderr: %s", name, result.status,
                 variable, result.err);
    cr_expect(strstr(result.err, variable) != NULL, "%s: stderr names %s: %s", name, variable,
              result.err);
    cr_expect(strstr(result.out, "main-ran") == NULL, "%s: main must not run: %s", name,
              result.out);
    /* exactly one line */
    char *newline = strchr(result.err, '\n');
    cr_expect(newline != NULL && newline[1] == '\0', "%s: one line: [%s]", name, result.err);
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

/* A malformed value exits 2 before main with one line naming it. */
Test(startup, every_malformed_setting_exits_2_naming_it)
{
    static const struct {
        const char *name;
        char *setting;
        const char *named;      /* what the line must name */
    } cases[] = {
        {"malformed_log_level_exits_2_before_main", "ADAPTDL_LOG=verbose", "ADAPTDL_LOG"},
        {"malformed_data_entry_exits_2", "ADAPTDL_DATA=/tmp/x.bin:record=abc", "ADAPTDL_DATA"},
        {"lines_with_record_exits_2", "ADAPTDL_DATA=/tmp/x.txt:lines:record=4", "ADAPTDL_DATA"},
        {"unknown_resume_mode_exits_2", "ADAPTDL_RESUME=sometimes", "ADAPTDL_RESUME"},
        {"missing_checkpoint_parent_exits_2",
         "ADAPTDL_CHECKPOINT_PATH=/nonexistent-parent/state", "/nonexistent-parent"},
        /* a target glob fnmatch cannot match as written (an unclosed '[')
         * used to leave every program untouched without a word */
        {"malformed_target_exits_2", "ADAPTDL_TARGET=ech[o", "ADAPTDL_TARGET"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *environment[] = {cases[i].setting, NULL};
        expect_config_error(cases[i].name, environment, cases[i].named);
    }
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

/* ADAPTDL_DISABLE=1, or an ADAPTDL_TARGET the program does not match, leave
 * the process alone: even a malformed ADAPTDL_LOG is not looked at.  A
 * matching target applies the configuration (and so exits 2 on it). */
Test(startup, disable_and_target_decide_whether_the_configuration_applies)
{
    static const struct {
        const char *name;
        char *switch_setting;
        int status;
        const char *out;        /* NULL: not checked */
    } cases[] = {
        {"disable_ignores_everything_else", "ADAPTDL_DISABLE=1", 0, "ran\n"},
        {"target_mismatch_leaves_process_alone", "ADAPTDL_TARGET=trainer*", 0, "ran\n"},
        {"target_match_applies_configuration", "ADAPTDL_TARGET=ech?", 2, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *environment[] = {cases[i].switch_setting, "ADAPTDL_LOG=verbose", NULL};
        struct run_result result;
        char *argv[] = {"/bin/echo", "ran", NULL};
        harness_run(&result, argv, environment, true, 20);
        cr_expect_eq(result.status, cases[i].status, "%s: stderr %s", cases[i].name,
                     result.err);
        if (cases[i].out != NULL)
            cr_expect_str_eq(result.out, cases[i].out, "%s", cases[i].name);
        run_result_free(&result);
    }
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
