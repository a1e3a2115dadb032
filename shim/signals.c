/* signals.c - the stop signals and the trainer's own handlers.
 *
 * SIGTERM, SIGINT and SIGUSR1 set the stop flag (SIGUSR1 because mpirun
 * forwards it to every rank and does not forward SIGTERM); a second SIGINT
 * exits at once with 130.
 *
 * Trainers often install their own handler for these signals (AdaptDL users
 * met exactly this: a framework's SIGTERM handler replaced the library's).
 * Here both run: sigaction() and signal() for a stop signal are interposed,
 * the trainer's handler is remembered instead of installed, and the shim's
 * handler calls it after setting the flag.  The trainer sees its handler as
 * installed (sigaction reports it back as the old action), and its own
 * graceful shutdown still happens; the shim then stops at the next agreed
 * step boundary, or, if the trainer finishes first, turns its exit into
 * status 143 at the very end (see steps.c), because the job was preempted
 * and must be restarted. */
#include "signals.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "real_functions.h"
#include "shim.h"

/* glibc's own names for the functions wrapped here, bound at link time: a
 * tool preloaded before this library (ThreadSanitizer, for one) calls
 * sigaction while it initializes, before dlsym may be used, so these two are
 * never looked up with dlsym. */
extern int __sigaction(int signal_number, const struct sigaction *action,
                       struct sigaction *old_action);
extern sighandler_t bsd_signal(int signal_number, sighandler_t handler);

volatile sig_atomic_t shim_stop_signal;
static volatile sig_atomic_t shim_interrupts;
static bool shim_signals_installed;

static const int shim_stop_signals[] = {SIGTERM, SIGINT, SIGUSR1};
#define SHIM_STOP_SIGNAL_COUNT (sizeof shim_stop_signals / sizeof shim_stop_signals[0])
static struct sigaction shim_trainer_actions[SHIM_STOP_SIGNAL_COUNT];
static volatile sig_atomic_t shim_trainer_installed[SHIM_STOP_SIGNAL_COUNT];

static int shim_stop_signal_index(int signal_number)
{
    for (size_t i = 0; i < SHIM_STOP_SIGNAL_COUNT; i++)
        if (shim_stop_signals[i] == signal_number)
            return (int)i;
    return -1;
}

static void shim_call_trainer_handler(int index, int signal_number, siginfo_t *information,
                                      void *context)
{
    if (!shim_trainer_installed[index])
        return;
    const struct sigaction *action = &shim_trainer_actions[index];
    if (action->sa_flags & SA_SIGINFO) {
        if (action->sa_sigaction != NULL)
            action->sa_sigaction(signal_number, information, context);
        return;
    }
    if (action->sa_handler != SIG_DFL && action->sa_handler != SIG_IGN &&
        action->sa_handler != NULL)
        action->sa_handler(signal_number);
}

static void shim_stop_signal_handler(int signal_number, siginfo_t *information, void *context)
{
    int saved_errno = errno;
    int index = shim_stop_signal_index(signal_number);
    if (signal_number == SIGINT && ++shim_interrupts >= 2) {
        log_signal_safe(LOG_LEVEL_WARN, "second SIGINT: exiting at once with status 130");
        _exit(130);
    }
    if (!shim_stop_signal)
        log_signal_safe(LOG_LEVEL_INFO, "stop requested by a signal: stopping at the next "
                                        "agreed step boundary");
    shim_stop_signal = signal_number;
    if (index >= 0)
        shim_call_trainer_handler(index, signal_number, information, context);
    errno = saved_errno;
}

void shim_signals_install(void)
{
    if (shim_signals_installed)
        return;
    for (size_t i = 0; i < SHIM_STOP_SIGNAL_COUNT; i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = shim_stop_signal_handler;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESTART | SA_SIGINFO;
        /* a handler the trainer (or a library) installed before us is kept
         * and chained, as if it had been installed through the wrapper */
        struct sigaction previous;
        if (__sigaction(shim_stop_signals[i], &action, &previous) == 0 &&
            ((previous.sa_flags & SA_SIGINFO) ||
             (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN))) {
            shim_trainer_actions[i] = previous;
            shim_trainer_installed[i] = 1;
        }
    }
    shim_signals_installed = true;
}

bool shim_signals_trainer_handles_stop(void)
{
    for (size_t i = 0; i < SHIM_STOP_SIGNAL_COUNT; i++)
        if (shim_trainer_installed[i])
            return true;
    return false;
}

SHIM_EXPORT int sigaction(int signal_number, const struct sigaction *action,
                          struct sigaction *old_action)
{
    int index = shim_stop_signal_index(signal_number);
    if (SHIM_LIKELY(index < 0) || !shim_signals_installed || shim_guarded())
        return __sigaction(signal_number, action, old_action);
    if (old_action != NULL) {
        if (shim_trainer_installed[index]) {
            *old_action = shim_trainer_actions[index];
        } else {
            memset(old_action, 0, sizeof *old_action);
            old_action->sa_handler = SIG_DFL;
        }
    }
    if (action != NULL) {
        shim_trainer_installed[index] = 0;
        shim_trainer_actions[index] = *action;
        shim_trainer_installed[index] = 1;
        log_debug("the trainer installed its own handler for signal %d: it runs after the "
                  "shim's", signal_number);
    }
    return 0;
}

SHIM_EXPORT sighandler_t signal(int signal_number, sighandler_t handler)
{
    int index = shim_stop_signal_index(signal_number);
    if (SHIM_LIKELY(index < 0) || !shim_signals_installed || shim_guarded())
        return bsd_signal(signal_number, handler);
    struct sigaction action, previous;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  /* BSD semantics, as glibc's signal() */
    if (sigaction(signal_number, &action, &previous) != 0)
        return SIG_ERR;
    /* sa_handler and sa_sigaction share storage: reporting it back through
     * signal()'s type is what glibc's own signal() does */
    return previous.sa_handler;
}
