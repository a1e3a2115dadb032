/* goodput.c - the Pollux/AdaptDL goodput model (see goodput.h).
 *
 * Three parts:
 *
 * 1. Prediction.  Step time, throughput and efficiency of one configuration,
 *    written once as small inline helpers that take precomputed quantities,
 *    so that the public functions and the optimizer's inner loop do exactly
 *    the same floating-point arithmetic (a brute force over the public
 *    functions finds the optimizer's answer bit for bit).
 *
 * 2. The optimizer.  AdaptDL's GoodputFunction.optimize evaluates 50
 *    candidate global batch sizes with numpy, about 200 us per decision.  In
 *    C the candidates are a loop with no allocation; what costs is the
 *    transcendental functions, so everything that does not depend on the
 *    candidate (T_net^gamma, 1/gamma, the clamped gradient statistics, the
 *    geometric step) is computed once per decision, a candidate whose
 *    rounded configuration equals the previous one is not evaluated again
 *    (rounding and clamping often map many candidates onto one
 *    configuration), and gamma == 1, the value the fit's regularization
 *    pulls towards, skips pow() entirely.
 *
 * 3. The fit.  AdaptDL minimizes its objective with scipy's L-BFGS-B and an
 *    autograd gradient (about 80 ms).  Here: NLopt's NLOPT_LD_LBFGS, the
 *    same kind of method (limited-memory quasi-Newton with box bounds), with
 *    the gradient written out by hand below.  The gradient is short: the
 *    objective is two root-mean-square errors of logarithms of simple
 *    closed forms, and the only delicate piece, log(a^g + n^g) / g, is
 *    evaluated as a log-sum-exp whose derivatives are its softmax weights.
 *    Measured on 100-point noisy profiles (5 seeds): L-BFGS reaches the
 *    best objective that three NLopt methods from four starting points find,
 *    in about 32 evaluations (0.1-0.2 ms).  The derivative-free
 *    NLOPT_LN_BOBYQA took 600-1100 evaluations and still stopped 10-20%
 *    above that optimum (gamma never left its starting value).
 *
 *    Parametrization.  The six alphas and betas are optimized as their
 *    logarithms.  Their scales differ by orders of magnitude (a step of
 *    0.1 s, a per-sample cost of 1e-4 s, a retrogression near the 1e-8
 *    floor); in log space every direction has unit scale, and since the
 *    objective already measures errors of log-times the landscape is
 *    rounder: on the same profiles L-BFGS needs about 32 evaluations in
 *    log space against about 90 on the raw values, to the same optimum.
 *    The minimizer is the same point: a change of variables moves no
 *    minimum.  Bounds become log(1e-8) below and log(1e6) above (AdaptDL
 *    has no upper bound; 1e6 seconds is no restriction on a step-time model
 *    and keeps exp() finite if a line search probes far away).  gamma stays
 *    as it is, bounded to [1, 10].
 *
 *    Priors fix parameters by removing them from the optimization vector
 *    (equivalent to lower = upper, as AdaptDL does, but smaller and with no
 *    zero-width box for the solver to handle). */
#include "error_message.h"
#include "goodput.h"

#include <math.h>
#include <nlopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Tolerance of AdaptDL's floor/ceil operations: a candidate that is an
 * integer up to rounding error is not rounded up to the next one. */
#define GOODPUT_ROUNDING_SLACK 1e-8

/* AdaptDL's stand-in for a retrogression factor max(K - 2, 0) that must
 * stay positive, and for the network time of a single replica. */
#define NETWORK_TINY 1e-8

/* The fit's bounds, starting point and stopping rule. */
#define FIT_LOG_FLOOR (-18.420680743952367)   /* log(1e-8) */
#define FIT_LOG_CEILING 13.815510557964274    /* log(1e6) */
#define FIT_START_ALPHA 1e-1                  /* AdaptDL's initial values */
#define FIT_START_BETA 1e-2
#define FIT_START_GAMMA (1.0 + 1e-3)
#define FIT_RELATIVE_TOLERANCE 1e-10
#define FIT_MAX_EVALUATIONS 2000

/* Regularization weights of AdaptDL's objective. */
#define FIT_GAMMA_PENALTY 1e-3
#define FIT_RETROGRESSION_PENALTY 1e-2

/* The prior on inter-node terms when only one node was seen. */
#define FIT_INTER_NODE_FACTOR 1.1

/* ------------------------------------------------------------------------ */
/* Parameters                                                                */
/* ------------------------------------------------------------------------ */

void perf_params_to_array(const struct perf_params *params, double values[PERF_PARAMS_COUNT])
{
    values[PERF_ALPHA_C] = params->alpha_c;
    values[PERF_BETA_C] = params->beta_c;
    values[PERF_ALPHA_N] = params->alpha_n;
    values[PERF_BETA_N] = params->beta_n;
    values[PERF_ALPHA_R] = params->alpha_r;
    values[PERF_BETA_R] = params->beta_r;
    values[PERF_GAMMA] = params->gamma;
}

void perf_params_from_array(struct perf_params *params, const double values[PERF_PARAMS_COUNT])
{
    params->alpha_c = values[PERF_ALPHA_C];
    params->beta_c = values[PERF_BETA_C];
    params->alpha_n = values[PERF_ALPHA_N];
    params->beta_n = values[PERF_BETA_N];
    params->alpha_r = values[PERF_ALPHA_R];
    params->beta_r = values[PERF_BETA_R];
    params->gamma = values[PERF_GAMMA];
}

