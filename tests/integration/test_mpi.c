/* test_mpi.c - the MPI runtime under mpirun (adaptshim(7) "MPI"): sharding by the real
 * MPI rank, a stop signal on one rank stopping every rank at the same step
 * with status 143, a restart with another -np continuing exactly, the
 * gradient-noise estimate against its analytic value, and no deadlock with
 * per-layer, in-place, non-blocking or loss all-reduces. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define DIM 8
#define RECORD_SIZE (8 + 4 * DIM + 4)

struct mpi_job {
    struct dataset_job files;
    uint64_t records;
    char preload_setting[512];
};

static void mpi_job_init(struct mpi_job *job, uint64_t records)
{
    dataset_job_init(&job->files, records, DIM, 5);
    job->records = records;
    snprintf(job->preload_setting, sizeof job->preload_setting, "LD_PRELOAD=%s",
             harness_build_path("libadaptshim.so"));
}

/* Starts mpirun -np N over sgd_mpi with the job's settings and extra
 * trainer arguments; mpirun itself is not preloaded (-x sets the ranks'). */
static pid_t mpi_job_start(const struct mpi_job *job, unsigned ranks, const char *name,
                           const char *epochs, const char *sleep_us, char *const extra[],
                           char *const extra_environment[])
{
    char ranks_text[16];
    snprintf(ranks_text, sizeof ranks_text, "%u", ranks);
    char *argv[96];
    size_t used = 0;
    const char *head[] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
                          "--mca", "btl_vader_single_copy_mechanism", "none", "-np",
                          ranks_text};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[used++] = (char *)head[i];
    const char *settings[] = {job->preload_setting,       job->files.data_setting,
                              job->files.state_setting,   job->files.save_setting,
                              "ADAPTDL_SEED=4",           "ADAPTDL_LOG=info",
                              /* sgd_mpi --resume replays its epochs */
                              "ADAPTDL_RESUME=replay"};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        argv[used++] = "-x";
        argv[used++] = (char *)settings[i];
    }
    for (size_t i = 0; extra_environment && extra_environment[i]; i++) {
        argv[used++] = "-x";
        argv[used++] = extra_environment[i];
    }
    char *ids = NULL, *checkpoint = NULL, *final = NULL;
    if (asprintf(&ids, "%s/%s.ids.%%r", job->files.directory, name) < 0 ||
        asprintf(&checkpoint, "%s/ck", job->files.directory) < 0 ||
        asprintf(&final, "%s/%s.final", job->files.directory, name) < 0)
        abort();
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    const char *tail[] = {trainer, "--data", job->files.data, "--epochs", epochs, "--batch-size",
                          "16", "--lr", "0.05", "--checkpoint", checkpoint,
                          "--checkpoint-every", "5", "--sleep-us", sleep_us, "--resume",
                          "--ids-log", ids, "--final", final};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        argv[used++] = (char *)tail[i];
    for (size_t i = 0; extra && extra[i]; i++)
        argv[used++] = extra[i];
    argv[used] = NULL;
    char *out = harness_path_in(job->files.directory, name);
    pid_t pid = harness_start_mpirun(argv, out);
    free(out);
    return pid;
}

static char *mpi_job_file(const struct mpi_job *job, const char *name, const char *suffix)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s%s", job->files.directory, name, suffix) < 0)
        abort();
    return path;
}

/* The whole of that file (malloc'ed): what the job printed. */
static char *mpi_job_output(const struct mpi_job *job, const char *name, const char *suffix)
{
    char *path = mpi_job_file(job, name, suffix);
    char *text = harness_read_output(path);
    free(path);
    return text;
}

static char *mpi_ids_path(const struct mpi_job *job, const char *name, unsigned rank)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".ids.%u", rank);
    return mpi_job_file(job, name, suffix);
}

/* Last "step S" of a rank's ids log. */
static uint64_t mpi_last_step(const struct mpi_job *job, const char *name, unsigned rank)
{
    char *path = mpi_ids_path(job, name, rank);
    uint64_t last = harness_last_logged_step(path);
    free(path);
    return last;
}

static void wait_for_steps(const struct mpi_job *job, const char *name, uint64_t steps)
{
    for (int attempt = 0; attempt < 3000; attempt++) {
        if (mpi_last_step(job, name, 0) >= steps)
            return;
        usleep(10000);
    }
    cr_assert_fail("rank 0 never reached step %llu", (unsigned long long)steps);
}

