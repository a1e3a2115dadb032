/* test_hosts.c - jobs across several hosts (adaptdl-wrap(1) "Several hosts (hostfile)"),
 * made on this machine from network namespaces (harness_hosts.h): each
 * host has its own address and host name, the state directory is on the
 * file system they share, and adaptdl-wrap --hostfile launches the ranks
 * through Open MPI's rsh agent.
 *
 *   - a job of 2 hosts x 2 slots shards one dataset into four disjoint
 *     views, and every rank is told it runs on 2 nodes
 *     (ADAPTDL_NUM_NODES), which the job record's profiles keep;
 *   - 2 ranks on that hostfile fill one host (mpirun's default mapping):
 *     1 node; the throughput model fits its inter-node terms from the
 *     profiles of the 1-host and the 2-host runs, and the 2-host run's
 *     decisions use them;
 *   - a rank killed with SIGKILL on one host stops the job, the wrapper
 *     relaunches it, and it resumes exactly: every epoch's records once;
 *   - a state directory one host does not share is named in one line at
 *     start-up, and the job ends with status 2.
 *
 * The tests need root (namespaces); elsewhere each says so in one line and
 * is skipped.  The hosts are removed when a test ends, passed or not. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "harness_hosts.h"
#include "goodput.h"
#include "state_store.h"

#define DIM 4
#define RECORDS 800
#define PAD "262144"   /* floats: a 1 MiB gradient */

static struct harness_hosts hosts;

static void hosts_down(void)
{
    harness_hosts_down(&hosts);
}

/* A job of sgd_mpi under adaptdl-wrap --hostfile.  Each rank starts through
 * the script `on-host`, which notes the rank's host name and node count in
 * DIR/host.runR.RANK (R: ADAPTDL_NUM_RESTARTS) and gives the trainer the
 * id log DIR/ids.runR.RANK, so that every run of the job has its own. */
struct hosts_job {
    struct dataset_job job;
    char *checkpoint, *on_host, *out, *err;
};

static void hosts_job_init(struct hosts_job *job)
{
    dataset_job_init(&job->job, RECORDS, DIM, 3);
    job->checkpoint = harness_path_in(job->job.directory, "ck");
    job->out = harness_path_in(job->job.directory, "out");
    job->err = harness_path_in(job->job.directory, "err");
    job->on_host = harness_write_script(
        job->job.directory, "on-host",
        "#!/bin/sh\n"
        "directory=$1\n"
        "shift\n"
        "run=run${ADAPTDL_NUM_RESTARTS:-0}\n"
        "echo \"$(hostname) ${ADAPTDL_NUM_NODES:-unset}\" > "
        "\"$directory/host.$run.$OMPI_COMM_WORLD_RANK\"\n"
        "exec \"$@\" --ids-log \"$directory/ids.$run.%r\"\n");
}

/* Starts the job on `replicas` ranks of the hosts' hostfile for `epochs`
 * epochs of SLEEP_US per step; `environment` adds settings, `pad` (may be
 * NULL) is sgd_mpi's --pad: the floats of padding in each gradient. */
static pid_t hosts_job_start(const struct hosts_job *job, const char *replicas,
                             const char *epochs, const char *sleep_us, const char *pad,
                             char *const environment[])
{
    char *wrapper = strdup(harness_build_path("adaptdl-wrap"));
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    char *argv[] = {wrapper, "-n", (char *)replicas, "--hostfile", hosts.hostfile,
                    "--backoff", "0.2", "--", job->on_host, (char *)job->job.directory,
                    trainer, "--data", job->job.data, "--epochs", (char *)epochs,
                    "--batch-size", "16", "--lr", "0.01", "--checkpoint", job->checkpoint,
                    "--checkpoint-every", "5", "--resume", "--sleep-us", (char *)sleep_us,
                    pad ? "--pad" : NULL, (char *)pad, NULL};
    char *settings[48];
    size_t used = harness_append_list(settings, 0, sizeof settings / sizeof settings[0],
                                      hosts.mpi_environment);
    settings[used++] = (char *)job->job.data_setting;
    settings[used++] = (char *)job->job.state_setting;
    settings[used++] = (char *)job->job.save_setting;
    /* sgd_mpi --resume replays its epochs; the preload reaches sgd_mpi, not
     * the script that starts it */
    settings[used++] = "ADAPTDL_RESUME=replay";
    settings[used++] = "ADAPTDL_TARGET=sgd_mpi";
    harness_append_list(settings, used, sizeof settings / sizeof settings[0], environment);
    pid_t pid = harness_start(argv, settings, false, job->out, job->err);
    free(trainer);
    free(wrapper);
    return pid;
}

