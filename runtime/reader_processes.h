/* reader_processes.h - the processes that delivered records of a pass.
 *
 * A loader that visits records by seeking never reads to the end of the
 * view, so no read returning 0 tells the shim that its loop over a pass is
 * over.  For a PyTorch DataLoader with workers, the workers exiting does: it
 * joins them only when its iterator is exhausted (every batch consumed) or
 * dropped.  Without that signal a checkpoint taken between two epochs would
 * bind a complete pass, which a trainer restoring "epoch e+1" sees as an
 * empty epoch, and with `lookahead=N` (adaptshim(7) "ADAPTDL_DATA") it would bind N records
 * short, so the resumed epoch would begin with the old epoch's last records.  The set lives in the pass state shared
 * across fork; it names at most READER_PROCESSES_MAX processes, and beyond
 * that counts every reader as possibly alive.  Reads of the process that
 * takes the snapshot do not count: a trainer that peeks at `dataset[0]`
 * before its loop still has a loop that is over once its workers are. */
#ifndef ADAPTSHIM_READER_PROCESSES_H
#define ADAPTSHIM_READER_PROCESSES_H

#include <stdbool.h>
#include <sys/types.h>

#define READER_PROCESSES_MAX 32

struct reader_processes {
    pid_t pids[READER_PROCESSES_MAX];
    unsigned count;
    bool overflowed;              /* more readers than pids can name */
};

void reader_processes_reset(struct reader_processes *readers);
/* Adds a process (once). */
void reader_processes_add(struct reader_processes *readers, pid_t pid);
/* True when the set names a process other than `self` and every such
 * process has exited: the loop that used worker processes is over.  False
 * while one of them exists (a zombie not yet reaped does too), when only
 * `self` read, and when the set overflowed (an unnamed reader may run). */
bool reader_processes_others_exited(const struct reader_processes *readers, pid_t self);

/* True when `self` is the only process of the set. */
bool reader_processes_only(const struct reader_processes *readers, pid_t self);

/* The calling process's id, cached (renewed in forked children), so that
 * noting a reader costs no system call per read. */
pid_t reader_process_self(void);

#endif
