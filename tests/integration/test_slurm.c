/* test_slurm.c - jobs under a real Slurm (adaptdl-wrap(1) "Slurm", adaptshim(7) "ENVIRONMENT"):
 * each test starts a private slurmctld, slurmd and munged (slurm_cluster.c) and
 * submits what a user would.
 *
 * - srun --mpi=pmix ranks under the preload take their layout from Slurm's
 *   variables: each reads its own shard; adaptdl-wrap under salloc runs the
 *   allocation's tasks as replicas;
 * - an sbatch --requeue job running adaptdl-wrap with an MPI trainer stops
 *   at one agreed step with 143 on `scancel --signal=TERM --full`, on
 *   `scontrol requeue` of the running job (Slurm's SIGTERM to every process
 *   of the job, mpirun's included) and on the time limit's signal
 *   (--signal=B:TERM@N); requeued, it resumes exactly: every record of
 *   every epoch once over all runs;
 * - the replica count is the allocation's tasks, and an -n beyond them is
 *   capped with one line. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "slurm_cluster.h"

#define DIM 4
#define RECORDS 2000  /* a multiple of the replicas: no padding, each record once */
#define REPLICAS 2

static struct slurm_cluster cluster;
static bool cluster_up;
static char cluster_problem[1024];

static void start_cluster(void)
{
    cluster_up = slurm_cluster_start(&cluster, cluster_problem, sizeof cluster_problem);
}

static void stop_cluster(void)
{
    slurm_cluster_stop(&cluster);
}

TestSuite(slurm, .init = start_cluster, .fini = stop_cluster);

/* Skips (one line) when this machine cannot run the daemons. */
static void require_cluster(void)
{
    if (!cluster_up) {
        fprintf(stderr, "slurm tests skipped: %s\n", cluster_problem);
        cr_skip_test("no private Slurm: %s", cluster_problem);
    }
}

/* A requeueable job of trainers/sgd_mpi under adaptdl-wrap.  Its batch
 * script numbers each run's files by Slurm's restart count: DIR/out.R,
 * DIR/err.R and the ranks' id logs DIR/ids.R.RANK; DIR/sleep_us holds the
 * trainer's --sleep-us, read at each run's start. */
struct wrapped_batch_job {
    struct dataset_job files;
    char *script;
    char *sleep_file;
    unsigned long id;
};

static void write_sleep(const struct wrapped_batch_job *job, const char *sleep_us)
{
    cr_assert_eq(harness_write_file(job->sleep_file, sleep_us, strlen(sleep_us)), 0);
}

/* The batch script a user would write (the README's, explained in
 * adaptdl-wrap(1) "Slurm"), with `wrapper_options`
 * before the `--` (e.g. "-n 4") and the trainer running `epochs` epochs. */
static void wrapped_batch_job_init(struct wrapped_batch_job *job, const char *wrapper_options,
                                   unsigned epochs, const char *sleep_us)
{
    dataset_job_init(&job->files, RECORDS, DIM, 3);
    const char *d = job->files.directory;
    job->sleep_file = harness_path_in(d, "sleep_us");
    write_sleep(job, sleep_us);
    char *wrapper = strdup(harness_build_path("adaptdl-wrap"));
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    char *body = NULL;
    if (asprintf(&body,
                 "#!/bin/sh\n"
                 "run=${SLURM_RESTART_COUNT:-0}\n"
                 "exec '%s' %s -- '%s' --data '%s' --epochs %u --batch-size 16 --lr 0.01 "
                 "--checkpoint '%s/ck' --resume --sleep-us \"$(cat '%s')\" "
                 "--ids-log \"%s/ids.$run.%%r\" > \"%s/out.$run\" 2> \"%s/err.$run\"\n",
                 wrapper, wrapper_options, trainer, job->files.data, epochs, d,
                 job->sleep_file, d, d, d) < 0)
        abort();
    job->script = harness_write_script(d, "job.sh", body);
    free(body);
    free(trainer);
    free(wrapper);
}

