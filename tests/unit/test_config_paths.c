/* test_config_paths.c - the settings checked against the start-up
 * directory and the file system (config_paths.h): a data glob under a
 * directory that does not exist is an error, a checkpoint glob under one
 * a warning (the trainer may create it), a hints file's missing directory
 * an error on rank 0, and two data entries that are one glob once made
 * absolute an error.  Every message is one line naming the variable, the
 * value and what is accepted. */
#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_paths.h"
#include "unit_helpers.h"

#define ENV(...) ((char *const[]){__VA_ARGS__, NULL})

static struct adaptdl_config config;
static char *directory;   /* a fresh directory: the start-up directory of the checks */
static char error[1024];

static void setup(void)
{
    directory = unit_make_temp_directory("/tmp/adaptshim-test-config-paths-XXXXXX");
}

static void teardown(void)
{
    config_free(&config);
    unit_remove_temp_directory(directory);
}

TestSuite(config_paths, .init = setup, .fini = teardown);

/* "NAME=<directory>/<rest>" (or "NAME=<rest>" when rest starts with '/'
 * or is relative and `absolute` is false). */
static char *setting(const char *name, const char *rest, bool absolute)
{
    char *text = NULL;
    cr_assert_gt(absolute ? asprintf(&text, "%s=%s/%s", name, directory, rest)
                          : asprintf(&text, "%s=%s", name, rest),
                 0);
    return text;
}

static void make_subdirectory(const char *name)
{
    char *path = NULL;
    cr_assert_gt(asprintf(&path, "%s/%s", directory, name), 0);
    cr_assert_eq(mkdir(path, 0755), 0);
    free(path);
}

static void make_file(const char *name)
{
    char *path = NULL;
    cr_assert_gt(asprintf(&path, "%s/%s", directory, name), 0);
    FILE *file = fopen(path, "w");
    cr_assert_not_null(file);
    fclose(file);
    free(path);
}

static void parse(char *const *envp)
{
    config_free(&config);
    cr_assert_eq(config_parse(&config, envp, error, sizeof error), 0, "%s", error);
}

static void expect_paths_ok(char *const *envp)
{
    parse(envp);
    error[0] = '\0';
    cr_expect_eq(config_check_paths(&config, directory, error, sizeof error), 0, "%s", error);
}

/* The checks fail with one line holding every fragment (NULL-terminated). */
static void expect_paths_error(char *const *envp, const char *const fragments[])
{
    parse(envp);
    cr_assert_eq(config_check_paths(&config, directory, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "accepted: "), "%s", error);
    cr_expect_null(strchr(error, '\n'), "one line: %s", error);
    for (size_t i = 0; fragments[i] != NULL; i++)
        cr_expect_not_null(strstr(error, fragments[i]), "lacks \"%s\": %s", fragments[i],
                           error);
}

/* ---- ADAPTDL_DATA: directories ------------------------------------------ */

Test(config_paths, a_data_glob_under_a_missing_directory_is_an_error)
{
    char *data = setting("ADAPTDL_DATA", "no/such/dir/*.bin:record=4", true);
    char missing[600];
    snprintf(missing, sizeof missing, "its directory \"%s/no/such/dir\" does not exist",
             directory);
    expect_paths_error(ENV(data), (const char *[]){"ADAPTDL_DATA entry 1", "/no/such/dir/*.bin",
                                                    missing, "exists when the job starts", NULL});
    free(data);
}

Test(config_paths, a_relative_data_glob_is_looked_up_in_the_start_up_directory)
{
    expect_paths_error(ENV("ADAPTDL_DATA=train.bin:record=4;tokens/*.bin:record=2"),
                       (const char *[]){"ADAPTDL_DATA entry 2 (\"tokens/*.bin\")",
                                        "/tokens\" does not exist", NULL});
    make_subdirectory("tokens");
    expect_paths_ok(ENV("ADAPTDL_DATA=train.bin:record=4;tokens/*.bin:record=2"));
}

Test(config_paths, a_data_glob_under_a_file_is_an_error)
{
    make_file("train.bin");
    char *data = setting("ADAPTDL_DATA", "train.bin/*.idx:record=4", true);
    expect_paths_error(ENV(data), (const char *[]){"ADAPTDL_DATA entry 1",
                                                    "train.bin\" is not a directory", NULL});
    free(data);
}

Test(config_paths, data_globs_in_existing_directories_pass)
{
    make_subdirectory("shards");
    char *data = setting("ADAPTDL_DATA", "shards/part-*.bin:record=4", true);
    char *wild = setting("ADAPTDL_DATA", "*/part-*.bin:record=4", true);
    expect_paths_ok(ENV(data));
    /* the directory ends before the first wildcard component */
    expect_paths_ok(ENV(wild));
    /* a missing file in an existing directory is the trainer's own ENOENT */
    expect_paths_ok(ENV("ADAPTDL_DATA=not-yet.bin:record=4"));
    free(wild);
    free(data);
}

