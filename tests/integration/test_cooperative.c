/* test_cooperative.c - the cooperative API (adaptdl(3)) through real MPI jobs.
 *
 * - AdaptDL's accumulator and data loader restart scenarios, with their
 *   exact values, across 1 -> 4 -> 2 replicas (tests/tools/coop_scenario.c
 *   checks the values itself; here: every run of every rank passes);
 * - AdaptDL's epoch scenario across 1 -> 5 replicas;
 * - a restarted trainer that begins its epoch loop before it loads its
 *   checkpoint is warned, and the late load is an error line;
 * - under mpirun without ADAPTDL_* variables the API answers as MPI's
 *   world; processes told they are replicas but sharing no MPI world
 *   refuse to sum their accumulators;
 * - without the preload the same programs run against the stand-in
 *   libadaptdl.so as one replica, and the example trainer gives the very
 *   output it gives under the preload with one replica;
 * - the example cooperative trainer (tests/trainers/coop_sgd_mpi.c) killed
 *   with SIGKILL at seeded points and resumed with 2, then 1, then 3
 *   replicas trains every record of every epoch exactly once up to the
 *   checkpoints it resumed from, except AdaptDL's padding. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define DIM 4
#define RECORDS 301
#define EPOCHS 3

static char *preload_setting(void)
{
    char *setting = NULL;
    if (asprintf(&setting, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so")) < 0)
        abort();
    return setting;
}

/* mpirun -np RANKS [-x preload and the job's settings] PROGRAM ARGS...;
 * stdout to OUT, stderr to OUT.err. */
static const char *extra_settings[4];   /* more -x for the ranks, NULL-terminated */

static pid_t start_job(const char *directory, unsigned ranks, bool preload, unsigned restarts,
                       char *const program_and_arguments[], const char *out)
{
    char ranks_text[16], restarts_text[64], state[600], save[600];
    snprintf(ranks_text, sizeof ranks_text, "%u", ranks);
    snprintf(restarts_text, sizeof restarts_text, "ADAPTDL_NUM_RESTARTS=%u", restarts);
    snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", directory);
    snprintf(save, sizeof save, "ADAPTDL_SAVE=%s/ck", directory);
    char *preload_variable = preload_setting();
    char *argv[64];
    size_t used = 0;
    const char *head[] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                          "btl_vader_single_copy_mechanism", "none", "-np", ranks_text};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[used++] = (char *)head[i];
    if (preload) {
        const char *settings[] = {preload_variable, state, save, restarts_text,
                                  "ADAPTDL_LOG=warn"};
        for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
            argv[used++] = "-x";
            argv[used++] = (char *)settings[i];
        }
        for (size_t i = 0; extra_settings[i] != NULL; i++) {
            argv[used++] = "-x";
            argv[used++] = (char *)extra_settings[i];
        }
    }
    for (size_t i = 0; program_and_arguments[i] != NULL; i++)
        argv[used++] = program_and_arguments[i];
    argv[used] = NULL;
    pid_t pid = harness_start_mpirun(argv, out);
    free(preload_variable);
    return pid;
}

static void expect_run(const char *directory, const char *scenario, unsigned ranks,
                       unsigned restarts, const char *expected_line, size_t expected_count)
{
    char *program = strdup(harness_build_path("tools/coop_scenario"));
    char *checkpoint = harness_path_in(directory, "ck");
    char name[64];
    snprintf(name, sizeof name, "%s-%u.out", scenario, restarts);
    char *out = harness_path_in(directory, name);
    char *argv[] = {program, (char *)scenario, checkpoint, NULL};
    pid_t pid = start_job(directory, ranks, true, restarts, argv, out);
    int status = harness_wait(pid, 120);
    char *text = harness_read_output(out);
    cr_expect_eq(status, 0, "%s, restart %u on %u replicas: status %d\n%s", scenario, restarts,
                 ranks, status, text);
    cr_expect_null(strstr(text, "FAIL"), "%s", text);
    cr_expect_eq(harness_count_occurrences(text, expected_line), expected_count,
                 "%s, restart %u: %zu of %zu ranks said \"%s\"\n%s", scenario, restarts,
                 harness_count_occurrences(text, expected_line), expected_count, expected_line,
                 text);
    free(text);
    free(out);
    free(checkpoint);
    free(program);
}

