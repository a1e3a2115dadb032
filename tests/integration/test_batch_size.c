/* test_batch_size.c - the batch size and learning rate injected into an
 * unmodified trainer before its main (adaptshim(7) "BATCH-SIZE CONTROL"): the initial global batch
 * split over the replicas, every form of flag, the environment, and the
 * one-line errors with status 2. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goodput.h"
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

/* Batch-size adaptation under mpirun: the shim profiles the trainer, decides
 * that a larger batch pays off, requests a restart at the next checkpoint
 * commit (status 143); the relaunch gets the larger batch and a learning rate
 * scaled by the rule.  With a payback time below the restart cost nothing is
 * requested and the trainer runs to its end. */
struct adaptive_job {
    const char *directory;
    char *data;
    const char *payback;        /* ADAPTDL_PAYBACK_SECONDS */
    const char *initial_batch;  /* ADAPTDL_BATCH_SIZE */
    const char *max_batch;      /* ADAPTDL_MAX_BATCH_SIZE */
    const char *lr;
    const char *epochs;
    const char *sleep_us;
    const char *decide_seconds; /* ADAPTDL_DECIDE_SECONDS */
    bool ids_log;               /* NAME.ids.RANK */
};

/* The usual job: a regression whose noise scale makes a larger batch pay. */
static void adaptive_job_init(struct adaptive_job *job, uint64_t records, const char *payback)
{
    job->directory = harness_temp_dir();
    job->data = harness_path_in(job->directory, "train.bin");
    harness_generate_dataset(job->data, records, DIM, 3);
    job->payback = payback;
    job->initial_batch = "8";
    job->max_batch = "256";
    job->lr = "0.01";
    job->epochs = "30";
    job->sleep_us = "200";
    job->decide_seconds = "0.3";
    job->ids_log = false;
}

static pid_t start_adaptive_job(const struct adaptive_job *job, unsigned restarts,
                                const char *name)
{
    const char *directory = job->directory;
    enum { SETTINGS = 11 };
    static char settings[SETTINGS][512], ids_path[512];
    snprintf(settings[0], sizeof settings[0], "LD_PRELOAD=%s",
             harness_build_path("libadaptshim.so"));
    snprintf(settings[1], sizeof settings[1],
             "ADAPTDL_DATA=%s:record=%d:header=16:count=8,u64le,%d", job->data, RECORD_SIZE,
             RECORD_SIZE);
    snprintf(settings[2], sizeof settings[2], "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    snprintf(settings[3], sizeof settings[3], "ADAPTDL_SAVE=%s/ck*", directory);
    snprintf(settings[4], sizeof settings[4], "ADAPTDL_METRICS_FILE=%s/%s.metrics.%%r",
             directory, name);
    snprintf(settings[5], sizeof settings[5], "ADAPTDL_NUM_RESTARTS=%u", restarts);
    snprintf(settings[6], sizeof settings[6], "ADAPTDL_PAYBACK_SECONDS=%s", job->payback);
    snprintf(settings[7], sizeof settings[7], "ADAPTDL_HINTS_FILE=%s/%s.hints", directory,
             name);
    snprintf(settings[8], sizeof settings[8], "ADAPTDL_BATCH_SIZE=%s", job->initial_batch);
    snprintf(settings[9], sizeof settings[9], "ADAPTDL_MAX_BATCH_SIZE=%s", job->max_batch);
    snprintf(settings[10], sizeof settings[10], "ADAPTDL_DECIDE_SECONDS=%s",
             job->decide_seconds);
    snprintf(ids_path, sizeof ids_path, "%s/%s.ids.%%r", directory, name);
    /* sgd_mpi --resume runs its epoch loop again from 0: replay style */
    const char *fixed[] = {"ADAPTDL_BSZ_ARG=argv:--batch-size", "ADAPTDL_LR_ARG=argv:--lr",
                           "ADAPTDL_LR_RULE=linear", "ADAPTDL_LOG=info",
                           "ADAPTDL_RESUME=replay"};
    char *argv[64] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"};
    size_t used = 5;
    for (int i = 0; i < SETTINGS; i++) {
        argv[used++] = "-x";
        argv[used++] = settings[i];
    }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        argv[used++] = "-x";
        argv[used++] = (char *)fixed[i];
    }
    static char checkpoint[512], trainer[512];
    snprintf(checkpoint, sizeof checkpoint, "%s/ck", directory);
    snprintf(trainer, sizeof trainer, "%s", harness_build_path("trainers/sgd_mpi"));
    const char *tail[] = {trainer, "--data", job->data, "--epochs", job->epochs,
                          "--batch-size", "16", "--lr", job->lr, "--checkpoint", checkpoint,
                          "--resume", "--sleep-us", job->sleep_us};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        argv[used++] = (char *)tail[i];
    if (job->ids_log) {
        argv[used++] = "--ids-log";
        argv[used++] = ids_path;
    }
    argv[used] = NULL;
    char *out = harness_path_in(directory, name);
    pid_t pid = harness_start_mpirun(argv, out);
    free(out);
    return pid;
}

