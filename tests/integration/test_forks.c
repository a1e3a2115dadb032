/* test_forks.c - forked processes (adaptshim(7) "After fork"), through real processes (the
 * probe is tests/tools/fork_probe.c):
 *
 * - workers that open the data file themselves, forked every epoch from a
 *   parent that never touched it (a map-style Dataset that opens its file
 *   lazily in __getitem__, under a DataLoader with non-persistent workers),
 *   share one pass: each epoch the workers together read every record once,
 *   and each epoch has its own permutation;
 * - a forked child that leaves through exit(3) writes no metrics exit
 *   event, no summary and no job record: the job has one of each;
 * - children forked while other threads read a fixed-record and a `lines`
 *   file (descriptors and streams), map the data and commit checkpoints,
 *   so that every lock of the library is held at one fork or another,
 *   all read their data and finish (they once hung in the registry's or a
 *   stream's lock, held for ever by a thread the child does not have). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DIM 3
#define RECORD_SIZE (8 + 4 * DIM + 4)   /* ADSD: id, x[DIM], y */
#define HEADER_SIZE 16
#define RECORDS 90
#define WORKERS 3
#define EPOCHS 3
/* Forks made while other threads are inside the library: 41 of 500 hung
 * before every lock was taken across fork. */
#define FORKS_UNDER_READERS 200

static void run_fork_probe(struct run_result *result, char *const arguments[],
                           char *const environment[])
{
    char *program = strdup(harness_build_path("tools/fork_probe"));
    char *argv[8] = {program};
    for (size_t i = 0; arguments[i] != NULL && i < 6; i++)
        argv[i + 1] = arguments[i];
    harness_run(result, argv, environment, true, 60);
    free(program);
    cr_assert_eq(result->status, 0, "fork_probe %s: status %d\nstdout %s\nstderr %s",
                 arguments[0], result->status, result->out, result->err);
}

/* ids[epoch][position] from "epoch E position P id I" lines; -1 where no
 * line named the position.  Returns the number of lines that did. */
static size_t parse_epochs(const char *output, long long ids[EPOCHS][RECORDS])
{
    for (unsigned e = 0; e < EPOCHS; e++)
        for (unsigned p = 0; p < RECORDS; p++)
            ids[e][p] = -1;
    size_t lines = 0;
    char *copy = strdup(output);
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned epoch, position;
        long long id;
        if (sscanf(line, "epoch %u position %u id %lld", &epoch, &position, &id) != 3)
            continue;
        cr_assert_lt(epoch, EPOCHS, "%s", line);
        cr_assert_lt(position, RECORDS, "%s", line);
        cr_expect_eq(ids[epoch][position], -1, "position read twice: %s", line);
        ids[epoch][position] = id;
        lines++;
    }
    free(copy);
    return lines;
}

Test(forks, workers_that_open_the_file_themselves_share_one_pass_per_epoch)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, RECORDS, DIM, 41);
    char setting[700];
    snprintf(setting, sizeof setting, "ADAPTDL_DATA=%s:record=%d:header=%d", data,
             RECORD_SIZE, HEADER_SIZE);
    char *environment[] = {setting, "ADAPTDL_SEED=9", NULL};
    char record[16], header[16], workers[16], epochs[16];
    snprintf(record, sizeof record, "%d", RECORD_SIZE);
    snprintf(header, sizeof header, "%d", HEADER_SIZE);
    snprintf(workers, sizeof workers, "%d", WORKERS);
    snprintf(epochs, sizeof epochs, "%d", EPOCHS);
    char *arguments[] = {"workers", data, record, header, workers, epochs, NULL};
    struct run_result result;
    run_fork_probe(&result, arguments, environment);

    static long long ids[EPOCHS][RECORDS];
    cr_expect_eq(parse_epochs(result.out, ids), (size_t)EPOCHS * RECORDS, "%s", result.out);
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        bool seen[RECORDS] = {false};
        for (unsigned position = 0; position < RECORDS; position++) {
            long long id = ids[epoch][position];
            cr_assert(id >= 0 && id < RECORDS, "epoch %u position %u: id %lld", epoch,
                      position, id);
            cr_expect(!seen[id], "epoch %u: record %lld read twice", epoch, id);
            seen[id] = true;
        }
    }
    for (unsigned epoch = 1; epoch < EPOCHS; epoch++) {
        unsigned same = 0;
        for (unsigned position = 0; position < RECORDS; position++)
            same += ids[epoch][position] == ids[epoch - 1][position];
        cr_expect_lt(same, RECORDS / 4, "epoch %u has the order of epoch %u at %u of %u "
                     "positions: its workers did not see the pass end", epoch, epoch - 1,
                     same, RECORDS);
    }
    run_result_free(&result);
    harness_remove_temp_dir(directory);
    free(data);
}

