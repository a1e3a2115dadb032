/* test_launcher.c - adaptdl-wrap (adaptdl-wrap(1)): it restarts a job that exits
 * with 143 until it ends, with ADAPTDL_NUM_RESTARTS raised and the replica
 * count re-read; turns SIGTERM/SIGINT into a graceful stop of every rank
 * (143), a second signal into an immediate one (130, SIGKILL after
 * --kill-after seconds); a killed wrapper leaves no trainer running;
 * retries crashes with a doubling backoff, never a configuration error;
 * prints what it would run with --dry-run (--launcher torch too); and
 * refuses bad options in one line with status 2. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define DIM 4

/* harness_build_path returns a buffer the next call overwrites: a copy. */
static char *wrapper_path(void)
{
    return strdup(harness_build_path("adaptdl-wrap"));
}

/* Waits until `path` holds `needle` (a running job's progress). */
static void wait_for_text(const char *path, const char *needle)
{
    for (int attempt = 0; attempt < 3000; attempt++) {
        char *text = harness_read_file(path, NULL);
        bool found = text && strstr(text, needle);
        free(text);
        if (found)
            return;
        usleep(10000);
    }
    cr_assert_fail("%s never showed \"%s\"", path, needle);
}

static char *const mpi_root[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

/* The adaptive job of the batch-size tests, launched by the wrapper alone:
 * every exit with 143 is followed by a relaunch at the new batch size until
 * the job ends. */
Test(launcher, an_adaptive_job_is_restarted_until_it_ends, .timeout = 300)
{
    struct harness_wrapped_job wrapped;
    harness_wrapped_job_init(&wrapped, 4000, DIM);
    char *environment[] = {"ADAPTDL_BSZ_ARG=argv:--batch-size", "ADAPTDL_BATCH_SIZE=8",
                           "ADAPTDL_MAX_BATCH_SIZE=256", "ADAPTDL_DECIDE_SECONDS=0.3",
                           "ADAPTDL_PAYBACK_SECONDS=100000", "ADAPTDL_LR_ARG=argv:--lr",
                           "ADAPTDL_LR_RULE=linear", "ADAPTDL_LOG=info", NULL};
    char *log = harness_run_wrapped_sgd_mpi(&wrapped, "2", "6", "200", environment);
    cr_expect(strstr(log, "adaptdl-wrap: the trainer asked for a restart: restart 1") != NULL,
              "%s", log);
    cr_expect(strstr(log, "on each of 2 replicas (global 8, initial 8)") != NULL,
              "the first run had the initial batch: %s", log);
    /* at info, rank 0 says what it decided and why, one line a decision */
    cr_expect(strstr(log, "info: batch-size decision: current global 8 (local 4 x 2 "
                          "replicas), best global ") != NULL,
              "%s", log);
    cr_expect(strstr(log, ": restarting: the pessimistic speedup is above ADAPTDL_SPEEDUP 1.05 and the "
                          "payback within ADAPTDL_PAYBACK_SECONDS 100000\n") != NULL,
              "%s", log);
    /* the shim reports its restart count in its summary line */
    cr_expect(strstr(log, " 1 restarts, ") != NULL, "the relaunch saw ADAPTDL_NUM_RESTARTS=1");
    cr_expect(strstr(log, "batch size: --batch-size 8 on each of 1 replicas") == NULL,
              "the preload reached nothing but the trainer's ranks: %s", log);
    char *output = harness_read_output(wrapped.out);
    cr_expect(strstr(output, "rank 0 steps ") != NULL, "%s", output);
    free(output);
    free(log);
}

/* SIGTERM to the wrapper: every rank stops at the same step, the wrapper
 * exits 143; launched again, the job resumes where its checkpoint left it
 * and runs to its end. */
Test(launcher, sigterm_stops_every_rank_and_the_job_resumes, .timeout = 300)
{
    struct harness_wrapped_job wrapped;
    harness_wrapped_job_init(&wrapped, 2000, DIM);
    char *ids = harness_path_in(wrapped.job.directory, "ids.%r");
    char *ids0 = harness_path_in(wrapped.job.directory, "ids.0");
    char *ids_log[] = {"--ids-log", ids, NULL};
    pid_t pid = harness_start_wrapped_sgd_mpi(&wrapped, "2", "8", "2000", ids_log,
                                              (char *[]){"ADAPTDL_LOG=info", NULL});
    wait_for_text(ids0, "step 30\n");
    kill(pid, SIGTERM);
    int status = harness_wait(pid, 120);
    char *log = harness_read_output(wrapped.err);
    cr_assert_eq(status, 143, "%s", log);
    cr_expect_eq(harness_count_occurrences(log, "every replica agreed to stop at this step; "
                                                "exit status 143"),
                 2, "both ranks stopped at the agreed step: %s", log);
    free(log);

    pid = harness_start_wrapped_sgd_mpi(&wrapped, "2", "8", "2000", ids_log,
                                        (char *[]){"ADAPTDL_LOG=info",
                                                   "ADAPTDL_NUM_RESTARTS=1", NULL});
    cr_assert_eq(harness_wait(pid, 200), 0);
    char *output = harness_read_output(wrapped.out);
    cr_expect_gt(harness_resumed_step(output), 0, "resumed from the checkpoint: %s", output);
    free(output);
}

/* One replica runs without mpirun; SIGINT is the graceful stop too.  A
 * second signal stops the trainer at once (status 130). */
Test(launcher, one_replica_runs_directly_and_a_second_signal_stops_at_once, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, 2000, DIM, 3);
    char *checkpoint = harness_path_in(job.directory, "ck");
    char *ids = harness_path_in(job.directory, "ids");
    char *out = harness_path_in(job.directory, "out");
    char *err = harness_path_in(job.directory, "err");
    char *argv[] = {wrapper_path(), "--",
                    strdup(harness_build_path("trainers/sgd_read")), "--data", job.data,
                    "--epochs", "50", "--batch", "16", "--lr", "0.01", "--checkpoint",
                    checkpoint, "--resume", "--sleep-us", "2000", "--ids-log", ids, NULL};
    /* sgd_read --resume replays its epochs */
    char *environment[] = {job.data_setting, job.state_setting, job.save_setting,
                           "ADAPTDL_LOG=info", "ADAPTDL_RESUME=replay", NULL};
    pid_t pid = harness_start(argv, environment, false, out, err);
    wait_for_text(ids, "step 20\n");
    kill(pid, SIGINT);
    int status = harness_wait(pid, 60);
    char *log = harness_read_output(err);
    cr_assert_eq(status, 143, "%s", log);
    cr_expect(strstr(log, "mpirun") == NULL, "no mpirun for one replica: %s", log);
    cr_expect(strstr(log, "exit status 143") != NULL, "the trainer stopped itself: %s", log);
    free(log);

    /* A trainer that ignores SIGTERM never ends the graceful stop: the
     * second signal stops it at once (SIGINT) and the wrapper exits 130. */
    char *started = harness_path_in(job.directory, "started");
    char body[512];
    snprintf(body, sizeof body, "#!/bin/sh\ntrap '' TERM\ntouch %s\nexec sleep 1000\n",
             started);
    char *stubborn = harness_write_script(job.directory, "stubborn", body);
    char *stubborn_argv[] = {wrapper_path(), "--", stubborn, NULL};
    pid = harness_start(stubborn_argv, (char *[]){NULL}, false, out, err);
    wait_for_text(started, "");
    kill(pid, SIGTERM);
    wait_for_text(err, "stopping every rank gracefully");
    kill(pid, SIGTERM);
    status = harness_wait(pid, 30);
    log = harness_read_output(err);
    cr_expect_eq(status, 130, "%s", log);
    cr_expect(strstr(log, "adaptdl-wrap: stopping at once") != NULL, "%s", log);
    free(log);
}

