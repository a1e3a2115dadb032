/* statistical_epoch.c - pass lengths planned from the progress of
 * statistical epochs (see statistical_epoch.h). */
#include "statistical_epoch.h"

#include <math.h>

#include "goodput.h"

/* Slack when rounding a planned length up: progress sums of fractions such
 * as 16/24 carry rounding errors far below one record, and a pass that is
 * exactly on target must come out as N, not N + 1. */
#define STATISTICAL_EPOCH_ROUNDING_SLACK 1e-6

void statistical_epochs_init(struct statistical_epochs *epochs)
{
    *epochs = (struct statistical_epochs){.efficiency = 1.0};
    pthread_mutex_init(&epochs->lock, NULL);
}

double statistical_epoch_efficiency(double grad_sqr, double grad_var,
                                    double initial_global_bsz, double global_bsz)
{
    struct goodput_model model = {
        .grad = {.sqr = grad_sqr, .var = grad_var},
        .initial_global_bsz = initial_global_bsz > 0 ? (uint64_t)llround(initial_global_bsz) : 0,
    };
    if (!goodput_has_grad_statistics(&model.grad))
        return 1.0;
    double efficiency = goodput_efficiency(&model, global_bsz);
    return isfinite(efficiency) && efficiency > 0 ? efficiency : 1.0;
}

double statistical_epoch_gain(double grad_sqr, double grad_var, double initial_global_bsz,
                              double global_bsz)
{
    if (!(grad_sqr > 0) || !isfinite(grad_sqr) || !(grad_var >= 0) || !isfinite(grad_var) ||
        !(initial_global_bsz > 0))
        return 1.0;
    double scale = global_bsz / initial_global_bsz;
    return statistical_epoch_efficiency(grad_sqr, grad_var, initial_global_bsz, global_bsz) *
           scale;
}

void statistical_epochs_enable(struct statistical_epochs *epochs, double initial_global_bsz,
                               double global_bsz, double grad_sqr, double grad_var)
{
    pthread_mutex_lock(&epochs->lock);
    epochs->enabled = initial_global_bsz > 0 && global_bsz > 0;
    epochs->initial_global_bsz = initial_global_bsz;
    epochs->global_bsz = global_bsz;
    epochs->efficiency = statistical_epoch_efficiency(grad_sqr, grad_var, initial_global_bsz,
                                                      global_bsz);
    pthread_mutex_unlock(&epochs->lock);
}

void statistical_epochs_note_step(struct statistical_epochs *epochs, uint64_t global_records,
                                  double grad_sqr, double grad_var)
{
    pthread_mutex_lock(&epochs->lock);
    epochs->step++;
    if (epochs->enabled) {
        epochs->efficiency = statistical_epoch_efficiency(
            grad_sqr, grad_var, epochs->initial_global_bsz, epochs->global_bsz);
        epochs->progress +=
            (double)global_records * epochs->efficiency / epochs->initial_global_bsz;
    }
    pthread_mutex_unlock(&epochs->lock);
}

/* An efficiency a plan can divide by: in (0, 1], else 1. */
static double statistical_epoch_usable_efficiency(double efficiency)
{
    return efficiency > 0 && isfinite(efficiency) && efficiency <= 1 ? efficiency : 1.0;
}

/* Records whose expected progress takes `progress` to the target of
 * `epoch` (negative past it, NAN for a NAN progress). */
static double statistical_epoch_records_to_target(uint64_t record_count, uint64_t epoch,
                                                  double progress, double initial_global_bsz,
                                                  double efficiency)
{
    double target = (double)record_count * ((double)epoch + 1.0) / initial_global_bsz;
    return (target - progress) * initial_global_bsz / efficiency;
}

static double statistical_epoch_round_up(double records)
{
    return ceil(records - STATISTICAL_EPOCH_ROUNDING_SLACK);
}

uint64_t statistical_epoch_plan_length(uint64_t record_count, uint64_t epoch, double progress,
                                       double initial_global_bsz, double efficiency,
                                       bool correct)
{
    if (record_count == 0)
        return 0;
    efficiency = statistical_epoch_usable_efficiency(efficiency);
    double nominal = (double)record_count / efficiency;
    double wanted = nominal;
    if (correct && initial_global_bsz > 0 && isfinite(progress))
        wanted = statistical_epoch_records_to_target(record_count, epoch, progress,
                                                     initial_global_bsz, efficiency);
    double low = STATISTICAL_EPOCH_MIN_STRETCH * nominal;
    double high = STATISTICAL_EPOCH_MAX_STRETCH * nominal;
    if (!(wanted >= low))  /* also a NAN */
        wanted = low;
    if (wanted > high)
        wanted = high;
    double length = statistical_epoch_round_up(wanted);
    return length < 1 ? 1 : (uint64_t)length;
}

