/* test_resume.c - kill and resume: unmodified trainers killed with SIGKILL at
 * seeded random moments (including during their checkpoint writes), then
 * restarted with --resume, possibly with another replica count.  Taking each
 * run's records up to the checkpoint the next run resumed from, every epoch
 * sees every record exactly once (plus AdaptDL's padding when the replica
 * count is above one), finished passes are skipped, and a K=1 run ends with
 * exactly the weights of an uninterrupted run. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "state_store.h"

#define RECORDS 1200
#define DIM 4
#define EPOCHS 3

struct resume_setup {
    struct dataset_job files;
};

static void resume_setup_init(struct resume_setup *setup, const char *trainer_mode)
{
    dataset_job_init(&setup->files, RECORDS, DIM, 3);
    (void)trainer_mode;
}

/* Batch size of the trainers; the stdio test makes the last batch of an
 * epoch short, so that no periodic checkpoint is followed at once by the
 * end-of-epoch one (a kill after the first would land inside the second
 * one's in-place write). */
static const char *trainer_batch = "10";

struct trainer_process {
    pid_t pid;
    char *out_path;
    char *log_path;
    char *checkpoint;
};

static void start_trainer(struct trainer_process *process, const struct resume_setup *setup,
                          const char *trainer, unsigned run, unsigned replicas, unsigned rank,
                          const char *sleep_us, char *const extra_environment[])
{
    char name[64];
    snprintf(name, sizeof name, "run%u-rank%u.out", run, rank);
    process->out_path = harness_path_in(setup->files.directory, name);
    snprintf(name, sizeof name, "run%u-rank%u.ids", run, rank);
    process->log_path = harness_path_in(setup->files.directory, name);
    snprintf(name, sizeof name, "ck%u", rank);
    process->checkpoint = harness_path_in(setup->files.directory, name);
    char replicas_setting[64], rank_setting[64];
    snprintf(replicas_setting, sizeof replicas_setting, "ADAPTDL_NUM_REPLICAS=%u", replicas);
    snprintf(rank_setting, sizeof rank_setting, "ADAPTDL_REPLICA_RANK=%u", rank);
    char *environment[16] = {(char *)setup->files.data_setting,
                             (char *)setup->files.state_setting,
                             (char *)setup->files.save_setting, replicas_setting, rank_setting,
                             "ADAPTDL_SEED=9"};
    size_t used = 6;
    for (size_t i = 0; extra_environment && extra_environment[i]; i++)
        environment[used++] = extra_environment[i];
    environment[used] = NULL;
    char *final_path =
        harness_path_in(setup->files.directory, rank == 0 ? "final0" : "final-other");
    char *trainer_path = strdup(harness_build_path(trainer));
    char *argv[] = {trainer_path, "--data", setup->files.data, "--epochs", "3", "--batch",
                    (char *)trainer_batch,
                    "--lr", "0.05", "--checkpoint", process->checkpoint,
                    "--checkpoint-every", "5", "--sleep-us", (char *)sleep_us, "--resume",
                    "--ids-log", process->log_path, "--final", final_path, NULL};
    char *err_path = NULL;
    if (asprintf(&err_path, "%s.err", process->out_path) < 0)
        abort();
    process->pid = harness_start(argv, environment, true, process->out_path, err_path);
    free(err_path);
    free(trainer_path);
    free(final_path);
}

/* Runs the trainer `runs` times with the given replica counts, killing
 * each run after a random delay (the last one runs to completion); all
 * ranks of a run resume from rank 0's checkpoint of the previous run. */