/* Rank 0's metrics file of the run `name`, whole ("" when missing). */
static char *rank0_metrics(const char *directory, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.metrics.0", directory, name);
    return harness_read_output(path);
}

/* A pass event of a train file that replay did not skip (a skipped pass is
 * header-only: its lengths say nothing of the epoch). */
static bool is_played_train_pass_event(const char *line)
{
    bool pass_event = strstr(line, "\"type\": \"pass_begin\"") != NULL ||
                      strstr(line, "\"type\": \"pass_end\"") != NULL;
    return pass_event && strstr(line, "\"role\": \"train\"") != NULL &&
           strstr(line, "\"skipped\": false") != NULL;
}

static unsigned injected_batch(const char *directory, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.err", directory, name);
    char *text = harness_read_output(path);
    const char *found = strstr(text, "batch size: --batch-size ");
    unsigned value = found ? (unsigned)strtoul(found + strlen("batch size: --batch-size "),
                                               NULL, 10)
                           : 0;
    free(text);
    return value;
}

Test(batch_size, a_larger_batch_that_pays_off_is_applied_through_a_restart, .timeout = 240)
{
    struct adaptive_job job;
    adaptive_job_init(&job, 4000, "100000");
    const char *directory = job.directory;
    pid_t pid = start_adaptive_job(&job, 0, "first");
    cr_assert_eq(harness_wait(pid, 200), 143, "the first run asks for a restart");
    cr_expect_eq(injected_batch(directory, "first"), 4, "8 over 2 replicas");
    char *text = rank0_metrics(directory, "first");
    const char *decision = strstr(text, "\"type\": \"decision\", ");
    cr_assert(decision != NULL, "a decision event: %s", text);
    cr_expect(strstr(decision, "\"restart\": true") != NULL, "%.600s", decision);
    static const char *const fields[] = {"\"perf_params\": {", "\"alpha_c\"", "\"gamma\"",
                                         "\"grad_sqr\"", "\"grad_var\"", "\"replicas\"",
                                         "\"current_global_bsz\"", "\"initial_global_bsz\"",
                                         "\"max_global_bsz\"", "\"chosen_global_bsz\"",
                                         "\"chosen_local_bsz\"", "\"goodput_current\"",
                                         "\"goodput_chosen\"", "\"speedup\"",
                                         "\"restart_cost\"", "\"payback_seconds\""};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cr_expect(strstr(decision, fields[i]) != NULL, "missing %s", fields[i]);
    cr_expect(strstr(decision, "\"efficiency\": ") != NULL ||
                  strstr(text, "\"efficiency\": ") != NULL,
              "step lines after the decision carry the efficiency");
    free(text);
    char hints[600];
    snprintf(hints, sizeof hints, "%s/first.hints", directory);
    char *hint_text = harness_read_output(hints);
    cr_expect(strstr(hint_text, "\"perf_params\": {") != NULL, "hints: %s", hint_text);
    cr_expect(strstr(hint_text, "\"goodput_by_replicas\": {\"1\": ") != NULL, "hints: %s",
              hint_text);
    free(hint_text);

    /* a program that makes no step, started with the preload between the
     * runs (a tool the trainer or a launcher runs), leaves the job record
     * and its decision as they are */
    char *record_path = harness_path_in(directory, "state/job.msgpack");
    size_t record_size = 0, after_size = 0;
    char *record = harness_read_file(record_path, &record_size);
    cr_assert(record != NULL, "a job record after the first run");
    char state[600];
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    struct run_result tool;
    harness_run(&tool, (char *[]){"/bin/true", NULL},
                (char *[]){state, "ADAPTDL_BATCH_SIZE=8", "ADAPTDL_MAX_BATCH_SIZE=256",
                           "ADAPTDL_BSZ_ARG=env:BATCH_SIZE", NULL},
                true, 30);
    cr_expect_eq(tool.status, 0, "%s", tool.err);
    run_result_free(&tool);
    char *after = harness_read_file(record_path, &after_size);
    cr_expect(after != NULL && after_size == record_size &&
                  memcmp(after, record, record_size) == 0,
              "the job record is unchanged");
    free(after);
    free(record);

    pid = start_adaptive_job(&job, 1, "second");
    int status = harness_wait(pid, 200);
    cr_expect(status == 143 || status == 0, "second run status %d", status);
    unsigned second = injected_batch(directory, "second");
    cr_expect_gt(second, 4, "the relaunch gets a larger batch (got %u)", second);
    char path[600];
    snprintf(path, sizeof path, "%s/second.err", directory);
    char *log = harness_read_output(path);
    char expected[64];
    snprintf(expected, sizeof expected, "(rule linear, factor %g)", (double)(second * 2) / 8.0);
    cr_expect(strstr(log, expected) != NULL, "learning rate scaled: %s", log);
    free(log);
}

