/* grad_noise.h - gradient noise scale estimator (adaptshim(7) "Piggy-backing";
 * the step-line fields grad_sqr, grad_var, noise_scale: "Metrics file").
 *
 * The counterpart of AdaptDL's GradientNoiseScale, reduced to arithmetic on
 * squared norms: the shim measures the norms around the trainer's gradient
 * all-reduces and sums them through its piggy-backed reduction; this module
 * turns one step's numbers into unbiased estimates of
 *
 *   grad_sqr = |G|^2        the squared norm of the true (full-data) gradient
 *   grad_var = tr(Sigma)    the trace of the covariance of the gradient of a
 *                           *single sample*, so independent of the batch size
 *
 * and keeps bias-corrected exponential moving averages of both, weighted by
 * how many samples each step saw (theta = 0.999^scale).  It does no I/O and
 * allocates nothing; the whole state is one plain struct that the job record
 * can save field by field.
 *
 * Model.  A replica's gradient g_k is the mean of the per-sample gradients of
 * its local batch of b samples, so E[g_k] = G and Cov(g_k) = Sigma / b, hence
 * E|g_k|^2 = |G|^2 + tr(Sigma)/b.  The mean of K independent such gradients
 * has E|mean|^2 = |G|^2 + tr(Sigma)/(K b).  Two equations, two unknowns.
 *
 * Units.  Nothing here needs the gradient to be normalised in any particular
 * way, but the meaning of grad_sqr and grad_var follows the trainer's
 * convention, which the shim cannot see:
 *   - trainer all-reduces its local mean gradients and divides the result by
 *     K afterwards (or the shim does, computing |result / K|^2): grad_sqr is
 *     |G|^2 and grad_var is tr(Sigma) of the per-sample gradient, as above;
 *   - trainer divides by K *before* the all-reduce: every buffer the shim
 *     sees is g_k / K, so both local and total squared norms, and therefore
 *     grad_sqr and grad_var, are 1/K^2 of the values above;
 *   - trainer's local gradient is a sum over its batch rather than a mean:
 *     both are multiplied by b^2.
 * In every case both quantities carry the same factor, so the noise scale
 * grad_var / grad_sqr (McCandlish et al.'s B_simple, in samples) and
 * AdaptDL's efficiency and gain, which depend only on that ratio, are right.
 *
 * Relation to AdaptDL.  AdaptDL's `var_avg` is the variance relative to the
 * initial global batch size B0: its grad_var is tr(Sigma) / B0, the trace of
 * the covariance of a gradient averaged over B0 samples.  Ours is per sample:
 *
 *   our grad_var = AdaptDL grad_var * B0      (and likewise for the EMAs)
 *
 * Because the EMA is linear, var_biased below is exactly AdaptDL's
 * var_avg_biased times B0, and the bias-correction weights are identical.
 * sqr_* are the same quantity as AdaptDL's sqr_avg_*.  The per-sample form
 * keeps a saved state meaningful even if B0 were to change. */
#ifndef ADAPTSHIM_GRAD_NOISE_H
#define ADAPTSHIM_GRAD_NOISE_H

#include <stdbool.h>
#include <stdint.h>

/* AdaptDL's smoothing constant: an observation covering `scale` initial
 * batches decays the old averages by 0.999^scale. */
#define GRAD_NOISE_SMOOTHING 0.999

struct grad_noise_state {
    /* B0, AdaptDL's `batch_size`: the unit in which steps are weighted. */
    uint64_t initial_global_bsz;

    /* Biased EMAs and their bias-correction weights.  The estimate is
     * biased / unbias; unbias is the total weight the EMA has given to real
     * observations (1 - prod(theta)), 0 before the first one.  These four
     * are what the job record saves. */
    double sqr_biased;         /* EMA of |G|^2 observations */
    double sqr_unbias;
    double var_biased;         /* EMA of per-sample tr(Sigma) observations */
    double var_unbias;
    /* For the confidence of the estimates (grad_noise_standard_errors): EMAs
     * of the squared observations with the same weights, and the sum of the
     * squared weights, sum w_i^2 (the weights themselves sum to unbias). */
    double sqr_square_biased;
    double var_square_biased;
    double weight_square_sum;

    /* True when the averages were last fed by the difference estimator over
     * consecutive steps (K = 1).  Those observations are biased (the two
     * gradients were taken at different parameters), so like AdaptDL the
     * averages are restarted when the first K >= 2 observation arrives. */
    bool from_difference_estimator;

    uint64_t observations;     /* accepted since init, for logs */

    /* Previous step of the K = 1 difference estimator, for
     * grad_noise_update_consecutive().  Not worth saving: after a restart
     * the caller has no previous gradient to pair with. */
    bool has_previous;
    double previous_sqr;       /* |a|^2 of the previous local gradient */
    uint64_t previous_bsz;
    /* How many optimizer steps the next observation stands for (0 or 1:
     * one).  The step monitor measures norms on one step in N and sets N
     * here, so the averages keep covering the same span of training. */
    uint64_t steps_per_observation;
};