static char *job_file(const struct hosts_job *job, const char *format, unsigned run,
                      unsigned rank)
{
    char name[64];
    snprintf(name, sizeof name, format, run, rank);
    return harness_path_in(job->job.directory, name);
}

/* What rank `rank` of run `run` noted: its host's index among the hosts
 * (-1: not one of them, -2: no note) and the node count it was given. */
static int rank_host(const struct hosts_job *job, unsigned run, unsigned rank,
                     char nodes[16])
{
    char *path = job_file(job, "host.run%u.%u", run, rank);
    char *text = harness_read_file(path, NULL);
    free(path);
    if (text == NULL)
        return -2;
    char address[64] = "";
    nodes[0] = '\0';
    sscanf(text, "%63s %15s", address, nodes);
    free(text);
    return harness_hosts_index(&hosts, address);
}

/* How many of the job record's profile buckets were taken at `nodes` nodes
 * and `replicas` replicas. */
static size_t profiles_at(const struct hosts_job *job, uint32_t nodes, uint32_t replicas)
{
    char *state = harness_path_in(job->job.directory, "state");
    struct adaptdl_job_record record;
    char error[256] = "";
    cr_assert_eq(job_record_load(state, &record, error, sizeof error), 0, "%s", error);
    size_t found = 0;
    for (size_t i = 0; i < record.profile_count; i++)
        if (record.profiles[i].nodes == nodes && record.profiles[i].replicas == replicas &&
            record.profiles[i].count > 0)
            found++;
    job_record_free(&record);
    free(state);
    return found;
}

Test(hosts, a_two_host_job_shards_one_dataset_into_four_disjoint_views, .timeout = 240,
     .fini = hosts_down)
{
    harness_hosts_up(&hosts, 2, 2);
    struct hosts_job job;
    hosts_job_init(&job);
    pid_t pid = hosts_job_start(&job, "4", "1", "0", NULL, NULL);
    int status = harness_wait(pid, 200);
    char *log = harness_read_output(job.err);
    cr_assert_eq(status, 0, "%s", log);
    free(log);

    /* ranks 0 and 1 fill the first host's two slots, 2 and 3 the second's;
     * every rank was told the job runs on 2 nodes */
    for (unsigned rank = 0; rank < 4; rank++) {
        char nodes[16];
        int host = rank_host(&job, 0, rank, nodes);
        cr_expect_eq(host, (int)(rank / 2), "rank %u ran on host %d", rank, host);
        cr_expect_str_eq(nodes, "2", "rank %u: ADAPTDL_NUM_NODES", rank);
    }
    /* the four views are disjoint and cover the dataset once */
    unsigned *counts = calloc(RECORDS, sizeof *counts);
    unsigned per_rank[4] = {0};
    for (unsigned rank = 0; rank < 4; rank++) {
        char *path = job_file(&job, "ids.run%u.%u", 0, rank);
        struct id_log ids;
        harness_read_id_log(path, &ids);
        for (size_t i = 0; i < ids.count; i++)
            if (ids.events[i].kind == ID_EVENT_RECORD) {
                cr_assert_lt(ids.events[i].value, RECORDS);
                counts[ids.events[i].value]++;
                per_rank[rank]++;
            }
        id_log_free(&ids);
        free(path);
    }
    for (uint64_t id = 0; id < RECORDS; id++)
        cr_expect_eq(counts[id], 1, "record %llu seen %u times", (unsigned long long)id,
                     counts[id]);
    for (unsigned rank = 0; rank < 4; rank++)
        cr_expect_eq(per_rank[rank], RECORDS / 4, "rank %u read %u records", rank,
                     per_rank[rank]);
    free(counts);
    /* the job record keeps the step times under the layout they had */
    cr_expect_gt(profiles_at(&job, 2, 4), 0, "profiles taken at 2 nodes, 4 replicas");
    cr_expect_eq(profiles_at(&job, 1, 4), 0, "none taken as if on 1 node");
    harness_remove_temp_dir(job.job.directory);
}

