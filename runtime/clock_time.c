/* clock_time.c - Unix and monotonic time as seconds in a double (see
 * clock_time.h).  Async-signal-safe: clock_gettime(2) is, and nothing else
 * is called. */
#include "clock_time.h"

#include <time.h>

static double clock_seconds_of(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

double clock_unix_seconds(void)
{
    return clock_seconds_of(CLOCK_REALTIME);
}

double clock_monotonic_seconds(void)
{
    return clock_seconds_of(CLOCK_MONOTONIC);
}
