/* test_torch_launcher.c - `adaptdl-wrap --launcher torch` (adaptdl-wrap(1)):
 * the replicas of an ordinary DDP-over-gloo PyTorch trainer
 * (trainers/torch_ddp.py) started by adaptdl-torch-launch with torchrun's
 * variables and supervised like an mpirun job: disjoint views that cover
 * the data; a SIGTERM to the wrapper stops every replica (143) and the
 * relaunched job resumes exactly; one replica's crash stops the others and
 * is retried; the replica count changes between launches; the injected
 * --batch-size and --lr reach the Python trainer; and, with any program,
 * a hostfile spread over a fake remote agent with stops forwarded through
 * it.  The PyTorch tests are skipped, saying so, when /usr/bin/python3
 * cannot import torch. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "harness_torch.h"
#include "state_store.h"

#define DIM 4
#define RECORDS 200
#define EPOCHS 3
#define MAX_RUNS 4



/* Starts `adaptdl-wrap --launcher torch OPTIONS -- python3 torch_ddp.py
 * ... TRAINER_OPTIONS` with the job's settings plus `environment` (each
 * list NULL-terminated, may be NULL). */
static pid_t start_torch_job(const struct torch_job *torch, char *const options[],
                             char *const trainer_options[], char *const environment[])
{
    char *argv[64];
    size_t used = 0;
    argv[used++] = strdup(harness_build_path("adaptdl-wrap"));
    argv[used++] = "--launcher";
    argv[used++] = "torch";
    used = harness_append_list(argv, used, sizeof argv / sizeof argv[0], options);
    char epochs[16];
    snprintf(epochs, sizeof epochs, "%d", EPOCHS);
    char *fixed[] = {"--", "/usr/bin/python3", strdup(harness_build_path("trainers/torch_ddp.py")),
                     "--data", torch->job.data, "--epochs", epochs, "--batch-size", "8",
                     "--lr", "0.05", "--checkpoint", torch->checkpoint, "--log",
                     torch->log_pattern};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[used++] = fixed[i];
    harness_append_list(argv, used, sizeof argv / sizeof argv[0], trainer_options);
    char *settings[32] = {(char *)torch->job.data_setting, (char *)torch->job.state_setting,
                          (char *)torch->job.save_setting, "ADAPTDL_LOG=info"};
    harness_append_list(settings, 4, sizeof settings / sizeof settings[0], environment);
    pid_t pid = harness_start(argv, settings, false, torch->out, torch->err);
    free(argv[0]);
    free(fixed[2]);
    return pid;
}

/* Every "pid P" a trainer printed on the wrapper's stdout is gone (polled,
 * at most 60 s: a replica the wrapper left behind would never go). */
static void expect_no_replica_running(const char *out)
{
    char *text = harness_read_output(out);
    size_t replicas = 0;
    for (const char *at = strstr(text, " pid "); at != NULL; at = strstr(at + 1, " pid ")) {
        pid_t pid = (pid_t)strtol(at + 5, NULL, 10);
        double give_up = harness_monotonic_seconds() + 60;
        while (harness_process_running(pid) && harness_monotonic_seconds() < give_up)
            usleep(2000);
        bool running = harness_process_running(pid);
        if (running)
            kill(pid, SIGKILL);
        cr_expect(!running, "replica %d outlived the job", (int)pid);
        replicas++;
    }
    cr_expect_gt(replicas, 0, "the replicas printed their pids: %s", text);
    free(text);
}

/* The pid after `label` in the first line of text holding `line_start`. */
static pid_t number_after(const char *text, const char *line_start, const char *label)
{
    const char *line = strstr(text, line_start);
    const char *at = line ? strstr(line, label) : NULL;
    return at ? (pid_t)strtol(at + strlen(label), NULL, 10) : 0;
}