static pid_t first_rank_pid(const char *data_path, unsigned skip)
{
    /* the ranks are the processes whose command line names the data file */
    char command[512];
    snprintf(command, sizeof command, "pgrep -f 'trainers/sgd_mpi --data %s' | sort -n", data_path);
    FILE *pipe = popen(command, "r");
    pid_t pid = 0;
    for (unsigned i = 0; i <= skip && pipe && fscanf(pipe, "%d", &pid) == 1; i++)
        ;
    if (pipe)
        pclose(pipe);
    return pid;
}

Test(mpi, sharding_follows_the_real_rank_for_np_1_to_4, .timeout = 180)
{
    for (unsigned ranks = 1; ranks <= 4; ranks++) {
        struct mpi_job job;
        mpi_job_init(&job, 301);
        pid_t pid = mpi_job_start(&job, ranks, "run", "1", "0", NULL, NULL);
        cr_assert_eq(harness_wait(pid, 120), 0, "np %u failed", ranks);
        unsigned *seen = calloc(job.records, sizeof *seen);
        size_t expected = (job.records + ranks - 1) / ranks;
        for (unsigned rank = 0; rank < ranks; rank++) {
            char *path = mpi_ids_path(&job, "run", rank);
            struct id_log log;
            harness_read_id_log(path, &log);
            size_t count = 0;
            for (size_t i = 0; i < log.count; i++)
                if (log.events[i].kind == ID_EVENT_RECORD) {
                    cr_assert_lt(log.events[i].value, job.records);
                    seen[log.events[i].value]++;
                    count++;
                }
            cr_expect_eq(count, expected, "np %u rank %u read %zu records", ranks, rank, count);
            id_log_free(&log);
            free(path);
        }
        size_t twice = 0;
        for (uint64_t id = 0; id < job.records; id++) {
            cr_expect(seen[id] == 1 || seen[id] == 2, "np %u record %llu seen %u times", ranks,
                      (unsigned long long)id, seen[id]);
            twice += seen[id] == 2;
        }
        cr_expect_eq(twice, expected * ranks - job.records, "np %u padding", ranks);
        free(seen);
    }
}

static void expect_same_last_step(const struct mpi_job *job, const char *name, unsigned ranks)
{
    uint64_t first = mpi_last_step(job, name, 0);
    cr_expect_gt(first, 0);
    for (unsigned rank = 1; rank < ranks; rank++)
        cr_expect_eq(mpi_last_step(job, name, rank), first,
                     "rank %u stopped at step %llu, rank 0 at %llu", rank,
                     (unsigned long long)mpi_last_step(job, name, rank),
                     (unsigned long long)first);
}

static bool job_record_written(const struct mpi_job *job)
{
    char *path = NULL;
    if (asprintf(&path, "%s/state/job.msgpack", job->files.directory) < 0)
        abort();
    struct stat status;
    bool exists = stat(path, &status) == 0 && status.st_size > 0;
    free(path);
    return exists;
}

Test(mpi, sigterm_on_one_rank_stops_every_rank_at_the_same_step, .timeout = 180)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    pid_t pid = mpi_job_start(&job, 3, "run", "50", "2000", NULL, NULL);
    wait_for_steps(&job, "run", 20);
    pid_t rank = first_rank_pid(job.files.data, 1);
    cr_assert_gt(rank, 0);
    kill(rank, SIGTERM);
    int status = harness_wait(pid, 120);
    char *text = mpi_job_output(&job, "run", ".err");
    cr_expect_eq(status, 143, "mpirun: %s; the ranks said:\n%s", harness_describe_status(status),
                 text);
    free(text);
    expect_same_last_step(&job, "run", 3);
    cr_expect(job_record_written(&job), "the job record is written at the stop");
}

/* Runs job "run" on 2 ranks (50 epochs, 2 ms a step) until rank 0 has
 * logged `steps` steps, then sends mpirun SIGUSR1 and expects every rank
 * to stop with 143. */
static void run_until_stopped_by_sigusr1(struct mpi_job *job, char *const options[],
                                         char *const environment[], uint64_t steps)
{
    pid_t pid = mpi_job_start(job, 2, "run", "50", "2000", options, environment);
    wait_for_steps(job, "run", steps);
    kill(pid, SIGUSR1);
    cr_expect_eq(harness_wait(pid, 120), 143);
}

Test(mpi, sigusr1_to_mpirun_stops_every_rank_at_the_same_step, .timeout = 180)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    char *variants[] = {"--per-layer", "--loss-allreduce", NULL};
    run_until_stopped_by_sigusr1(&job, variants, NULL, 20);
    expect_same_last_step(&job, "run", 2);
}

