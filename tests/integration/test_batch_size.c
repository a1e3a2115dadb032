/* test_batch_size.c - the batch size and learning rate injected into an
 * unmodified trainer before its main (SPEC §7): the initial global batch
 * split over the replicas, every form of flag, the environment, and the
 * one-line errors with status 2. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DIM 4
#define RECORD_SIZE (8 + 4 * DIM + 4)

struct injection_run {
    const char *directory;
    char *data;
    char data_setting[512];
};

static void injection_run_init(struct injection_run *run)
{
    run->directory = harness_temp_dir();
    run->data = harness_path_in(run->directory, "train.bin");
    harness_generate_dataset(run->data, 400, DIM, 2);
    snprintf(run->data_setting, sizeof run->data_setting,
             "ADAPTDL_DATA=%s:record=%d:header=16:count=8,u64le,%d", run->data, RECORD_SIZE,
             RECORD_SIZE);
}

/* Records per step in the trainer's ids log (all steps but the epoch's last). */
static unsigned records_per_step(const char *ids_path)
{
    struct id_log log;
    harness_read_id_log(ids_path, &log);
    unsigned in_step = 0, first = 0;
    for (size_t i = 0; i < log.count && first == 0; i++) {
        if (log.events[i].kind == ID_EVENT_RECORD)
            in_step++;
        else if (log.events[i].kind == ID_EVENT_STEP)
            first = in_step;
    }
    id_log_free(&log);
    return first;
}

static int run_sgd_read(const struct injection_run *run, char *const flags[],
                        char *const settings[], struct run_result *result, char **ids)
{
    *ids = harness_path_in(run->directory, "ids");
    remove(*ids);
    char *checkpoint = harness_path_in(run->directory, "ck");
    char *trainer = strdup(harness_build_path("trainers/sgd_read"));
    char *argv[32] = {trainer, "--data", run->data, "--epochs", "1", "--checkpoint",
                      checkpoint, "--ids-log", *ids};
    size_t used = 9;
    for (size_t i = 0; flags[i]; i++)
        argv[used++] = flags[i];
    argv[used] = NULL;
    char *environment[16] = {(char *)run->data_setting, "ADAPTDL_NUM_REPLICAS=2",
                             "ADAPTDL_REPLICA_RANK=0", "ADAPTDL_LOG=info"};
    size_t count = 4;
    for (size_t i = 0; settings[i]; i++)
        environment[count++] = settings[i];
    environment[count] = NULL;
    return harness_run(result, argv, environment, true, 60);
}

Test(batch_size, the_initial_global_batch_is_split_over_the_replicas)
{
    struct injection_run run;
    injection_run_init(&run);
    char *flags[] = {"--batch", "7", "--lr", "0.1", NULL};
    char *settings[] = {"ADAPTDL_BSZ_ARG=argv:--batch", "ADAPTDL_BATCH_SIZE=24", NULL};
    struct run_result result;
    char *ids;
    cr_assert_eq(run_sgd_read(&run, flags, settings, &result, &ids), 0, "%s", result.err);
    cr_expect_eq(records_per_step(ids), 12, "24 over 2 replicas");
    cr_expect(strstr(result.err, "batch size: --batch 12") != NULL, "%s", result.err);
    run_result_free(&result);
}

Test(batch_size, an_absent_flag_is_added_and_the_trainers_value_sets_the_initial_batch)
{
    struct injection_run run;
    injection_run_init(&run);
    /* sgd_read requires --batch: the shim inserts it, from ADAPTDL_BATCH_SIZE */
    char *flags[] = {"--lr", "0.1", NULL};
    char *settings[] = {"ADAPTDL_BSZ_ARG=argv:--batch", "ADAPTDL_BATCH_SIZE=10", NULL};
    struct run_result result;
    char *ids;
    cr_assert_eq(run_sgd_read(&run, flags, settings, &result, &ids), 0, "%s", result.err);
    cr_expect_eq(records_per_step(ids), 5);
    run_result_free(&result);
    /* the trainer's own --batch 8 with 2 replicas means an initial batch of 16 */
    char *own[] = {"--batch", "8", "--lr", "0.1", NULL};
    char *only_arg[] = {"ADAPTDL_BSZ_ARG=argv:--batch", NULL};
    cr_assert_eq(run_sgd_read(&run, own, only_arg, &result, &ids), 0, "%s", result.err);
    cr_expect_eq(records_per_step(ids), 8);
    cr_expect(strstr(result.err, "initial 16") != NULL, "%s", result.err);
    run_result_free(&result);
}

