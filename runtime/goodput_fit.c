/* goodput_fit.c - the throughput model fit to step profiles (goodput.h,
 * perf_params_fit), AdaptDL's _fit_perf_params.
 *
 * The fit.  AdaptDL minimizes its objective with scipy's L-BFGS-B and an
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
#include "goodput_network.h"

#include <math.h>
#include <nlopt.h>
#include <stdio.h>
#include <stdlib.h>

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
