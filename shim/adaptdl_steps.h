/* adaptdl_steps.h - steps and gradient statistics reported by a trainer's
 * process that reduces its gradients without MPI: the exported API behind
 * the Python package's transparent statistics for PyTorch (adaptshim(7) "PYTORCH").
 *
 * An MPI trainer gets its steps, statistics and agreed stops from the
 * interposed collectives (shim/mpi.c).  A PyTorch trainer's gradients
 * never pass through MPI, so the Python glue tells the same things
 * through these functions, and the logic stays here:
 *
 *   - once, adaptdl_steps_install_transport: the piggy-backed reduction
 *     (adaptshim(7) "Piggy-backing") over the job's replicas, carried by the caller's post and
 *     complete (an asynchronous all_reduce of doubles on a gloo group of
 *     its own, posted at one boundary and completed at the next); one
 *     replica with no callbacks gets a loopback;
 *   - per gradient piece (a DDP bucket): the squared norms before and
 *     after the reduction (adaptdl_steps_report_gradient), or, with one
 *     replica, the gradient itself (adaptdl_steps_report_single_replica_piece,
 *     for the difference estimator over consecutive steps);
 *   - per optimizer step: adaptdl_steps_boundary, which returns 1 when
 *     every replica stops at this step.  The job record, the summary and
 *     the metrics exit event are then written, and the caller exits with
 *     status 143 (Python: raise SystemExit(143), so that its own buffers,
 *     finally blocks and atexit handlers run).
 *
 * Only libadaptshim.so defines these (not the stand-in libadaptdl.so):
 * they matter under the preload only.  Functions returning int return 0
 * on success and -1 on misuse, with one line in the shim's log. */
#ifndef ADAPTDL_STEPS_H
#define ADAPTDL_STEPS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the preloaded shim is active in this process (configured by
 * ADAPTDL_* variables and targeted), so that reporting steps matters. */
int adaptdl_steps_active(void);

/* The piggy-backed reduction: post() starts the sum over every replica of
 * `count` doubles from `send` into `receive` (both stay valid until
 * complete() returns), complete() waits for it; each returns 0, or -1
 * when it failed.  `replicas` is the number of processes that take part
 * (every one must install its transport and make the same boundaries).
 * replicas 1 with post and complete NULL: a loopback.  Once per process;
 * refused when MPI already carries the reduction. */
typedef int (*adaptdl_steps_post_function)(void *context, const double *send, double *receive,
                                           int count);
typedef int (*adaptdl_steps_complete_function)(void *context);
int adaptdl_steps_install_transport(unsigned replicas, adaptdl_steps_post_function post,
                                    adaptdl_steps_complete_function complete, void *context);

/* 1 when the step in progress measures its gradient norms (every replica
 * measures the same steps, one in a period chosen so that measuring costs
 * at most half a percent of the step time); 0 otherwise.  Report a piece
 * of an unmeasured step with norms 0. */
int adaptdl_steps_measuring(void);

/* The squared norm of `count` floats (element_size 4) or doubles (8) into
 * *squared; -1 for another element size. */
int adaptdl_steps_squared_norm(const void *data, uint64_t count, unsigned element_size,
                               double *squared);

/* A gradient piece of the step in progress: |this replica's gradient|^2
 * before the reduction, |the gradient averaged over replicas|^2 after it,
 * the seconds the reduction and the measuring took.  Norms must be finite
 * and at least 0. */
int adaptdl_steps_report_gradient(double local_sqr, double mean_sqr, double sync_seconds,
                                  double norm_seconds);
/* A piece whose norms cannot be known (the trainer reduces its gradients
 * with a hook of its own): the step counts, its statistics do not. */
int adaptdl_steps_report_unmeasured(double sync_seconds);
/* One replica: a gradient piece itself (count elements of 4 or 8 bytes),
 * paired with the same piece of the previous step. */
int adaptdl_steps_report_single_replica_piece(const void *data, uint64_t count,
                                              unsigned element_size);

/* The step boundary, at each optimizer step, with the step's local batch
 * (0: unknown; the data views' count or the injected batch size is then
 * taken).  Returns 0 to go on, 1 when every replica stops here (exit with
 * 143 now), -1 when no transport was installed. */
int adaptdl_steps_boundary(uint64_t local_batch);

/* The reduction still in flight (posted at the last boundary) is
 * completed and its step published, as MPI_Finalize does for MPI
 * trainers: call it before the transport goes away (the glue does at
 * destroy_process_group and at exit), since every replica posted it and a
 * replica that leaves without completing it can leave the others waiting.
 * A later boundary posts again through the transport (the glue's refuses
 * once its group is gone: those steps are then counted by nobody).
 * Returns 0, or -1 when no transport was installed. */
int adaptdl_steps_finish(void);

/* One line at `warn` in the shim's log (a notice of the glue's). */
void adaptdl_steps_notice(const char *message);

#ifdef __cplusplus
}
#endif

#endif