/* Polls until `pid` no longer runs; false after `seconds`. */
static bool wait_until_gone(pid_t pid, double seconds)
{
    double give_up = harness_monotonic_seconds() + seconds;
    while (harness_process_running(pid)) {
        if (harness_monotonic_seconds() > give_up)
            return false;
        usleep(2000);
    }
    return true;
}

/* True while `signal_number` is pending for `pid` (/proc/PID/status). */
static bool signal_pending(pid_t pid, int signal_number)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    char *text = harness_read_file(path, NULL);
    bool pending = false;
    static const char *const masks[] = {"SigPnd:", "ShdPnd:"};
    for (size_t i = 0; text != NULL && i < 2; i++) {
        const char *line = strstr(text, masks[i]);
        if (line != NULL &&
            (strtoull(line + strlen(masks[i]), NULL, 16) >> (signal_number - 1)) & 1)
            pending = true;
    }
    free(text);
    return pending;
}

/* The first number after `label` in a file (0 if none). */
static pid_t pid_in_file(const char *path, const char *label)
{
    char *text = harness_read_file(path, NULL);
    const char *at = text ? strstr(text, label) : NULL;
    pid_t pid = at ? (pid_t)strtol(at + strlen(label), NULL, 10) : 0;
    free(text);
    return pid;
}

