/* test_goodput.c - the goodput model, its optimizer and the throughput fit
 * (adaptshim(7) "Decisions").
 *
 * Model: step times against hand-computed values of AdaptDL's formulas, and
 * the invariants AdaptDL's own tests check over a grid of configurations:
 * throughput >= 0, 0 <= efficiency <= 1 and non-increasing in the batch size
 * (for every kind of gradient statistics, including negative and NAN ones),
 * goodput == throughput * efficiency, larger local batches give larger
 * throughput.
 *
 * Optimizer: its answer respects every bound and is the best of the same 50
 * candidates found by an independent brute force (candidates from pow()
 * rather than exp(), AdaptDL's rounding written out again, goodput from the
 * public evaluation function); without statistics the initial batch is
 * kept; the one-replica accumulation rule; the current configuration's
 * goodput; invalid arguments.
 *
 * Fit: profiles generated from known parameters over many (nodes, replicas,
 * local_bsz) configurations, 100 points with 5% Gaussian multiplicative
 * noise from a seeded PRNG, must predict step times within 10% of the truth
 * over the profiled range; the priors fix the right parameters when only one
 * local batch size, one node or few replicas were seen. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "goodput.h"
#include "goodput_network.h"
#include "unit_helpers.h"

/* --- fixtures ---------------------------------------------------------------- */

static const struct perf_params typical_perf = {
    .alpha_c = 0.02, .beta_c = 5e-4,
    .alpha_n = 0.15, .beta_n = 0.02,
    .alpha_r = 0.05, .beta_r = 0.004,
    .gamma = 1.5,
};

static struct goodput_model model_with(struct perf_params perf, double sqr, double var,
                                       uint64_t initial)
{
    return (struct goodput_model){
        .perf = perf,
        .grad = {.sqr = sqr, .var = var},
        .initial_global_bsz = initial,
    };
}

/* Gradient statistics of every kind the estimator can produce. */
static const struct grad_params statistics_cases[] = {
    {1.0, 0.0}, {1.0, 1.0}, {1.0, 100.0}, {1.0, 1e4}, {1e-3, 5.0},
    {1e-9, 1e-12}, {0.0, 3.0}, {-1.0, 3.0}, {1.0, -2.0}, {0.0, 0.0},
    {-1.0, -1.0}, {NAN, 1.0}, {1.0, NAN}, {NAN, NAN},
};
#define STATISTICS_CASE_COUNT (sizeof statistics_cases / sizeof statistics_cases[0])

static const uint32_t replica_cases[] = {1, 2, 3, 4, 8, 16, 64};
static const uint32_t nodes_cases[] = {1, 1, 1, 2, 2, 4, 8};
#define REPLICA_CASE_COUNT (sizeof replica_cases / sizeof replica_cases[0])

/* --- seeded Gaussian source ------------------------------------------------ */

struct test_rng {
    uint64_t state;
};

static double test_rng_uniform(struct test_rng *rng)
{
    return ((double)(unit_splitmix64(&rng->state) >> 11) + 0.5) * 0x1.0p-53;
}

static double test_rng_gaussian(struct test_rng *rng)
{
    double u = test_rng_uniform(rng), v = test_rng_uniform(rng);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* ------------------------------------------------------------------------ */
/* Prediction                                                                */
/* ------------------------------------------------------------------------ */

Test(goodput, step_time_follows_adaptdl_formulas)
{
    struct perf_params p = typical_perf;
    double accum = 0.02 + 5e-4 * 64;                       /* 0.052 */
    cr_assert_float_eq(perf_params_accum_time(&p, 64), accum, 1e-15);

    /* one replica: a tiny constant network time */
    cr_assert_float_eq(perf_params_network_time(&p, 1, 1), 1e-8 + 1e-8 * 1e-8, 1e-24);
    /* intra-node, K = 2: retrogression multiplier is 1e-8, not 0 */
    cr_assert_float_eq(perf_params_network_time(&p, 1, 2), 0.05 + 0.004 * 1e-8, 1e-15);
    /* intra-node, K = 8 */
    cr_assert_float_eq(perf_params_network_time(&p, 1, 8), 0.05 + 0.004 * 6, 1e-15);
    /* inter-node, K = 8 on 2 nodes */
    double network = 0.15 + 0.02 * 6;
    cr_assert_float_eq(perf_params_network_time(&p, 2, 8), network, 1e-15);

    double optim = pow(pow(accum, 1.5) + pow(network, 1.5), 1.0 / 1.5);
    cr_assert_float_eq(perf_params_optim_time(&p, 2, 8, 64), optim, 1e-14);
    cr_assert_float_eq(perf_params_step_time(&p, 2, 8, 64, 0), optim, 1e-14);
    cr_assert_float_eq(perf_params_step_time(&p, 2, 8, 64, 3), 3 * accum + optim, 1e-14);

    /* gamma 1: no overlap, the times add */
    p.gamma = 1.0;
    cr_assert_float_eq(perf_params_step_time(&p, 2, 8, 64, 0), accum + network, 1e-14);
    /* gamma 10: close to the larger of the two */
    p.gamma = 10.0;
    double step = perf_params_step_time(&p, 2, 8, 64, 0);
    cr_assert(step >= network && step < network * 1.0001);

    struct goodput_model model = model_with(typical_perf, 1.0, 1.0, 64);
    cr_assert_float_eq(goodput_throughput(&model, 2, 8, 64, 1),
                       8 * 64 * 2 / perf_params_step_time(&typical_perf, 2, 8, 64, 1), 1e-9);
}

Test(goodput, throughput_is_non_negative)
{
    struct perf_params sets[] = {
        typical_perf,
        {1e-8, 1e-8, 1e-8, 1e-8, 1e-8, 1e-8, 1.0},
        {1.0, 1e-2, 10.0, 1.0, 2.0, 0.5, 10.0},
    };
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        struct goodput_model model = model_with(sets[s], 1.0, 1.0, 32);
        for (size_t r = 0; r < REPLICA_CASE_COUNT; r++)
            for (double local = 1; local <= 1 << 16; local *= 2)
                for (uint32_t accum = 0; accum < 4; accum++) {
                    double t = goodput_throughput(&model, nodes_cases[r], replica_cases[r],
                                                  local, accum);
                    cr_assert(isfinite(t) && t >= 0.0);
                }
    }
}

