/* copy_probe.c - kernel-side copies out of a data file into a non-blocking
 * pipe that fills up (tests/integration/test_copies.c).
 *
 *   copy_probe HOW PATH [OUT]
 *
 * HOW: sendfile (from the descriptor's offset), sendfile-offset (from an
 * offset variable), splice, copy_file_range-pipe, copy_file_range-limit.
 *
 * Into the pipe (sendfile, sendfile-offset, splice): the pipe is shrunk to one page,
 * so most calls end early: each round calls HOW twice without reading the
 * pipe (the second call finds it full: -1 with EAGAIN, or a short count),
 * then drains it.  After every call the source position (the descriptor's
 * offset, or the offset variable) must equal the bytes the pipe has taken so
 * far.  It stops at the first call that returns 0.
 *
 * Output: "read received LENGTH HASH" (FNV-1a 64, hex, of everything that
 * came out of the pipe), "eagain N" (calls that returned -1 with EAGAIN),
 * "short N" (calls that returned fewer bytes than the view had left),
 * "consistent 0|1", "offset_at_end N".
 *
 * copy_file_range-pipe: one copy_file_range into a pipe; "result R errno E"
 * and "offset N" (the kernel's copy_file_range writes regular files only).
 *
 * copy_file_range-limit OUT: copy_file_range into the new file OUT under
 * RLIMIT_FSIZE of 10000 bytes (SIGXFSZ ignored): "first R offset N" for the
 * first call (short: the limit), "second R errno E offset N" for a second
 * one (EFBIG, nothing written); then, with the limit lifted, the rest is
 * copied and OUT is reported as "read received LENGTH HASH".
 *
 * Unexpected errors: status 1; usage: 2. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe_common.h"

#define COPY_REQUEST (1u << 20)

static void die(const char *what)
{
    fprintf(stderr, "copy_probe: %s: %s\n", what, strerror(errno));
    exit(1);
}

enum how { HOW_SENDFILE, HOW_SENDFILE_OFFSET, HOW_SPLICE };

static ssize_t copy_once(enum how how, int out, int in, off_t *offset)
{
    switch (how) {
    case HOW_SENDFILE:
        return sendfile(out, in, NULL, COPY_REQUEST);
    case HOW_SENDFILE_OFFSET:
        return sendfile(out, in, offset, COPY_REQUEST);
    case HOW_SPLICE:
        return splice(in, NULL, out, NULL, COPY_REQUEST, SPLICE_F_NONBLOCK);
    }
    return -1;
}

static int copy_file_range_into_a_pipe(int in)
{
    int ends[2];
    if (pipe(ends) != 0)
        die("pipe");
    errno = 0;
    ssize_t n = copy_file_range(in, NULL, ends[1], NULL, COPY_REQUEST, 0);
    printf("result %zd errno %d\n", n, n < 0 ? errno : 0);
    printf("offset %lld\n", (long long)lseek(in, 0, SEEK_CUR));
    return fflush(stdout) == 0 ? 0 : 1;
}

static int copy_file_range_under_a_size_limit(int in, size_t size, const char *out_path)
{
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0)
        die(out_path);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit;
    if (getrlimit(RLIMIT_FSIZE, &limit) != 0)
        die("getrlimit");
    struct rlimit lowered = {.rlim_cur = 10000, .rlim_max = limit.rlim_max};
    if (setrlimit(RLIMIT_FSIZE, &lowered) != 0)
        die("setrlimit");
    ssize_t n = copy_file_range(in, NULL, out, NULL, COPY_REQUEST, 0);
    printf("first %zd offset %lld\n", n, (long long)lseek(in, 0, SEEK_CUR));
    errno = 0;
    n = copy_file_range(in, NULL, out, NULL, COPY_REQUEST, 0);
    printf("second %zd errno %d offset %lld\n", n, n < 0 ? errno : 0,
           (long long)lseek(in, 0, SEEK_CUR));
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
        die("setrlimit back");
    while ((n = copy_file_range(in, NULL, out, NULL, COPY_REQUEST, 0)) > 0)
        ;
    if (n < 0)
        die("copy_file_range after the limit");
    close(out);
    int check = open(out_path, O_RDONLY);
    unsigned char *received = malloc(size + 1);
    if (check < 0 || received == NULL)
        die("reading the copy back");
    size_t got = 0;
    while ((n = read(check, received + got, size + 1 - got)) > 0)
        got += (size_t)n;
    printf("read received %zu %016" PRIx64 "\n", got, probe_fnv1a(received, got));
    free(received);
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"sendfile", "sendfile-offset", "splice",
                                        "copy_file_range-pipe", "copy_file_range-limit"};
    int how = -1;
    for (int i = 0; argc >= 3 && i < 5; i++)
        if (strcmp(argv[1], names[i]) == 0)
            how = i;
    if (how < 0 || (how == 4) != (argc == 4)) {
        fprintf(stderr, "usage: copy_probe sendfile|sendfile-offset|splice|"
                        "copy_file_range-pipe PATH, or copy_probe copy_file_range-limit "
                        "PATH OUT\n");
        return 2;
    }
    int in = open(argv[2], O_RDONLY);
    if (in < 0)
        die(argv[2]);
    struct stat status;
    if (fstat(in, &status) != 0)
        die("fstat");
    size_t size = (size_t)status.st_size;
    if (how == 3)
        return copy_file_range_into_a_pipe(in);
    if (how == 4)
        return copy_file_range_under_a_size_limit(in, size, argv[3]);
    int ends[2];
    if (pipe2(ends, O_NONBLOCK) != 0)
        die("pipe2");
    if (fcntl(ends[1], F_SETPIPE_SZ, 4096) < 0)
        die("F_SETPIPE_SZ");
    unsigned char *received = malloc(size + 1);
    if (received == NULL)
        die("malloc");
    size_t got = 0;
    off_t offset = 0;
    long eagain = 0, short_counts = 0;
    bool consistent = true, done = false;
    while (!done) {
        for (int call = 0; call < 2 && !done; call++) {
            size_t copied_before = (size_t)offset;
            ssize_t n = copy_once((enum how)how, ends[1], in, &offset);
            if (n < 0 && errno != EAGAIN)
                die(names[how]);
            if (n < 0)
                eagain++;
            if (n == 0)
                done = true;
            if (how != HOW_SENDFILE_OFFSET && n > 0)
                offset += n;
            if (n > 0 && (size_t)n < size - copied_before)
                short_counts++;
            /* the source must stand exactly after what the pipe took */
            off_t position = how == HOW_SENDFILE_OFFSET ? offset : lseek(in, 0, SEEK_CUR);
            if (position != offset)
                consistent = false;
        }
        for (;;) {
            unsigned char chunk[4096];
            ssize_t n = read(ends[0], chunk, sizeof chunk);
            if (n < 0 && errno == EAGAIN)
                break;
            if (n <= 0)
                die("read from the pipe");
            if (got + (size_t)n > size) {
                fprintf(stderr, "copy_probe: the pipe gave more than the file's %zu bytes\n",
                        size);
                return 1;
            }
            memcpy(received + got, chunk, (size_t)n);
            got += (size_t)n;
        }
        if ((size_t)offset != got)
            consistent = false;
    }
    printf("read received %zu %016" PRIx64 "\n", got, probe_fnv1a(received, got));
    printf("eagain %ld\nshort %ld\nconsistent %d\n", eagain, short_counts, consistent);
    printf("offset_at_end %lld\n", (long long)offset);
    free(received);
    return fflush(stdout) == 0 ? 0 : 1;
}