static void run_kill_sequence(const struct resume_setup *setup, const char *trainer,
                              const unsigned *replica_plan, unsigned runs, uint64_t seed,
                              struct harness_killed_run *records,
                              char *const extra_environment[])
{
    uint64_t random_state = seed;
    for (unsigned run = 0; run < runs; run++) {
        unsigned replicas = replica_plan[run];
        records[run].replicas = replicas;
        harness_hand_out_first_checkpoint(setup->files.directory, replicas);
        /* zeroed: a plan never has 0 ranks, which the compiler cannot see */
        struct trainer_process processes[8] = {0};
        for (unsigned rank = 0; rank < replicas; rank++)
            /* rank 0 is the slowest, so the others are never behind the
             * checkpoint every rank of the next run resumes from */
            start_trainer(&processes[rank], setup, trainer, run, replicas, rank,
                          rank == 0 ? "1500" : "700", extra_environment);
        bool last = run + 1 == runs;
        if (!last) {
            uint64_t delay_us = 20000 + harness_splitmix64(&random_state) % 250000;
            usleep((useconds_t)delay_us);
            /* Rank 0's checkpoint is what every rank of the next run resumes
             * from: the other ranks must have got at least as far (as they
             * would in lockstep), so they are killed once they pass it. */
            kill(processes[0].pid, SIGKILL);
            siginfo_t information;
            /* WNOWAIT: wait for its death without reaping it (harness_wait does) */
            waitid(P_PID, (id_t)processes[0].pid, &information, WEXITED | WNOWAIT);
            uint64_t reached = harness_last_logged_step(processes[0].log_path);
            for (unsigned rank = 1; rank < replicas; rank++)
                harness_kill_once_past_step(processes[rank].pid, processes[rank].log_path,
                                            reached, 20000);
        }
        for (unsigned rank = 0; rank < replicas; rank++) {
            int status = harness_wait(processes[rank].pid, 120);
            if (last && status != 0) {
                char *err_path = NULL;
                if (asprintf(&err_path, "%s.err", processes[rank].out_path) > 0)
                    cr_log_error("stderr: %s", harness_read_output(err_path));
            }
            if (last)
                cr_assert_eq(status, 0, "final run rank %u exited %d: %s", rank, status,
                             harness_read_output(processes[rank].out_path));
            records[run].logs[rank] = processes[rank].log_path;
            records[run].outputs[rank] = processes[rank].out_path;
            free(processes[rank].checkpoint);
        }
    }
}

/* Expects the killed runs, counted up to where each next one resumed, to
 * have consumed every record of every epoch exactly once. */
static void expect_every_record_committed_once(const struct harness_killed_run *records,
                                               unsigned runs)
{
    unsigned *counts = harness_count_committed_records(records, runs, RECORDS, EPOCHS);
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++)
        for (unsigned id = 0; id < RECORDS; id++)
            cr_expect_eq(counts[epoch * RECORDS + id], 1, "epoch %u record %u seen %u times",
                         epoch, id, counts[epoch * RECORDS + id]);
    free(counts);
}

/* The interrupted run ends with exactly the uninterrupted run's weights. */
static void expect_same_final_weights(const struct resume_setup *reference,
                                      const struct resume_setup *setup)
{
    char *expected = harness_path_in(reference->files.directory, "final0");
    char *actual = harness_path_in(setup->files.directory, "final0");
    size_t expected_size, actual_size;
    char *expected_bytes = harness_read_file(expected, &expected_size);
    char *actual_bytes = harness_read_file(actual, &actual_size);
    cr_assert(expected_bytes && actual_bytes);
    cr_assert_eq(expected_size, actual_size);
    cr_expect_eq(memcmp(expected_bytes, actual_bytes, actual_size), 0,
                 "final weights differ from the uninterrupted run");
    free(expected);
    free(actual);
    free(expected_bytes);
    free(actual_bytes);
}

/* The reference a killed job is compared with: one run of `trainer` (in
 * `mode`) to its end, never killed. */
static void run_uninterrupted(struct resume_setup *reference, const char *mode,
                              const char *trainer, char *const environment[])
{
    resume_setup_init(reference, mode);
    unsigned one_run[] = {1};
    struct harness_killed_run reference_records[1];
    run_kill_sequence(reference, trainer, one_run, 1, 1, reference_records, environment);
}

/* sgd_read --resume loads its weights and step counter and runs its epoch
 * loop again from 0: a replay-style trainer. */
static char *replay_setting[] = {"ADAPTDL_RESUME=replay", NULL};

Test(resume, killed_k1_run_equals_uninterrupted_run_bit_for_bit, .timeout = 240)
{
    struct resume_setup reference;
    run_uninterrupted(&reference, "read", "trainers/sgd_read", replay_setting);

    struct resume_setup setup;
    resume_setup_init(&setup, "read");
    enum { RUNS = 21 };
    unsigned plan[RUNS];
    for (unsigned i = 0; i < RUNS; i++)
        plan[i] = 1;
    struct harness_killed_run records[RUNS];
    run_kill_sequence(&setup, "trainers/sgd_read", plan, RUNS, 20261202, records,
                      replay_setting);

    expect_every_record_committed_once(records, RUNS);

    expect_same_final_weights(&reference, &setup);
}

