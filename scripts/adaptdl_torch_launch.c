/* adaptdl_torch_launch.c - adaptdl-torch-launch, the launcher of a PyTorch
 * job's replicas for `adaptdl-wrap --launcher torch` (adaptdl-wrap(1)
 * "PYTORCH JOBS").  Debian's torchrun does not run, so the replicas are started
 * here, with the variables torchrun gives them, and supervised the way
 * adaptdl-wrap expects of mpirun:
 *
 *   adaptdl-torch-launch -n N [--hostfile FILE] [--agent CMD] [--preload LIB]
 *                        [--master-port PORT] [--grace SECONDS] [-x NAME[=VALUE]]...
 *                        -- COMMAND [ARGS...]
 *
 * - every replica gets MASTER_ADDR, MASTER_PORT (a free port found at each
 *   launch unless given), WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE,
 *   GROUP_RANK, and LD_PRELOAD=LIB (the preload reaches the replicas only,
 *   never this launcher); ADAPTDL_NUM_NODES too when the hosts in use run
 *   unequal numbers of replicas (else the shim takes WORLD_SIZE /
 *   LOCAL_WORLD_SIZE);
 * - SIGUSR1 and SIGUSR2 are forwarded to every replica (the shim's graceful
 *   stop, as mpirun forwards them); SIGTERM, SIGINT or SIGHUP stop the
 *   replicas at once: SIGTERM, then SIGKILL after the grace;
 * - the job's status follows runtime/replica_outcome.h: the first crash
 *   stops the others at once and is the status; a replica's 143 asks the
 *   others to stop; 0 when every replica finished;
 * - the replicas die with the launcher (PR_SET_PDEATHSIG), remote ones
 *   through their control channel (below).
 *
 * With --hostfile the replicas fill the hosts' slots in order
 * (runtime/replica_placement.h).  A host that is this machine (localhost,
 * 127.0.0.1, or its host name) runs its replicas directly; another one
 * through the agent command (default "ssh", split at spaces, as Open MPI's
 * plm_rsh_agent): `AGENT HOST 'SHELL COMMAND'`.  The remote command changes
 * to this launcher's directory (a shared file system is assumed, as for the
 * shim's state), sets the variables (ADAPTDL_*, PYTHONPATH,
 * GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, -x ones and the
 * replica's place), and runs the replica with a small
 * reader of its standard input beside it: each line the launcher writes
 * there is a signal name sent to the replica, and the end of the input
 * (the launcher or the agent died) kills it.  MASTER_ADDR is then the first
 * host in use (this machine's name when that is a local one). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock_time.h"
#include "replica_outcome.h"
#include "remote_command.h"
#include "replica_placement.h"

#define PROGRAM "adaptdl-torch-launch"
#define DEFAULT_GRACE_SECONDS 10.0
#define MAX_EXTRA_VARIABLES 64
#define HOSTFILE_MAX_BYTES (1 << 20)

extern char **environ;

struct launch_options {
    uint32_t replicas;
    const char *hostfile;
    const char *agent;
    const char *preload;
    unsigned master_port;          /* 0: find a free one */
    double grace_seconds;
    const char *extra[MAX_EXTRA_VARIABLES];   /* -x NAME[=VALUE] */
    size_t extra_count;
    char **command;
};

struct replica_process {
    pid_t pid;
    bool running;
    bool remote;
    int control;                   /* remote: the agent's stdin, else -1 */
};

static struct replica_process *replicas;
static uint32_t replica_count;

static void usage_error(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    fprintf(stderr, PROGRAM ": ");
    vfprintf(stderr, format, arguments);
    va_end(arguments);
    fprintf(stderr, " (see " PROGRAM " --help)\n");
    exit(2);
}