bool perf_params_valid(const struct perf_params *params)
{
    double values[PERF_PARAMS_COUNT];
    perf_params_to_array(params, values);
    for (int index = 0; index < PERF_GAMMA; index++)
        if (!isfinite(values[index]) || values[index] <= 0.0)
            return false;
    /* Written so that NAN fails too. */
    return params->gamma >= PERF_GAMMA_MIN && params->gamma <= PERF_GAMMA_MAX;
}

/* ------------------------------------------------------------------------ */
/* Prediction                                                                */
/* ------------------------------------------------------------------------ */

/* Which link bottlenecks the gradient all-reduce: AdaptDL's np.select over
 * (nodes > 1, replicas > 1) with a tiny default for one replica. */
enum network_link {
    NETWORK_LINK_NONE = 0,     /* one replica: nothing to synchronize */
    NETWORK_LINK_INTRA_NODE,
    NETWORK_LINK_INTER_NODE,
};

static enum network_link network_link_of(uint32_t nodes, uint32_t replicas)
{
    if (nodes > 1)
        return NETWORK_LINK_INTER_NODE;
    if (replicas > 1)
        return NETWORK_LINK_INTRA_NODE;
    return NETWORK_LINK_NONE;
}

/* The retrogression multiplier max(K - 2, 1e-8): ring all-reduce takes a
 * number of rounds that grows with K, felt beyond two replicas. */
static double network_retrogression_multiplier(uint32_t replicas)
{
    double beyond_two = (double)replicas - 2.0;
    return beyond_two > NETWORK_TINY ? beyond_two : NETWORK_TINY;
}

static double network_time_for_link(const struct perf_params *params, enum network_link link,
                                    double multiplier)
{
    switch (link) {
    case NETWORK_LINK_INTER_NODE:
        return params->alpha_n + params->beta_n * multiplier;
    case NETWORK_LINK_INTRA_NODE:
        return params->alpha_r + params->beta_r * multiplier;
    case NETWORK_LINK_NONE:
        break;
    }
    return NETWORK_TINY + NETWORK_TINY * multiplier;
}

/* (accum^gamma + network^gamma)^(1/gamma) with network^gamma precomputed.
 * gamma == 1 is exact without pow() (pow(x, 1) == x anyway). */
static inline double optim_time_combine(double accum_time, double network_pow_gamma,
                                        double gamma, double inverse_gamma)
{
    if (gamma == 1.0)
        return accum_time + network_pow_gamma;
    return pow(pow(accum_time, gamma) + network_pow_gamma, inverse_gamma);
}

static inline double network_pow_gamma_of(double network_time, double gamma)
{
    return gamma == 1.0 ? network_time : pow(network_time, gamma);
}

double perf_params_accum_time(const struct perf_params *params, double local_bsz)
{
    return params->alpha_c + params->beta_c * local_bsz;
}

double perf_params_network_time(const struct perf_params *params, uint32_t nodes,
                                uint32_t replicas)
{
    return network_time_for_link(params, network_link_of(nodes, replicas),
                                 network_retrogression_multiplier(replicas));
}

double perf_params_optim_time(const struct perf_params *params, uint32_t nodes,
                              uint32_t replicas, double local_bsz)
{
    double network_time = perf_params_network_time(params, nodes, replicas);
    return optim_time_combine(perf_params_accum_time(params, local_bsz),
                              network_pow_gamma_of(network_time, params->gamma),
                              params->gamma, 1.0 / params->gamma);
}

double perf_params_step_time(const struct perf_params *params, uint32_t nodes,
                             uint32_t replicas, double local_bsz, uint32_t accum_steps)
{
    double accum_time = perf_params_accum_time(params, local_bsz);
    return (double)accum_steps * accum_time +
           perf_params_optim_time(params, nodes, replicas, local_bsz);
}

double goodput_throughput(const struct goodput_model *model, uint32_t nodes,
                          uint32_t replicas, double local_bsz, uint32_t accum_steps)
{
    double samples = (double)replicas * local_bsz * ((double)accum_steps + 1.0);
    return samples / perf_params_step_time(&model->perf, nodes, replicas, local_bsz,
                                           accum_steps);
}

/* ------------------------------------------------------------------------ */
/* Statistical efficiency                                                     */
/* ------------------------------------------------------------------------ */

bool goodput_has_grad_statistics(const struct grad_params *grad)
{
    if (!isfinite(grad->sqr) || !isfinite(grad->var))
        return false;
    return grad->sqr > 0.0 || grad->var > 0.0;
}

/* The gradient statistics in the form the efficiency formula wants, clamped
 * once per decision.
 *
 * AdaptDL clamps |G|^2 at 0 and its variance at 1e-6.  That floor is in the
 * units of AdaptDL's gradients; ours follow whatever convention the trainer
 * uses (grad_noise.h: a trainer that divides by K before the all-reduce
 * makes both statistics K^2 smaller), so a fixed floor would mean a
 * different noise level for each trainer.  The clamp here is the limit of
 * AdaptDL's as the floor goes to 0+: a non-positive variance counts as 0,
 * except that when |G|^2 is 0 too the variance still dominates (AdaptDL
 * then gets efficiency 1 from its floor; so do we).  Whenever the variance
 * is well above AdaptDL's floor, both give the same numbers. */