static void expect_variant_completes(char *const variant[])
{
    struct mpi_job job;
    mpi_job_init(&job, 400);
    pid_t pid = mpi_job_start(&job, 2, "run", "2", "0", variant, NULL);
    cr_expect_eq(harness_wait(pid, 120), 0, "variant %s", variant[0]);
    char *text = mpi_job_output(&job, "run", "");
    cr_expect(strstr(text, "final weights") != NULL, "%s", text);
    free(text);
}

Test(mpi, per_layer_in_place_all_reduces_complete, .timeout = 120)
{
    char *variant[] = {"--per-layer", NULL};
    expect_variant_completes(variant);
}

Test(mpi, non_blocking_all_reduces_complete, .timeout = 120)
{
    char *variant[] = {"--iallreduce", "--per-layer", NULL};
    expect_variant_completes(variant);
}

Test(mpi, loss_all_reduce_and_division_before_complete, .timeout = 120)
{
    char *variant[] = {"--loss-allreduce", "--divide-before", NULL};
    expect_variant_completes(variant);
}

/* Per-sample gradients of the regression at its optimum are 2 e x with
 * e ~ N(0, 0.01) and x uniform on [-1, 1]^8: tr(Sigma) = 4 * 0.01 * 8 / 3.
 * With -np 2 the estimate comes from the replicas' norms, with -np 1 from
 * AdaptDL's difference estimator over consecutive steps. */
static void expect_noise_estimate(unsigned ranks)
{
    struct mpi_job job;
    mpi_job_init(&job, 8000);
    /* An initial global batch of 8 makes the averages' theta 0.999^(32/8):
     * they cover the last ~250 measured steps, long after convergence
     * (AdaptDL's rule; with the trainer's own batch as the initial one they
     * would average over ~1000 and still remember the first steps). */
    char *settings[] = {"ADAPTDL_LOG=debug", "ADAPTDL_BATCH_SIZE=8", NULL};
    pid_t pid = mpi_job_start(&job, ranks, "run", "8", "0", NULL, settings);
    cr_assert_eq(harness_wait(pid, 120), 0);
    char *text = mpi_job_output(&job, "run", ".err");
    const char *found = strstr(text, "job record written (MPI_Finalize)");
    cr_assert(found != NULL, "%s", text);
    const char *var = strstr(found, "grad_var ");
    cr_assert(var != NULL);
    double grad_var = strtod(var + strlen("grad_var "), NULL);
    double expected = 4.0 * 0.01 * DIM / 3.0;
    /* The difference estimator (one replica) also counts the drift of the
     * true gradient between two consecutive steps (AdaptDL's estimator has
     * the same bias): it is allowed to run high. */
    double high = ranks == 1 ? 1.6 : 1.25;
    cr_expect(grad_var > 0.75 * expected && grad_var < high * expected,
              "np %u: grad_var %g, analytic %g", ranks, grad_var, expected);
    free(text);
}

Test(mpi, gradient_noise_estimate_matches_the_analytic_value, .timeout = 180)
{
    expect_noise_estimate(2);
}

Test(mpi, single_replica_difference_estimator_matches_the_analytic_value, .timeout = 180)
{
    expect_noise_estimate(1);
}

/* Stopped with SIGTERM under -np 2, restarted under -np 3, then -np 1 to the
 * end: counting each run's records up to the step the next run resumed at,
 * every epoch sees every record once plus padding. */