/* sbatch --requeue -n REPLICAS with `options` added (NULL-terminated). */
static void submit(struct wrapped_batch_job *job, char *const options[])
{
    char *output = NULL;
    if (asprintf(&output, "--output=%s/slurm.out", job->files.directory) < 0)
        abort();
    char *all[16] = {"--requeue", "--ntasks=2", "--open-mode=append", output};
    size_t used = 4;
    for (size_t i = 0; options != NULL && options[i] != NULL && used < 15; i++)
        all[used++] = options[i];
    all[used] = NULL;
    /* sbatch hands its environment to the job, as for a user's */
    char *environment[] = {harness_mpirun_as_root[0], harness_mpirun_as_root[1],
                           job->files.data_setting, job->files.state_setting,
                           job->files.save_setting, "ADAPTDL_RESUME=replay",
                           "ADAPTDL_LOG=info", NULL};
    job->id = slurm_submit(&cluster, all, job->script, environment);
    free(output);
}

static char *run_file(const struct wrapped_batch_job *job, const char *kind, unsigned run)
{
    char name[64];
    snprintf(name, sizeof name, "%s.%u", kind, run);
    return harness_path_in(job->files.directory, name);
}

static char *rank_log(const struct wrapped_batch_job *job, unsigned run, unsigned rank)
{
    char name[64];
    snprintf(name, sizeof name, "ids.%u.%u", run, rank);
    return harness_path_in(job->files.directory, name);
}

/* Polls until rank 0 of `run` has logged step `step` (the job is running
 * and past its start-up). */
static void wait_for_step(const struct wrapped_batch_job *job, unsigned run, uint64_t step)
{
    char *log = rank_log(job, run, 0);
    double deadline = harness_monotonic_seconds() + 120;
    while (harness_last_logged_step(log) < step) {
        if (harness_monotonic_seconds() > deadline) {
            char *err = run_file(job, "err", run);
            char *text = harness_read_output(err);
            cr_assert_fail("run %u never reached step %llu: %s", run, (unsigned long long)step,
                           text);
        }
        usleep(10000);
    }
    free(log);
}

/* The stop of `run`: both ranks agreed on one step and ended there with
 * 143 (mpirun reports the rank's status), none was killed. */
static void expect_one_agreed_stop(const struct wrapped_batch_job *job, unsigned run)
{
    char *err = run_file(job, "err", run);
    char *log = harness_read_output(err);
    cr_expect_eq(harness_count_occurrences(log, "every replica agreed to stop at this step; "
                                                "exit status 143"),
                 REPLICAS, "run %u: both ranks stopped at the agreed step: %s", run, log);
    cr_expect(strstr(log, "Exit code:    143") != NULL, "run %u: mpirun saw 143: %s", run, log);
    cr_expect(strstr(log, "exited on signal") == NULL && strstr(log, "SIGKILL") == NULL,
              "run %u: no rank was killed: %s", run, log);
    cr_expect(strstr(log, "lost communication") == NULL, "run %u: %s", run, log);
    uint64_t last_steps[REPLICAS];
    for (unsigned rank = 0; rank < REPLICAS; rank++) {
        char *path = rank_log(job, run, rank);
        last_steps[rank] = harness_last_logged_step(path);
        free(path);
    }
    cr_expect_eq(last_steps[0], last_steps[1], "run %u: the ranks ended at steps %llu and %llu",
                 run, (unsigned long long)last_steps[0], (unsigned long long)last_steps[1]);
    free(log);
    free(err);
}

/* Over `runs` runs, counted up to where the next one resumed, every record
 * of every epoch was consumed exactly once; the last run ran to the end
 * and the later ones resumed from a checkpoint. */
static void expect_every_record_once(const struct wrapped_batch_job *job, unsigned runs,
                                     unsigned epochs)
{
    struct harness_killed_run killed_runs[4];
    cr_assert_leq(runs, 4);
    for (unsigned run = 0; run < runs; run++) {
        killed_runs[run].replicas = REPLICAS;
        for (unsigned rank = 0; rank < REPLICAS; rank++) {
            killed_runs[run].logs[rank] = rank_log(job, run, rank);
            killed_runs[run].outputs[rank] = run_file(job, "out", run);
        }
        if (run > 0) {
            char *output = harness_read_output(killed_runs[run].outputs[0]);
            cr_expect_gt(harness_resumed_step(output), 0, "run %u resumed from a checkpoint: %s",
                         run, output);
            free(output);
        }
    }
    unsigned *counts = harness_count_committed_records(killed_runs, runs, RECORDS, epochs);
    unsigned wrong = 0;
    for (unsigned epoch = 0; epoch < epochs; epoch++)
        for (unsigned id = 0; id < RECORDS; id++)
            if (counts[epoch * RECORDS + id] != 1 && wrong++ < 5)
                cr_expect_eq(counts[epoch * RECORDS + id], 1, "epoch %u record %u seen %u times",
                             epoch, id, counts[epoch * RECORDS + id]);
    cr_expect_eq(wrong, 0, "%u records of %u epochs not seen exactly once", wrong, epochs);
    free(counts);
    for (unsigned run = 0; run < runs; run++)
        for (unsigned rank = 0; rank < REPLICAS; rank++) {
            free(killed_runs[run].logs[rank]);
            free(killed_runs[run].outputs[rank]);
        }
}

