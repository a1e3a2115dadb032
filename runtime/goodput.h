/* goodput.h - the Pollux/AdaptDL goodput model: step-time prediction,
 * statistical efficiency, the batch-size optimizer and the fit of the
 * throughput model to step-time profiles (adaptshim(7) "Decisions";
 * the targets: one decision under 10 us, a fit of 100 points under 5 ms).
 *
 * Throughput model (AdaptDL's PerfParams, Pollux §3).  For a configuration of
 * `nodes` nodes, K `replicas`, a local (atomic) batch of b samples per
 * replica and `accum_steps` extra micro-batches accumulated before each
 * optimizer step:
 *
 *   T_accum  = alpha_c + beta_c * b                 one forward/backward pass
 *   T_net    = alpha_n + beta_n * max(K - 2, 1e-8)  if nodes > 1 (inter-node)
 *            = alpha_r + beta_r * max(K - 2, 1e-8)  else if K > 1 (intra-node)
 *            = 1e-8 + 1e-8 * 1e-8                    for one replica
 *   T_optim  = (T_accum^gamma + T_net^gamma)^(1/gamma)
 *   T_step   = accum_steps * T_accum + T_optim
 *
 * gamma in [1, 10] is the overlap of computation and communication: 1 means
 * none (the times add), 10 is close to max(), i.e. perfect overlap.  The
 * throughput is K * b * (accum_steps + 1) / T_step samples per second.
 *
 * What the shim measures maps onto it as AdaptDL's profile does: the time
 * inside the step's gradient all-reduces is the sync time, the rest of the
 * step is an accumulation (compute) time, and the whole step is T_optim when
 * no accumulation is used (always the case for unmodified trainers).
 *
 * Statistical efficiency (AdaptDL's GoodputFunction.efficiency).  With B0 the
 * initial global batch size, B the global batch size and scale = B / B0:
 *
 *   grad_var_b = grad_var / B0    (grad_var is per sample, see grad_noise.h;
 *                                  grad_var_b is the variance AdaptDL keeps)
 *   gain       = (grad_var_b + grad_sqr) / (grad_var_b / scale + grad_sqr)
 *   efficiency = gain / scale
 *
 * gain lies in [1, scale]: a step on B samples is worth between one and
 * `scale` steps on B0.  Efficiency is 1 at B0 and non-increasing in B.
 * goodput = throughput * efficiency, in "initial-batch-equivalent" samples
 * per second.
 *
 * Nothing here allocates except the fit, and nothing does I/O. */
#ifndef ADAPTSHIM_GOODPUT_H
#define ADAPTSHIM_GOODPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The seven parameters of the throughput model, in seconds (alpha_*),
 * seconds per sample (beta_c), seconds per replica beyond two (beta_n,
 * beta_r) and a dimensionless gamma.  Same order as AdaptDL's PerfParams
 * and as the job record's perf_params array. */
struct perf_params {
    double alpha_c, beta_c;    /* compute: constant, per sample */
    double alpha_n, beta_n;    /* inter-node network: constant, retrogression */
    double alpha_r, beta_r;    /* intra-node network: constant, retrogression */
    double gamma;              /* overlap of compute and network, [1, 10] */
};

#define PERF_PARAMS_COUNT 7

/* Indices of the parameters, for perf_fit_report.fixed_mask and for code
 * that treats the struct as an array (see perf_params_to_array()). */
enum perf_param_index {
    PERF_ALPHA_C = 0,
    PERF_BETA_C,
    PERF_ALPHA_N,
    PERF_BETA_N,
    PERF_ALPHA_R,
    PERF_BETA_R,
    PERF_GAMMA,
};

/* Gradient statistics as grad_noise.h estimates them:
 *   sqr = |G|^2, the squared norm of the true gradient;
 *   var = tr(Sigma) of a *single-sample* gradient (AdaptDL's var times B0).
 * Either may be NAN (no estimate) or <= 0 (noise early in training). */
struct grad_params {
    double sqr, var;
};

/* Everything a batch-size decision needs besides the configuration. */
struct goodput_model {
    struct perf_params perf;
    struct grad_params grad;
    uint64_t initial_global_bsz;   /* B0, AdaptDL's batch_size, >= 1 */
};

/* Lower bound of every alpha and beta (AdaptDL: a small slack above 0 that
 * keeps logarithms finite), also the value the priors pin unobserved terms
 * to. */
#define PERF_PARAM_FLOOR 1e-8
#define PERF_GAMMA_MIN 1.0
#define PERF_GAMMA_MAX 10.0

