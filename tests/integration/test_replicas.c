/* test_replicas.c - the replica count adaptdl-wrap launches with (adaptdl-wrap(1)
 * "The replica count"): with -n MIN:MAX it starts at MIN and relaunches with the
 * count the hints file predicts the best goodput for, when that beats the
 * current count by more than the speedup threshold, within the hostfile's
 * slots; the shim asks for that restart itself when a count pays; a resize
 * request (--resize-file, polled or read at SIGUSR2) stops the job and
 * relaunches it with the requested count, clamped with a warning, and the
 * data stream continues exactly; --dry-run shows the chosen count; bad
 * options are one line and status 2.
 *
 * The wrapper's choice is driven deterministically by hand-written hints
 * files and jobs that ask for a restart on their first run; the one test
 * that lets the shim write the hints relies on AdaptDL's priors (one
 * replica profiled: a second one is predicted to pay), not on timing. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define DIM 4

static char *const mpi_root[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

static char *wrapper_path(void)
{
    return strdup(harness_build_path("adaptdl-wrap"));
}

/* Polls until `path` exists (true), or `pid` has ended or 60 s passed. */
static bool wait_for_file(const char *path, pid_t pid)
{
    for (int attempt = 0; attempt < 6000; attempt++) {
        if (access(path, F_OK) == 0)
            return true;
        siginfo_t information = {0};
        if (waitid(P_PID, (id_t)pid, &information, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            information.si_pid == pid)
            return access(path, F_OK) == 0;
        usleep(10000);
    }
    return false;
}

static void write_text(const char *path, const char *text)
{
    cr_assert_eq(harness_write_file(path, text, strlen(text)), 0);
}

/* A job that records, per rank and launch, its restart number, its MPI
 * size and the range the wrapper gave it, and asks for a restart on its
 * first launch only. */
static char *restarting_job(const char *directory, const char *seen)
{
    char body[1024];
    snprintf(body, sizeof body,
             "#!/bin/sh\n"
             "echo \"restart $ADAPTDL_NUM_RESTARTS size ${OMPI_COMM_WORLD_SIZE:-none} "
             "range ${ADAPTDL_REPLICAS_RANGE:-unset}\" >> %s\n"
             "[ \"$ADAPTDL_NUM_RESTARTS\" = 0 ] && exit 143\n"
             "exit 0\n",
             seen);
    return harness_write_script(directory, "job", body);
}

struct growth {
    int status;
    char *seen;   /* what the job's launches recorded */
    char *err;    /* the wrapper's stderr */
};

/* Runs the restarting job under `adaptdl-wrap OPTIONS -- job` with the
 * hints file holding `hints` (NULL: no file) and `extra` settings. */
static struct growth run_growth(const char *hints, char *const options[], char *const extra[])
{
    const char *directory = harness_temp_dir();
    char *seen = harness_path_in(directory, "seen");
    char *hints_path = harness_path_in(directory, "hints.json");
    if (hints != NULL)
        write_text(hints_path, hints);
    char *job = restarting_job(directory, seen);
    char *argv[24];
    size_t used = 0;
    argv[used++] = wrapper_path();
    used = harness_append_list(argv, used, sizeof argv / sizeof argv[0], options);
    argv[used++] = "--mpirun-arg";
    argv[used++] = "--oversubscribe";
    argv[used++] = "--";
    argv[used++] = job;
    argv[used] = NULL;
    char hints_setting[700];
    snprintf(hints_setting, sizeof hints_setting, "ADAPTDL_HINTS_FILE=%s", hints_path);
    char *environment[16] = {mpi_root[0], mpi_root[1], hints_setting};
    size_t count = 3;
    for (size_t i = 0; extra != NULL && extra[i] != NULL && count < 15; i++)
        environment[count++] = extra[i];
    environment[count] = NULL;
    struct run_result result;
    harness_run(&result, argv, environment, false, 120);
    struct growth growth = {.status = result.status, .err = strdup(result.err)};
    growth.seen = harness_read_output(seen);
    run_result_free(&result);
    return growth;
}

static void growth_free(struct growth *growth)
{
    free(growth->seen);
    free(growth->err);
}

Test(replicas, a_job_grows_when_the_hints_predict_it_pays, .timeout = 120)
{
    struct growth growth = run_growth("{\"type\": \"hints\", \"max_profiled_replicas\": 1, "
                                      "\"goodput_by_replicas\": {\"1\": 100.0, \"2\": 180.0}}\n",
                                      (char *[]){"-n", "1:2", NULL}, NULL);
    cr_expect_eq(growth.status, 0, "%s", growth.err);
    cr_expect(strstr(growth.seen, "restart 0 size none range 1:2\n") != NULL,
              "the first launch: MIN, directly, told the range: %s", growth.seen);
    cr_expect_eq(harness_count_occurrences(growth.seen, "restart 1 size 2 range 1:2\n"), 2,
                 "the relaunch: two ranks under mpirun: %s", growth.seen);
    cr_expect(strstr(growth.err, "replica count from the hints: 2 replicas: predicted goodput "
                                 "180 against 100 with 1 (speedup 1.800 > 1.050)") != NULL,
              "%s", growth.err);
    cr_expect(strstr(growth.err, "relaunching with 2 replica(s) instead of 1") != NULL, "%s",
              growth.err);
    growth_free(&growth);
}

/* A gain at or below ADAPTDL_SPEEDUP (1.05 by default) does not move the
 * job; a lower threshold does. */
Test(replicas, a_gain_below_the_threshold_keeps_the_count, .timeout = 120)
{
    const char *hints = "{\"goodput_by_replicas\": {\"1\": 100, \"2\": 104}}";
    struct growth kept = run_growth(hints, (char *[]){"-n", "1:2", NULL}, NULL);
    cr_expect_eq(kept.status, 0, "%s", kept.err);
    cr_expect(strstr(kept.seen, "restart 1 size none range 1:2\n") != NULL, "%s", kept.seen);
    cr_expect(strstr(kept.err, "1 replica kept: 2 would give goodput 104 against 100 "
                               "(speedup 1.040, not above 1.050)") != NULL,
              "%s", kept.err);
    growth_free(&kept);

    struct growth moved = run_growth(hints, (char *[]){"-n", "1:2", NULL},
                                     (char *[]){"ADAPTDL_SPEEDUP=1.02", NULL});
    cr_expect_eq(moved.status, 0, "%s", moved.err);
    cr_expect(strstr(moved.seen, "restart 1 size 2 range 1:2\n") != NULL, "%s", moved.seen);
    growth_free(&moved);
}

/* No hints yet, or a malformed file (one line saying so): the count stays. */
Test(replicas, without_usable_hints_the_count_stays, .timeout = 120)
{
    struct growth none = run_growth(NULL, (char *[]){"-n", "1:3", NULL}, NULL);
    cr_expect_eq(none.status, 0, "%s", none.err);
    cr_expect(strstr(none.seen, "restart 1 size none range 1:3\n") != NULL, "%s", none.seen);
    cr_expect(strstr(none.err, "1 replica kept: no hints yet") != NULL, "%s", none.err);
    growth_free(&none);

    struct growth bad = run_growth("{\"goodput_by_replicas\": {\"1\": 100, \"2\": fast}}",
                                   (char *[]){"-n", "1:3", NULL}, NULL);
    cr_expect_eq(bad.status, 0, "%s", bad.err);
    cr_expect(strstr(bad.seen, "restart 1 size none range 1:3\n") != NULL, "%s", bad.seen);
    cr_expect_eq(harness_count_occurrences(bad.err, "is malformed: byte 41: expected a number "
                                                    "or null as the goodput of 2 replicas; the "
                                                    "replica count is kept\n"),
                 1, "%s", bad.err);
    growth_free(&bad);
}

/* The hostfile's slots cap MAX, for the choice and for the range the ranks
 * are told; a MIN above them is refused. */
Test(replicas, the_hostfile_slots_cap_the_count, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *hostfile = harness_path_in(directory, "hosts");
    write_text(hostfile, "# one slot\nlocalhost slots=1\n");
    const char *hints = "{\"goodput_by_replicas\": {\"1\": 100, \"2\": 180, \"3\": 250}}";
    struct growth capped = run_growth(hints, (char *[]){"-n", "1:3", "--hostfile", hostfile,
                                                        NULL},
                                      NULL);
    cr_expect_eq(capped.status, 0, "%s", capped.err);
    cr_expect(strstr(capped.seen, "restart 0 size 1 range 1:1\n") != NULL, "%s", capped.seen);
    cr_expect(strstr(capped.seen, "restart 1 size 1 range 1:1\n") != NULL, "%s", capped.seen);
    growth_free(&capped);

    write_text(hostfile, "localhost slots=2   # two slots\n");
    struct growth two = run_growth(hints, (char *[]){"-n", "1:3", "--hostfile", hostfile, NULL},
                                   NULL);
    cr_expect_eq(two.status, 0, "%s", two.err);
    cr_expect_eq(harness_count_occurrences(two.seen, "restart 1 size 2 range 1:2\n"), 2,
                 "two slots: 3 is out of reach, 2 is the best within: %s", two.seen);
    growth_free(&two);

    struct run_result result;
    char *job = restarting_job(directory, "/dev/null");
    harness_run(&result, (char *[]){wrapper_path(), "-n", "3:4", "--hostfile", hostfile, "--",
                                    job, NULL},
                (char *[]){NULL}, false, 30);
    cr_expect_eq(result.status, 2, "%s", result.err);
    cr_expect(strstr(result.err, "-n 3:4 needs 3 replicas but --hostfile") != NULL, "%s",
              result.err);
    cr_expect(strstr(result.err, "has 2 slots") != NULL, "%s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 1, "one line: %s", result.err);
    run_result_free(&result);
}

/* --dry-run shows the count the first launch takes (MIN, or a resize
 * request, clamped), the range the ranks get and what the hints choose. */
Test(replicas, dry_run_shows_the_chosen_count)
{
    const char *directory = harness_temp_dir();
    char *hints = harness_path_in(directory, "hints.json");
    write_text(hints, "{\"goodput_by_replicas\": {\"2\": 100, \"3\": 120, \"4\": 300}}");
    char hints_setting[700];
    snprintf(hints_setting, sizeof hints_setting, "ADAPTDL_HINTS_FILE=%s", hints);
    char *marker = harness_path_in(directory, "ran");
    char body[512];
    snprintf(body, sizeof body, "#!/bin/sh\ntouch %s\n", marker);
    char *job = harness_write_script(directory, "job", body);
    struct run_result result;
    harness_run(&result, (char *[]){wrapper_path(), "-n", "2:4", "--dry-run", "--", job, NULL},
                (char *[]){hints_setting, NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "(restart 0, 2 replica(s))") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "ADAPTDL_REPLICAS_RANGE=2:4") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "mpirun -np 2 ") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "-x ADAPTDL_REPLICAS_RANGE") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "(now: 4 replica(s))") != NULL, "%s", result.out);
    run_result_free(&result);

    /* a resize request fixes the count (clamped into 2..4): no range */
    char *resize = harness_path_in(directory, "resize");
    write_text(resize, "9\n");
    harness_run(&result, (char *[]){wrapper_path(), "-n", "2:4", "--resize-file", resize,
                                    "--dry-run", "--", job, NULL},
                (char *[]){hints_setting, NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "mpirun -np 4 ") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "ADAPTDL_REPLICAS_RANGE") == NULL, "%s", result.out);
    cr_expect(strstr(result.err, "the resize request 9 is above the most replicas allowed (4, "
                                 "-n 2:4): 4 replicas") != NULL,
              "%s", result.err);
    run_result_free(&result);

    /* a malformed request is ignored, with one line */
    write_text(resize, "lots\n");
    harness_run(&result, (char *[]){wrapper_path(), "-n", "2:4", "--resize-file", resize,
                                    "--dry-run", "--", job, NULL},
                (char *[]){hints_setting, NULL}, false, 30);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "mpirun -np 2 ") != NULL, "%s", result.out);
    cr_expect(strstr(result.err, "holds \"lots\": a replica count >= 1 expected; the request "
                                 "is ignored") != NULL,
              "%s", result.err);
    run_result_free(&result);
    cr_expect_eq(access(marker, F_OK), -1, "nothing ran");
}

