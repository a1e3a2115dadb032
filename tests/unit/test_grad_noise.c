/* test_grad_noise.c - the gradient noise scale estimator (adaptshim(7)
 * "Piggy-backing"; grad_sqr, grad_var and noise_scale as the step lines of
 * adaptshim(7) "Metrics file" carry them).
 *
 * Statistical checks on synthetic gradients with a known answer: each sample's
 * gradient is g_i = G + e_i in DIMENSION dimensions, with e_i Gaussian, zero
 * mean and a diagonal covariance Sigma, so |G|^2 and tr(Sigma) are known
 * exactly.  K replicas each average a local batch of b per-sample gradients,
 * exactly what a data-parallel trainer all-reduces; the test computes the
 * squared norms the shim would measure (each replica's own, their mean, and
 * that of the averaged gradient) and feeds a few thousand steps.  The averages
 * must land within 10% of |G|^2 and tr(Sigma), for K = 2, 4, 8, for varying
 * batch sizes, and for the K = 1 difference estimator over consecutive steps
 * (whose gradients are independent here, so it is unbiased too).  The
 * tolerance is loose on purpose: with the sizes below the relative standard
 * error is about 0.5% for tr(Sigma) and 1.5-2% for |G|^2 (measured over 120
 * seeds: no bias, worst error 4.8%), so 10% is at least five standard errors
 * away, and the PRNG is seeded so the outcome is fixed anyway.
 *
 * Exact checks: the bias-corrected first estimate equals the first
 * observation, theta = 0.999^scale (a step on more data moves the average
 * more), non-finite or unusable inputs leave the state untouched, difference
 * estimates are discarded when multi-replica ones arrive, noise_scale is
 * var / sqr with NAN where it is undefined, and the trainer's choice of
 * dividing by K before or after the all-reduce leaves the noise scale alone. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "grad_noise.h"
#include "unit_helpers.h"

#define DIMENSION 50
#define MAX_REPLICAS 8
#define RELATIVE_TOLERANCE 0.10

/* --- seeded Gaussian source ------------------------------------------------ */

struct test_rng {
    uint64_t state;
    bool has_spare;
    double spare;
};

static void test_rng_seed(struct test_rng *rng, uint64_t seed)
{
    *rng = (struct test_rng){.state = seed};
}

/* Uniform on (0, 1]: never 0, so log() below is always finite. */
static double test_rng_uniform(struct test_rng *rng)
{
    return ((double)(unit_splitmix64(&rng->state) >> 11) + 1.0) * 0x1.0p-53;
}

/* Box-Muller: two independent standard normals per pair of uniforms. */
static double test_rng_gaussian(struct test_rng *rng)
{
    if (rng->has_spare) {
        rng->has_spare = false;
        return rng->spare;
    }
    double radius = sqrt(-2.0 * log(test_rng_uniform(rng)));
    double angle = 2.0 * M_PI * test_rng_uniform(rng);
    rng->spare = radius * sin(angle);
    rng->has_spare = true;
    return radius * cos(angle);
}

/* --- the synthetic problem ------------------------------------------------- */

struct synthetic_problem {
    double true_gradient[DIMENSION];   /* G */
    double sample_stddev[DIMENSION];   /* sqrt of Sigma's diagonal */
    double true_sqr;                   /* |G|^2 */
    double true_var;                   /* tr(Sigma) */
    struct test_rng rng;
};

/* |G|^2 is about 2.3 and tr(Sigma) about 35, so B_simple is about 15
 * samples: local batches of 4 to 16 are in the interesting range where
 * neither signal nor noise dominates a replica's gradient. */
static void synthetic_problem_init(struct synthetic_problem *problem, uint64_t seed)
{
    problem->true_sqr = 0.0;
    problem->true_var = 0.0;
    for (int j = 0; j < DIMENSION; j++) {
        problem->true_gradient[j] = 0.1 * (1 + j % 3) * (j % 2 ? -1.0 : 1.0);
        problem->sample_stddev[j] = 0.3 + 0.02 * j;
        problem->true_sqr += problem->true_gradient[j] * problem->true_gradient[j];
        problem->true_var += problem->sample_stddev[j] * problem->sample_stddev[j];
    }
    test_rng_seed(&problem->rng, seed);
}

