/* statistical_epochs.c - the shim's side of statistical epochs (SPEC §7):
 * turns planning on when adaptation is, counts every agreed step's
 * progress, and plans the length of each fresh train pass
 * (runtime/statistical_epoch holds the rules).
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
 * threads end the pass at the same step, which the README says. */
#include "statistical_epochs.h"

#include <inttypes.h>
#include <math.h>

#include "log.h"
#include "shim.h"
#include "steps.h"

static uint64_t shim_epochs_last_counted_step;

/* Records of the step whose agreed sums are still in flight, on all
 * replicas. */
static uint64_t shim_epochs_pending_records(void)
{
    if (!shim_steps_synchronized || !shim_mpi_on_mpi_thread() || !shim_monitor.posted)
        return 0;
    return shim_monitor.posted_local_records * shim_monitor.replicas;
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