Test(goodput, efficiency_matches_spec_formula)
{
    uint64_t initial = 128;
    double sqr = 0.3, var = 50.0;                 /* per-sample variance */
    struct goodput_model model = model_with(typical_perf, sqr, var, initial);
    double var_b = var / initial;
    for (double global = 128; global <= 1 << 16; global *= 1.7) {
        double scale = global / initial;
        double expected = (var_b + sqr) / (var_b / scale + sqr) / scale;
        cr_assert_float_eq(goodput_efficiency(&model, global), expected, 1e-12);
    }
    cr_assert_float_eq(goodput_efficiency(&model, 128), 1.0, 1e-15);
    cr_assert(isnan(goodput_efficiency(&model, 0)));
}

Test(goodput, efficiency_is_bounded_and_non_increasing)
{
    for (size_t c = 0; c < STATISTICS_CASE_COUNT; c++) {
        struct goodput_model model = model_with(typical_perf, statistics_cases[c].sqr,
                                                statistics_cases[c].var, 64);
        double previous = INFINITY;
        for (double global = 64; global <= 1 << 20; global *= 1.25) {
            double e = goodput_efficiency(&model, global);
            cr_assert(e >= 0.0 && e <= 1.0, "case %zu global %g: efficiency %g", c, global, e);
            cr_assert(e <= previous, "case %zu: efficiency rose at %g", c, global);
            previous = e;
        }
    }
}

Test(goodput, efficiency_clamps_like_adaptdl)
{
    /* No noise measured (variance <= 0) with a real signal: a larger batch
     * buys nothing, efficiency 1/scale. */
    struct goodput_model model = model_with(typical_perf, 2.0, -1.0, 100);
    cr_assert_float_eq(goodput_efficiency(&model, 400), 0.25, 1e-15);
    /* No signal (|G|^2 <= 0) with noise: pure noise, every sample counts. */
    model = model_with(typical_perf, -0.5, 3.0, 100);
    cr_assert_float_eq(goodput_efficiency(&model, 400), 1.0, 1e-15);
    /* Nothing at all: AdaptDL's floor gives 1 too. */
    model = model_with(typical_perf, 0.0, 0.0, 100);
    cr_assert_float_eq(goodput_efficiency(&model, 400), 1.0, 1e-15);
    model = model_with(typical_perf, NAN, NAN, 100);
    cr_assert_float_eq(goodput_efficiency(&model, 400), 1.0, 1e-15);

    struct grad_params none = {0, 0}, nan_ = {NAN, 1}, some = {0, 1e-30}, neg = {-1, 2};
    cr_assert_not(goodput_has_grad_statistics(&none));
    cr_assert_not(goodput_has_grad_statistics(&nan_));
    cr_assert(goodput_has_grad_statistics(&some));
    cr_assert(goodput_has_grad_statistics(&neg));
}

Test(goodput, goodput_is_throughput_times_efficiency)
{
    for (size_t c = 0; c < STATISTICS_CASE_COUNT; c++) {
        struct goodput_model model = model_with(typical_perf, statistics_cases[c].sqr,
                                                statistics_cases[c].var, 32);
        for (size_t r = 0; r < REPLICA_CASE_COUNT; r++)
            for (double local = 32; local <= 4096; local *= 2)
                for (uint32_t accum = 0; accum < 3; accum++) {
                    uint32_t nodes = nodes_cases[r], replicas = replica_cases[r];
                    double global = replicas * local * (accum + 1);
                    double expected = goodput_throughput(&model, nodes, replicas, local, accum) *
                                      goodput_efficiency(&model, global);
                    double got = goodput_evaluate(&model, nodes, replicas, local, accum);
                    cr_assert_float_eq(got, expected, 1e-12 * expected);
                }
    }
}

Test(goodput, larger_local_batch_gives_larger_throughput)
{
    double gammas[] = {1.0, 1.3, 2.0, 5.0, 10.0};
    for (size_t g = 0; g < sizeof gammas / sizeof gammas[0]; g++) {
        struct perf_params p = typical_perf;
        p.gamma = gammas[g];
        struct goodput_model model = model_with(p, 1.0, 1.0, 32);
        for (size_t r = 0; r < REPLICA_CASE_COUNT; r++)
            for (uint32_t accum = 0; accum < 3; accum++) {
                double previous = 0.0;
                for (double local = 1; local <= 1 << 14; local *= 1.5) {
                    double t = goodput_throughput(&model, nodes_cases[r], replica_cases[r],
                                                  local, accum);
                    cr_assert(t > previous, "gamma %g K %u local %g", p.gamma,
                              replica_cases[r], local);
                    previous = t;
                }
            }
    }
}

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                  */
/* ------------------------------------------------------------------------ */

/* AdaptDL's candidate rounding, written out independently of goodput.c. */
static void brute_force_best(const struct goodput_model *model, uint32_t nodes,
                             uint32_t replicas, uint64_t max_global, uint64_t local_min,
                             uint64_t local_max, bool accumulation,
                             struct goodput_config *best_config, double *best_goodput)
{
    double b0 = (double)model->initial_global_bsz;
    double hi = max_global > model->initial_global_bsz ? (double)max_global : b0;
    double lo_local = local_min ? (double)local_min : 1.0;
    double hi_local = local_max ? (double)local_max : hi;
    double lo = fmax(b0, lo_local * replicas);
    if (hi < lo)
        hi = lo;
    if (!goodput_has_grad_statistics(&model->grad))
        hi = lo;
    *best_goodput = -1.0;
    for (int i = 0; i < GOODPUT_CANDIDATES; i++) {
        double candidate = i == 0 ? lo : i == GOODPUT_CANDIDATES - 1
                                             ? hi
                                             : lo * pow(hi / lo, i / (GOODPUT_CANDIDATES - 1.0));
        double local = candidate / replicas;
        double accum = 0, atomic;
        if (accumulation) {
            accum = ceil(local / hi_local - 1e-8) - 1;
            if (replicas == 1 && local > b0 + 1e-8 && accum < 1)
                accum = 1;
            atomic = ceil(local / (accum + 1) - 1e-8);
        } else {
            atomic = ceil(local - 1e-8);
        }
        atomic = fmin(fmax(atomic, lo_local), hi_local);
        double g = goodput_evaluate(model, nodes, replicas, atomic, (uint32_t)accum);
        if (g > *best_goodput) {
            *best_goodput = g;
            *best_config = (struct goodput_config){(uint64_t)atomic, (uint32_t)accum};
        }
    }
}