/* Number of global batch sizes the optimizer tries (AdaptDL: numpy's
 * geomspace default). */
#define GOODPUT_CANDIDATES 50

/* --- prediction ---------------------------------------------------------- */

void perf_params_to_array(const struct perf_params *params, double values[PERF_PARAMS_COUNT]);
void perf_params_from_array(struct perf_params *params, const double values[PERF_PARAMS_COUNT]);

/* True when every parameter is finite, alphas and betas > 0 and gamma in
 * [1, 10]: what the optimizer requires. */
bool perf_params_valid(const struct perf_params *params);

/* T_accum, T_net, T_optim and T_step of the model above, in seconds. */
double perf_params_accum_time(const struct perf_params *params, double local_bsz);
double perf_params_network_time(const struct perf_params *params, uint32_t nodes,
                                uint32_t replicas);
double perf_params_optim_time(const struct perf_params *params, uint32_t nodes,
                              uint32_t replicas, double local_bsz);
double perf_params_step_time(const struct perf_params *params, uint32_t nodes,
                             uint32_t replicas, double local_bsz, uint32_t accum_steps);

/* Samples per second: replicas * local_bsz * (accum_steps + 1) / T_step. */
double goodput_throughput(const struct goodput_model *model, uint32_t nodes,
                          uint32_t replicas, double local_bsz, uint32_t accum_steps);

/* True when the gradient statistics say anything: both finite and not both
 * <= 0.  Without them the efficiency of every batch size is unknown and the
 * optimizer keeps the initial batch size (AdaptDL makes no decision before
 * its first gradient statistics). */
bool goodput_has_grad_statistics(const struct grad_params *grad);

/* Statistical efficiency of a global batch of `global_bsz` samples (formula
 * above).  Negative or NAN statistics are clamped as AdaptDL clamps them,
 * grad_sqr at 0 and the variance at a floor, except that the floor is an
 * infinitesimal one rather than AdaptDL's 1e-6 (our statistics carry the
 * trainer's gradient units, see goodput.c): a variance <= 0 with
 * grad_sqr > 0 gives 1 / scale (no noise: a larger batch buys nothing),
 * and with both <= 0 the efficiency is 1 (no information, no penalty; what
 * AdaptDL's floor gives too).  NAN only for a global_bsz <= 0 or a zero
 * initial batch. */
double goodput_efficiency(const struct goodput_model *model, double global_bsz);

/* throughput * efficiency of one configuration. */
double goodput_evaluate(const struct goodput_model *model, uint32_t nodes,
                        uint32_t replicas, double local_bsz, uint32_t accum_steps);

/* --- optimizer ------------------------------------------------------------ */

/* One configuration: the local (atomic) batch and the accumulation steps. */
struct goodput_config {
    uint64_t local_bsz;
    uint32_t accum_steps;
};

struct goodput_choice {
    uint64_t global_bsz;       /* replicas * local_bsz * (accum_steps + 1) */
    uint64_t local_bsz;        /* per replica and micro-batch */
    uint32_t accum_steps;      /* 0 unless accumulation was allowed */
    double goodput;            /* of the chosen configuration */
    double throughput;
    double efficiency;
    double goodput_current;    /* of the configuration passed as current, else NAN */
};

/* The best of GOODPUT_CANDIDATES configurations for `nodes` nodes and
 * `replicas` replicas, AdaptDL's GoodputFunction.optimize:
 *
 *   - global candidates are geometrically spaced from
 *     max(B0, local_bsz_min * replicas) to max_global_bsz, ends included
 *     (max_global_bsz below that lower end, e.g. 0, means no adaptation);
 *   - without accumulation a candidate's local batch is
 *     ceil(candidate / replicas); with it, the accumulation steps are
 *     ceil(local / local_bsz_max) - 1, at least 1 with one replica when the
 *     local batch exceeds B0 (one micro-batch gives poor statistics), and the
 *     local batch is ceil(local / (accum_steps + 1)); ceilings tolerate 1e-8
 *     of rounding error;
 *   - the local batch is then clamped into [local_bsz_min, local_bsz_max]
 *     (0 means unbounded: 1 and max_global_bsz, as AdaptDL);
 *   - the first candidate with the highest goodput wins.
 *
 * Without gradient statistics (goodput_has_grad_statistics false) only the
 * lower end is tried: the initial batch is kept, split over the replicas.
 * Unlike AdaptDL, which pins one replica without accumulation to B0 always,
 * one replica with statistics may grow: the shim's difference estimator
 * (grad_noise.h) supplies statistics from a single replica (adaptshim(7) "Decisions").
 *
 * Allocates nothing.  Returns 0, or -1 (out untouched) when an argument is
 * invalid: nodes == 0, replicas < nodes, B0 == 0, local_bsz_min >
 * local_bsz_max, or perf_params_valid() false. */
