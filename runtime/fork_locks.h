/* fork_locks.h - a process-private mutex across fork(2), for pthread_atfork
 * handlers (shim/fork_safety.c holds the order every lock is taken in).
 *
 * Before the fork the forking thread takes the lock, so that no other
 * thread is inside what it guards while the child's copy is made.  The
 * parent gives it back.  The child makes it anew instead of unlocking it:
 * its one thread has another thread id than the one that took it, which a
 * recursive or error-checking mutex would refuse to unlock, and a fresh
 * mutex is what glibc does for its own locks in a child.  Process-shared
 * locks (a file's pass state, the pass-state arena) are not for these
 * helpers: another process may hold them, and a child must never reset
 * them. */
#ifndef ADAPTSHIM_FORK_LOCKS_H
#define ADAPTSHIM_FORK_LOCKS_H

#include <pthread.h>

static inline void fork_lock_before(pthread_mutex_t *lock)
{
    pthread_mutex_lock(lock);
}

static inline void fork_lock_after_in_parent(pthread_mutex_t *lock)
{
    pthread_mutex_unlock(lock);
}

static inline void fork_lock_after_in_child(pthread_mutex_t *lock)
{
    pthread_mutex_init(lock, NULL);
}

#endif
