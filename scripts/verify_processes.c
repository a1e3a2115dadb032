/* verify_processes.c - starting, watching, killing and reaping adaptdl-verify's
 * trainer processes, and its scratch directories (see verify_processes.h). */
#include "verify_processes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock_time.h"
#include "error_message.h"

/* How often a wait looks at its processes and at the trace. */
#define VERIFY_POLL_NANOSECONDS 1000000L
/* How long killed groups may take to disappear before a warning. */
#define VERIFY_REAP_WARN_SECONDS 10.0

volatile sig_atomic_t verify_interrupted;

static void verify_note_interrupt(int signal_number)
{
    verify_interrupted = signal_number;
}

int verify_processes_setup(void)
{
    struct sigaction action = {.sa_handler = verify_note_interrupt};
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGINT, &action, NULL) != 0 || sigaction(SIGTERM, &action, NULL) != 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    /* workers orphaned by a killed trainer come to us to be reaped */
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

static void verify_pause(void)
{
    struct timespec interval = {0, VERIFY_POLL_NANOSECONDS};
    nanosleep(&interval, NULL);
}

/* In the child: a one-line message on the error file, then status 127. */
static void verify_child_fail(const char *what, const char *program)
{
    char line[PATH_MAX + 128];
    int length = snprintf(line, sizeof line, "adaptdl-verify: %s %s: %s\n", what, program,
                          strerror(errno));
    if (length > 0 && write(STDERR_FILENO, line, (size_t)length) < 0)
        _exit(127);
    _exit(127);
}

static void verify_child(const char *program, char *const argv[], char *const environment[],
                         const char *directory, const char *out_path, const char *err_path,
                         pid_t parent)
{
    setpgid(0, 0);
    /* the kernel kills the trainer if adaptdl-verify dies first */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
        _exit(127);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (err < 0 || dup2(err, STDERR_FILENO) < 0)
        _exit(127);
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(in, STDIN_FILENO) < 0)
        verify_child_fail("cannot set up the output of", program);
    if (chdir(directory) != 0)
        verify_child_fail("cannot enter the directory of", program);
    execve(program, argv, environment);
    verify_child_fail("cannot run", program);
}

int verify_launch(struct verify_process *process, const char *program, char *const argv[],
                  char *const environment[], const char *directory, const char *out_path,
                  const char *err_path, char *error, size_t error_size)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return error_message(error, error_size, "cannot start %s: %s", program, strerror(errno));
    if (pid == 0)
        verify_child(program, argv, environment, directory, out_path, err_path, parent);
    /* also here, so that the group exists whichever of the two runs first */
    setpgid(pid, pid);
    *process = (struct verify_process){.pid = pid, .running = true, .status = -1};
    return 0;
}

/* Reaps every child that ended (ours, and workers orphaned to us), and
 * notes the statuses of ours. */
static void verify_reap(struct verify_process *processes, size_t count)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        for (size_t i = 0; i < count; i++) {
            if (processes[i].pid != pid || !processes[i].running)
                continue;
            processes[i].running = false;
            processes[i].status = WIFEXITED(status) ? WEXITSTATUS(status)
                                                    : 128 + WTERMSIG(status);
        }
    }
}

static void verify_kill_groups(const struct verify_process *processes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        kill(-processes[i].pid, SIGKILL);
}

/* Kills what is left of every group and waits until no process of them
 * exists, reaping meanwhile. */
static void verify_clear_groups(struct verify_process *processes, size_t count)
{
    double started = clock_monotonic_seconds();
    bool warned = false;
    for (;;) {
        verify_kill_groups(processes, count);
        verify_reap(processes, count);
        bool any = false;
        for (size_t i = 0; i < count; i++)
            if (kill(-processes[i].pid, 0) == 0 || errno != ESRCH)
                any = true;
        if (!any)
            return;
        if (!warned && clock_monotonic_seconds() - started > VERIFY_REAP_WARN_SECONDS) {
            fprintf(stderr, "adaptdl-verify: processes of a killed trainer are still there "
                            "after %.0f s; waiting for them\n", VERIFY_REAP_WARN_SECONDS);
            warned = true;
        }
        verify_pause();
    }
}

/* Follows a trace file for a line that starts with "P ". */
struct stop_watch {
    const char *path;
    int fd;
    off_t offset;
    int state;               /* 0: at a line's start, 1: after its "P", 2: inside a line */
};

static bool stop_watch_found(struct stop_watch *watch)
{
    if (watch->fd < 0) {
        watch->fd = open(watch->path, O_RDONLY | O_CLOEXEC);
        if (watch->fd < 0)
            return false;
    }
    char buffer[65536];
    for (;;) {
        ssize_t got = pread(watch->fd, buffer, sizeof buffer, watch->offset);
        if (got <= 0)
            return false;
        watch->offset += got;
        for (ssize_t i = 0; i < got; i++) {
            char byte = buffer[i];
            if (byte == '\n')
                watch->state = 0;
            else if (watch->state == 1 && byte == ' ')
                return true;
            else
                watch->state = watch->state == 0 && byte == 'P' ? 1 : 2;
        }
    }
}

