/* grad_noise.c - gradient noise scale estimator (see grad_noise.h).
 *
 * With K replicas of b samples each (global batch B = K b), write
 *   L = mean_k |g_k|^2    (local_sqr_mean)   E[L] = |G|^2 + tr(Sigma)/b
 *   T = |mean_k g_k|^2    (total_sqr)        E[T] = |G|^2 + tr(Sigma)/(K b)
 * Solving the two expectations for the unknowns gives unbiased estimators
 *   |G|^2     = (K T - L) / (K - 1)
 *   tr(Sigma) = (L - T) * K b / (K - 1) = (L - T) * B / (K - 1)
 * AdaptDL computes the same |G|^2 and (L - T) * scale / (K - 1) with
 * scale = B / B0, i.e. tr(Sigma) / B0; we keep the per-sample value, which is
 * AdaptDL's times B0.
 *
 * Each estimate enters an exponential moving average whose decay depends on
 * how much data the step represents, theta = 0.999^(B / B0), so that a step
 * on twice the initial batch counts like two initial steps.  The averages
 * start at zero and are divided by the accumulated weight 1 - prod(theta)
 * (Adam-style bias correction), which makes the first estimate equal to the
 * first observation instead of being pulled towards zero.
 *
 * When the replicas' batches differ (a short last batch), the b that makes
 * the estimator unbiased is the harmonic mean of the local batches, which the
 * shim does not have; B / K, the arithmetic mean, is used as AdaptDL does. */
#include "grad_noise.h"

#include <math.h>

void grad_noise_init(struct grad_noise_state *state, uint64_t initial_global_bsz)
{
    *state = (struct grad_noise_state){
        .initial_global_bsz = initial_global_bsz,
    };
}

/* One step of a bias-corrected EMA: the same recurrence as AdaptDL's
 * _update_avg, kept as two numbers so that it can be saved and resumed. */
static void grad_noise_ema_update(double *biased, double *unbias, double value,
                                  double theta)
{
    *biased = theta * *biased + (1.0 - theta) * value;
    *unbias = theta * *unbias + (1.0 - theta);
}

static double grad_noise_ema_value(double biased, double unbias)
{
    return unbias > 0.0 ? biased / unbias : NAN;
}

static void grad_noise_reset_averages(struct grad_noise_state *state)
{
    state->sqr_biased = 0.0;
    state->sqr_unbias = 0.0;
    state->var_biased = 0.0;
    state->var_unbias = 0.0;
    state->sqr_square_biased = 0.0;
    state->var_square_biased = 0.0;
    state->weight_square_sum = 0.0;
}

/* The estimators shared by the K >= 2 and the pair paths.  `count` is the
 * number of independent gradients averaged (K, or 2 for a pair) and
 * `samples` the total number of samples behind them (B, or 2 bsz).
 * Returns false, touching nothing, when the observation is unusable. */
static bool grad_noise_observe(struct grad_noise_state *state, double local_sqr_mean,
                               double total_sqr, uint32_t count, uint64_t samples,
                               bool from_difference_estimator)
{
    if (!isfinite(local_sqr_mean) || !isfinite(total_sqr))
        return false;   /* e.g. mixed precision overflow: skip, as AdaptDL */
    if (count < 2 || samples == 0 || state->initial_global_bsz == 0)
        return false;

    double k = (double)count;
    double scale = (double)samples / (double)state->initial_global_bsz;
    double grad_sqr = (k * total_sqr - local_sqr_mean) / (k - 1.0);
    double grad_var = (local_sqr_mean - total_sqr) * (double)samples / (k - 1.0);
    /* An observation standing for several steps (norms measured on one step
     * in N) decays the averages as those N steps would have. */
    double steps = state->steps_per_observation >= 1 ? (double)state->steps_per_observation
                                                     : 1.0;
    double theta = pow(GRAD_NOISE_SMOOTHING, scale * steps);

    /* Finite inputs can still overflow here (huge norms times a huge batch);
     * one such value would poison the averages for good. */
    if (!isfinite(grad_sqr) || !isfinite(grad_var) || !isfinite(theta))
        return false;

    /* Difference estimates are biased by the drift between steps; AdaptDL
     * throws them away once real multi-replica estimates are available. */
    if (state->from_difference_estimator && !from_difference_estimator)
        grad_noise_reset_averages(state);
    state->from_difference_estimator = from_difference_estimator;

    grad_noise_ema_update(&state->sqr_biased, &state->sqr_unbias, grad_sqr, theta);
    grad_noise_ema_update(&state->var_biased, &state->var_unbias, grad_var, theta);
    state->sqr_square_biased = theta * state->sqr_square_biased + (1.0 - theta) * grad_sqr * grad_sqr;
    state->var_square_biased = theta * state->var_square_biased + (1.0 - theta) * grad_var * grad_var;
    state->weight_square_sum = theta * theta * state->weight_square_sum +
                               (1.0 - theta) * (1.0 - theta);
    state->observations++;
    return true;
}