Test(cooperative, adaptdl_accumulator_and_loop_restarts_one_four_two, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    expect_run(directory, "accumulator_and_loop", 1, 0, "restart with 4 replicas", 1);
    expect_run(directory, "accumulator_and_loop", 4, 1, "restart with 2 replicas", 4);
    expect_run(directory, "accumulator_and_loop", 2, 2, " ok\n", 2);
    harness_remove_temp_dir(directory);
}

Test(cooperative, adaptdl_epochs_restart_one_five, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    expect_run(directory, "epochs", 1, 0, "restart with 5 replicas", 1);
    expect_run(directory, "epochs", 5, 1, " ok\n", 5);
    harness_remove_temp_dir(directory);
}

/* Under mpirun with the preload and no ADAPTDL_* variable the cooperative API
 * answers as MPI's world: 2 replicas, sums over both, half the records each
 * (it used to answer 1 replica on every rank, and each read everything). */
Test(cooperative, without_variables_the_api_answers_as_the_mpi_world, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *program = strdup(harness_build_path("tools/coop_scenario"));
    char *checkpoint = harness_path_in(directory, "ck");
    char *out = harness_path_in(directory, "world.out");
    char *preload_variable = preload_setting();
    char *argv[] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                    "btl_vader_single_copy_mechanism", "none", "-np", "2", "-x",
                    preload_variable, program, "world", checkpoint, NULL};
    int status = harness_wait(harness_start_mpirun(argv, out), 120);
    char *text = harness_read_output(out);
    cr_expect_eq(status, 0, "status %d\n%s", status, text);
    cr_expect_null(strstr(text, "FAIL"), "%s", text);
    cr_expect_eq(harness_count_occurrences(text, " ok\n"), 2, "%s", text);
    free(text);
    free(preload_variable);
    free(out);
    free(checkpoint);
    free(program);
    harness_remove_temp_dir(directory);
}

/* Two processes told ADAPTDL_NUM_REPLICAS=2 but started without a shared MPI
 * world (each its own MPI singleton): accumulator synchronization is refused
 * with a message naming the mismatch, never summed alone (it used to give 1
 * and 2 where the job's sum is 3). */
