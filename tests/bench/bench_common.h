/* bench_common.h - the clock, checksum and median every benchmark here uses.
 *
 * Each benchmark is one program built from its own source file, so what
 * they share is a header of static inline functions (a benchmark that does
 * not use one of them is not warned about it). */
#ifndef ADAPTSHIM_BENCH_COMMON_H
#define ADAPTSHIM_BENCH_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock, for measuring intervals. */
static inline double bench_monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* Folds one word per 64 bytes of data into sum, so that the copy that
 * produced data cannot be optimized away. */
static inline uint64_t bench_checksum(uint64_t sum, const unsigned char *data, uint64_t size)
{
    for (uint64_t i = 0; i + 8 <= size; i += 64) {
        uint64_t word;
        memcpy(&word, data + i, sizeof word);
        sum = sum * 31 + word;
    }
    return sum;
}

static inline int bench_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of samples (sorted in place): the middle one of an odd count,
 * the mean of the two middle ones of an even count. */
static inline double bench_median(double *samples, size_t count)
{
    qsort(samples, count, sizeof *samples, bench_compare_doubles);
    return count % 2 ? samples[count / 2] : 0.5 * (samples[count / 2 - 1] + samples[count / 2]);
}

#endif