static void expect_completed(const struct wrapped_batch_job *job, unsigned run)
{
    char *state = slurm_wait_for_state(&cluster, job->id, "COMPLETED FAILED CANCELLED TIMEOUT",
                                       200);
    char *err = run_file(job, "err", run);
    char *log = harness_read_output(err);
    cr_assert_str_eq(state, "COMPLETED", "run %u: %s", run, log);
    free(log);
    free(err);
    free(state);
}

static char *job_setting(const struct wrapped_batch_job *job)
{
    char *setting = NULL;
    if (asprintf(&setting, "JobId=%lu", job->id) < 0)
        abort();
    return setting;
}

/* The ids logs DIR/ids.R of the REPLICAS ranks of a 2-epoch job: every
 * record of each epoch committed exactly once over the ranks, and with
 * `halves`, each rank read its share (2 * RECORDS / REPLICAS records). */
static void expect_every_record_once_on_two_ranks(const char *directory, bool halves)
{
    unsigned counts[2 * RECORDS] = {0};
    for (unsigned rank = 0; rank < REPLICAS; rank++) {
        char name[16];
        snprintf(name, sizeof name, "ids.%u", rank);
        char *path = harness_path_in(directory, name);
        struct id_log log;
        harness_read_id_log(path, &log);
        size_t records = 0;
        for (size_t i = 0; i < log.count; i++)
            records += log.events[i].kind == ID_EVENT_RECORD;
        if (halves)
            cr_expect_eq(records, 2 * RECORDS / REPLICAS, "rank %u read %zu records", rank,
                         records);
        id_log_count_committed(&log, UINT64_MAX, counts, RECORDS, 2);
        id_log_free(&log);
        free(path);
    }
    for (unsigned i = 0; i < 2 * RECORDS; i++)
        if (counts[i] != 1) {
            cr_expect_eq(counts[i], 1, "epoch %u record %u seen %u times", i / RECORDS,
                         i % RECORDS, counts[i]);
            break;
        }
}

/* Ranks that srun starts (--mpi=pmix, no mpirun) learn their rank and the
 * replica count from SLURM_PROCID/PMIX_RANK and SLURM_NTASKS: each reads
 * its own half of every epoch.  (A rank that took itself for rank 0 of 1
 * would read every record.) */