/* Estimates a decision may trust (adaptshim(7) "Decisions" says when to decide; this says
 * whether the statistics can support one): at least this many effective
 * observations, grad_sqr positive, and both estimates known to within this
 * relative standard error. */
#define GRAD_NOISE_TRUST_OBSERVATIONS 8.0
#define GRAD_NOISE_TRUST_RELATIVE_ERROR 0.5

/* Starts with no estimate.  A zero initial_global_bsz leaves the state unable
 * to weight observations: every update is then ignored. */
void grad_noise_init(struct grad_noise_state *state, uint64_t initial_global_bsz);

/* One step observed with K = `replicas` >= 2 replicas.
 *   local_sqr_mean  mean over replicas of |g_k|^2, each replica's squared
 *                   norm of its own gradient (AdaptDL's local_sqr after its
 *                   division by count);
 *   total_sqr       |mean_k g_k|^2, the squared norm of the averaged
 *                   gradient (AdaptDL's total_sqr);
 *   local_bsz       this replica's batch (used only when global_bsz is 0);
 *   global_bsz      samples of the step over all replicas, sum of local_bsz.
 * Ignored (returns false) when an input is not finite, replicas < 2, no
 * batch size is known, or the result is not finite.  Clears the pairing of
 * the K = 1 estimator. */
bool grad_noise_update_replicas(struct grad_noise_state *state, double local_sqr_mean,
                                double total_sqr, uint32_t replicas,
                                uint64_t local_bsz, uint64_t global_bsz);

/* The difference estimator for K = 1, on a pair of local gradients a and b
 * of two consecutive steps, each a mean over `bsz` samples:
 *   sqr_a = |a|^2, sqr_b = |b|^2, sqr_mean_ab = |(a + b) / 2|^2.
 * The pair is treated as two replicas of batch bsz (AdaptDL's count = 2,
 * scale = 2 * accum_scale), so it is grad_noise_update_replicas() with
 * local_sqr_mean = (sqr_a + sqr_b) / 2, total_sqr = sqr_mean_ab, replicas = 2
 * and global_bsz = 2 * bsz.  The caller must keep one copy of the previous
 * gradient to compute sqr_mean_ab (streaming, piece by piece, while it has
 * both buffers).  Same rejection rules.  grad_var comes out high by about
 * bsz/2 * |E[a] - E[b]|^2, the drift of the true gradient between the two
 * steps, which is why such estimates are marked and later discarded. */
bool grad_noise_update_pair(struct grad_noise_state *state, double sqr_a, double sqr_b,
                            double sqr_mean_ab, uint64_t bsz);

/* Convenience over grad_noise_update_pair() that remembers |a|^2 of the
 * previous step itself: `sqr_current` is |b|^2 of this step's local
 * gradient and `sqr_mean_with_previous` is |(a + b)/2|^2 (ignored on the
 * first call, or after grad_noise_forget_previous()).  A pair is only formed
 * when both steps had the same nonzero batch size; otherwise this step just
 * becomes the previous one.  Returns true when the averages were updated.
 * A non-finite sqr_current breaks the pairing, since the caller's saved
 * gradient is then no good either. */
bool grad_noise_update_consecutive(struct grad_noise_state *state, double sqr_current,
                                   double sqr_mean_with_previous, uint64_t bsz);

/* Drops the previous step of the K = 1 estimator (the caller dropped its
 * gradient copy: a restart, a change of replica count). */
void grad_noise_forget_previous(struct grad_noise_state *state);

/* True once at least one observation has been accepted. */
bool grad_noise_has_estimate(const struct grad_noise_state *state);

/* Bias-corrected averages; NAN before the first observation.  Not clamped:
 * early on, noise can make either one negative (AdaptDL clamps |G|^2 at 0
 * and its variance at 1e-6 where it uses them; consumers do likewise). */
double grad_noise_sqr(const struct grad_noise_state *state);
double grad_noise_var(const struct grad_noise_state *state);

/* grad_var / grad_sqr, McCandlish's B_simple in samples: the batch size at
 * which the gradient's noise and signal are equally large.  NAN when there is
 * no estimate yet or grad_sqr <= 0 (no signal measured: the ratio would be
 * infinite or meaningless); a negative grad_var counts as 0. */
double grad_noise_scale_simple(const struct grad_noise_state *state);

/* Standard errors of grad_sqr and grad_var: the weighted spread of the
 * observations behind each average over the square root of their effective
 * number, (sum w)^2 / sum w^2.  NAN before two observations. */
void grad_noise_standard_errors(const struct grad_noise_state *state, double *sqr_error,
                                double *var_error);
/* Effective number of observations behind the averages. */
double grad_noise_effective_observations(const struct grad_noise_state *state);
/* True when a decision may rest on the estimates (GRAD_NOISE_TRUST_*).  A
 * negative or zero grad_sqr (gradient indistinguishable from noise, near
 * convergence) is never trusted: it would make every batch look efficient. */
bool grad_noise_trustworthy(const struct grad_noise_state *state);

#endif