static void print_help(void)
{
    printf("usage: " PROGRAM " -n N [options] -- COMMAND [ARGS...]\n\n"
           "Starts N replicas of COMMAND as torchrun would (MASTER_ADDR, MASTER_PORT,\n"
           "WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK) and supervises them\n"
           "for adaptdl-wrap --launcher torch.\n\n"
           "  -n N                  the replica count\n"
           "  --hostfile FILE       hosts and slots (HOST [slots=N] lines); replicas fill them\n"
           "                        in order; other machines are reached through the agent\n"
           "  --agent CMD           the remote shell command (default: ssh)\n"
           "  --preload LIB         LD_PRELOAD of the replicas (not of this launcher)\n"
           "  --master-port PORT    the rendezvous port (default: a free port at each launch)\n"
           "  --grace SECONDS       how long replicas may take to stop before the next, harder\n"
           "                        signal (default %.0f)\n"
           "  -x NAME[=VALUE]       one more variable for remote replicas (local ones get the\n"
           "                        whole environment; remote ones get ADAPTDL_*, PYTHONPATH,\n"
           "                        GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME, NCCL_SOCKET_IFNAME)\n\n"
           "SIGUSR1/SIGUSR2 are forwarded to every replica; SIGTERM/SIGINT/SIGHUP stop them at\n"
           "once (SIGTERM, SIGKILL after the grace).  Exit status: 0 when every replica\n"
           "finished; the status of the first replica that crashed (the others are stopped);\n"
           "143 when replicas stopped to be restarted (some may have finished); 2 bad options.\n",
           DEFAULT_GRACE_SECONDS);
}

static uint32_t parse_replica_count(const char *text)
{
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || value < 1 ||
        value > PLACEMENT_MAX_REPLICAS)
        usage_error("-n \"%.40s\" is not accepted: a replica count from 1 to %d", text,
                    PLACEMENT_MAX_REPLICAS);
    return (uint32_t)value;
}

static void parse_options(int argc, char **argv, struct launch_options *options)
{
    *options = (struct launch_options){.agent = "ssh", .grace_seconds = DEFAULT_GRACE_SECONDS};
    int at = 1;
    for (; at < argc; at++) {
        const char *option = argv[at];
        if (strcmp(option, "--") == 0) {
            at++;
            break;
        }
        if (strcmp(option, "-h") == 0 || strcmp(option, "--help") == 0) {
            print_help();
            exit(0);
        }
        if (option[0] != '-')
            usage_error("\"%.80s\": the command comes after --", option);
        if (at + 1 >= argc)
            usage_error("%.40s needs a value", option);
        const char *value = argv[++at];
        if (strcmp(option, "-n") == 0) {
            options->replicas = parse_replica_count(value);
        } else if (strcmp(option, "--hostfile") == 0) {
            options->hostfile = value;
        } else if (strcmp(option, "--agent") == 0) {
            if (strspn(value, " \t") == strlen(value))
                usage_error("--agent is empty: a remote shell command such as ssh");
            options->agent = value;
        } else if (strcmp(option, "--preload") == 0) {
            options->preload = value;
        } else if (strcmp(option, "--master-port") == 0) {
            char *end = NULL;
            unsigned long port = strtoul(value, &end, 10);
            if (value[0] < '0' || value[0] > '9' || *end != '\0' || port < 1 || port > 65535)
                usage_error("--master-port \"%.40s\" is not accepted: a port from 1 to 65535",
                            value);
            options->master_port = (unsigned)port;
        } else if (strcmp(option, "--grace") == 0) {
            char *end = NULL;
            double seconds = strtod(value, &end);
            if (value[0] == '\0' || *end != '\0' || !isfinite(seconds) || seconds < 0)
                usage_error("--grace \"%.40s\" is not accepted: a number of seconds >= 0",
                            value);
            options->grace_seconds = seconds;
        } else if (strcmp(option, "-x") == 0) {
            size_t name_length = strcspn(value, "=");
            if (name_length == 0 || strspn(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq"
                                                  "rstuvwxyz0123456789_") != name_length)
                usage_error("-x \"%.40s\" is not accepted: NAME or NAME=VALUE", value);
            if (options->extra_count == MAX_EXTRA_VARIABLES)
                usage_error("more than %d -x variables", MAX_EXTRA_VARIABLES);
            options->extra[options->extra_count++] = value;
        } else {
            usage_error("unknown option \"%.40s\"", option);
        }
    }
    if (options->replicas == 0)
        usage_error("no replica count: give -n N");
    if (at >= argc)
        usage_error("no command: give it after --");
    options->command = argv + at;
}

/* --- hosts ------------------------------------------------------------------ */