uint64_t statistical_epochs_pass_length(struct statistical_epochs *epochs,
                                        uint64_t record_count, uint64_t pass,
                                        uint64_t pending_records)
{
    pthread_mutex_lock(&epochs->lock);
    uint64_t length = record_count;
    if (epochs->enabled) {
        double progress = epochs->progress + (double)pending_records * epochs->efficiency /
                                                 epochs->initial_global_bsz;
        length = statistical_epoch_plan_length(record_count, pass, progress,
                                               epochs->initial_global_bsz, epochs->efficiency,
                                               epochs->train_files <= 1);
    }
    pthread_mutex_unlock(&epochs->lock);
    return length;
}

void statistical_epochs_note_train_file(struct statistical_epochs *epochs)
{
    pthread_mutex_lock(&epochs->lock);
    epochs->train_files++;
    pthread_mutex_unlock(&epochs->lock);
}

void statistical_epochs_capture(struct statistical_epochs *epochs, double *progress,
                                uint64_t *step)
{
    struct statistical_epoch_position position;
    statistical_epochs_capture_with_pending(epochs, 0, 0, &position);
    *progress = position.progress;
    *step = position.step;
}

void statistical_epochs_capture_with_pending(struct statistical_epochs *epochs,
                                             uint64_t pending_steps, uint64_t pending_records,
                                             struct statistical_epoch_position *position)
{
    pthread_mutex_lock(&epochs->lock);
    position->progress = epochs->progress;
    position->global_bsz = 0;
    if (epochs->enabled) {
        position->progress +=
            (double)pending_records * epochs->efficiency / epochs->initial_global_bsz;
        position->global_bsz = (uint64_t)llround(epochs->global_bsz);
    }
    position->step = epochs->step + pending_steps;
    pthread_mutex_unlock(&epochs->lock);
}

void statistical_epochs_restore(struct statistical_epochs *epochs,
                                const struct statistical_epoch_position *position)
{
    pthread_mutex_lock(&epochs->lock);
    double progress = position->progress;
    epochs->progress = isfinite(progress) && progress > 0 ? progress : 0.0;
    epochs->step = position->step;
    epochs->restored_global_bsz = position->global_bsz;
    pthread_mutex_unlock(&epochs->lock);
}

uint64_t statistical_epoch_plan_remaining(uint64_t record_count, uint64_t epoch,
                                          double progress, double initial_global_bsz,
                                          double efficiency)
{
    if (record_count == 0 || !(initial_global_bsz > 0))
        return 0;
    efficiency = statistical_epoch_usable_efficiency(efficiency);
    double wanted = statistical_epoch_records_to_target(record_count, epoch, progress,
                                                        initial_global_bsz, efficiency);
    if (!(wanted > 0))  /* also a NAN progress */
        return 0;
    double high = STATISTICAL_EPOCH_MAX_STRETCH * (double)record_count / efficiency;
    double length = statistical_epoch_round_up(wanted > high ? high : wanted);
    return length < 0 ? 0 : (uint64_t)length;
}

uint64_t statistical_epochs_resumed_pass_length(struct statistical_epochs *epochs,
                                                uint64_t record_count, uint64_t pass,
                                                uint64_t consumed, uint64_t bound_length)
{
    pthread_mutex_lock(&epochs->lock);
    uint64_t length = bound_length;
    bool replan = epochs->enabled && epochs->train_files <= 1 &&
                  epochs->restored_global_bsz != 0 &&
                  epochs->restored_global_bsz != (uint64_t)llround(epochs->global_bsz) &&
                  consumed < bound_length;
    if (replan && consumed == 0)
        length = statistical_epoch_plan_length(record_count, pass, epochs->progress,
                                               epochs->initial_global_bsz,
                                               epochs->efficiency, true);
    else if (replan)
        length = consumed + statistical_epoch_plan_remaining(record_count, pass,
                                                             epochs->progress,
                                                             epochs->initial_global_bsz,
                                                             epochs->efficiency);
    pthread_mutex_unlock(&epochs->lock);
    return length;
}
