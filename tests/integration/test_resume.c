/* test_resume.c - kill and resume: unmodified trainers killed with SIGKILL at
 * seeded random moments (including during their checkpoint writes), then
 * restarted with --resume, possibly with another replica count.  Taking each
 * run's records up to the checkpoint the next run resumed from, every epoch
 * sees every record exactly once (plus AdaptDL's padding when the replica
 * count is above one), finished passes are skipped, and a K=1 run ends with
 * exactly the weights of an uninterrupted run. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define RECORDS 1200
#define DIM 4
#define RECORD_SIZE (8 + 4 * DIM + 4)
#define EPOCHS 3

struct resume_setup {
    const char *directory;
    char *data;
    char *state;
    char data_setting[512];
    char state_setting[512];
    char save_setting[512];
};

static void resume_setup_init(struct resume_setup *setup, const char *trainer_mode)
{
    setup->directory = harness_temp_dir();
    setup->data = harness_path_in(setup->directory, "train.bin");
    setup->state = harness_path_in(setup->directory, "state");
    harness_generate_dataset(setup->data, RECORDS, DIM, 3);
    snprintf(setup->data_setting, sizeof setup->data_setting,
             "ADAPTDL_DATA=%s:record=%d:header=16:count=8,u64le,%d", setup->data, RECORD_SIZE,
             RECORD_SIZE);
    snprintf(setup->state_setting, sizeof setup->state_setting, "ADAPTDL_CHECKPOINT_PATH=%s",
             setup->state);
    snprintf(setup->save_setting, sizeof setup->save_setting, "ADAPTDL_SAVE=%s/ck*",
             setup->directory);
    (void)trainer_mode;
}

/* splitmix64: the kill schedule is seeded, so a failure can be replayed */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

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
    process->out_path = harness_path_in(setup->directory, name);
    snprintf(name, sizeof name, "run%u-rank%u.ids", run, rank);
    process->log_path = harness_path_in(setup->directory, name);
    snprintf(name, sizeof name, "ck%u", rank);
    process->checkpoint = harness_path_in(setup->directory, name);
    char replicas_setting[64], rank_setting[64];
    snprintf(replicas_setting, sizeof replicas_setting, "ADAPTDL_NUM_REPLICAS=%u", replicas);
    snprintf(rank_setting, sizeof rank_setting, "ADAPTDL_REPLICA_RANK=%u", rank);
    char *environment[16] = {(char *)setup->data_setting, (char *)setup->state_setting,
                             (char *)setup->save_setting, replicas_setting, rank_setting,
                             "ADAPTDL_SEED=9"};
    size_t used = 6;
    for (size_t i = 0; extra_environment && extra_environment[i]; i++)
        environment[used++] = extra_environment[i];
    environment[used] = NULL;
    char *final_path = harness_path_in(setup->directory, rank == 0 ? "final0" : "final-other");
    char *trainer_path = strdup(harness_build_path(trainer));
    char *argv[] = {trainer_path, "--data", setup->data, "--epochs", "3", "--batch", "10",
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

static void copy_file(const char *from, const char *to)
{
    size_t size;
    char *data = harness_read_file(from, &size);
    if (data == NULL)
        return;
    cr_assert_eq(harness_write_file(to, data, size), 0);
    free(data);
}

struct run_record {
    unsigned replicas;
    char *logs[8];
    char *outputs[8];
};

/* Runs the trainer `runs` times with the given replica counts, killing
 * each run after a random delay (the last one runs to completion); all
 * ranks of a run resume from rank 0's checkpoint of the previous run. */
static void run_kill_sequence(const struct resume_setup *setup, const char *trainer,
                              const unsigned *replica_plan, unsigned runs, uint64_t seed,
                              struct run_record *records, char *const extra_environment[])
{
    uint64_t random_state = seed;
    for (unsigned run = 0; run < runs; run++) {
        unsigned replicas = replica_plan[run];
        records[run].replicas = replicas;
        char *checkpoint0 = harness_path_in(setup->directory, "ck0");
        for (unsigned rank = 1; rank < replicas; rank++) {
            char name[16];
            snprintf(name, sizeof name, "ck%u", rank);
            char *checkpoint = harness_path_in(setup->directory, name);
            unlink(checkpoint);
            copy_file(checkpoint0, checkpoint);
            free(checkpoint);
        }
        free(checkpoint0);
        struct trainer_process processes[8];
        for (unsigned rank = 0; rank < replicas; rank++)
            /* rank 0 is the slowest, so the others are never behind the
             * checkpoint every rank of the next run resumes from */
            start_trainer(&processes[rank], setup, trainer, run, replicas, rank,
                          rank == 0 ? "1500" : "700", extra_environment);
        bool last = run + 1 == runs;
        if (!last) {
            uint64_t delay_us = 20000 + next_random(&random_state) % 250000;
            usleep((useconds_t)delay_us);
            for (unsigned rank = 0; rank < replicas; rank++)
                kill(processes[rank].pid, SIGKILL);
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

/* Counts, per epoch and record, the records each run consumed up to the
 * step the next run resumed at. */
static unsigned *count_committed_records(struct run_record *records, unsigned runs)
{
    unsigned *counts = calloc(EPOCHS * RECORDS, sizeof *counts);
    /* A run killed before it printed where it resumed changed nothing: the
     * cut of run i is the step the first later run that did print resumed at. */
    uint64_t cuts[64];
    uint64_t cut = UINT64_MAX;
    for (unsigned run = runs; run-- > 0;) {
        cuts[run] = cut;
        char *output = harness_read_output(records[run].outputs[0]);
        if (strstr(output, "resumed at step ") || strstr(output, "starting fresh"))
            cut = harness_resumed_step(output);
        free(output);
    }
    for (unsigned run = 0; run < runs; run++) {
        uint64_t last_step = cuts[run];
        for (unsigned rank = 0; rank < records[run].replicas; rank++) {
            struct id_log log;
            harness_read_id_log(records[run].logs[rank], &log);
            id_log_count_committed(&log, last_step, counts, RECORDS, EPOCHS);
            id_log_free(&log);
        }
    }
    return counts;
}

Test(resume, killed_k1_run_equals_uninterrupted_run_bit_for_bit, .timeout = 240)
{
    struct resume_setup reference;
    resume_setup_init(&reference, "read");
    unsigned one_run[] = {1};
    struct run_record reference_records[1];
    run_kill_sequence(&reference, "trainers/sgd_read", one_run, 1, 1, reference_records, NULL);

    struct resume_setup setup;
    resume_setup_init(&setup, "read");
    enum { RUNS = 21 };
    unsigned plan[RUNS];
    for (unsigned i = 0; i < RUNS; i++)
        plan[i] = 1;
    struct run_record records[RUNS];
    run_kill_sequence(&setup, "trainers/sgd_read", plan, RUNS, 20261202, records, NULL);

    unsigned *counts = count_committed_records(records, RUNS);
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++)
        for (unsigned id = 0; id < RECORDS; id++)
            cr_expect_eq(counts[epoch * RECORDS + id], 1, "epoch %u record %u seen %u times",
                         epoch, id, counts[epoch * RECORDS + id]);
    free(counts);

    char *expected = harness_path_in(reference.directory, "final0");
    char *actual = harness_path_in(setup.directory, "final0");
    size_t expected_size, actual_size;
    char *expected_bytes = harness_read_file(expected, &expected_size);
    char *actual_bytes = harness_read_file(actual, &actual_size);
    cr_assert(expected_bytes && actual_bytes);
    cr_assert_eq(expected_size, actual_size);
    cr_expect_eq(memcmp(expected_bytes, actual_bytes, actual_size), 0,
                 "final weights differ from the uninterrupted run");
}

Test(resume, replica_count_changes_between_killed_runs, .timeout = 240)
{
    struct resume_setup setup;
    resume_setup_init(&setup, "read");
    unsigned plan[] = {1, 4, 2, 3, 1, 4, 2, 2};
    enum { RUNS = sizeof plan / sizeof plan[0] };
    struct run_record records[RUNS];
    run_kill_sequence(&setup, "trainers/sgd_read", plan, RUNS, 77, records, NULL);
    unsigned *counts = count_committed_records(records, RUNS);
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