Test(batch_size, no_restart_when_it_would_not_pay_back, .timeout = 240)
{
    /* the restart costs 30 s until measured: a payback time of 1 s never holds */
    struct adaptive_job job;
    adaptive_job_init(&job, 1000, "1");
    const char *directory = job.directory;
    pid_t pid = start_adaptive_job(&job, 0, "run");
    cr_expect_eq(harness_wait(pid, 200), 0);
    char *text = rank0_metrics(directory, "run");
    cr_expect(strstr(text, "\"type\": \"decision\", ") != NULL, "decisions were made");
    cr_expect(strstr(text, "\"restart\": true") == NULL, "none asked for a restart");
    free(text);
}

/* A number logged in a JSON line, by key. */
static double json_number(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *found = strstr(line, pattern);
    cr_assert(found != NULL, "no %s in %s", key, line);
    return strtod(found + strlen(pattern), NULL);
}

/* adaptshim(7) "BATCH-SIZE CONTROL": a decision recomputed from the inputs it logged gives the same
 * answer (its perf_params are written with 17 significant digits).  The
 * model's choice is `best_*`, within `local_bsz_limit` (rule 5: 4 times the
 * largest measured local batch); the chosen batch is that one, or, when rule 4
 * explores (adaptshim(7) "Decisions"), twice the current local batch or the model's larger
 * choice, within the maximum.  Which of the two a run takes depends on its
 * timing, so both are recomputed. */