struct efficiency_terms {
    double var_b;              /* grad_var / B0, AdaptDL's variance, >= 0 */
    double sqr;                /* |G|^2, >= 0 */
    double inverse_initial;    /* 1 / B0 */
    bool no_information;       /* both 0: efficiency 1 everywhere */
};

static struct efficiency_terms efficiency_terms_of(const struct goodput_model *model)
{
    double initial = (double)model->initial_global_bsz;
    double var_b = model->grad.var / initial;
    struct efficiency_terms terms = {
        .var_b = var_b > 0.0 ? var_b : 0.0,           /* NAN counts as 0 */
        .sqr = model->grad.sqr > 0.0 ? model->grad.sqr : 0.0,
        .inverse_initial = 1.0 / initial,
    };
    terms.no_information = terms.var_b == 0.0 && terms.sqr == 0.0;
    return terms;
}

/* gain / scale = (v + q) / ((v / scale + q) * scale) = (v + q) / (v + q scale),
 * one division and no special case for scale itself. */
static inline double efficiency_at(const struct efficiency_terms *terms, double global_bsz)
{
    if (terms->no_information)
        return 1.0;
    double scale = global_bsz * terms->inverse_initial;
    return (terms->var_b + terms->sqr) / (terms->var_b + terms->sqr * scale);
}

double goodput_efficiency(const struct goodput_model *model, double global_bsz)
{
    if (!(global_bsz > 0.0) || model->initial_global_bsz == 0)
        return NAN;
    struct efficiency_terms terms = efficiency_terms_of(model);
    return efficiency_at(&terms, global_bsz);
}

/* ------------------------------------------------------------------------ */
/* Evaluation of one configuration, shared by the public function and the    */
/* optimizer                                                                  */
/* ------------------------------------------------------------------------ */

/* Everything about a decision that does not depend on the candidate. */
struct goodput_context {
    double alpha_c, beta_c;
    double gamma, inverse_gamma;
    double network_pow_gamma;  /* T_net^gamma for these nodes and replicas */
    double replicas;
    struct efficiency_terms efficiency;
};

static void goodput_context_init(struct goodput_context *context,
                                 const struct goodput_model *model, uint32_t nodes,
                                 uint32_t replicas)
{
    const struct perf_params *params = &model->perf;
    double network_time = perf_params_network_time(params, nodes, replicas);
    *context = (struct goodput_context){
        .alpha_c = params->alpha_c,
        .beta_c = params->beta_c,
        .gamma = params->gamma,
        .inverse_gamma = 1.0 / params->gamma,
        .network_pow_gamma = network_pow_gamma_of(network_time, params->gamma),
        .replicas = (double)replicas,
        .efficiency = efficiency_terms_of(model),
    };
}

struct goodput_value {
    double goodput, throughput, efficiency;
};

static inline struct goodput_value goodput_context_evaluate(const struct goodput_context *context,
                                                            double local_bsz,
                                                            uint32_t accum_steps)
{
    double accum_time = context->alpha_c + context->beta_c * local_bsz;
    double steps = (double)accum_steps;
    double step_time = steps * accum_time +
                       optim_time_combine(accum_time, context->network_pow_gamma,
                                          context->gamma, context->inverse_gamma);
    double global_bsz = context->replicas * local_bsz * (steps + 1.0);
    struct goodput_value value;
    value.throughput = global_bsz / step_time;
    value.efficiency = efficiency_at(&context->efficiency, global_bsz);
    value.goodput = value.throughput * value.efficiency;
    return value;
}

double goodput_evaluate(const struct goodput_model *model, uint32_t nodes,
                        uint32_t replicas, double local_bsz, uint32_t accum_steps)
{
    if (model->initial_global_bsz == 0)
        return NAN;
    struct goodput_context context;
    goodput_context_init(&context, model, nodes, replicas);
    return goodput_context_evaluate(&context, local_bsz, accum_steps).goodput;
}

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                  */
/* ------------------------------------------------------------------------ */

/* The bounds of one decision after AdaptDL's defaults are applied. */
struct candidate_range {
    double lowest_global;      /* max(B0, local_min * K) */
    double highest_global;     /* max_global_bsz, not below lowest_global */
    double local_min, local_max;
    double initial;            /* B0 */
    double replicas;
    bool accumulation;
};

static uint64_t ceil_with_slack(double value)
{
    double rounded = ceil(value - GOODPUT_ROUNDING_SLACK);
    return rounded < 1.0 ? 1 : (uint64_t)rounded;
}

static double clamp_local(const struct candidate_range *range, double local_bsz)
{
    if (local_bsz < range->local_min)
        return range->local_min;
    if (local_bsz > range->local_max)
        return range->local_max;
    return local_bsz;
}

/* A global candidate to (local batch, accumulation steps), AdaptDL's
 * rounding and clamping. */
static struct goodput_config candidate_config(const struct candidate_range *range,
                                              double global_candidate)
{
    double local = global_candidate / range->replicas;
    uint64_t accum_steps = 0;
    double local_bsz;
    if (range->accumulation) {
        /* Enough micro-batches that each fits under local_max. */
        accum_steps = ceil_with_slack(local / range->local_max) - 1;
        /* One replica can only measure its gradient statistics across
         * micro-batches (AdaptDL), so it accumulates at least once as soon
         * as it goes beyond the initial batch. */
        if (range->replicas == 1.0 && local > range->initial + GOODPUT_ROUNDING_SLACK &&
            accum_steps < 1)
            accum_steps = 1;
        local_bsz = (double)ceil_with_slack(local / ((double)accum_steps + 1.0));
    } else {
        local_bsz = (double)ceil_with_slack(local);
    }
    return (struct goodput_config){
        .local_bsz = (uint64_t)clamp_local(range, local_bsz),
        .accum_steps = accum_steps > UINT32_MAX ? UINT32_MAX : (uint32_t)accum_steps,
    };
}