/* Every record of every epoch was trained exactly once per the checkpoint
 * contract (the trainer reads in order, --shuffle 0: with several replicas
 * a snapshot binds their in-order prefix, so a shuffled loader would train
 * again, never lose, what followed it; adaptshim(7) "Readers in their own
 * order"): of each run, what its ranks logged before the checkpoint the
 * next run resumed from; of the last run, everything.  `replicas[run]` is
 * the replica count of each run. */
static void expect_each_record_trained_once(const struct torch_job *torch,
                                            const unsigned replicas[], unsigned runs)
{
    unsigned *counts = calloc(EPOCHS * RECORDS, sizeof *counts);
    for (unsigned run = 0; run < runs; run++) {
        uint64_t until = UINT64_MAX;
        if (run + 1 < runs) {
            char *next = torch_job_log_path(torch, run + 1, 0);
            cr_assert(harness_resume_point(next, &until), "run %u printed where it started",
                      run + 1);
            cr_assert_gt(until, 0, "run %u resumed from a checkpoint", run + 1);
            free(next);
        }
        for (unsigned rank = 0; rank < replicas[run]; rank++) {
            char *path = torch_job_log_path(torch, run, rank);
            struct id_log log;
            harness_read_record_stream(path, &log);
            cr_expect_gt(log.count, 0, "%s holds records", path);
            record_stream_count_until(&log, until, counts, RECORDS, EPOCHS);
            id_log_free(&log);
            free(path);
        }
    }
    size_t wrong = 0;
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++)
        for (unsigned id = 0; id < RECORDS; id++)
            if (counts[epoch * RECORDS + id] != 1 && wrong++ < 5)
                cr_expect_fail("epoch %u record %u trained %u times", epoch, id,
                               counts[epoch * RECORDS + id]);
    cr_expect_eq(wrong, 0, "%zu records not trained exactly once", wrong);
    free(counts);
}

Test(torch_launcher, two_replicas_see_disjoint_views_that_cover_the_data, .timeout = 240)
{
    torch_job_skip_without_torch();
    struct torch_job torch;
    torch_job_init(&torch, RECORDS, DIM, 5);
    pid_t pid = start_torch_job(&torch, (char *[]){"-n", "2", NULL}, NULL, NULL);
    int status = harness_wait(pid, 220);
    char *err = harness_read_output(torch.err);
    char *out = harness_read_output(torch.out);
    cr_assert_eq(status, 0, "%s: %s", harness_describe_status(status), err);
    cr_expect(strstr(out, "rank 0 of 2 local 0 of 2 batch size 8") != NULL, "%s", out);
    cr_expect(strstr(out, "rank 1 of 2 local 1 of 2 batch size 8") != NULL, "%s", out);
    cr_expect(strstr(out, "rank 0 done at step ") && strstr(out, "rank 1 done at step "), "%s",
              out);
    /* the launcher reaches the trainers: they are its children */
    pid_t parent0 = number_after(out, "rank 0 of 2", " parent ");
    cr_expect_eq(parent0, number_after(out, "rank 1 of 2", " parent "),
                 "one launcher started both: %s", out);
    /* each epoch: the two views are disjoint halves that cover the data */
    torch_job_expect_disjoint_halves(&torch, 0, RECORDS, EPOCHS);
    /* the shim took its layout from WORLD_SIZE and RANK */
    cr_expect(strstr(err, "[r1 p") != NULL, "rank 1 logs as rank 1: %s", err);
    free(out);
    free(err);
    expect_no_replica_running(torch.out);
}

/* SIGTERM to the wrapper: SIGUSR1 to the launcher, forwarded to every
 * replica, which stops at its next train read (no agreement point without
 * MPI) with 143; the wrapper exits 143 with no replica left.  Launched
 * again, the job resumes from the checkpoint and every record of every
 * epoch is trained once. */