/* The second signal must reach a trainer under the shim as two SIGINTs
 * (the shim exits at once on the second).  Sent back to back they merge
 * while the first is still pending: here the trainer is kept from taking
 * it (stopped) until the wrapper has sent what it sends at once, which
 * makes the merge certain for a wrapper that does not wait. */
Test(launcher, a_second_signal_stops_a_trainer_slow_to_take_the_first, .timeout = 180)
{
    struct dataset_job job;
    dataset_job_init(&job, 100, DIM, 1);
    char *go = harness_path_in(job.directory, "go");
    char *out = harness_path_in(job.directory, "out");
    char *err = harness_path_in(job.directory, "err");
    char *argv[] = {wrapper_path(), "--kill-after", "600", "--",
                    strdup(harness_build_path("tools/stop_probe")), go, NULL};
    /* a data view makes the stop wait; nothing else would end the probe */
    char *environment[] = {job.data_setting, "ADAPTDL_STOP_SECONDS=600", "ADAPTDL_LOG=info",
                           NULL};
    pid_t pid = harness_start(argv, environment, false, out, err);
    pid_t trainer = 0;
    if (harness_wait_for_lines(out, "ready", 1, pid, 60))
        trainer = pid_in_file(out, "pid ");
    kill(pid, SIGTERM);
    if (trainer <= 0 || !harness_wait_for_lines(err, "stop requested by a signal", 1, pid, 60)) {
        kill(pid, SIGKILL);  /* the trainer dies with it */
        harness_wait(pid, 60);
        harness_write_file(go, "", 0);
        cr_assert_fail("the probe never started, or never took the first stop");
    }
    kill(trainer, SIGSTOP);
    double give_up = harness_monotonic_seconds() + 60;
    while (harness_process_state(trainer) != 'T' && harness_monotonic_seconds() < give_up)
        usleep(1000);
    kill(pid, SIGTERM);
    /* the first SIGINT is pending, and the wrapper is blocked (in `wait`, or
     * waiting for the trainer to take it): whatever it sends back to back
     * has been sent */
    while (!(signal_pending(trainer, SIGINT) && harness_process_state(pid) == 'S') &&
           harness_monotonic_seconds() < give_up)
        usleep(1000);
    kill(trainer, SIGCONT);
    int status = harness_wait(pid, 60);
    harness_write_file(go, "", 0);  /* lets a probe that was not stopped end */
    char *log = harness_read_output(err);
    cr_expect_eq(status, 130, "%s: %s", harness_describe_status(status), log);
    cr_expect(strstr(log, "second SIGINT: exiting at once with status 130") != NULL,
              "the trainer got a second SIGINT: %s", log);
    cr_expect(wait_until_gone(trainer, 60), "the trainer ended");
    free(log);
    harness_remove_temp_dir(job.directory);
}

/* A trainer that ignores both signals is killed --kill-after seconds after
 * the second one, and the wrapper still exits 130. */
