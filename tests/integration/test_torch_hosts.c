/* test_torch_hosts.c - PyTorch jobs over several hosts (adaptdl-wrap(1)
 * "CLUSTERS"): `adaptdl-wrap --launcher torch --hostfile FILE --agent
 * tests/hosts/netns-rsh` starts the replicas of the DDP-over-gloo trainer
 * (trainers/torch_ddp.py) on hosts made of network namespaces
 * (harness_hosts.h), each with its own address and host name; gloo meets
 * at MASTER_ADDR, the first host's address, over the hosts' bridge.
 *
 *   - 2 hosts x 1 slot: each replica runs on its own host (it prints the
 *     host name netns-rsh gave it, the host's address) with
 *     GLOO_SOCKET_IFNAME passed on by the launcher through an agent that
 *     passes no variable, the job ends, and its two views are disjoint
 *     halves that cover the data every epoch;
 *   - a replica killed with SIGKILL on the second host stops the job, the
 *     wrapper relaunches it on both hosts, and it resumes exactly: every
 *     epoch's records trained once.
 *
 * After each job no process is left on any host.
 *
 * The tests need root (namespaces) and /usr/bin/python3 with torch;
 * elsewhere each says why in one line and is skipped.  The hosts are
 * removed when a test ends, passed or not. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "harness_torch.h"
#include "harness_hosts.h"

#define DIM 4
#define RECORDS 200
#define EPOCHS 3

static struct harness_hosts hosts;

static void hosts_down(void)
{
    harness_hosts_down(&hosts);
}



/* Starts `adaptdl-wrap --launcher torch -n 2 --hostfile HOSTS --agent
 * netns-rsh [--backoff 0.05] -- python3 torch_ddp.py ... TRAINER_OPTIONS`
 * (NULL-terminated, may be NULL).  The agent passes no variable on, as ssh
 * (NETNS_RSH_CLEAN_ENVIRONMENT=1): what a replica gets, the launcher put on
 * its command line, GLOO_SOCKET_IFNAME (the hosts' interface) too.  --shuffle 0 always: with several
 * replicas a snapshot binds their in-order prefix, so a shuffled loader
 * would train again, never lose, what followed it (adaptshim(7) "LOADER STYLES"), and the
 * exactly-once count would not hold. */
static pid_t start_torch_hosts_job(const struct torch_job *torch,
                                   char *const trainer_options[])
{
    char *agent = NULL;
    if (asprintf(&agent, "%s/tests/hosts/netns-rsh", harness_source_tree()) < 0)
        abort();
    char epochs[16];
    snprintf(epochs, sizeof epochs, "%d", EPOCHS);
    char *argv[48] = {strdup(harness_build_path("adaptdl-wrap")), "--launcher", "torch",
                      "-n", "2", "--hostfile", hosts.hostfile, "--agent", agent,
                      "--backoff", "0.05", "--",
                      "/usr/bin/python3", strdup(harness_build_path("trainers/torch_ddp.py")),
                      "--data", torch->job.data, "--epochs", epochs, "--batch-size", "8",
                      "--lr", "0.05", "--checkpoint", torch->checkpoint, "--log",
                      torch->log_pattern, "--shuffle", "0"};
    size_t used = 0;
    while (argv[used] != NULL)
        used++;
    harness_append_list(argv, used, sizeof argv / sizeof argv[0], trainer_options);
    char interface[64];
    snprintf(interface, sizeof interface, "GLOO_SOCKET_IFNAME=%s", hosts.interface);
    char *settings[] = {(char *)torch->job.data_setting, (char *)torch->job.state_setting,
                        (char *)torch->job.save_setting, "ADAPTDL_LOG=info",
                        "NETNS_RSH_CLEAN_ENVIRONMENT=1", interface, NULL};
    pid_t pid = harness_start(argv, settings, false, torch->out, torch->err);
    free(argv[0]);
    free(argv[13]);
    free(agent);
    return pid;
}

/* The host index of the replica of `rank` whose line in `out` holds "pid
 * PID" (the n-th such line for that rank, from 0): the trainer prints "rank
 * R of W ... pid P parent PP host H" with H its host name, which netns-rsh
 * sets to the host's address.  -1 when there is no such line or host. */