Test(replicas, bad_replica_options_are_one_line_and_status_2)
{
    const char *directory = harness_temp_dir();
    char *trainer = strdup(harness_build_path("trainers/sgd_read"));
    char *const cases[][8] = {
        {wrapper_path(), "-n", "2:1", "--", trainer, NULL},
        {wrapper_path(), "-n", "0:2", "--", trainer, NULL},
        {wrapper_path(), "-n", "1:", "--", trainer, NULL},
        {wrapper_path(), "-n", ":2", "--", trainer, NULL},
        {wrapper_path(), "-n", "1:2:3", "--", trainer, NULL},
        {wrapper_path(), "--replicas=a:b", "--", trainer, NULL},
        {wrapper_path(), "--resize-poll", "soon", "--", trainer, NULL},
        {wrapper_path(), "--resize-file", (char *)directory, "--", trainer, NULL},
        {wrapper_path(), "--resize-file", NULL},
        {wrapper_path(), "--", trainer, NULL},
    };
    const char *expected[] = {"replica range \"2:1\"", "replica range \"0:2\"",
                              "replica range \"1:\"", "replica range \":2\"",
                              "replica range \"1:2:3\"", "replica range \"a:b\"",
                              "--resize-poll \"soon\"", "is a directory",
                              "--resize-file needs a value", "ADAPTDL_NUM_REPLICAS \"1:2\""};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        /* the last case: a range is an option, not a replica count */
        harness_expect_refused_command(cases[i],
                                       i + 1 == sizeof cases / sizeof cases[0]
                                           ? (char *[]){"ADAPTDL_NUM_REPLICAS=1:2", NULL}
                                           : (char *[]){NULL},
                                       i, expected[i]);
    free(trainer);
}