/* The number after "NAME": in a JSON line, NAN when absent. */
static double json_number(const char *line, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\": ", name);
    const char *at = strstr(line, key);
    return at ? strtod(at + strlen(key), NULL) : NAN;
}

/* The last decision event of a metrics file, as a string of its own (NULL
 * when there is none). */
static char *last_decision(const char *metrics_path)
{
    char *text = harness_read_file(metrics_path, NULL);
    if (text == NULL)
        return NULL;
    char *last = NULL;
    for (char *at = text; (at = strstr(at, "\"type\": \"decision\", ")) != NULL; at++)
        last = at;
    char *line = NULL;
    if (last != NULL) {
        while (last > text && last[-1] != '\n')
            last--;
        size_t length = strcspn(last, "\n");
        line = strndup(last, length);
    }
    free(text);
    return line;
}

/* Gradients of 1 MiB, and what leaves a host limited to 100 Mbit/s: an
 * all-reduce between hosts costs tens of milliseconds, one within a host
 * (shared memory) a fraction of one, so that the node terms differ from
 * the intra-node ones far beyond the noise.  Run 1: 2 ranks
 * fill the first host (1 node); run 2, the same job relaunched on 4 ranks:
 * 2 nodes.  The fit then has profiles at 1 and 2 nodes; the 2-host run's
 * decisions are made for 2 nodes with an alpha_n fitted to the slow link,
 * not the prior's 1.1 alpha_r. */
