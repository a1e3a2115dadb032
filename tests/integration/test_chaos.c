/* test_chaos.c - seeded chaos over the read, pread and stdio example
 * trainers: each is run several times with the replica count changing
 * between runs, and every run but the last dies by SIGKILL, either at a
 * seeded random moment or inside the commit path of its N-th checkpoint
 * (the test build faults/libadaptshim-faults.so and ADAPTSHIM_FAULT, see
 * runtime/fault_injection.h).  Taking each run's records up to the step the
 * next run resumed at, every epoch must see every record, repeated only
 * within AdaptDL's padding.  The seed is printed with every failure;
 * ADAPTSHIM_CHAOS_SEED=N replays (or explores) another schedule. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define CHAOS_RECORDS 800
#define CHAOS_DIM 4
#define CHAOS_EPOCHS 3
#define CHAOS_MAX_REPLICAS 4

/* One example trainer and how it may be killed. */
struct chaos_trainer {
    const char *program;          /* build path */
    const char *mode_flag;        /* an extra option, or NULL */
    const char *resume_setting;   /* ADAPTDL_RESUME=..., or NULL */
    const char *batch;
    /* A checkpoint rewritten in place has a window no tool closes (adaptshim(7)
     * "Crash safety"): between its last write and its snapshot.  Such a
     * trainer is killed only just after a checkpoint, and inside the
     * commit only where the snapshot is already durable. */
    bool writes_in_place;
    const char *const *fault_points;
    size_t fault_point_count;
};

static const char *const rename_commit_points[] = {"before-snapshot", "snapshot-temp",
                                                   "after-snapshot", "after-rename"};
static const char *const in_place_commit_points[] = {"after-snapshot"};

static uint64_t chaos_seed(uint64_t fixed)
{
    const char *text = getenv("ADAPTSHIM_CHAOS_SEED");
    return text && *text ? strtoull(text, NULL, 10) : fixed;
}

struct chaos_process {
    pid_t pid;
    char *out_path, *err_path, *log_path;
};

static void chaos_start(struct chaos_process *process, const struct dataset_job *job,
                        const struct chaos_trainer *trainer, unsigned run, unsigned replicas,
                        unsigned rank, const char *fault)
{
    char name[64];
    snprintf(name, sizeof name, "run%u-rank%u.out", run, rank);
    process->out_path = harness_path_in(job->directory, name);
    snprintf(name, sizeof name, "run%u-rank%u.err", run, rank);
    process->err_path = harness_path_in(job->directory, name);
    snprintf(name, sizeof name, "run%u-rank%u.ids", run, rank);
    process->log_path = harness_path_in(job->directory, name);
    snprintf(name, sizeof name, "ck%u", rank);
    char *checkpoint = harness_path_in(job->directory, name);
    char replicas_setting[64], rank_setting[64], preload[1200], fault_setting[96];
    /* checkpoints only, as a user's glob would be: sgd_read's temp file is
     * then no checkpoint, and its rename is the one commit */
    char save_setting[700];
    snprintf(save_setting, sizeof save_setting, "ADAPTDL_SAVE=%s/ck[0-9]", job->directory);
    snprintf(replicas_setting, sizeof replicas_setting, "ADAPTDL_NUM_REPLICAS=%u", replicas);
    snprintf(rank_setting, sizeof rank_setting, "ADAPTDL_REPLICA_RANK=%u", rank);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s",
             harness_build_path("faults/libadaptshim-faults.so"));
    char *environment[12] = {(char *)job->data_setting, (char *)job->state_setting,
                             save_setting, replicas_setting, rank_setting, "ADAPTDL_SEED=5",
                             preload};
    size_t used = 7;
    if (trainer->resume_setting)
        environment[used++] = (char *)trainer->resume_setting;
    if (fault) {
        snprintf(fault_setting, sizeof fault_setting, "ADAPTSHIM_FAULT=%s", fault);
        environment[used++] = fault_setting;
    }
    environment[used] = NULL;
    char *program = strdup(harness_build_path(trainer->program));
    /* rank 0 is the slowest, so the other ranks are never behind the
     * checkpoint every rank of the next run resumes from */
    const char *sleep_us = rank == 0 ? (trainer->writes_in_place ? "3000" : "1500") : "700";
    char *argv[24] = {program, "--data", job->data, "--epochs", "3", "--batch",
                      (char *)trainer->batch, "--lr", "0.05", "--checkpoint", checkpoint,
                      "--checkpoint-every", "5", "--sleep-us", (char *)sleep_us, "--resume",
                      "--ids-log", process->log_path};
    size_t count = 18;
    if (trainer->mode_flag)
        argv[count++] = (char *)trainer->mode_flag;
    argv[count] = NULL;
    /* the test build itself, not the product library, is preloaded */
    process->pid = harness_start(argv, environment, false, process->out_path,
                                 process->err_path);
    free(program);
    free(checkpoint);
}

/* Waits for a process to die without reaping it (harness_wait does). */
static void chaos_wait_dead(pid_t pid)
{
    siginfo_t information;
    waitid(P_PID, (id_t)pid, &information, WEXITED | WNOWAIT);
}