Test(launcher, a_job_still_running_after_the_second_signal_is_killed, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *pid_file = harness_path_in(directory, "pid");
    char *err = harness_path_in(directory, "err");
    char body[512];
    snprintf(body, sizeof body, "#!/bin/sh\ntrap '' TERM INT\necho \"pid $$\" > %s\n"
             "exec sleep 1000\n", pid_file);
    char *deaf = harness_write_script(directory, "deaf", body);
    char *argv[] = {wrapper_path(), "--kill-after", "0.2", "--", deaf, NULL};
    pid_t pid = harness_start(argv, (char *[]){NULL}, false, NULL, err);
    bool started = harness_wait_for_lines(pid_file, "pid ", 1, pid, 60);
    pid_t trainer = pid_in_file(pid_file, "pid ");
    kill(pid, SIGTERM);
    if (!started || !harness_wait_for_lines(err, "stopping every rank gracefully", 1, pid, 60)) {
        kill(pid, SIGKILL);
        harness_wait(pid, 60);
        if (trainer > 0)
            kill(trainer, SIGKILL);
        cr_assert_fail("the trainer never started, or the wrapper never began the stop");
    }
    kill(pid, SIGTERM);
    int status = harness_wait(pid, 60);
    char *log = harness_read_output(err);
    bool gone = wait_until_gone(trainer, 60);
    if (!gone)
        kill(trainer, SIGKILL);
    cr_expect_eq(status, 130, "%s: %s", harness_describe_status(status), log);
    cr_expect(strstr(log, "still running 0.2 s after the second signal: SIGKILL") != NULL,
              "%s", log);
    cr_expect(gone, "the trainer was killed");
    free(log);
    harness_remove_temp_dir(directory);
}

/* A wrapper killed without a chance to stop the job (SIGKILL) takes the
 * trainer with it; under mpirun or adaptdl-torch-launch, the launcher and
 * every rank too.  Each "rank" writes its pid and its parent's (the
 * launcher, or the wrapper). */
static void expect_a_killed_wrapper_leaves_nothing(char *const options[], unsigned ranks)
{
    const char *directory = harness_temp_dir();
    char body[512];
    snprintf(body, sizeof body,
             "#!/bin/sh\necho \"pid $$ parent $PPID\" > %s/pid.${OMPI_COMM_WORLD_RANK:-${RANK:-0}}\n"
             "exec sleep 1000\n",
             directory);
    char *job = harness_write_script(directory, "job", body);
    char *argv[16];
    size_t used = 0;
    argv[used++] = wrapper_path();
    used = harness_append_list(argv, used, sizeof argv / sizeof argv[0], options);
    argv[used++] = "--";
    argv[used++] = job;
    argv[used] = NULL;
    char *err = harness_path_in(directory, "err");
    pid_t pid = harness_start(argv, (char *[]){mpi_root[0], mpi_root[1], NULL}, false, NULL,
                              err);
    struct {
        pid_t pid;
        const char *what;
    } left[16];
    size_t count = 0;
    for (unsigned rank = 0; rank < ranks && rank < 8; rank++) {
        char name[32];
        snprintf(name, sizeof name, "pid.%u", rank);
        char *path = harness_path_in(directory, name);
        if (!harness_wait_for_lines(path, "pid ", 1, pid, 120)) {
            kill(pid, SIGKILL);
            harness_wait(pid, 60);
            cr_assert_fail("rank %u never started", rank);
        }
        left[count].pid = pid_in_file(path, "pid ");
        left[count++].what = "a trainer";
        pid_t parent = pid_in_file(path, "parent ");
        if (parent != pid) {
            left[count].pid = parent;
            left[count++].what = "the launcher";
        }
        free(path);
    }
    kill(pid, SIGKILL);
    harness_wait(pid, 60);
    for (size_t i = 0; i < count; i++) {
        bool gone = wait_until_gone(left[i].pid, 60);
        if (!gone)
            kill(left[i].pid, SIGKILL);
        cr_expect(gone, "process %d (%s) outlived the wrapper", (int)left[i].pid,
                  left[i].what);
    }
    harness_remove_temp_dir(directory);
}

Test(launcher, a_killed_wrapper_leaves_no_trainer_running, .timeout = 180)
{
    expect_a_killed_wrapper_leaves_nothing((char *[]){NULL}, 1);
}

Test(launcher, a_killed_wrapper_leaves_no_rank_running, .timeout = 180)
{
    expect_a_killed_wrapper_leaves_nothing(
        (char *[]){"-n", "2", "--mpirun-arg", "--oversubscribe", NULL}, 2);
}