struct optimize_case {
    uint32_t nodes, replicas;
    uint64_t max_global, local_min, local_max;
    bool accumulation;
};

static const struct optimize_case optimize_cases[] = {
    {1, 1, 4096, 0, 0, false},
    {1, 1, 4096, 0, 256, true},
    {1, 1, 100000, 8, 512, true},
    {1, 2, 4096, 0, 0, false},
    {1, 4, 4096, 16, 512, false},
    {1, 4, 4096, 16, 512, true},
    {2, 8, 65536, 0, 1024, false},
    {2, 8, 65536, 0, 64, true},
    {4, 16, 8192, 100, 200, false},
    {4, 16, 8192, 1, 7, true},
    {8, 64, 1 << 20, 0, 0, false},
    {1, 3, 1000, 0, 0, false},
    {1, 3, 50, 0, 0, false},          /* maximum below the initial batch */
    {1, 8, 4096, 128, 0, false},      /* local minimum above B0 / K */
    {1, 4, 4096, 0, 8, false},        /* local maximum below B0 / K */
};
#define OPTIMIZE_CASE_COUNT (sizeof optimize_cases / sizeof optimize_cases[0])

static const struct perf_params perf_cases[] = {
    {0.02, 5e-4, 0.15, 0.02, 0.05, 0.004, 1.5},
    {0.2, 1e-5, 0.01, 0.001, 0.005, 1e-4, 1.0},
    {1e-3, 1e-3, 2.0, 0.5, 1.0, 0.1, 8.0},
    {0.05, 2e-4, 1e-8, 1e-8, 0.02, 1e-8, 3.0},
};
#define PERF_CASE_COUNT (sizeof perf_cases / sizeof perf_cases[0])

Test(goodput, optimizer_respects_bounds_and_matches_brute_force)
{
    uint64_t initials[] = {32, 100, 256};
    size_t checked = 0;
    for (size_t p = 0; p < PERF_CASE_COUNT; p++)
        for (size_t s = 0; s < STATISTICS_CASE_COUNT; s++)
            for (size_t i = 0; i < sizeof initials / sizeof initials[0]; i++)
                for (size_t c = 0; c < OPTIMIZE_CASE_COUNT; c++) {
                    const struct optimize_case *oc = &optimize_cases[c];
                    struct goodput_model model = model_with(perf_cases[p], statistics_cases[s].sqr,
                                                            statistics_cases[s].var, initials[i]);
                    struct goodput_choice choice;
                    cr_assert_eq(goodput_optimize(&model, oc->nodes, oc->replicas,
                                                  oc->max_global, oc->local_min,
                                                  oc->local_max, oc->accumulation, &choice),
                                 0);
                    /* bounds */
                    uint64_t local_max = oc->local_max ? oc->local_max
                                                       : (oc->max_global > initials[i]
                                                              ? oc->max_global
                                                              : initials[i]);
                    uint64_t local_min = oc->local_min ? oc->local_min : 1;
                    if (local_max < local_min)
                        local_max = local_min;
                    cr_assert(choice.local_bsz >= local_min && choice.local_bsz <= local_max,
                              "perf %zu stats %zu case %zu: local %llu", p, s, c,
                              (unsigned long long)choice.local_bsz);
                    if (!oc->accumulation)
                        cr_assert_eq(choice.accum_steps, 0);
                    cr_assert_eq(choice.global_bsz, (uint64_t)oc->replicas * choice.local_bsz *
                                                        (choice.accum_steps + 1));
                    cr_assert(isfinite(choice.goodput) && choice.goodput > 0);
                    cr_assert(isnan(choice.goodput_current));
                    cr_assert_float_eq(choice.goodput, choice.throughput * choice.efficiency,
                                       1e-12 * choice.goodput);
                    /* global batch within [B0, max], unless the local bounds
                     * force it out (ceil may add up to K - 1 samples per
                     * micro-batch) */
                    uint64_t slack = (uint64_t)oc->replicas * (choice.accum_steps + 1);
                    uint64_t max_global = oc->max_global > initials[i] ? oc->max_global
                                                                       : initials[i];
                    if (local_min * oc->replicas <= max_global &&
                        local_max * oc->replicas >= initials[i])
                        cr_assert(choice.global_bsz >= initials[i] &&
                                      choice.global_bsz <= max_global + slack,
                                  "perf %zu stats %zu case %zu: global %llu", p, s, c,
                                  (unsigned long long)choice.global_bsz);
                    /* the brute force over the same candidates */
                    struct goodput_config best;
                    double best_goodput;
                    brute_force_best(&model, oc->nodes, oc->replicas, oc->max_global,
                                     oc->local_min, oc->local_max, oc->accumulation, &best,
                                     &best_goodput);
                    cr_assert_eq(choice.local_bsz, best.local_bsz,
                                 "perf %zu stats %zu case %zu: %llu vs brute force %llu", p, s,
                                 c, (unsigned long long)choice.local_bsz,
                                 (unsigned long long)best.local_bsz);
                    cr_assert_eq(choice.accum_steps, best.accum_steps);
                    cr_assert_eq(choice.goodput, best_goodput);
                    checked++;
                }
    cr_assert_eq(checked, PERF_CASE_COUNT * STATISTICS_CASE_COUNT * 3 * OPTIMIZE_CASE_COUNT);
}

Test(goodput, one_replica_without_statistics_keeps_initial_batch)
{
    struct grad_params none[] = {{0, 0}, {NAN, NAN}, {NAN, 5.0}, {-1, -1}};
    for (size_t n = 0; n < sizeof none / sizeof none[0]; n++)
        for (int accumulation = 0; accumulation < 2; accumulation++) {
            struct goodput_model model = model_with(typical_perf, none[n].sqr, none[n].var, 96);
            struct goodput_choice choice;
            cr_assert_eq(goodput_optimize(&model, 1, 1, 1 << 16, 0, 0, accumulation, &choice), 0);
            cr_assert_eq(choice.global_bsz, 96);
            cr_assert_eq(choice.local_bsz, 96);
            cr_assert_eq(choice.accum_steps, 0);
            cr_assert_float_eq(choice.efficiency, 1.0, 1e-15);
        }
}

