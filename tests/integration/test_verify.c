/* test_verify.c - adaptdl-verify (adaptdl-verify(1)) on the project's example
 * trainers: "exact" for a loader that resumes exactly (replay_loader's
 * stdio-size-rewind under replay, ifstream_reader under continue); for a
 * trainer that restores its own epoch counter run under replay, the
 * records its resumed runs lose, pass by pass, and that
 * ADAPTDL_RESUME=continue makes it exact; bad usage refused in one line
 * with status 2; and nothing left behind: no scratch directory, no trainer
 * process. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define VERIFY_RECORDS 400
#define VERIFY_RECORD_SIZE 64
#define VERIFY_TIMEOUT 180

/* Records whose first 8 bytes are their id, as replay_loader reads them. */
static char *verify_write_records(const char *directory)
{
    char *path = harness_path_in(directory, "records.bin");
    unsigned char *bytes = calloc(VERIFY_RECORDS, VERIFY_RECORD_SIZE);
    cr_assert_not_null(bytes);
    for (uint64_t id = 0; id < VERIFY_RECORDS; id++)
        for (int i = 0; i < 8; i++)
            bytes[id * VERIFY_RECORD_SIZE + i] = (unsigned char)(id >> (8 * i));
    cr_assert_eq(harness_write_file(path, bytes, VERIFY_RECORDS * VERIFY_RECORD_SIZE), 0);
    free(bytes);
    return path;
}

/* Entries of a directory, "." and ".." aside. */
static size_t verify_entries(const char *directory, const char *prefix)
{
    DIR *listing = opendir(directory);
    cr_assert_not_null(listing, "%s: %s", directory, strerror(errno));
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL)
        count += strncmp(entry->d_name, prefix, strlen(prefix)) == 0;
    closedir(listing);
    return count;
}

/* Runs adaptdl-verify with `options` (NULL-terminated), then `trainer`
 * (NULL-terminated), scratch directories under `scratch`. */
static void verify_run(struct run_result *result, const char *scratch,
                       const char *const options[], const char *const trainer[],
                       char *const environment[])
{
    char *tool = strdup(harness_build_path("adaptdl-verify"));
    const char *argv[48] = {tool, "--scratch", scratch};
    size_t count = 3;
    for (size_t i = 0; options[i] != NULL; i++)
        argv[count++] = options[i];
    argv[count++] = "--";
    for (size_t i = 0; trainer[i] != NULL; i++)
        argv[count++] = trainer[i];
    argv[count] = NULL;
    harness_run(result, (char *const *)argv, environment, false, VERIFY_TIMEOUT);
    free(tool);
}

/* Every process a kept case's traces name (each process's first line, and
 * the stop lines) is gone: it no longer exists, or its pid is another
 * program's now. */