Test(batch_size, a_logged_decision_recomputes_to_the_same_answer, .timeout = 240)
{
    struct adaptive_job job;
    adaptive_job_init(&job, 4000, "100000");
    const char *directory = job.directory;
    pid_t pid = start_adaptive_job(&job, 0, "run");
    harness_wait(pid, 200);
    char *text = rank0_metrics(directory, "run");
    char *line = strstr(text, "\"type\": \"decision\", ");
    cr_assert(line != NULL, "no decision logged");
    char *end = strchr(line, '\n');
    if (end)
        *end = '\0';
    struct goodput_model model = {
        .perf = {json_number(line, "alpha_c"), json_number(line, "beta_c"),
                 json_number(line, "alpha_n"), json_number(line, "beta_n"),
                 json_number(line, "alpha_r"), json_number(line, "beta_r"),
                 json_number(line, "gamma")},
        .grad = {json_number(line, "grad_sqr"), json_number(line, "grad_var")},
        .initial_global_bsz = (uint64_t)json_number(line, "initial_global_bsz"),
    };
    uint32_t replicas = (uint32_t)json_number(line, "replicas");
    uint64_t max_global = (uint64_t)json_number(line, "max_global_bsz");
    uint64_t current_local = (uint64_t)json_number(line, "current_global_bsz") / replicas;
    struct goodput_config current = {.local_bsz = current_local};
    struct goodput_choice best;
    uint64_t limit = (uint64_t)json_number(line, "local_bsz_limit");
    cr_expect_geq(limit, current_local, "the model may always keep the batch");
    cr_assert_eq(goodput_optimize_from(&model, 1, replicas, max_global, 0, limit, false,
                                       &current, &best), 0);
    cr_expect_eq(best.global_bsz, (uint64_t)json_number(line, "best_global_bsz"));
    cr_expect_eq(best.local_bsz, (uint64_t)json_number(line, "best_local_bsz"));

    uint64_t chosen_local = best.local_bsz;
    double goodput_chosen = best.goodput;
    if (strstr(line, "\"reason\": \"restart to measure a second batch size\"") != NULL) {
        chosen_local = 2 * current_local;
        if (best.local_bsz > chosen_local && best.accum_steps == 0)
            chosen_local = best.local_bsz;
        if (chosen_local > max_global / replicas)
            chosen_local = max_global / replicas;
        if (chosen_local > 4 * current_local)   /* rule 5 */
            chosen_local = 4 * current_local;
        goodput_chosen = goodput_evaluate(&model, 1, replicas, (double)chosen_local, 0);
    }
    cr_expect_eq(chosen_local, (uint64_t)json_number(line, "chosen_local_bsz"));
    cr_expect_eq(chosen_local * replicas, (uint64_t)json_number(line, "chosen_global_bsz"));
    double speedup = goodput_chosen / best.goodput_current;
    cr_expect(fabs(speedup - json_number(line, "speedup")) <= 1e-9 * speedup,
              "speedup %.17g vs %.17g", speedup, json_number(line, "speedup"));
    free(text);
}

/* The length rank 0 last announced for each train pass (0: never) in the
 * run `name` of a job, overriding what earlier runs announced: a pass
 * resumed at another batch size is re-planned (adaptshim(7) "Statistical epochs").  Both ends
 * of a pass count: one re-planned to end where it resumed begins nothing.
 * Passes skipped on replay say nothing of their epoch.  Within one run
 * every announcement of a pass agrees. */
static void collect_pass_lengths(const char *directory, const char *name, uint64_t *lengths,
                                 unsigned passes)
{
    char *text = rank0_metrics(directory, name);
    uint64_t *in_this_run = calloc(passes, sizeof *in_this_run);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!is_played_train_pass_event(line))
            continue;
        uint64_t pass = (uint64_t)json_number(line, "pass");
        uint64_t length = (uint64_t)json_number(line, "pass_length");
        if (pass >= passes)
            continue;
        if (in_this_run[pass] == 0)
            in_this_run[pass] = length;
        cr_expect_eq(in_this_run[pass], length,
                     "%s: pass %llu announced with %llu and %llu records", name,
                     (unsigned long long)pass, (unsigned long long)in_this_run[pass],
                     (unsigned long long)length);
        lengths[pass] = length;
    }
    free(in_this_run);
    free(text);
}

/* The first train pass event of a run that replay did not skip: the pass
 * it resumed, where, and its length.  False when there is none. */
static bool first_resumed_pass(const char *directory, const char *name, uint64_t *pass,
                               uint64_t *start_index, uint64_t *length)
{
    char *text = rank0_metrics(directory, name);
    bool found = false;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && !found;
         line = strtok_r(NULL, "\n", &save)) {
        if (!is_played_train_pass_event(line))
            continue;
        *pass = (uint64_t)json_number(line, "pass");
        *start_index = (uint64_t)json_number(line, "start_index");
        *length = (uint64_t)json_number(line, "pass_length");
        found = true;
    }
    free(text);
    return found;
}

/* A run that resumed inside a pass at another batch size than the run
 * before re-plans that pass (adaptshim(7) "Statistical epochs"): rank 0 logs
 * "pass P resumes at record X of Y planned at the previous batch size; at
 * this one it holds Z", and the pass's events in this run say X and Z.
 * Without a batch change the pass keeps its length and nothing is logged. */