Test(launcher, a_killed_wrapper_leaves_no_torch_replica_running, .timeout = 180)
{
    expect_a_killed_wrapper_leaves_nothing((char *[]){"--launcher", "torch", "-n", "2", NULL},
                                           2);
}

/* A crash is retried after a backoff that doubles, with the restart count
 * raised each time, until --max-retries is spent; the status is the
 * trainer's.  A configuration error (status 2) is never retried. */
Test(launcher, crashes_are_retried_then_given_up_and_status_2_is_not_retried, .timeout = 60)
{
    const char *directory = harness_temp_dir();
    char *runs = harness_path_in(directory, "runs");
    char body[1024];
    snprintf(body, sizeof body,
             "#!/bin/sh\necho \"restart $ADAPTDL_NUM_RESTARTS\" >> %s\nexit 7\n", runs);
    char *crash = harness_write_script(directory, "crash", body);
    char *argv[] = {wrapper_path(), "--max-retries", "2", "--backoff", "0.05", "--",
                    crash, NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 7, "%s", result.err);
    char *text = harness_read_output(runs);
    cr_expect_str_eq(text, "restart 0\nrestart 1\nrestart 2\n");
    free(text);
    cr_expect(strstr(result.err, "in 0.05 s (retry 1 of 2)") != NULL, "%s", result.err);
    cr_expect(strstr(result.err, "in 0.1 s (retry 2 of 2)") != NULL, "doubled: %s", result.err);
    cr_expect(strstr(result.err, "3 times in a row: giving up") != NULL, "%s", result.err);
    run_result_free(&result);

    char *bad[] = {wrapper_path(), "--",
                   strdup(harness_build_path("trainers/sgd_read")), "--data", "x", NULL};
    harness_run(&result, bad, (char *[]){"ADAPTDL_BATCH_SIZE=twelve",
                                         "ADAPTDL_BSZ_ARG=argv:--batch", NULL},
                false, 30);
    cr_expect_eq(result.status, 2, "%s", result.err);
    cr_expect(strstr(result.err, "ADAPTDL_BATCH_SIZE") != NULL, "%s", result.err);
    cr_expect(strstr(result.err, "not restarted") != NULL, "%s", result.err);
    cr_expect(strstr(result.err, "restart 1") == NULL, "%s", result.err);
    run_result_free(&result);
}

/* --replicas-file is read before every launch: a scheduler that rescales
 * the job between runs is followed (here the job itself, a script, writes
 * 1 into the file and asks for a restart: the relaunch runs directly). */
Test(launcher, the_replica_count_is_read_again_at_each_restart, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *replicas = harness_path_in(directory, "replicas");
    char *seen = harness_path_in(directory, "seen");
    cr_assert_eq(harness_write_file(replicas, "2\n", 2), 0);
    char body[2048];
    snprintf(body, sizeof body,
             "#!/bin/sh\n"
             "echo \"restart $ADAPTDL_NUM_RESTARTS size ${OMPI_COMM_WORLD_SIZE:-none} "
             "replicas ${ADAPTDL_NUM_REPLICAS:-unset}\" >> %s\n"
             "if [ \"$ADAPTDL_NUM_RESTARTS\" = 0 ]; then\n"
             "  [ \"${OMPI_COMM_WORLD_RANK:-0}\" = 0 ] && echo 1 > %s\n"
             "  exit 143\n"
             "fi\n"
             "exit 0\n",
             seen, replicas);
    char *job = harness_write_script(directory, "job", body);
    char *argv[] = {wrapper_path(), "--replicas-file", replicas, "--mpirun-arg",
                    "--oversubscribe", "--", job, NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){mpi_root[0], mpi_root[1], NULL}, false, 60);
    cr_expect_eq(result.status, 0, "%s", result.err);
    char *text = harness_read_output(seen);
    cr_expect_eq(harness_count_occurrences(text, "restart 0 size 2 replicas unset\n"), 2,
                 "the first run under mpirun -np 2: %s", text);
    cr_expect(strstr(text, "restart 1 size none replicas 1\n") != NULL,
              "the relaunch, directly with one replica: %s", text);
    free(text);
    run_result_free(&result);
}

