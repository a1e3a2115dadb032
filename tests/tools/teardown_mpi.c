/* teardown_mpi.c - reads of a data file after MPI_Finalize, where the shim
 * must be a pass-through (its MPI is gone); run by
 * tests/integration/test_teardown.c under the shim.
 *
 *   teardown_mpi PATH
 *
 * Before MPI_Finalize the program opens PATH, reads it whole through that
 * descriptor (which it keeps open) and starts a thread that waits.  After
 * MPI_Finalize the thread reads (as an MPI library's event thread may),
 * then the main thread, then an atexit handler.  Each read prints one line
 * "NAME SIZE HASH": the size fstat or stat gave, the FNV-1a 64 of the bytes
 * read (hex).  Reads before MPI_Finalize:
 *   before_kept        the kept descriptor, read to its end
 * after it:
 *   thread_kept        pread of the kept descriptor from 0, fstat's size
 *   thread_open        open, read to the end, close
 *   main_fopen         fopen, fread to the end, fclose (stat's size)
 *   atexit_kept        lseek of the kept descriptor to 0, read to the end
 *   atexit_open        open, read to the end, close
 * Exit status 1 with "error ..." on stderr when a call fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe_common.h"

#define TEARDOWN_MAX_BYTES (1 << 22)

static const char *data_path;
static int kept_fd = -1;
static unsigned char bytes[TEARDOWN_MAX_BYTES];

static void fail(const char *what)
{
    fprintf(stderr, "error %s: %s\n", what, strerror(errno));
    _exit(1);
}

/* One line on stdout with a single write(2): the lines of the thread, the
 * main thread and the atexit handler never interleave. */
static void report(const char *name, long long size, size_t got)
{
    char line[160];
    int length = snprintf(line, sizeof line, "%s %lld %016" PRIx64 "\n", name, size,
                          probe_fnv1a(bytes, got));
    if (write(STDOUT_FILENO, line, (size_t)length) != length)
        fail("write");
}

/* The file's bytes into `bytes`, up to its size. */
static size_t read_to_end(int fd)
{
    ssize_t got = probe_read_up_to(fd, bytes, sizeof bytes);
    if (got < 0)
        fail("read");
    return (size_t)got;
}

static long long size_of_descriptor(int fd)
{
    struct stat status;
    if (fstat(fd, &status) != 0)
        fail("fstat");
    return (long long)status.st_size;
}

static void read_opened(const char *name)
{
    int fd = open(data_path, O_RDONLY);
    if (fd < 0)
        fail("open");
    long long size = size_of_descriptor(fd);
    report(name, size, read_to_end(fd));
    close(fd);
}

static void read_kept_with_pread(const char *name)
{
    long long size = size_of_descriptor(kept_fd);
    size_t got = 0;
    while (got < (size_t)size && got < sizeof bytes) {
        ssize_t n = pread(kept_fd, bytes + got, sizeof bytes - got, (off_t)got);
        if (n < 0)
            fail("pread");
        if (n == 0)
            break;
        got += (size_t)n;
    }
    report(name, size, got);
}

static void read_with_stdio(const char *name)
{
    struct stat status;
    if (stat(data_path, &status) != 0)
        fail("stat");
    FILE *stream = fopen(data_path, "r");
    if (stream == NULL)
        fail("fopen");
    size_t got = fread(bytes, 1, sizeof bytes, stream);
    if (ferror(stream))
        fail("fread");
    fclose(stream);
    report(name, (long long)status.st_size, got);
}

static void read_at_exit(void)
{
    if (lseek(kept_fd, 0, SEEK_SET) != 0)
        fail("lseek");
    report("atexit_kept", size_of_descriptor(kept_fd), read_to_end(kept_fd));
    read_opened("atexit_open");
}

static pthread_mutex_t finalized_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finalized_changed = PTHREAD_COND_INITIALIZER;
static int finalized;

static void *read_after_finalize(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&finalized_lock);
    while (!finalized)
        pthread_cond_wait(&finalized_changed, &finalized_lock);
    pthread_mutex_unlock(&finalized_lock);
    read_kept_with_pread("thread_kept");
    read_opened("thread_open");
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: teardown_mpi PATH\n");
        return 2;
    }
    data_path = argv[1];
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        fail("MPI_Init");
    kept_fd = open(data_path, O_RDONLY);
    if (kept_fd < 0)
        fail("open");
    long long size = size_of_descriptor(kept_fd);
    report("before_kept", size, read_to_end(kept_fd));
    if (atexit(read_at_exit) != 0)
        fail("atexit");
    pthread_t thread;
    if (pthread_create(&thread, NULL, read_after_finalize, NULL) != 0)
        fail("pthread_create");
    if (MPI_Finalize() != MPI_SUCCESS)
        fail("MPI_Finalize");
    pthread_mutex_lock(&finalized_lock);
    finalized = 1;
    pthread_cond_signal(&finalized_changed);
    pthread_mutex_unlock(&finalized_lock);
    pthread_join(thread, NULL);
    read_with_stdio("main_fopen");
    return 0;
}