Test(mpi, restart_with_another_np_continues_exactly, .timeout = 240)
{
    struct mpi_job job;
    mpi_job_init(&job, 600);
    const unsigned plan[] = {2, 3, 1};
    const char *names[] = {"first", "second", "third"};
    enum { EPOCHS = 3 };
    for (unsigned run = 0; run < 3; run++) {
        pid_t pid = mpi_job_start(&job, plan[run], names[run], "3", "3000", NULL, NULL);
        if (run < 2) {
            wait_for_steps(&job, names[run], mpi_last_step(&job, names[run], 0) + 8);
            kill(pid, SIGUSR1);
            cr_assert_eq(harness_wait(pid, 120), 143, "run %u", run);
        } else {
            cr_assert_eq(harness_wait(pid, 120), 0, "last run");
        }
    }
    unsigned *counts = calloc(EPOCHS * job.records, sizeof *counts);
    for (unsigned run = 0; run < 3; run++) {
        uint64_t cut = UINT64_MAX;
        if (run < 2) {
            char *text = mpi_job_output(&job, names[run + 1], "");
            const char *resumed = strstr(text, "resumed at step ");
            cut = resumed ? strtoull(resumed + strlen("resumed at step "), NULL, 10) : 0;
            free(text);
        }
        for (unsigned rank = 0; rank < plan[run]; rank++) {
            char *path = mpi_ids_path(&job, names[run], rank);
            struct id_log log;
            harness_read_id_log(path, &log);
            id_log_count_committed(&log, cut, counts, job.records, EPOCHS);
            id_log_free(&log);
            free(path);
        }
    }
    unsigned padding_allowance = (2 - 1) + (3 - 1) + (1 - 1);
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        unsigned total = 0;
        for (uint64_t id = 0; id < job.records; id++) {
            cr_expect_geq(counts[epoch * job.records + id], 1, "epoch %u record %llu missing",
                          epoch, (unsigned long long)id);
            total += counts[epoch * job.records + id];
        }
        cr_expect_leq(total, job.records + padding_allowance, "epoch %u: %u delivered", epoch,
                      total);
    }
    free(counts);
}

/* One replica, no MPI: the stop happens at the next batch read. */
Test(mpi, stop_without_mpi_happens_at_the_next_batch_read, .timeout = 120)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    char *trainer = strdup(harness_build_path("trainers/sgd_read"));
    char *checkpoint = harness_path_in(job.files.directory, "ck");
    char *ids = harness_path_in(job.files.directory, "single.ids");
    char *argv[] = {trainer, "--data", job.files.data, "--epochs", "50", "--batch", "16", "--lr",
                    "0.05", "--checkpoint", checkpoint, "--sleep-us", "2000", "--ids-log",
                    ids, "--resume", NULL};
    char *environment[] = {job.files.data_setting, job.files.state_setting,
                           job.files.save_setting, "ADAPTDL_RESUME=replay", NULL};
    char *out = harness_path_in(job.files.directory, "single.out");
    pid_t pid = harness_start(argv, environment, true, out, NULL);
    for (int attempt = 0; attempt < 1000; attempt++) {
        char *text = harness_read_file(ids, NULL);
        bool ready = text && strstr(text, "step 10\n");
        free(text);
        if (ready)
            break;
        usleep(10000);
    }
    kill(pid, SIGTERM);
    cr_expect_eq(harness_wait(pid, 60), 143);
    cr_expect(job_record_written(&job));
    /* the trainer's buffered stdout was flushed by exit(3) */
    char *text = harness_read_output(out);
    cr_expect(strstr(text, "no checkpoint") != NULL, "stdout: %s", text);
    free(text);
}

Test(mpi, a_process_without_mpi_never_loads_libmpi)
{
    char setting[] = "ADAPTDL_LOG=info";
    char *environment[] = {setting, NULL};
    char *argv[] = {"/bin/grep", "-c", "libmpi", "/proc/self/maps", NULL};
    struct run_result result;
    harness_run(&result, argv, environment, true, 20);
    cr_expect_str_eq(result.out, "0\n");
    run_result_free(&result);
}

/* A trainer with its own SIGTERM handler (petuum/adaptdl issue 105): both
 * handlers run.  The trainer's graceful shutdown happens as it wrote it, and
 * the job still ends with 143, "restart me", because it was preempted. */
Test(mpi, a_trainers_own_sigterm_handler_runs_and_the_status_is_143, .timeout = 180)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    char *variant[] = {"--own-sigterm-handler", NULL};
    pid_t pid = mpi_job_start(&job, 2, "run", "50", "2000", variant, NULL);
    wait_for_steps(&job, "run", 20);
    pid_t rank = first_rank_pid(job.files.data, 1);
    cr_assert_gt(rank, 0);
    kill(rank, SIGTERM);
    cr_expect_eq(harness_wait(pid, 120), 143);
    char *text = mpi_job_output(&job, "run", "");
    cr_expect(strstr(text, "rank 0 caught SIGTERM") != NULL, "%s", text);
    cr_expect(strstr(text, "rank 1 caught SIGTERM") != NULL, "%s", text);
    free(text);
    expect_same_last_step(&job, "run", 2);
}