static void expect_resumed_pass_replanned(const char *directory, const char *previous,
                                          const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.err", directory, name);
    char *err = harness_read_output(path);
    const char *line = strstr(err, "statistical epoch: pass ");
    unsigned long long pass = 0, consumed = 0, bound = 0, length = 0;
    bool replanned =
        line != NULL && sscanf(line, "statistical epoch: pass %llu resumes at record %llu of "
                                     "%llu planned at the previous batch size; at this one it "
                                     "holds %llu", &pass, &consumed, &bound, &length) == 4;
    cr_expect(line == NULL || replanned, "%s: unreadable re-plan line: %.200s", name, line);
    free(err);
    bool batch_changed = injected_batch(directory, name) != injected_batch(directory, previous);
    uint64_t event_pass, start_index, pass_length;
    if (!first_resumed_pass(directory, name, &event_pass, &start_index, &pass_length))
        return;  /* the job ended before this run read a train record */
    if (replanned) {
        cr_expect(batch_changed, "%s re-planned pass %llu at an unchanged batch", name, pass);
        cr_expect_eq(event_pass, pass, "%s", name);
        cr_expect_eq(start_index, consumed, "%s: pass %llu", name, pass);
        cr_expect_eq(pass_length, length, "%s: pass %llu", name, pass);
    } else if (batch_changed) {
        cr_expect(start_index == 0 || start_index == pass_length,
                  "%s resumed inside pass %llu (at %llu of %llu) at another batch without "
                  "re-planning it", name, (unsigned long long)event_pass,
                  (unsigned long long)start_index, (unsigned long long)pass_length);
    }
}

/* Statistical epochs across adaptation restarts: the job restarts for new
 * batch sizes until it ends; counting each run's records up to the step the
 * next run resumed at, epoch e holds exactly the M_e records its pass was
 * last planned with (plus the padding of uneven splits), every record
 * floor(M_e / N) or ceil(M_e / N) times, the wraps of a long epoch each a
 * full sweep.  At the larger batch an epoch outgrows one sweep.  The step
 * counter and the progress continue across the restarts: the last run ends
 * at the trainer's own step count, past the progress its epochs stand for.
 * A pass resumed at another batch is re-planned. */