/* A replica's gradient: the mean of `batch` per-sample gradients. */
static void synthetic_local_gradient(struct synthetic_problem *problem, uint64_t batch,
                                     double *gradient)
{
    memset(gradient, 0, sizeof(double) * DIMENSION);
    for (uint64_t i = 0; i < batch; i++)
        for (int j = 0; j < DIMENSION; j++)
            gradient[j] += problem->true_gradient[j] +
                           problem->sample_stddev[j] * test_rng_gaussian(&problem->rng);
    for (int j = 0; j < DIMENSION; j++)
        gradient[j] /= (double)batch;
}

static double squared_norm(const double *vector)
{
    double sum = 0.0;
    for (int j = 0; j < DIMENSION; j++)
        sum += vector[j] * vector[j];
    return sum;
}

/* What the shim measures in one K-replica step: the replicas' squared norms
 * averaged (through the piggy-backed reduction) and |result / K|^2. */
static void synthetic_replica_step(struct synthetic_problem *problem, uint32_t replicas,
                                   uint64_t local_bsz, double *local_sqr_mean,
                                   double *total_sqr)
{
    double gradient[DIMENSION], reduced[DIMENSION] = {0};
    double local_sum = 0.0;

    for (uint32_t k = 0; k < replicas; k++) {
        synthetic_local_gradient(problem, local_bsz, gradient);
        local_sum += squared_norm(gradient);
        for (int j = 0; j < DIMENSION; j++)
            reduced[j] += gradient[j];           /* MPI_SUM */
    }
    for (int j = 0; j < DIMENSION; j++)
        reduced[j] /= replicas;
    *local_sqr_mean = local_sum / replicas;
    *total_sqr = squared_norm(reduced);
}

static void expect_relative(double got, double expected, double tolerance,
                            const char *what)
{
    cr_expect(isfinite(got) && fabs(got - expected) <= tolerance * fabs(expected),
              "%s = %.6g, expected %.6g within %.0f%%", what, got, expected,
              tolerance * 100.0);
}

/* Both estimates within RELATIVE_TOLERANCE of the problem's true values. */
static void expect_estimates_near_the_truth(const struct grad_noise_state *state,
                                            const struct synthetic_problem *problem)
{
    expect_relative(grad_noise_sqr(state), problem->true_sqr, RELATIVE_TOLERANCE, "grad_sqr");
    expect_relative(grad_noise_var(state), problem->true_var, RELATIVE_TOLERANCE, "grad_var");
}

static void expect_close(double got, double expected, const char *what)
{
    cr_expect(fabs(got - expected) <= 1e-12 * fmax(1.0, fabs(expected)),
              "%s = %.17g, expected %.17g", what, got, expected);
}

static void expect_converges_with_replicas(uint32_t replicas, uint64_t seed)
{
    struct synthetic_problem problem;
    struct grad_noise_state state;
    const uint64_t local_bsz = 4;

    /* More replicas make each observation more precise (K(K-1)/2 pairs of
     * independent gradients), so fewer steps keep the sample count, and the
     * test's run time, the same for every K. */
    const int steps = 6000 / (int)replicas;

    synthetic_problem_init(&problem, seed);
    /* Initial batch = this configuration, so scale = 1 and theta = 0.999:
     * an average over roughly the last two thousand steps. */
    grad_noise_init(&state, local_bsz * replicas);
    for (int step = 0; step < steps; step++) {
        double local_sqr_mean, total_sqr;
        synthetic_replica_step(&problem, replicas, local_bsz, &local_sqr_mean, &total_sqr);
        cr_assert(grad_noise_update_replicas(&state, local_sqr_mean, total_sqr, replicas,
                                             local_bsz, local_bsz * replicas));
    }
    cr_expect(grad_noise_has_estimate(&state));
    cr_expect_eq(state.observations, (uint64_t)steps);
    expect_estimates_near_the_truth(&state, &problem);
    expect_relative(grad_noise_scale_simple(&state), problem.true_var / problem.true_sqr,
                    2 * RELATIVE_TOLERANCE, "noise_scale");
}