bool grad_noise_update_replicas(struct grad_noise_state *state, double local_sqr_mean,
                                double total_sqr, uint32_t replicas,
                                uint64_t local_bsz, uint64_t global_bsz)
{
    /* With several replicas the K = 1 pairing is meaningless: the caller
     * stops keeping a previous gradient (AdaptDL drops _prev_grads). */
    grad_noise_forget_previous(state);

    uint64_t samples = global_bsz;
    if (samples == 0 && local_bsz <= UINT64_MAX / (replicas ? replicas : 1))
        samples = local_bsz * replicas;
    return grad_noise_observe(state, local_sqr_mean, total_sqr, replicas, samples,
                              false);
}

bool grad_noise_update_pair(struct grad_noise_state *state, double sqr_a, double sqr_b,
                            double sqr_mean_ab, uint64_t bsz)
{
    if (bsz > UINT64_MAX / 2)
        return false;
    /* Averaging first (rather than summing) keeps huge finite norms finite. */
    double local_sqr_mean = sqr_a / 2.0 + sqr_b / 2.0;
    return grad_noise_observe(state, local_sqr_mean, sqr_mean_ab, 2, 2 * bsz, true);
}

bool grad_noise_update_consecutive(struct grad_noise_state *state, double sqr_current,
                                   double sqr_mean_with_previous, uint64_t bsz)
{
    bool updated = false;

    if (!isfinite(sqr_current) || bsz == 0) {
        grad_noise_forget_previous(state);
        return false;
    }
    if (state->has_previous && state->previous_bsz == bsz)
        updated = grad_noise_update_pair(state, state->previous_sqr, sqr_current,
                                         sqr_mean_with_previous, bsz);
    state->has_previous = true;
    state->previous_sqr = sqr_current;
    state->previous_bsz = bsz;
    return updated;
}

void grad_noise_forget_previous(struct grad_noise_state *state)
{
    state->has_previous = false;
    state->previous_sqr = 0.0;
    state->previous_bsz = 0;
}

bool grad_noise_has_estimate(const struct grad_noise_state *state)
{
    return state->sqr_unbias > 0.0 && state->var_unbias > 0.0;
}

double grad_noise_sqr(const struct grad_noise_state *state)
{
    return grad_noise_ema_value(state->sqr_biased, state->sqr_unbias);
}

double grad_noise_var(const struct grad_noise_state *state)
{
    return grad_noise_ema_value(state->var_biased, state->var_unbias);
}

double grad_noise_scale_simple(const struct grad_noise_state *state)
{
    if (!grad_noise_has_estimate(state))
        return NAN;
    double sqr = grad_noise_sqr(state);
    double var = grad_noise_var(state);
    if (!(sqr > 0.0) || !isfinite(sqr) || !isfinite(var))
        return NAN;
    if (var < 0.0)
        var = 0.0;   /* sampling noise, not negative variance */
    return var / sqr;
}

double grad_noise_effective_observations(const struct grad_noise_state *state)
{
    if (!(state->weight_square_sum > 0.0) || !(state->sqr_unbias > 0.0))
        return 0.0;
    return state->sqr_unbias * state->sqr_unbias / state->weight_square_sum;
}

/* Standard error of one average: its weighted spread over sqrt(n_eff). */
static double grad_noise_standard_error(double biased, double square_biased, double unbias,
                                        double effective)
{
    if (!(unbias > 0.0) || effective < 2.0)
        return NAN;
    double mean = biased / unbias;
    double spread = square_biased / unbias - mean * mean;
    if (spread < 0.0)
        spread = 0.0;   /* rounding */
    /* n / (n - 1): the spread of few observations understates the variance */
    return sqrt(spread * effective / (effective - 1.0) / effective);
}

void grad_noise_standard_errors(const struct grad_noise_state *state, double *sqr_error,
                                double *var_error)
{
    double effective = grad_noise_effective_observations(state);
    *sqr_error = grad_noise_standard_error(state->sqr_biased, state->sqr_square_biased,
                                           state->sqr_unbias, effective);
    *var_error = grad_noise_standard_error(state->var_biased, state->var_square_biased,
                                           state->var_unbias, effective);
}

bool grad_noise_trustworthy(const struct grad_noise_state *state)
{
    if (!grad_noise_has_estimate(state) ||
        grad_noise_effective_observations(state) < GRAD_NOISE_TRUST_OBSERVATIONS)
        return false;
    double sqr = grad_noise_sqr(state), var = grad_noise_var(state);
    if (!(sqr > 0.0) || !isfinite(sqr) || !(var > 0.0) || !isfinite(var))
        return false;
    double sqr_error, var_error;
    grad_noise_standard_errors(state, &sqr_error, &var_error);
    return sqr_error <= GRAD_NOISE_TRUST_RELATIVE_ERROR * sqr &&
           var_error <= GRAD_NOISE_TRUST_RELATIVE_ERROR * var;
}
