/* signals.c - the stop signals (SIGTERM, SIGINT, SIGUSR1) and the trainer's
 * own dispositions for them.
 *
 * What a stop signal does is decided by runtime/run_policy.c; this file
 * gathers the facts and carries the decision out:
 *   - with nothing to synchronize (no data view, no checkpoint glob, no MPI)
 *     the signal keeps its ordinary behaviour: the trainer's handler runs,
 *     or it stays ignored, or the process ends by it;
 *   - otherwise the stop is deferred: the stop flag is set, the trainer's
 *     handler runs, and the process stops at the next agreement point (see
 *     steps.c), or when ADAPTDL_STOP_SECONDS have passed (stop_deadline.c);
 *     a second SIGINT exits at once with 130.
 *
 * Trainers often install their own handler for these signals (AdaptDL users
 * met exactly this: a framework's SIGTERM handler replaced the library's).
 * Here both run: sigaction() and signal() for a stop signal are interposed,
 * the trainer's disposition is remembered instead of installed (also one it
 * inherited, such as SIGINT ignored in a background job), and the shim's
 * handler calls the trainer's after its own work.  The trainer sees its
 * disposition as installed (sigaction reports it back as the old action),
 * and the shim's handler takes on its SA_RESTART, SA_ONSTACK and mask, so
 * that system calls interrupted by the signal behave as the trainer
 * expects.
 *
 * The trainer's disposition is written by its sigaction() and read by the
 * handler, which may interrupt that very sigaction() halfway through its
 * copy (or run on another thread meanwhile).  Plain stores gave no order
 * the handler could rely on, not even against the compiler: it could see
 * a new handler with the old flags.  Each disposition therefore lives in a
 * runtime/signal_action_cell: a change is written whole into a slot of its
 * own and published by one atomic store of its index, and the handler
 * copies the published slot, checking with the slot's sequence number
 * that no writer was in it.  The handler reads it once per signal and
 * decides everything from that one copy. */
#include "signals.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "ending.h"
#include "log.h"
#include "real_functions.h"
#include "run_policy.h"
#include "shared_stop_flag.h"
#include "signal_action_cell.h"
#include "shim.h"
#include "step_state.h"
#include "stop_deadline.h"
#include "stop_signal_state.h"

/* glibc's own names for the functions wrapped here, bound at link time: a
 * tool preloaded before this library (ThreadSanitizer, for one) calls
 * sigaction while it initializes, before dlsym may be used, so these two are
 * never looked up with dlsym. */
extern int __sigaction(int signal_number, const struct sigaction *action,
                       struct sigaction *old_action);
extern sighandler_t bsd_signal(int signal_number, sighandler_t handler);

static volatile sig_atomic_t shim_deferred_interrupts;
static volatile sig_atomic_t shim_default_action_deferred;
static volatile sig_atomic_t shim_main_returned;
/* when the first stop was deferred, in log_monotonic_seconds() */
static volatile double shim_stop_requested_at;
static bool shim_signals_installed;
/* Mapped at install, before the trainer can fork: raised when the start
 * process defers a stop, read by its forked children. */
static struct shared_stop_flag *shim_start_process_stop;

static const int shim_stop_signals[] = {SIGTERM, SIGINT, SIGUSR1};
#define SHIM_STOP_SIGNAL_COUNT (sizeof shim_stop_signals / sizeof shim_stop_signals[0])
/* The trainer's disposition of each stop signal (all zero: none set). */
static struct signal_action_cell shim_trainer_actions[SHIM_STOP_SIGNAL_COUNT];

static void shim_stop_signal_handler(int signal_number, siginfo_t *information, void *context);

static int shim_stop_signal_index(int signal_number)
{
    for (size_t i = 0; i < SHIM_STOP_SIGNAL_COUNT; i++)
        if (shim_stop_signals[i] == signal_number)
            return (int)i;
    return -1;
}

/* A whole copy of the trainer's disposition of stop signal `index`
 * (async-signal-safe). */
static struct signal_action_value shim_trainer_action(int index)
{
    struct signal_action_value trainer;
    signal_action_cell_read(&shim_trainer_actions[index], &trainer);
    return trainer;
}

/* What the signal would do without the library. */
static enum stop_disposition shim_trainer_disposition(const struct signal_action_value *trainer)
{
    if (!trainer->installed)
        return STOP_DISPOSITION_DEFAULT;
    const struct sigaction *action = &trainer->action;
    if (action->sa_flags & SA_SIGINFO)
        return action->sa_sigaction != NULL ? STOP_DISPOSITION_HANDLER : STOP_DISPOSITION_DEFAULT;
    if (action->sa_handler == SIG_IGN)
        return STOP_DISPOSITION_IGNORE;
    if (action->sa_handler == SIG_DFL || action->sa_handler == NULL)
        return STOP_DISPOSITION_DEFAULT;
    return STOP_DISPOSITION_HANDLER;
}

/* The shim's handler, with the trainer's restart, stack and mask flags when
 * the trainer has a handler of its own. */
