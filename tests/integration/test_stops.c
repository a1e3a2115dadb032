/* test_stops.c - stop signals that find the trainer away from any agreement
 * point (SPEC §6), with tests/tools/stop_probe standing for a trainer in an
 * evaluation, a long save or the end of its run.  An exit status is always told from a death by a signal
 * (HARNESS_KILLED_BY): a shell reports both as 128 + N. */
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

/* Two SIGINTs (the second once the first was taken): the second exits at
 * once with 130, an exit status, not a death by SIGINT. */
Test(stops, a_second_sigint_exits_at_once_with_130, .timeout = 120)
{
    struct dataset_job job;
    dataset_job_init(&job, 100, DIM, 1);
    struct probe probe;
    probe_start(&probe, job.directory, NULL, NULL,
                (char *[]){job.data_setting, "ADAPTDL_STOP_SECONDS=600", "ADAPTDL_LOG=info",
                           NULL});
    probe_expect_line(&probe, probe.out, "ready");
    kill(probe.pid, SIGINT);
    probe_expect_line(&probe, probe.err, "stop requested by a signal");
    kill(probe.pid, SIGINT);
    int status = harness_wait(probe.pid, PATIENCE);
    probe_release(&probe);
    char *err = harness_read_output(probe.err);
    cr_expect_eq(status, 130, "%s: %s", harness_describe_status(status), err);
    cr_expect(strstr(err, "second SIGINT: exiting at once with status 130") != NULL, "%s", err);
    free(err);
    harness_remove_temp_dir(job.directory);
}