Test(resume, replica_count_changes_between_killed_runs, .timeout = 240)
{
    struct resume_setup setup;
    resume_setup_init(&setup, "read");
    unsigned plan[] = {1, 4, 2, 3, 1, 4, 2, 2};
    enum { RUNS = sizeof plan / sizeof plan[0] };
    struct harness_killed_run records[RUNS];
    run_kill_sequence(&setup, "trainers/sgd_read", plan, RUNS, 77, records, replay_setting);
    unsigned *counts = harness_count_committed_records(records, RUNS, RECORDS, EPOCHS);
    unsigned padding_allowance = 0;
    for (unsigned run = 0; run < RUNS; run++)
        padding_allowance += plan[run] - 1;
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        unsigned total = 0;
        for (unsigned id = 0; id < RECORDS; id++) {
            unsigned seen = counts[epoch * RECORDS + id];
            cr_expect_geq(seen, 1, "epoch %u record %u never seen", epoch, id);
            total += seen;
        }
        cr_expect_leq(total, RECORDS + padding_allowance,
                      "epoch %u: %u records delivered, at most %u allowed", epoch, total,
                      RECORDS + padding_allowance);
    }
    free(counts);
}

/* Waits until the log holds `checkpoints` checkpoint lines, or the process ends. */
static bool wait_for_checkpoints(const char *log_path, pid_t pid, unsigned checkpoints)
{
    for (int attempt = 0; attempt < 20000; attempt++) {
        char *text = harness_read_file(log_path, NULL);
        unsigned seen = 0;
        for (const char *cursor = text; cursor && (cursor = strstr(cursor, "ckpt ")); cursor++)
            seen++;
        free(text);
        if (seen >= checkpoints)
            return true;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return false;
        usleep(500);
    }
    return false;
}

/* sgd_stdio restores its own epoch counter (ADAPTDL_RESUME=continue) and
 * writes its checkpoint in place with fopen("wb"); it is killed just after
 * a checkpoint, so no kill lands inside its (non-atomic) checkpoint write. */
Test(resume, continue_mode_stdio_trainer_equals_uninterrupted_run, .timeout = 240)
{
    char *continue_setting[] = {"ADAPTDL_RESUME=continue", NULL};
    trainer_batch = "7";
    struct resume_setup reference;
    run_uninterrupted(&reference, "stdio", "trainers/sgd_stdio", continue_setting);

    struct resume_setup setup;
    resume_setup_init(&setup, "stdio");
    trainer_batch = "7";
    enum { RUNS = 12 };
    struct harness_killed_run records[RUNS];
    uint64_t random_state = 4242;
    unsigned runs = 0;
    for (; runs < RUNS; runs++) {
        struct trainer_process process;
        start_trainer(&process, &setup, "trainers/sgd_stdio", runs, 1, 0, "3000",
                      continue_setting);
        records[runs].replicas = 1;
        records[runs].logs[0] = process.log_path;
        records[runs].outputs[0] = process.out_path;
        bool last = runs + 1 == RUNS;
        unsigned checkpoints = 1 + (unsigned)(harness_splitmix64(&random_state) % 5);
        if (!last && wait_for_checkpoints(process.log_path, process.pid, checkpoints))
            kill(process.pid, SIGKILL);
        int status = harness_wait(process.pid, 120);
        if (status == 0) {
            runs++;
            break;
        }
        cr_assert(!last, "final run exited %d", status);
    }
    expect_every_record_committed_once(records, runs);
    expect_same_final_weights(&reference, &setup);
}

/* bigram_text reads newline records with fgets through the shim's stdio
 * stream (so the snapshot must discount the stream's unread buffer), and
 * reopens the file every epoch. */