Test(hosts, the_node_terms_are_fitted_from_one_and_two_host_profiles_and_a_decision_uses_them,
     .timeout = 300, .fini = hosts_down)
{
    harness_hosts_up(&hosts, 2, 2);
    harness_hosts_slow(&hosts, 100);
    struct hosts_job job;
    hosts_job_init(&job);
    char *metrics = harness_path_in(job.job.directory, "metrics.%r");
    char metrics_setting[700];
    snprintf(metrics_setting, sizeof metrics_setting, "ADAPTDL_METRICS_FILE=%s", metrics);
    /* decisions every 0.3 s that never restart the job (no restart pays
     * back within a microsecond), so each run keeps its layout */
    char *adaptive[] = {metrics_setting, "ADAPTDL_BSZ_ARG=argv:--batch-size",
                        "ADAPTDL_MAX_BATCH_SIZE=256", "ADAPTDL_DECIDE_SECONDS=0.3",
                        "ADAPTDL_PAYBACK_SECONDS=0.000001", NULL};
    pid_t pid = hosts_job_start(&job, "2", "1", "20000", PAD, adaptive);
    int status = harness_wait(pid, 200);
    char *log = harness_read_output(job.err);
    cr_assert_eq(status, 0, "%s", log);
    free(log);
    for (unsigned rank = 0; rank < 2; rank++) {
        char nodes[16];
        cr_expect_eq(rank_host(&job, 0, rank, nodes), 0, "run 1: both ranks on the first host");
        cr_expect_str_eq(nodes, "1", "run 1, rank %u: ADAPTDL_NUM_NODES", rank);
    }
    cr_expect_gt(profiles_at(&job, 1, 2), 0, "profiles at 1 node");

    /* the job relaunched on both hosts for two more epochs (it resumes
     * after its first); ADAPTDL_NUM_RESTARTS=1 keeps the runs' notes apart */
    char *second[8] = {adaptive[0], adaptive[1], adaptive[2], adaptive[3], adaptive[4],
                       "ADAPTDL_NUM_RESTARTS=1", NULL};
    char *rank0_metrics = harness_path_in(job.job.directory, "metrics.0");
    unlink(rank0_metrics);
    pid = hosts_job_start(&job, "4", "3", "20000", PAD, second);
    status = harness_wait(pid, 250);
    log = harness_read_output(job.err);
    cr_assert_eq(status, 0, "%s", log);
    free(log);
    for (unsigned rank = 0; rank < 4; rank++) {
        char nodes[16];
        rank_host(&job, 1, rank, nodes);
        cr_expect_str_eq(nodes, "2", "run 2, rank %u: ADAPTDL_NUM_NODES", rank);
    }
    cr_expect_gt(profiles_at(&job, 2, 4), 0, "profiles at 2 nodes");

    char *decision = last_decision(rank0_metrics);
    cr_assert_not_null(decision, "the 2-host run made decisions (%s)", rank0_metrics);
    cr_expect_eq(json_number(decision, "nodes"), 2, "%s", decision);
    cr_expect_eq(json_number(decision, "replicas"), 4, "%s", decision);
    struct perf_params fitted = {
        json_number(decision, "alpha_c"), json_number(decision, "beta_c"),
        json_number(decision, "alpha_n"), json_number(decision, "beta_n"),
        json_number(decision, "alpha_r"), json_number(decision, "beta_r"),
        json_number(decision, "gamma")};
    /* the network time the decision predicts for its layout (2 nodes, 4
     * replicas) is the slow link's, far above the 1-host one's: without
     * 2-host profiles the prior would make it 1.1 times the latter */
    double between_hosts = perf_params_network_time(&fitted, 2, 4);
    double within_a_host = perf_params_network_time(&fitted, 1, 2);
    cr_expect_gt(between_hosts, 0.01, "inter-node time %g s fitted to the slow link: %s",
                 between_hosts, decision);
    cr_expect_gt(between_hosts, 3 * within_a_host, "inter-node %g s, intra-node %g s: %s",
                 between_hosts, within_a_host, decision);
    free(decision);
    free(rank0_metrics);
    free(metrics);
    harness_remove_temp_dir(job.job.directory);
}

/* Adds to counts[epoch * RECORDS + id] every record of run `run`'s rank
 * logs up to step `last_step`. */
static void count_run(const struct hosts_job *job, unsigned run, unsigned replicas,
                      uint64_t last_step, unsigned *counts, unsigned epochs)
{
    for (unsigned rank = 0; rank < replicas; rank++) {
        char *path = job_file(job, "ids.run%u.%u", run, rank);
        struct id_log ids;
        harness_read_id_log(path, &ids);
        id_log_count_committed(&ids, last_step, counts, RECORDS, epochs);
        id_log_free(&ids);
        free(path);
    }
}

