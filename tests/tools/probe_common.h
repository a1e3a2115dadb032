/* probe_common.h - what several probe and generator programs do alike:
 * hash the bytes they read, so a test can compare them with the file's,
 * read(2) a descriptor to its end, parse a count from the command line and
 * draw from a seeded sequence.
 *
 * Each probe is one program built from its own source file, so what they
 * share is a header of static inline functions (a probe that does not use
 * one of them is not warned about it). */
#ifndef ADAPTSHIM_PROBE_COMMON_H
#define ADAPTSHIM_PROBE_COMMON_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* splitmix64: tiny, fast, and fully determined by its 64-bit state. */
static inline uint64_t probe_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The non-negative decimal integer `text` given to `flag`; otherwise says
 * so as `program` and exits with status 2 (a usage error). */
static inline uint64_t probe_parse_u64(const char *program, const char *flag, const char *text)
{
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
        fprintf(stderr, "%s: %s expects a non-negative integer, got '%s'\n", program, flag,
                text);
        exit(2);
    }
    return value;
}

#endif