static char *run_bigram(const char *directory, const char *data, const char *state,
                        const char *name, bool kill_it, uint64_t delay_us)
{
    char data_setting[512], state_setting[512], save_setting[512];
    snprintf(data_setting, sizeof data_setting, "ADAPTDL_DATA=%s:lines", data);
    snprintf(state_setting, sizeof state_setting, "ADAPTDL_CHECKPOINT_PATH=%s", state);
    snprintf(save_setting, sizeof save_setting, "ADAPTDL_SAVE=%s/bigram.ck*", directory);
    /* bigram_text --resume runs its epoch loop again from 0: replay style */
    char *environment[] = {data_setting, state_setting, save_setting, "ADAPTDL_SEED=3",
                           "ADAPTDL_RESUME=replay", NULL};
    char *checkpoint = harness_path_in(directory, "bigram.ck");
    char log_name[64], out_name[64];
    snprintf(log_name, sizeof log_name, "%s.ids", name);
    snprintf(out_name, sizeof out_name, "%s.out", name);
    char *log_path = harness_path_in(directory, log_name);
    char *out_path = harness_path_in(directory, out_name);
    char *trainer = strdup(harness_build_path("trainers/bigram_text"));
    char *argv[] = {trainer, "--data", (char *)data, "--epochs", "3", "--checkpoint",
                    checkpoint, "--checkpoint-every", "7", "--sleep-us", "300", "--resume",
                    "--ids-log", log_path, NULL};
    pid_t pid = harness_start(argv, environment, true, out_path, NULL);
    if (kill_it) {
        usleep((useconds_t)delay_us);
        kill(pid, SIGKILL);
    }
    int status = harness_wait(pid, 120);
    if (!kill_it)
        cr_assert_eq(status, 0, "bigram run %s exited %d", name, status);
    free(trainer);
    free(checkpoint);
    free(log_path);
    return out_path;
}

Test(resume, killed_text_trainer_sees_every_line_once_and_same_counts, .timeout = 240)
{
    const char *reference_directory = harness_temp_dir();
    char *reference_data = harness_path_in(reference_directory, "text.txt");
    harness_generate_text(reference_data, 400, 5);
    char *reference_state = harness_path_in(reference_directory, "state");
    char *reference_out = run_bigram(reference_directory, reference_data, reference_state,
                                     "reference", false, 0);
    char *reference_output = harness_read_output(reference_out);
    const char *reference_checksum = strstr(reference_output, "final checksum");
    cr_assert(reference_checksum != NULL);

    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "text.txt");
    harness_generate_text(data, 400, 5);
    char *state = harness_path_in(directory, "state");
    enum { RUNS = 10 };
    struct harness_killed_run records[RUNS];
    uint64_t random_state = 99;
    for (unsigned run = 0; run < RUNS; run++) {
        char name[32];
        snprintf(name, sizeof name, "run%u", run);
        bool last = run + 1 == RUNS;
        records[run].replicas = 1;
        records[run].outputs[0] = run_bigram(directory, data, state, name, !last,
                                             20000 + harness_splitmix64(&random_state) % 150000);
        char log_name[64];
        snprintf(log_name, sizeof log_name, "%s.ids", name);
        records[run].logs[0] = harness_path_in(directory, log_name);
    }
    /* "resumed at line N": the cut is in lines, logged as steps */
    for (unsigned run = 0; run < RUNS; run++) {
        char *output = harness_read_output(records[run].outputs[0]);
        char *found = strstr(output, "resumed at line ");
        if (found != NULL)
            memcpy(found, "resumed at step ", strlen("resumed at step "));
        harness_write_file(records[run].outputs[0], output, strlen(output));
        free(output);
    }
    unsigned *counts = calloc(EPOCHS * 400, sizeof *counts);
    uint64_t cut = UINT64_MAX;
    for (unsigned run = RUNS; run-- > 0;) {
        struct id_log log;
        harness_read_id_log(records[run].logs[0], &log);
        id_log_count_committed(&log, cut, counts, 400, EPOCHS);
        id_log_free(&log);
        char *output = harness_read_output(records[run].outputs[0]);
        if (strstr(output, "resumed at step ") || strstr(output, "starting fresh"))
            cut = harness_resumed_step(output);
        free(output);
    }
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++)
        for (unsigned id = 0; id < 400; id++)
            cr_expect_eq(counts[epoch * 400 + id], 1, "epoch %u line %u seen %u times", epoch,
                         id, counts[epoch * 400 + id]);
    free(counts);
    char *output = harness_read_output(records[RUNS - 1].outputs[0]);
    const char *checksum = strstr(output, "final checksum");
    cr_assert(checksum != NULL, "final output: %s", output);
    cr_expect_eq(strncmp(checksum, reference_checksum, 31), 0, "%.31s vs %.31s", checksum,
                 reference_checksum);
}

/* ---- replay over a count= file (adaptshim(7) "CHECKPOINT BINDING") --------------------------- */

/* A skipped pass is an empty file whose count= field reads 0; loaders that
 * insist on a positive count cannot replay it, so a replay restore that will
 * skip passes of such a file says to use ADAPTDL_RESUME=continue.  sgd_read
 * itself accepts an empty file (it checks count * record + header against
 * the size), so the runs succeed and only the warning differs. */

