/* bench_goodput.c - cost of a batch-size decision and of a throughput fit
 * (targets: one decision under 10 us, AdaptDL's numpy version about 200;
 * a fit of 100 profile points under 5 ms, AdaptDL's scipy fit about 80).
 *
 * Decision: goodput_optimize() with fitted-looking parameters, gradient
 * statistics that put the optimum in the middle of the range, a maximum
 * global batch 64 times the initial one and local bounds, over a rotation
 * of replica counts (1 to 64, one and several nodes) so that no single
 * configuration's branch pattern is learned.  gamma = 1.7 exercises the
 * pow() path; gamma = 1 (where the fit's regularization often lands) is
 * reported too.  Each sample times DECISIONS_PER_SAMPLE decisions; the
 * median sample, divided, is printed.
 *
 * Fit: perf_params_fit() on 100 points with 5% multiplicative Gaussian
 * noise generated from known parameters, two profiles: 100 points over 40
 * configurations (2-3 buckets each, merged as the job record would hold
 * them) and 100 distinct configurations (the worst case for the
 * objective's cost).  Median over FIT_SAMPLES fits.
 *
 * One line per figure: name, value, unit, target. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_common.h"
#include "goodput.h"

#define DECISIONS_PER_SAMPLE 1000
#define DECISION_SAMPLES 201
#define FIT_SAMPLES 51
#define PROFILE_POINTS 100
#define NOISE_SIGMA 0.05

static volatile double bench_sink;

/* --- decisions ---------------------------------------------------------- */

static const uint32_t bench_layouts[][2] = {   /* nodes, replicas */
    {1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 8}, {2, 16}, {4, 32}, {8, 64},
};
#define LAYOUT_COUNT (sizeof bench_layouts / sizeof bench_layouts[0])

static double bench_decisions(double gamma)
{
    struct goodput_model model = {
        .perf = {0.02, 5e-4, 0.15, 0.02, 0.05, 0.004, gamma},
        .grad = {.sqr = 1.0, .var = 128.0 * 16},
        .initial_global_bsz = 128,
    };
    struct goodput_config current = {.local_bsz = 32, .accum_steps = 0};
    double samples[DECISION_SAMPLES];
    for (int sample = 0; sample < DECISION_SAMPLES; sample++) {
        double sum = 0.0;
        double start = bench_monotonic_seconds();
        for (int decision = 0; decision < DECISIONS_PER_SAMPLE; decision++) {
            const uint32_t *layout = bench_layouts[decision % LAYOUT_COUNT];
            struct goodput_choice choice;
            goodput_optimize_from(&model, layout[0], layout[1], 128 * 64, 4, 1024, false,
                                  &current, &choice);
            sum += choice.goodput;
        }
        samples[sample] = (bench_monotonic_seconds() - start) / DECISIONS_PER_SAMPLE;
        bench_sink += sum;
    }
    return bench_median(samples, DECISION_SAMPLES);
}

/* --- fits ------------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double rng_gaussian(void)
{
    double u = ((double)(rng_next() >> 11) + 0.5) * 0x1.0p-53;
    double v = ((double)(rng_next() >> 11) + 0.5) * 0x1.0p-53;
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static struct step_profile_point noisy_point(const struct perf_params *truth, uint32_t nodes,
                                             uint32_t replicas, uint64_t local_bsz)
{
    double compute = perf_params_accum_time(truth, (double)local_bsz) *
                     (1.0 + NOISE_SIGMA * rng_gaussian());
    double step = perf_params_step_time(truth, nodes, replicas, (double)local_bsz, 0) *
                  (1.0 + NOISE_SIGMA * rng_gaussian());
    if (replicas == 1)
        step = compute;
    double sync = step - compute;
    return (struct step_profile_point){
        .nodes = nodes, .replicas = replicas, .local_bsz = local_bsz,
        .step_time = step, .sync_time = sync > 0.0 ? sync : 0.0, .count = 1,
    };
}

/* 100 points: `distinct` false cycles over 8 layouts x 5 local sizes, true
 * gives every point its own local size. */
static void make_profile(const struct perf_params *truth, int distinct,
                         struct step_profile_point *points)
{
    static const uint64_t locals[] = {16, 32, 64, 128, 256};
    rng_state = 12345;
    for (size_t index = 0; index < PROFILE_POINTS; index++) {
        const uint32_t *layout = bench_layouts[index % LAYOUT_COUNT];
        uint64_t local = distinct ? 16 + index * 3 : locals[(index / LAYOUT_COUNT) % 5];
        points[index] = noisy_point(truth, layout[0], layout[1], local);
    }
}

static double bench_fit(int distinct, struct perf_fit_report *report)
{
    struct perf_params truth = {0.02, 5e-4, 0.15, 0.02, 0.05, 0.004, 1.5};
    struct step_profile_point points[PROFILE_POINTS];
    make_profile(&truth, distinct, points);
    double samples[FIT_SAMPLES];
    for (int sample = 0; sample < FIT_SAMPLES; sample++) {
        struct perf_params fitted;
        char error[256];
        double start = bench_monotonic_seconds();
        if (perf_params_fit_report(points, PROFILE_POINTS, &fitted, report, error,
                                   sizeof error) != 0) {
            fprintf(stderr, "bench_goodput: fit failed: %s\n", error);
            exit(1);
        }
        samples[sample] = bench_monotonic_seconds() - start;
        bench_sink += fitted.gamma;
    }
    return bench_median(samples, FIT_SAMPLES);
}

int main(void)
{
    double decision = bench_decisions(1.7);
    printf("goodput decision (gamma 1.7)           %8.3f us   (target < 10 us)\n",
           decision * 1e6);
    double decision_linear = bench_decisions(1.0);
    printf("goodput decision (gamma 1)             %8.3f us   (target < 10 us)\n",
           decision_linear * 1e6);

    struct perf_fit_report report;
    double fit = bench_fit(0, &report);
    printf("fit 100 points, %3zu configurations     %8.3f ms   (target < 5 ms; %d evaluations)\n",
           report.configurations, fit * 1e3, report.evaluations);
    double fit_distinct = bench_fit(1, &report);
    printf("fit 100 points, %3zu configurations     %8.3f ms   (target < 5 ms; %d evaluations)\n",
           report.configurations, fit_distinct * 1e3, report.evaluations);
    return 0;
}
