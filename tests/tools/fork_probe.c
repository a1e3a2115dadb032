/* fork_probe.c - data files read by forked processes, as a PyTorch
 * DataLoader's workers read them; run by tests/integration/test_forks.c.
 *
 *   fork_probe exit_in_child PATH RECORD HEADER
 *       the parent reads two records, forks a child that reads one and
 *       leaves through exit(3) (running atexit handlers, as a C worker
 *       would), waits for it, then reads the rest of the view.
 *   fork_probe workers PATH RECORD HEADER WORKERS EPOCHS
 *       the parent never touches PATH.  Each epoch it forks WORKERS
 *       children; child w opens PATH itself, takes the view's length from
 *       fstat, and reads the records at positions w, w + WORKERS, ... one
 *       by one (lseek to header + position * RECORD, then read), as a
 *       map-style Dataset that opens its file lazily in __getitem__ does;
 *       then it closes the file and leaves through _exit, as
 *       multiprocessing does.  The parent waits for all of them before the
 *       next epoch.
 *   fork_probe fork_under_readers PATH RECORD LINES FORKS CHECKPOINT
 *       two threads keep reading PATH (fixed records) and LINES (a `lines`
 *       file), each with open/read/close and fopen/fread/fgets/fclose,
 *       and a third keeps mapping PATH, committing CHECKPOINT (open for
 *       writing, write, close) and updating an accumulator of the
 *       cooperative API (when the library that exports it is preloaded),
 *       so that every lock of the library is held by some thread at one
 *       fork or another; meanwhile the main thread forks FORKS times, and
 *       each child reads both files once (a descriptor and a stream each),
 *       asks the cooperative API its epoch, tells the parent through a pipe
 *       and leaves through _exit.  A child that has not told the parent within
 *       FORK_PROBE_CHILD_SECONDS is hung: it is killed, and no more forks
 *       follow.  Prints "forks N hung H failed F" at the end.
 *
 * Records begin with their id as a little-endian u64.  Output, one line per
 * record read: "epoch E position P id ID" (the parent's own reads in
 * exit_in_child are epoch 0, the child's are marked "child"), written with
 * one write(2) each so that lines of several processes never interleave.
 * Exit status 1 with "error ..." on stderr on an unexpected failure, 2 on
 * bad usage. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe_common.h"

#define FORK_PROBE_MAX_RECORD 4096
/* How long a child forked under busy readers may take to read its records
 * (a few milliseconds when nothing is wrong; generous for a loaded host). */
#define FORK_PROBE_CHILD_SECONDS 20

static void die(const char *what)
{
    fprintf(stderr, "error %s: %s\n", what, strerror(errno));
    exit(1);
}

static void report_record(const char *who, unsigned epoch, uint64_t position,
                          const unsigned char *record)
{
    uint64_t id;
    memcpy(&id, record, sizeof id);
    char line[128];
    int length = snprintf(line, sizeof line, "%s %u position %" PRIu64 " id %" PRIu64 "\n",
                          who, epoch, position, id);
    if (write(STDOUT_FILENO, line, (size_t)length) != length)
        die("write");
}

/* Reads exactly `size` bytes; 0 at the end of the view, 1 for a record. */
static int read_record(int fd, unsigned char *record, size_t size)
{
    ssize_t got = probe_read_up_to(fd, record, size);
    if (got < 0)
        die("read");
    if (got != 0 && (size_t)got != size) {
        fprintf(stderr, "error: a partial record of %zd bytes at the end\n", got);
        exit(1);
    }
    return (size_t)got == size;
}

static int open_view(const char *path, size_t header)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die("open");
    if (lseek(fd, (off_t)header, SEEK_SET) < 0)
        die("lseek");
    return fd;
}

static void probe_exit_in_child(const char *path, size_t record_size, size_t header)
{
    unsigned char record[FORK_PROBE_MAX_RECORD];
    int fd = open_view(path, header);
    uint64_t position = 0;
    for (; position < 2 && read_record(fd, record, record_size); position++)
        report_record("epoch", 0, position, record);
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        if (read_record(fd, record, record_size))
            report_record("child", 0, position, record);
        exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        die("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "error: the child ended with status %d\n", status);
        exit(1);
    }
    /* the child moved its own copy of the view position (adaptshim(7) "After fork") */
    for (; read_record(fd, record, record_size); position++)
        report_record("epoch", 0, position, record);
    close(fd);
}