Test(goodput, several_replicas_without_statistics_split_initial_batch)
{
    struct goodput_model model = model_with(typical_perf, 0.0, 0.0, 100);
    struct goodput_choice choice;
    cr_assert_eq(goodput_optimize(&model, 1, 3, 1 << 16, 0, 0, false, &choice), 0);
    cr_assert_eq(choice.local_bsz, 34);            /* ceil(100 / 3) */
    cr_assert_eq(choice.global_bsz, 102);
}

Test(goodput, no_maximum_means_no_adaptation)
{
    /* Very noisy gradients would like a huge batch, but max 0 pins B0. */
    struct goodput_model model = model_with(typical_perf, 1e-6, 1e6, 64);
    struct goodput_choice choice;
    cr_assert_eq(goodput_optimize(&model, 1, 4, 0, 0, 0, false, &choice), 0);
    cr_assert_eq(choice.local_bsz, 16);
    cr_assert_eq(choice.global_bsz, 64);
}

Test(goodput, noise_drives_the_batch_size)
{
    /* Noisy gradients: larger batches are nearly free statistically, and
     * throughput grows with the batch: the maximum wins. */
    struct goodput_model noisy = model_with(typical_perf, 1e-6, 1e6, 64);
    struct goodput_choice choice;
    cr_assert_eq(goodput_optimize(&noisy, 1, 1, 4096, 0, 0, false, &choice), 0);
    cr_assert_eq(choice.global_bsz, 4096);        /* one replica with statistics may grow */
    /* Clean gradients: a step on B0 is as good as one on more; throughput
     * barely grows past the constant overhead: stay small. */
    struct goodput_model clean = model_with(typical_perf, 1.0, 1e-6, 64);
    cr_assert_eq(goodput_optimize(&clean, 1, 1, 4096, 0, 0, false, &choice), 0);
    cr_assert_eq(choice.global_bsz, 64);
    /* Something in between picks something in between. */
    struct goodput_model middle = model_with(typical_perf, 1.0, 64.0 * 8, 64);
    cr_assert_eq(goodput_optimize(&middle, 1, 4, 4096, 0, 0, false, &choice), 0);
    cr_assert(choice.global_bsz > 64 && choice.global_bsz < 4096, "%llu",
              (unsigned long long)choice.global_bsz);
}

Test(goodput, accumulation_rules)
{
    struct goodput_model noisy = model_with(typical_perf, 1e-6, 1e6, 64);
    struct goodput_choice choice;
    /* One replica beyond B0 accumulates at least once. */
    cr_assert_eq(goodput_optimize(&noisy, 1, 1, 1024, 0, 0, true, &choice), 0);
    cr_assert_geq(choice.accum_steps, 1);
    cr_assert_eq(choice.local_bsz * (choice.accum_steps + 1), choice.global_bsz);
    cr_assert(choice.global_bsz >= 1024 && choice.global_bsz < 1024 + 2 * (choice.accum_steps + 1));
    /* Several replicas accumulate only past the local maximum. */
    cr_assert_eq(goodput_optimize(&noisy, 1, 4, 1024, 0, 64, true, &choice), 0);
    cr_assert_eq(choice.local_bsz, 64);
    cr_assert_eq(choice.accum_steps, 3);
    cr_assert_eq(choice.global_bsz, 1024);
    cr_assert_eq(goodput_optimize(&noisy, 1, 4, 1024, 0, 0, true, &choice), 0);
    cr_assert_eq(choice.accum_steps, 0);
    cr_assert_eq(choice.global_bsz, 1024);
    /* Not allowed: never. */
    cr_assert_eq(goodput_optimize(&noisy, 1, 4, 1024, 0, 64, false, &choice), 0);
    cr_assert_eq(choice.accum_steps, 0);
    cr_assert_eq(choice.local_bsz, 64);
}

Test(goodput, reports_goodput_of_current_configuration)
{
    struct goodput_model model = model_with(typical_perf, 1.0, 64.0 * 8, 64);
    struct goodput_config current = {.local_bsz = 16, .accum_steps = 0};
    struct goodput_choice choice;
    cr_assert_eq(goodput_optimize_from(&model, 1, 4, 4096, 0, 0, false, &current, &choice), 0);
    cr_assert_eq(choice.goodput_current, goodput_evaluate(&model, 1, 4, 16, 0));
    cr_assert(choice.goodput >= choice.goodput_current);
    current.local_bsz = 0;
    cr_assert_eq(goodput_optimize_from(&model, 1, 4, 4096, 0, 0, false, &current, &choice), 0);
    cr_assert(isnan(choice.goodput_current));
}

Test(goodput, rejects_invalid_arguments)
{
    struct goodput_model model = model_with(typical_perf, 1.0, 1.0, 64);
    struct goodput_choice choice = {.global_bsz = 12345};
    cr_assert_eq(goodput_optimize(&model, 0, 1, 4096, 0, 0, false, &choice), -1);
    cr_assert_eq(goodput_optimize(&model, 2, 1, 4096, 0, 0, false, &choice), -1);
    cr_assert_eq(goodput_optimize(&model, 1, 4, 4096, 64, 32, false, &choice), -1);
    model.initial_global_bsz = 0;
    cr_assert_eq(goodput_optimize(&model, 1, 1, 4096, 0, 0, false, &choice), -1);
    model = model_with(typical_perf, 1.0, 1.0, 64);
    model.perf.gamma = 0.5;
    cr_assert_eq(goodput_optimize(&model, 1, 1, 4096, 0, 0, false, &choice), -1);
    model.perf = typical_perf;
    model.perf.alpha_c = NAN;
    cr_assert_eq(goodput_optimize(&model, 1, 1, 4096, 0, 0, false, &choice), -1);
    cr_assert_eq(choice.global_bsz, 12345);        /* untouched */
}

/* ------------------------------------------------------------------------ */
/* Fit                                                                        */
/* ------------------------------------------------------------------------ */

#define NOISE_SIGMA 0.05
#define PROFILE_POINTS 100