Test(cooperative, replicas_without_a_shared_world_refuse_to_sum, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *program = strdup(harness_build_path("tools/coop_scenario"));
    char *checkpoint = harness_path_in(directory, "ck");
    pid_t pids[2];
    char *outs[2];
    for (unsigned replica = 0; replica < 2; replica++) {
        char rank_setting[64], out_name[32];
        snprintf(rank_setting, sizeof rank_setting, "ADAPTDL_REPLICA_RANK=%u", replica);
        snprintf(out_name, sizeof out_name, "no-world-%u.out", replica);
        outs[replica] = harness_path_in(directory, out_name);
        char *environment[] = {"ADAPTDL_NUM_REPLICAS=2", rank_setting,
                               "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                               NULL};
        char *argv[] = {program, "no_world", checkpoint, NULL};
        char *err = NULL;
        if (asprintf(&err, "%s.err", outs[replica]) < 0)
            abort();
        pids[replica] = harness_start(argv, environment, true, outs[replica], err);
        free(err);
    }
    for (unsigned replica = 0; replica < 2; replica++) {
        int status = harness_wait(pids[replica], 120);
        char *text = harness_read_output(outs[replica]);
        char expected[64];
        snprintf(expected, sizeof expected, "replica %u of 2 refused: the job has 2 replicas",
                 replica);
        cr_expect_eq(status, 0, "replica %u: status %d\n%s", replica, status, text);
        cr_expect_null(strstr(text, "FAIL"), "%s", text);
        cr_expect_not_null(strstr(text, expected), "%s", text);
        cr_expect_not_null(strstr(text, "no MPI world joins this process to the others"), "%s",
                           text);
        free(text);
        free(outs[replica]);
    }
    free(checkpoint);
    free(program);
    harness_remove_temp_dir(directory);
}

/* A restarted trainer that never loads its checkpoint before the epoch loop
 * hears it starts fresh; loading it inside the loop is an error line and
 * restores the registered state only (coop_scenario checks the values). */
Test(cooperative, a_checkpoint_loaded_after_the_epoch_loop_began_is_reported, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    expect_run(directory, "late_load", 1, 0, "restart with 1 replicas", 1);
    char *first_err = harness_path_in(directory, "late_load-0.out.err");
    char *first = harness_read_output(first_err);
    cr_expect_null(strstr(first, "the epoch loop begins"), "a first run has nothing to load:\n%s",
                   first);
    expect_run(directory, "late_load", 1, 1, " ok\n", 1);
    char *second_err = harness_path_in(directory, "late_load-1.out.err");
    char *second = harness_read_output(second_err);
    cr_expect_eq(harness_count_occurrences(second, "the epoch loop begins at epoch 0: "), 1,
                 "%s", second);
    cr_expect_not_null(strstr(second, "holds snapshots of this job"), "%s", second);
    cr_expect_not_null(strstr(second, "no checkpoint matching ADAPTDL_SAVE was loaded"), "%s",
                       second);
    cr_expect_eq(harness_count_occurrences(second, "was loaded after the epoch loop began (in "
                                                   "epoch 0): its 1 finished epochs"), 1, "%s",
                 second);
    free(first);
    free(second);
    free(first_err);
    free(second_err);
    harness_remove_temp_dir(directory);
}

/* --- the example trainer ---------------------------------------------------------------- */

static pid_t start_trainer(const char *directory, const char *data, unsigned ranks, bool preload,
                           unsigned restarts, const char *name, const char *sleep_us)
{
    char *program = strdup(harness_build_path("trainers/coop_sgd_mpi"));
    char *checkpoint = harness_path_in(directory, "ck");
    char ids[700], out_name[64];
    snprintf(ids, sizeof ids, "%s/%s.ids.%%r", directory, name);
    snprintf(out_name, sizeof out_name, "%s.out", name);
    char *out = harness_path_in(directory, out_name);
    char epochs[16];
    snprintf(epochs, sizeof epochs, "%d", EPOCHS);
    char *argv[] = {program, "--data", (char *)data, "--epochs", epochs, "--batch-size", "16",
                    "--lr", "0.05", "--checkpoint", checkpoint, "--checkpoint-every", "4",
                    "--sleep-us", (char *)sleep_us, "--ids-log", ids, NULL};
    pid_t pid = start_job(directory, ranks, preload, restarts, argv, out);
    free(out);
    free(checkpoint);
    free(program);
    return pid;
}

static char *final_weights(const char *directory, const char *name)
{
    char out_name[64];
    snprintf(out_name, sizeof out_name, "%s.out", name);
    char *out = harness_path_in(directory, out_name);
    char *text = harness_read_output(out);
    free(out);
    char *line = strstr(text, "final weights");
    char *copy = strndup(line ? line : "(none)", line ? strcspn(line, "\n") : 6);
    free(text);
    return copy;
}

Test(cooperative, programs_run_without_the_preload_as_one_replica, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, RECORDS, DIM, 9);
    pid_t plain = start_trainer(directory, data, 1, false, 0, "plain", "0");
    cr_assert_eq(harness_wait(plain, 120), 0, "the trainer against the stand-in failed");
    char *ck = harness_path_in(directory, "ck");
    unlink(ck);
    pid_t shimmed = start_trainer(directory, data, 1, true, 0, "shimmed", "0");
    cr_assert_eq(harness_wait(shimmed, 120), 0, "the trainer under the preload failed");
    char *expected = final_weights(directory, "plain");
    char *got = final_weights(directory, "shimmed");
    cr_expect_str_eq(got, expected, "one replica under the preload trains as the stand-in");
    cr_expect_neq(strcmp(expected, "(none)"), 0);
    free(expected);
    free(got);
    free(ck);
    free(data);
    harness_remove_temp_dir(directory);
}

