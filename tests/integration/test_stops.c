/* test_stops.c - stop signals that find the trainer away from any agreement
 * point (adaptshim(7) "What a stop guarantees"), with tests/tools/stop_probe
 * standing for a trainer in an evaluation, a long save or the end of its
 * run:
 *   - a process with nothing to synchronize keeps each signal's ordinary
 *     behaviour (it ends by the signal, its own handler runs, an ignored
 *     signal stays ignored);
 *   - a stop that finds no agreement point ends the process
 *     ADAPTDL_STOP_SECONDS later with status 143, after the job record,
 *     unless the trainer's own handler took the signal;
 *   - a trainer that ends by itself with its work done keeps its status.
 * An exit status is always told from a death by a signal
 * (HARNESS_KILLED_BY): a shell reports both as 128 + N. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define DIM 4
#define RECORD_SIZE (8 + 4 * DIM + 4)
#define PATIENCE 60   /* seconds any expected line or end may take on a loaded machine */

struct probe {
    const char *directory;
    char *go;          /* the file whose creation lets the probe end */
    char *out, *err;
    pid_t pid;
};

/* Starts `prefix... stop_probe options... GO` under the preload. */
static void probe_start(struct probe *probe, const char *directory, char *const prefix[],
                        char *const options[], char *const environment[])
{
    probe->directory = directory;
    probe->go = harness_path_in(directory, "go");
    probe->out = harness_path_in(directory, "probe.out");
    probe->err = harness_path_in(directory, "probe.err");
    char *argv[32];
    size_t used = 0;
    for (size_t i = 0; prefix != NULL && prefix[i] != NULL; i++)
        argv[used++] = prefix[i];
    argv[used++] = strdup(harness_build_path("tools/stop_probe"));
    for (size_t i = 0; options != NULL && options[i] != NULL; i++)
        argv[used++] = options[i];
    argv[used++] = probe->go;
    argv[used] = NULL;
    probe->pid = harness_start(argv, environment, true, probe->out, probe->err);
}

/* Lets the probe end, if it still runs. */
static void probe_release(struct probe *probe)
{
    cr_assert_eq(harness_write_file(probe->go, "", 0), 0);
}

/* Lets the probe end and returns how it ended. */
static int probe_finish(struct probe *probe)
{
    probe_release(probe);
    return harness_wait(probe->pid, PATIENCE);
}

/* Lets the probe end and expects its status to be `expected_status` and its
 * stdout to hold `needle` (the message is `note` then the stdout), then
 * removes the probe's directory. */
static void probe_finish_expecting_output(struct probe *probe, int expected_status,
                                          const char *needle, const char *note)
{
    int status = probe_finish(probe);
    char *out = harness_read_output(probe->out);
    cr_expect_eq(status, expected_status, "%s", harness_describe_status(status));
    cr_expect(strstr(out, needle) != NULL, "%s%s", note, out);
    free(out);
    harness_remove_temp_dir(probe->directory);
}

/* Waits for a line in the probe's stdout or stderr; on failure the probe
 * is ended first, so that a failing test leaves nothing running. */
static void probe_expect_line(struct probe *probe, const char *path, const char *needle)
{
    if (harness_wait_for_lines(path, needle, 1, probe->pid, PATIENCE))
        return;
    int status = probe_finish(probe);
    char *text = harness_read_output(path);
    cr_assert_fail("\"%s\" never appeared (the probe ended with %s): %s", needle,
                   harness_describe_status(status), text);
}

/* Starts the probe (no options of its own) on a fresh dataset job with
 * ADAPTDL_STOP_SECONDS=600, and once it is ready sends it `signal_number`
 * and waits until the shim says it took the signal as a stop request. */
static void probe_start_and_request_stop(struct dataset_job *job, struct probe *probe,
                                         int signal_number)
{
    dataset_job_init(job, 100, DIM, 1);
    probe_start(probe, job->directory, NULL, NULL,
                (char *[]){job->data_setting, "ADAPTDL_STOP_SECONDS=600", "ADAPTDL_LOG=info",
                           NULL});
    probe_expect_line(probe, probe->out, "ready");
    kill(probe->pid, signal_number);
    probe_expect_line(probe, probe->err, "stop requested by a signal");
}