/* --dry-run prints the command, quoted, with the variables mpirun passes
 * on (the restart count the real launch adds too), and runs nothing. */
Test(launcher, dry_run_prints_the_command_and_runs_nothing)
{
    const char *directory = harness_temp_dir();
    char *marker = harness_path_in(directory, "ran");
    char body[512];
    snprintf(body, sizeof body, "#!/bin/sh\ntouch %s\n", marker);
    char *job = harness_write_script(directory, "job", body);
    char *argv[] = {wrapper_path(), "-n", "3", "--dry-run", "--", job, "--name",
                    "two words", NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){"ADAPTDL_SEED=5", NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "mpirun -np 3 -x ADAPTDL_NUM_RESTARTS -x ADAPTDL_SEED") != NULL,
              "every -x of the real launch, ADAPTDL_NUM_RESTARTS included: %s", result.out);
    cr_expect(strstr(result.out, " -x LD_PRELOAD=/") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "--name 'two words'") != NULL, "%s", result.out);
    cr_expect_eq(access(marker, F_OK), -1, "nothing ran");
    run_result_free(&result);
}

/* --launcher torch: every count, 1 too, runs under adaptdl-torch-launch,
 * which preloads the replicas (never itself); no ADAPTDL_NUM_REPLICAS (the
 * shim takes WORLD_SIZE and RANK); the project's Python package leads
 * PYTHONPATH. */
Test(launcher, dry_run_of_the_torch_launcher)
{
    const char *directory = harness_temp_dir();
    char *job = harness_write_script(directory, "job", "#!/bin/sh\nexit 0\n");
    char *argv[] = {wrapper_path(), "--launcher", "torch", "--dry-run", "--", job, "--name",
                    "two words", NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "/adaptdl-torch-launch -n 1 --preload /") != NULL, "%s",
              result.out);
    cr_expect(strstr(result.out, "libadaptshim.so -- ") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "--name 'two words'") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "ADAPTDL_NUM_REPLICAS") == NULL, "%s", result.out);
    cr_expect(strstr(result.out, " PYTHONPATH=/") != NULL &&
                  strstr(result.out, "/scripts/python") != NULL,
              "%s", result.out);
    run_result_free(&result);

    /* the launcher gives a host line without slots= one slot: so does the
     * wrapper's range */
    char *hostfile = harness_path_in(directory, "hosts");
    cr_assert_eq(harness_write_file(hostfile, "first-host\nsecond-host slots=2\n", 31), 0);
    char *ranged[] = {wrapper_path(), "--launcher", "torch", "-n", "1:8", "--hostfile", hostfile,
                      "--dry-run", "--", job, NULL};
    harness_run(&result, ranged, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, " ADAPTDL_REPLICAS_RANGE=1:3 ") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "ADAPTDL_NUM_NODES") == NULL,
              "the launcher sets the node count itself: %s", result.out);
    run_result_free(&result);
    free(hostfile);
    free(job);
}

/* The node count the wrapper takes from the hostfile is the hosts a
 * launch's ranks land on as mpirun maps them by default (each host's slots
 * filled in turn): 2 ranks on hosts of 2 slots are 1 node, 3 are 2.  A
 * host without slots=N (its cores unknown to the wrapper) makes it every
 * host, at most the replicas.  An mpirun argument that changes the mapping
 * leaves it to the shim (Open MPI tells each rank). */