static void worker_read_share(const char *path, size_t record_size, size_t header,
                              unsigned worker, unsigned workers, unsigned epoch)
{
    unsigned char record[FORK_PROBE_MAX_RECORD];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die("open");
    struct stat status;
    if (fstat(fd, &status) != 0)
        die("fstat");
    uint64_t length = ((uint64_t)status.st_size - header) / record_size;
    for (uint64_t position = worker; position < length; position += workers) {
        if (lseek(fd, (off_t)(header + position * record_size), SEEK_SET) < 0)
            die("lseek");
        if (!read_record(fd, record, record_size)) {
            fprintf(stderr, "error: no record at position %" PRIu64 "\n", position);
            _exit(1);
        }
        report_record("epoch", epoch, position, record);
    }
    close(fd);
}

static void probe_workers(const char *path, size_t record_size, size_t header,
                          unsigned workers, unsigned epochs)
{
    for (unsigned epoch = 0; epoch < epochs; epoch++) {
        pid_t children[64];
        for (unsigned worker = 0; worker < workers; worker++) {
            children[worker] = fork();
            if (children[worker] < 0)
                die("fork");
            if (children[worker] == 0) {
                worker_read_share(path, record_size, header, worker, workers, epoch);
                _exit(0);
            }
        }
        for (unsigned worker = 0; worker < workers; worker++) {
            int status;
            if (waitpid(children[worker], &status, 0) != children[worker])
                die("waitpid");
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "error: worker %u ended with status %d\n", worker, status);
                exit(1);
            }
        }
    }
}

/* --- forks while other threads hold the library's locks ------------------- */

struct busy_files {
    const char *data;
    size_t record_size;
    const char *lines;
    const char *checkpoint;
};

/* Which reader thread a busy_reader is (its order of operations). */
struct busy_reader_argument {
    const struct busy_files *files;
    unsigned index;
};

static volatile int busy_readers_stop;

static bool busy_should_stop(void)
{
    return __atomic_load_n(&busy_readers_stop, __ATOMIC_ACQUIRE) != 0;
}

/* open, read every byte of the view in record-sized pieces, close: every
 * read takes the descriptor table's stripe and the file's lock, and a read
 * of a train file is a step boundary. */
static int busy_read_descriptor(const char *path, size_t chunk)
{
    unsigned char buffer[FORK_PROBE_MAX_RECORD];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t got;
    while ((got = read(fd, buffer, chunk)) > 0)
        ;
    int saved = errno;
    close(fd);
    errno = saved;
    return got < 0 ? -1 : 0;
}

/* fopen, fread (fixed records) or fgets (lines) a few times, fclose: the
 * stream list's lock, the cookie's lock under glibc's stream lock. */
static int busy_read_stream(const char *path, size_t record_size, bool lines)
{
    char buffer[FORK_PROBE_MAX_RECORD];
    FILE *stream = fopen(path, "r");
    if (stream == NULL)
        return -1;
    for (int i = 0; i < 8; i++) {
        if (lines ? fgets(buffer, sizeof buffer, stream) == NULL
                  : fread(buffer, record_size, 1, stream) != 1)
            break;
    }
    bool failed = ferror(stream) != 0;
    if (fclose(stream) != 0 || failed)
        return -1;
    return 0;
}

static void busy_fail(const char *what)
{
    fprintf(stderr, "error %s: %s\n", what, strerror(errno));
    _exit(1);
}

