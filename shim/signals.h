/* signals.h - the stop signals (SIGTERM, SIGINT, SIGUSR1) and their
 * coexistence with a trainer's own handlers. */
#ifndef ADAPTSHIM_SIGNALS_H
#define ADAPTSHIM_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

/* The stop signal received (0: none). */
extern volatile sig_atomic_t shim_stop_signal;

/* Installs the shim's handlers (once, for a configured process). */
void shim_signals_install(void);
/* True when the trainer installed a handler of its own for a stop signal. */
bool shim_signals_trainer_handles_stop(void);

#endif