/* A stop that ends the script's sleep too, so that nothing is left behind. */
static char *stoppable_job(const char *directory, const char *seen)
{
    char body[1024];
    snprintf(body, sizeof body,
             "#!/bin/sh\n"
             "echo \"restart $ADAPTDL_NUM_RESTARTS size ${OMPI_COMM_WORLD_SIZE:-none} "
             "range ${ADAPTDL_REPLICAS_RANGE:-unset}\" >> %s\n"
             "[ \"$ADAPTDL_NUM_RESTARTS\" = 0 ] || exit 0\n"
             "trap 'kill $sleeper; exit 143' TERM USR1\n"
             "sleep 1000 &\n"
             "sleeper=$!\n"
             "touch %s/started\n"
             "wait $sleeper\n",
             seen, directory);
    return harness_write_script(directory, "job", body);
}

/* SIGUSR2 reads the resize file at once (here the only way: no polling);
 * the request, above MAX, is clamped with a warning, the job is stopped
 * and relaunched with the clamped count, and a fixed count gives the ranks
 * no range to move in. */
Test(replicas, sigusr2_reads_the_resize_file_and_the_request_is_clamped, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *seen = harness_path_in(directory, "seen");
    char *started = harness_path_in(directory, "started");
    char *resize = harness_path_in(directory, "resize");
    char *err = harness_path_in(directory, "err");
    char *job = stoppable_job(directory, seen);
    char *argv[] = {wrapper_path(), "-n", "1:2", "--resize-file", resize, "--resize-poll", "0",
                    "--mpirun-arg", "--oversubscribe", "--", job, NULL};
    pid_t pid = harness_start(argv, (char *[]){mpi_root[0], mpi_root[1], NULL}, false, NULL,
                              err);
    if (!wait_for_file(started, pid)) {
        kill(pid, SIGTERM);
        harness_wait(pid, 60);
        cr_assert_fail("the job never started");
    }
    write_text(resize, "5\n");
    kill(pid, SIGUSR2);
    int status = harness_wait(pid, 90);
    char *log = harness_read_output(err);
    cr_expect_eq(status, 0, "%s: %s", harness_describe_status(status), log);
    char *text = harness_read_output(seen);
    cr_expect(strstr(text, "restart 0 size none range 1:2\n") != NULL, "%s", text);
    cr_expect_eq(harness_count_occurrences(text, "restart 1 size 2 range unset\n"), 2,
                 "relaunched with 2, the count the request fixes: %s", text);
    cr_expect(strstr(log, "resize request: 1 -> 2 replica(s): stopping every rank "
                          "gracefully") != NULL,
              "%s", log);
    cr_expect_eq(harness_count_occurrences(log, "the resize request 5 is above the most "
                                                "replicas allowed (2, -n 1:2): 2 replicas"),
                 1, "said once: %s", log);
    cr_expect(strstr(log, "stopped for the resize request: restart 1") != NULL, "%s", log);
    free(text);
    free(log);
}

