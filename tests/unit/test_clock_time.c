/* test_clock_time.c - the two clocks as seconds (runtime/clock_time.h):
 * Unix time is the wall clock gettimeofday(2) reads and keeps its fraction, monotonic time
 * never goes back and measures a sleep. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <sys/time.h>
#include <time.h>

#include "clock_time.h"

Test(clock_time, unix_seconds_are_the_wall_clock_between_two_readings)
{
    struct timeval before, after;
    gettimeofday(&before, NULL);
    double now = clock_unix_seconds();
    gettimeofday(&after, NULL);
    double low = (double)before.tv_sec + (double)before.tv_usec * 1e-6;
    double high = (double)after.tv_sec + (double)after.tv_usec * 1e-6;
    cr_expect_geq(now, low - 1e-6, "%f before %f", now, low);
    cr_expect_leq(now, high + 1e-6, "%f after %f", now, high);
    cr_expect_gt(now, 1.5e9, "seconds since 1970, not a monotonic clock: %f", now);
}

Test(clock_time, unix_seconds_keep_the_fraction_of_a_second)
{
    /* Ten readings a few milliseconds apart cannot all land on whole seconds. */
    bool fraction_seen = false;
    for (int reading = 0; reading < 10 && !fraction_seen; reading++) {
        double now = clock_unix_seconds();
        fraction_seen = now != floor(now);
        nanosleep(&(struct timespec){.tv_nsec = 3000000}, NULL);
    }
    cr_assert(fraction_seen);
}

Test(clock_time, monotonic_seconds_never_go_back_and_measure_a_sleep)
{
    double previous = clock_monotonic_seconds();
    for (int reading = 0; reading < 1000; reading++) {
        double now = clock_monotonic_seconds();
        cr_assert_geq(now, previous);
        previous = now;
    }
    double started = clock_monotonic_seconds();
    nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    double slept = clock_monotonic_seconds() - started;
    cr_assert_geq(slept, 0.019, "slept %.6f s", slept);
    cr_assert_lt(slept, 10.0, "slept %.6f s", slept);
}