/* "valid records R loss L ..." lines of rank 0's output, in order. */
static size_t validation_lines(const char *text, uint64_t *records, double *losses, size_t most)
{
    size_t count = 0;
    for (const char *line = strstr(text, "valid records "); line && count < most;
         line = strstr(line + 1, "\nvalid records ")) {
        if (*line == '\n')
            line++;
        char *end;
        records[count] = strtoull(line + strlen("valid records "), &end, 10);
        const char *loss = strstr(end, " loss ");
        losses[count] = loss ? strtod(loss + strlen(" loss "), NULL) : -1;
        count++;
    }
    return count;
}

/* sgd_mpi's validation: every --valid-every records over both ranks, the
 * count kept in its checkpoint across a restart, and --target ending the
 * job on every rank with status 0. */
Test(mpi, a_validation_target_ends_the_job_and_the_record_count_survives_a_restart,
     .timeout = 240)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    char *valid = harness_path_in(job.files.directory, "valid.bin");
    harness_generate_dataset(valid, 500, DIM, 6);  /* the same true weights */
    /* 2 ranks x 16 records a step: a validation every 2 steps */
    char *variant[] = {"--valid", valid, "--valid-every", "64", "--target", "0.015", NULL};
    pid_t pid = mpi_job_start(&job, 2, "first", "50", "30000", variant, NULL);
    char *first = mpi_job_file(&job, "first", "");
    cr_assert(harness_wait_for_lines(first, "valid records", 2, pid, 120), "no validation");
    kill(pid, SIGUSR1);
    cr_assert_eq(harness_wait(pid, 120), 143);
    char *first_text = harness_read_output(first);
    cr_assert(strstr(first_text, "target reached") == NULL, "stopped too late: %s", first_text);

    pid = mpi_job_start(&job, 2, "second", "50", "0", variant, NULL);
    cr_assert_eq(harness_wait(pid, 120), 0);
    char *second = mpi_job_file(&job, "second", "");
    char *text = harness_read_output(second);
    uint64_t resumed = harness_resumed_step(text);
    cr_assert_gt(resumed, 0, "%s", text);
    cr_assert_lt(resumed, 62, "still in the first epoch: whole steps of 32 records");
    uint64_t records[256];
    double losses[256];
    size_t count = validation_lines(text, records, losses, 256);
    cr_assert_gt(count, 1, "%s", text);
    /* the count goes on from the checkpoint's, not from 0 */
    cr_expect_eq(records[0], (resumed * 32 / 64 + 1) * 64, "resumed at step %llu: %s",
                 (unsigned long long)resumed, text);
    for (size_t i = 1; i < count; i++)
        cr_expect_gt(records[i], records[i - 1], "%s", text);
    cr_expect(losses[count - 1] <= 0.015 && losses[count - 2] > 0.015,
              "the job ends at the first validation at or below the target: %s", text);
    const char *reached = strstr(text, "target reached records ");
    cr_assert(reached != NULL, "%s", text);
    cr_expect_eq(strtoull(reached + strlen("target reached records "), NULL, 10),
                 records[count - 1]);
    cr_expect(strstr(text, "final weights") != NULL, "%s", text);
    expect_same_last_step(&job, "second", 2);
    free(text);
    free(second);
    free(first_text);
    free(first);
    free(valid);
}

/* The same without MPI: sgd_read has no handler, so this uses a shell
 * trap-like helper: a process that installs its own SIGTERM handler with
 * signal() and exits 0 from it, under the shim, ends with 143. */
Test(mpi, a_single_process_with_its_own_handler_exits_143)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "train.bin");
    harness_generate_dataset(data, 100, DIM, 1);
    char setting[512];
    snprintf(setting, sizeof setting, "ADAPTDL_DATA=%s:record=%d:header=16", data,
             RECORD_SIZE);
    char *environment[] = {setting, NULL};
    /* bash installs its own SIGTERM handling for `trap`: the trap runs, and
     * the shell exits 0 from it */
    char *argv[] = {"/bin/bash", "-c", "trap 'echo trapped; exit 0' TERM; kill -TERM $$; "
                    "sleep 0.2; echo not-reached", NULL};
    struct run_result result;
    harness_run(&result, argv, environment, true, 20);
    cr_expect_eq(result.status, 143, "status %d, stderr %s", result.status, result.err);
    cr_expect(strstr(result.out, "trapped") != NULL, "stdout: %s", result.out);
    run_result_free(&result);
}

/* The metrics file (adaptshim(7) "Metrics file"): JSON lines with a "type", step lines with the
 * required fields, the latest step line written before the stop, an exit
 * event with the status. */