/* A reader thread: both files, both ways, each reader in its own order. */
static void *busy_reader(void *argument_pointer)
{
    const struct busy_reader_argument *argument = argument_pointer;
    const struct busy_files *files = argument->files;
    for (unsigned round = argument->index; !busy_should_stop(); round++) {
        int status;
        switch (round % 4) {
        case 0:
            status = busy_read_descriptor(files->data, files->record_size);
            break;
        case 1:
            status = busy_read_stream(files->data, files->record_size, false);
            break;
        case 2:
            status = busy_read_descriptor(files->lines, 64);
            break;
        default:
            status = busy_read_stream(files->lines, 0, true);
            break;
        }
        if (status != 0)
            busy_fail(argument->index == 0 ? "reader 0" : "reader 1");
    }
    return NULL;
}

/* The cooperative API of the preloaded library, found at run time (the
 * probe links no library of the project); NULL members without it. */
struct busy_cooperative_api {
    void *(*accumulator_create)(void);
    int (*accumulator_add)(void *accumulator, const char *key, double value);
    void (*accumulator_destroy)(void *accumulator);
    int64_t (*current_epoch)(void);
};

static struct busy_cooperative_api busy_find_cooperative_api(void)
{
    struct busy_cooperative_api api;
    *(void **)&api.accumulator_create = dlsym(RTLD_DEFAULT, "adaptdl_accumulator_create");
    *(void **)&api.accumulator_add = dlsym(RTLD_DEFAULT, "adaptdl_accumulator_add");
    *(void **)&api.accumulator_destroy = dlsym(RTLD_DEFAULT, "adaptdl_accumulator_destroy");
    *(void **)&api.current_epoch = dlsym(RTLD_DEFAULT, "adaptdl_current_epoch");
    return api;
}

/* Every call holds the cooperative state's lock. */
static void busy_use_cooperative_api(const struct busy_cooperative_api *api)
{
    if (api->accumulator_create == NULL || api->accumulator_add == NULL ||
        api->accumulator_destroy == NULL)
        return;
    void *accumulator = api->accumulator_create();
    if (accumulator == NULL)
        busy_fail("accumulator");
    for (int i = 0; i < 64; i++)
        if (api->accumulator_add(accumulator, "loss", 1.0) != 0)
            busy_fail("accumulator add");
    api->accumulator_destroy(accumulator);
}

/* Maps the data file (a view served from memory: the mapping table's lock),
 * commits a checkpoint (the registry's, the cooperative state's and the
 * statistical epochs' locks, a snapshot of every file) and updates an
 * accumulator. */