static void verify_no_trainer_left(const char *scratch, const char *program)
{
    char *command = NULL;
    cr_assert(asprintf(&command, "cat %s/adaptdl-verify.*/*/*.trace | "
                                 "sed -n -e 's/^adaptshim-trace 1 pid \\([0-9]*\\) .*/\\1/p' "
                                 "-e 's/^P \\([0-9]*\\) .*/\\1/p' | sort -u", scratch) > 0);
    FILE *pids = popen(command, "r");
    cr_assert_not_null(pids);
    long pid;
    size_t checked = 0;
    while (fscanf(pids, "%ld", &pid) == 1) {
        checked++;
        if (kill((pid_t)pid, 0) != 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        char *line = harness_read_file(path, NULL);
        cr_expect(line == NULL || strstr(line, program) == NULL,
                  "process %ld (%s) is still running", pid, program);
        free(line);
    }
    pclose(pids);
    free(command);
    cr_expect_gt(checked, 6, "the traces name the processes of every run");
}

Test(verify, a_loader_that_resumes_exactly_is_exact_in_every_case, .timeout = 240)
{
    const char *directory = harness_temp_dir();
    char *data = verify_write_records(directory);
    char *program = strdup(harness_build_path("trainers/replay_loader"));
    char data_setting[600];
    snprintf(data_setting, sizeof data_setting, "ADAPTDL_DATA=%s:record=%d", data,
             VERIFY_RECORD_SIZE);
    char *environment[] = {data_setting, "ADAPTDL_CHECKPOINT_PATH=state",
                           "ADAPTDL_SAVE=*model.ckpt", "ADAPTDL_SEED=11",
                           "ADAPTDL_RESUME=replay", NULL};
    const char *options[] = {"--keep", NULL};
    const char *trainer[] = {program, "--style", "stdio-size-rewind", "--data", data, "--record",
                             "64", "--epochs", "3", "--checkpoint", "model.ckpt",
                             "--checkpoint-every", "50", NULL};
    struct run_result result;
    verify_run(&result, directory, options, trainer, environment);
    cr_expect_eq(result.status, 0, "%s\n%s", result.out, result.err);
    const char *rows[] = {"\nmid-epoch kill ", "\nepoch-end kill ",
                          "\nmid-epoch kill, restart on 2 replicas "};
    for (size_t i = 0; i < 3; i++) {
        const char *row = strstr(result.out, rows[i]);
        cr_assert_not_null(row, "no row%s: %s", rows[i], result.out);
        const char *end = strchr(row + 1, '\n');
        cr_expect(end != NULL && end - row > 7 && strncmp(end - 5, "exact", 5) == 0,
                  "row%s is exact: %s", rows[i], result.out);
    }
    /* 400 records a pass, a commit every 50: the mid-epoch kill comes
     * after the first commit inside pass 1, the epoch-end one after pass
     * 1's end (the kill prefers a pass after the first) */
    cr_expect(strstr(result.out, "commit 9: records.bin pass 1 at 50 of 400") != NULL, "%s",
              result.out);
    cr_expect(strstr(result.out, "commit 16: records.bin pass 1 at 400 of 400") != NULL, "%s",
              result.out);
    cr_expect(strstr(result.out, "not exact") == NULL, "%s", result.out);
    cr_expect(strstr(result.out, "Every case that ran resumed exactly.") != NULL, "%s",
              result.out);
    cr_expect(strstr(result.err, "the runs' files are kept in") != NULL, "%s", result.err);
    verify_no_trainer_left(directory, "replay_loader");
    run_result_free(&result);
    free(program);
    free(data);
    harness_remove_temp_dir(directory);
}

/* ifstream_reader restores its epoch counter from its checkpoint: under
 * replay its resumed run starts at that epoch, the passes before the bound
 * one are empty, and its last epoch reads the pass before the last one:
 * the whole last pass, 201 records, is lost.  Under continue it is exact. */
static void verify_ifstream(struct run_result *result, const char *directory, const char *resume)
{
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, 201, 6, 3);
    char *program = strdup(harness_build_path("trainers/ifstream_reader"));
    char data_setting[600], resume_setting[64];
    snprintf(data_setting, sizeof data_setting,
             "ADAPTDL_DATA=%s:record=36:header=16:count=8,u64le,36", data);
    snprintf(resume_setting, sizeof resume_setting, "ADAPTDL_RESUME=%s", resume);
    char *environment[] = {data_setting, "ADAPTDL_CHECKPOINT_PATH=state", "ADAPTDL_SAVE=*ckpt",
                           "ADAPTDL_SEED=5", resume_setting, NULL};
    const char *options[] = {NULL};
    const char *trainer[] = {program, "--data", data, "--epochs", "3", "--batch", "8",
                             "--checkpoint", "ckpt", NULL};
    verify_run(result, directory, options, trainer, environment);
    free(program);
    free(data);
}