static void read_hostfile(const char *path, struct hostfile *hosts)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        usage_error("--hostfile \"%.200s\" cannot be read: %s", path, strerror(errno));
    char *text = malloc(HOSTFILE_MAX_BYTES + 1);
    if (text == NULL)
        usage_error("out of memory reading --hostfile");
    size_t length = fread(text, 1, HOSTFILE_MAX_BYTES + 1, file);
    bool failed = ferror(file) != 0;
    fclose(file);
    if (failed || length > HOSTFILE_MAX_BYTES)
        usage_error("--hostfile \"%.200s\" cannot be read: %s", path,
                    failed ? "read error" : "larger than 1 MiB");
    char error[512];
    if (hostfile_parse(text, length, hosts, error, sizeof error) != 0)
        usage_error("--hostfile \"%.200s\": %s", path, error);
    free(text);
}

static char this_host[256];

/* A host name that means this machine: started without the agent. */
static bool host_is_local(const char *name)
{
    return strcmp(name, "localhost") == 0 || strcmp(name, "127.0.0.1") == 0 ||
           strcmp(name, "::1") == 0 || strcmp(name, this_host) == 0;
}

/* The port of a socket bound to port 0: free now.  Another process may
 * take it before the replicas do (as with any launcher that picks one);
 * the next launch picks again. */
static unsigned find_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t length = sizeof address;
    unsigned port = 0;
    if (bind(fd, (struct sockaddr *)&address, sizeof address) == 0 &&
        getsockname(fd, (struct sockaddr *)&address, &length) == 0)
        port = ntohs(address.sin_port);
    close(fd);
    return port;
}

/* --- environments ------------------------------------------------------------- */

/* A growable list of "NAME=VALUE" strings. */
struct variable_list {
    char **items;
    size_t count, capacity;
};

static void out_of_memory(void)
{
    fprintf(stderr, PROGRAM ": out of memory\n");
    exit(1);
}

static void list_push(struct variable_list *list, char *item)
{
    if (list->count + 2 > list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 64;
        char **items = realloc(list->items, capacity * sizeof *items);
        if (items == NULL)
            out_of_memory();
        list->items = items;
        list->capacity = capacity;
    }
    list->items[list->count++] = item;
    list->items[list->count] = NULL;
}

static char *format_variable(const char *name, const char *value)
{
    char *item = NULL;
    if (asprintf(&item, "%s=%s", name, value) < 0)
        out_of_memory();
    return item;
}

/* Replaces NAME in the list, or adds it. */
static void list_set(struct variable_list *list, const char *name, const char *value)
{
    size_t length = strlen(name);
    char *item = format_variable(name, value);
    for (size_t i = 0; i < list->count; i++)
        if (strncmp(list->items[i], name, length) == 0 && list->items[i][length] == '=') {
            list->items[i] = item;
            return;
        }
    list_push(list, item);
}

static bool variable_named(const char *item, const char *name)
{
    size_t length = strlen(name);
    return strncmp(item, name, length) == 0 && item[length] == '=';
}

/* What a replica is told about its place in the job. */
struct replica_settings {
    char master_addr[256];
    unsigned master_port;
    uint32_t world_size;
    const char *node_count;        /* ADAPTDL_NUM_NODES to add, or NULL */
};

static void set_place_variables(struct variable_list *list, const struct replica_settings *job,
                                const struct replica_place *place, const char *preload)
{
    char number[32];
    list_set(list, "MASTER_ADDR", job->master_addr);
    snprintf(number, sizeof number, "%u", job->master_port);
    list_set(list, "MASTER_PORT", number);
    snprintf(number, sizeof number, "%u", (unsigned)job->world_size);
    list_set(list, "WORLD_SIZE", number);
    snprintf(number, sizeof number, "%u", (unsigned)place->rank);
    list_set(list, "RANK", number);
    snprintf(number, sizeof number, "%u", (unsigned)place->local_rank);
    list_set(list, "LOCAL_RANK", number);
    snprintf(number, sizeof number, "%u", (unsigned)place->local_world_size);
    list_set(list, "LOCAL_WORLD_SIZE", number);
    snprintf(number, sizeof number, "%u", (unsigned)place->group_rank);
    list_set(list, "GROUP_RANK", number);
    if (job->node_count != NULL)
        list_set(list, "ADAPTDL_NUM_NODES", job->node_count);
    if (preload != NULL)
        list_set(list, "LD_PRELOAD", preload);
}

/* A local replica: this process's whole environment (minus its LD_PRELOAD,
 * which is not the replicas') plus its place. */