static void expect_metrics_file(const char *path, int exit_status, uint64_t last_step)
{
    char *text = harness_read_file(path, NULL);
    cr_assert(text != NULL, "no metrics file %s", path);
    static const char *const step_fields[] = {
        "\"step\": ", "\"epoch\": ", "\"replicas\": ", "\"local_bsz\": ", "\"global_bsz\": ",
        "\"step_time\": ", "\"grad_sqr\": ", "\"grad_var\": ", "\"noise_scale\": ",
        "\"progress\": "};
    size_t steps = 0;
    uint64_t previous = 0, final_step = 0;
    bool exit_seen = false, pass_seen = false;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cr_assert(line[0] == '{' && line[strlen(line) - 1] == '}', "not a JSON object: %s",
                  line);
        cr_assert(strstr(line, "\"type\": \"") != NULL, "no type: %s", line);
        if (strstr(line, "\"type\": \"step\"")) {
            for (size_t i = 0; i < sizeof step_fields / sizeof step_fields[0]; i++)
                cr_expect(strstr(line, step_fields[i]) != NULL, "missing %s in %s",
                          step_fields[i], line);
            uint64_t step = strtoull(strstr(line, "\"step\": ") + 8, NULL, 10);
            cr_expect_gt(step, previous, "step numbers increase: %s", line);
            previous = final_step = step;
            steps++;
        }
        if (strstr(line, "\"type\": \"pass_begin\""))
            pass_seen = true;
        if (strstr(line, "\"type\": \"exit\"")) {
            char expected[32];
            snprintf(expected, sizeof expected, "\"status\": %d", exit_status);
            cr_expect(strstr(line, expected) != NULL, "%s", line);
            exit_seen = true;
        }
    }
    cr_expect_gt(steps, 0);
    cr_expect(pass_seen);
    cr_expect(exit_seen);
    if (last_step > 0)
        cr_expect_geq(final_step + 1, last_step, "latest step line %llu, trainer at %llu",
                      (unsigned long long)final_step, (unsigned long long)last_step);
    free(text);
}

Test(mpi, metrics_file_has_step_lines_and_the_stop, .timeout = 180)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    char metrics[512];
    snprintf(metrics, sizeof metrics, "ADAPTDL_METRICS_FILE=%s/metrics.%%r", job.files.directory);
    char *environment[] = {metrics, NULL};
    run_until_stopped_by_sigusr1(&job, NULL, environment, 30);
    for (unsigned rank = 0; rank < 2; rank++) {
        char name[32];
        snprintf(name, sizeof name, "metrics.%u", rank);
        char *path = harness_path_in(job.files.directory, name);
        expect_metrics_file(path, 143, mpi_last_step(&job, "run", rank));
        free(path);
    }
}

/* ADAPTDL_DRAIN: after the stop is agreed the ranks run on until the step
 * after the trainer's next checkpoint commit (rank 0 commits every 25
 * steps here), so the last step lies just after a commit. */
Test(mpi, drain_runs_on_to_the_next_checkpoint_commit, .timeout = 180)
{
    struct mpi_job job;
    mpi_job_init(&job, 4000);
    char *drain[] = {"ADAPTDL_DRAIN=60", NULL};
    char *every[] = {"--checkpoint-every", "25", NULL};
    run_until_stopped_by_sigusr1(&job, every, drain, 30);
    char *path = mpi_ids_path(&job, "run", 0);
    struct id_log log;
    harness_read_id_log(path, &log);
    uint64_t last_checkpoint = id_log_last_value(&log, ID_EVENT_CHECKPOINT);
    uint64_t last_step = id_log_last_value(&log, ID_EVENT_STEP);
    cr_expect_gt(last_checkpoint, 0);
    cr_expect(last_step >= last_checkpoint && last_step - last_checkpoint <= 2,
              "stopped at step %llu, last commit at step %llu",
              (unsigned long long)last_step, (unsigned long long)last_checkpoint);
    id_log_free(&log);
    free(path);
    expect_same_last_step(&job, "run", 2);
}

/* A trainer whose all-reduces are all below a user's ADAPTDL_GRAD_MIN has
 * no gradient the shim can see, hence no agreement point: the stop cannot
 * be synchronized, a warning says so, and every rank stops at its next
 * batch read with 143. */
Test(mpi, without_a_detected_gradient_each_rank_stops_at_its_next_read, .timeout = 180)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    char *small[] = {"--pad", "0", NULL};
    char *environment[] = {"ADAPTDL_GRAD_MIN=100000", NULL};
    run_until_stopped_by_sigusr1(&job, small, environment, 20);
    char *text = mpi_job_output(&job, "run", ".err");
    cr_expect(strstr(text, "cannot be synchronized") != NULL, "%s", text);
    free(text);
}