Test(verify, a_trainer_restoring_its_epoch_loses_a_pass_under_replay, .timeout = 240)
{
    const char *directory = harness_temp_dir();
    struct run_result result;
    verify_ifstream(&result, directory, "replay");
    cr_expect_eq(result.status, 1, "%s\n%s", result.out, result.err);
    const char *expected[] = {
        "not exact: 201 lost, 0 repeated",
        "  with ADAPTDL_RESUME=continue ",
        "  mid-epoch kill: train.bin pass 2: 201 lost, 0 repeated (uninterrupted run: 201 "
        "records, this case: 0)\n",
        "  epoch-end kill: train.bin pass 2: 201 lost, 0 repeated",
        "mid-epoch kill: not exact as set; exact with ADAPTDL_RESUME=continue.\n",
        "epoch-end kill: not exact as set; exact with ADAPTDL_RESUME=continue.\n",
        "mid-epoch kill, restart on 2 replicas: not exact as set; exact with "
        "ADAPTDL_RESUME=continue.\n",
        "the library said after the restart: restore: replay shows the passes before pass 1",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        cr_expect(strstr(result.out, expected[i]) != NULL, "\"%s\" missing:\n%s", expected[i],
                  result.out);
    /* each case's fix row says exact */
    size_t fixes = 0;
    for (const char *row = result.out; (row = strstr(row, "\n  with ADAPTDL_RESUME=continue "));
         row++) {
        const char *end = strchr(row + 1, '\n');
        char line[512];
        snprintf(line, sizeof line, "%.*s", end ? (int)(end - row) : 0, row);
        fixes += strstr(line, "  exact") != NULL && strstr(line, "not exact") == NULL;
    }
    cr_expect_eq(fixes, 3, "three cases fixed by ADAPTDL_RESUME=continue:\n%s", result.out);
    cr_expect_eq(verify_entries(directory, "adaptdl-verify."), 0, "no scratch directory left");
    run_result_free(&result);
    harness_remove_temp_dir(directory);
}

Test(verify, a_trainer_restoring_its_epoch_is_exact_under_continue, .timeout = 240)
{
    const char *directory = harness_temp_dir();
    struct run_result result;
    verify_ifstream(&result, directory, "continue");
    cr_expect_eq(result.status, 0, "%s\n%s", result.out, result.err);
    cr_expect(strstr(result.out, "not exact") == NULL && strstr(result.out, "failed") == NULL,
              "%s", result.out);
    /* 185 records left of pass 1 and the 201 of pass 2, over 2 replicas */
    cr_expect(strstr(result.out, "exact (2 padding)\n") != NULL, "%s", result.out);
    cr_expect_eq(verify_entries(directory, "adaptdl-verify."), 0, "no scratch directory left");
    run_result_free(&result);
    harness_remove_temp_dir(directory);
}

/* A data file named relative to the working directory, linked into every
 * run's scratch directory. */
Test(verify, a_relative_data_path_is_linked_in, .timeout = 240)
{
    const char *directory = harness_temp_dir();
    char *data = verify_write_records(directory);
    char *tool = strdup(harness_build_path("adaptdl-verify"));
    char *program = strdup(harness_build_path("trainers/replay_loader"));
    char *script = NULL;
    cr_assert(asprintf(&script, "cd '%s' && exec '%s' --link records.bin --replicas 1 -- '%s' "
                       "--style stat-lazy-open --data records.bin --record 64 --epochs 2 "
                       "--checkpoint ck/model.ckpt --checkpoint-every 40", directory, tool,
                       program) > 0);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    char *environment[] = {"ADAPTDL_DATA=*records.bin:record=64",
                           "ADAPTDL_CHECKPOINT_PATH=ck/state", "ADAPTDL_SAVE=ck/model.ckpt",
                           "ADAPTDL_RESUME=replay", NULL};
    struct run_result result;
    harness_run(&result, argv, environment, false, VERIFY_TIMEOUT);
    cr_expect_eq(result.status, 0, "%s\n%s", result.out, result.err);
    cr_expect(strstr(result.out, "\nepoch-end kill ") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "restart on") == NULL, "--replicas 1 leaves that case out: %s",
              result.out);
    cr_expect_eq(verify_entries(directory, "adaptdl-verify."), 0, "no scratch directory left");
    cr_expect_eq(verify_entries(directory, "ck"), 0, "nothing written beside the data");
    run_result_free(&result);
    free(script);
    free(program);
    free(tool);
    free(data);
    harness_remove_temp_dir(directory);
}

Test(verify, a_trainer_that_never_commits_cannot_be_verified, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *data = verify_write_records(directory);
    char *program = strdup(harness_build_path("trainers/replay_loader"));
    char data_setting[600];
    snprintf(data_setting, sizeof data_setting, "ADAPTDL_DATA=%s:record=64", data);
    char *environment[] = {data_setting, "ADAPTDL_CHECKPOINT_PATH=state",
                           "ADAPTDL_SAVE=*model.ckpt", NULL};
    const char *options[] = {NULL};
    const char *trainer[] = {program, "--style", "stdio-size-rewind", "--data", data, "--record",
                             "64", "--epochs", "1", "--checkpoint", "model.ckpt",
                             "--checkpoint-every", "100000", NULL};
    struct run_result result;
    verify_run(&result, directory, options, trainer, environment);
    cr_expect_eq(result.status, 2, "%s\n%s", result.out, result.err);
    cr_expect(strstr(result.err, "committed no checkpoint matching ADAPTDL_SAVE") != NULL, "%s",
              result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 2, "progress, then one line: %s",
                 result.err);
    cr_expect_eq(verify_entries(directory, "adaptdl-verify."), 0, "no scratch directory left");
    run_result_free(&result);
    free(program);
    free(data);
    harness_remove_temp_dir(directory);
}