/* True while `signal_number` is pending for `pid` (the SigPnd and ShdPnd
 * masks of /proc/PID/status). */
static bool signal_pending(pid_t pid, int signal_number)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    char *text = harness_read_file(path, NULL);
    bool pending = false;
    for (const char *name = "SigPnd:"; text != NULL && name != NULL;
         name = strcmp(name, "SigPnd:") == 0 ? "ShdPnd:" : NULL) {
        const char *line = strstr(text, name);
        if (line != NULL &&
            (strtoull(line + strlen(name), NULL, 16) >> (signal_number - 1)) & 1)
            pending = true;
    }
    free(text);
    return pending;
}

static void wait_until_taken(struct probe *probe, int signal_number)
{
    double give_up = harness_monotonic_seconds() + PATIENCE;
    while (signal_pending(probe->pid, signal_number) && harness_monotonic_seconds() < give_up)
        usleep(1000);
}

/* The process of the issue: `ADAPTDL_TARGET=sleep sleep 8` under the preload
 * ignored SIGTERM and exited 143 eight seconds later.  With nothing to
 * synchronize, SIGTERM ends it at once, by the signal itself. */
Test(stops, nothing_to_synchronize_ends_by_the_signal, .timeout = 120)
{
    struct probe probe;
    probe_start(&probe, harness_temp_dir(), NULL, NULL,
                (char *[]){"ADAPTDL_TARGET=stop_probe", "ADAPTDL_LOG=info", NULL});
    probe_expect_line(&probe, probe.out, "ready");
    kill(probe.pid, SIGTERM);
    /* (the signal is delivered before the probe runs again, so before it can
     * see the file: a stop that waited would end with the probe's exit) */
    int status = probe_finish(&probe);
    char *out = harness_read_output(probe.out);
    cr_expect_eq(status, HARNESS_KILLED_BY(SIGTERM), "%s; stdout: %s",
                 harness_describe_status(status), out);
    cr_expect(strstr(out, "finished") == NULL, "%s", out);
    free(out);
    harness_remove_temp_dir(probe.directory);
}

/* Its own handler runs and it goes on, as without the library, and its
 * exit status stays its own (it was 143 before). */
Test(stops, nothing_to_synchronize_runs_the_trainers_handler_only, .timeout = 120)
{
    struct probe probe;
    probe_start(&probe, harness_temp_dir(), NULL, (char *[]){"--handler", NULL},
                (char *[]){"ADAPTDL_TARGET=stop_probe", NULL});
    probe_expect_line(&probe, probe.out, "ready");
    kill(probe.pid, SIGTERM);
    probe_expect_line(&probe, probe.out, "caught SIGTERM");
    probe_finish_expecting_output(&probe, 0, "finished", "");
}

/* SIGINT ignored by inheritance (a background job of a script) stays
 * ignored: the probe lives through it, and ends by the SIGTERM after it. */
Test(stops, nothing_to_synchronize_keeps_an_inherited_ignore, .timeout = 120)
{
    struct probe probe;
    probe_start(&probe, harness_temp_dir(), (char *[]){"/usr/bin/env", "--ignore-signal=INT", NULL},
                NULL, (char *[]){"ADAPTDL_TARGET=stop_probe", NULL});
    probe_expect_line(&probe, probe.out, "ready");
    kill(probe.pid, SIGINT);
    wait_until_taken(&probe, SIGINT);
    kill(probe.pid, SIGTERM);
    int status = probe_finish(&probe);
    cr_expect_eq(status, HARNESS_KILLED_BY(SIGTERM), "%s", harness_describe_status(status));
    harness_remove_temp_dir(probe.directory);
}

/* A trainer with a data view that stops reading (an evaluation): the stop
 * waits ADAPTDL_STOP_SECONDS for its next batch read, then ends the process
 * with 143 after writing the job record, as the signal would have ended
 * it. */
