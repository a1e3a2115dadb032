/* stop_deadline.c - the clock of a deferred stop: a stop that finds no
 * agreement point within ADAPTDL_STOP_SECONDS does not wait longer.
 *
 * The deadline must pass while the trainer is somewhere the shim never sees
 * (an evaluation, a long save, a sleep), so no interposed call can carry it.
 * A POSIX timer of the kernel does: it is created and armed with raw system
 * calls, which are async-signal-safe, from the stop handler itself, so a
 * forked child that is signalled makes its own (timers are not inherited).
 * It raises the stop signal with si_code SI_TIMER and the address of a
 * marker as its value, which tells it from a signal someone sent.
 *
 * What the deadline then does (writing the job record: msgpack, malloc,
 * files) is not async-signal-safe, and the trainer's thread may be anywhere,
 * even inside malloc.  So a worker thread, started before main (or when MPI
 * comes up) in a process that has something to synchronize, blocks every
 * signal and sleeps on a semaphore; the handler posts it (sem_post is
 * async-signal-safe) and the worker does the stop (shim_ending_at_deadline).
 * A forked child has no worker: it never writes the job record, and exits
 * from the handler.
 *
 * The worker keeps a descriptor table of its own, holding only the log and
 * metrics files (it opens the job record's files itself).  A second thread
 * sharing the process's table would make the kernel count references on
 * every descriptor call of the trainer (the file-table fast path holds
 * only for a table with one user): about 15% more per 4 KiB read of a
 * file the shim never touches, where the shim may add at most 2%.  A whole copy
 * would keep the trainer's files open after it closed them (a pipe would
 * never see its end), hence the closes. */
#include "stop_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ending.h"
#include "fork_locks.h"
#include "events.h"
#include "log.h"
#include "shim.h"

/* Its address is the timer's signal value. */
static const char shim_deadline_marker = 0;
static volatile sig_atomic_t shim_timer_pid;   /* the process the timer belongs to */
static volatile sig_atomic_t shim_timer_id;    /* the kernel's timer id */

static sem_t shim_worker_wake;
static volatile sig_atomic_t shim_worker_pid;  /* the process the worker runs in */
static pthread_mutex_t shim_worker_lock = PTHREAD_MUTEX_INITIALIZER;

/* The longest wait a timer is armed for: ADAPTDL_STOP_SECONDS may be any
 * finite number, time_t may not. */
#define SHIM_DEADLINE_LONGEST_SECONDS 1e9

/* close_range(2) of this thread's own table, by the system call: the
 * shim's close_range wrapper would forget the trainer's descriptors. */
static void shim_deadline_close_range(unsigned first, unsigned last)
{
    syscall(SYS_close_range, first, last, 0);
}

/* Closes every descriptor of this thread's own table but the two kept (-1:
 * none), lowest first. */
static void shim_deadline_close_all_but(int first, int second)
{
    int kept[2] = {first < second ? first : second, first < second ? second : first};
    unsigned low = 0;
    for (int i = 0; i < 2; i++) {
        if (kept[i] < 0 || (unsigned)kept[i] < low)
            continue;
        if ((unsigned)kept[i] > low)
            shim_deadline_close_range(low, (unsigned)kept[i] - 1);
        low = (unsigned)kept[i] + 1;
    }
    shim_deadline_close_range(low, ~0u);
}

static void shim_deadline_take_own_descriptors(void)
{
    if (unshare(CLONE_FILES) != 0) {
        log_debug("stop deadline thread: no descriptor table of its own (%s): descriptor "
                  "calls of the trainer cost a little more", strerror(errno));
        return;
    }
    shim_deadline_close_all_but(log_descriptor(), shim_events_descriptor());
}

static void *shim_deadline_worker(void *unused)
{
    (void)unused;
    /* everything this thread does is the shim's own: never virtualized */
    shim_guard_enter();
    shim_deadline_take_own_descriptors();
    /* named only now: who looks for the thread by its name finds it with
     * its own descriptor table already in place */
    pthread_setname_np(pthread_self(), "adaptshim-stop");
    for (;;) {
        if (sem_wait(&shim_worker_wake) != 0)
            continue;  /* EINTR cannot happen with every signal blocked; be safe */
        shim_ending_at_deadline();
    }
    return NULL;
}

void shim_deadline_start_worker(void)
{
    pid_t pid = getpid();
    pthread_mutex_lock(&shim_worker_lock);
    if (shim_worker_pid == pid) {
        pthread_mutex_unlock(&shim_worker_lock);
        return;
    }
    /* the thread's stack is mapped with mmap, which the shim wraps */
    shim_guard_enter();
    int error = sem_init(&shim_worker_wake, 0, 0) == 0 ? 0 : errno;
    if (error == 0) {
        /* The worker inherits a mask that blocks everything, so that no
         * signal meant for the trainer ever runs on the shim's thread. */
        sigset_t every_signal, previous;
        sigfillset(&every_signal);
        pthread_sigmask(SIG_SETMASK, &every_signal, &previous);
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        error = pthread_create(&thread, &attributes, shim_deadline_worker, NULL);
        pthread_attr_destroy(&attributes);
        pthread_sigmask(SIG_SETMASK, &previous, NULL);
        if (error == 0)
            shim_worker_pid = pid;
    }
    shim_guard_leave();
    pthread_mutex_unlock(&shim_worker_lock);
    if (error != 0)
        log_warn("no thread for the stop deadline (%s): past ADAPTDL_STOP_SECONDS a stop "
                 "ends the process without writing the job record",
                 strerror(error));
}

void shim_deadline_fork_prepare(void)
{
    fork_lock_before(&shim_worker_lock);
}

void shim_deadline_fork_parent(void)
{
    fork_lock_after_in_parent(&shim_worker_lock);
}

/* The worker thread is the parent's: a child that needs one starts its own
 * (shim_worker_pid names the parent). */
void shim_deadline_fork_child(void)
{
    fork_lock_after_in_child(&shim_worker_lock);
}

bool shim_deadline_has_worker(void)
{
    return shim_worker_pid != 0 && shim_worker_pid == getpid();
}

bool shim_deadline_arm(int signal_number, double seconds)
{
    pid_t pid = getpid();
    if (shim_timer_pid != pid) {
        struct sigevent event;
        memset(&event, 0, sizeof event);
        event.sigev_notify = SIGEV_SIGNAL;
        event.sigev_signo = signal_number;
        event.sigev_value.sival_ptr = (void *)&shim_deadline_marker;
        int kernel_timer = 0;
        if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &event, &kernel_timer) != 0)
            return false;
        shim_timer_id = kernel_timer;
        shim_timer_pid = pid;
    }
    if (!(seconds <= SHIM_DEADLINE_LONGEST_SECONDS))
        seconds = SHIM_DEADLINE_LONGEST_SECONDS;
    struct itimerspec when;
    memset(&when, 0, sizeof when);
    if (seconds > 0) {
        when.it_value.tv_sec = (time_t)seconds;
        when.it_value.tv_nsec = (long)((seconds - (double)when.it_value.tv_sec) * 1e9);
    }
    /* an all-zero value would disarm the timer instead of firing it now */
    if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0)
        when.it_value.tv_nsec = 1;
    return syscall(SYS_timer_settime, (int)shim_timer_id, 0, &when, NULL) == 0;
}

bool shim_deadline_is_expiry(const siginfo_t *information)
{
    return information != NULL && information->si_code == SI_TIMER &&
           information->si_value.sival_ptr == (void *)&shim_deadline_marker;
}

void shim_deadline_wake_worker(void)
{
    sem_post(&shim_worker_wake);
}