struct profile_config {
    uint32_t nodes, replicas;
    uint64_t local_bsz;
};

/* One noisy measurement of a configuration as the shim would take it: the
 * compute part and the whole step, each with independent multiplicative
 * Gaussian noise, and the time inside the all-reduce is the rest of the
 * step (never negative: when the noisy compute time exceeds the step, the
 * all-reduce took no visible time).  One replica has no all-reduce: its
 * step is its compute time. */
static struct step_profile_point noisy_point(const struct perf_params *truth,
                                             struct profile_config config,
                                             struct test_rng *rng)
{
    double compute = perf_params_accum_time(truth, (double)config.local_bsz) *
                     (1.0 + NOISE_SIGMA * test_rng_gaussian(rng));
    double step = perf_params_step_time(truth, config.nodes, config.replicas,
                                        (double)config.local_bsz, 0) *
                  (1.0 + NOISE_SIGMA * test_rng_gaussian(rng));
    if (config.replicas == 1)
        step = compute;
    double sync = step - compute;
    return (struct step_profile_point){
        .nodes = config.nodes,
        .replicas = config.replicas,
        .local_bsz = config.local_bsz,
        .step_time = step,
        .sync_time = sync > 0.0 ? sync : 0.0,
        .count = 1,
    };
}

/* PROFILE_POINTS points cycling over the configurations. */
static size_t make_profile(const struct perf_params *truth, const struct profile_config *configs,
                           size_t config_count, uint64_t seed,
                           struct step_profile_point *points)
{
    struct test_rng rng = {.state = seed};
    for (size_t index = 0; index < PROFILE_POINTS; index++)
        points[index] = noisy_point(truth, configs[index % config_count], &rng);
    return PROFILE_POINTS;
}

static void assert_prediction_close(const struct perf_params *truth,
                                    const struct perf_params *fitted, uint32_t nodes,
                                    uint32_t replicas, double local_bsz, const char *what)
{
    double want = perf_params_step_time(truth, nodes, replicas, local_bsz, 0);
    double got = perf_params_step_time(fitted, nodes, replicas, local_bsz, 0);
    cr_assert(fabs(got / want - 1.0) <= 0.10,
              "%s: nodes %u replicas %u local %g: predicted %g, true %g", what, nodes,
              replicas, local_bsz, got, want);
}

static void assert_within_bounds(const struct perf_params *p)
{
    double v[PERF_PARAMS_COUNT];
    perf_params_to_array(p, v);
    for (int i = 0; i < PERF_GAMMA; i++)
        cr_assert(isfinite(v[i]) && v[i] >= PERF_PARAM_FLOOR * (1 - 1e-9), "param %d = %g", i,
                  v[i]);
    cr_assert(p->gamma >= PERF_GAMMA_MIN && p->gamma <= PERF_GAMMA_MAX);
    cr_assert(perf_params_valid(p));
}

Test(perf_fit, recovers_noisy_profiles)
{
    static const struct perf_params truths[] = {
        {0.02, 5e-4, 0.15, 0.02, 0.05, 0.004, 1.5},
        {0.1, 1e-4, 0.08, 0.01, 0.03, 0.002, 1.0},
        {0.01, 2e-3, 0.3, 0.05, 0.1, 0.01, 3.0},
    };
    static const uint32_t layouts[][2] = {   /* nodes, replicas */
        {1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 2}, {2, 4}, {2, 8}, {4, 16},
    };
    static const uint64_t locals[] = {16, 32, 64, 128, 256};
    struct profile_config configs[40];
    size_t config_count = 0;
    for (size_t l = 0; l < 8; l++)
        for (size_t b = 0; b < 5; b++)
            configs[config_count++] =
                (struct profile_config){layouts[l][0], layouts[l][1], locals[b]};

    for (size_t t = 0; t < sizeof truths / sizeof truths[0]; t++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            struct step_profile_point points[PROFILE_POINTS];
            size_t count = make_profile(&truths[t], configs, config_count, seed * 7919 + t, points);
            struct perf_params fitted;
            struct perf_fit_report report;
            char error[256] = "";
            cr_assert_eq(perf_params_fit_report(points, count, &fitted, &report, error,
                                                sizeof error),
                         0, "%s", error);
            cr_assert_eq(report.fixed_mask, 0u, "every parameter is observable here");
            cr_assert_eq(report.configurations, config_count);
            assert_within_bounds(&fitted);
            /* over the whole profiled range, not only at the profiled sizes */
            for (size_t l = 0; l < 8; l++)
                for (double local = 16; local <= 256; local *= 1.1)
                    assert_prediction_close(&truths[t], &fitted, layouts[l][0], layouts[l][1],
                                            local, "full profile");
        }
}

Test(perf_fit, one_local_batch_size_fixes_alpha_c)
{
    struct profile_config configs[] = {{1, 1, 64}, {1, 2, 64}, {1, 4, 64}, {2, 4, 64}};
    struct step_profile_point points[PROFILE_POINTS];
    make_profile(&typical_perf, configs, 4, 42, points);
    struct perf_params fitted;
    struct perf_fit_report report;
    char error[256] = "";
    cr_assert_eq(perf_params_fit_report(points, PROFILE_POINTS, &fitted, &report, error,
                                        sizeof error),
                 0, "%s", error);
    cr_assert_eq(report.fixed_mask, 1u << PERF_ALPHA_C);

    /* alpha_c = half the mean, over configurations, of the compute time */
    double sums[4] = {0}, counts[4] = {0};
    for (size_t i = 0; i < PROFILE_POINTS; i++) {
        sums[i % 4] += points[i].step_time - points[i].sync_time;
        counts[i % 4] += 1;
    }
    double mean = (sums[0] / counts[0] + sums[1] / counts[1] + sums[2] / counts[2] +
                   sums[3] / counts[3]) / 4;
    cr_assert_float_eq(fitted.alpha_c, mean / 2, 1e-12);
    assert_within_bounds(&fitted);
    for (size_t c = 0; c < 4; c++)
        assert_prediction_close(&typical_perf, &fitted, configs[c].nodes, configs[c].replicas,
                                64, "one local bsz");
}