/* --- convergence ----------------------------------------------------------- */

Test(grad_noise, converges_with_two_replicas)
{
    expect_converges_with_replicas(2, 1);
}

Test(grad_noise, converges_with_four_replicas)
{
    expect_converges_with_replicas(4, 2);
}

Test(grad_noise, converges_with_eight_replicas)
{
    expect_converges_with_replicas(8, 3);
}

/* The batch changes from step to step (as after adaptive re-decisions) and is
 * not the initial one: grad_var is per sample, so it must not care, and the
 * steps are weighted by theta = 0.999^(B / B0) with B0 = 8. */
Test(grad_noise, converges_with_varying_batch_sizes)
{
    static const uint64_t local_sizes[] = {2, 4, 8};
    struct synthetic_problem problem;
    struct grad_noise_state state;
    const uint32_t replicas = 4;

    synthetic_problem_init(&problem, 4);
    grad_noise_init(&state, 8);
    for (int step = 0; step < 1500; step++) {
        uint64_t local_bsz = local_sizes[(step / 50) % 3];
        double local_sqr_mean, total_sqr;
        synthetic_replica_step(&problem, replicas, local_bsz, &local_sqr_mean, &total_sqr);
        cr_assert(grad_noise_update_replicas(&state, local_sqr_mean, total_sqr, replicas,
                                             local_bsz, local_bsz * replicas));
    }
    expect_estimates_near_the_truth(&state, &problem);
}

/* K = 1: the caller keeps the previous gradient, computes |(a + b)/2|^2
 * while it has both, and passes the current |b|^2; the state remembers |a|^2. */
Test(grad_noise, converges_with_difference_estimator)
{
    struct synthetic_problem problem;
    struct grad_noise_state state;
    double previous[DIMENSION], current[DIMENSION], pair_mean[DIMENSION];
    const uint64_t bsz = 4;
    int updates = 0;

    synthetic_problem_init(&problem, 5);
    grad_noise_init(&state, bsz);
    for (int step = 0; step < 3000; step++) {
        synthetic_local_gradient(&problem, bsz, current);
        double sqr_mean_ab = NAN;    /* no previous gradient on the first step */
        if (step > 0) {
            for (int j = 0; j < DIMENSION; j++)
                pair_mean[j] = (previous[j] + current[j]) / 2.0;
            sqr_mean_ab = squared_norm(pair_mean);
        }
        if (grad_noise_update_consecutive(&state, squared_norm(current), sqr_mean_ab, bsz))
            updates++;
        memcpy(previous, current, sizeof previous);
    }
    cr_expect_eq(updates, 2999, "every step but the first pairs up, got %d", updates);
    cr_expect(state.from_difference_estimator);
    expect_estimates_near_the_truth(&state, &problem);
}

/* --- exact arithmetic ------------------------------------------------------ */

/* L = 5, T = 3, K = 4, B = 32, B0 = 16:
 *   grad_sqr = (4*3 - 5)/3 = 7/3
 *   grad_var = (5 - 3) * 32 / 3 = 64/3 per sample,
 * which is AdaptDL's (5 - 3) * (32/16) / 3 = 4/3 times B0 = 16. */
Test(grad_noise, first_estimate_equals_first_observation)
{
    struct grad_noise_state state;

    grad_noise_init(&state, 16);
    cr_expect_not(grad_noise_has_estimate(&state));
    cr_expect(isnan(grad_noise_sqr(&state)));
    cr_expect(isnan(grad_noise_var(&state)));
    cr_expect(isnan(grad_noise_scale_simple(&state)));

    cr_assert(grad_noise_update_replicas(&state, 5.0, 3.0, 4, 8, 32));
    cr_expect(grad_noise_has_estimate(&state));
    expect_close(grad_noise_sqr(&state), 7.0 / 3.0, "grad_sqr");
    expect_close(grad_noise_var(&state), 64.0 / 3.0, "grad_var");
    expect_close(grad_noise_var(&state) / 16.0, 4.0 / 3.0, "AdaptDL var_avg");
    expect_close(grad_noise_scale_simple(&state), 64.0 / 7.0, "noise_scale");

    double theta = pow(0.999, 2.0);
    expect_close(state.sqr_unbias, 1.0 - theta, "sqr_unbias");
    expect_close(state.var_unbias, 1.0 - theta, "var_unbias");
    expect_close(state.sqr_biased, (1.0 - theta) * 7.0 / 3.0, "sqr_biased");
}