static void kill_ranks(const char *data)
{
    char command[1024];
    /* the ranks' command lines start with the trainer; mpirun's only name it */
    snprintf(command, sizeof command, "pkill -KILL -f '^%s --data %s'",
             harness_build_path("trainers/coop_sgd_mpi"), data);
    cr_assert_neq(system(command), -1);
}

Test(cooperative, example_trainer_killed_and_resumed_trains_each_record_once, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, RECORDS, DIM, 11);
    const unsigned plan[] = {2, 1, 3};
    const unsigned runs = sizeof plan / sizeof plan[0];
    uint64_t random_state = 77;
    for (unsigned run = 0; run < runs; run++) {
        char name[32];
        snprintf(name, sizeof name, "run%u", run);
        pid_t pid = start_trainer(directory, data, plan[run], true, run, name, "3000");
        if (run + 1 < runs) {
            char ids[700];
            snprintf(ids, sizeof ids, "%s/%s.ids.0", directory, name);
            size_t checkpoints = 2 + harness_splitmix64(&random_state) % 6;
            cr_assert(harness_wait_for_lines(ids, "ckpt ", checkpoints, pid, 120),
                      "run %u reached no checkpoint %zu", run, checkpoints);
            kill_ranks(data);
            harness_wait(pid, 120);
        } else {
            cr_assert_eq(harness_wait(pid, 180), 0, "the last run failed");
        }
    }
    unsigned *counts = calloc(EPOCHS * RECORDS, sizeof *counts);
    unsigned allowance = 0;
    for (unsigned run = 0; run < runs; run++) {
        uint64_t last_step = UINT64_MAX;
        if (run + 1 < runs) {
            char out_name[64];
            snprintf(out_name, sizeof out_name, "run%u.out", run + 1);
            char *out = harness_path_in(directory, out_name);
            cr_assert(harness_resume_point(out, &last_step), "run %u printed no start", run + 1);
            free(out);
        }
        allowance += plan[run] - 1;
        for (unsigned rank = 0; rank < plan[run]; rank++) {
            char ids[700];
            snprintf(ids, sizeof ids, "%s/run%u.ids.%u", directory, run, rank);
            struct id_log log;
            harness_read_id_log(ids, &log);
            id_log_count_committed(&log, last_step, counts, RECORDS, EPOCHS);
            id_log_free(&log);
        }
    }
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        size_t lost = 0, extra = 0;
        for (unsigned id = 0; id < RECORDS; id++) {
            unsigned seen = counts[epoch * RECORDS + id];
            lost += seen == 0;
            extra += seen > 1 ? seen - 1 : 0;
        }
        cr_expect_eq(lost, 0, "epoch %u: %zu records never trained on", epoch, lost);
        cr_expect_leq(extra, allowance, "epoch %u: %zu records trained on twice, padding "
                      "allows %u", epoch, extra, allowance);
    }
    free(counts);
    free(data);
    harness_remove_temp_dir(directory);
}

/* The last line of a file that contains `needle` (malloc'd), or NULL. */
static char *last_line_containing(const char *path, const char *needle)
{
    char *text = harness_read_file(path, NULL);
    if (text == NULL)
        return NULL;
    char *found = NULL, *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strstr(line, needle) != NULL)
            found = line;
    char *copy = found ? strdup(found) : NULL;
    free(text);
    return copy;
}

/* Gradient statistics from adaptdl_report_gradient, not from an intercepted
 * all-reduce (the trainer's all-reduce is far below ADAPTDL_GRAD_MIN): the
 * metrics' step lines carry the local batch, grad_sqr and grad_var. */