Test(perf_fit, one_node_fixes_inter_node_terms)
{
    struct profile_config configs[] = {
        {1, 1, 32}, {1, 2, 32}, {1, 4, 32}, {1, 1, 128}, {1, 2, 128}, {1, 4, 128},
    };
    struct step_profile_point points[PROFILE_POINTS];
    make_profile(&typical_perf, configs, 6, 9, points);
    struct perf_params fitted;
    struct perf_fit_report report;
    char error[256] = "";
    cr_assert_eq(perf_params_fit_report(points, PROFILE_POINTS, &fitted, &report, error,
                                        sizeof error),
                 0, "%s", error);
    cr_assert_eq(report.fixed_mask, (1u << PERF_ALPHA_N) | (1u << PERF_BETA_N));
    /* then raised to 1.1 times the intra-node terms */
    cr_assert_float_eq(fitted.alpha_n, 1.1 * fitted.alpha_r, 1e-15);
    cr_assert_float_eq(fitted.beta_n, fmax(1e-8, 1.1 * fitted.beta_r), 1e-15);
    assert_within_bounds(&fitted);
    for (size_t c = 0; c < 6; c++)
        assert_prediction_close(&typical_perf, &fitted, 1, configs[c].replicas,
                                (double)configs[c].local_bsz, "one node");
}

/* Profiles taken on one host and on two (as a job relaunched across hosts
 * records them): the inter-node terms are fitted from the two-host points,
 * apart from the intra-node ones, and predict a two-host step the one-host
 * terms could not (here the network between hosts is 20 times slower). */
Test(perf_fit, profiles_at_one_and_two_hosts_separate_the_node_terms)
{
    struct perf_params truth = typical_perf;
    truth.alpha_r = 0.002;
    truth.beta_r = 0.0005;
    truth.alpha_n = 0.040;
    truth.beta_n = 0.010;
    struct profile_config configs[] = {
        {1, 2, 32}, {1, 2, 128}, {1, 4, 32}, {1, 4, 128},
        {2, 2, 32}, {2, 2, 128}, {2, 4, 32}, {2, 4, 128},
    };
    struct step_profile_point points[PROFILE_POINTS];
    make_profile(&truth, configs, 8, 23, points);
    struct perf_params fitted;
    struct perf_fit_report report;
    char error[256] = "";
    cr_assert_eq(perf_params_fit_report(points, PROFILE_POINTS, &fitted, &report, error,
                                        sizeof error),
                 0, "%s", error);
    cr_expect_eq(report.fixed_mask & ((1u << PERF_ALPHA_N) | (1u << PERF_BETA_N)), 0,
                 "the node terms are free once two-host points exist");
    cr_expect_gt(fitted.alpha_n, 5 * fitted.alpha_r,
                 "alpha_n %g is fitted to the slow network, not 1.1 alpha_r %g",
                 fitted.alpha_n, fitted.alpha_r);
    cr_expect_lt(fabs(fitted.alpha_n / truth.alpha_n - 1), 0.5, "alpha_n %g, true %g",
                 fitted.alpha_n, truth.alpha_n);
    assert_within_bounds(&fitted);
    for (size_t c = 0; c < 8; c++)
        assert_prediction_close(&truth, &fitted, configs[c].nodes, configs[c].replicas,
                                (double)configs[c].local_bsz, "one and two hosts");

    /* without the two-host points, the prior's inter-node terms predict a
     * two-host step far too short: the separation is what the fit learned */
    struct step_profile_point one_host[PROFILE_POINTS];
    size_t kept = 0;
    for (size_t i = 0; i < PROFILE_POINTS; i++)
        if (points[i].nodes == 1)
            one_host[kept++] = points[i];
    struct perf_params prior;
    cr_assert_eq(perf_params_fit(one_host, kept, &prior, error, sizeof error), 0, "%s", error);
    double truth_step = perf_params_step_time(&truth, 2, 4, 32, 0);
    cr_expect_lt(perf_params_step_time(&prior, 2, 4, 32, 0), 0.8 * truth_step);

    /* and a decision for two hosts uses the fitted terms: its goodput is the
     * model's at 2 nodes, lower than at 1 node */
    struct goodput_model model = {.perf = fitted, .grad = {1.0, 10.0}, .initial_global_bsz = 64};
    struct goodput_choice on_two, on_one;
    cr_assert_eq(goodput_optimize(&model, 2, 4, 1024, 0, 0, false, &on_two), 0);
    cr_assert_eq(goodput_optimize(&model, 1, 4, 1024, 0, 0, false, &on_one), 0);
    cr_expect_lt(on_two.goodput, on_one.goodput, "two hosts pay the slower network");
}

Test(perf_fit, one_replica_fixes_every_network_term)
{
    struct profile_config configs[] = {{1, 1, 16}, {1, 1, 64}, {1, 1, 256}};
    struct step_profile_point points[PROFILE_POINTS];
    make_profile(&typical_perf, configs, 3, 5, points);
    struct perf_params fitted;
    struct perf_fit_report report;
    char error[256] = "";
    cr_assert_eq(perf_params_fit_report(points, PROFILE_POINTS, &fitted, &report, error,
                                        sizeof error),
                 0, "%s", error);
    unsigned network = (1u << PERF_ALPHA_N) | (1u << PERF_BETA_N) | (1u << PERF_ALPHA_R) |
                       (1u << PERF_BETA_R);
    cr_assert_eq(report.fixed_mask, network);
    cr_assert_eq(fitted.alpha_r, PERF_PARAM_FLOOR);
    cr_assert_eq(fitted.beta_r, PERF_PARAM_FLOOR);
    cr_assert_float_eq(fitted.alpha_n, 1.1 * PERF_PARAM_FLOOR, 1e-20);
    cr_assert_float_eq(fitted.beta_n, 1.1 * PERF_PARAM_FLOOR, 1e-20);
    for (double local = 16; local <= 256; local *= 1.2)
        assert_prediction_close(&typical_perf, &fitted, 1, 1, local, "one replica");
    /* a single point: alpha_c fixed too, beta_c and gamma still fit */
    cr_assert_eq(perf_params_fit_report(points, 1, &fitted, &report, error, sizeof error), 0);
    cr_assert_eq(report.fixed_mask, network | (1u << PERF_ALPHA_C));
    assert_prediction_close(&typical_perf, &fitted, 1, 1, 16, "single point");
}