static char **local_environment(const struct replica_settings *job,
                                const struct replica_place *place, const char *preload)
{
    struct variable_list list = {0};
    for (char **item = environ; *item != NULL; item++)
        if (!variable_named(*item, "LD_PRELOAD"))
            list_push(&list, *item);
    set_place_variables(&list, job, place, preload);
    return list.items;
}

/* --- remote command lines ------------------------------------------------------- */

/* What picks the network the replicas' collectives use: a remote shell
 * such as ssh passes no variable on, and a replica that binds gloo to the
 * address its host name resolves to (often 127.0.1.1 on Debian) cannot be
 * reached by the others; set once here, the name reaches every host. */
static const char *const network_variables[] = {"GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME",
                                                "NCCL_SOCKET_IFNAME", NULL};

static bool is_network_variable(const char *item)
{
    for (size_t i = 0; network_variables[i] != NULL; i++)
        if (variable_named(item, network_variables[i]))
            return true;
    return false;
}

/* The line for the remote shell (runtime/remote_command.h): every ADAPTDL_*
 * variable, PYTHONPATH, the network ones above, the -x ones, the replica's
 * place and the preload. */
static char *remote_replica_line(const struct launch_options *options,
                                 const struct replica_settings *job,
                                 const struct replica_place *place)
{
    struct variable_list list = {0};
    for (char **item = environ; *item != NULL; item++)
        if (strncmp(*item, "ADAPTDL_", 8) == 0 || variable_named(*item, "PYTHONPATH") ||
            is_network_variable(*item))
            list_push(&list, *item);
    for (size_t i = 0; i < options->extra_count; i++) {
        const char *extra = options->extra[i];
        const char *equals = strchr(extra, '=');
        if (equals != NULL) {
            char *name = strndup(extra, (size_t)(equals - extra));
            if (name == NULL)
                out_of_memory();
            list_set(&list, name, equals + 1);
            free(name);
        } else if (getenv(extra) != NULL) {
            list_set(&list, extra, getenv(extra));
        }
    }
    set_place_variables(&list, job, place, options->preload);
    char directory[PATH_MAX];
    char *line = remote_command_line(getcwd(directory, sizeof directory), list.items,
                                     options->command);
    if (line == NULL)
        out_of_memory();
    free(list.items);
    return line;
}

/* The agent's words (split at blanks), the host and the command line. */
static char **agent_argv(const char *agent, const char *host, char *command_line)
{
    struct variable_list words = {0};
    char *copy = strdup(agent);
    if (copy == NULL)
        out_of_memory();
    char *saved = NULL;
    for (char *word = strtok_r(copy, " \t", &saved); word != NULL;
         word = strtok_r(NULL, " \t", &saved))
        list_push(&words, word);
    list_push(&words, (char *)host);
    list_push(&words, command_line);
    return words.items;
}

/* --- starting and signalling ---------------------------------------------------- */

static sigset_t handled_signals;
static pid_t launcher_pid;

/* In a child, before exec: die with the launcher (also if it died while
 * this child was being forked), take the default dispositions and the
 * launcher's blocked signals back. */
static void prepare_child(void)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != launcher_pid)
        _exit(137);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &handled_signals, NULL);
}

static int start_local_replica(struct replica_process *process, char **command,
                               char **environment)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prepare_child();
        execvpe(command[0], command, environment);
        fprintf(stderr, PROGRAM ": cannot run \"%s\": %s\n", command[0], strerror(errno));
        _exit(127);
    }
    *process = (struct replica_process){.pid = pid, .running = true, .control = -1};
    return 0;
}