Test(cooperative, reported_gradients_give_the_noise_statistics, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, RECORDS, DIM, 13);
    char metrics[700];
    snprintf(metrics, sizeof metrics, "ADAPTDL_METRICS_FILE=%s/metrics.%%r", directory);
    extra_settings[0] = metrics;
    pid_t pid = start_trainer(directory, data, 2, true, 0, "run", "0");
    extra_settings[0] = NULL;
    cr_assert_eq(harness_wait(pid, 180), 0);
    char *path = harness_path_in(directory, "metrics.0");
    char *line = last_line_containing(path, "\"type\": \"step\"");
    cr_assert_not_null(line, "no step line in %s", path);
    cr_expect_not_null(strstr(line, "\"local_bsz\": 8"), "%s", line);
    cr_expect_not_null(strstr(line, "\"replicas\": 2"), "%s", line);
    cr_expect_null(strstr(line, "\"grad_sqr\": null"), "%s", line);
    cr_expect_null(strstr(line, "\"grad_var\": null"), "%s", line);
    free(line);
    free(path);
    free(data);
    harness_remove_temp_dir(directory);
}

/* An MPI trainer that keeps its data in memory: without ADAPTDL_DATA no
 * read tells the shim its batch size, so the declared one counts for each
 * step (sgd_mpi reads its file itself, not through a view). */
Test(cooperative, a_declared_batch_counts_for_steps_without_reads, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, 200, DIM, 15);
    char metrics[700];
    snprintf(metrics, sizeof metrics, "ADAPTDL_METRICS_FILE=%s/metrics.%%r", directory);
    char *program = strdup(harness_build_path("trainers/sgd_mpi"));
    char *checkpoint = harness_path_in(directory, "ck");
    char *out = harness_path_in(directory, "run.out");
    /* its loss all-reduce ends each step: with the gradient all-reduce
     * alone and no read through the shim, nothing would tell one step
     * from the next (adaptshim(7) "Steps") */
    char *argv[] = {program, "--data", data, "--epochs", "2", "--batch-size", "16", "--lr",
                    "0.05", "--checkpoint", checkpoint, "--loss-allreduce", NULL};
    extra_settings[0] = metrics;
    extra_settings[1] = "ADAPTDL_BATCH_SIZE=32";
    pid_t pid = start_job(directory, 2, true, 0, argv, out);
    extra_settings[0] = extra_settings[1] = NULL;
    cr_assert_eq(harness_wait(pid, 180), 0);
    char *path = harness_path_in(directory, "metrics.1");
    char *line = last_line_containing(path, "\"type\": \"step\"");
    cr_assert_not_null(line, "no step line in %s", path);
    cr_expect_not_null(strstr(line, "\"local_bsz\": 16"), "%s", line);
    cr_expect_null(strstr(line, "\"grad_var\": null"), "%s", line);
    free(line);
    free(path);
    free(out);
    free(checkpoint);
    free(program);
    free(data);
    harness_remove_temp_dir(directory);
}

/* `make install` puts the header, the stand-in and adaptshim.pc in place:
 * a cooperative program builds with `pkg-config --cflags --libs adaptshim`,
 * runs against the stand-in, and runs under the library that
 * `pkg-config --variable=preload adaptshim` names; the manual pages are in
 * share/man; `make uninstall` then leaves no file behind. */