/* Rank 0's checkpoint is what every rank of the next run resumes from: the
 * other ranks must have got at least as far (as they would in lockstep), so
 * they are killed once they pass it, or once they end by themselves. */
static void chaos_kill_others(struct chaos_process *processes, unsigned replicas)
{
    uint64_t reached = harness_last_logged_step(processes[0].log_path);
    for (unsigned rank = 1; rank < replicas; rank++)
        harness_kill_once_past_step(processes[rank].pid, processes[rank].log_path, reached,
                                    40000);
}

/* Runs the plan; returns how many of the asked-for faults fired. */
static unsigned chaos_run_plan(const struct dataset_job *job, const struct chaos_trainer *trainer,
                               const unsigned *plan, unsigned runs, uint64_t seed,
                               struct harness_killed_run *records)
{
    uint64_t random_state = seed;
    unsigned fired = 0, fault_index = (unsigned)(harness_splitmix64(&random_state) % 4);
    for (unsigned run = 0; run < runs; run++) {
        unsigned replicas = plan[run];
        records[run].replicas = replicas;
        harness_hand_out_first_checkpoint(job->directory, replicas);
        bool last = run + 1 == runs;
        /* odd runs die inside a commit, even ones at a random moment */
        char fault[96] = "";
        if (!last && run % 2 == 1) {
            const char *point = trainer->fault_points[fault_index++ % trainer->fault_point_count];
            /* the kill comes in the commit of the n-th checkpoint */
            snprintf(fault, sizeof fault, "commit:%u:%s",
                     1 + (unsigned)(harness_splitmix64(&random_state) % 4), point);
        }
        struct chaos_process processes[CHAOS_MAX_REPLICAS] = {{0}};
        for (unsigned rank = 0; rank < replicas; rank++)
            chaos_start(&processes[rank], job, trainer, run, replicas, rank,
                        rank == 0 && fault[0] ? fault : NULL);
        if (!last) {
            if (fault[0] == '\0' && trainer->writes_in_place) {
                size_t checkpoints = 1 + harness_splitmix64(&random_state) % 5;
                if (harness_wait_for_lines(processes[0].log_path, "ckpt ", checkpoints,
                                           processes[0].pid, 120))
                    usleep((useconds_t)(harness_splitmix64(&random_state) % 2000));
                kill(processes[0].pid, SIGKILL);
            } else if (fault[0] == '\0') {
                usleep((useconds_t)(20000 + harness_splitmix64(&random_state) % 150000));
                kill(processes[0].pid, SIGKILL);
            }
            chaos_wait_dead(processes[0].pid);
            chaos_kill_others(processes, replicas);
        }
        for (unsigned rank = 0; rank < replicas; rank++) {
            int status = harness_wait(processes[rank].pid, 120);
            char *err = harness_read_output(processes[rank].err_path);
            if (last)
                cr_assert_eq(status, 0, "seed %llu run %u rank %u: %s: %s",
                             (unsigned long long)seed, run, rank,
                             harness_describe_status(status), err);
            if (rank == 0 && fault[0]) {
                /* killed by the fault, or finished before its commit came */
                cr_assert(status == HARNESS_KILLED_BY(SIGKILL) || status == 0,
                          "seed %llu run %u (%s): %s: %s", (unsigned long long)seed, run,
                          fault, harness_describe_status(status), err);
                if (status != 0) {
                    cr_assert_not_null(strstr(err, "adaptshim: fault injected"),
                                       "seed %llu run %u (%s) was killed, not by its fault: %s",
                                       (unsigned long long)seed, run, fault, err);
                    fired++;
                }
            }
            free(err);
            records[run].logs[rank] = processes[rank].log_path;
            records[run].outputs[rank] = processes[rank].out_path;
            free(processes[rank].err_path);
        }
    }
    return fired;
}