/* Without --resize-file, SIGUSR2 is a warning; the job runs on. */
Test(replicas, sigusr2_without_a_resize_file_changes_nothing, .timeout = 60)
{
    const char *directory = harness_temp_dir();
    char *ready = harness_path_in(directory, "ready");
    char *go = harness_path_in(directory, "go");
    char *err = harness_path_in(directory, "err");
    char body[1024];
    snprintf(body, sizeof body,
             "#!/bin/sh\ntouch %s\nwhile [ ! -e %s ]; do sleep 0.02; done\nexit 0\n", ready, go);
    char *job = harness_write_script(directory, "job", body);
    pid_t pid = harness_start((char *[]){wrapper_path(), "--", job, NULL}, (char *[]){NULL},
                              false, NULL, err);
    bool started = wait_for_file(ready, pid);
    kill(pid, SIGUSR2);
    bool warned = harness_wait_for_lines(err, "no --resize-file was given: ignored", 1, pid, 60);
    write_text(go, "");
    int status = harness_wait(pid, 30);
    char *log = harness_read_output(err);
    cr_expect(started, "the job started");
    cr_expect(warned, "%s", log);
    cr_expect_eq(status, 0, "%s: %s", harness_describe_status(status), log);
    free(log);
}

/* Every record of every epoch: each launch's records up to the step the
 * next one resumed at (the first launch's ids files are ids.0.R, the
 * second's ids.1.R). */
