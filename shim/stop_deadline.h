/* stop_deadline.h - the clock of a deferred stop (a stop signal never waits
 * longer than ADAPTDL_STOP_SECONDS for an agreement point): a kernel timer armed from the signal handler, and the thread that
 * does the stop when it passes (see stop_deadline.c). */
#ifndef ADAPTSHIM_STOP_DEADLINE_H
#define ADAPTSHIM_STOP_DEADLINE_H

#include <signal.h>
#include <stdbool.h>

/* Starts the thread that stops the process at the deadline (once per
 * process; outside any signal handler).  Without it the deadline still
 * ends the process, but cannot write the job record. */
void shim_deadline_start_worker(void);
/* Around fork (shim/fork_safety.c): the lock that guards starting the
 * thread, taken before, given back in the parent, made anew in the child. */
void shim_deadline_fork_prepare(void);
void shim_deadline_fork_parent(void);
void shim_deadline_fork_child(void);
/* True when this process (not a forked copy of it) has that thread. */
bool shim_deadline_has_worker(void);

/* Async-signal-safe.  Arms the deadline `seconds` from now; the timer
 * raises `signal_number`, which the stop handler recognizes with
 * shim_deadline_is_expiry().  False when the timer cannot be made. */
bool shim_deadline_arm(int signal_number, double seconds);
/* True when `information` describes the deadline's own signal. */
bool shim_deadline_is_expiry(const siginfo_t *information);
/* Async-signal-safe: from the handler at expiry, hands the stop to the
 * thread (shim_ending_at_deadline runs there). */
void shim_deadline_wake_worker(void);

#endif