Test(stops, a_stop_without_an_agreement_point_ends_after_stop_seconds, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, 100, DIM, 1);
    char reads[700];
    snprintf(reads, sizeof reads, "%s,%d,16,4", job.data, RECORD_SIZE);
    struct probe probe;
    probe_start(&probe, job.directory, NULL, (char *[]){"--read", reads, NULL},
                (char *[]){job.data_setting, job.state_setting, "ADAPTDL_STOP_SECONDS=1",
                           "ADAPTDL_LOG=info", NULL});
    probe_expect_line(&probe, probe.out, "ready");
    double signalled = harness_monotonic_seconds();
    kill(probe.pid, SIGTERM);
    int status = harness_wait(probe.pid, PATIENCE);
    double waited = harness_monotonic_seconds() - signalled;
    probe_release(&probe);
    char *err = harness_read_output(probe.err);
    char *out = harness_read_output(probe.out);
    cr_assert_eq(status, 143, "%s: %s", harness_describe_status(status), err);
    cr_expect_geq(waited, 0.95, "it waited for an agreement point first (%.3f s)", waited);
    cr_expect(strstr(err, "no agreement point within ADAPTDL_STOP_SECONDS") != NULL, "%s", err);
    cr_expect(strstr(out, "finished") == NULL, "%s", out);
    char *record = harness_path_in(job.directory, "state/job.msgpack");
    struct stat information;
    cr_expect(stat(record, &information) == 0 && information.st_size > 0,
              "the job record is written before the exit: %s", err);
    free(record);
    free(out);
    free(err);
    harness_remove_temp_dir(job.directory);
}

/* The trainer's own handler ran at the signal: past the deadline the shim
 * adds nothing (without the library the trainer would go on too); the
 * trainer ends when it decides, with 143 since it was told to stop. */
Test(stops, the_deadline_leaves_a_trainers_own_handler_in_charge, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, 100, DIM, 1);
    char reads[700];
    snprintf(reads, sizeof reads, "%s,%d,16,4", job.data, RECORD_SIZE);
    struct probe probe;
    probe_start(&probe, job.directory, NULL, (char *[]){"--handler", "--read", reads, NULL},
                (char *[]){job.data_setting, "ADAPTDL_STOP_SECONDS=0.2", "ADAPTDL_LOG=info",
                           NULL});
    probe_expect_line(&probe, probe.out, "ready");
    kill(probe.pid, SIGTERM);
    probe_expect_line(&probe, probe.out, "caught SIGTERM");
    probe_expect_line(&probe, probe.err, "the trainer's own handling of the signal stands");
    probe_finish_expecting_output(&probe, 143, "finished", "it ran on to its own end: ");
}

/* The fastText case: the signal came after the last batch read, the
 * trainer (no handler of its own) ended by itself with its work done.  Its
 * status is 0, not 143: a launcher must not relaunch a finished job. */
Test(stops, a_trainer_that_ends_by_itself_keeps_its_status, .timeout = 120)
{
    struct dataset_job job;
    struct probe probe;
    probe_start_and_request_stop(&job, &probe, SIGTERM);
    probe_finish_expecting_output(&probe, 0, "finished", "");
}

/* A trainer with a handler whose main has returned (it is in its exit
 * handlers) when the signal comes: its work is done, its status stands. */
Test(stops, a_signal_after_main_returned_keeps_the_status, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, 100, DIM, 1);
    struct probe probe;
    probe_start(&probe, job.directory, NULL, (char *[]){"--handler", "--exit-waits", NULL},
                (char *[]){job.data_setting, "ADAPTDL_STOP_SECONDS=600", NULL});
    probe_expect_line(&probe, probe.out, "exiting");
    kill(probe.pid, SIGTERM);
    probe_expect_line(&probe, probe.out, "caught SIGTERM");
    probe_finish_expecting_output(&probe, 0, "exit finished", "");
}

/* Two SIGINTs (the second once the first was taken): the second exits at
 * once with 130, an exit status, not a death by SIGINT. */
