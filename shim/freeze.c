/* freeze.c - the frozen pass-through of a process's teardown.
 *
 * Once MPI_Finalize has returned, and once this library's destructor has
 * run, code may still call the wrapped functions: an MPI library's event
 * thread (PMIx's read a file after MPI_Finalize, and crashed inside the
 * descriptor table), the trainer's atexit handlers after its MPI_Finalize,
 * destructors of libraries finalized after this one, threads that outlive
 * exit's handlers.  The shim's logic must not run then: MPI is gone, and
 * what the library's own teardown left may not be there.  So the process
 * freezes, as Darshan's wrappers do after its shutdown: every wrapper goes
 * straight to the real function, for good.
 *
 * Freezing adds no branch to a wrapper.  It zeroes exactly what their fast
 * paths test already: the process state (shim_paths_active: opens, stats
 * by path, fopen, rename), the descriptor table's bound (fd_table_tracked:
 * reads, seeks, fstat, mmap, close, dup), the followed streams' in-use flag
 * (stdio) and the count of view mappings (munmap, mremap); the MPI and
 * sigaction wrappers check the state where they check whether MPI is up or
 * the signal is a stop signal.  Nothing is freed or reset: a call that was
 * past its fast path when the process froze finishes on intact tables.
 *
 * What the trainer sees afterwards: a descriptor it opened on a view before
 * reads the file itself (the view's reads never moved its offset); a new
 * open is the file itself; a view stream opened before keeps reading its
 * view (it has no file underneath), with no step boundary; checkpoint
 * commits bind no snapshot; a stop signal's disposition set with sigaction
 * goes to the kernel. */
#include "log.h"
#include "shim.h"
#include "stdio_streams.h"

void shim_freeze(const char *why)
{
    int state = __atomic_load_n(&shim_state, __ATOMIC_ACQUIRE);
    if (state == SHIM_STATE_FROZEN)
        return;
    /* the state first: a wrapper that sees the bounds zeroed below and then
     * asks whether the process is active must find it frozen */
    __atomic_store_n(&shim_state, SHIM_STATE_FROZEN, __ATOMIC_SEQ_CST);
    fd_table_freeze();
    shim_streams_freeze();
    shim_mappings_freeze();
    if (state == SHIM_STATE_ACTIVE)
        log_debug("frozen after %s: every wrapper passes through to the real function from now "
                  "on", why);
}

/* The library is being unloaded (the process exits, after every atexit
 * handler): whatever runs later gets the real functions. */
__attribute__((destructor)) static void shim_freeze_at_unload(void)
{
    shim_freeze("the library's destructor");
}
