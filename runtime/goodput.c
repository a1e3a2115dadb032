/* goodput.c - the Pollux/AdaptDL goodput model (see goodput.h).
 *
 * Two parts:
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
 *
 * The fit of the throughput model to step profiles is goodput_fit.c. */
#include "error_message.h"
#include "goodput.h"
#include "goodput_network.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Tolerance of AdaptDL's floor/ceil operations: a candidate that is an
 * integer up to rounding error is not rounded up to the next one. */
#define GOODPUT_ROUNDING_SLACK 1e-8


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