static void expect_every_record_once(const char *directory, const char *output,
                                     uint64_t records, unsigned epochs,
                                     const unsigned ranks[2])
{
    uint64_t cut = harness_resumed_step(output);
    cr_expect_gt(cut, 0, "the second launch resumed from a checkpoint: %s", output);
    unsigned *counts = calloc(epochs * records, sizeof *counts);
    for (unsigned launch = 0; launch < 2; launch++) {
        for (unsigned rank = 0; rank < ranks[launch]; rank++) {
            char name[64];
            snprintf(name, sizeof name, "ids.%u.%u", launch, rank);
            char *path = harness_path_in(directory, name);
            struct id_log log;
            cr_assert_eq(harness_read_id_log(path, &log), 0, "%s", path);
            id_log_count_committed(&log, launch == 0 ? cut : UINT64_MAX, counts, records,
                                   epochs);
            id_log_free(&log);
            free(path);
        }
    }
    unsigned padding_allowance = (ranks[0] - 1) + (ranks[1] - 1);
    for (unsigned epoch = 0; epoch < epochs; epoch++) {
        unsigned total = 0;
        for (uint64_t id = 0; id < records; id++) {
            cr_expect_geq(counts[epoch * records + id], 1, "epoch %u record %llu missing", epoch,
                          (unsigned long long)id);
            total += counts[epoch * records + id];
        }
        cr_expect_leq(total, records + padding_allowance, "epoch %u: %u delivered", epoch,
                      total);
    }
    free(counts);
}

/* A scheduler writes 1 into the resize file of a job running with 2: the
 * wrapper (polling) stops it gracefully, relaunches it with one replica,
 * and the job runs to its end with every record of every epoch seen. */
Test(replicas, a_resize_request_relaunches_the_job_with_the_new_count, .timeout = 240)
{
    enum { RECORDS = 2000, EPOCHS = 3 };
    struct dataset_job job;
    dataset_job_init(&job, RECORDS, DIM, 5);
    char *resize = harness_path_in(job.directory, "resize");
    char *ids0 = harness_path_in(job.directory, "ids.0.0");
    char *out = harness_path_in(job.directory, "out");
    char *err = harness_path_in(job.directory, "err");
    /* each launch logs its records into files of its own */
    char body[2048];
    snprintf(body, sizeof body,
             "#!/bin/sh\nexec %s --data %s --epochs %d --batch-size 16 --lr 0.01 "
             "--checkpoint %s/ck --resume --sleep-us 15000 --ids-log %s/ids.$ADAPTDL_NUM_RESTARTS.%%r\n",
             harness_build_path("trainers/sgd_mpi"), job.data, EPOCHS, job.directory,
             job.directory);
    char *script = harness_write_script(job.directory, "train", body);
    char *argv[] = {wrapper_path(), "-n", "2", "--resize-file", resize, "--mpirun-arg",
                    "--oversubscribe", "--", script, NULL};
    char *environment[] = {mpi_root[0], mpi_root[1], job.data_setting, job.state_setting,
                           job.save_setting, "ADAPTDL_TARGET=sgd_mpi", "ADAPTDL_LOG=info",
                           NULL};
    pid_t pid = harness_start(argv, environment, false, out, err);
    if (!harness_wait_for_lines(ids0, "step 10", 1, pid, 120)) {
        kill(pid, SIGTERM);
        harness_wait(pid, 60);
        cr_assert_fail("the job never reached step 10");
    }
    write_text(resize, "1\n");
    int status = harness_wait(pid, 200);
    char *log = harness_read_output(err);
    cr_assert_eq(status, 0, "%s: %s", harness_describe_status(status), log);
    cr_expect(strstr(log, "resize request: 2 -> 1 replica(s): stopping every rank "
                          "gracefully") != NULL,
              "%s", log);
    cr_expect(strstr(log, "stopped for the resize request: restart 1") != NULL, "%s", log);
    cr_expect(strstr(log, "relaunching with 1 replica(s) instead of 2") != NULL, "%s", log);
    char *ids_second_rank = harness_path_in(job.directory, "ids.1.1");
    cr_expect_eq(access(ids_second_rank, F_OK), -1, "one rank in the second launch");
    char *output = harness_read_output(out);
    expect_every_record_once(job.directory, output, RECORDS, EPOCHS, (const unsigned[]){2, 1});
    free(output);
    free(log);
}

