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
 *
 * Records begin with their id as a little-endian u64.  Output, one line per
 * record read: "epoch E position P id ID" (the parent's own reads in
 * exit_in_child are epoch 0, the child's are marked "child"), written with
 * one write(2) each so that lines of several processes never interleave.
 * Exit status 1 with "error ..." on stderr on an unexpected failure, 2 on
 * bad usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORK_PROBE_MAX_RECORD 4096

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
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, record + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("read");
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got != 0 && got != size) {
        fprintf(stderr, "error: a partial record of %zu bytes at the end\n", got);
        exit(1);
    }
    return got == size;
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
    /* the child moved its own copy of the view position (README, "After fork") */
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
    fprintf(stderr, "usage: fork_probe exit_in_child PATH RECORD HEADER\n"
                    "       fork_probe workers PATH RECORD HEADER WORKERS EPOCHS\n");
    return 2;
}