static bool optimize_arguments_valid(const struct goodput_model *model, uint32_t nodes,
                                     uint32_t replicas, uint64_t local_bsz_min,
                                     uint64_t local_bsz_max)
{
    if (nodes == 0 || replicas < nodes || model->initial_global_bsz == 0)
        return false;
    if (local_bsz_min != 0 && local_bsz_max != 0 && local_bsz_min > local_bsz_max)
        return false;
    return perf_params_valid(&model->perf);
}

static struct candidate_range candidate_range_of(const struct goodput_model *model,
                                                 uint32_t replicas, uint64_t max_global_bsz,
                                                 uint64_t local_bsz_min,
                                                 uint64_t local_bsz_max,
                                                 bool allow_accumulation)
{
    struct candidate_range range = {
        .initial = (double)model->initial_global_bsz,
        .replicas = (double)replicas,
        .accumulation = allow_accumulation,
    };
    /* AdaptDL: no maximum means no adaptation (max = B0); no local bounds
     * mean 1 and the maximum global batch. */
    double highest = max_global_bsz > model->initial_global_bsz ? (double)max_global_bsz
                                                                 : range.initial;
    range.local_min = local_bsz_min != 0 ? (double)local_bsz_min : 1.0;
    range.local_max = local_bsz_max != 0 ? (double)local_bsz_max : highest;
    if (range.local_max < range.local_min)
        range.local_max = range.local_min;
    range.lowest_global = fmax(range.initial, range.local_min * range.replicas);
    /* AdaptDL's geomspace would run downwards from lowest to highest; every
     * such candidate rounds and clamps to local_min, the same configuration
     * as the lowest alone. */
    range.highest_global = fmax(highest, range.lowest_global);
    /* Without gradient statistics there is nothing to trade throughput
     * against: keep the initial batch. */
    if (!goodput_has_grad_statistics(&model->grad))
        range.highest_global = range.lowest_global;
    return range;
}

int goodput_optimize_from(const struct goodput_model *model, uint32_t nodes, uint32_t replicas,
                          uint64_t max_global_bsz, uint64_t local_bsz_min,
                          uint64_t local_bsz_max, bool allow_accumulation,
                          const struct goodput_config *current, struct goodput_choice *out)
{
    if (!optimize_arguments_valid(model, nodes, replicas, local_bsz_min, local_bsz_max))
        return -1;
    struct candidate_range range = candidate_range_of(model, replicas, max_global_bsz,
                                                      local_bsz_min, local_bsz_max,
                                                      allow_accumulation);
    struct goodput_context context;
    goodput_context_init(&context, model, nodes, replicas);

    /* numpy's geomspace: exp of evenly spaced logarithms, both ends exact. */
    double log_lowest = log(range.lowest_global);
    double log_step = (log(range.highest_global) - log_lowest) / (GOODPUT_CANDIDATES - 1);

    struct goodput_config best_config = {0}, previous = {0};
    struct goodput_value best = {.goodput = -INFINITY};
    for (int index = 0; index < GOODPUT_CANDIDATES; index++) {
        double candidate;
        if (index == 0)
            candidate = range.lowest_global;
        else if (index == GOODPUT_CANDIDATES - 1)
            candidate = range.highest_global;
        else
            candidate = exp(log_lowest + log_step * index);
        struct goodput_config config = candidate_config(&range, candidate);
        /* Same configuration as the previous candidate: same goodput, and the
         * first of equals wins anyway. */
        if (index > 0 && config.local_bsz == previous.local_bsz &&
            config.accum_steps == previous.accum_steps)
            continue;
        previous = config;
        struct goodput_value value =
            goodput_context_evaluate(&context, (double)config.local_bsz, config.accum_steps);
        if (value.goodput > best.goodput) {
            best = value;
            best_config = config;
        }
    }
    /* Every goodput NAN (cannot happen with valid parameters, but a NAN
     * must never become a decision): fall back on the lowest candidate. */
    if (best.goodput == -INFINITY) {
        best_config = candidate_config(&range, range.lowest_global);
        best = goodput_context_evaluate(&context, (double)best_config.local_bsz,
                                        best_config.accum_steps);
    }

    *out = (struct goodput_choice){
        .global_bsz = (uint64_t)replicas * best_config.local_bsz *
                      ((uint64_t)best_config.accum_steps + 1),
        .local_bsz = best_config.local_bsz,
        .accum_steps = best_config.accum_steps,
        .goodput = best.goodput,
        .throughput = best.throughput,
        .efficiency = best.efficiency,
        .goodput_current = NAN,
    };
    if (current != NULL && current->local_bsz > 0)
        out->goodput_current = goodput_context_evaluate(&context, (double)current->local_bsz,
                                                        current->accum_steps).goodput;
    return 0;
}

