/* ending.h - how a configured process ends, once and by one path: an
 * agreed stop, the trainer's own exit, MPI_Finalize or the stop deadline
 * (143 asks for a restart, 130 follows a second SIGINT, otherwise the
 * trainer's own status stands).  Whichever comes first writes the job
 * record, the summary line and the exit event (ending.c); the others find
 * that done.
 *
 * Who includes it: steps.c, signals.c, stop_deadline.c and the MPI layer.
 * ending.c includes step_state.h and stop_signal_state.h, never steps.h or
 * signals.h, whose code calls into it. */
#ifndef ADAPTSHIM_ENDING_H
#define ADAPTSHIM_ENDING_H

#include "run_policy.h"

/* How far the process has ended (safe in a signal handler). */
enum stop_ending shim_ending_state(void);
/* The shim stops the process here with 143: every replica agreed, or a
 * stop without an agreement point reached a train read.  One thread exits
 * through exit(3); another reader thread that gets here too waits for the
 * end. */
void shim_ending_stop_now(const char *why) __attribute__((noreturn));
/* The same stop, but the caller takes the exit: everything the process
 * leaves behind is written (job record, summary, exit event) and the
 * function returns; the caller must then exit with 143 (the Python glue
 * raises SystemExit(143), so that the interpreter's buffers, finally
 * blocks and atexit handlers run, which exit(3) from inside a call made
 * by the interpreter would skip).  The atexit hook then finds the ending
 * written and the status left as it is. */
void shim_ending_stop_by_caller(const char *why);
/* The deadline's worker thread: the stop could not wait longer.  Writes
 * the job record and ends the process with 143, unless the process is
 * ending by itself already (then it returns). */
void shim_ending_at_deadline(void);
/* The same without the job record, from the stop handler (a forked child,
 * or the record was written at MPI_Finalize); returns when the process is
 * ending by itself already.  Async-signal-safe. */
void shim_ending_at_deadline_at_once(void);
/* The process ends normally (MPI_Finalize, exit): job record and metrics. */
void shim_ending_finish(const char *why);
/* The atexit hook: finishes, and turns a trainer's own exit into status
 * 143 when its own handler for a stop signal ran (run_policy.h). */
void shim_ending_at_exit(void);

/* Set by the MPI layer: finalizes MPI before an agreed stop's exit (NULL:
 * nothing to finalize, or a stop without agreement, where MPI_Finalize
 * could wait for ranks that run on). */
extern void (*shim_ending_finalize_mpi)(void);

#endif
