/* stop_signal_state.h - what the stop handler (signals.c) records of a
 * deferred stop signal, for the code that ends the process: which signal
 * was deferred, and whether the trainer's own handler for it ran before its
 * main returned (together: the facts that decide a trainer's own exit
 * status, run_policy.h).
 *
 * Who includes it: signals.c, the only writer (from its signal handler),
 * and the readers, ending.c and steps.c.  It includes nothing of the step
 * code: ending.c reads the facts here instead of through signals.h, since
 * signals.c calls into ending.c and the two would include each other. */
#ifndef ADAPTSHIM_STOP_SIGNAL_STATE_H
#define ADAPTSHIM_STOP_SIGNAL_STATE_H

#include <signal.h>

#include "run_policy.h"

/* The stop signal deferred last (0: none). */
extern volatile sig_atomic_t shim_stop_signal;
/* The trainer's own handler ran for a deferred stop signal before its main
 * returned: the trainer stopped because it was told to. */
extern volatile sig_atomic_t shim_handler_ran_before_exit;

/* What decides whether the trainer's own exit becomes status 143
 * (async-signal-safe: two reads). */
struct stop_exit_facts shim_stop_exit_facts(void);

#endif
