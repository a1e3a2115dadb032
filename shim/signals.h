/* signals.h - the stop signals (SIGTERM, SIGINT, SIGUSR1) and their
 * coexistence with a trainer's own dispositions (see signals.c). */
#ifndef ADAPTSHIM_SIGNALS_H
#define ADAPTSHIM_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

#include "run_policy.h"
#include "stop_signal_state.h"

/* Installs the shim's handlers (once, for a configured process). */
void shim_signals_install(void);
/* In a forked child: forgets the stop its parent deferred (the parent's
 * own, seen through shim_signals_start_process_stopping). */
void shim_signals_after_fork_in_child(void);
/* This is a forked child, and the process that started the trainer is
 * running with a stop pending (async-signal-safe). */
bool shim_signals_start_process_stopping(void);
/* The trainer's main returned: a stop signal from now on finds its work
 * done. */
void shim_signals_note_main_returned(void);
/* Every replica agreed to stop at `agreed_at` (log_monotonic_seconds) and
 * drains for `drain_seconds`: the deadline moves past the drain. */
void shim_signals_stop_agreed(double agreed_at, double drain_seconds);

#endif
