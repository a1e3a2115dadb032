/* harness.c - running programs under the shim from Criterion tests (see
 * harness.h). */
#include "harness.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tools/probe_common.h"

extern char **environ;

const char *harness_build_path(const char *relative)
{
    static __thread char path[PATH_MAX];
    const char *build = getenv("ADAPTSHIM_BUILD");
    char base[PATH_MAX / 2];
    if (build == NULL)
        build = "build";
    if (build[0] == '/') {
        snprintf(base, sizeof base, "%s", build);
    } else {
        char cwd[PATH_MAX / 4];
        if (getcwd(cwd, sizeof cwd) == NULL)
            abort();
        snprintf(base, sizeof base, "%s/%s", cwd, build);
    }
    snprintf(path, sizeof path, "%s/%s", base, relative);
    return path;
}

/* Every test's directories live under one root per run of the suite, made
 * before the first test and removed after the last one when none failed, so
 * that a green run leaves nothing in /tmp and a red one keeps everything for
 * inspection.  Tests run in forked workers: they find the root in the
 * environment the runner set (HARNESS_ROOT_VARIABLE). */
ReportHook(PRE_ALL)(struct criterion_test_set *tests)
{
    (void)tests;
    char root[] = "/tmp/adaptshim-tests-XXXXXX";
    if (mkdtemp(root) == NULL || setenv(HARNESS_ROOT_VARIABLE, root, 1) != 0)
        abort();
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    const char *root = getenv(HARNESS_ROOT_VARIABLE);
    if (root == NULL)
        return;
    if (stats->tests_failed == 0 && stats->tests_crashed == 0)
        harness_remove_tree(root);
    else
        fprintf(stderr, "integration tests: the failed tests' files are in %s\n", root);
}

const char *harness_temp_dir(void)
{
    const char *root = getenv(HARNESS_ROOT_VARIABLE);
    char *directory = NULL;
    if (asprintf(&directory, "%s/adaptshim-test-XXXXXX", root != NULL ? root : "/tmp") < 0 ||
        mkdtemp(directory) == NULL)
        abort();
    return directory;
}

char *harness_path_in(const char *directory, const char *name)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", directory, name) < 0)
        abort();
    return path;
}

static int harness_remove_entry(const char *path, const struct stat *status, int type,
                                struct FTW *where)
{
    (void)status, (void)type, (void)where;
    return remove(path);
}

