/* fork_safety.c - every lock the library owns, across fork(2).
 *
 * fork copies one thread.  A lock another thread held at that moment stays
 * held in the child for ever, and what it guarded may be half changed: a
 * child forked while a reader thread was registering a data file, or
 * inside a stream's cookie, hung at its first open or fclose.  So the
 * prepare handler takes every lock of the library, in one order, and the
 * handlers after the fork give them back: the parent unlocks its private
 * locks, the child makes them anew (runtime/fork_locks.h says why).
 *
 * The order, outermost first.  It is the order in which the code nests
 * them (a lock is only ever taken while holding locks above it), so the
 * forking thread waits for each holder in turn and never for one that
 * waits for it:
 *   1. the cooperative state's lock (its API calls take nothing of the
 *      shim's under it; a trainer's save or load callback runs under it);
 *   2. the list of followed stdio streams (then glibc's lock of a stream,
 *      not taken here);
 *   3. the step code's lock (a train read through a stream takes it under
 *      glibc's lock of the stream, before any cookie lock);
 *   4. the data-file registry (held while a file registers, its line index
 *      built included);
 *   5. the cookie lock of every view stream;
 *   6. every data file's pass-state lock, by file identity (below);
 *   7. the statistical epochs (taken under a file's lock when a pass is
 *      planned);
 *   8. the table of the shim's view mappings;
 *   9. the outstanding gradient Iallreduces;
 *  10. the descriptor table's lock, then its stripes (held across a
 *      close(2) only);
 *  11. the lock around starting the stop deadline's thread.
 * The pass-state arena's lock is not taken: only a file's registration
 * takes it, under the registry's lock, so no thread of this process holds
 * it once the registry's is held here; a process-shared lock held by
 * another process of the job is that process's to give back.
 *
 * Files' pass-state locks are process-shared and robust (adaptshim(7) "After fork": the
 * pass lives in memory shared with DataLoader workers).  They are taken
 * too, because they also guard this process's own copy of the view (its
 * permutation, its line offsets), which the child must not copy half
 * rebuilt.  Taken in prepare they belong to the forking thread, and only
 * the parent gives them back: the child's thread has another id, so an
 * unlock there would be refused (EPERM), and a reset there would break a
 * lock that other processes use.  The child waits for the parent's unlock
 * like for any other holder; if the parent dies first, the robust lock
 * reports its owner dead and is made consistent (dataset_file_lock).
 * Every process takes them ordered by file identity, not by its own
 * registration order, so that a parent and a worker forking at the same
 * time wait for each other's in one order.
 *
 * glibc runs the prepare handlers before it takes its own stdio list and
 * malloc locks, and the child handlers after it has made its own anew; it
 * also runs the handlers of concurrent forks one fork at a time, so the
 * signal mask saved here is one fork's.  Signals are blocked from prepare
 * to the handlers after the fork: a handler that read a data file while
 * this thread holds every lock would wait for itself.
 *
 * A thread that forks while it holds one of these locks itself deadlocks in
 * prepare (only the step code's lock is recursive), as glibc's own fork
 * does when it interrupts malloc: the trainer's code that runs under a lock
 * of the library is a save or load callback of the cooperative API (under
 * the cooperative state's lock) and a signal handler that interrupted a
 * wrapper; neither may fork. */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "fork_locks.h"
#include "fork_safety.h"
#include "log.h"
#include "shim.h"
#include "signals.h"
#include "stdio_streams.h"
#include "steps.h"
#include "stop_deadline.h"

static sigset_t shim_fork_saved_signal_mask;

static void shim_fork_block_signals(void)
{
    sigset_t every_signal;
    sigfillset(&every_signal);
    pthread_sigmask(SIG_SETMASK, &every_signal, &shim_fork_saved_signal_mask);
}

static void shim_fork_restore_signals(void)
{
    pthread_sigmask(SIG_SETMASK, &shim_fork_saved_signal_mask, NULL);
}

static void shim_fork_prepare(void)
{
    shim_fork_block_signals();
    fork_lock_before(&shim_session.cooperative.lock);
    shim_streams_fork_prepare_list();
    shim_steps_fork_prepare();
    fork_lock_before(&shim_session.registry.lock);
    shim_streams_fork_prepare_cookies();
    dataset_registry_lock_files_for_fork(&shim_session.registry);
    fork_lock_before(&shim_session.epochs.lock);
    shim_mappings_fork_prepare();
    shim_mpi_requests_fork_prepare();
    fd_table_fork_prepare();
    shim_deadline_fork_prepare();
}

static void shim_fork_parent(void)
{
    shim_deadline_fork_parent();
    fd_table_fork_parent();
    shim_mpi_requests_fork_parent();
    shim_mappings_fork_parent();
    fork_lock_after_in_parent(&shim_session.epochs.lock);
    dataset_registry_unlock_files_after_fork(&shim_session.registry);
    shim_streams_fork_parent_cookies();
    fork_lock_after_in_parent(&shim_session.registry.lock);
    shim_steps_fork_parent();
    shim_streams_fork_parent_list();
    fork_lock_after_in_parent(&shim_session.cooperative.lock);
    shim_fork_restore_signals();
}

/* The child has one thread; the files' locks are left to the parent (see
 * above).  Its state beyond locks: the process id wrappers compare with,
 * and the stop its parent deferred, which is not its own. */
static void shim_fork_child(void)
{
    shim_note_process_after_fork();
    shim_deadline_fork_child();
    fd_table_fork_child();
    shim_mpi_requests_fork_child();
    shim_mappings_fork_child();
    fork_lock_after_in_child(&shim_session.epochs.lock);
    shim_streams_fork_child();
    fork_lock_after_in_child(&shim_session.registry.lock);
    shim_steps_fork_child();
    fork_lock_after_in_child(&shim_session.cooperative.lock);
    shim_signals_after_fork_in_child();
    shim_fork_restore_signals();
}

static void shim_fork_register_handlers(void)
{
    if (pthread_atfork(shim_fork_prepare, shim_fork_parent, shim_fork_child) != 0)
        log_warn("cannot register the fork handlers (out of memory): a process forked "
                 "while another thread is inside the library may hang in it");
}

void shim_fork_safety_install(void)
{
    static pthread_once_t installed = PTHREAD_ONCE_INIT;
    pthread_once(&installed, shim_fork_register_handlers);
}