static int start_remote_replica(struct replica_process *process, char **agent_words)
{
    int channel[2];
    if (pipe2(channel, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(channel[0]);
        close(channel[1]);
        return -1;
    }
    if (pid == 0) {
        prepare_child();
        if (dup2(channel[0], STDIN_FILENO) < 0)
            _exit(127);
        execvp(agent_words[0], agent_words);
        fprintf(stderr, PROGRAM ": cannot run the agent \"%s\": %s\n", agent_words[0],
                strerror(errno));
        _exit(127);
    }
    close(channel[0]);
    fcntl(channel[1], F_SETFL, O_NONBLOCK);
    *process = (struct replica_process){
        .pid = pid, .running = true, .remote = true, .control = channel[1]};
    return 0;
}

static const char *signal_name(int signal_number)
{
    switch (signal_number) {
    case SIGUSR1: return "USR1";
    case SIGUSR2: return "USR2";
    case SIGTERM: return "TERM";
    case SIGINT: return "INT";
    default: return "KILL";
    }
}

/* Sends a signal to every replica still running: directly to local ones,
 * as a line on the control channel to remote ones (an agent such as ssh
 * would die of the signal itself); SIGKILL kills the agent too. */
static void signal_replicas(int signal_number)
{
    for (uint32_t rank = 0; rank < replica_count; rank++) {
        struct replica_process *process = &replicas[rank];
        if (!process->running)
            continue;
        if (!process->remote) {
            kill(process->pid, signal_number);
            continue;
        }
        char line[16];
        int length = snprintf(line, sizeof line, "%s\n", signal_name(signal_number));
        /* a failed write means the agent is gone: its end is reaped as any other */
        if (process->control >= 0 && write(process->control, line, (size_t)length) < 0)
            errno = 0;
        if (signal_number == SIGKILL)
            kill(process->pid, SIGKILL);
    }
}

/* --- supervision ------------------------------------------------------------------- */

/* The harder signals still to send, and when. */
struct escalation {
    int signals[2];
    size_t count;
    double next_time;
    double grace;
};

static void escalate_from(struct escalation *escalation, int first, int second)
{
    escalation->signals[0] = first;
    escalation->signals[1] = second;
    escalation->count = second != 0 ? 2 : 1;
    escalation->next_time = clock_monotonic_seconds() + escalation->grace;
}

static void describe_end(char *out, size_t size, int wait_status)
{
    if (WIFSIGNALED(wait_status))
        snprintf(out, size, "was killed by signal %d", WTERMSIG(wait_status));
    else
        snprintf(out, size, "exited with status %d", WEXITSTATUS(wait_status));
}

static void reap_replicas(struct replica_outcome *outcome, struct escalation *escalation)
{
    for (;;) {
        int wait_status = 0;
        pid_t pid = waitpid(-1, &wait_status, WNOHANG);
        if (pid <= 0)
            return;
        uint32_t rank = 0;
        while (rank < replica_count && replicas[rank].pid != pid)
            rank++;
        if (rank == replica_count || !replicas[rank].running)
            continue;
        replicas[rank].running = false;
        if (replicas[rank].control >= 0) {
            close(replicas[rank].control);
            replicas[rank].control = -1;
        }
        int status = replica_outcome_status_of(wait_status);
        char how[64];
        describe_end(how, sizeof how, wait_status);
        switch (replica_outcome_replica_ended(outcome, rank, status)) {
        case REPLICA_OUTCOME_STOP_OTHERS:
            if (!replica_outcome_all_ended(outcome)) {
                fprintf(stderr, PROGRAM ": replica %u stopped (status 143): stopping the "
                                "others gracefully\n", (unsigned)rank);
                signal_replicas(SIGUSR1);
                escalate_from(escalation, SIGTERM, SIGKILL);
            }
            break;
        case REPLICA_OUTCOME_TERMINATE_OTHERS:
            fprintf(stderr, PROGRAM ": replica %u (pid %d) %s: %s\n", (unsigned)rank, (int)pid,
                    how, replica_outcome_all_ended(outcome) ? "the job crashed"
                                                           : "stopping the others");
            if (!replica_outcome_all_ended(outcome)) {
                signal_replicas(SIGTERM);
                escalate_from(escalation, SIGKILL, 0);
            }
            break;
        case REPLICA_OUTCOME_NOTHING:
            break;
        }
    }
}

static int supervise(struct escalation *escalation)
{
    struct replica_outcome outcome;
    replica_outcome_init(&outcome, replica_count);
    while (!replica_outcome_all_ended(&outcome)) {
        struct timespec timeout = {.tv_sec = 3600};
        if (escalation->count > 0) {
            double left = escalation->next_time - clock_monotonic_seconds();
            if (left <= 0) {
                int next = escalation->signals[0];
                escalation->signals[0] = escalation->signals[1];
                escalation->count--;
                escalation->next_time = clock_monotonic_seconds() + escalation->grace;
                fprintf(stderr, PROGRAM ": replicas still running %.3g s later: SIG%s\n",
                        escalation->grace, signal_name(next));
                signal_replicas(next);
                continue;
            }
            timeout.tv_sec = (time_t)left;
            timeout.tv_nsec = (long)((left - (double)timeout.tv_sec) * 1e9);
        }
        int signal_number = sigtimedwait(&handled_signals, NULL, &timeout);
        if (signal_number < 0)
            continue;   /* timeout or EINTR: the loop looks again */
        switch (signal_number) {
        case SIGCHLD:
            reap_replicas(&outcome, escalation);
            break;
        case SIGUSR1:
            replica_outcome_stop_requested(&outcome);
            signal_replicas(SIGUSR1);
            break;
        case SIGUSR2:
            signal_replicas(SIGUSR2);
            break;
        default:   /* SIGTERM, SIGINT, SIGHUP: at once */
            replica_outcome_stop_requested(&outcome);
            signal_replicas(SIGTERM);
            escalate_from(escalation, SIGKILL, 0);
            break;
        }
    }
    return replica_outcome_job_status(&outcome);
}

int main(int argc, char **argv)
{
    struct launch_options options;
    parse_options(argc, argv, &options);
    launcher_pid = getpid();
    if (gethostname(this_host, sizeof this_host - 1) != 0)
        this_host[0] = '\0';

    struct hostfile *hosts = malloc(sizeof *hosts);
    struct replica_placement *placement = malloc(sizeof *placement);
    if (hosts == NULL || placement == NULL)
        out_of_memory();
    if (options.hostfile != NULL)
        read_hostfile(options.hostfile, hosts);
    else
        hostfile_single_local(hosts, options.replicas);
    char error[512];
    if (replica_placement_plan(hosts, options.replicas, placement, error, sizeof error) != 0)
        usage_error("%s", error);

    struct replica_settings job = {.world_size = options.replicas};
    bool all_local = true;
    for (uint32_t i = 0; i < placement->host_count; i++)
        all_local = all_local && host_is_local(hosts->hosts[placement->uses[i].host].name);
    const char *first_host = hosts->hosts[placement->uses[0].host].name;
    if (all_local)
        snprintf(job.master_addr, sizeof job.master_addr, "127.0.0.1");
    else
        snprintf(job.master_addr, sizeof job.master_addr, "%s",
                 host_is_local(first_host) && this_host[0] != '\0' ? this_host : first_host);
    job.master_port = options.master_port != 0 ? options.master_port : find_free_port();
    if (job.master_port == 0) {
        fprintf(stderr, PROGRAM ": no free port for MASTER_PORT: %s (give --master-port)\n",
                strerror(errno));
        return 1;
    }
    char node_count[32];
    if (getenv("ADAPTDL_NUM_NODES") == NULL && !replica_placement_is_even(placement)) {
        snprintf(node_count, sizeof node_count, "%u", (unsigned)placement->host_count);
        job.node_count = node_count;
    }

    /* Signals are taken synchronously (sigtimedwait): blocked before the
     * first fork, so that none is lost between starts. */
    sigemptyset(&handled_signals);
    int handled[] = {SIGCHLD, SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
        sigaddset(&handled_signals, handled[i]);
    sigprocmask(SIG_BLOCK, &handled_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    replica_count = options.replicas;
    replicas = calloc(replica_count, sizeof *replicas);
    if (replicas == NULL)
        out_of_memory();
    struct escalation escalation = {.grace = options.grace_seconds};
    for (uint32_t rank = 0; rank < replica_count; rank++) {
        struct replica_place place;
        replica_placement_of_rank(placement, rank, &place);
        const char *host = hosts->hosts[place.host].name;
        int started;
        if (host_is_local(host)) {
            char **environment = local_environment(&job, &place, options.preload);
            started = start_local_replica(&replicas[rank], options.command, environment);
            free(environment);
        } else {
            char *command_line = remote_replica_line(&options, &job, &place);
            char **words = agent_argv(options.agent, host, command_line);
            started = start_remote_replica(&replicas[rank], words);
            free(words);
            free(command_line);
        }
        if (started != 0) {
            fprintf(stderr, PROGRAM ": cannot start replica %u: %s; stopping the others\n",
                    (unsigned)rank, strerror(errno));
            /* the ones not started count as crashed with status 1 */
            replica_count = rank;
            signal_replicas(SIGTERM);
            escalate_from(&escalation, SIGKILL, 0);
            supervise(&escalation);
            return 1;
        }
    }
    return supervise(&escalation);
}