int goodput_optimize(const struct goodput_model *model, uint32_t nodes, uint32_t replicas,
                     uint64_t max_global_bsz, uint64_t local_bsz_min, uint64_t local_bsz_max,
                     bool allow_accumulation, struct goodput_choice *out)
{
    return goodput_optimize_from(model, nodes, replicas, max_global_bsz, local_bsz_min,
                                 local_bsz_max, allow_accumulation, NULL, out);
}

/* ------------------------------------------------------------------------ */
/* Fit: profile points                                                        */
/* ------------------------------------------------------------------------ */

/* One profiled configuration after merging, with what the objective needs
 * precomputed. */
struct fit_config {
    uint32_t nodes;
    uint32_t replicas;
    uint64_t local_bsz_key;
    enum network_link link;
    double local_bsz;
    double retrogression;      /* max(K - 2, 1e-8) */
    /* count-weighted sums while merging, then the means */
    double accum_time_sum, accum_weight;
    double optim_time_sum, optim_weight;
    double log_accum_time;     /* observed, per micro-batch */
    double log_optim_time;     /* observed, the step that synchronizes */
};

static int fit_check_point(const struct step_profile_point *point, size_t index,
                           char *error, size_t error_size)
{
    const char *problem = NULL;
    if (point->nodes == 0)
        problem = "nodes is 0";
    else if (point->replicas < point->nodes)
        problem = "fewer replicas than nodes";
    else if (point->local_bsz == 0)
        problem = "local_bsz is 0";
    else if (!isfinite(point->step_time) || point->step_time <= 0.0)
        problem = "step_time is not a positive number";
    else if (!isfinite(point->sync_time) || point->sync_time < 0.0)
        problem = "sync_time is not a non-negative number";
    else if (point->sync_time >= point->step_time)
        problem = "sync_time is not below step_time (no compute time left)";
    if (problem == NULL)
        return 0;
    error_message(error, error_size,
              "step profile point %zu (nodes %u, replicas %u, local_bsz %llu): %s", index,
              point->nodes, point->replicas, (unsigned long long)point->local_bsz, problem);
    return -1;
}

/* Adds one point to its configuration, AdaptDL's profile bookkeeping: the
 * non-sync part of a step is accumulation (compute) time spread over its
 * accum_steps + 1 micro-batches, and the synchronizing step is the whole
 * step minus its accumulation micro-batches. */
static void fit_config_add(struct fit_config *config, const struct step_profile_point *point)
{
    double weight = (double)point->count;
    double micro_batches = (double)point->accum_steps + 1.0;
    double compute_time = point->step_time - point->sync_time;
    double accum_time = compute_time / micro_batches;
    config->accum_time_sum += weight * compute_time;
    config->accum_weight += weight * micro_batches;
    config->optim_time_sum += weight * (point->step_time - (double)point->accum_steps * accum_time);
    config->optim_weight += weight;
}

/* Merges points into configurations, returns how many (0 with an error when
 * a point is invalid or none counts).  `configs` holds `count` entries. */
static size_t fit_merge_points(const struct step_profile_point *points, size_t count,
                               struct fit_config *configs, char *error, size_t error_size)
{
    size_t merged = 0;
    for (size_t index = 0; index < count; index++) {
        const struct step_profile_point *point = &points[index];
        if (point->count == 0)
            continue;
        if (fit_check_point(point, index, error, error_size) != 0)
            return 0;
        struct fit_config *config = NULL;
        for (size_t seen = 0; seen < merged && config == NULL; seen++)
            if (configs[seen].nodes == point->nodes && configs[seen].replicas == point->replicas &&
                configs[seen].local_bsz_key == point->local_bsz)
                config = &configs[seen];
        if (config == NULL) {
            config = &configs[merged++];
            *config = (struct fit_config){
                .nodes = point->nodes,
                .replicas = point->replicas,
                .local_bsz_key = point->local_bsz,
                .link = network_link_of(point->nodes, point->replicas),
                .local_bsz = (double)point->local_bsz,
                .retrogression = network_retrogression_multiplier(point->replicas),
            };
        }
        fit_config_add(config, point);
    }
    if (merged == 0) {
        error_message(error, error_size, "no step profile point with a nonzero count to fit");
        return 0;
    }
    for (size_t index = 0; index < merged; index++) {
        struct fit_config *config = &configs[index];
        config->log_accum_time = log(config->accum_time_sum / config->accum_weight);
        config->log_optim_time = log(config->optim_time_sum / config->optim_weight);
    }
    return merged;
}

/* ------------------------------------------------------------------------ */
/* Fit: priors                                                                */
/* ------------------------------------------------------------------------ */

#define PARAM_BIT(index) (1u << (index))

struct fit_problem {
    const struct fit_config *configs;
    size_t config_count;
    double values[PERF_PARAMS_COUNT];  /* fixed values, and the start of free ones */
    unsigned fixed_mask;
    int free_index[PERF_PARAMS_COUNT]; /* parameter of each optimization variable */
    int free_count;
    bool single_node;                  /* no point on several nodes */
    int evaluations;
};