Test(forks, a_child_that_calls_exit_leaves_no_exit_event_summary_or_job_record)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, RECORDS, DIM, 43);
    char setting[700], metrics[700], state[700];
    snprintf(setting, sizeof setting, "ADAPTDL_DATA=%s:record=%d:header=%d", data,
             RECORD_SIZE, HEADER_SIZE);
    char *metrics_path = harness_path_in(directory, "metrics");
    snprintf(metrics, sizeof metrics, "ADAPTDL_METRICS_FILE=%s", metrics_path);
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    char *environment[] = {setting, metrics, state, "ADAPTDL_LOG=debug", NULL};
    char record[16], header[16];
    snprintf(record, sizeof record, "%d", RECORD_SIZE);
    snprintf(header, sizeof header, "%d", HEADER_SIZE);
    char *arguments[] = {"exit_in_child", data, record, header, NULL};
    struct run_result result;
    run_fork_probe(&result, arguments, environment);

    cr_expect_eq(harness_count_occurrences(result.out, "child 0 position 2"), 1, "%s",
                 result.out);
    cr_expect_eq(harness_count_lines_containing(metrics_path, "\"type\": \"exit\""), 1,
                 "one exit event for the job");
    cr_expect_eq(harness_count_occurrences(result.err, "summary (exit)"), 1, "%s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "job record written"), 1, "%s",
                 result.err);
    run_result_free(&result);
    harness_remove_temp_dir(directory);
    free(data);
    free(metrics_path);
}

Test(forks, children_forked_while_threads_read_map_and_commit_all_finish)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    char *lines = harness_path_in(directory, "eval.txt");
    char *checkpoint = harness_path_in(directory, "ck.pt");
    harness_generate_dataset(data, 64, DIM, 47);
    harness_generate_text(lines, 200, 48);
    char setting[1500], state[700], save[700];
    snprintf(setting, sizeof setting, "ADAPTDL_DATA=%s:record=%d:header=%d;%s:lines:role=eval",
             data, RECORD_SIZE, HEADER_SIZE, lines);
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    snprintf(save, sizeof save, "ADAPTDL_SAVE=%s/ck*", directory);
    char *environment[] = {setting, state, save, "ADAPTDL_LOG=error", NULL};
    char record[16], forks[16];
    snprintf(record, sizeof record, "%d", RECORD_SIZE);
    snprintf(forks, sizeof forks, "%d", FORKS_UNDER_READERS);
    char *arguments[] = {"fork_under_readers", data, record, lines, forks, checkpoint, NULL};
    struct run_result result;
    run_fork_probe(&result, arguments, environment);

    char expected[64];
    snprintf(expected, sizeof expected, "forks %d hung 0 failed 0", FORKS_UNDER_READERS);
    cr_expect_neq(strstr(result.out, expected), NULL, "%s\n%s", result.out, result.err);
    run_result_free(&result);
    harness_remove_temp_dir(directory);
    free(data);
    free(lines);
    free(checkpoint);
}