Test(cooperative, installed_pkg_config_builds_a_cooperative_program, .timeout = 300)
{
    const char *source = harness_source_tree();
    const char *directory = harness_temp_dir();
    char *program = harness_path_in(directory, "program.c");
    const char *text =
        "#include <adaptdl.h>\n#include <stdio.h>\n"
        "int main(void) {\n"
        "    adaptdl_accumulator *a = adaptdl_accumulator_create();\n"
        "    adaptdl_accumulator_add(a, \"x\", 2);\n"
        "    adaptdl_accumulator_add(a, \"x\", 1);\n"
        "    adaptdl_accumulator_synchronize(a);\n"
        "    double x = 0;\n"
        "    adaptdl_accumulator_get(a, \"x\", &x);\n"
        "    printf(\"replicas %u x %g\\n\", adaptdl_num_replicas(), x);\n"
        "    return x == 3 ? 0 : 1;\n"
        "}\n";
    cr_assert_eq(harness_write_file(program, text, strlen(text)), 0);
    char *commands = NULL;
    if (asprintf(&commands,
                 "export PKG_CONFIG_PATH='%s/prefix/lib/pkgconfig'\n"
                 "cc -o '%s/program' '%s' $(pkg-config --cflags --libs adaptshim) "
                 "-Wl,-rpath,'%s/prefix/lib'\n"
                 "'%s/program'\n"
                 "LD_PRELOAD=$(pkg-config --variable=preload adaptshim) ADAPTDL_SEED=1 "
                 "'%s/program'\n"
                 "for page in man1/adaptdl-wrap.1 man3/adaptdl.3 man7/adaptshim.7; do\n"
                 "    if test -s '%s/prefix/share/man/'$page; then echo \"installed $page\"; fi\n"
                 "done\n"
                 "make -s -C '%s' BUILD='%s' PREFIX='%s/prefix' uninstall >/dev/null\n"
                 "test -e '%s/prefix/share/man/man7/adaptshim.7' || echo 'manual pages removed'\n"
                 "test -z \"$(find '%s/prefix' -type f)\" && echo uninstalled\n",
                 directory, directory, program, directory, directory, directory, directory,
                 source, harness_build_path("."), directory, directory, directory) < 0)
        abort();
    struct run_result result;
    harness_run_after_install(&result, directory, commands);
    cr_expect_eq(harness_count_occurrences(result.out, "replicas 1 x 3\n"), 2, "%s", result.out);
    cr_expect_eq(harness_count_occurrences(result.out, "installed man1/adaptdl-wrap.1\n"), 1,
                 "make install puts adaptdl-wrap(1) in share/man/man1: %s", result.out);
    cr_expect_eq(harness_count_occurrences(result.out, "installed man3/adaptdl.3\n"), 1,
                 "make install puts adaptdl(3) in share/man/man3: %s", result.out);
    cr_expect_eq(harness_count_occurrences(result.out, "installed man7/adaptshim.7\n"), 1,
                 "make install puts adaptshim(7) in share/man/man7: %s", result.out);
    cr_expect_eq(harness_count_occurrences(result.out, "manual pages removed\n"), 1,
                 "make uninstall removes the manual pages: %s", result.out);
    cr_expect_eq(harness_count_occurrences(result.out, "uninstalled\n"), 1,
                 "make uninstall removes every file make install put there: %s", result.out);
    run_result_free(&result);
    free(commands);
    free(program);
    harness_remove_temp_dir(directory);
}

/* With adaptation on (--max-batch-size) the training loop's iterations end
 * by statistical progress and the batch may grow in place, without a
 * restart: the job runs to its end in one run. */
Test(cooperative, an_adaptive_loop_ends_each_epoch_by_progress, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, 600, DIM, 17);
    char *program = strdup(harness_build_path("trainers/coop_sgd_mpi"));
    char *checkpoint = harness_path_in(directory, "ck");
    char *out = harness_path_in(directory, "run.out");
    char *argv[] = {program, "--data", data, "--epochs", "2", "--batch-size", "16",
                    "--max-batch-size", "128", "--lr", "0.02", "--checkpoint", checkpoint,
                    NULL};
    pid_t pid = start_job(directory, 2, true, 0, argv, out);
    cr_assert_eq(harness_wait(pid, 240), 0);
    char *text = harness_read_output(out);
    cr_expect_eq(harness_count_occurrences(text, "loss"), 2, "%s", text);
    unsigned long long steps = 0, batch = 0;
    const char *last = strstr(text, "rank 0 steps ");
    cr_assert_not_null(last, "%s", text);
    cr_assert_eq(sscanf(last, "rank 0 steps %llu batch %llu", &steps, &batch), 2, "%s", text);
    cr_expect_geq(batch, 16, "the global batch never shrinks below the initial one");
    cr_expect_gt(steps, 0);
    free(text);
    free(out);
    free(checkpoint);
    free(program);
    free(data);
    harness_remove_temp_dir(directory);
}