/* The same small gradient (under the 1024 elements of the per-call rule)
 * without any setting: its all-reduces repeat as a cycle, so the shim finds
 * the steps and the gradient, and a stop on one rank is agreed by both. */
Test(mpi, a_small_gradient_is_found_without_settings_and_the_stop_is_agreed, .timeout = 180)
{
    struct mpi_job job;
    mpi_job_init(&job, 2000);
    char *small[] = {"--pad", "0", NULL};
    run_until_stopped_by_sigusr1(&job, small, NULL, 20);
    char *text = mpi_job_output(&job, "run", ".err");
    cr_expect(strstr(text, "cannot be synchronized") == NULL, "%s", text);
    cr_expect(strstr(text, "every replica agreed to stop") != NULL, "%s", text);
    cr_expect(strstr(text, "no gradient all-reduce") == NULL, "%s", text);
    free(text);
}

/* --- gradient requests, however the trainer finishes them ------------------------- */

/* mpirun -np 2 of tests/tools/mpi_requests HOW STEPS [OPTION...] under the
 * shim at ADAPTDL_LOG=info (each rank's summary line counts its steps). */
static void run_requests(struct run_result *result, char *const tool_arguments[])
{
    char preload[512];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so"));
    char *tool = strdup(harness_build_path("tools/mpi_requests"));
    char *argv[32] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "--mca",
                      "btl_vader_single_copy_mechanism", "none", "-np", "2", "-x", preload,
                      "-x", "ADAPTDL_LOG=info", tool};
    harness_append_list(argv, 13, sizeof argv / sizeof argv[0], tool_arguments);
    harness_run(result, argv, harness_mpirun_as_root, false, 120);
    free(tool);
}

/* Both ranks counted every step: a step is the run of gradient pieces the
 * barrier ends, so a piece nobody counted leaves no step at all. */
static void expect_every_step_counted(char *const tool_arguments[], const char *what)
{
    struct run_result result;
    run_requests(&result, tool_arguments);
    cr_expect_eq(result.status, 0, "%s: status %d\n%s", what, result.status, result.err);
    cr_expect(strstr(result.out, "done 6\n") != NULL, "%s: %s", what, result.out);
    cr_expect_eq(harness_count_occurrences(result.err, "restarts, 6 steps,"), 2,
                 "%s: both ranks count the 6 steps:\n%s", what, result.err);
    run_result_free(&result);
}

/* Regression: only MPI_Wait, MPI_Waitall (its first 64 requests) and
 * MPI_Test counted a non-blocking gradient; completed any other way, the
 * gradients were never seen (0 steps) and their entries filled the table. */
Test(mpi, gradient_requests_finished_by_any_call_are_counted, .timeout = 240)
{
    static const char *const ways[] = {"wait", "waitall", "waitany", "waitsome", "test",
                                       "testall", "testany", "testsome", "request_free"};
    for (size_t i = 0; i < sizeof ways / sizeof ways[0]; i++) {
        char *arguments[] = {(char *)ways[i], "6", NULL};
        expect_every_step_counted(arguments, ways[i]);
    }
}

/* Fortran's bindings call the PMPI_ functions directly, with Fortran's
 * datatypes (MPI_REAL); regression: neither was seen (0 steps). */
Test(mpi, pmpi_names_and_fortran_real_gradients_are_counted, .timeout = 180)
{
    char *pmpi_waitany[] = {"waitany", "6", "--pmpi", NULL};
    expect_every_step_counted(pmpi_waitany, "waitany --pmpi");
    char *pmpi_testsome[] = {"testsome", "6", "--pmpi", NULL};
    expect_every_step_counted(pmpi_testsome, "testsome --pmpi");
    char *pmpi_free[] = {"request_free", "6", "--pmpi", NULL};
    expect_every_step_counted(pmpi_free, "request_free --pmpi");
    char *real[] = {"waitall", "6", "--real", NULL};
    expect_every_step_counted(real, "waitall --real");
    char *both[] = {"wait", "6", "--pmpi", "--real", NULL};
    expect_every_step_counted(both, "wait --pmpi --real");
}

/* 300 gradient all-reduces in flight per step, more than the shim keeps:
 * one warning per rank, and every step still counted.  Regression: the
 * table filled silently. */