Test(hosts, a_rank_killed_on_one_host_stops_the_job_and_the_relaunch_resumes_exactly,
     .timeout = 300, .fini = hosts_down)
{
    enum { EPOCHS = 3 };
    harness_hosts_up(&hosts, 2, 2);
    struct hosts_job job;
    hosts_job_init(&job);
    /* 13 steps an epoch of 30 ms each: killed at step 12 (after the
     * checkpoint of step 10), rank 3 has some 800 ms to be found in */
    pid_t pid = hosts_job_start(&job, "4", "3", "30000", NULL, NULL);
    /* rank 3 runs on the second host; kill it once it is past a
     * checkpoint (every 5 steps) */
    char *ids3 = job_file(&job, "ids.run%u.%u", 0, 3);
    pid_t rank3 = 0;
    double deadline = harness_monotonic_seconds() + 120;
    while (harness_monotonic_seconds() < deadline) {
        if (harness_last_logged_step(ids3) >= 12 &&
            (rank3 = harness_hosts_rank_pid(&hosts, 1, "sgd_mpi", 3)) != 0)
            break;
        usleep(2000);
    }
    cr_assert_neq(rank3, 0, "rank 3 never reached step 12 on the second host");
    cr_assert_eq(kill(rank3, SIGKILL), 0);
    int status = harness_wait(pid, 250);
    char *log = harness_read_output(job.err);
    cr_assert_eq(status, 0, "the relaunched job runs to its end: %s", log);
    cr_expect(strstr(log, "adaptdl-wrap: the trainer crashed (status ") != NULL &&
                  strstr(log, "restart 1 from the last snapshot") != NULL,
              "the wrapper relaunched the stopped job: %s", log);
    free(log);

    /* the relaunch (ADAPTDL_NUM_RESTARTS=1) resumed from a checkpoint of
     * the first run, again on both hosts */
    char *output = harness_read_output(job.out);
    uint64_t resumed = harness_resumed_step(output);
    cr_assert_gt(resumed, 0, "resumed from a checkpoint: %s", output);
    free(output);
    for (unsigned rank = 0; rank < 4; rank++) {
        char nodes[16];
        cr_expect_eq(rank_host(&job, 1, rank, nodes), (int)(rank / 2),
                     "relaunch: rank %u's host", rank);
    }
    /* every epoch's records once: the first run's up to the step the
     * relaunch resumed at, then all of the relaunch's */
    unsigned *counts = calloc(EPOCHS * RECORDS, sizeof *counts);
    count_run(&job, 0, 4, resumed, counts, EPOCHS);
    count_run(&job, 1, 4, UINT64_MAX, counts, EPOCHS);
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++)
        for (uint64_t id = 0; id < RECORDS; id++)
            cr_expect_eq(counts[epoch * RECORDS + id], 1, "epoch %u record %llu: %u times",
                         epoch, (unsigned long long)id, counts[epoch * RECORDS + id]);
    free(counts);
    free(ids3);
    harness_remove_temp_dir(job.job.directory);
}

/* The second host gets a private, empty directory at the state path (a
 * local disk where a shared one was meant): rank 0 names the directory and
 * the host in one line, every rank exits 2, and the wrapper does not
 * retry a configuration error. */
Test(hosts, a_state_directory_one_host_does_not_share_is_named_in_one_line, .timeout = 180,
     .fini = hosts_down)
{
    harness_hosts_up(&hosts, 2, 2);
    struct hosts_job job;
    hosts_job_init(&job);
    char *state = harness_path_in(job.job.directory, "state");
    char private_setting[700];
    snprintf(private_setting, sizeof private_setting, "NETNS_HOSTS_PRIVATE=%s:%s",
             hosts.addresses[1], state);
    pid_t pid = hosts_job_start(&job, "4", "1", "0", NULL, (char *[]){private_setting, NULL});
    int status = harness_wait(pid, 150);
    char *log = harness_read_output(job.err);
    cr_expect_eq(status, 2, "%s", log);
    cr_expect_eq(harness_count_lines_containing(job.err, "is not shared by every host"), 1,
                 "one line: %s", log);
    char expected[800];
    snprintf(expected, sizeof expected,
             "adaptshim: the state directory \"%s\" (ADAPTDL_CHECKPOINT_PATH) is not shared by "
             "every host: 2 of 4 ranks (the first: rank 2; host %s) do not see the file rank 0 "
             "on host %s wrote there",
             state, hosts.addresses[1], hosts.addresses[0]);
    cr_expect(strstr(log, expected) != NULL, "expected \"%s\" in: %s", expected, log);
    cr_expect(strstr(log, "exited with status 2: not restarted") != NULL &&
                  strstr(log, "restart 1") == NULL,
              "a configuration error is not retried: %s", log);
    char *output = harness_read_output(job.out);
    cr_expect(strstr(output, "steps") == NULL, "no rank trained: %s", output);
    free(output);
    free(log);
    free(state);
    harness_remove_temp_dir(job.job.directory);
}