/* Two observations x1 (scale 1) then x2 (scale s): the second weighs
 * (1 - 0.999^s) against 0.999^s * (1 - 0.999), so larger s pulls further. */
static double estimate_after_two_steps(uint64_t second_global_bsz)
{
    struct grad_noise_state state;
    grad_noise_init(&state, 10);
    /* K = 2, so grad_sqr = 2T - L: first 2*3 - 4 = 2, then 2*7 - 4 = 10. */
    cr_assert(grad_noise_update_replicas(&state, 4.0, 3.0, 2, 5, 10));
    cr_assert(grad_noise_update_replicas(&state, 4.0, 7.0, 2, second_global_bsz / 2,
                                         second_global_bsz));
    double theta1 = 0.999, theta2 = pow(0.999, second_global_bsz / 10.0);
    double expected = (theta2 * (1.0 - theta1) * 2.0 + (1.0 - theta2) * 10.0) /
                      (theta2 * (1.0 - theta1) + (1.0 - theta2));
    expect_close(grad_noise_sqr(&state), expected, "grad_sqr after two steps");
    return grad_noise_sqr(&state);
}

Test(grad_noise, larger_scale_moves_the_average_more)
{
    double at_scale_1 = estimate_after_two_steps(10);
    double at_scale_4 = estimate_after_two_steps(40);
    double at_scale_50 = estimate_after_two_steps(500);

    /* Equal scales: the older step has decayed once, 0.999 against 1. */
    expect_close(at_scale_1, (0.999 * 2.0 + 10.0) / 1.999, "equal scales");
    cr_expect(at_scale_1 < at_scale_4 && at_scale_4 < at_scale_50 && at_scale_50 < 10.0,
              "estimates %.6g, %.6g, %.6g must increase towards 10",
              at_scale_1, at_scale_4, at_scale_50);
}

/* After many steps the bias correction fades: unbias tends to 1. */
Test(grad_noise, bias_correction_weight_tends_to_one)
{
    struct grad_noise_state state;
    grad_noise_init(&state, 4);
    for (int step = 0; step < 20000; step++)
        grad_noise_update_replicas(&state, 2.0, 1.0, 2, 2, 4);
    cr_expect(fabs(state.sqr_unbias - 1.0) < 1e-6, "unbias %.17g", state.sqr_unbias);
    expect_close(grad_noise_sqr(&state), 0.0, "constant observation 2*1 - 2");
    /* Constant inputs give a constant estimate: (2 - 1) * 4 / 1 = 4. */
    cr_expect(fabs(grad_noise_var(&state) - 4.0) < 1e-9);
}

/* --- rejected observations ------------------------------------------------- */

Test(grad_noise, non_finite_inputs_are_ignored)
{
    struct grad_noise_state state, before;
    const double bad[] = {NAN, INFINITY, -INFINITY};

    grad_noise_init(&state, 8);
    cr_assert(grad_noise_update_replicas(&state, 5.0, 3.0, 2, 4, 8));
    memcpy(&before, &state, sizeof state);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_not(grad_noise_update_replicas(&state, bad[i], 3.0, 2, 4, 8));
        cr_expect_not(grad_noise_update_replicas(&state, 5.0, bad[i], 2, 4, 8));
        cr_expect_not(grad_noise_update_pair(&state, bad[i], 1.0, 1.0, 4));
        cr_expect_not(grad_noise_update_pair(&state, 1.0, bad[i], 1.0, 4));
        cr_expect_not(grad_noise_update_pair(&state, 1.0, 1.0, bad[i], 4));
    }
    /* Finite, but the estimate itself overflows. */
    cr_expect_not(grad_noise_update_replicas(&state, 1e308, -1e308, 2, 4, 8));
    cr_expect_eq(memcmp(&before, &state, sizeof state), 0, "state changed");
    expect_close(grad_noise_sqr(&state), 1.0, "grad_sqr kept");
    expect_close(grad_noise_var(&state), 16.0, "grad_var kept");
}