Test(torch_launcher, sigterm_stops_every_replica_and_the_job_resumes_exactly, .timeout = 300)
{
    torch_job_skip_without_torch();
    struct torch_job torch;
    torch_job_init(&torch, RECORDS, DIM, 5);
    char *trainer_options[] = {"--sleep-us", "20000", "--shuffle", "0", NULL};
    pid_t pid = start_torch_job(&torch, (char *[]){"-n", "2", NULL}, trainer_options, NULL);
    char *first = torch_job_log_path(&torch, 0, 0);
    bool reached = harness_wait_for_lines(first, "checkpoint step 8", 1, pid, 200);
    kill(pid, SIGTERM);
    int status = harness_wait(pid, 120);
    char *err = harness_read_output(torch.err);
    cr_assert(reached, "the job never reached its second checkpoint: %s", err);
    cr_assert_eq(status, 143, "%s: %s", harness_describe_status(status), err);
    cr_expect_eq(harness_count_occurrences(err, "stop requested by a signal"), 2,
                 "both replicas got the stop: %s", err);
    free(err);
    expect_no_replica_running(torch.out);

    pid = start_torch_job(&torch, (char *[]){"-n", "2", NULL}, (char *[]){"--shuffle", "0", NULL},
                          (char *[]){"ADAPTDL_NUM_RESTARTS=1", NULL});
    status = harness_wait(pid, 220);
    err = harness_read_output(torch.err);
    cr_assert_eq(status, 0, "%s: %s", harness_describe_status(status), err);
    free(err);
    expect_each_record_trained_once(&torch, (const unsigned[]){2, 2}, 2);
}

/* Rank 1 crashes (status 3) after step 5: the launcher stops rank 0 and
 * exits with the crash's status, the wrapper retries from the last
 * checkpoint, and the job ends with every record trained once. */
Test(torch_launcher, a_replica_crash_stops_the_others_and_is_retried, .timeout = 300)
{
    torch_job_skip_without_torch();
    struct torch_job torch;
    torch_job_init(&torch, RECORDS, DIM, 5);
    char *marker = harness_path_in(torch.job.directory, "crashed");
    char *trainer_options[] = {"--crash-rank", "1", "--crash-step", "5", "--crash-marker",
                               marker, "--shuffle", "0", NULL};
    pid_t pid = start_torch_job(&torch, (char *[]){"-n", "2", "--backoff", "0.05", NULL},
                                trainer_options, NULL);
    int status = harness_wait(pid, 280);
    char *err = harness_read_output(torch.err);
    char *out = harness_read_output(torch.out);
    cr_assert_eq(status, 0, "%s: %s", harness_describe_status(status), err);
    cr_expect(strstr(out, "rank 1 crashing at step 5") != NULL, "%s", out);
    /* (rank 0 fails in its all-reduce once rank 1 is gone: on a loaded
     * machine the launcher may reap that end first, and report it) */
    cr_expect(strstr(err, "adaptdl-torch-launch: replica ") != NULL &&
                  strstr(err, ") exited with status ") != NULL &&
                  strstr(err, ": stopping the others") != NULL,
              "%s", err);
    cr_expect(strstr(err, "adaptdl-wrap: the trainer crashed (status ") != NULL &&
                  strstr(err, "): restart 1 from the last snapshot") != NULL,
              "%s", err);
    /* the first run's rank 0 ended before the relaunch started (the
     * launcher waits for every replica) */
    pid_t first_rank0 = number_after(out, "rank 0 of 2", " pid ");
    cr_expect(first_rank0 > 0 && !harness_process_running(first_rank0), "%s", out);
    expect_each_record_trained_once(&torch, (const unsigned[]){2, 2}, 2);
    free(out);
    free(err);
    expect_no_replica_running(torch.out);
}

/* --replicas-file is read at each launch: the job runs with 2 replicas,
 * the file is rewritten to 1 and the launcher told to stop (SIGUSR1, as a
 * scheduler's resize would); the relaunch runs one replica (WORLD_SIZE 1)
 * that resumes the two's checkpoint. */
