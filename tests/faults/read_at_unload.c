/* read_at_unload.c - a preload library for tests: it reads a file from its
 * destructor, after the shim's own destructor has run.
 *
 *   LD_PRELOAD="libadaptshim.so read_at_unload.so" READ_AT_UNLOAD_PATH=/abs/file
 *
 * Destructors run in the reverse order of constructors, and of two preloaded
 * libraries the one listed later is initialized first: listed after the
 * shim, this one is finalized after it, as a library the trainer links
 * (initialized before the preload) is.  Its destructor opens the file,
 * reads it whole through the wrapped open/fstat/read/close, and writes one
 * line on stdout: "unload SIZE HASH" (fstat's size, then the FNV-1a 64 of
 * the bytes read, hex), or "unload error WHAT" when a call failed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void report(const char *line)
{
    size_t length = 0;
    while (line[length] != '\0')
        length++;
    if (write(STDOUT_FILENO, line, length) < 0)
        _exit(1);
}

static void report_error(const char *what)
{
    char line[128];
    snprintf(line, sizeof line, "unload error %s\n", what);
    report(line);
}

/* Reads fd to its end; the FNV-1a 64 of its bytes in *hash.  -1 on error. */
static int read_whole(int fd, uint64_t *hash)
{
    unsigned char buffer[4096];
    *hash = 0xcbf29ce484222325ULL;
    for (;;) {
        ssize_t got = read(fd, buffer, sizeof buffer);
        if (got < 0)
            return -1;
        if (got == 0)
            return 0;
        for (ssize_t i = 0; i < got; i++) {
            *hash ^= buffer[i];
            *hash *= 0x100000001b3ULL;
        }
    }
}

__attribute__((destructor)) static void read_at_unload(void)
{
    const char *path = getenv("READ_AT_UNLOAD_PATH");
    if (path == NULL || path[0] == '\0')
        return;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        report_error("open");
        return;
    }
    struct stat status;
    uint64_t hash;
    if (fstat(fd, &status) != 0) {
        report_error("fstat");
    } else if (read_whole(fd, &hash) != 0) {
        report_error("read");
    } else {
        char line[128];
        snprintf(line, sizeof line, "unload %lld %016" PRIx64 "\n", (long long)status.st_size,
                 hash);
        report(line);
    }
    close(fd);
}
