/* stop_probe.c - a plain program that stands for a trainer at the moment a
 * stop signal finds it away from any batch read (an evaluation, a long
 * save, the end of its run), for tests/integration/test_stops.c.
 *
 *   stop_probe [--handler] [--read PATH,RECORD,HEADER,BATCHES] [--exit-waits] GO
 *
 * It first prints "pid PID".  --read reads HEADER bytes of PATH, then
 * BATCHES reads of RECORD bytes (a few training steps).  Then it prints "ready" and waits, without calling
 * anything the shim intercepts, until the file GO exists; prints
 * "finished" and returns 0 from main.  With --exit-waits it returns from
 * main at once and the wait happens in an atexit handler (a trainer whose
 * work is done, still exiting), which prints "exiting" first and "exit
 * finished" last.  --handler installs a SIGTERM handler that prints
 * "caught SIGTERM" and lets the program go on.
 * Output is unbuffered (write(2)), so it survives any kind of exit.
 * Exit status: 0, or 2 for a usage error, 1 for an I/O error. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *go_path;

static void say(const char *line)
{
    ssize_t ignored = write(STDOUT_FILENO, line, strlen(line));
    (void)ignored;
}

static void on_sigterm(int signal_number)
{
    (void)signal_number;
    say("caught SIGTERM\n");
}

static void wait_for_go(void)
{
    struct timespec pause = {0, 10 * 1000 * 1000};
    while (access(go_path, F_OK) != 0)
        nanosleep(&pause, NULL);
}

static void wait_at_exit(void)
{
    say("exiting\n");
    wait_for_go();
    say("exit finished\n");
}

static void read_batches(const char *specification)
{
    char path[4096];
    unsigned long record, header, batches;
    if (sscanf(specification, "%4095[^,],%lu,%lu,%lu", path, &record, &header, &batches) != 4 ||
        record == 0) {
        fprintf(stderr, "stop_probe: --read expects PATH,RECORD,HEADER,BATCHES, got '%s'\n",
                specification);
        exit(2);
    }
    int fd = open(path, O_RDONLY);
    char *buffer = malloc(record > header ? record : header + 1);
    if (fd < 0 || buffer == NULL || read(fd, buffer, header) != (ssize_t)header) {
        fprintf(stderr, "stop_probe: cannot read the header of %s\n", path);
        exit(1);
    }
    for (unsigned long i = 0; i < batches; i++)
        if (read(fd, buffer, record) != (ssize_t)record) {
            fprintf(stderr, "stop_probe: short read of %s at batch %lu\n", path, i);
            exit(1);
        }
    free(buffer);
    close(fd);
}

int main(int argc, char **argv)
{
    bool handler = false, exit_waits = false;
    const char *reads = NULL;
    int i = 1;
    for (; i < argc - 1; i++) {
        if (strcmp(argv[i], "--handler") == 0)
            handler = true;
        else if (strcmp(argv[i], "--exit-waits") == 0)
            exit_waits = true;
        else if (strcmp(argv[i], "--read") == 0 && i + 2 < argc)
            reads = argv[++i];
        else
            break;
    }
    if (i != argc - 1) {
        fprintf(stderr, "usage: stop_probe [--handler] [--read PATH,RECORD,HEADER,BATCHES] "
                        "[--exit-waits] GO\n");
        return 2;
    }
    go_path = argv[i];
    char line[64];
    snprintf(line, sizeof line, "pid %d\n", (int)getpid());
    say(line);
    if (handler) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_sigterm;
        sigemptyset(&action.sa_mask);
        if (sigaction(SIGTERM, &action, NULL) != 0) {
            perror("stop_probe: sigaction");
            return 1;
        }
    }
    if (reads != NULL)
        read_batches(reads);
    say("ready\n");
    if (exit_waits) {
        atexit(wait_at_exit);
        return 0;
    }
    wait_for_go();
    say("finished\n");
    return 0;
}