Test(batch_size, data_continues_exactly_through_statistical_epochs_and_restarts,
     .timeout = 400)
{
    enum { RECORDS = 4000, EPOCHS = 6, MAX_RUNS = 4 };
    struct adaptive_job job;
    adaptive_job_init(&job, RECORDS, "100000");
    job.epochs = "6";
    job.ids_log = true;
    char names[MAX_RUNS][16];
    unsigned runs = 0;
    int status = 143;
    while (status == 143 && runs < MAX_RUNS) {
        /* the last run keeps its batch, so that the job ends */
        job.decide_seconds = runs + 1 < MAX_RUNS ? "0.3" : "100000";
        snprintf(names[runs], sizeof names[runs], "run%u", runs);
        status = harness_wait(start_adaptive_job(&job, runs, names[runs]), 200);
        runs++;
    }
    cr_assert_eq(status, 0, "the job ends within %d runs (last status %d)", MAX_RUNS, status);
    cr_assert_geq(runs, 2, "the job restarted for a larger batch");
    cr_expect_gt(injected_batch(job.directory, names[1]), 4);

    uint64_t lengths[EPOCHS] = {0};
    for (unsigned run = 0; run < runs; run++)
        collect_pass_lengths(job.directory, names[run], lengths, EPOCHS);
    unsigned *counts = calloc((size_t)EPOCHS * RECORDS, sizeof *counts);
    for (unsigned run = 0; run < runs; run++) {
        uint64_t cut = UINT64_MAX;
        if (run + 1 < runs) {
            char *out = harness_path_in(job.directory, names[run + 1]);
            char *text = harness_read_output(out);
            cut = harness_resumed_step(text);
            free(text);
            free(out);
        }
        for (unsigned rank = 0; rank < 2; rank++) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s.ids.%u", job.directory, names[run], rank);
            struct id_log log;
            harness_read_id_log(path, &log);
            id_log_count_committed(&log, cut, counts, RECORDS, EPOCHS);
            id_log_free(&log);
        }
    }
    unsigned padding_allowance = runs;  /* one pad record per run splitting a pass */
    bool wrapped = false;
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        uint64_t planned = lengths[epoch];
        cr_assert_gt(planned, 0, "pass %u was announced", epoch);
        wrapped = wrapped || planned > RECORDS;
        uint64_t total = 0;
        unsigned fewest = UINT32_MAX, most = 0;
        for (unsigned id = 0; id < RECORDS; id++) {
            unsigned count = counts[epoch * RECORDS + id];
            total += count;
            fewest = count < fewest ? count : fewest;
            most = count > most ? count : most;
        }
        cr_expect(total >= planned && total <= planned + padding_allowance,
                  "epoch %u: %llu records delivered, %llu planned", epoch,
                  (unsigned long long)total, (unsigned long long)planned);
        cr_expect_geq(fewest, planned / RECORDS, "epoch %u (%llu planned)", epoch,
                      (unsigned long long)planned);
        cr_expect_leq(most, (planned + RECORDS - 1) / RECORDS + 1, "epoch %u (%llu planned)",
                      epoch, (unsigned long long)planned);
    }
    cr_expect(wrapped, "at a larger batch an epoch holds more than one sweep");
    free(counts);
    for (unsigned run = 1; run < runs; run++)
        expect_resumed_pass_replanned(job.directory, names[run - 1], names[run]);

    char *text = rank0_metrics(job.directory, names[runs - 1]);
    char *out = harness_path_in(job.directory, names[runs - 1]);
    char *output = harness_read_output(out);
    const char *steps = strstr(output, "rank 0 steps ");
    cr_assert(steps != NULL, "%s", output);
    unsigned long long trainer_steps = strtoull(steps + strlen("rank 0 steps "), NULL, 10);
    const char *last_step = NULL;
    for (const char *at = text; (at = strstr(at, "\"type\": \"step\"")) != NULL; at++)
        last_step = at;
    cr_assert(last_step != NULL, "step lines in rank 0's metrics of %s", names[runs - 1]);
    char *end = strchr(last_step, '\n');
    if (end)
        *end = '\0';
    cr_expect_eq((unsigned long long)json_number(last_step, "step"), trainer_steps,
                 "the shim's step counter continues across restarts (the trainer ran %llu "
                 "steps): %s", trainer_steps, last_step);
    /* The progress continued across the restarts: the job trained for at
     * least its epochs' worth, N * EPOCHS / B0 initial-batch steps.  (Not
     * at most: a pass's length is fixed when it begins, and here the noise
     * scale grows many-fold within one pass at a large batch, so the last
     * epochs may overshoot, as adaptshim(7) "Statistical epochs" says.) */
    double target = (double)RECORDS * EPOCHS / 8.0;
    double progress = json_number(last_step, "progress");
    cr_expect_gt(progress, 0.9 * target, "progress %g at the end, target %g", progress,
                 target);
    free(output);
    free(out);
    free(text);
}

/* A regression whose gradient noise scale is small (large batches gain
 * almost nothing per record): every decision keeps the initial batch. */
Test(batch_size, a_small_noise_scale_keeps_the_initial_batch, .timeout = 240)
{
    struct adaptive_job job;
    adaptive_job_init(&job, 20000, "100000");
    job.initial_batch = "256";
    job.max_batch = "8192";
    job.lr = "0.0001";  /* far from the optimum, the noise stays small */
    job.epochs = "6";
    job.sleep_us = "2000";
    pid_t pid = start_adaptive_job(&job, 0, "run");
    cr_assert_eq(harness_wait(pid, 200), 0, "no restart: the job runs to its end");
    cr_expect_eq(injected_batch(job.directory, "run"), 128, "256 over 2 replicas");
    char *text = rank0_metrics(job.directory, "run");
    size_t decisions = harness_count_occurrences(text, "\"type\": \"decision\"");
    cr_expect_geq(decisions, 1, "decisions were made");
    cr_expect(strstr(text, "\"restart\": true") == NULL, "none asked for a restart");
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strstr(line, "\"type\": \"decision\"") == NULL)
            continue;
        double speedup = json_number(line, "speedup");
        cr_expect(speedup < 1.05, "a speedup of %g would have asked for a restart: %s",
                  speedup, line);
    }
    free(text);
}
