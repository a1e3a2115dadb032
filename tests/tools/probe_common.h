/* probe_common.h - what several probe programs do alike: hash the bytes
 * they read, so a test can compare them with the file's, and read(2) a
 * descriptor to its end.
 *
 * Each probe is one program built from its own source file, so what they
 * share is a header of static inline functions (a probe that does not use
 * one of them is not warned about it). */
#ifndef ADAPTSHIM_PROBE_COMMON_H
#define ADAPTSHIM_PROBE_COMMON_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

/* 64-bit FNV-1a, the hash the integration tests compute over the
 * expected bytes. */
static inline uint64_t probe_fnv1a(const void *data, size_t size)
{
    const unsigned char *bytes = data;
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < size; i++) {
        hash ^= bytes[i];
        hash *= 0x100000001b3ULL;
    }
    return hash;
}

/* read(2) until `size` bytes or the end of the file, again after EINTR:
 * the bytes read, or -1 with errno set when a read fails. */
static inline ssize_t probe_read_up_to(int fd, void *buffer, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, (char *)buffer + got, size - got);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0)
            break;              /* the end of the file */
        else if (errno != EINTR)
            return -1;
    }
    return (ssize_t)got;
}

#endif