/* ---- ADAPTDL_DATA: the same glob once made absolute ---------------------- */

Test(config_paths, two_data_entries_that_are_one_absolute_glob_are_an_error)
{
    make_subdirectory("data");
    char *absolute = NULL;
    cr_assert_gt(asprintf(&absolute, "ADAPTDL_DATA=data/a.bin:record=4;%s/data/a.bin:record=8",
                          directory),
                 0);
    char same[600];
    snprintf(same, sizeof same, "are the same glob \"%s/data/a.bin\"", directory);
    expect_paths_error(ENV(absolute),
                       (const char *[]){"ADAPTDL_DATA entries 1 (\"data/a.bin\") and 2", same,
                                        "once made absolute against the start-up directory",
                                        NULL});
    expect_paths_error(ENV("ADAPTDL_DATA=./a.bin:record=4;x.bin:record=4;data/../a.bin:record=4"),
                       (const char *[]){"entries 1 (\"./a.bin\") and 3 (\"data/../a.bin\")",
                                        NULL});
    expect_paths_ok(ENV("ADAPTDL_DATA=a.bin:record=4;data/a.bin:record=4"));
    free(absolute);
}

Test(config_paths, without_a_start_up_directory_relative_globs_stay_as_written)
{
    parse(ENV("ADAPTDL_DATA=./a.bin:record=4;a.bin:record=4"));
    cr_expect_eq(config_check_paths(&config, NULL, error, sizeof error), 0, "%s", error);
}

/* ---- ADAPTDL_HINTS_FILE -------------------------------------------------- */

Test(config_paths, a_hints_file_in_a_missing_directory_is_an_error_on_rank_0)
{
    char *hints = setting("ADAPTDL_HINTS_FILE", "no/such/hints.json", true);
    char named[600];
    snprintf(named, sizeof named, "the directory \"%s/no/such\" of \"%s/no/such/hints.json\" "
             "does not exist", directory, directory);
    expect_paths_error(ENV(hints),
                       (const char *[]){"ADAPTDL_HINTS_FILE: ", named,
                                        "accepted: a file path in an existing directory", NULL});
    /* only rank 0 writes it: another host may lack the directory */
    expect_paths_ok(ENV(hints, "ADAPTDL_NUM_REPLICAS=2", "ADAPTDL_REPLICA_RANK=1"));
    free(hints);
}

Test(config_paths, a_hints_file_in_an_existing_directory_passes)
{
    char *hints = setting("ADAPTDL_HINTS_FILE", "hints.json", true);
    expect_paths_ok(ENV(hints));
    expect_paths_ok(ENV("ADAPTDL_HINTS_FILE=hints.json"));
    expect_paths_ok(ENV("ADAPTDL_HINTS_FILE=/hints.json"));
    expect_paths_error(ENV("ADAPTDL_HINTS_FILE=out/hints.json"),
                       (const char *[]){"/out\" of \"out/hints.json\" does not exist", NULL});
    free(hints);
}

/* ---- ADAPTDL_SAVE: a warning ---------------------------------------------- */

Test(config_paths, a_save_glob_under_a_missing_directory_is_a_warning)
{
    char *save = setting("ADAPTDL_SAVE", "checkpoints/model-*.pt", true);
    parse(ENV(save));
    cr_expect_eq(config_check_paths(&config, directory, error, sizeof error), 0,
                 "not an error: %s", error);
    char message[1024];
    cr_assert(config_describe_missing_save_directory(&config, directory, message,
                                                     sizeof message));
    char named[600];
    snprintf(named, sizeof named, "ADAPTDL_SAVE: the directory \"%s/checkpoints\" of \"%s/"
             "checkpoints/model-*.pt\" does not exist at start-up", directory, directory);
    cr_expect_not_null(strstr(message, named), "%s", message);
    cr_expect_not_null(strstr(message, "unless the trainer creates it"), "%s", message);
    cr_expect_not_null(strstr(message, "accepted: "), "%s", message);
    cr_expect_null(strchr(message, '\n'), "%s", message);

    make_subdirectory("checkpoints");
    cr_expect_not(config_describe_missing_save_directory(&config, directory, message,
                                                         sizeof message),
                  "%s", message);
    free(save);
}

Test(config_paths, a_relative_save_glob_in_the_start_up_directory_is_no_warning)
{
    char message[1024];
    parse(ENV("ADAPTDL_SAVE=ck*"));
    cr_expect_not(config_describe_missing_save_directory(&config, directory, message,
                                                         sizeof message));
    parse(ENV("ADAPTDL_SAVE=run1/ck*"));
    cr_expect(config_describe_missing_save_directory(&config, directory, message,
                                                     sizeof message));
    parse(ENV("ADAPTDL_LOG=warn"));
    cr_expect_not(config_describe_missing_save_directory(&config, directory, message,
                                                         sizeof message),
                  "no ADAPTDL_SAVE, nothing to say");
}