Test(launcher, the_hostfile_node_count_is_the_hosts_the_ranks_land_on)
{
    const char *directory = harness_temp_dir();
    char *hostfile = harness_path_in(directory, "hosts");
    char *unknown_slots = harness_path_in(directory, "hosts-without-slots");
    FILE *file = fopen(hostfile, "w");
    cr_assert_not_null(file);
    fputs("first-host slots=2\n# a comment\nsecond-host slots=2\n", file);
    cr_assert_eq(fclose(file), 0);
    file = fopen(unknown_slots, "w");
    cr_assert_not_null(file);
    fputs("first-host\nsecond-host slots=2\n", file);
    cr_assert_eq(fclose(file), 0);
    char *job = harness_write_script(directory, "job", "#!/bin/sh\nexit 0\n");
    static const struct {
        const char *replicas;
        bool unknown_slots;
        const char *nodes;
    } cases[] = {{"1:4", false, " ADAPTDL_NUM_NODES=1 "}, {"2", false, " ADAPTDL_NUM_NODES=1 "},
                 {"3", false, " ADAPTDL_NUM_NODES=2 "}, {"5", false, " ADAPTDL_NUM_NODES=2 "},
                 {"1", true, " ADAPTDL_NUM_NODES=1 "}, {"2", true, " ADAPTDL_NUM_NODES=2 "}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {wrapper_path(), "-n", (char *)cases[i].replicas, "--hostfile",
                        cases[i].unknown_slots ? unknown_slots : hostfile, "--dry-run", "--",
                        job, NULL};
        struct run_result result;
        harness_run(&result, argv, (char *[]){NULL}, false, 30);
        cr_expect_eq(result.status, 0, "%s", result.err);
        cr_expect(strstr(result.out, cases[i].nodes) != NULL, "case %zu, -n %s: %s", i,
                  cases[i].replicas, result.out);
        run_result_free(&result);
    }
    char *argv[] = {wrapper_path(), "-n", "2", "--hostfile", hostfile, "--mpirun-arg",
                    "--map-by", "--mpirun-arg", "node", "--dry-run", "--", job, NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "ADAPTDL_NUM_NODES") == NULL,
              "another mapping: the shim takes Open MPI's count: %s", result.out);
    run_result_free(&result);
    free(job);
    free(unknown_slots);
    free(hostfile);
    harness_remove_temp_dir(directory);
}

/* Bad options: one line naming what was wrong, status 2, nothing run. */
Test(launcher, bad_options_are_one_line_and_status_2)
{
    char *trainer = strdup(harness_build_path("trainers/sgd_read"));
    char *const cases[][8] = {
        {wrapper_path(), "--", NULL},
        {wrapper_path(), "-n", "0", "--", trainer, NULL},
        {wrapper_path(), "--frobnicate", "--", trainer, NULL},
        {wrapper_path(), "--", "/nonexistent/trainer", NULL},
        {wrapper_path(), "--lib", "/nonexistent/lib.so", "--", trainer, NULL},
        {wrapper_path(), "--backoff", "soon", "--", trainer, NULL},
        {wrapper_path(), "--kill-after", "-1", "--", trainer, NULL},
        {wrapper_path(), "--launcher", "tensorflow", "--", trainer, NULL},
        {wrapper_path(), "--launcher", "torch", "--agent", " ", "--", trainer, NULL},
    };
    const char *expected[] = {"no trainer", "replica count \"0\"", "unknown option",
                              "not found", "no such file", "--backoff \"soon\"",
                              "--kill-after \"-1\"",
                              "--launcher \"tensorflow\" is not accepted: mpirun or torch",
                              "--agent is empty"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        harness_expect_refused_command(cases[i], (char *[]){NULL}, i, expected[i]);
    free(trainer);
}

/* --inspect runs the ELF preflight (hooks/): the MPI trainer's reads and
 * all-reduces are intercepted; a static program is refused (status 3). */
Test(launcher, inspect_runs_the_elf_preflight)
{
    char *argv[] = {wrapper_path(), "--inspect", "--",
                    strdup(harness_build_path("trainers/sgd_mpi")), NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s%s", result.out, result.err);
    cr_expect(strstr(result.out, "Intercepted by the shim:") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "  MPI_Allreduce ") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "  read@") != NULL, "%s", result.out);
    run_result_free(&result);

    char *refused[] = {wrapper_path(), "--inspect", "--",
                       strdup(harness_build_path("tools/static_probe")), NULL};
    harness_run(&result, refused, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 3, "%s%s", result.out, result.err);
    cr_expect(strstr(result.out, "statically linked") != NULL, "%s", result.out);
    run_result_free(&result);

    /* launching it is refused before anything runs */
    char *launch[] = {wrapper_path(), "--", strdup(harness_build_path("tools/static_probe")),
                      NULL};
    harness_run(&result, launch, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 2, "%s", result.err);
    cr_expect(strstr(result.err, "statically linked") != NULL, "%s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 1, "one line: %s", result.err);
    run_result_free(&result);
}