Test(perf_fit, two_replicas_fix_retrogression)
{
    struct profile_config configs[] = {
        {1, 1, 32}, {1, 2, 32}, {2, 2, 32}, {1, 1, 128}, {1, 2, 128}, {2, 2, 128},
    };
    struct step_profile_point points[PROFILE_POINTS];
    make_profile(&typical_perf, configs, 6, 11, points);
    struct perf_params fitted;
    struct perf_fit_report report;
    char error[256] = "";
    cr_assert_eq(perf_params_fit_report(points, PROFILE_POINTS, &fitted, &report, error,
                                        sizeof error),
                 0, "%s", error);
    cr_assert_eq(report.fixed_mask, (1u << PERF_BETA_N) | (1u << PERF_BETA_R));
    cr_assert_eq(fitted.beta_n, PERF_PARAM_FLOOR);
    cr_assert_eq(fitted.beta_r, PERF_PARAM_FLOOR);
    for (size_t c = 0; c < 6; c++)
        assert_prediction_close(&typical_perf, &fitted, configs[c].nodes, configs[c].replicas,
                                (double)configs[c].local_bsz, "two replicas");
}

Test(perf_fit, merges_points_of_one_configuration_by_count)
{
    /* Two buckets of one configuration equal one bucket of their weighted
     * mean; a count of 0 is ignored. */
    struct step_profile_point split[] = {
        {1, 2, 64, 0, 0.10, 0.02, 1},
        {1, 2, 64, 0, 0.13, 0.05, 3},
        {1, 1, 64, 0, 0.09, 0.0, 2},
        {1, 1, 32, 0, 99.0, 0.0, 0},
    };
    struct step_profile_point merged[] = {
        {1, 2, 64, 0, (0.10 + 3 * 0.13) / 4, (0.02 + 3 * 0.05) / 4, 4},
        {1, 1, 64, 0, 0.09, 0.0, 2},
    };
    struct perf_params a, b;
    struct perf_fit_report report_a, report_b;
    char error[256] = "";
    cr_assert_eq(perf_params_fit_report(split, 4, &a, &report_a, error, sizeof error), 0, "%s",
                 error);
    cr_assert_eq(perf_params_fit_report(merged, 2, &b, &report_b, error, sizeof error), 0, "%s",
                 error);
    cr_assert_eq(report_a.configurations, 2);
    cr_assert_eq(report_a.fixed_mask, report_b.fixed_mask);
    double va[PERF_PARAMS_COUNT], vb[PERF_PARAMS_COUNT];
    perf_params_to_array(&a, va);
    perf_params_to_array(&b, vb);
    for (int i = 0; i < PERF_PARAMS_COUNT; i++)
        cr_assert_float_eq(va[i], vb[i], 1e-9 * fabs(vb[i]) + 1e-15, "param %d", i);
}

Test(perf_fit, accumulation_points_are_split_into_micro_batches)
{
    /* A profile taken with accumulation, generated exactly from the model:
     * step = accum_steps * T_accum + T_optim. */
    struct perf_params truth = typical_perf;
    struct step_profile_point points[12];
    size_t n = 0;
    uint32_t replicas[] = {1, 2, 4};
    uint64_t locals[] = {32, 128};
    for (size_t r = 0; r < 3; r++)
        for (size_t l = 0; l < 2; l++)
            for (uint32_t accum = 0; accum < 2; accum++) {
                double accum_time = perf_params_accum_time(&truth, (double)locals[l]);
                double step =
                    perf_params_step_time(&truth, 1, replicas[r], (double)locals[l], accum);
                double compute = accum_time * (accum + 1);
                points[n++] = (struct step_profile_point){
                    1, replicas[r], locals[l], accum, step,
                    replicas[r] == 1 ? 0.0 : step - compute, 1};
            }
    struct perf_params fitted;
    char error[256] = "";
    cr_assert_eq(perf_params_fit(points, n, &fitted, error, sizeof error), 0, "%s", error);
    for (size_t r = 0; r < 3; r++)
        for (double local = 32; local <= 128; local *= 1.2)
            for (uint32_t accum = 0; accum < 3; accum++) {
                double want = perf_params_step_time(&truth, 1, replicas[r], local, accum);
                double got = perf_params_step_time(&fitted, 1, replicas[r], local, accum);
                cr_assert(fabs(got / want - 1) < 0.02, "K %u local %g accum %u: %g vs %g",
                          replicas[r], local, accum, got, want);
            }
}