static void shim_install_stop_handler(int index)
{
    struct signal_action_value trainer = shim_trainer_action(index);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = shim_stop_signal_handler;
    sigemptyset(&action.sa_mask);
    /* a trainer without a handler never sees EINTR from a stop signal */
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    if (shim_trainer_disposition(&trainer) == STOP_DISPOSITION_HANDLER) {
        action.sa_mask = trainer.action.sa_mask;
        action.sa_flags = SA_SIGINFO | (trainer.action.sa_flags & (SA_RESTART | SA_ONSTACK));
    }
    __sigaction(shim_stop_signals[index], &action, NULL);
}

static void shim_call_trainer_handler(int index, const struct signal_action_value *trainer,
                                      int signal_number, siginfo_t *information, void *context)
{
    if (shim_trainer_disposition(trainer) != STOP_DISPOSITION_HANDLER)
        return;
    const struct sigaction *action = &trainer->action;
    bool sigaction_style = (action->sa_flags & SA_SIGINFO) != 0;
    void (*three_argument)(int, siginfo_t *, void *) = action->sa_sigaction;
    void (*one_argument)(int) = action->sa_handler;
    /* a one-shot handler is the default again once it ran, as in the kernel */
    if (action->sa_flags & SA_RESETHAND) {
        struct signal_action_value reset = {.installed = true};
        reset.action.sa_handler = SIG_DFL;
        signal_action_cell_publish(&shim_trainer_actions[index], &reset);
    }
    if (sigaction_style)
        three_argument(signal_number, information, context);
    else
        one_argument(signal_number);
}

/* SIG_DFL for a stop signal ends the process: it is raised again with the
 * default disposition, so the process ends by the signal itself, exactly as
 * without the library. */
static void shim_take_default_action(int index, int signal_number)
{
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    __sigaction(signal_number, &default_action, NULL);
    sigset_t only_this;
    sigemptyset(&only_this);
    sigaddset(&only_this, signal_number);
    raise(signal_number);  /* pending: blocked while this handler runs */
    pthread_sigmask(SIG_UNBLOCK, &only_this, NULL);
    /* not reached unless something kept the signal from ending the process */
    shim_install_stop_handler(index);
}

static void shim_signal_ordinary(int index, const struct signal_action_value *trainer,
                                 int signal_number, siginfo_t *information, void *context)
{
    switch (shim_trainer_disposition(trainer)) {
    case STOP_DISPOSITION_HANDLER:
        shim_call_trainer_handler(index, trainer, signal_number, information, context);
        break;
    case STOP_DISPOSITION_IGNORE:
        break;
    case STOP_DISPOSITION_DEFAULT:
        shim_take_default_action(index, signal_number);
        break;
    }
}

/* Async-signal-safe: getpid, kill. */
bool shim_signals_start_process_stopping(void)
{
    pid_t start = shared_stop_flag_raiser(shim_start_process_stop);
    if (start == 0 || start == getpid())
        return false;
    int saved_errno = errno;
    bool running = kill(start, 0) == 0 || errno == EPERM;
    errno = saved_errno;
    return running;
}

static void shim_deadline_passed(void)
{
    struct stop_deadline_facts facts = {
        .default_action_deferred = shim_default_action_deferred != 0,
        .ending = shim_ending_state(),
        .job_record_writable = shim_deadline_has_worker(),
        .start_process_stopping = shim_signals_start_process_stopping(),
    };
    switch (stop_policy_at_deadline(&facts)) {
    case STOP_DEADLINE_NOTHING:
        if (facts.ending != STOP_ENDING_EXITING)
            log_signal_safe(LOG_LEVEL_INFO,
                            "no agreement point within ADAPTDL_STOP_SECONDS of the stop "
                            "signal: the trainer's own handling of the signal stands");
        break;
    case STOP_DEADLINE_EXIT:
        shim_deadline_wake_worker();
        break;
    case STOP_DEADLINE_EXIT_AT_ONCE:
        shim_ending_at_deadline_at_once();
        break;
    case STOP_DEADLINE_WAIT_AGAIN:
        if (!shim_deadline_arm(shim_stop_signal, shim_session.config.stop_seconds))
            log_signal_safe(LOG_LEVEL_WARN, "the stop deadline cannot be armed again "
                                            "(timer_settime failed): this child waits for "
                                            "its start process to end the job");
        break;
    }
}

static void shim_defer_stop(int index, const struct signal_action_value *trainer,
                            int signal_number, siginfo_t *information, void *context)
{
    if (signal_number == SIGINT)
        shim_deferred_interrupts++;
    if (shim_trainer_disposition(trainer) == STOP_DISPOSITION_DEFAULT)
        shim_default_action_deferred = 1;
    if (!shim_in_forked_child())
        shared_stop_flag_raise(shim_start_process_stop, getpid());
    if (!shim_stop_signal) {
        shim_stop_requested_at = log_monotonic_seconds();
        log_signal_safe(LOG_LEVEL_INFO, "stop requested by a signal: stopping at the next "
                                        "agreement point, at the latest after "
                                        "ADAPTDL_STOP_SECONDS");
        if (!shim_deadline_arm(signal_number, shim_session.config.stop_seconds))
            log_signal_safe(LOG_LEVEL_WARN, "the stop deadline cannot be armed (timer_create "
                                            "failed): the stop waits for an agreement point");
    }
    shim_stop_signal = signal_number;
    if (shim_trainer_disposition(trainer) == STOP_DISPOSITION_HANDLER && !shim_main_returned)
        shim_handler_ran_before_exit = 1;
    shim_call_trainer_handler(index, trainer, signal_number, information, context);
}