Test(grad_noise, unusable_observations_are_ignored)
{
    struct grad_noise_state state, before;

    grad_noise_init(&state, 8);
    memcpy(&before, &state, sizeof state);
    cr_expect_not(grad_noise_update_replicas(&state, 5.0, 3.0, 1, 4, 4));   /* K < 2 */
    cr_expect_not(grad_noise_update_replicas(&state, 5.0, 3.0, 0, 4, 0));
    cr_expect_not(grad_noise_update_replicas(&state, 5.0, 3.0, 2, 0, 0));   /* no bsz */
    cr_expect_not(grad_noise_update_pair(&state, 5.0, 3.0, 3.0, 0));
    cr_expect_eq(memcmp(&before, &state, sizeof state), 0, "state changed");
    cr_expect_not(grad_noise_has_estimate(&state));

    /* Without an initial batch size there is no way to weight a step. */
    grad_noise_init(&state, 0);
    cr_expect_not(grad_noise_update_replicas(&state, 5.0, 3.0, 2, 4, 8));
    cr_expect_not(grad_noise_has_estimate(&state));
}

/* global_bsz unknown (0): the local batch times K stands in for it. */
Test(grad_noise, local_batch_stands_in_for_unknown_global_batch)
{
    struct grad_noise_state with_global, with_local;

    grad_noise_init(&with_global, 16);
    grad_noise_init(&with_local, 16);
    cr_assert(grad_noise_update_replicas(&with_global, 5.0, 3.0, 4, 8, 32));
    cr_assert(grad_noise_update_replicas(&with_local, 5.0, 3.0, 4, 8, 0));
    cr_expect_eq(memcmp(&with_global, &with_local, sizeof with_global), 0);
}

/* --- the K = 1 path -------------------------------------------------------- */

/* A pair is exactly two replicas of batch bsz. */
Test(grad_noise, pair_is_two_replicas)
{
    struct grad_noise_state pair, replicas;

    grad_noise_init(&pair, 6);
    grad_noise_init(&replicas, 6);
    cr_assert(grad_noise_update_pair(&pair, 4.0, 6.0, 3.0, 3));
    cr_assert(grad_noise_update_replicas(&replicas, 5.0, 3.0, 2, 3, 6));
    expect_close(grad_noise_sqr(&pair), grad_noise_sqr(&replicas), "grad_sqr");
    expect_close(grad_noise_var(&pair), grad_noise_var(&replicas), "grad_var");
    expect_close(grad_noise_sqr(&pair), 1.0, "2*3 - 5");
    expect_close(grad_noise_var(&pair), 12.0, "(5 - 3) * 6");
    cr_expect(pair.from_difference_estimator);
    cr_expect_not(replicas.from_difference_estimator);
}

Test(grad_noise, consecutive_pairs_only_equal_batches)
{
    struct grad_noise_state state;

    grad_noise_init(&state, 4);
    cr_expect_not(grad_noise_update_consecutive(&state, 4.0, NAN, 4));  /* first step */
    cr_expect(state.has_previous);
    cr_expect(grad_noise_update_consecutive(&state, 6.0, 3.0, 4));
    expect_close(grad_noise_sqr(&state), 1.0, "2*3 - (4+6)/2");
    expect_close(grad_noise_var(&state), 16.0, "(5 - 3) * 8");

    /* A short batch cannot pair with a full one; it starts the next pair. */
    cr_expect_not(grad_noise_update_consecutive(&state, 6.0, 3.0, 3));
    cr_expect(grad_noise_update_consecutive(&state, 6.0, 5.0, 3));

    /* The caller dropped its gradient copy: the next step cannot pair. */
    grad_noise_forget_previous(&state);
    cr_expect_not(grad_noise_update_consecutive(&state, 6.0, 5.0, 3));
    /* A broken gradient breaks the pairing too. */
    cr_expect_not(grad_noise_update_consecutive(&state, INFINITY, 5.0, 3));
    cr_expect_not(state.has_previous);
    cr_expect_eq(state.observations, 2);
}