Test(perf_fit, rejects_invalid_points_with_a_message)
{
    struct perf_params fitted = typical_perf;
    char error[256];
    struct step_profile_point bad[] = {
        {0, 1, 32, 0, 0.1, 0.0, 1},
        {2, 1, 32, 0, 0.1, 0.0, 1},
        {1, 1, 0, 0, 0.1, 0.0, 1},
        {1, 1, 32, 0, NAN, 0.0, 1},
        {1, 1, 32, 0, -0.1, 0.0, 1},
        {1, 2, 32, 0, 0.1, -0.01, 1},
        {1, 2, 32, 0, 0.1, 0.1, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct step_profile_point points[2] = {{1, 1, 32, 0, 0.1, 0.0, 1}, bad[i]};
        error[0] = '\0';
        cr_assert_eq(perf_params_fit(points, 2, &fitted, error, sizeof error), -1, "case %zu", i);
        cr_assert(strstr(error, "point 1") != NULL, "case %zu: %s", i, error);
    }
    cr_assert_eq(perf_params_fit(bad, 0, &fitted, error, sizeof error), -1);
    struct step_profile_point empty[] = {{1, 1, 32, 0, 0.1, 0.0, 0}};
    cr_assert_eq(perf_params_fit(empty, 1, &fitted, error, sizeof error), -1);
    cr_assert(strstr(error, "count") != NULL, "%s", error);
    /* the result is left alone on failure */
    cr_assert_eq(fitted.alpha_c, typical_perf.alpha_c);
}

Test(perf_fit, fitted_model_drives_the_optimizer)
{
    /* End to end: fit a profile, then decide; the decision equals the one
     * taken with the true parameters or is within 2% of its goodput. */
    struct profile_config configs[] = {
        {1, 1, 32}, {1, 2, 32}, {1, 4, 32}, {1, 1, 128}, {1, 2, 128}, {1, 4, 128},
        {2, 4, 32}, {2, 8, 128},
    };
    struct step_profile_point points[PROFILE_POINTS];
    make_profile(&typical_perf, configs, 8, 3, points);
    struct perf_params fitted;
    char error[256] = "";
    cr_assert_eq(perf_params_fit(points, PROFILE_POINTS, &fitted, error, sizeof error), 0, "%s",
                 error);
    struct goodput_model truth = model_with(typical_perf, 1.0, 64.0 * 8, 64);
    struct goodput_model model = truth;
    model.perf = fitted;
    struct goodput_choice ideal, chosen;
    cr_assert_eq(goodput_optimize(&truth, 2, 8, 8192, 0, 512, false, &ideal), 0);
    cr_assert_eq(goodput_optimize(&model, 2, 8, 8192, 0, 512, false, &chosen), 0);
    double achieved = goodput_evaluate(&truth, 2, 8, (double)chosen.local_bsz, 0);
    cr_assert(achieved >= 0.98 * ideal.goodput, "achieved %g, best %g", achieved, ideal.goodput);
}

/* A full profile of typical_perf over 40 configurations, for the tests of
 * the objective below. */
static size_t full_profile(uint64_t seed, struct step_profile_point *points)
{
    static const uint32_t layouts[][2] = {
        {1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 2}, {2, 4}, {2, 8}, {4, 16},
    };
    static const uint64_t locals[] = {16, 32, 64, 128, 256};
    struct profile_config configs[40];
    size_t config_count = 0;
    for (size_t l = 0; l < 8; l++)
        for (size_t b = 0; b < 5; b++)
            configs[config_count++] =
                (struct profile_config){layouts[l][0], layouts[l][1], locals[b]};
    return make_profile(&typical_perf, configs, config_count, seed, points);
}

Test(perf_fit, objective_gradient_matches_finite_differences)
{
    struct step_profile_point points[PROFILE_POINTS];
    size_t count = full_profile(17, points);
    static const struct perf_params probes[] = {
        {0.07, 0.002, 0.2, 0.03, 0.05, 0.004, 2.3},
        {0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001},
        {1e-3, 1e-4, 1.0, 1e-6, 1e-2, 0.5, 9.0},
    };
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        double values[PERF_PARAMS_COUNT], gradient[PERF_PARAMS_COUNT];
        perf_params_to_array(&probes[p], values);
        double objective = perf_params_fit_objective(points, count, &probes[p], gradient);
        cr_assert(isfinite(objective));
        for (int i = 0; i < PERF_PARAMS_COUNT; i++) {
            double step = 1e-6 * values[i];
            double shifted[PERF_PARAMS_COUNT];
            memcpy(shifted, values, sizeof shifted);
            struct perf_params up, down;
            shifted[i] = values[i] + step;
            perf_params_from_array(&up, shifted);
            shifted[i] = values[i] - step;
            perf_params_from_array(&down, shifted);
            double numeric = (perf_params_fit_objective(points, count, &up, NULL) -
                              perf_params_fit_objective(points, count, &down, NULL)) /
                             (2 * step);
            cr_assert(fabs(numeric - gradient[i]) <= 1e-5 * fabs(numeric) + 1e-7 / values[i],
                      "probe %zu param %d: analytic %g numeric %g", p, i, gradient[i], numeric);
        }
    }
    struct perf_params invalid = typical_perf;
    invalid.gamma = 0.5;
    cr_assert(isnan(perf_params_fit_objective(points, count, &invalid, NULL)));
}

Test(perf_fit, result_is_a_stationary_point)
{
    /* First-order optimality in the variables the fit moves (log of each
     * alpha and beta, gamma itself): a zero gradient, or at a bound a
     * gradient pointing out of the box. */
    for (uint64_t seed = 1; seed <= 3; seed++) {
        struct step_profile_point points[PROFILE_POINTS];
        size_t count = full_profile(seed, points);
        struct perf_params fitted;
        char error[256] = "";
        cr_assert_eq(perf_params_fit(points, count, &fitted, error, sizeof error), 0, "%s", error);
        double values[PERF_PARAMS_COUNT], gradient[PERF_PARAMS_COUNT];
        perf_params_to_array(&fitted, values);
        double objective = perf_params_fit_objective(points, count, &fitted, gradient);
        for (int i = 0; i < PERF_PARAMS_COUNT; i++) {
            double slope = i == PERF_GAMMA ? gradient[i] : gradient[i] * values[i];
            bool at_lower = i == PERF_GAMMA ? values[i] <= PERF_GAMMA_MIN + 1e-9
                                            : values[i] <= PERF_PARAM_FLOOR * (1 + 1e-6);
            bool at_upper = i == PERF_GAMMA && values[i] >= PERF_GAMMA_MAX - 1e-9;
            if (at_lower)
                cr_assert(slope > -1e-4, "seed %llu param %d at its floor, slope %g",
                          (unsigned long long)seed, i, slope);
            else if (at_upper)
                cr_assert(slope < 1e-4, "seed %llu param %d at its ceiling, slope %g",
                          (unsigned long long)seed, i, slope);
            else
                cr_assert(fabs(slope) < 1e-4 * (1 + objective), "seed %llu param %d: slope %g",
                          (unsigned long long)seed, i, slope);
        }
    }
}

/* --- the network terms shared by prediction and the fit ----------------------- */

Test(goodput, the_link_is_inter_node_beyond_one_node_and_none_for_one_replica)
{
    cr_expect_eq(network_link_of(1, 1), NETWORK_LINK_NONE);
    cr_expect_eq(network_link_of(1, 4), NETWORK_LINK_INTRA_NODE);
    cr_expect_eq(network_link_of(2, 4), NETWORK_LINK_INTER_NODE);
    cr_expect_eq(network_link_of(2, 1), NETWORK_LINK_INTER_NODE);
}

Test(goodput, retrogression_grows_beyond_two_replicas_and_never_reaches_zero)
{
    cr_expect_eq(network_retrogression_multiplier(1), NETWORK_TINY);
    cr_expect_eq(network_retrogression_multiplier(2), NETWORK_TINY);
    cr_expect_eq(network_retrogression_multiplier(3), 1.0);
    cr_expect_eq(network_retrogression_multiplier(10), 8.0);
}