Test(stops, a_second_sigint_exits_at_once_with_130, .timeout = 120)
{
    struct dataset_job job;
    struct probe probe;
    probe_start_and_request_stop(&job, &probe, SIGINT);
    kill(probe.pid, SIGINT);
    int status = harness_wait(probe.pid, PATIENCE);
    probe_release(&probe);
    char *err = harness_read_output(probe.err);
    cr_expect_eq(status, 130, "%s: %s", harness_describe_status(status), err);
    cr_expect(strstr(err, "second SIGINT: exiting at once with status 130") != NULL, "%s", err);
    free(err);
    harness_remove_temp_dir(job.directory);
}

/* The descriptors of the thread of `pid` named `name` (its comm), as
 * "FD=TARGET;" in `out`; false when no such thread shows within PATIENCE. */
static bool thread_descriptors(pid_t pid, const char *name, char *out, size_t out_size)
{
    char tasks[64];
    snprintf(tasks, sizeof tasks, "/proc/%d/task", (int)pid);
    double give_up = harness_monotonic_seconds() + PATIENCE;
    while (harness_monotonic_seconds() < give_up) {
        DIR *directory = opendir(tasks);
        if (directory == NULL)
            return false;
        struct dirent *entry;
        char found[600] = "";
        while ((entry = readdir(directory)) != NULL) {
            if (entry->d_name[0] == '.')
                continue;
            char path[600];
            snprintf(path, sizeof path, "%s/%s/comm", tasks, entry->d_name);
            char *comm = harness_read_file(path, NULL);
            if (comm != NULL && strncmp(comm, name, strlen(name)) == 0 &&
                comm[strlen(name)] == '\n')
                snprintf(found, sizeof found, "%s/%s/fd", tasks, entry->d_name);
            free(comm);
        }
        closedir(directory);
        if (found[0] != '\0') {
            out[0] = '\0';
            DIR *descriptors = opendir(found);
            if (descriptors == NULL)
                return false;
            while ((entry = readdir(descriptors)) != NULL) {
                if (entry->d_name[0] == '.')
                    continue;
                char path[1000], target[300] = "";
                snprintf(path, sizeof path, "%s/%s", found, entry->d_name);
                ssize_t length = readlink(path, target, sizeof target - 1);
                target[length > 0 ? length : 0] = '\0';
                size_t used = strlen(out);
                snprintf(out + used, out_size - used, "%s=%s;", entry->d_name, target);
            }
            closedir(descriptors);
            return true;
        }
        usleep(10000);
    }
    return false;
}

/* The thread that ends a stop at its deadline keeps a descriptor table of
 * its own with the log and metrics files only: sharing the trainer's would
 * make every descriptor call of the trainer dearer (adaptshim(7) "Benchmarks"), and a copy
 * of all of it would keep the trainer's files open after it closed them.
 * It starts once the library serves the process: here, at the first read
 * of the data file. */
Test(stops, the_deadline_thread_holds_only_the_log_and_metrics_files, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, 100, DIM, 1);
    char metrics[700], reads[700];
    snprintf(metrics, sizeof metrics, "ADAPTDL_METRICS_FILE=%s/metrics.%%r", job.directory);
    snprintf(reads, sizeof reads, "%s,%d,16,2", job.data, RECORD_SIZE);
    struct probe probe;
    probe_start(&probe, job.directory, NULL, (char *[]){"--read", reads, NULL},
                (char *[]){job.data_setting, metrics, NULL});
    probe_expect_line(&probe, probe.out, "ready");
    char descriptors[2000];
    bool found = thread_descriptors(probe.pid, "adaptshim-stop", descriptors,
                                    sizeof descriptors);
    int status = probe_finish(&probe);
    cr_assert(found, "the probe has a deadline thread");
    cr_expect_eq(status, 0, "%s", harness_describe_status(status));
    cr_expect(strncmp(descriptors, "2=", 2) == 0 || strstr(descriptors, ";2=") != NULL,
              "the log (stderr): %s", descriptors);
    cr_expect(strstr(descriptors, "/metrics.0;") != NULL, "the metrics file: %s", descriptors);
    size_t count = 0;
    for (const char *c = descriptors; *c != '\0'; c++)
        count += *c == ';';
    cr_expect_eq(count, 2, "nothing else: %s", descriptors);
    harness_remove_temp_dir(job.directory);
}