#define COUNT_JOB_RECORDS 300
#define COUNT_WARNING "ADAPTDL_RESUME=continue"
/* sgd_read --resume runs its epoch loop again from 0: replay style */
#define REPLAY "ADAPTDL_RESUME=replay"

/* Runs sgd_read on the job's count= dataset for `epochs` epochs; `resume`
 * loads ck0.  extra_setting (NULL: none) is added to the environment. */
static int run_counted_job(const struct dataset_job *job, const char *epochs, bool resume,
                           const char *every, char *extra_setting, struct run_result *result)
{
    char *checkpoint = harness_path_in(job->directory, "ck0");
    char *ids_log = harness_path_in(job->directory, "ids");
    char *trainer_path = strdup(harness_build_path("trainers/sgd_read"));
    char *argv[] = {trainer_path, "--data", job->data, "--epochs", (char *)epochs,
                    "--batch", "10", "--lr", "0.05", "--checkpoint", checkpoint,
                    "--checkpoint-every", (char *)every, "--ids-log", ids_log,
                    resume ? "--resume" : NULL, NULL};
    char *environment[] = {(char *)job->data_setting, (char *)job->state_setting,
                           (char *)job->save_setting, extra_setting, NULL};
    int status = harness_run(result, argv, environment, true, 120);
    free(trainer_path);
    free(ids_log);
    free(checkpoint);
    return status;
}

/* A job whose only checkpoint was written after pass 0 ended (sgd_read
 * checkpoints at the end of each epoch, after the read that returned 0):
 * its snapshot binds pass 1, so a replay of it skips pass 0. */
static void counted_job_past_pass_zero(struct dataset_job *job)
{
    dataset_job_init(job, COUNT_JOB_RECORDS, DIM, 5);
    cr_assert_not_null(strstr(job->data_setting, ":count="), "the job must use count=");
    struct run_result first;
    cr_assert_eq(run_counted_job(job, "1", false, "1000000", NULL, &first), 0, "%s", first.err);
    cr_expect_null(strstr(first.err, COUNT_WARNING), "nothing restored: %s", first.err);
    run_result_free(&first);
}

static void dataset_job_remove(struct dataset_job *job)
{
    harness_remove_temp_dir(job->directory);
    free((char *)job->directory);
    free(job->data);
}

Test(resume, replay_past_a_count_file_pass_warns_once_naming_continue, .timeout = 120)
{
    struct dataset_job job;
    counted_job_past_pass_zero(&job);
    struct run_result replay;
    cr_assert_eq(run_counted_job(&job, "2", true, "1000000", REPLAY, &replay), 0, "%s",
                 replay.err);
    cr_expect_not_null(strstr(replay.out, "resumed at step "), "%s", replay.out);
    cr_expect_eq(harness_count_occurrences(replay.err, COUNT_WARNING), 1,
                 "one warning line expected: %s", replay.err);
    const char *warning = strstr(replay.err, COUNT_WARNING);
    if (warning != NULL) {
        const char *line = warning;
        while (line > replay.err && line[-1] != '\n')
            line--;
        const char *end = strchr(warning, '\n');
        size_t length = end ? (size_t)(end - line) : strlen(line);
        char *text = strndup(line, length);
        cr_expect_not_null(strstr(text, job.data), "the line names the file: %s", text);
        cr_expect_not_null(strstr(text, "count="), "the line says why: %s", text);
        free(text);
    }
    run_result_free(&replay);
    dataset_job_remove(&job);
}

Test(resume, continue_past_a_count_file_pass_does_not_warn, .timeout = 120)
{
    struct dataset_job job;
    counted_job_past_pass_zero(&job);
    struct run_result resumed;
    cr_assert_eq(run_counted_job(&job, "1", true, "1000000", "ADAPTDL_RESUME=continue",
                                 &resumed),
                 0, "%s", resumed.err);
    cr_expect_not_null(strstr(resumed.out, "resumed at step "), "%s", resumed.out);
    cr_expect_null(strstr(resumed.err, COUNT_WARNING), "%s", resumed.err);
    run_result_free(&resumed);
    dataset_job_remove(&job);
}

/* Killed after its first periodic checkpoint, long before pass 0 ends: the
 * replay continues pass 0 itself and skips nothing. */