/* Difference estimates are biased by the drift between steps; the first
 * multi-replica observation replaces them outright, as in AdaptDL. */
Test(grad_noise, replicas_discard_difference_estimates)
{
    struct grad_noise_state state;

    grad_noise_init(&state, 8);
    for (int step = 0; step < 10; step++)
        cr_assert(grad_noise_update_pair(&state, 100.0, 100.0, 90.0, 4));
    cr_assert(grad_noise_update_replicas(&state, 5.0, 3.0, 4, 2, 8));
    cr_expect_not(state.from_difference_estimator);
    cr_expect_not(state.has_previous);
    expect_close(grad_noise_sqr(&state), 7.0 / 3.0, "only the replica estimate");
    expect_close(grad_noise_var(&state), 16.0 / 3.0, "(5 - 3) * 8 / 3");

    /* The other way round nothing is discarded (AdaptDL neither). */
    cr_assert(grad_noise_update_pair(&state, 5.0, 5.0, 3.0, 4));
    cr_expect(state.sqr_unbias > 1.0 - pow(0.999, 1.0) + 1e-9);
}

/* --- noise scale ----------------------------------------------------------- */

Test(grad_noise, noise_scale_is_var_over_sqr)
{
    struct grad_noise_state state;

    grad_noise_init(&state, 8);
    cr_assert(grad_noise_update_replicas(&state, 5.0, 4.0, 2, 4, 8));   /* 3 and 8 */
    expect_close(grad_noise_scale_simple(&state),
                 grad_noise_var(&state) / grad_noise_sqr(&state), "var / sqr");
    expect_close(grad_noise_scale_simple(&state), 8.0 / 3.0, "8 / 3");

    /* No signal measured: grad_sqr = 2*1 - 2 = 0, then negative. */
    grad_noise_init(&state, 8);
    cr_assert(grad_noise_update_replicas(&state, 2.0, 1.0, 2, 4, 8));
    cr_expect(isnan(grad_noise_scale_simple(&state)));
    grad_noise_init(&state, 8);
    cr_assert(grad_noise_update_replicas(&state, 3.0, 1.0, 2, 4, 8));
    cr_expect(grad_noise_sqr(&state) < 0.0);
    cr_expect(isnan(grad_noise_scale_simple(&state)));

    /* Negative variance estimate (total above local) reads as no noise. */
    grad_noise_init(&state, 8);
    cr_assert(grad_noise_update_replicas(&state, 3.0, 4.0, 2, 4, 8));
    cr_expect(grad_noise_var(&state) < 0.0);
    expect_close(grad_noise_scale_simple(&state), 0.0, "clamped");
}

/* Dividing by K before the all-reduce scales every buffer by 1/K, hence both
 * squared norms, grad_sqr and grad_var by 1/K^2; the ratio is unchanged. */
Test(grad_noise, division_convention_leaves_noise_scale_alone)
{
    struct synthetic_problem problem;
    struct grad_noise_state after, before;
    const uint32_t replicas = 4;

    synthetic_problem_init(&problem, 6);
    grad_noise_init(&after, 16);
    grad_noise_init(&before, 16);
    for (int step = 0; step < 200; step++) {
        double local_sqr_mean, total_sqr;
        synthetic_replica_step(&problem, replicas, 4, &local_sqr_mean, &total_sqr);
        grad_noise_update_replicas(&after, local_sqr_mean, total_sqr, replicas, 4, 16);
        grad_noise_update_replicas(&before, local_sqr_mean / 16.0, total_sqr / 16.0,
                                   replicas, 4, 16);
    }
    cr_expect(fabs(grad_noise_sqr(&before) * 16.0 - grad_noise_sqr(&after)) <=
              1e-9 * fabs(grad_noise_sqr(&after)));
    cr_expect(fabs(grad_noise_scale_simple(&before) - grad_noise_scale_simple(&after)) <=
              1e-9 * grad_noise_scale_simple(&after));
}