/* AdaptDL's priors: what the profile cannot show is pinned. */
static void fit_apply_priors(struct fit_problem *problem)
{
    const struct fit_config *configs = problem->configs;
    bool one_local_bsz = true, multi_node = false, multi_replica_one_node = false;
    bool beyond_two = false;
    double accum_time_total = 0.0;
    for (size_t index = 0; index < problem->config_count; index++) {
        const struct fit_config *config = &configs[index];
        one_local_bsz &= config->local_bsz_key == configs[0].local_bsz_key;
        multi_node |= config->nodes > 1;
        multi_replica_one_node |= config->nodes == 1 && config->replicas > 1;
        beyond_two |= config->replicas > 2;
        accum_time_total += exp(config->log_accum_time);
    }
    if (one_local_bsz) {
        /* Constant and per-sample compute get equal shares: optimistic about
         * larger batches, which is how AdaptDL learns whether they pay. */
        problem->values[PERF_ALPHA_C] = accum_time_total / (double)problem->config_count / 2.0;
        problem->fixed_mask |= PARAM_BIT(PERF_ALPHA_C);
    }
    if (!multi_node)
        problem->fixed_mask |= PARAM_BIT(PERF_ALPHA_N) | PARAM_BIT(PERF_BETA_N);
    if (!multi_replica_one_node)
        problem->fixed_mask |= PARAM_BIT(PERF_ALPHA_R) | PARAM_BIT(PERF_BETA_R);
    if (!beyond_two)
        problem->fixed_mask |= PARAM_BIT(PERF_BETA_N) | PARAM_BIT(PERF_BETA_R);
    /* Fixed network terms sit on the lower bound, as in AdaptDL. */
    for (int index = PERF_ALPHA_N; index <= PERF_BETA_R; index++)
        if (problem->fixed_mask & PARAM_BIT(index))
            problem->values[index] = PERF_PARAM_FLOOR;
    problem->single_node = !multi_node;
}

/* After the fit: inter-node communication is never cheaper than intra-node,
 * so a job that only ran on one node predicts multi-node runs pessimistically
 * enough. */
static void fit_apply_inter_node_prior(const struct fit_problem *problem,
                                       double values[PERF_PARAMS_COUNT])
{
    if (!problem->single_node)
        return;
    values[PERF_ALPHA_N] = fmax(values[PERF_ALPHA_N], FIT_INTER_NODE_FACTOR * values[PERF_ALPHA_R]);
    values[PERF_BETA_N] = fmax(values[PERF_BETA_N], FIT_INTER_NODE_FACTOR * values[PERF_BETA_R]);
}

/* ------------------------------------------------------------------------ */
/* Fit: objective and its gradient                                            */
/* ------------------------------------------------------------------------ */

/* Optimization variable of a parameter: the logarithm for alphas and betas,
 * gamma itself. */
static double fit_variable_of(int parameter, double value)
{
    return parameter == PERF_GAMMA ? value : log(value);
}

static double fit_value_of(int parameter, double variable)
{
    return parameter == PERF_GAMMA ? variable : exp(variable);
}

/* Per-configuration pieces of the optimizer-step prediction
 * L = log(a^g + n^g) / g, computed as a log-sum-exp so that neither a^g
 * nor n^g over- or underflows (g up to 10, n down to 1e-8).  The weights
 * w_a = a^g / (a^g + n^g) and w_n = 1 - w_a are its derivatives:
 *   dL/da = w_a / a,  dL/dn = w_n / n,
 *   dL/dg = (w_a log a + w_n log n - L) / g. */
struct optim_prediction {
    double log_time;           /* L */
    double weight_accum, weight_network;
    double log_accum, log_network;
};

static struct optim_prediction predict_log_optim_time(double accum_time, double network_time,
                                                      double gamma)
{
    struct optim_prediction prediction = {
        .log_accum = log(accum_time),
        .log_network = log(network_time),
    };
    double scaled_accum = gamma * prediction.log_accum;
    double scaled_network = gamma * prediction.log_network;
    double larger = fmax(scaled_accum, scaled_network);
    double smaller = fmin(scaled_accum, scaled_network);
    double ratio = exp(smaller - larger);          /* in (0, 1] */
    double log_sum = larger + log1p(ratio);
    prediction.log_time = log_sum / gamma;
    double weight_smaller = ratio / (1.0 + ratio);
    double weight_larger = 1.0 / (1.0 + ratio);
    bool accum_larger = scaled_accum >= scaled_network;
    prediction.weight_accum = accum_larger ? weight_larger : weight_smaller;
    prediction.weight_network = accum_larger ? weight_smaller : weight_larger;
    return prediction;
}

/* Sums of one root-mean-square term: squared residuals and residual-weighted
 * derivatives with respect to the seven parameters. */
struct rms_accumulator {
    double squared;
    double gradient[PERF_PARAMS_COUNT];
};

/* sqrt(mean r^2) and its gradient sum(r dr) / (N rms) added to `gradient`.
 * At a perfect fit (rms 0) the norm has no derivative; 0 is a subgradient. */
static double rms_finish(const struct rms_accumulator *sums, double count,
                         double gradient[PERF_PARAMS_COUNT])
{
    double rms = sqrt(sums->squared / count);
    if (rms > 0.0)
        for (int index = 0; index < PERF_PARAMS_COUNT; index++)
            gradient[index] += sums->gradient[index] / (count * rms);
    return rms;
}

/* Adds one configuration's residuals: log accumulation time (depends on
 * alpha_c, beta_c) and log optimizer-step time (depends on everything the
 * configuration's link uses, and gamma). */