Test(torch_launcher, the_replica_count_changes_between_launches, .timeout = 300)
{
    torch_job_skip_without_torch();
    struct torch_job torch;
    torch_job_init(&torch, RECORDS, DIM, 5);
    char *replicas = harness_path_in(torch.job.directory, "replicas");
    cr_assert_eq(harness_write_file(replicas, "2\n", 2), 0);
    char *trainer_options[] = {"--sleep-us", "20000", "--shuffle", "0", NULL};
    pid_t pid = start_torch_job(&torch, (char *[]){"--replicas-file", replicas, NULL},
                                trainer_options, NULL);
    char *first = torch_job_log_path(&torch, 0, 0);
    bool reached = harness_wait_for_lines(first, "checkpoint step 8", 1, pid, 200);
    char *out = harness_read_output(torch.out);
    pid_t launcher = number_after(out, "rank 0 of 2", " parent ");
    free(out);
    if (!reached || launcher <= 0) {
        kill(pid, SIGKILL);
        harness_wait(pid, 60);
        cr_assert_fail("the job never reached its second checkpoint");
    }
    cr_assert_eq(harness_write_file(replicas, "1\n", 2), 0);
    kill(launcher, SIGUSR1);
    int status = harness_wait(pid, 250);
    char *err = harness_read_output(torch.err);
    out = harness_read_output(torch.out);
    cr_assert_eq(status, 0, "%s: %s", harness_describe_status(status), err);
    cr_expect(strstr(err, "adaptdl-wrap: relaunching with 1 replica(s) instead of 2") != NULL,
              "%s", err);
    cr_expect(strstr(out, "rank 0 of 1 local 0 of 1") != NULL, "%s", out);
    cr_expect(strstr(err, "taken with 2 replicas, now 1") != NULL, "%s", err);
    expect_each_record_trained_once(&torch, (const unsigned[]){2, 1}, 2);
    free(out);
    free(err);
}

/* Batch-size control reaches a Python trainer's argv: the first run gets
 * the initial global batch 8 split over 2 replicas (--batch-size 4, lr
 * unchanged); after it stopped with 143 and a decision for a global batch
 * of 32 is in the job record, the relaunch gets --batch-size 16 and the lr
 * scaled by the linear rule (x4). */
Test(torch_launcher, the_decided_batch_size_and_lr_reach_the_python_trainer, .timeout = 300)
{
    torch_job_skip_without_torch();
    struct torch_job torch;
    torch_job_init(&torch, RECORDS, DIM, 5);
    char *batch_settings[] = {"ADAPTDL_BSZ_ARG=argv:--batch-size", "ADAPTDL_BATCH_SIZE=8",
                              "ADAPTDL_MAX_BATCH_SIZE=256", "ADAPTDL_LR_ARG=argv:--lr",
                              "ADAPTDL_LR_RULE=linear", NULL};
    char *trainer_options[] = {"--sleep-us", "20000", NULL};
    pid_t pid = start_torch_job(&torch, (char *[]){"-n", "2", NULL}, trainer_options,
                                batch_settings);
    char *first = torch_job_log_path(&torch, 0, 0);
    bool reached = harness_wait_for_lines(first, "checkpoint step 4", 1, pid, 200);
    kill(pid, SIGTERM);
    int status = harness_wait(pid, 120);
    char *out = harness_read_output(torch.out);
    char *err = harness_read_output(torch.err);
    cr_assert(reached, "the first run never checkpointed: %s", err);
    cr_assert_eq(status, 143, "%s: %s", harness_describe_status(status), err);
    cr_expect(strstr(out, "rank 0 of 2 local 0 of 2 batch size 4 lr 0.05 ") != NULL, "%s", out);
    cr_expect(strstr(out, "rank 1 of 2 local 1 of 2 batch size 4 lr 0.05 ") != NULL, "%s", out);
    free(out);
    free(err);

    /* the decision a goodput model would have taken, as rank 0 writes it */
    char *state = harness_path_in(torch.job.directory, "state");
    struct adaptdl_job_record record;
    char error[512] = "";
    cr_assert_eq(job_record_load(state, &record, error, sizeof error), 0, "%s", error);
    record.initial_global_bsz = 8;
    record.decided_global_bsz = 32;
    record.decided_local_bsz = 16;
    record.decided_replicas = 2;
    record.previous_global_bsz = 8;
    cr_assert_eq(job_record_save(state, &record, error, sizeof error), 0, "%s", error);
    job_record_free(&record);

    char *restart_settings[8] = {"ADAPTDL_NUM_RESTARTS=1"};
    for (size_t i = 0; batch_settings[i] != NULL; i++)
        restart_settings[i + 1] = batch_settings[i];
    cr_assert_eq(harness_write_file(torch.out, "", 0), 0);
    pid = start_torch_job(&torch, (char *[]){"-n", "2", NULL}, NULL, restart_settings);
    status = harness_wait(pid, 250);
    out = harness_read_output(torch.out);
    err = harness_read_output(torch.err);
    cr_assert_eq(status, 0, "%s: %s", harness_describe_status(status), err);
    cr_expect(strstr(out, "rank 0 of 2 local 0 of 2 batch size 16 lr 0.2 ") != NULL, "%s", out);
    cr_expect(strstr(out, "rank 1 of 2 local 1 of 2 batch size 16 lr 0.2 ") != NULL, "%s", out);
    free(out);
    free(err);
    free(state);
}