Test(verify, bad_usage_is_one_line_and_status_2, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *tool = strdup(harness_build_path("adaptdl-verify"));
    char *program = strdup(harness_build_path("trainers/replay_loader"));
    char *absolute_checkpoint = harness_path_in(directory, "model.ckpt");
    char *data = "ADAPTDL_DATA=/data/records.bin:record=64";
    struct refusal {
        char *argv[8];
        char *environment[5];
        const char *expected;
    } cases[] = {
        {{tool, "--", program, NULL}, {"ADAPTDL_CHECKPOINT_PATH=s", "ADAPTDL_SAVE=ck", NULL},
         "ADAPTDL_DATA is not set"},
        {{tool, "--", program, NULL}, {data, "ADAPTDL_CHECKPOINT_PATH=/abs", "ADAPTDL_SAVE=ck", NULL},
         "ADAPTDL_CHECKPOINT_PATH \"/abs\" is not accepted"},
        {{tool, "--", program, NULL}, {data, "ADAPTDL_CHECKPOINT_PATH=s", NULL},
         "ADAPTDL_SAVE is not set"},
        {{tool, "--", program, NULL}, {data, "ADAPTDL_CHECKPOINT_PATH=s", "ADAPTDL_SAVE=/x/ck*", NULL},
         "ADAPTDL_SAVE \"/x/ck*\" is not accepted"},
        {{tool, "--", program, NULL}, {data, "ADAPTDL_CHECKPOINT_PATH=../s", "ADAPTDL_SAVE=ck", NULL},
         "without \"..\""},
        {{tool, "--", program, "--checkpoint", absolute_checkpoint, NULL},
         {data, "ADAPTDL_CHECKPOINT_PATH=s", "ADAPTDL_SAVE=*model.ckpt", NULL},
         "by an absolute path"},
        {{tool, "--", program, NULL},
         {data, "ADAPTDL_CHECKPOINT_PATH=s", "ADAPTDL_SAVE=ck", "ADAPTDL_SEED=x", NULL},
         "ADAPTDL_SEED"},
        {{tool, "--frobnicate", "--", program, NULL}, {NULL}, "unknown option \"--frobnicate\""},
        {{tool, "--replicas", "0", "--", program, NULL}, {NULL}, "--replicas \"0\""},
        {{tool, "--timeout", "soon", "--", program, NULL}, {NULL}, "--timeout \"soon\""},
        {{tool, "--", NULL}, {NULL}, "no trainer given"},
        {{tool, "--", "no-such-trainer-program", NULL}, {NULL}, "not found"},
        {{tool, "--link", "/etc", "--", program, NULL},
         {data, "ADAPTDL_CHECKPOINT_PATH=s", "ADAPTDL_SAVE=ck", NULL}, "--link \"/etc\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        harness_expect_refused_command(cases[i].argv, cases[i].environment, i,
                                       cases[i].expected);
    free(absolute_checkpoint);
    free(program);
    free(tool);
    harness_remove_temp_dir(directory);
}

/* The trainers' temporary files (a killed DataLoader's multiprocessing
 * directories) go into each case's directory, which the tool removes: a
 * trainer that makes one in $TMPDIR at every run leaves none in the
 * user's. */
Test(verify, the_trainers_temporary_files_are_removed_with_the_scratch, .timeout = 240)
{
    const char *directory = harness_temp_dir();
    char *data = verify_write_records(directory);
    char *program = strdup(harness_build_path("trainers/replay_loader"));
    char *users_tmp = harness_path_in(directory, "users-tmp");
    cr_assert_eq(mkdir(users_tmp, 0700), 0);
    char data_setting[600], tmpdir_setting[600];
    snprintf(data_setting, sizeof data_setting, "ADAPTDL_DATA=%s:record=%d", data,
             VERIFY_RECORD_SIZE);
    snprintf(tmpdir_setting, sizeof tmpdir_setting, "TMPDIR=%s", users_tmp);
    char *environment[] = {data_setting, tmpdir_setting, "ADAPTDL_CHECKPOINT_PATH=state",
                           "ADAPTDL_SAVE=*model.ckpt", "ADAPTDL_TARGET=replay_loader",
                           "ADAPTDL_SEED=11", "ADAPTDL_RESUME=replay", NULL};
    const char *options[] = {"--no-fixes", "--replicas", "1", NULL};
    const char *trainer[] = {"/bin/sh", "-c",
                             "mktemp \"$TMPDIR/left-behind.XXXXXX\" >/dev/null && "
                             "exec \"$0\" \"$@\"",
                             program, "--style", "stdio-size-rewind", "--data", data,
                             "--record", "64", "--epochs", "2", "--checkpoint", "model.ckpt",
                             "--checkpoint-every", "50", NULL};
    struct run_result result;
    verify_run(&result, directory, options, trainer, environment);
    cr_expect_eq(result.status, 0, "%s\n%s", result.out, result.err);
    DIR *left = opendir(users_tmp);
    cr_assert_not_null(left);
    size_t entries = 0;
    for (struct dirent *entry = readdir(left); entry != NULL; entry = readdir(left))
        entries += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    closedir(left);
    cr_expect_eq(entries, 0, "%zu temporary files left in the user's TMPDIR", entries);
    run_result_free(&result);
    free(users_tmp);
    free(program);
    free(data);
    harness_remove_temp_dir(directory);
}