static void *busy_mapper_and_committer(void *argument)
{
    const struct busy_files *files = argument;
    struct busy_cooperative_api api = busy_find_cooperative_api();
    while (!busy_should_stop()) {
        busy_use_cooperative_api(&api);
        int fd = open(files->data, O_RDONLY);
        struct stat status;
        if (fd < 0 || fstat(fd, &status) != 0)
            busy_fail("mapper open");
        void *view = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (view == MAP_FAILED)
            busy_fail("mapper mmap");
        munmap(view, (size_t)status.st_size);
        close(fd);
        int checkpoint = open(files->checkpoint, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (checkpoint < 0 || write(checkpoint, "model", 5) != 5 || close(checkpoint) != 0)
            busy_fail("committer");
    }
    return NULL;
}

/* What a child does: one read of each kind, then it tells the parent. */
static void busy_child(const struct busy_files *files, int done_pipe)
{
    int status = busy_read_descriptor(files->data, files->record_size);
    if (status == 0)
        status = busy_read_stream(files->data, files->record_size, false);
    if (status == 0)
        status = busy_read_descriptor(files->lines, 64);
    if (status == 0)
        status = busy_read_stream(files->lines, 0, true);
    struct busy_cooperative_api api = busy_find_cooperative_api();
    if (api.current_epoch != NULL)
        api.current_epoch();
    char told = status == 0 ? 'y' : 'n';
    if (write(done_pipe, &told, 1) != 1)
        _exit(3);
    _exit(status == 0 ? 0 : 1);
}

/* Waits for child `pid` to tell (poll on its pipe, no sleeping): 0 done,
 * 1 failed, 2 hung (then killed). */
static int busy_wait_for_child(pid_t pid, int done_pipe)
{
    struct pollfd waiting = {.fd = done_pipe, .events = POLLIN};
    int ready;
    do
        ready = poll(&waiting, 1, FORK_PROBE_CHILD_SECONDS * 1000);
    while (ready < 0 && errno == EINTR);
    if (ready < 0)
        die("poll");
    char told = 0;
    bool hung = ready == 0 || read(done_pipe, &told, 1) != 1;
    if (hung)
        kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("waitpid");
    if (hung)
        return 2;
    return told == 'y' && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static void probe_fork_under_readers(const struct busy_files *files, unsigned forks)
{
    pthread_t threads[3];
    struct busy_reader_argument readers[2] = {{files, 0}, {files, 1}};
    for (int i = 0; i < 2; i++)
        if (pthread_create(&threads[i], NULL, busy_reader, &readers[i]) != 0)
            die("pthread_create");
    if (pthread_create(&threads[2], NULL, busy_mapper_and_committer, (void *)files) != 0)
        die("pthread_create");
    unsigned forked = 0, hung = 0, failed = 0;
    for (; forked < forks && hung == 0; forked++) {
        int done[2];
        if (pipe2(done, O_CLOEXEC) != 0)
            die("pipe");
        pid_t child = fork();
        if (child < 0)
            die("fork");
        if (child == 0) {
            close(done[0]);
            busy_child(files, done[1]);
        }
        close(done[1]);
        int outcome = busy_wait_for_child(child, done[0]);
        close(done[0]);
        if (outcome == 2)
            fprintf(stderr, "child %u (pid %ld) hung\n", forked, (long)child);
        hung += outcome == 2;
        failed += outcome == 1;
    }
    __atomic_store_n(&busy_readers_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);
    printf("forks %u hung %u failed %u\n", forked, hung, failed);
}

static unsigned long parse_number(const char *text, const char *what, unsigned long maximum)
{
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || end == text || value > maximum) {
        fprintf(stderr, "fork_probe: %s must be a number from 0 to %lu, not '%s'\n", what,
                maximum, text);
        exit(2);
    }
    return value;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "exit_in_child") == 0) {
        size_t record = parse_number(argv[3], "RECORD", FORK_PROBE_MAX_RECORD);
        size_t header = parse_number(argv[4], "HEADER", 1 << 20);
        if (record < 8) {
            fprintf(stderr, "fork_probe: RECORD must be at least 8 bytes\n");
            return 2;
        }
        probe_exit_in_child(argv[2], record, header);
        return 0;
    }
    if (argc >= 7 && strcmp(argv[1], "workers") == 0) {
        size_t record = parse_number(argv[3], "RECORD", FORK_PROBE_MAX_RECORD);
        size_t header = parse_number(argv[4], "HEADER", 1 << 20);
        unsigned workers = (unsigned)parse_number(argv[5], "WORKERS", 64);
        unsigned epochs = (unsigned)parse_number(argv[6], "EPOCHS", 1000);
        if (record < 8 || workers == 0) {
            fprintf(stderr, "fork_probe: RECORD must be at least 8 bytes and WORKERS "
                            "at least 1\n");
            return 2;
        }
        probe_workers(argv[2], record, header, workers, epochs);
        return 0;
    }
    if (argc >= 7 && strcmp(argv[1], "fork_under_readers") == 0) {
        struct busy_files files = {
            .data = argv[2],
            .record_size = parse_number(argv[3], "RECORD", FORK_PROBE_MAX_RECORD),
            .lines = argv[4],
            .checkpoint = argv[6],
        };
        unsigned forks = (unsigned)parse_number(argv[5], "FORKS", 100000);
        if (files.record_size == 0) {
            fprintf(stderr, "fork_probe: RECORD must be at least 1 byte\n");
            return 2;
        }
        probe_fork_under_readers(&files, forks);
        return 0;
    }
    fprintf(stderr, "usage: fork_probe exit_in_child PATH RECORD HEADER\n"
                    "       fork_probe workers PATH RECORD HEADER WORKERS EPOCHS\n"
                    "       fork_probe fork_under_readers PATH RECORD LINES FORKS CHECKPOINT\n");
    return 2;
}