/* With a hostfile, replicas fill the hosts' slots in order; the host that
 * is this machine runs its replica directly, the other one is reached
 * through --agent (here a fake that runs the command line here with no
 * variable of the launcher's, as ssh would run it there).  Every replica
 * gets torchrun's numbers per host and GLOO_SOCKET_IFNAME;
 * the stop goes through the agent's control channel.  Needs no torch. */
Test(torch_launcher, a_hostfile_spreads_replicas_over_an_agent_and_stops_reach_them,
     .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *hostfile = harness_path_in(directory, "hosts");
    const char hosts[] = "# this machine, then another\nlocalhost slots=1\nfar-host slots=2\n";
    cr_assert_eq(harness_write_file(hostfile, hosts, sizeof hosts - 1), 0);
    char body[1024];
    snprintf(body, sizeof body, "#!/bin/sh\necho \"$1\" >> %s/agent.log\nshift\n"
             "exec env -i PATH=/usr/bin:/bin /bin/sh -c \"$*\"\n", directory);
    char *agent = harness_write_script(directory, "agent", body);
    snprintf(body, sizeof body,
             "#!/bin/sh\n"
             "trap 'echo stopped >> %s/stopped.$RANK; exit 143' USR1\n"
             "echo \"rank $RANK of $WORLD_SIZE local $LOCAL_RANK of $LOCAL_WORLD_SIZE group "
             "$GROUP_RANK master $MASTER_ADDR:$MASTER_PORT nodes ${ADAPTDL_NUM_NODES:-unset} "
             "gloo ${GLOO_SOCKET_IFNAME:-unset} in $PWD\" > %s/place.$RANK\n"
             "while :; do sleep 0.02; done\n",
             directory, directory);
    char *job = harness_write_script(directory, "job", body);
    char *err = harness_path_in(directory, "err");
    char *argv[] = {strdup(harness_build_path("adaptdl-wrap")), "--launcher", "torch", "-n",
                    "3", "--hostfile", hostfile, "--agent", agent, "--", job, NULL};
    pid_t pid = harness_start(argv, (char *[]){"ADAPTDL_SEED=1", "GLOO_SOCKET_IFNAME=eth9", NULL},
                              false, NULL, err);
    char *place[3];
    bool started = true;
    for (unsigned rank = 0; rank < 3; rank++) {
        char name[32];
        snprintf(name, sizeof name, "place.%u", rank);
        char *path = harness_path_in(directory, name);
        started = started && harness_wait_for_lines(path, "rank ", 1, pid, 60);
        place[rank] = harness_read_output(path);
        free(path);
    }
    kill(pid, SIGTERM);
    int status = harness_wait(pid, 60);
    char *log = harness_read_output(err);
    cr_assert(started, "a replica never started: %s", log);
    cr_expect_eq(status, 143, "%s: %s", harness_describe_status(status), log);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char expected[3][512];
    snprintf(expected[0], sizeof expected[0], "rank 0 of 3 local 0 of 1 group 0 master %s:",
             host);
    snprintf(expected[1], sizeof expected[1], "rank 1 of 3 local 0 of 2 group 1 master %s:",
             host);
    snprintf(expected[2], sizeof expected[2], "rank 2 of 3 local 1 of 2 group 1 master %s:",
             host);
    for (unsigned rank = 0; rank < 3; rank++) {
        cr_expect(strncmp(place[rank], expected[rank], strlen(expected[rank])) == 0,
                  "rank %u: %s", rank, place[rank]);
        /* 1 + 2 replicas: WORLD_SIZE / LOCAL_WORLD_SIZE is no node count */
        cr_expect(strstr(place[rank], " nodes 2 gloo eth9 in ") != NULL, "%s", place[rank]);
        char in_directory[600], here[512] = "";
        cr_assert_not_null(getcwd(here, sizeof here));
        snprintf(in_directory, sizeof in_directory, " in %s\n", here);
        cr_expect(strstr(place[rank], in_directory) != NULL, "ran in the launcher's directory: "
                  "%s", place[rank]);
        char name[32];
        snprintf(name, sizeof name, "stopped.%u", rank);
        char *stopped_path = harness_path_in(directory, name);
        char *stopped = harness_read_output(stopped_path);
        cr_expect_str_eq(stopped, "stopped\n", "rank %u took the forwarded stop", rank);
        free(stopped);
        free(stopped_path);
        free(place[rank]);
    }
    char *agent_log_path = harness_path_in(directory, "agent.log");
    char *agent_log = harness_read_output(agent_log_path);
    cr_expect_str_eq(agent_log, "far-host\nfar-host\n", "the agent started the remote two");
    free(agent_log);
    free(agent_log_path);
    free(log);
}