Test(slurm, srun_pmix_ranks_read_their_own_shards, .timeout = 180)
{
    require_cluster();
    struct dataset_job files;
    dataset_job_init(&files, RECORDS, DIM, 3);
    char *ids = harness_path_in(files.directory, "ids.%r");
    char *checkpoint = harness_path_in(files.directory, "ck");
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    char *library = NULL;
    if (asprintf(&library, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so")) < 0)
        abort();
    char *argv[] = {"srun", "--mpi=pmix", "--ntasks=2", trainer, "--data", files.data,
                    "--epochs", "2", "--batch-size", "16", "--lr", "0.01", "--checkpoint",
                    checkpoint, "--ids-log", ids, NULL};
    /* srun is preloaded too: ADAPTDL_TARGET keeps the shim to the trainer */
    char *environment[] = {library, "ADAPTDL_TARGET=sgd_mpi", files.data_setting,
                           files.state_setting, files.save_setting, "ADAPTDL_LOG=info",
                           harness_mpirun_as_root[0], harness_mpirun_as_root[1], NULL};
    struct run_result result;
    slurm_run(&cluster, &result, argv, environment, 150);
    cr_assert_eq(result.status, 0, "srun: %s\n%s", harness_describe_status(result.status),
                 result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "info: summary (MPI_Finalize): 2000 "
                                                       "records served, 2 passes"),
                 REPLICAS, "each rank served its 1000 records of each of 2 epochs: %s",
                 result.err);
    cr_expect(strstr(result.err, "the data views were built for") == NULL,
              "the views were built for the layout MPI has: %s", result.err);
    expect_every_record_once_on_two_ranks(files.directory, true);
    run_result_free(&result);
    free(library);
    free(trainer);
    harness_remove_temp_dir(files.directory);
}

/* adaptdl-wrap run by salloc: mpirun reads the allocation, and the wrapper
 * launches its 2 tasks as 2 replicas, each reading its own half. */
Test(slurm, salloc_runs_the_wrapper_with_the_allocations_tasks, .timeout = 180)
{
    require_cluster();
    struct dataset_job files;
    dataset_job_init(&files, RECORDS, DIM, 3);
    char *ids = harness_path_in(files.directory, "ids.%r");
    char *checkpoint = harness_path_in(files.directory, "ck");
    char *wrapper = strdup(harness_build_path("adaptdl-wrap"));
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    char *argv[] = {"salloc", "--ntasks=2", wrapper, "--", trainer, "--data", files.data,
                    "--epochs", "2", "--batch-size", "16", "--lr", "0.01", "--checkpoint",
                    checkpoint, "--ids-log", ids, NULL};
    char *environment[] = {files.data_setting, files.state_setting, files.save_setting,
                           harness_mpirun_as_root[0], harness_mpirun_as_root[1], NULL};
    struct run_result result;
    slurm_run(&cluster, &result, argv, environment, 150);
    cr_assert_eq(result.status, 0, "salloc: %s\n%s", harness_describe_status(result.status),
                 result.err);
    cr_expect(strstr(result.err, "beyond") == NULL, "nothing capped: %s", result.err);
    expect_every_record_once_on_two_ranks(files.directory, false);
    run_result_free(&result);
    free(trainer);
    free(wrapper);
    harness_remove_temp_dir(files.directory);
}

/* scancel --signal=TERM --full reaches the batch script (the wrapper, which
 * the script became with exec): every rank stops at one step, the job ends
 * with 143; requeued, it resumes exactly and ends.  The wrapper's -n 4 is
 * capped to the allocation's 2 tasks with one line. */
Test(slurm, scancel_term_stops_at_one_step_and_requeue_resumes_exactly, .timeout = 300)
{
    require_cluster();
    enum { EPOCHS = 6 };
    struct wrapped_batch_job job;
    wrapped_batch_job_init(&job, "-n 4", EPOCHS, "2000");
    submit(&job, NULL);
    wait_for_step(&job, 0, 30);
    char job_text[32];
    snprintf(job_text, sizeof job_text, "%lu", job.id);
    struct run_result result;
    slurm_run(&cluster, &result, (char *[]){"scancel", "--signal=TERM", "--full", job_text, NULL},
              NULL, 30);
    cr_assert_eq(result.status, 0, "scancel: %s", result.err);
    run_result_free(&result);
    char *state = slurm_wait_for_state(&cluster, job.id, "COMPLETED FAILED CANCELLED", 120);
    char *exit_code = slurm_job_field(&cluster, job.id, "ExitCode");
    cr_expect_str_eq(exit_code, "143:0", "the job's exit status (state %s)", state);
    free(exit_code);
    free(state);
    expect_one_agreed_stop(&job, 0);
    char *err = run_file(&job, "err", 0);
    char *log = harness_read_output(err);
    char cap_line[160];
    snprintf(cap_line, sizeof cap_line,
             "adaptdl-wrap: -n 4 is beyond the 2 tasks of Slurm job %lu: 2 replicas\n", job.id);
    cr_expect_eq(harness_count_occurrences(log, cap_line), 1, "one line says -n 4 is capped: %s",
                 log);
    cr_expect_eq(harness_count_occurrences(log, "adaptdl-wrap: "), 2,
                 "the cap and the stop, nothing else from the wrapper: %s", log);
    free(log);
    free(err);
    char *third_rank = rank_log(&job, 0, 2);
    cr_expect_neq(access(third_rank, F_OK), 0, "no third rank ran");
    free(third_rank);

    slurm_control(&cluster, (char *[]){"requeue", job_text, NULL});
    slurm_release_requeued(&cluster, job.id);
    expect_completed(&job, 1);
    expect_every_record_once(&job, 2, EPOCHS);
    /* the requeued run knows it is a restart (SLURM_RESTART_COUNT) */
    err = run_file(&job, "err", 1);
    log = harness_read_output(err);
    cr_expect_eq(harness_count_occurrences(log, " 1 restarts, "), REPLICAS,
                 "each rank's summary counts the requeue as a restart: %s", log);
    free(log);
    free(err);
    harness_remove_temp_dir(job.files.directory);
}

/* scontrol requeue of a running job: Slurm sends SIGCONT and SIGTERM to
 * every process of the job, mpirun included, which would abort the job on
 * it; shielded, the ranks' own SIGTERM (and the wrapper's SIGUSR1 to
 * mpirun) make one agreed stop at 143, and the requeued job resumes
 * exactly.  No -n: the replicas are the allocation's 2 tasks. */
Test(slurm, requeue_of_a_running_job_stops_at_one_step_and_resumes_exactly, .timeout = 300)
{
    require_cluster();
    enum { EPOCHS = 6 };
    struct wrapped_batch_job job;
    wrapped_batch_job_init(&job, "", EPOCHS, "2000");
    submit(&job, NULL);
    wait_for_step(&job, 0, 30);
    char job_text[32];
    snprintf(job_text, sizeof job_text, "%lu", job.id);
    slurm_control(&cluster, (char *[]){"requeue", job_text, NULL});
    slurm_release_requeued(&cluster, job.id);
    expect_completed(&job, 1);
    expect_one_agreed_stop(&job, 0);
    char *err = run_file(&job, "err", 0);
    char *log = harness_read_output(err);
    cr_expect(strstr(log, "beyond") == NULL, "nothing was capped: %s", log);
    free(log);
    free(err);
    expect_every_record_once(&job, 2, EPOCHS);
    harness_remove_temp_dir(job.files.directory);
}

/* The time limit's signal: --signal=B:TERM@50 with a one-minute limit
 * sends SIGTERM to the batch script (the wrapper) at the first time-limit
 * check (Slurm checks every 30 s) at least 10 s after the start; the job
 * stops at one step with 143, and requeued with a longer limit (and a
 * faster trainer) it resumes exactly. */
Test(slurm, time_limit_signal_stops_at_one_step_and_requeue_resumes_exactly, .timeout = 400)
{
    require_cluster();
    enum { EPOCHS = 16 };
    struct wrapped_batch_job job;
    /* at least 16 epochs * 63 steps * 50 ms = 50 s: past the first
     * time-limit check after the signal is due (10 to 40 s after the
     * start); the rest runs without the sleep after the requeue */
    wrapped_batch_job_init(&job, "", EPOCHS, "50000");
    double started = harness_monotonic_seconds();
    submit(&job, (char *[]){"--time=1", "--signal=B:TERM@50", NULL});
    wait_for_step(&job, 0, 5);
    char *state = slurm_wait_for_state(&cluster, job.id, "COMPLETED FAILED CANCELLED TIMEOUT",
                                       120);
    cr_log_info("the time limit's signal stopped the job %.1f s after its submission",
                harness_monotonic_seconds() - started);
    char *exit_code = slurm_job_field(&cluster, job.id, "ExitCode");
    cr_expect_str_eq(exit_code, "143:0", "the job's exit status (state %s)", state);
    cr_expect_str_eq(state, "FAILED", "stopped by the signal before the limit");
    free(exit_code);
    free(state);
    expect_one_agreed_stop(&job, 0);
    char *last_log = rank_log(&job, 0, 0);
    cr_expect_lt(harness_last_logged_step(last_log), EPOCHS * 63,
                 "the first run did not end by itself");
    free(last_log);

    write_sleep(&job, "0");
    char job_text[32];
    snprintf(job_text, sizeof job_text, "%lu", job.id);
    char *setting = job_setting(&job);
    slurm_control(&cluster, (char *[]){"requeue", job_text, NULL});
    slurm_control(&cluster, (char *[]){"update", setting, "TimeLimit=10", NULL});
    started = harness_monotonic_seconds();
    slurm_release_requeued(&cluster, job.id);
    free(slurm_wait_for_state(&cluster, job.id, "RUNNING COMPLETED FAILED", 120));
    double running = harness_monotonic_seconds();
    expect_completed(&job, 1);
    cr_log_info("the requeued run started %.1f s after its release and took %.1f s",
                running - started, harness_monotonic_seconds() - running);
    expect_every_record_once(&job, 2, EPOCHS);
    free(setting);
    harness_remove_temp_dir(job.files.directory);
}

/* What adaptdl-wrap makes of an allocation's tasks, without Slurm running:
 * --dry-run inside a (pretended) allocation of 2 tasks. */
static void expect_dry_run(char *const options[], char *const environment[],
                           const char *expected_line, const char *expected_command)
{
    char *wrapper = strdup(harness_build_path("adaptdl-wrap"));
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    char *argv[16] = {wrapper, "--dry-run"};
    size_t used = harness_append_list(argv, 2, sizeof argv / sizeof argv[0], options);
    argv[used++] = "--";
    argv[used++] = trainer;
    argv[used] = NULL;
    char *full_environment[8] = {"SLURM_JOB_ID=77", "SLURM_NTASKS=2"};
    harness_append_list(full_environment, 2,
                        sizeof full_environment / sizeof full_environment[0], environment);
    struct run_result result;
    harness_run(&result, argv, full_environment, false, 30);
    cr_assert_eq(result.status, 0, "%s", result.err);
    if (expected_line != NULL) {
        cr_expect_eq(harness_count_occurrences(result.err, expected_line), 1,
                     "one line says what was capped: %s", result.err);
    } else {
        cr_expect(strstr(result.err, "beyond") == NULL, "nothing capped: %s", result.err);
    }
    cr_expect(strstr(result.out, expected_command) != NULL, "%s", result.out);
    run_result_free(&result);
    free(trainer);
    free(wrapper);
}

Test(slurm_allocation, the_replica_count_is_the_allocations_tasks)
{
    expect_dry_run((char *[]){NULL}, NULL, NULL, "mpirun -np 2 ");
    expect_dry_run((char *[]){"-n", "1", NULL}, NULL, NULL, "(restart 0, 1 replica(s))");
    expect_dry_run((char *[]){"-n", "2", NULL}, NULL, NULL, "mpirun -np 2 ");
}

Test(slurm_allocation, a_count_beyond_the_tasks_is_capped_with_one_line)
{
    expect_dry_run((char *[]){"-n", "4", NULL}, NULL,
                   "adaptdl-wrap: -n 4 is beyond the 2 tasks of Slurm job 77: 2 replicas\n",
                   "mpirun -np 2 ");
    expect_dry_run((char *[]){NULL}, (char *[]){"ADAPTDL_NUM_REPLICAS=3", NULL},
                   "adaptdl-wrap: ADAPTDL_NUM_REPLICAS 3 is beyond the 2 tasks of Slurm job 77: "
                   "2 replicas\n",
                   "mpirun -np 2 ");
    expect_dry_run((char *[]){"-n", "1:8", NULL}, NULL,
                   "adaptdl-wrap: -n 1:8 is beyond the 2 tasks of Slurm job 77: -n 1:2\n",
                   "ADAPTDL_REPLICAS_RANGE=1:2 ");
    expect_dry_run((char *[]){"-n", "3:8", NULL}, NULL,
                   "adaptdl-wrap: -n 3:8 is beyond the 2 tasks of Slurm job 77: -n 2:2\n",
                   "mpirun -np 2 ");
}

/* Outside an allocation (no SLURM_JOB_ID) SLURM_NTASKS means nothing. */
Test(slurm_allocation, no_allocation_no_cap)
{
    char *wrapper = strdup(harness_build_path("adaptdl-wrap"));
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    char *argv[] = {wrapper, "--dry-run", "-n", "4", "--", trainer, NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){"SLURM_NTASKS=2", NULL}, false, 30);
    cr_assert_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "mpirun -np 4 ") != NULL, "%s", result.out);
    cr_expect(strstr(result.err, "beyond") == NULL, "%s", result.err);
    run_result_free(&result);
    free(trainer);
    free(wrapper);
}