Test(resume, replay_within_pass_zero_of_a_count_file_does_not_warn, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, COUNT_JOB_RECORDS, DIM, 5);
    char *checkpoint = harness_path_in(job.directory, "ck0");
    char *ids_log = harness_path_in(job.directory, "ids");
    char *trainer_path = strdup(harness_build_path("trainers/sgd_read"));
    char *argv[] = {trainer_path, "--data", job.data, "--epochs", "1", "--batch", "10",
                    "--lr", "0.05", "--checkpoint", checkpoint, "--checkpoint-every", "2",
                    "--sleep-us", "20000", "--ids-log", ids_log, NULL};
    char *environment[] = {job.data_setting, job.state_setting, job.save_setting, NULL};
    pid_t pid = harness_start(argv, environment, true, NULL, NULL);
    cr_assert(wait_for_checkpoints(ids_log, pid, 1), "the trainer wrote no checkpoint");
    kill(pid, SIGKILL);
    harness_wait(pid, 30);
    char *log = harness_read_file(ids_log, NULL);
    cr_assert_null(strstr(log, "epoch_end"), "killed too late: pass 0 had ended");
    free(log);

    struct run_result replay;
    cr_assert_eq(run_counted_job(&job, "1", true, "1000000", REPLAY, &replay), 0, "%s",
                 replay.err);
    cr_expect_not_null(strstr(replay.out, "resumed at step "), "%s", replay.out);
    cr_expect_null(strstr(replay.err, COUNT_WARNING), "%s", replay.err);
    run_result_free(&replay);
    free(trainer_path);
    free(ids_log);
    free(checkpoint);
    dataset_job_remove(&job);
}

/* ---- pruning and copies of a checkpoint (adaptshim(7) "CHECKPOINT BINDING") ------------------ */

/* Makes a snapshot older than the pruning grace period, as in a job that
 * has run for a while. */
static void make_an_hour_older(struct adaptdl_snapshot *snapshot)
{
    snapshot->created_unix_time -= 3600;
}

/* A copy of a checkpoint (ck0.bak here; the copy a new replica gets is the
 * same case) matches ADAPTDL_SAVE and can be resumed from: pruning must
 * keep its snapshot although no snapshot recorded that path.  (Before: the
 * commits of the next run deleted it, and a resume from the copy started
 * the data afresh, re-reading the epoch.) */
Test(resume, a_copy_of_a_checkpoint_keeps_its_snapshot_through_later_commits, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, COUNT_JOB_RECORDS, DIM, 5);
    struct run_result first;
    cr_assert_eq(run_counted_job(&job, "1", false, "5", NULL, &first), 0, "%s", first.err);
    run_result_free(&first);
    char *checkpoint = harness_path_in(job.directory, "ck0");
    char *backup = harness_path_in(job.directory, "ck0.bak");
    harness_copy_file(checkpoint, backup);
    struct run_result second;
    cr_assert_eq(run_counted_job(&job, "2", true, "5", REPLAY, &second), 0, "%s", second.err);
    cr_expect_not_null(strstr(second.out, "epoch 1 records 300 step 60"), "%s", second.out);
    run_result_free(&second);
    /* The third run commits contents the copy does not hold, every 5 steps,
     * pruning each time; its replay of the first two epochs rewrites no
     * snapshot of the copy's content (which would make it young again). */
    char *state = harness_path_in(job.directory, "state");
    cr_assert_gt(harness_edit_snapshots(state, make_an_hour_older), 0);
    struct run_result third;
    cr_assert_eq(run_counted_job(&job, "3", true, "5", REPLAY, &third), 0, "%s", third.err);
    cr_expect_not_null(strstr(third.out, "epoch 2 records 300 step 90"), "%s", third.out);
    run_result_free(&third);

    harness_copy_file(backup, checkpoint);
    struct run_result from_copy;
    cr_assert_eq(run_counted_job(&job, "2", true, "5", REPLAY, &from_copy), 0, "%s",
                 from_copy.err);
    cr_expect(strstr(from_copy.out, "resumed at step 30") &&
                  strstr(from_copy.out, "epoch 0 records 0 step 30") &&
                  strstr(from_copy.out, "epoch 1 records 300 step 60"),
              "the copy resumes where it was taken:\n%s", from_copy.out);
    cr_expect_null(strstr(from_copy.err, "no bound snapshot"), "%s", from_copy.err);
    run_result_free(&from_copy);
    free(state);
    free(backup);
    free(checkpoint);
    dataset_job_remove(&job);
}