static void chaos_check_trainer(const struct chaos_trainer *trainer, uint64_t fixed_seed)
{
    uint64_t seed = chaos_seed(fixed_seed);
    struct dataset_job job;
    dataset_job_init(&job, CHAOS_RECORDS, CHAOS_DIM, 7);
    static const unsigned plan[] = {1, 3, 2, 1, 2, 4, 1, 3, 1, 2, 4, 1};
    enum { RUNS = sizeof plan / sizeof plan[0] };
    struct harness_killed_run records[RUNS];
    unsigned fired = chaos_run_plan(&job, trainer, plan, RUNS, seed, records);
    /* a knob that never fires would pass every other check */
    cr_expect_geq(fired, 1, "seed %llu: no injected fault fired", (unsigned long long)seed);
    char resumes[256] = "";
    for (unsigned run = 1; run < RUNS; run++) {
        uint64_t step = 0;
        bool printed = harness_resume_point(records[run].outputs[0], &step);
        snprintf(resumes + strlen(resumes), sizeof resumes - strlen(resumes), " %s%llu",
                 printed ? "" : "-", (unsigned long long)step);
    }
    cr_log_info("%s%s seed %llu: %u faults fired, resumed at steps%s", trainer->program,
                trainer->mode_flag ? " --pread" : "", (unsigned long long)seed, fired, resumes);
    unsigned *counts =
        harness_count_committed_records(records, RUNS, CHAOS_RECORDS, CHAOS_EPOCHS);
    unsigned padding_allowance = 0;
    for (unsigned run = 0; run < RUNS; run++)
        padding_allowance += plan[run] - 1;
    bool complete = true;
    for (unsigned epoch = 0; epoch < CHAOS_EPOCHS; epoch++) {
        unsigned total = 0;
        for (unsigned id = 0; id < CHAOS_RECORDS; id++) {
            unsigned seen = counts[epoch * CHAOS_RECORDS + id];
            if (seen == 0 && complete)
                cr_log_error("seed %llu: epoch %u record %u never seen (%s)",
                             (unsigned long long)seed, epoch, id, trainer->program);
            complete = complete && seen > 0;
            total += seen;
        }
        cr_expect_leq(total, CHAOS_RECORDS + padding_allowance,
                      "seed %llu: epoch %u: %u records delivered, at most %u allowed",
                      (unsigned long long)seed, epoch, total, CHAOS_RECORDS + padding_allowance);
    }
    cr_expect(complete, "seed %llu: records were lost (first one above)",
              (unsigned long long)seed);
    free(counts);
    if (complete)
        harness_remove_temp_dir(job.directory);
}

/* sgd_read --resume runs its epoch loop again from 0: replay style. */
Test(chaos, read_trainer_loses_no_record_through_kills_and_replica_changes, .timeout = 300)
{
    struct chaos_trainer trainer = {
        .program = "trainers/sgd_read", .resume_setting = "ADAPTDL_RESUME=replay",
        .batch = "10", .fault_points = rename_commit_points,
        .fault_point_count = sizeof rename_commit_points / sizeof rename_commit_points[0]};
    chaos_check_trainer(&trainer, 20261203);
}

Test(chaos, pread_trainer_loses_no_record_through_kills_and_replica_changes, .timeout = 300)
{
    struct chaos_trainer trainer = {
        .program = "trainers/sgd_read", .mode_flag = "--pread",
        .resume_setting = "ADAPTDL_RESUME=replay", .batch = "10",
        .fault_points = rename_commit_points,
        .fault_point_count = sizeof rename_commit_points / sizeof rename_commit_points[0]};
    chaos_check_trainer(&trainer, 31415926);
}

/* sgd_stdio restores its own epoch counter (ADAPTDL_RESUME=continue) and
 * rewrites its checkpoint in place; its batch of 7 makes the last batch of
 * an epoch short. */
Test(chaos, stdio_trainer_loses_no_record_through_kills_and_replica_changes, .timeout = 300)
{
    struct chaos_trainer trainer = {
        .program = "trainers/sgd_stdio", .resume_setting = "ADAPTDL_RESUME=continue",
        .batch = "7", .writes_in_place = true, .fault_points = in_place_commit_points,
        .fault_point_count = sizeof in_place_commit_points / sizeof in_place_commit_points[0]};
    chaos_check_trainer(&trainer, 27182818);
}

/* The knob is compiled into the test build only. */
Test(chaos, only_the_test_build_has_the_fault_knob)
{
    size_t product_size, test_size;
    char *product = harness_read_file(harness_build_path("libadaptshim.so"), &product_size);
    char *test_build =
        harness_read_file(harness_build_path("faults/libadaptshim-faults.so"), &test_size);
    cr_assert(product && test_build);
    cr_expect_null(memmem(product, product_size, "ADAPTSHIM_FAULT", 15),
                   "the product library reads ADAPTSHIM_FAULT");
    cr_expect_not_null(memmem(test_build, test_size, "ADAPTSHIM_FAULT", 15));
    free(product);
    free(test_build);
}

/* A bad value stops the test build at once, saying what is accepted: run on
 * unarmed, a chaos run would pass without the kill it asked for. */
Test(chaos, a_bad_fault_setting_is_refused_in_one_line)
{
    struct dataset_job job;
    dataset_job_init(&job, 100, CHAOS_DIM, 3);
    char *checkpoint = harness_path_in(job.directory, "ck0");
    char *program = strdup(harness_build_path("trainers/sgd_read"));
    char *argv[] = {program, "--data", job.data, "--epochs", "1", "--batch", "10", "--lr",
                    "0.05", "--checkpoint", checkpoint, NULL};
    char preload[1200];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s",
             harness_build_path("faults/libadaptshim-faults.so"));
    char *environment[] = {job.data_setting, job.state_setting, job.save_setting, preload,
                           "ADAPTSHIM_FAULT=commit:0:nowhere", NULL};
    struct run_result result;
    harness_run(&result, argv, environment, false, 60);
    cr_expect_eq(result.status, 2, "%s: %s", harness_describe_status(result.status), result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "ADAPTSHIM_FAULT='commit:0:nowhere'"), 1,
                 "%s", result.err);
    cr_expect_not_null(strstr(result.err, "after-rename"), "%s", result.err);
    run_result_free(&result);
    free(program);
    free(checkpoint);
    harness_remove_temp_dir(job.directory);
}
