/* fault_injection.h - kill points inside the checkpoint commit path, for the
 * chaos tests only.
 *
 * Compiled in only with -DADAPTSHIM_FAULT_INJECTION (the test build
 * faults/libadaptshim-faults.so); in the product library every call below is
 * an empty inline function and no environment variable is read.  In the
 * test build ADAPTSHIM_FAULT=commit:N:POINT kills the process with SIGKILL
 * the N-th time it reaches POINT, as a crash or an OOM killer would. */
#ifndef ADAPTSHIM_FAULT_INJECTION_H
#define ADAPTSHIM_FAULT_INJECTION_H

/* The points, in the order a rename-commit reaches them. */
enum fault_point {
    FAULT_BEFORE_SNAPSHOT,  /* the trainer's content is complete; no snapshot yet */
    FAULT_SNAPSHOT_TEMP,    /* the snapshot's temp file is written, not renamed */
    FAULT_AFTER_SNAPSHOT,   /* the snapshot is durable; the trainer's rename or
                             * close has not happened */
    FAULT_AFTER_RENAME,     /* the trainer's rename onto the checkpoint is done,
                             * the trainer has not seen it return */
    FAULT_POINT_COUNT
};

#ifdef ADAPTSHIM_FAULT_INJECTION
void fault_injection_reach(enum fault_point point);
#else
static inline void fault_injection_reach(enum fault_point point)
{
    (void)point;
}
#endif

#endif
