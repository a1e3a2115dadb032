/* bench_passthrough.c - cost of a call on a file that is not a dataset:
 * read(2) of 4 KiB from /dev/zero and of a pipe, many times.  Run once with
 * the library preloaded (and a data entry configured, so the shim is
 * active) and once without; the runner prints the ratio.
 * Prints "reads/s" for each. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 2000000;
    char buffer[4096];
    int zero = open("/dev/zero", O_RDONLY);
    double start = bench_monotonic_seconds();
    for (long i = 0; i < iterations; i++)
        if (read(zero, buffer, sizeof buffer) != (ssize_t)sizeof buffer)
            return 1;
    double zero_rate = (double)iterations / (bench_monotonic_seconds() - start);
    close(zero);

    int pipe_fds[2];
    if (pipe(pipe_fds) != 0)
        return 1;
    long pipe_iterations = iterations / 2;
    start = bench_monotonic_seconds();
    for (long i = 0; i < pipe_iterations; i++) {
        if (write(pipe_fds[1], buffer, sizeof buffer) != (ssize_t)sizeof buffer)
            return 1;
        if (read(pipe_fds[0], buffer, sizeof buffer) != (ssize_t)sizeof buffer)
            return 1;
    }
    double pipe_rate = (double)pipe_iterations / (bench_monotonic_seconds() - start);
    printf("%.0f %.0f\n", zero_rate, pipe_rate);
    return 0;
}