/* adaptdl-torch-launch alone: rank 1 crashes (status 7) while rank 0
 * ignores SIGTERM: rank 0 is killed --grace seconds later, and the
 * launcher's status is the crash's.  A stop forwarded to replicas that
 * finished anyway is 0; some stopped (143) and some finished is 143. */
Test(torch_launcher, the_launcher_kills_what_ignores_the_stop_and_reports_the_crash,
     .timeout = 60)
{
    char *launch = strdup(harness_build_path("adaptdl-torch-launch"));
    const char *directory = harness_temp_dir();
    struct run_result result;
    /* rank 1 crashes once rank 0 ignores SIGTERM */
    char script[512];
    snprintf(script, sizeof script,
             "if [ \"$RANK\" = 1 ]; then while [ ! -e %s/ready ]; do sleep 0.01; done; exit 7; fi; "
             "trap '' TERM; touch %s/ready; while :; do sleep 0.02; done",
             directory, directory);
    char *crash[] = {launch, "-n", "2", "--grace", "0.2", "--", "/bin/sh", "-c", script, NULL};
    harness_run(&result, crash, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 7, "%s: %s", harness_describe_status(result.status),
                 result.err);
    cr_expect(strstr(result.err, ") exited with status 7: stopping the others") != NULL, "%s",
              result.err);
    cr_expect(strstr(result.err, "replicas still running 0.2 s later: SIGKILL") != NULL, "%s",
              result.err);
    run_result_free(&result);

    char *mixed[] = {launch, "-n", "2", "--", "/bin/sh", "-c",
                     "[ \"$RANK\" = 1 ] && exit 143; exit 0", NULL};
    harness_run(&result, mixed, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 143, "%s", result.err);
    run_result_free(&result);

    char *bad[] = {launch, "-n", "3", "--hostfile", "/nonexistent/hosts", "--", "/bin/true",
                   NULL};
    harness_run(&result, bad, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 2, "%s", result.err);
    cr_expect(strstr(result.err, "--hostfile \"/nonexistent/hosts\" cannot be read") != NULL,
              "%s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 1, "one line: %s", result.err);
    run_result_free(&result);
    free(launch);
}

/* A launcher killed with SIGKILL leaves no replica on another host: the
 * agent dies with it, and the end of the control channel kills the remote
 * replica.  The fake agent here keeps running beside the command (as ssh
 * does), so only the control channel can end the replicas. */
Test(torch_launcher, a_killed_launcher_leaves_no_remote_replica_running, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *hostfile = harness_path_in(directory, "hosts");
    const char hosts[] = "far-host slots=2\n";
    cr_assert_eq(harness_write_file(hostfile, hosts, sizeof hosts - 1), 0);
    char *agent = harness_write_script(directory, "agent",
                                       "#!/bin/sh\nshift\n/bin/sh -c \"$*\"\n");
    char body[512];
    snprintf(body, sizeof body, "#!/bin/sh\necho \"pid $$\" > %s/pid.$RANK\n"
             "while :; do sleep 0.02; done\n", directory);
    char *job = harness_write_script(directory, "job", body);
    char *argv[] = {strdup(harness_build_path("adaptdl-torch-launch")), "-n", "2",
                    "--hostfile", hostfile, "--agent", agent, "--", job, NULL};
    pid_t launcher = harness_start(argv, (char *[]){NULL}, false, NULL, NULL);
    pid_t replicas[2] = {0, 0};
    for (unsigned rank = 0; rank < 2; rank++) {
        char name[32];
        snprintf(name, sizeof name, "pid.%u", rank);
        char *path = harness_path_in(directory, name);
        if (harness_wait_for_lines(path, "pid ", 1, launcher, 30)) {
            char *text = harness_read_output(path);
            replicas[rank] = (pid_t)strtol(text + 4, NULL, 10);
            free(text);
        }
        free(path);
    }
    kill(launcher, SIGKILL);
    harness_wait(launcher, 30);
    double give_up = harness_monotonic_seconds() + 30;
    for (unsigned rank = 0; rank < 2; rank++) {
        cr_expect_gt(replicas[rank], 0, "replica %u started", rank);
        while (replicas[rank] > 0 && harness_process_running(replicas[rank]) &&
               harness_monotonic_seconds() < give_up)
            usleep(2000);
        bool running = replicas[rank] > 0 && harness_process_running(replicas[rank]);
        if (running)
            kill(replicas[rank], SIGKILL);
        cr_expect(!running, "replica %u outlived its launcher", rank);
    }
}

/* --mpirun-arg with --launcher torch, where no mpirun runs, is one line
 * and status 2, not an argument dropped without a word (a -x meant for
 * other hosts would never reach them). */
Test(torch_launcher, an_mpirun_argument_is_refused_with_the_torch_launcher, .timeout = 60)
{
    char *wrapper = strdup(harness_build_path("adaptdl-wrap"));
    char *argv[] = {wrapper, "--launcher", "torch", "-n", "2", "--mpirun-arg", "-x",
                    "--mpirun-arg", "GLOO_SOCKET_IFNAME", "--", "/bin/true", NULL};
    struct run_result result;
    harness_run(&result, argv, (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 2, "%s: %s", harness_describe_status(result.status),
                 result.err);
    cr_expect(strstr(result.err, "--mpirun-arg is not accepted with --launcher torch") != NULL,
              "%s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 1, "one line: %s", result.err);
    run_result_free(&result);
    free(wrapper);
}