static void fit_accumulate_config(const struct fit_config *config,
                                  const double values[PERF_PARAMS_COUNT],
                                  struct rms_accumulator *accum_sums,
                                  struct rms_accumulator *optim_sums)
{
    double alpha_c = values[PERF_ALPHA_C], beta_c = values[PERF_BETA_C];
    double gamma = values[PERF_GAMMA];
    double accum_time = alpha_c + beta_c * config->local_bsz;

    int alpha_index = -1, beta_index = -1;
    if (config->link == NETWORK_LINK_INTER_NODE)
        alpha_index = PERF_ALPHA_N, beta_index = PERF_BETA_N;
    else if (config->link == NETWORK_LINK_INTRA_NODE)
        alpha_index = PERF_ALPHA_R, beta_index = PERF_BETA_R;
    double network_time = alpha_index >= 0
        ? values[alpha_index] + values[beta_index] * config->retrogression
        : NETWORK_TINY + NETWORK_TINY * config->retrogression;

    struct optim_prediction optim = predict_log_optim_time(accum_time, network_time, gamma);

    double accum_residual = optim.log_accum - config->log_accum_time;
    accum_sums->squared += accum_residual * accum_residual;
    accum_sums->gradient[PERF_ALPHA_C] += accum_residual / accum_time;
    accum_sums->gradient[PERF_BETA_C] += accum_residual * config->local_bsz / accum_time;

    double optim_residual = optim.log_time - config->log_optim_time;
    double by_accum = optim_residual * optim.weight_accum / accum_time;
    optim_sums->squared += optim_residual * optim_residual;
    optim_sums->gradient[PERF_ALPHA_C] += by_accum;
    optim_sums->gradient[PERF_BETA_C] += by_accum * config->local_bsz;
    if (alpha_index >= 0) {
        double by_network = optim_residual * optim.weight_network / network_time;
        optim_sums->gradient[alpha_index] += by_network;
        optim_sums->gradient[beta_index] += by_network * config->retrogression;
    }
    optim_sums->gradient[PERF_GAMMA] +=
        optim_residual *
        (optim.weight_accum * optim.log_accum + optim.weight_network * optim.log_network -
         optim.log_time) / gamma;
}

/* AdaptDL's two regularizers and their derivatives. */
static double fit_regularization(const double values[PERF_PARAMS_COUNT],
                                 double gradient[PERF_PARAMS_COUNT])
{
    double gamma_excess = values[PERF_GAMMA] - 1.0;
    double inter = values[PERF_BETA_N] / values[PERF_ALPHA_N];
    double intra = values[PERF_BETA_R] / values[PERF_ALPHA_R];
    gradient[PERF_GAMMA] += 2.0 * FIT_GAMMA_PENALTY * gamma_excess;
    gradient[PERF_BETA_N] += 2.0 * FIT_RETROGRESSION_PENALTY * inter / values[PERF_ALPHA_N];
    gradient[PERF_ALPHA_N] -=
        2.0 * FIT_RETROGRESSION_PENALTY * inter * inter / values[PERF_ALPHA_N];
    gradient[PERF_BETA_R] += 2.0 * FIT_RETROGRESSION_PENALTY * intra / values[PERF_ALPHA_R];
    gradient[PERF_ALPHA_R] -=
        2.0 * FIT_RETROGRESSION_PENALTY * intra * intra / values[PERF_ALPHA_R];
    return FIT_GAMMA_PENALTY * gamma_excess * gamma_excess +
           FIT_RETROGRESSION_PENALTY * (inter * inter + intra * intra);
}

/* The objective over all seven parameters, with its gradient with respect
 * to them in `gradient` (zeroed here). */
static double fit_objective_values(const struct fit_problem *problem,
                                   const double values[PERF_PARAMS_COUNT],
                                   double gradient[PERF_PARAMS_COUNT])
{
    struct rms_accumulator accum_sums = {0}, optim_sums = {0};
    for (size_t index = 0; index < problem->config_count; index++)
        fit_accumulate_config(&problem->configs[index], values, &accum_sums, &optim_sums);
    for (int index = 0; index < PERF_PARAMS_COUNT; index++)
        gradient[index] = 0.0;
    double count = (double)problem->config_count;
    double objective = rms_finish(&accum_sums, count, gradient);
    objective += rms_finish(&optim_sums, count, gradient);
    return objective + fit_regularization(values, gradient);
}

/* The seven parameters from the optimization variables (fixed ones from the
 * problem). */
static void fit_values_from_variables(const struct fit_problem *problem, const double *variables,
                                      double values[PERF_PARAMS_COUNT])
{
    for (int index = 0; index < PERF_PARAMS_COUNT; index++)
        values[index] = problem->values[index];
    for (int free = 0; free < problem->free_count; free++) {
        int parameter = problem->free_index[free];
        values[parameter] = fit_value_of(parameter, variables[free]);
    }
}

/* NLopt's callback: objective of the free variables, gradient by the chain
 * rule (d/d log(theta) = theta d/d theta). */
static double fit_nlopt_objective(unsigned variable_count, const double *variables,
                                  double *variable_gradient, void *data)
{
    struct fit_problem *problem = data;
    double values[PERF_PARAMS_COUNT], gradient[PERF_PARAMS_COUNT];
    fit_values_from_variables(problem, variables, values);
    double objective = fit_objective_values(problem, values, gradient);
    problem->evaluations++;
    if (variable_gradient != NULL)
        for (unsigned free = 0; free < variable_count; free++) {
            int parameter = problem->free_index[free];
            variable_gradient[free] = parameter == PERF_GAMMA
                ? gradient[parameter]
                : gradient[parameter] * values[parameter];
        }
    return objective;
}