static int host_of_rank(const char *out, unsigned rank, unsigned nth, pid_t *pid)
{
    char start[32];
    snprintf(start, sizeof start, "rank %u of ", rank);
    const char *line = out;
    for (unsigned seen = 0;; seen++) {
        line = strstr(line, start);
        if (line == NULL || (line != out && line[-1] != '\n'))
            return -1;
        if (seen == nth)
            break;
        line++;
    }
    const char *pid_at = strstr(line, " pid ");
    const char *host_at = strstr(line, " host ");
    const char *end = strchr(line, '\n');
    if (pid_at == NULL || host_at == NULL || end == NULL || host_at > end)
        return -1;
    if (pid != NULL)
        *pid = (pid_t)strtol(pid_at + 5, NULL, 10);
    char address[64];
    size_t length = strcspn(host_at + 6, " \n");
    if (length >= sizeof address)
        return -1;
    memcpy(address, host_at + 6, length);
    address[length] = '\0';
    return harness_hosts_index(&hosts, address);
}

/* No process is left in any host's namespace once the job ended (polled,
 * at most 60 s): the launcher ended its remote replicas and agents.  What
 * is left is named, then removed with the hosts. */
static void expect_nothing_left_on_the_hosts(void)
{
    for (unsigned host = 0; host < hosts.count; host++) {
        char *argv[] = {"/bin/sh", "-c", "exec ip netns pids \"$0\"", hosts.namespaces[host],
                        NULL};
        double give_up = harness_monotonic_seconds() + 60;
        struct run_result result;
        for (;;) {
            harness_run(&result, argv, NULL, false, 30);
            bool empty = result.status == 0 && result.out[0] == '\0';
            if (empty || harness_monotonic_seconds() > give_up)
                break;
            run_result_free(&result);
            usleep(20000);
        }
        cr_expect(result.status == 0 && result.out[0] == '\0',
                  "processes left on host %u after the job: %s%s", host, result.out, result.err);
        run_result_free(&result);
    }
}

Test(torch_hosts, a_two_host_job_runs_one_replica_a_host_with_disjoint_views_that_cover_the_data,
     .timeout = 300, .fini = hosts_down)
{
    torch_job_skip_without_torch();
    harness_hosts_up(&hosts, 2, 1);
    struct torch_job torch;
    torch_job_init(&torch, RECORDS, DIM, 7);
    pid_t pid = start_torch_hosts_job(&torch, NULL);
    int status = harness_wait(pid, 260);
    char *err = harness_read_output(torch.err);
    char *out = harness_read_output(torch.out);
    cr_assert_eq(status, 0, "%s: %s%s", harness_describe_status(status), out, err);
    /* one replica a host: local rank 0 of 1 on each, rank R on host R */
    cr_expect(strstr(out, "rank 0 of 2 local 0 of 1 batch size 8") != NULL, "%s", out);
    cr_expect(strstr(out, "rank 1 of 2 local 0 of 1 batch size 8") != NULL, "%s", out);
    cr_expect_eq(host_of_rank(out, 0, 0, NULL), 0, "rank 0 ran on the first host: %s", out);
    cr_expect_eq(host_of_rank(out, 1, 0, NULL), 1, "rank 1 ran on the second host: %s", out);
    cr_expect(strstr(out, "rank 0 done at step ") && strstr(out, "rank 1 done at step "), "%s",
              out);
    /* gloo was told the hosts' interface on both hosts */
    char told[64];
    snprintf(told, sizeof told, " gloo interface %s\n", hosts.interface);
    cr_expect_eq(harness_count_occurrences(out, told), 2, "%s", out);
    /* each epoch: the two views are disjoint halves that cover the data */
    torch_job_expect_disjoint_halves(&torch, 0, RECORDS, EPOCHS);
    /* the shim on each host took its layout from WORLD_SIZE and RANK */
    cr_expect(strstr(err, "[r1 p") != NULL, "rank 1 logs as rank 1: %s", err);
    free(out);
    free(err);
    expect_nothing_left_on_the_hosts();
}