void harness_remove_tree(const char *directory)
{
    nftw(directory, harness_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A test's programs keep their temporary files (Open MPI's session
 * directory, Python's multiprocessing sockets, what a killed trainer never
 * removed) under the run's root, which goes with it, unless the test names
 * a TMPDIR itself. */
static char *harness_tmpdir_setting(char *const additions[])
{
    for (size_t i = 0; additions != NULL && additions[i] != NULL; i++)
        if (strncmp(additions[i], "TMPDIR=", 7) == 0)
            return NULL;
    const char *root = getenv(HARNESS_ROOT_VARIABLE);
    char *line = NULL;
    if (root == NULL || asprintf(&line, "TMPDIR=%s", root) < 0)
        return NULL;
    return line;
}

static char **harness_environment(char *const additions[], bool preload)
{
    size_t count = 0;
    for (char **entry = environ; *entry; entry++)
        count++;
    size_t added = 0;
    while (additions != NULL && additions[added] != NULL)
        added++;
    char **environment = calloc(count + added + 3, sizeof *environment);
    size_t used = 0;
    char *tmpdir = harness_tmpdir_setting(additions);
    /* Slurm's and PMIx's variables too: a suite run inside a Slurm job
     * (sbatch make check) must not hand the job's allocation and layout to
     * every program it starts; the Slurm tests add their own. */
    for (char **entry = environ; *entry; entry++) {
        if (strncmp(*entry, "ADAPTDL_", 8) == 0 || strncmp(*entry, "LD_PRELOAD=", 11) == 0 ||
            strncmp(*entry, "SLURM_", 6) == 0 || strncmp(*entry, "PMIX_", 5) == 0 ||
            (tmpdir != NULL && strncmp(*entry, "TMPDIR=", 7) == 0))
            continue;
        environment[used++] = *entry;
    }
    if (tmpdir != NULL)
        environment[used++] = tmpdir;
    for (size_t i = 0; i < added; i++)
        environment[used++] = additions[i];
    if (preload) {
        char *line = NULL;
        if (asprintf(&line, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so")) < 0)
            abort();
        environment[used++] = line;
    }
    environment[used] = NULL;
    return environment;
}

/* A test's program starts with every signal at its default and none
 * blocked, whatever the suite inherited: make run in the background of a
 * non-interactive shell ignores SIGINT and SIGQUIT, and a shell started
 * with a signal ignored can never trap it (the wrapper is a shell script). */
static void harness_reset_signals(void)
{
    static const int signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        signal(signals[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

pid_t harness_start(char *const argv[], char *const environment[], bool preload,
                    const char *out_path, const char *err_path)
{
    char **full_environment = harness_environment(environment, preload);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        harness_reset_signals();
        int in = open("/dev/null", O_RDONLY);
        dup2(in, 0);
        if (out_path) {
            int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(out, 1);
        }
        if (err_path) {
            int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(err, 2);
        }
        execve(argv[0], argv, full_environment);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    free(full_environment);
    return pid;
}

char *const harness_mpirun_as_root[] = {"OMPI_ALLOW_RUN_AS_ROOT=1",
                                        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", NULL};

pid_t harness_start_mpirun(char *const argv[], const char *out)
{
    char *err = NULL;
    if (asprintf(&err, "%s.err", out) < 0)
        abort();
    pid_t pid = harness_start(argv, harness_mpirun_as_root, false, out, err);
    free(err);
    return pid;
}

void harness_expect_intercepted_imports(const char *program, const char *const symbols[])
{
    char *inspect = strdup(harness_build_path("adaptdl-inspect"));
    char *path = strdup(harness_build_path(program));
    char *argv[] = {inspect, path, NULL};
    struct run_result result;
    harness_run(&result, argv, NULL, false, 60);
    const char *intercepted = result.out ? strstr(result.out, "Intercepted by the shim:") : NULL;
    cr_assert(intercepted != NULL, "adaptdl-inspect %s: status %d\n%s%s", program,
              result.status, result.out ? result.out : "", result.err ? result.err : "");
    const char *section_end = strstr(intercepted, "\n\n");
    for (size_t i = 0; symbols[i] != NULL; i++) {
        const char *found = strstr(intercepted, symbols[i]);
        cr_expect(found != NULL && (section_end == NULL || found < section_end),
                  "%s does not import %s through the shim:\n%s", program, symbols[i],
                  result.out);
    }
    run_result_free(&result);
    free(path);
    free(inspect);
}

double harness_monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* A wait status as harness_run reports it. */
static int harness_status_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return HARNESS_KILLED_BY(WTERMSIG(status));
}

/* Reaps pid (polled every 2 ms); past timeout_seconds, first kills with
 * SIGKILL the processes that would outlive it (when kill_first is not
 * NULL), then pid itself.  Returns harness_status_of its wait status. */
static int harness_wait_or_kill(pid_t pid, double timeout_seconds,
                                void (*kill_first)(pid_t pid))
{
    double deadline = harness_monotonic_seconds() + timeout_seconds;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (harness_monotonic_seconds() > deadline) {
            if (kill_first != NULL)
                kill_first(pid);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(2000);
    }
    return harness_status_of(status);
}

int harness_wait(pid_t pid, double timeout_seconds)
{
    return harness_wait_or_kill(pid, timeout_seconds, NULL);
}

/* The children of a process, from /proc/PID/task/TID/children of each of
 * its threads (mpirun may fork its ranks from a thread of its own); at
 * most `capacity` are stored, and their number is returned. */
static size_t harness_children(pid_t parent, pid_t *children, size_t capacity)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)parent);
    DIR *tasks = opendir(path);
    if (tasks == NULL)
        return 0;  /* it has ended */
    size_t count = 0;
    for (struct dirent *task; (task = readdir(tasks)) != NULL;) {
        if (task->d_name[0] == '.')
            continue;
        char list_path[128];
        snprintf(list_path, sizeof list_path, "/proc/%d/task/%.20s/children", (int)parent,
                 task->d_name);
        FILE *list = fopen(list_path, "r");
        if (list == NULL)
            continue;  /* the thread has ended */
        for (int child; count < capacity && fscanf(list, "%d", &child) == 1;)
            children[count++] = (pid_t)child;
        fclose(list);
    }
    closedir(tasks);
    return count;
}

/* Whether process `pid` was started with `setting` ("NAME=VALUE") in its
 * environment. */
static bool harness_process_has_setting(pid_t pid, const char *setting)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    size_t size = 0;
    char *environment = harness_read_file(path, &size);
    if (environment == NULL)
        return false;  /* it has ended */
    bool found = false;
    for (size_t at = 0; at < size && !found; at += strlen(environment + at) + 1)
        found = strcmp(environment + at, setting) == 0;
    free(environment);
    return found;
}

pid_t harness_mpirun_rank_pid(pid_t mpirun, unsigned rank)
{
    char setting[64];
    snprintf(setting, sizeof setting, "OMPI_COMM_WORLD_RANK=%u", rank);
    pid_t children[64];
    size_t count = harness_children(mpirun, children, sizeof children / sizeof children[0]);
    for (size_t i = 0; i < count; i++)
        if (harness_process_has_setting(children[i], setting))
            return children[i];
    return 0;
}

/* Ranks outlive a killed mpirun, waiting in a collective for ever: they go
 * first. */
static void harness_kill_ranks(pid_t mpirun)
{
    pid_t ranks[64];
    size_t count = harness_children(mpirun, ranks, sizeof ranks / sizeof ranks[0]);
    for (size_t i = 0; i < count; i++)
        kill(ranks[i], SIGKILL);
}

int harness_wait_mpirun(pid_t mpirun, double timeout_seconds)
{
    return harness_wait_or_kill(mpirun, timeout_seconds, harness_kill_ranks);
}

const char *harness_describe_status(int status)
{
    static __thread char text[64];
    if (status < 0)
        snprintf(text, sizeof text, "killed by signal %d (%s)", -status, strsignal(-status));
    else
        snprintf(text, sizeof text, "exit status %d", status);
    return text;
}

int harness_run(struct run_result *result, char *const argv[], char *const environment[],
                bool preload, double timeout_seconds)
{
    const char *directory = harness_temp_dir();
    char *out_path = harness_path_in(directory, "stdout");
    char *err_path = harness_path_in(directory, "stderr");
    pid_t pid = harness_start(argv, environment, preload, out_path, err_path);
    result->status = harness_wait(pid, timeout_seconds);
    result->out = harness_read_file(out_path, NULL);
    result->err = harness_read_file(err_path, NULL);
    unlink(out_path);
    unlink(err_path);
    rmdir(directory);
    free((char *)directory);
    free(out_path);
    free(err_path);
    return result->status;
}

void run_result_free(struct run_result *result)
{
    free(result->out);
    free(result->err);
    result->out = result->err = NULL;
}

char *harness_read_file(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    /* read to the end, not to st_size: /proc files report size 0 */
    struct stat status;
    size_t capacity = fstat(fd, &status) == 0 && status.st_size > 0 ? (size_t)status.st_size
                                                                     : 4096;
    char *data = malloc(capacity + 1);
    size_t total = 0;
    for (;;) {
        if (total == capacity) {
            capacity *= 2;
            data = realloc(data, capacity + 1);
        }
        ssize_t got = read(fd, data + total, capacity - total);
        if (got <= 0)
            break;
        total += (size_t)got;
    }
    close(fd);
    data[total] = '\0';
    if (size)
        *size = total;
    return data;
}

int harness_write_file(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    ssize_t written = write(fd, data, size);
    close(fd);
    return written == (ssize_t)size ? 0 : -1;
}

static void harness_run_generator(char *const argv[])
{
    struct run_result result;
    if (harness_run(&result, argv, NULL, false, 60) != 0) {
        fprintf(stderr, "generator failed: %s", result.err ? result.err : "");
        abort();
    }
    run_result_free(&result);
}

void harness_generate_dataset(const char *path, uint64_t records, unsigned dim, uint64_t seed)
{
    char records_text[32], dim_text[32], seed_text[32];
    snprintf(records_text, sizeof records_text, "%llu", (unsigned long long)records);
    snprintf(dim_text, sizeof dim_text, "%u", dim);
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    char *generator = strdup(harness_build_path("tools/gen_dataset"));
    char *argv[] = {generator, "--out", (char *)path, "--records", records_text,
                    "--dim", dim_text, "--seed", seed_text, NULL};
    harness_run_generator(argv);
    free(generator);
}

void dataset_job_init(struct dataset_job *job, uint64_t records, unsigned dim, uint64_t seed)
{
    unsigned record_size = 8 + 4 * dim + 4;  /* id, features, label */
    job->directory = harness_temp_dir();
    job->data = harness_path_in(job->directory, "train.bin");
    harness_generate_dataset(job->data, records, dim, seed);
    snprintf(job->data_setting, sizeof job->data_setting,
             "ADAPTDL_DATA=%s:record=%u:header=16:count=8,u64le,%u", job->data, record_size,
             record_size);
    snprintf(job->state_setting, sizeof job->state_setting, "ADAPTDL_CHECKPOINT_PATH=%s/state",
             job->directory);
    snprintf(job->save_setting, sizeof job->save_setting, "ADAPTDL_SAVE=%s/ck*",
             job->directory);
}

void harness_generate_text(const char *path, uint64_t records, uint64_t seed)
{
    char records_text[32], seed_text[32];
    snprintf(records_text, sizeof records_text, "%llu", (unsigned long long)records);
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    char *generator = strdup(harness_build_path("tools/gen_dataset"));
    char *argv[] = {generator, "--out", (char *)path, "--records", records_text,
                    "--seed", seed_text, "--text", NULL};
    harness_run_generator(argv);
    free(generator);
}

void id_log_parse_lines(struct id_log *log, char *text,
                        bool (*parse_line)(const char *line, struct id_event *event))
{
    memset(log, 0, sizeof *log);
    if (text == NULL)
        return;
    size_t capacity = 1024;
    log->events = malloc(capacity * sizeof *log->events);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        struct id_event event = {0};
        if (!parse_line(line, &event))
            continue;
        if (log->count == capacity) {
            capacity *= 2;
            log->events = realloc(log->events, capacity * sizeof *log->events);
        }
        log->events[log->count++] = event;
    }
    free(text);
}

/* One line of an ids-log as an event; false for a line cut by SIGKILL. */
static bool id_log_parse_line(const char *line, struct id_event *event)
{
    unsigned long long value, epoch;
    if (sscanf(line, "id %llu epoch %llu", &value, &epoch) == 2) {
        event->kind = ID_EVENT_RECORD;
        event->value = value;
        event->epoch = epoch;
    } else if (sscanf(line, "ckpt %llu", &value) == 1) {
        event->kind = ID_EVENT_CHECKPOINT;
        event->value = value;
    } else if (sscanf(line, "step %llu", &value) == 1) {
        event->kind = ID_EVENT_STEP;
        event->value = value;
    } else if (sscanf(line, "epoch_end %llu", &value) == 1) {
        event->kind = ID_EVENT_EPOCH_END;
        event->value = value;
    } else {
        return false;
    }
    return true;
}

int harness_read_id_log(const char *path, struct id_log *log)
{
    /* no file: a run killed before logging anything */
    id_log_parse_lines(log, harness_read_file(path, NULL), id_log_parse_line);
    return 0;
}

void id_log_truncate_to_last_checkpoint(struct id_log *log)
{
    size_t keep = 0;
    for (size_t i = 0; i < log->count; i++)
        if (log->events[i].kind == ID_EVENT_CHECKPOINT)
            keep = i + 1;
    log->count = keep;
}

void id_log_free(struct id_log *log)
{
    free(log->events);
    memset(log, 0, sizeof *log);
}

uint64_t id_log_last_value(const struct id_log *log, enum id_event_kind kind)
{
    uint64_t last = 0;
    for (size_t i = 0; i < log->count; i++)
        if (log->events[i].kind == kind)
            last = log->events[i].value;
    return last;
}

uint64_t harness_last_logged_step(const char *log_path)
{
    struct id_log log;
    harness_read_id_log(log_path, &log);
    uint64_t last = id_log_last_value(&log, ID_EVENT_STEP);
    id_log_free(&log);
    return last;
}

char harness_process_state(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *text = harness_read_file(path, NULL);
    const char *end = text ? strrchr(text, ')') : NULL;
    char state = end != NULL && end[1] == ' ' ? end[2] : 0;
    free(text);
    return state;
}

bool harness_process_running(pid_t pid)
{
    char state = harness_process_state(pid);
    return state != 0 && state != 'Z' && state != 'X';
}

unsigned harness_free_port(void)
{
    int socket_fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(socket_fd, 0);
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    cr_assert_eq(bind(socket_fd, (struct sockaddr *)&address, sizeof address), 0);
    cr_assert_eq(getsockname(socket_fd, (struct sockaddr *)&address, &length), 0);
    close(socket_fd);
    return ntohs(address.sin_port);
}

size_t harness_append_list(char **list, size_t used, size_t capacity, char *const more[])
{
    for (size_t i = 0; more != NULL && more[i] != NULL; i++) {
        cr_assert_lt(used + 1, capacity, "more than %zu entries", capacity - 1);
        list[used++] = more[i];
    }
    cr_assert_lt(used, capacity);
    list[used] = NULL;
    return used;
}

uint64_t harness_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void harness_kill_once_past_step(pid_t pid, const char *log_path, uint64_t step, int attempts)
{
    for (int attempt = 0; attempt < attempts; attempt++) {
        siginfo_t information;
        memset(&information, 0, sizeof information);
        waitid(P_PID, (id_t)pid, &information, WEXITED | WNOHANG | WNOWAIT);
        if (harness_last_logged_step(log_path) >= step || information.si_pid != 0)
            break;
        usleep(500);
    }
    kill(pid, SIGKILL);
}

void id_log_count_committed(const struct id_log *log, uint64_t last_step, unsigned *counts,
                            uint64_t records, uint64_t epochs)
{
    size_t batch_start = 0;
    for (size_t i = 0; i < log->count; i++) {
        const struct id_event *event = &log->events[i];
        if (event->kind == ID_EVENT_RECORD)
            continue;
        if (event->kind == ID_EVENT_STEP && event->value <= last_step) {
            for (size_t j = batch_start; j < i; j++) {
                const struct id_event *record = &log->events[j];
                if (record->kind == ID_EVENT_RECORD && record->epoch < epochs &&
                    record->value < records)
                    counts[record->epoch * records + record->value]++;
            }
        }
        batch_start = i + 1;
    }
}

char *harness_write_script(const char *directory, const char *name, const char *body)
{
    char *path = harness_path_in(directory, name);
    cr_assert_eq(harness_write_file(path, body, strlen(body)), 0);
    cr_assert_eq(chmod(path, 0755), 0);
    return path;
}

void harness_expect_refused_command(char *const argv[], char *const environment[],
                                    size_t index, const char *expected)
{
    struct run_result result;
    harness_run(&result, argv, environment, false, 30);
    cr_expect_eq(result.status, 2, "case %zu: %s", index, result.err);
    cr_expect(strstr(result.err, expected) != NULL, "case %zu: %s", index, result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 1, "one line: %s", result.err);
    run_result_free(&result);
}

void harness_wrapped_job_init(struct harness_wrapped_job *wrapped, uint64_t records,
                              unsigned dim)
{
    dataset_job_init(&wrapped->job, records, dim, 3);
    wrapped->checkpoint = harness_path_in(wrapped->job.directory, "ck");
    wrapped->out = harness_path_in(wrapped->job.directory, "out");
    wrapped->err = harness_path_in(wrapped->job.directory, "err");
}

pid_t harness_start_wrapped_sgd_mpi(const struct harness_wrapped_job *wrapped,
                                    const char *replicas, const char *epochs,
                                    const char *sleep_us, char *const trainer_options[],
                                    char *const environment[])
{
    char *wrapper = strdup(harness_build_path("adaptdl-wrap"));
    char *trainer = strdup(harness_build_path("trainers/sgd_mpi"));
    char *argv[40] = {wrapper, "-n", (char *)replicas, "--mpirun-arg", "--oversubscribe", "--",
                      trainer, "--data", wrapped->job.data, "--epochs", (char *)epochs,
                      "--batch-size", "16", "--lr", "0.01", "--checkpoint",
                      wrapped->checkpoint, "--resume", "--sleep-us", (char *)sleep_us};
    harness_append_list(argv, 20, sizeof argv / sizeof argv[0], trainer_options);
    /* sgd_mpi --resume replays its epochs */
    char *settings[40] = {harness_mpirun_as_root[0], harness_mpirun_as_root[1],
                          (char *)wrapped->job.data_setting, (char *)wrapped->job.state_setting,
                          (char *)wrapped->job.save_setting, "ADAPTDL_RESUME=replay"};
    harness_append_list(settings, 6, sizeof settings / sizeof settings[0], environment);
    pid_t pid = harness_start(argv, settings, false, wrapped->out, wrapped->err);
    free(trainer);
    free(wrapper);
    return pid;
}

char *harness_run_wrapped_sgd_mpi(const struct harness_wrapped_job *wrapped,
                                  const char *replicas, const char *epochs,
                                  const char *sleep_us, char *const environment[])
{
    pid_t pid = harness_start_wrapped_sgd_mpi(wrapped, replicas, epochs, sleep_us, NULL,
                                              environment);
    int status = harness_wait(pid, 280);
    char *log = harness_read_output(wrapped->err);
    cr_assert_eq(status, 0, "the job runs to its end: %s", log);
    return log;
}

const char *harness_source_tree(void)
{
    const char *source = getenv("ADAPTSHIM_SOURCE");
    cr_assert_not_null(source, "ADAPTSHIM_SOURCE (the source tree) is not set; run the "
                               "integration tests through make integration");
    return source;
}

void harness_run_after_install(struct run_result *result, const char *directory,
                               const char *commands)
{
    char *script = NULL;
    if (asprintf(&script,
                 "set -e\n"
                 "make -s -C '%s' BUILD='%s' PREFIX='%s/prefix' install >/dev/null\n"
                 "%s",
                 harness_source_tree(), harness_build_path("."), directory, commands) < 0)
        abort();
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    harness_run(result, argv, NULL, false, 240);
    cr_expect_eq(result->status, 0, "status %d\nstdout %s\nstderr %s", result->status,
                 result->out, result->err);
    free(script);
}

unsigned *harness_count_committed_records(const struct harness_killed_run *killed_runs,
                                          unsigned runs, uint64_t records, uint64_t epochs)
{
    unsigned *counts = calloc(epochs * records, sizeof *counts);
    /* A run killed before it printed where it resumed changed nothing: the
     * cut of run i is the step the first later run that did print resumed at. */
    uint64_t *cuts = calloc(runs, sizeof *cuts);
    uint64_t cut = UINT64_MAX;
    for (unsigned run = runs; run-- > 0;) {
        cuts[run] = cut;
        char *output = harness_read_output(killed_runs[run].outputs[0]);
        if (strstr(output, "resumed at step ") || strstr(output, "starting fresh"))
            cut = harness_resumed_step(output);
        free(output);
    }
    /* A run that started fresh (no checkpoint, or one cut short by a kill
     * inside an in-place write) restarted the whole history. */
    unsigned first_counted = 0;
    for (unsigned run = 0; run < runs; run++) {
        char *output = harness_read_output(killed_runs[run].outputs[0]);
        if (strstr(output, "starting fresh"))
            first_counted = run;
        free(output);
    }
    for (unsigned run = first_counted; run < runs; run++) {
        for (unsigned rank = 0; rank < killed_runs[run].replicas; rank++) {
            struct id_log log;
            harness_read_id_log(killed_runs[run].logs[rank], &log);
            id_log_count_committed(&log, cuts[run], counts, records, epochs);
            id_log_free(&log);
        }
    }
    free(cuts);
    return counts;
}

uint64_t harness_resumed_step(const char *output)
{
    const char *found = output ? strstr(output, "resumed at step ") : NULL;
    if (found == NULL)
        return 0;
    return strtoull(found + strlen("resumed at step "), NULL, 10);
}

char *harness_read_output(const char *path)
{
    char *text = harness_read_file(path, NULL);
    return text ? text : strdup("");
}

uint64_t harness_fnv1a(const void *data, size_t size)
{
    /* the probes' own definition, so that the two hashes cannot drift apart */
    return probe_fnv1a(data, size);
}

size_t harness_count_occurrences(const char *text, const char *needle)
{
    size_t count = 0;
    for (const char *at = text; (at = strstr(at, needle)) != NULL; at += strlen(needle))
        count++;
    return count;
}

void harness_remove_temp_dir(const char *directory)
{
    /* only what harness_temp_dir() made: a wrong argument must not wipe
     * anything else */
    if (directory == NULL || strstr(directory, "/adaptshim-test-") == NULL)
        return;
    harness_remove_tree(directory);
}