/* ------------------------------------------------------------------------ */
/* Fit: driver                                                                */
/* ------------------------------------------------------------------------ */

static void fit_problem_init(struct fit_problem *problem, const struct fit_config *configs,
                             size_t config_count)
{
    *problem = (struct fit_problem){
        .configs = configs,
        .config_count = config_count,
        .values = {FIT_START_ALPHA, FIT_START_BETA, FIT_START_ALPHA, FIT_START_BETA,
                   FIT_START_ALPHA, FIT_START_BETA, FIT_START_GAMMA},
    };
    fit_apply_priors(problem);
    for (int index = 0; index < PERF_PARAMS_COUNT; index++)
        if (!(problem->fixed_mask & PARAM_BIT(index)))
            problem->free_index[problem->free_count++] = index;
}

/* Runs L-BFGS over the free variables; fills `values` with the best point
 * NLopt found.  Returns the nlopt_result, or NLOPT_OUT_OF_MEMORY. */
static int fit_minimize(struct fit_problem *problem, double values[PERF_PARAMS_COUNT],
                        double *objective)
{
    int count = problem->free_count;
    double variables[PERF_PARAMS_COUNT], lower[PERF_PARAMS_COUNT], upper[PERF_PARAMS_COUNT];
    for (int free = 0; free < count; free++) {
        int parameter = problem->free_index[free];
        variables[free] = fit_variable_of(parameter, problem->values[parameter]);
        lower[free] = parameter == PERF_GAMMA ? PERF_GAMMA_MIN : FIT_LOG_FLOOR;
        upper[free] = parameter == PERF_GAMMA ? PERF_GAMMA_MAX : FIT_LOG_CEILING;
    }
    nlopt_opt optimizer = nlopt_create(NLOPT_LD_LBFGS, (unsigned)count);
    if (optimizer == NULL)
        return NLOPT_OUT_OF_MEMORY;
    nlopt_set_lower_bounds(optimizer, lower);
    nlopt_set_upper_bounds(optimizer, upper);
    nlopt_set_min_objective(optimizer, fit_nlopt_objective, problem);
    nlopt_set_ftol_rel(optimizer, FIT_RELATIVE_TOLERANCE);
    nlopt_set_maxeval(optimizer, FIT_MAX_EVALUATIONS);
    *objective = HUGE_VAL;
    nlopt_result status = nlopt_optimize(optimizer, variables, objective);
    nlopt_destroy(optimizer);
    fit_values_from_variables(problem, variables, values);
    return status;
}

/* L-BFGS often stops on "roundoff limited" once it cannot improve any
 * more: the point it returns is then still its best one, so only failures
 * that leave no usable point count. */
static bool fit_status_usable(int status, double objective)
{
    if (status == NLOPT_INVALID_ARGS || status == NLOPT_OUT_OF_MEMORY ||
        status == NLOPT_FORCED_STOP)
        return false;
    return isfinite(objective);
}

int perf_params_fit_report(const struct step_profile_point *points, size_t count,
                           struct perf_params *result, struct perf_fit_report *report,
                           char *error, size_t error_size)
{
    if (count == 0) {
        error_message(error, error_size, "no step profile point to fit");
        return -1;
    }
    struct fit_config *configs = malloc(count * sizeof *configs);
    if (configs == NULL) {
        error_message(error, error_size, "out of memory fitting %zu step profile points", count);
        return -1;
    }
    size_t config_count = fit_merge_points(points, count, configs, error, error_size);
    if (config_count == 0) {
        free(configs);
        return -1;
    }
    struct fit_problem problem;
    fit_problem_init(&problem, configs, config_count);
    double values[PERF_PARAMS_COUNT], objective;
    int status = fit_minimize(&problem, values, &objective);
    free(configs);
    if (!fit_status_usable(status, objective)) {
        error_message(error, error_size, "fitting the throughput model failed (NLopt status %d)",
                  status);
        return -1;
    }
    fit_apply_inter_node_prior(&problem, values);
    perf_params_from_array(result, values);
    if (report != NULL)
        *report = (struct perf_fit_report){
            .fixed_mask = problem.fixed_mask,
            .configurations = config_count,
            .objective = objective,
            .evaluations = problem.evaluations,
            .nlopt_status = status,
        };
    return 0;
}

int perf_params_fit(const struct step_profile_point *points, size_t count,
                    struct perf_params *result, char *error, size_t error_size)
{
    return perf_params_fit_report(points, count, result, NULL, error, error_size);
}

double perf_params_fit_objective(const struct step_profile_point *points, size_t count,
                                 const struct perf_params *params,
                                 double gradient[PERF_PARAMS_COUNT])
{
    if (count == 0 || !perf_params_valid(params))
        return NAN;
    struct fit_config *configs = malloc(count * sizeof *configs);
    if (configs == NULL)
        return NAN;
    size_t config_count = fit_merge_points(points, count, configs, NULL, 0);
    double objective = NAN;
    if (config_count > 0) {
        struct fit_problem problem = {.configs = configs, .config_count = config_count};
        double values[PERF_PARAMS_COUNT], unused[PERF_PARAMS_COUNT];
        perf_params_to_array(params, values);
        objective = fit_objective_values(&problem, values, gradient ? gradient : unused);
    }
    free(configs);
    return objective;
}
