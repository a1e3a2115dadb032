/* pass_planning.c - the shim's side of statistical epochs:
 * turns planning on when adaptation is, counts every agreed step's
 * progress, and plans the length of each fresh train pass
 * (runtime/statistical_epoch holds the rules; this file plans the passes).
 *
 * Every replica must plan the same length, or their views differ and one
 * of them runs a step the others never join.  So the progress is counted
 * only from agreed steps (the piggy-backed sums, identical on every
 * replica, and statistics computed from them), and a pass is planned where
 * a trainer that reads in program order on its MPI thread ends its pass:
 * at a train read, after the step boundary that read makes.  The sums of
 * the step just ended arrive one boundary later; its records count as
 * pending progress meanwhile (in lock-step every replica consumed the same
 * number).  A pass fixed on another thread (a prefetching loader) plans
 * without pending records: replicas agree as long as their prefetch
 * threads end the pass at the same step (adaptshim(7) "Statistical
 * epochs" says so). */
#include "pass_planning.h"

#include <inttypes.h>
#include <math.h>

#include "log.h"
#include "shim.h"
#include "step_state.h"

/* under shim_steps_lock (a step is published there) */
static uint64_t shim_epochs_last_counted_step;

/* Records of the step whose agreed sums are still in flight, on all
 * replicas. */
static uint64_t shim_epochs_pending_records(void)
{
    /* called under a file's lock, so shim_steps_lock cannot be taken here:
     * on the MPI thread the step in flight is that thread's own (steps.h) */
    if (!shim_steps_are_synchronized() || !shim_mpi_on_mpi_thread())
        return 0;
    return step_monitor_records_in_flight(&shim_monitor);
}

static uint64_t shim_epochs_plan_pass(uint64_t record_count, uint64_t pass)
{
    uint64_t length = statistical_epochs_pass_length(&shim_session.epochs, record_count, pass,
                                                     shim_epochs_pending_records());
    double progress;
    uint64_t step;
    statistical_epochs_capture(&shim_session.epochs, &progress, &step);
    log_debug("statistical epoch: pass %" PRIu64 " of a %" PRIu64 "-record train file holds "
              "%" PRIu64 " records (step %" PRIu64 ", progress %.4f)", pass, record_count,
              length, step, progress);
    return length;
}

/* A pass restored from a snapshot of a run that trained at another batch
 * size: every replica restores the same snapshot and computes the same
 * efficiency from the same job record, so all re-plan alike. */
static uint64_t shim_epochs_plan_resumed_pass(uint64_t record_count, uint64_t pass,
                                              uint64_t consumed, uint64_t bound_length)
{
    uint64_t length = statistical_epochs_resumed_pass_length(&shim_session.epochs, record_count,
                                                             pass, consumed, bound_length);
    if (length != bound_length)
        log_info("statistical epoch: pass %" PRIu64 " resumes at record %" PRIu64 " of %" PRIu64
                 " planned at the previous batch size; at this one it holds %" PRIu64,
                 pass, consumed, bound_length, length);
    return length;
}

/* At a checkpoint commit, the steps the trainer finished that are not
 * counted yet (step_monitor_uncounted_steps).  Called from a commit on any
 * thread, with no lock held; the monitor's step in progress belongs to the
 * MPI thread: from another, nothing is added. */
static void shim_epochs_uncounted_steps(uint64_t *steps, uint64_t *records)
{
    *steps = 0;
    *records = 0;
    bool synchronized = shim_steps_are_synchronized();
    if (synchronized && !shim_mpi_on_mpi_thread())
        return;
    shim_steps_lock();
    step_monitor_uncounted_steps(&shim_monitor, synchronized,
                                 shim_steps_train_records_consumed(), steps, records);
    shim_steps_unlock();
}

void shim_epochs_install(void)
{
    shim_session.uncounted_steps = shim_epochs_uncounted_steps;
}

void shim_epochs_configure(const struct batch_plan *plan,
                           const struct adaptdl_job_record *record)
{
    const struct adaptdl_config *config = &shim_session.config;
    if (config->max_batch_size == 0 || !plan->active)
        return;  /* no adaptation: plain passes */
    bool has_statistics = record->grad_ema_weight > 0;
    double grad_sqr = has_statistics ? record->grad_sqr : NAN;
    double grad_var = has_statistics ? record->grad_var : NAN;
    statistical_epochs_enable(&shim_session.epochs, (double)plan->initial_global,
                              (double)plan->global, grad_sqr, grad_var);
    pass_tracker_length_planner = shim_epochs_plan_pass;
    pass_tracker_resumed_length_planner = shim_epochs_plan_resumed_pass;
    log_debug("statistical epochs: initial global batch %" PRIu64 ", this run's %" PRIu64
              ", efficiency %.4f", plan->initial_global, plan->global,
              shim_session.epochs.efficiency);
}

void shim_epochs_note_agreed_step(const struct agreed_step *step,
                                  const struct grad_noise_state *noise)
{
    if (step->step == shim_epochs_last_counted_step)
        return;
    shim_epochs_last_counted_step = step->step;
    statistical_epochs_note_step(&shim_session.epochs, step->global_records,
                                 grad_noise_sqr(noise), grad_noise_var(noise));
}
