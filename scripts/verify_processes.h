/* verify_processes.h - adaptdl-verify's processes and scratch files: it
 * starts each trainer process in a process group of its own (so that its
 * forked workers go with it), waits for the processes of a run while
 * polling for the stop line of the delivery trace, kills whole groups by
 * their ids, and reaps everything it started, workers included (it is
 * their subreaper), so that nothing is left running. */
#ifndef ADAPTSHIM_VERIFY_PROCESSES_H
#define ADAPTSHIM_VERIFY_PROCESSES_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The signal that interrupted adaptdl-verify (SIGINT, SIGTERM), or 0. */
extern volatile sig_atomic_t verify_interrupted;

/* Installs the interrupt handlers, ignores SIGPIPE and makes this process
 * the subreaper of its descendants.  -1 with errno. */
int verify_processes_setup(void);

struct verify_process {
    pid_t pid;               /* also its process group */
    bool running;
    int status;              /* exit status, or 128 + signal */
};

/* Starts `program` with `argv` and `environment` in directory `directory`,
 * stdin from /dev/null, stdout and stderr into the two files (created),
 * in a new process group, killed by the kernel if adaptdl-verify dies.
 * 0, or -1 with a one-line message. */
int verify_launch(struct verify_process *process, const char *program, char *const argv[],
                  char *const environment[], const char *directory, const char *out_path,
                  const char *err_path, char *error, size_t error_size);

enum verify_wait_outcome {
    VERIFY_WAIT_EXITED,      /* every process exited (statuses in each) */
    VERIFY_WAIT_STOPPED,     /* the trace got its stop line: every group was killed */
    VERIFY_WAIT_TIMED_OUT,   /* killed after timeout_seconds */
    VERIFY_WAIT_INTERRUPTED, /* adaptdl-verify got SIGINT or SIGTERM: killed */
};

/* Waits for the processes of one run.  With `stop_trace`, polls that file
 * for a stop line (`P ...`, delivery_trace.h) and kills every group when
 * it appears.  When one process fails while others still run, the others
 * are killed (a run of several replicas is over once one crashed).  In
 * every case, once it returns, every process of every group is gone and
 * reaped. */
enum verify_wait_outcome verify_wait(struct verify_process *processes, size_t count,
                                     const char *stop_trace, double timeout_seconds);

/* Creates `path` and its missing parents (mode 0755).  -1 with errno. */
int verify_make_directories(const char *path);
/* Copies the tree at `from` (directories, regular files, symbolic links)
 * to `to`, which must not exist.  -1 with errno. */
int verify_copy_tree(const char *from, const char *to);
/* Removes the tree at `path` (nothing when it does not exist).  -1 with errno. */
int verify_remove_tree(const char *path);

/* The last non-empty line of a file, cut to out_size - 1 bytes ("" when
 * there is none). */
void verify_last_line(const char *path, char *out, size_t out_size);

#endif
