/* checkpoint_probe.c - checkpoint files written and closed in the ways that
 * bypass the close wrapper (tests/integration/test_checkpoint_descriptors.c).
 *
 *   checkpoint_probe fdopen DATA CK OTHER HEADER RECORD
 *       reads HEADER + 10 records of DATA; writes CK through open + fdopen +
 *       fclose; reads 20 more records; opens OTHER (which gets CK's old
 *       number) and closes it.
 *   checkpoint_probe stale CK
 *       writes CK and closes it with a raw close system call, twice: after
 *       the first a pipe takes its number, after the second CK itself,
 *       opened for reading; both are then closed.
 *   checkpoint_probe freopen CK OTHER
 *       writes CK through fopen, then freopens the stream onto OTHER, writes
 *       there and fcloses it.
 *   checkpoint_probe fcloseall DATA CK HEADER RECORD
 *       fopens DATA and reads HEADER + 10 records with fread, writes CK
 *       through fopen + fputs, then closes every stream with fcloseall;
 *       prints "fcloseall R" (its result).
 *
 * Output, one fact per line: "checkpoint_fd N", "same_fd 0|1" (a later
 * descriptor got the checkpoint's old number).  Unexpected errors: a
 * message on stderr and status 1; usage: 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "checkpoint_probe: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void read_exactly(int fd, size_t size)
{
    char buffer[4096];
    while (size > 0) {
        ssize_t got = read(fd, buffer, size < sizeof buffer ? size : sizeof buffer);
        if (got <= 0)
            die("read of the data file");
        size -= (size_t)got;
    }
}

static int open_checkpoint_for_writing(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die(path);
    return fd;
}

static void probe_fdopen(const char *data, const char *checkpoint, const char *other,
                         size_t header, size_t record)
{
    int data_fd = open(data, O_RDONLY);
    if (data_fd < 0)
        die(data);
    read_exactly(data_fd, header + 10 * record);
    int fd = open_checkpoint_for_writing(checkpoint);
    printf("checkpoint_fd %d\n", fd);
    FILE *stream = fdopen(fd, "w");
    if (stream == NULL)
        die("fdopen");
    if (fputs("model after 10 records\n", stream) < 0 || fclose(stream) != 0)
        die("writing the checkpoint");
    read_exactly(data_fd, 20 * record);
    int reused = open(other, O_RDONLY);
    if (reused < 0)
        die(other);
    printf("same_fd %d\n", reused == fd);
    if (close(reused) != 0)
        die("close of the other file");
}

static void probe_stale(const char *checkpoint)
{
    int fd = open_checkpoint_for_writing(checkpoint);
    if (write(fd, "first\n", 6) != 6)
        die("write");
    syscall(SYS_close, fd);       /* no wrapper sees this close */
    int ends[2];
    if (pipe(ends) != 0)
        die("pipe");
    printf("same_fd %d\n", ends[0] == fd);
    close(ends[0]);
    close(ends[1]);
    fd = open_checkpoint_for_writing(checkpoint);
    if (write(fd, "second\n", 7) != 7)
        die("write");
    syscall(SYS_close, fd);
    int reader = open(checkpoint, O_RDONLY);
    if (reader < 0)
        die(checkpoint);
    printf("same_fd %d\n", reader == fd);
    close(reader);
}

static void probe_freopen(const char *checkpoint, const char *other)
{
    FILE *stream = fopen(checkpoint, "w");
    if (stream == NULL)
        die(checkpoint);
    if (fputs("model\n", stream) < 0)
        die("fputs");
    FILE *reopened = freopen(other, "w", stream);
    if (reopened == NULL)
        die("freopen");
    if (fputs("log\n", reopened) < 0 || fclose(reopened) != 0)
        die("writing the other file");
}

static void probe_fcloseall(const char *data, const char *checkpoint, size_t header,
                            size_t record)
{
    FILE *input = fopen(data, "rb");
    if (input == NULL)
        die(data);
    char buffer[4096];
    size_t want = header + 10 * record;
    if (want > sizeof buffer || fread(buffer, 1, want, input) != want)
        die("fread of the data file");
    FILE *stream = fopen(checkpoint, "w");
    if (stream == NULL)
        die(checkpoint);
    if (fputs("model after 10 records\n", stream) < 0)
        die("fputs");
    printf("fcloseall %d\n", fcloseall());
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "fdopen") == 0)
        probe_fdopen(argv[2], argv[3], argv[4], strtoul(argv[5], NULL, 10),
                     strtoul(argv[6], NULL, 10));
    else if (argc == 3 && strcmp(argv[1], "stale") == 0)
        probe_stale(argv[2]);
    else if (argc == 4 && strcmp(argv[1], "freopen") == 0)
        probe_freopen(argv[2], argv[3]);
    else if (argc == 6 && strcmp(argv[1], "fcloseall") == 0)
        probe_fcloseall(argv[2], argv[3], strtoul(argv[4], NULL, 10),
                        strtoul(argv[5], NULL, 10));
    else {
        fprintf(stderr, "usage: checkpoint_probe fdopen DATA CK OTHER HEADER RECORD | "
                        "stale CK | freopen CK OTHER | fcloseall DATA CK HEADER RECORD\n");
        return 2;
    }
    /* (fcloseall closed stdout: its line went out with it) */
    return fflush(stdout) == 0 || strcmp(argv[1], "fcloseall") == 0 ? 0 : 1;
}