enum verify_wait_outcome verify_wait(struct verify_process *processes, size_t count,
                                     const char *stop_trace, double timeout_seconds)
{
    struct stop_watch watch = {.path = stop_trace, .fd = -1};
    double deadline = clock_monotonic_seconds() + timeout_seconds;
    enum verify_wait_outcome outcome = VERIFY_WAIT_EXITED;
    for (;;) {
        verify_reap(processes, count);
        if (verify_interrupted) {
            outcome = VERIFY_WAIT_INTERRUPTED;
            break;
        }
        if (stop_trace != NULL && stop_watch_found(&watch)) {
            outcome = VERIFY_WAIT_STOPPED;
            break;
        }
        bool running = false, failed = false;
        for (size_t i = 0; i < count; i++) {
            running = running || processes[i].running;
            failed = failed || (!processes[i].running && processes[i].status != 0);
        }
        if (!running)
            break;
        /* one replica crashed: the others would wait for it forever */
        if (failed) {
            verify_kill_groups(processes, count);
            verify_pause();
            continue;
        }
        if (clock_monotonic_seconds() > deadline) {
            outcome = VERIFY_WAIT_TIMED_OUT;
            break;
        }
        verify_pause();
    }
    if (watch.fd >= 0)
        close(watch.fd);
    verify_clear_groups(processes, count);
    return outcome;
}

int verify_make_directories(const char *path)
{
    char partial[PATH_MAX];
    size_t length = strlen(path);
    if (length == 0 || length >= sizeof partial) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(partial, path, length + 1);
    for (size_t i = 1; i <= length; i++) {
        if (partial[i] != '/' && partial[i] != '\0')
            continue;
        char saved = partial[i];
        partial[i] = '\0';
        if (mkdir(partial, 0755) != 0 && errno != EEXIST)
            return -1;
        partial[i] = saved;
    }
    return 0;
}

static int verify_copy_file(const char *from, const char *to, mode_t mode)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777);
    if (out < 0) {
        int saved = errno;
        close(in);
        errno = saved;
        return -1;
    }
    char buffer[65536];
    int status = 0;
    for (;;) {
        ssize_t got = read(in, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            status = got < 0 ? -1 : 0;
            break;
        }
        for (ssize_t done = 0; done < got;) {
            ssize_t written = write(out, buffer + done, (size_t)(got - done));
            if (written < 0 && errno == EINTR)
                continue;
            if (written <= 0) {
                status = -1;
                break;
            }
            done += written;
        }
        if (status != 0)
            break;
    }
    int saved = errno;
    close(in);
    if (close(out) != 0 && status == 0)
        return -1;
    errno = saved;
    return status;
}

int verify_copy_tree(const char *from, const char *to)
{
    struct stat status;
    if (lstat(from, &status) != 0)
        return -1;
    if (S_ISLNK(status.st_mode)) {
        char target[PATH_MAX];
        ssize_t length = readlink(from, target, sizeof target - 1);
        if (length < 0)
            return -1;
        target[length] = '\0';
        return symlink(target, to);
    }
    if (S_ISREG(status.st_mode))
        return verify_copy_file(from, to, status.st_mode);
    if (!S_ISDIR(status.st_mode))
        return 0;   /* sockets, FIFOs: nothing a checkpoint is made of */
    if (mkdir(to, status.st_mode & 07777) != 0)
        return -1;
    DIR *directory = opendir(from);
    if (directory == NULL)
        return -1;
    int result = 0;
    struct dirent *entry;
    while (result == 0 && (entry = readdir(directory)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        char source[PATH_MAX], target[PATH_MAX];
        if (snprintf(source, sizeof source, "%s/%s", from, entry->d_name) >= (int)sizeof source ||
            snprintf(target, sizeof target, "%s/%s", to, entry->d_name) >= (int)sizeof target) {
            errno = ENAMETOOLONG;
            result = -1;
            break;
        }
        result = verify_copy_tree(source, target);
    }
    int saved = errno;
    closedir(directory);
    errno = saved;
    return result;
}

static int verify_remove_entry(const char *path, const struct stat *status, int kind,
                               struct FTW *where)
{
    (void)status;
    (void)where;
    return kind == FTW_DP ? rmdir(path) : unlink(path);
}

int verify_remove_tree(const char *path)
{
    struct stat status;
    if (lstat(path, &status) != 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(path, verify_remove_entry, 32, FTW_DEPTH | FTW_PHYS);
}

void verify_last_line(const char *path, char *out, size_t out_size)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buffer[4096];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t start = size > (off_t)sizeof buffer - 1 ? size - (off_t)sizeof buffer + 1 : 0;
    ssize_t got = size > 0 ? pread(fd, buffer, (size_t)(size - start), start) : 0;
    close(fd);
    if (got <= 0)
        return;
    size_t end = (size_t)got;
    while (end > 0 && (buffer[end - 1] == '\n' || buffer[end - 1] == ' '))
        end--;
    size_t begin = end;
    while (begin > 0 && buffer[begin - 1] != '\n')
        begin--;
    size_t length = end - begin;
    if (length >= out_size)
        length = out_size - 1;
    memcpy(out, buffer + begin, length);
    out[length] = '\0';
    for (size_t i = 0; i < length; i++)
        if ((unsigned char)out[i] < ' ')
            out[i] = ' ';
}