Test(batch_size, the_learning_rate_follows_the_rule)
{
    struct injection_run run;
    injection_run_init(&run);
    char *flags[] = {"--batch", "8", "--lr", "0.1", NULL};
    char *settings[] = {"ADAPTDL_BSZ_ARG=argv:--batch", "ADAPTDL_BATCH_SIZE=16",
                        "ADAPTDL_LOCAL_BSZ_BOUNDS=16:64", "ADAPTDL_LR_ARG=argv:--lr",
                        "ADAPTDL_LR_RULE=linear", NULL};
    struct run_result result;
    char *ids;
    cr_assert_eq(run_sgd_read(&run, flags, settings, &result, &ids), 0, "%s", result.err);
    cr_expect_eq(records_per_step(ids), 16, "the local lower bound");
    cr_expect(strstr(result.err, "--lr 0.1 -> 0.2 (rule linear") != NULL, "%s", result.err);
    run_result_free(&result);
}

static void expect_injection_error(char *const flags[], char *const settings[],
                                   const char *named)
{
    struct injection_run run;
    injection_run_init(&run);
    struct run_result result;
    char *ids;
    cr_expect_eq(run_sgd_read(&run, flags, settings, &result, &ids), 2, "stderr %s",
                 result.err);
    cr_expect(strstr(result.err, named) != NULL, "names %s: %s", named, result.err);
    char *newline = strchr(result.err, '\n');
    cr_expect(newline != NULL && newline[1] == '\0', "one line: %s", result.err);
    cr_expect_str_eq(result.out, "", "main never ran");
    run_result_free(&result);
}

Test(batch_size, bad_input_is_one_line_and_status_2_before_main)
{
    char *bad_value[] = {"--batch", "abc", "--lr", "0.1", NULL};
    char *arg_only[] = {"ADAPTDL_BSZ_ARG=argv:--batch", NULL};
    expect_injection_error(bad_value, arg_only, "ADAPTDL_BSZ_ARG");
    char *no_value[] = {"--lr", "0.1", NULL};
    expect_injection_error(no_value, arg_only, "ADAPTDL_BATCH_SIZE");
    char *good[] = {"--batch", "8", "--lr", "0.1", NULL};
    char *not_numeric[] = {"ADAPTDL_BSZ_ARG=argv:--batch", "ADAPTDL_BATCH_SIZE=lots", NULL};
    expect_injection_error(good, not_numeric, "ADAPTDL_BATCH_SIZE");
    char *max_below[] = {"ADAPTDL_BSZ_ARG=argv:--batch", "ADAPTDL_BATCH_SIZE=64",
                         "ADAPTDL_MAX_BATCH_SIZE=32", NULL};
    expect_injection_error(good, max_below, "ADAPTDL_MAX_BATCH_SIZE");
    char *inverted[] = {"ADAPTDL_BSZ_ARG=argv:--batch", "ADAPTDL_LOCAL_BSZ_BOUNDS=64:8", NULL};
    expect_injection_error(good, inverted, "ADAPTDL_LOCAL_BSZ_BOUNDS");
    char *rule[] = {"ADAPTDL_BSZ_ARG=argv:--batch", "ADAPTDL_LR_RULE=cubic", NULL};
    expect_injection_error(good, rule, "ADAPTDL_LR_RULE");
}