Test(mpi, more_outstanding_gradients_than_the_table_holds_warn_once, .timeout = 180)
{
    char *arguments[] = {"many", "6", NULL};
    struct run_result result;
    run_requests(&result, arguments);
    cr_expect_eq(result.status, 0, "status %d\n%s", result.status, result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "gradient MPI_Iallreduce requests are "
                                                       "outstanding"), 2,
                 "one warning per rank:\n%s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "restarts, 6 steps,"), 2, "%s",
                 result.err);
    run_result_free(&result);
}

/* adaptshim(7) "Reading twice before training": count_rewind_mpi reads its
 * text file as train_dp.c does (count the lines with fgets, rewind, read
 * them again into a buffer of that size) under mpirun -np 2 with only
 * ADAPTDL_DATA set (shard and shuffle by default).  Both readings of a rank
 * must be the same view (else it reads more lines than it counted, or
 * fewer, and says so with status 3), and the two ranks' views are the two
 * halves of the file; then it trains with train_dp's six all-reduces a
 * step (a loss of 1 float, then 432, 16384, 64, 1728 and 27), which the
 * shim counts, without any setting, as one step per iteration (the per-call
 * rule of ADAPTDL_GRAD_MIN made two: its small bias gradients end a run). */
Test(mpi, a_loader_that_counts_rewinds_and_reads_again_gets_its_half_both_times,
     .timeout = 120)
{
    enum { LINES = 301 };
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "names.txt");
    harness_generate_text(data, LINES, 11);
    char preload[600], data_setting[600];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so"));
    snprintf(data_setting, sizeof data_setting, "ADAPTDL_DATA=%s:lines", data);
    char *trainer = strdup(harness_build_path("trainers/count_rewind_mpi"));
    char *argv[] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
                    "--mca", "btl_vader_single_copy_mechanism", "none", "-np", "2",
                    "-x", preload, "-x", data_setting, "-x", "ADAPTDL_LOG=info", trainer,
                    "--data", data, "--steps", "20", NULL};
    char *out = harness_path_in(directory, "out");
    pid_t pid = harness_start_mpirun(argv, out);
    int status = harness_wait(pid, 100);
    char *err_path = NULL;
    if (asprintf(&err_path, "%s.err", out) < 0)
        abort();
    char *text = harness_read_output(out);
    cr_assert_eq(status, 0, "status %d: %s\n%s", status, harness_read_output(err_path), text);
    unsigned seen[2][LINES] = {{0}};
    size_t per_rank[2] = {0};
    for (const char *line = text; line != NULL && *line; line = strchr(line, '\n')) {
        while (*line == '\n')
            line++;
        int rank;
        unsigned long long id;
        if (sscanf(line, "rank %d line %llu", &rank, &id) == 2 && rank >= 0 && rank < 2 &&
            id < LINES) {
            seen[rank][id]++;
            per_rank[rank]++;
        }
    }
    size_t missing = 0, both = 0, twice = 0;
    for (unsigned id = 0; id < LINES; id++) {
        missing += seen[0][id] + seen[1][id] == 0;
        both += seen[0][id] > 0 && seen[1][id] > 0;
        twice += seen[0][id] > 1 || seen[1][id] > 1;
    }
    cr_expect_eq(per_rank[0], (LINES + 1) / 2, "rank 0 read %zu lines", per_rank[0]);
    cr_expect_eq(per_rank[1], (LINES + 1) / 2, "rank 1 read %zu lines", per_rank[1]);
    cr_expect_eq(missing, 0, "%zu lines read by neither rank", missing);
    cr_expect_leq(both, 1, "%zu lines read by both ranks (padding allows 1)", both);
    cr_expect_eq(twice, 0);
    cr_expect_eq(harness_count_occurrences(text, " done\n"), 2, "%s", text);
    /* 20 iterations: two before the cycle is seen twice (two steps each by
     * the per-call rule), then one each */
    char *log = harness_read_output(err_path);
    for (const char *summary = strstr(log, "restarts, "); summary != NULL;
         summary = strstr(summary + 1, "restarts, ")) {
        unsigned long steps = strtoul(summary + strlen("restarts, "), NULL, 10);
        cr_expect(steps >= 20 && steps <= 23, "%lu steps for 20 iterations:\n%s", steps, log);
    }
    cr_expect_eq(harness_count_occurrences(log, "restarts, "), 2, "a summary per rank:\n%s", log);
    free(log);
    free(text);
    free(err_path);
    free(out);
    free(trainer);
    free(data);
    harness_remove_temp_dir(directory);
}
