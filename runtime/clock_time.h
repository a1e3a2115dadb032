/* clock_time.h - the two clocks the runtime, the preload and the tools read,
 * as seconds in a double: Unix time (what files and metrics record, and
 * what another host or a later run can compare) and monotonic time (what
 * durations and deadlines are measured with: it never jumps when the system
 * clock is set).
 *
 * One copy of each conversion, so that every reader gets the same
 * resolution (nanoseconds) and none forgets the fractional part. */
#ifndef ADAPTSHIM_CLOCK_TIME_H
#define ADAPTSHIM_CLOCK_TIME_H

/* Seconds since the Unix epoch (CLOCK_REALTIME). */
double clock_unix_seconds(void);

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): only the
 * difference of two readings in the same boot means anything. */
double clock_monotonic_seconds(void);

#endif
