/* slurm_cluster.c - a private Slurm for one integration test (see
 * slurm_cluster.h).
 *
 * Every daemon runs in the foreground as a child of the test, started
 * through `setpriv --pdeathsig KILL` when it exists, so that a test killed
 * by its timeout takes its daemons with it.  The node is this machine under
 * its own host name, so that mpirun inside a job sees the allocation's node
 * as the local one (under another name it would start a "remote" daemon
 * with srun).  Ports are free ones chosen at start, so that two tests may
 * run their clusters side by side. */
#include "slurm_cluster.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLURM_DAEMONS "/usr/sbin"
#define SLURM_CLIENTS "/usr/bin"
#define SETPRIV "/usr/bin/setpriv"

/* Seconds Slurm waits between a job's SIGTERM and its SIGKILL: long enough
 * for the agreed stop of a loaded machine, short enough that cancelling a
 * job that ignores SIGTERM does not hold the test up. */
#define KILL_WAIT_SECONDS 10

/* A TCP port nothing listens on now (the kernel's choice for port 0). */
static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t size = sizeof address;
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&address, sizeof address) == 0 &&
        getsockname(fd, (struct sockaddr *)&address, &size) == 0)
        port = ntohs(address.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* The short host name, which slurmd takes for its node name. */
static void short_host_name(char *out, size_t size)
{
    if (gethostname(out, size) != 0)
        snprintf(out, size, "localhost");
    out[size - 1] = '\0';
    char *dot = strchr(out, '.');
    if (dot != NULL)
        *dot = '\0';
}

static char *path_in(const struct slurm_cluster *cluster, const char *name)
{
    return harness_path_in(cluster->directory, name);
}

static bool write_text(const char *path, const char *text)
{
    return harness_write_file(path, text, strlen(text)) == 0;
}

/* Whether a daemon still runs; an ended one stays unreaped (WNOWAIT), so
 * that stopping it later waits for it instead of for a reused pid. */
static bool process_alive(pid_t pid)
{
    siginfo_t info = {0};
    if (pid <= 0 || waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return false;
    return info.si_pid == 0;
}

/* Starts a daemon in the foreground, its output in DIRECTORY/NAME.out. */
static pid_t start_daemon(const struct slurm_cluster *cluster, const char *name,
                          char *const arguments[])
{
    char *argv[16];
    size_t used = 0;
    if (access(SETPRIV, X_OK) == 0) {
        argv[used++] = SETPRIV;
        argv[used++] = "--pdeathsig";
        argv[used++] = "KILL";
    }
    for (size_t i = 0; arguments[i] != NULL && used < 15; i++)
        argv[used++] = arguments[i];
    argv[used] = NULL;
    char out_name[64];
    snprintf(out_name, sizeof out_name, "%s.out", name);
    char *out = path_in(cluster, out_name);
    char *environment[] = {cluster->conf_setting, NULL};
    pid_t pid = harness_start(argv, environment, false, out, out);
    free(out);
    return pid;
}

/* The last lines of a daemon's log, for the reason a start failed. */
static void describe_log(const struct slurm_cluster *cluster, const char *name, char *why,
                         size_t why_size)
{
    char *path = path_in(cluster, name);
    char *text = harness_read_file(path, NULL);
    free(path);
    size_t used = strlen(why);
    if (text == NULL || used + 1 >= why_size) {
        free(text);
        return;
    }
    /* the last line that says something */
    size_t length = strlen(text);
    while (length > 0 && (text[length - 1] == '\n' || text[length - 1] == ' '))
        text[--length] = '\0';
    char *last = strrchr(text, '\n');
    snprintf(why + used, why_size - used, " (%s: %s)", name, last ? last + 1 : text);
    free(text);
}

static bool fail_start(struct slurm_cluster *cluster, char *why, size_t why_size,
                       const char *log_name, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(why, why_size, format, arguments);
    va_end(arguments);
    if (log_name != NULL)
        describe_log(cluster, log_name, why, why_size);
    slurm_cluster_stop(cluster);
    return false;
}

static bool make_munge_key(const char *path)
{
    unsigned char key[1024];
    if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
        return false;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0400);
    if (fd < 0)
        return false;
    bool written = write(fd, key, sizeof key) == (ssize_t)sizeof key;
    return close(fd) == 0 && written;
}

static bool write_configuration(const struct slurm_cluster *cluster, const char *host,
                                unsigned controller_port, unsigned node_port)
{
    char *text = NULL;
    const char *d = cluster->directory;
    if (asprintf(&text,
                 "# a private cluster of one integration test\n"
                 "ClusterName=adaptshim%u\n"
                 "SlurmctldHost=%s(127.0.0.1)\n"
                 "SlurmctldPort=%u\n"
                 "SlurmdPort=%u\n"
                 "AuthType=auth/munge\n"
                 "CredType=cred/munge\n"
                 "AuthInfo=socket=%s/munge/socket\n"
                 "SlurmUser=root\n"
                 "SlurmdUser=root\n"
                 "ProctrackType=proctrack/linuxproc\n"
                 "TaskPlugin=task/none\n"
                 "SelectType=select/cons_tres\n"
                 "SelectTypeParameters=CR_CPU\n"
                 "MpiDefault=none\n"
                 "JobRequeue=1\n"
                 "ReturnToService=2\n"
                 "KillWait=%d\n"
                 "StateSaveLocation=%s/controller\n"
                 "SlurmdSpoolDir=%s/node\n"
                 "SlurmctldPidFile=%s/slurmctld.pid\n"
                 "SlurmdPidFile=%s/slurmd.pid\n"
                 "SlurmctldLogFile=%s/slurmctld.log\n"
                 "SlurmdLogFile=%s/slurmd.log\n"
                 "PlugStackConfig=%s/plugstack.conf\n"
                 "NodeName=%s NodeAddr=127.0.0.1 CPUs=%u State=UNKNOWN\n"
                 "PartitionName=test Nodes=%s Default=YES MaxTime=INFINITE State=UP\n",
                 controller_port, host, controller_port, node_port, d, KILL_WAIT_SECONDS, d, d,
                 d, d, d, d, d, host, cluster->cpus, host) < 0)
        abort();
    bool written = write_text(cluster->conf, text);
    free(text);
    char *plugins = path_in(cluster, "plugstack.conf");
    written = written && write_text(plugins, "");
    free(plugins);
    return written;
}

/* Polls until `path` exists or the process has ended (false). */
static bool wait_for_file(const char *path, pid_t pid, double timeout_seconds)
{
    double deadline = harness_monotonic_seconds() + timeout_seconds;
    while (harness_monotonic_seconds() < deadline) {
        if (access(path, F_OK) == 0)
            return true;
        if (!process_alive(pid))
            return false;
        usleep(10000);
    }
    return false;
}

/* Polls until sinfo says the node is idle (true), or a daemon ended. */
static bool wait_for_idle_node(struct slurm_cluster *cluster, double timeout_seconds)
{
    double deadline = harness_monotonic_seconds() + timeout_seconds;
    while (harness_monotonic_seconds() < deadline) {
        if (!process_alive(cluster->slurmctld) || !process_alive(cluster->slurmd))
            return false;
        struct run_result result;
        char *argv[] = {"sinfo", "--noheader", "--format=%t", NULL};
        slurm_run(cluster, &result, argv, NULL, 20);
        bool idle = result.status == 0 && result.out != NULL && strcmp(result.out, "idle\n") == 0;
        run_result_free(&result);
        if (idle)
            return true;
        usleep(50000);
    }
    return false;
}

bool slurm_cluster_start(struct slurm_cluster *cluster, char *why, size_t why_size)
{
    memset(cluster, 0, sizeof *cluster);
    if (geteuid() != 0) {
        snprintf(why, why_size, "not root: Slurm's daemons run as root");
        return false;
    }
    const char *programs[] = {SLURM_DAEMONS "/munged", SLURM_DAEMONS "/slurmctld",
                              SLURM_DAEMONS "/slurmd", SLURM_CLIENTS "/sbatch"};
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        if (access(programs[i], X_OK) != 0) {
            snprintf(why, why_size, "%s is missing (make deps installs munge, slurmctld, "
                                    "slurmd and slurm-client)",
                     programs[i]);
            return false;
        }
    char host[256];
    short_host_name(host, sizeof host);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cluster->cpus = cpus > 0 ? (unsigned)cpus : 1;
    cluster->directory = strdup(harness_temp_dir());
    cluster->conf = path_in(cluster, "slurm.conf");
    if (asprintf(&cluster->conf_setting, "SLURM_CONF=%s", cluster->conf) < 0)
        abort();

    char *munge = path_in(cluster, "munge");
    char *key = path_in(cluster, "munge/key");
    char *socket_path = path_in(cluster, "munge/socket");
    char *controller = path_in(cluster, "controller");
    char *node = path_in(cluster, "node");
    bool made = mkdir(munge, 0700) == 0 && mkdir(controller, 0700) == 0 &&
                mkdir(node, 0755) == 0 && make_munge_key(key);
    free(controller);
    free(node);
    if (!made) {
        free(munge);
        free(key);
        free(socket_path);
        return fail_start(cluster, why, why_size, NULL, "cannot make the cluster's files in %s: %s",
                          cluster->directory, strerror(errno));
    }
    char key_option[600], socket_option[600], pid_option[600], log_option[600], seed_option[600];
    snprintf(key_option, sizeof key_option, "--key-file=%s", key);
    snprintf(socket_option, sizeof socket_option, "--socket=%s", socket_path);
    snprintf(pid_option, sizeof pid_option, "--pid-file=%s/munged.pid", munge);
    snprintf(log_option, sizeof log_option, "--log-file=%s/munged.log", cluster->directory);
    snprintf(seed_option, sizeof seed_option, "--seed-file=%s/seed", munge);
    /* --force: the temporary directory's parents are writable by others
     * (/tmp), which munged refuses by default. */
    char *munged_argv[] = {SLURM_DAEMONS "/munged", "--foreground", "--force", key_option,
                           socket_option, pid_option, log_option, seed_option, NULL};
    cluster->munged = start_daemon(cluster, "munged", munged_argv);
    bool munge_up = wait_for_file(socket_path, cluster->munged, 20);
    free(munge);
    free(key);
    free(socket_path);
    if (!munge_up)
        return fail_start(cluster, why, why_size, "munged.out", "munged did not start");

    unsigned controller_port = free_port(), node_port = free_port();
    while (node_port == controller_port && node_port != 0)
        node_port = free_port();
    if (controller_port == 0 || node_port == 0)
        return fail_start(cluster, why, why_size, NULL, "no free TCP port for the daemons");
    if (!write_configuration(cluster, host, controller_port, node_port))
        return fail_start(cluster, why, why_size, NULL, "cannot write %s", cluster->conf);

    char *controller_argv[] = {SLURM_DAEMONS "/slurmctld", "-D", "-f", cluster->conf, NULL};
    cluster->slurmctld = start_daemon(cluster, "slurmctld", controller_argv);
    char *node_argv[] = {SLURM_DAEMONS "/slurmd", "-D", "-f", cluster->conf, NULL};
    cluster->slurmd = start_daemon(cluster, "slurmd", node_argv);
    if (!wait_for_idle_node(cluster, 60)) {
        const char *log = process_alive(cluster->slurmctld) ? "slurmd.log" : "slurmctld.log";
        return fail_start(cluster, why, why_size, log, "the node of the test's Slurm never "
                                                       "became idle");
    }
    return true;
}

/* Whether the cluster knows no job that still runs or completes. */
static bool no_job_left(const struct slurm_cluster *cluster)
{
    struct run_result result;
    char *argv[] = {"squeue", "--noheader", "--states=RUNNING,COMPLETING,SUSPENDED,CONFIGURING",
                    "--format=%i", NULL};
    slurm_run(cluster, &result, argv, NULL, 20);
    bool none = result.status == 0 && result.out != NULL && result.out[0] == '\0';
    run_result_free(&result);
    return none;
}

static void stop_daemon(pid_t *pid)
{
    if (*pid <= 0)
        return;
    kill(*pid, SIGTERM);
    harness_wait(*pid, 30);
    *pid = 0;
}

void slurm_cluster_stop(struct slurm_cluster *cluster)
{
    if (cluster->directory == NULL)
        return;
    if (process_alive(cluster->slurmctld) && process_alive(cluster->slurmd)) {
        /* every job's processes end with it (SIGKILL KillWait seconds
         * after SIGTERM); slurmstepd, which outlives slurmd, with them */
        struct run_result result;
        char *cancel[] = {"scancel", "--user=root", NULL};
        slurm_run(cluster, &result, cancel, NULL, 30);
        run_result_free(&result);
        double deadline = harness_monotonic_seconds() + 3 * KILL_WAIT_SECONDS + 30;
        while (!no_job_left(cluster) && harness_monotonic_seconds() < deadline)
            usleep(100000);
    }
    stop_daemon(&cluster->slurmd);
    stop_daemon(&cluster->slurmctld);
    stop_daemon(&cluster->munged);
    harness_remove_tree(cluster->directory);
    free(cluster->directory);
    free(cluster->conf);
    free(cluster->conf_setting);
    memset(cluster, 0, sizeof *cluster);
}

int slurm_run(const struct slurm_cluster *cluster, struct run_result *result,
              char *const argv[], char *const environment[], double timeout_seconds)
{
    char *full_argv[64];
    size_t count = 0;
    while (argv[count] != NULL && count < 63) {
        full_argv[count] = argv[count];
        count++;
    }
    full_argv[count] = NULL;
    char *program = NULL;
    if (asprintf(&program, SLURM_CLIENTS "/%s", argv[0]) < 0)
        abort();
    full_argv[0] = program;
    char *full_environment[64] = {cluster->conf_setting};
    harness_append_list(full_environment, 1,
                        sizeof full_environment / sizeof full_environment[0], environment);
    int status = harness_run(result, full_argv, full_environment, false, timeout_seconds);
    free(program);
    return status;
}

unsigned long slurm_submit(const struct slurm_cluster *cluster, char *const options[],
                           const char *script, char *const environment[])
{
    char *argv[64] = {"sbatch", "--parsable"};
    size_t used = 2;
    for (size_t i = 0; options != NULL && options[i] != NULL && used < 62; i++)
        argv[used++] = options[i];
    argv[used++] = (char *)script;
    argv[used] = NULL;
    struct run_result result;
    slurm_run(cluster, &result, argv, environment, 60);
    cr_assert_eq(result.status, 0, "sbatch: %s%s", result.out, result.err);
    char *end = NULL;
    unsigned long job = strtoul(result.out, &end, 10);
    cr_assert(end != result.out && job > 0, "sbatch printed no job id: %s", result.out);
    run_result_free(&result);
    return job;
}

char *slurm_job_field(const struct slurm_cluster *cluster, unsigned long job, const char *field)
{
    char job_text[32];
    snprintf(job_text, sizeof job_text, "%lu", job);
    char *argv[] = {"scontrol", "--oneliner", "show", "job", job_text, NULL};
    struct run_result result;
    slurm_run(cluster, &result, argv, NULL, 30);
    char *value = NULL;
    if (result.status == 0 && result.out != NULL) {
        char needle[96];
        snprintf(needle, sizeof needle, " %s=", field);
        const char *found = strstr(result.out, needle);
        if (found != NULL) {
            found += strlen(needle);
            value = strndup(found, strcspn(found, " \n"));
        }
    }
    run_result_free(&result);
    return value;
}

/* Whether `state` is a word of the space-separated `states`. */
static bool state_among(const char *state, const char *states)
{
    size_t length = strlen(state);
    for (const char *at = states; (at = strstr(at, state)) != NULL; at += length)
        if ((at == states || at[-1] == ' ') && (at[length] == ' ' || at[length] == '\0'))
            return true;
    return false;
}

char *slurm_wait_for_state(const struct slurm_cluster *cluster, unsigned long job,
                           const char *states, double timeout_seconds)
{
    double deadline = harness_monotonic_seconds() + timeout_seconds;
    char *state = NULL;
    while (harness_monotonic_seconds() < deadline) {
        free(state);
        state = slurm_job_field(cluster, job, "JobState");
        if (state != NULL && state_among(state, states))
            return state;
        usleep(100000);
    }
    char *reason = slurm_job_field(cluster, job, "Reason");
    cr_assert_fail("job %lu never reached %s in %.0f s: it is %s (reason %s)", job, states,
                   timeout_seconds, state ? state : "unknown", reason ? reason : "none");
    return NULL;
}

void slurm_control(const struct slurm_cluster *cluster, char *const arguments[])
{
    char *argv[32] = {"scontrol"};
    size_t used = 1;
    for (size_t i = 0; arguments[i] != NULL && used < 31; i++)
        argv[used++] = arguments[i];
    argv[used] = NULL;
    struct run_result result;
    slurm_run(cluster, &result, argv, NULL, 30);
    cr_assert_eq(result.status, 0, "scontrol %s %s: %s%s", arguments[0],
                 arguments[1] ? arguments[1] : "", result.out, result.err);
    run_result_free(&result);
}

void slurm_release_requeued(const struct slurm_cluster *cluster, unsigned long job)
{
    free(slurm_wait_for_state(cluster, job, "PENDING", 60));
    /* the last run ended before the job was seen pending: a start in a
     * later second than that is accepted */
    time_t seen = time(NULL);
    while (time(NULL) <= seen)
        usleep(20000);
    char job_setting[48];
    snprintf(job_setting, sizeof job_setting, "JobId=%lu", job);
    slurm_control(cluster, (char *[]){"update", job_setting, "StartTime=now", NULL});
}