/* Rank 1, on the second host, is killed with SIGKILL once the job passed
 * its second checkpoint: its agent ends with the kill's status, the
 * launcher stops rank 0 and reports the crash, the wrapper relaunches the
 * job on both hosts (ADAPTDL_NUM_RESTARTS=1), which resumes from the
 * checkpoint and trains every record of every epoch exactly once over the
 * two runs. */
Test(torch_hosts, a_replica_killed_on_one_host_stops_the_job_and_the_relaunch_resumes_exactly,
     .timeout = 300, .fini = hosts_down)
{
    torch_job_skip_without_torch();
    harness_hosts_up(&hosts, 2, 1);
    struct torch_job torch;
    torch_job_init(&torch, RECORDS, DIM, 7);
    pid_t pid = start_torch_hosts_job(&torch, (char *[]){"--sleep-us", "20000", NULL});
    char *first = torch_job_log_path(&torch, 0, 1);
    bool reached = harness_wait_for_lines(first, "checkpoint step 8", 1, pid, 200);
    char *out = harness_read_output(torch.out);
    pid_t victim = 0;
    int victim_host = host_of_rank(out, 1, 0, &victim);
    free(out);
    if (!reached || victim <= 0) {
        kill(pid, SIGKILL);
        harness_wait(pid, 60);
        cr_assert_fail("the job never reached its second checkpoint on rank 1");
    }
    cr_expect_eq(victim_host, 1, "rank 1 runs on the second host");
    cr_assert_eq(kill(victim, SIGKILL), 0);
    int status = harness_wait(pid, 250);
    char *err = harness_read_output(torch.err);
    out = harness_read_output(torch.out);
    cr_assert_eq(status, 0, "%s: %s%s", harness_describe_status(status), out, err);
    cr_expect(strstr(err, "adaptdl-torch-launch: replica 1 (pid ") != NULL &&
                  strstr(err, ": stopping the others") != NULL,
              "the launcher saw rank 1 end and stopped rank 0: %s", err);
    cr_expect(strstr(err, "): restart 1 from the last snapshot") != NULL, "%s", err);
    /* the relaunch ran on both hosts again */
    cr_expect_eq(host_of_rank(out, 0, 1, NULL), 0, "relaunched rank 0 on the first host: %s",
                 out);
    cr_expect_eq(host_of_rank(out, 1, 1, NULL), 1, "relaunched rank 1 on the second host: %s",
                 out);
    cr_expect(strstr(out, "rank 0 done at step ") && strstr(out, "rank 1 done at step "), "%s",
              out);

    /* of the first run, what both ranks logged before the checkpoint the
     * relaunch resumed from; of the relaunch, everything */
    unsigned *counts = calloc(EPOCHS * RECORDS, sizeof *counts);
    uint64_t until = 0;
    char *second = torch_job_log_path(&torch, 1, 0);
    cr_assert(harness_resume_point(second, &until), "the relaunch printed where it started");
    cr_assert_gt(until, 0, "the relaunch resumed from a checkpoint");
    for (unsigned run = 0; run < 2; run++)
        for (unsigned rank = 0; rank < 2; rank++) {
            char *path = torch_job_log_path(&torch, run, rank);
            struct id_log log;
            harness_read_record_stream(path, &log);
            cr_expect_gt(log.count, 0, "%s holds records", path);
            record_stream_count_until(&log, run == 0 ? until : UINT64_MAX, counts, RECORDS,
                                      EPOCHS);
            id_log_free(&log);
            free(path);
        }
    size_t wrong = 0;
    for (unsigned i = 0; i < EPOCHS * RECORDS; i++)
        if (counts[i] != 1 && wrong++ < 5)
            cr_expect_fail("epoch %u record %u trained %u times", i / RECORDS, i % RECORDS,
                           counts[i]);
    cr_expect_eq(wrong, 0, "%zu records not trained exactly once", wrong);
    free(counts);
    free(second);
    free(first);
    free(out);
    free(err);
    expect_nothing_left_on_the_hosts();
}