int goodput_optimize(const struct goodput_model *model, uint32_t nodes, uint32_t replicas,
                     uint64_t max_global_bsz, uint64_t local_bsz_min, uint64_t local_bsz_max,
                     bool allow_accumulation, struct goodput_choice *out);

/* The same, also filling out->goodput_current with the goodput of `current`
 * at the same nodes and replicas (NAN when current is NULL or its local
 * batch is 0).  The predicted speedup of a decision is
 * out->goodput / out->goodput_current. */
int goodput_optimize_from(const struct goodput_model *model, uint32_t nodes, uint32_t replicas,
                          uint64_t max_global_bsz, uint64_t local_bsz_min,
                          uint64_t local_bsz_max, bool allow_accumulation,
                          const struct goodput_config *current, struct goodput_choice *out);

/* --- fit -------------------------------------------------------------------- */

/* One step-time profile point: the mean over `count` optimizer steps of one
 * configuration (the job record's step_profile bucket divided by its count).
 * step_time is the whole optimizer step, including its accum_steps
 * accumulation micro-batches; sync_time the part of it spent inside the
 * gradient all-reduces.  Points of the same (nodes, replicas, local_bsz) are
 * merged, weighted by count, as AdaptDL keeps one profile entry per
 * configuration. */
struct step_profile_point {
    uint32_t nodes;
    uint32_t replicas;
    uint64_t local_bsz;
    uint32_t accum_steps;
    double step_time;          /* seconds, > 0 */
    double sync_time;          /* seconds, 0 <= sync_time < step_time */
    uint64_t count;            /* steps averaged, >= 1 (0: the point is ignored) */
};

/* What a fit did, for logs and tests. */
struct perf_fit_report {
    unsigned fixed_mask;       /* bit (1 << enum perf_param_index) per fixed parameter */
    size_t configurations;     /* distinct configurations after merging */
    double objective;          /* final value of the objective */
    int evaluations;           /* objective evaluations */
    int nlopt_status;          /* nlopt_result of the minimization */
};

/* Fits the seven parameters to the points, AdaptDL's fit_perf_params:
 * minimizes RMS log error of the predicted accumulation time plus RMS log
 * error of the predicted optimizer-step time, plus 1e-3 (gamma - 1)^2 (a
 * small gamma is easier to fit) and 1e-2 ((beta_n/alpha_n)^2 +
 * (beta_r/alpha_r)^2) (an optimistic, non-retrogressing network), under the
 * bounds alpha, beta >= 1e-8 and 1 <= gamma <= 10.  AdaptDL's priors fix
 * what the profile cannot tell:
 *
 *   - one local batch size seen: alpha_c = mean accumulation time / 2;
 *   - no point on several nodes: alpha_n = beta_n = 1e-8 during the fit,
 *     then alpha_n = max(alpha_n, 1.1 alpha_r), beta_n = max(beta_n,
 *     1.1 beta_r) (inter-node is never cheaper than intra-node);
 *   - no point with several replicas on one node: alpha_r = beta_r = 1e-8;
 *   - no point with more than 2 replicas: beta_n = beta_r = 1e-8.
 *
 * Returns 0 with *result set, or -1 with a one-line message in `error` (an
 * invalid point, no point with count > 0, out of memory, NLopt failure).
 * `report` may be NULL. */
/* The fit's objective (without priors: they only choose what may vary) at
 * `params`, and its gradient with respect to the seven parameters in
 * `gradient` (may be NULL), for diagnostics and tests.  NAN for invalid
 * points, none with count > 0, parameters outside the bounds, or out of
 * memory. */
double perf_params_fit_objective(const struct step_profile_point *points, size_t count,
                                 const struct perf_params *params,
                                 double gradient[PERF_PARAMS_COUNT]);

int perf_params_fit(const struct step_profile_point *points, size_t count,
                    struct perf_params *result, char *error, size_t error_size);
int perf_params_fit_report(const struct step_profile_point *points, size_t count,
                           struct perf_params *result, struct perf_fit_report *report,
                           char *error, size_t error_size);

#endif