/* The whole loop with the shim writing the hints: a job under batch-size
 * control starts at 1 replica with -n 1:2; from one replica profiled the
 * model predicts (AdaptDL's priors) that a second one pays, so rank 0 asks
 * for a restart and the wrapper relaunches it with 2, reading the hints
 * file it put in the shim's state directory.  (What happens next depends
 * on the measured 2-replica steps: the job may move back; it ends.)
 * ADAPTDL_SPEEDUP=1.2: the priors predict 4/3 from a second replica, while
 * measuring a doubled batch (rule 4) asks a bound above 1.2^2, which a
 * noise scale below the initial batch of 8 never reaches; with the default
 * 1.05 a noise scale estimated above about 3 from the first steps (a
 * loaded machine decides after fewer of them) made the batch ask first. */
Test(replicas, a_job_grows_from_one_replica_when_the_shim_predicts_it_pays, .timeout = 300)
{
    struct harness_wrapped_job wrapped;
    harness_wrapped_job_init(&wrapped, 2000, DIM);
    char metrics[700];
    snprintf(metrics, sizeof metrics, "ADAPTDL_METRICS_FILE=%s/metrics.%%r",
             wrapped.job.directory);
    char *environment[] = {metrics, "ADAPTDL_BSZ_ARG=argv:--batch-size", "ADAPTDL_BATCH_SIZE=8",
                           "ADAPTDL_MAX_BATCH_SIZE=256", "ADAPTDL_DECIDE_SECONDS=0.3",
                           "ADAPTDL_SPEEDUP=1.2", "ADAPTDL_LOG=info", NULL};
    char *log = harness_run_wrapped_sgd_mpi(&wrapped, "1:2", "4", "2000", environment);
    const char *first = strstr(log, "batch size: --batch-size 8 on each of 1 replicas");
    const char *grown = strstr(log, "relaunching with 2 replica(s) instead of 1");
    cr_expect(first != NULL && grown != NULL && first < grown,
              "it started with one replica, then grew: %s", log);
    /* the shim asked, at its first decision (a larger batch does not pay
     * yet: the noise scale starts below the initial batch) */
    const char *asked = strstr(log, "stopping: restart for another replica count");
    cr_expect(asked != NULL && asked < grown, "rank 0 asked for the restart: %s", log);
    cr_expect(strstr(log, "replica count from the hints: 2 replicas: predicted goodput") != NULL,
              "%s", log);
    cr_expect(strstr(log, "on each of 2 replicas (global ") != NULL, "a run with 2: %s", log);
    char *hints = harness_path_in(wrapped.job.directory, "state/hints.json");
    cr_expect_eq(access(hints, F_OK), 0, "the hints file in the state directory");
    char *metrics0 = harness_path_in(wrapped.job.directory, "metrics.0");
    char *events = harness_read_output(metrics0);
    const char *decision = strstr(events, "\"type\": \"replica_decision\", ");
    cr_expect(decision != NULL && strstr(decision, "\"restart\": true, \"replicas\": 1, "
                                                   "\"min_replicas\": 1, \"max_replicas\": 2, "
                                                   "\"chosen_replicas\": 2") != NULL,
              "%s", events);
    free(events);
    free(log);
}