static void shim_stop_signal_handler(int signal_number, siginfo_t *information, void *context)
{
    int saved_errno = errno;
    int index = shim_stop_signal_index(signal_number);
    if (shim_deadline_is_expiry(information)) {
        shim_deadline_passed();
    } else if (index >= 0) {
        /* one copy of the trainer's disposition decides everything below */
        struct signal_action_value trainer = shim_trainer_action(index);
        struct stop_arrival arrival = {
            .something_to_synchronize = shim_steps_something_to_synchronize(),
            .interrupt = signal_number == SIGINT,
            .deferred_interrupts = (unsigned)shim_deferred_interrupts,
        };
        switch (stop_policy_on_arrival(&arrival)) {
        case STOP_ARRIVAL_ORDINARY:
            shim_signal_ordinary(index, &trainer, signal_number, information, context);
            break;
        case STOP_ARRIVAL_EXIT_AT_ONCE:
            log_signal_safe(LOG_LEVEL_WARN, "second SIGINT: exiting at once with status 130");
            _exit(STOP_STATUS_INTERRUPTED);
        case STOP_ARRIVAL_DEFER:
            shim_defer_stop(index, &trainer, signal_number, information, context);
            break;
        }
    }
    errno = saved_errno;
}

void shim_signals_install(void)
{
    if (shim_signals_installed)
        return;
    for (size_t i = 0; i < SHIM_STOP_SIGNAL_COUNT; i++) {
        /* a disposition set before us (a handler of the trainer or of a
         * library, or SIG_IGN inherited from the parent) is kept, as if it
         * had been set through the wrapper */
        struct signal_action_value previous = {.installed = true};
        if (__sigaction(shim_stop_signals[i], NULL, &previous.action) == 0 &&
            ((previous.action.sa_flags & SA_SIGINFO) || previous.action.sa_handler != SIG_DFL))
            signal_action_cell_publish(&shim_trainer_actions[i], &previous);
        shim_install_stop_handler((int)i);
    }
    shim_start_process_stop = shared_stop_flag_create();
    if (shim_start_process_stop == NULL)
        log_warn("the stop flag shared with forked children cannot be mapped (%s): a "
                 "DataLoader worker may stop before its parent", strerror(errno));
    shim_signals_installed = true;
}

/* A stop the parent deferred is the parent's: the child did not get the
 * signal, and its deadline timer did not survive the fork either.  The
 * parent's pending stop stays visible through the shared flag. */
void shim_signals_after_fork_in_child(void)
{
    shim_stop_signal = 0;
    shim_deferred_interrupts = 0;
    shim_default_action_deferred = 0;
    shim_handler_ran_before_exit = 0;
    shim_stop_requested_at = 0;
}

void shim_signals_note_main_returned(void)
{
    shim_main_returned = 1;
}

void shim_signals_stop_agreed(double agreed_at, double drain_seconds)
{
    if (shim_stop_signal == 0)
        return;
    struct stop_deadline_inputs inputs = {
        .requested_at = shim_stop_requested_at,
        .stop_seconds = shim_session.config.stop_seconds,
        .agreed = true,
        .agreed_at = agreed_at,
        .drain_seconds = drain_seconds,
    };
    double deadline = stop_policy_deadline(&inputs);
    if (!shim_deadline_arm(shim_stop_signal, deadline - log_monotonic_seconds()))
        log_warn("the stop deadline cannot be moved past the drain: %s", strerror(errno));
}

SHIM_EXPORT int sigaction(int signal_number, const struct sigaction *action,
                          struct sigaction *old_action)
{
    int index = shim_stop_signal_index(signal_number);
    if (SHIM_LIKELY(index < 0) || !shim_signals_installed || shim_guarded() || shim_frozen())
        return __sigaction(signal_number, action, old_action);
    if (old_action != NULL) {
        struct signal_action_value trainer = shim_trainer_action(index);
        if (trainer.installed) {
            *old_action = trainer.action;
        } else {
            memset(old_action, 0, sizeof *old_action);
            old_action->sa_handler = SIG_DFL;
        }
    }
    if (action != NULL) {
        /* written whole elsewhere, then published at once: a stop signal
         * arriving now sees the old disposition or the new one */
        struct signal_action_value trainer = {.installed = true, .action = *action};
        signal_action_cell_publish(&shim_trainer_actions[index], &trainer);
        shim_install_stop_handler(index);
        log_debug("the trainer set its own disposition for signal %d: it applies after the "
                  "shim's handler", signal_number);
    }
    return 0;
}

SHIM_EXPORT sighandler_t signal(int signal_number, sighandler_t handler)
{
    int index = shim_stop_signal_index(signal_number);
    if (SHIM_LIKELY(index < 0) || !shim_signals_installed || shim_guarded() || shim_frozen())
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
