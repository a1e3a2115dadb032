/* learning_rate.h - how the trainer's learning rate follows the batch size
 * adaptshim injects (adaptshim(7) "BATCH-SIZE CONTROL", ADAPTDL_LR_RULE): the linear and
 * square-root rules, and AdaScale's gain from the gradient statistics. */
#ifndef ADAPTSHIM_LEARNING_RATE_H
#define ADAPTSHIM_LEARNING_RATE_H

#include <stdint.h>

#include "config.h"

/* The factor the trainer's learning rate is multiplied by, for
 * scale = (injected local batch x replicas) / initial global batch:
 *   LR_RULE_NONE      1
 *   LR_RULE_LINEAR    scale
 *   LR_RULE_SQRT      sqrt(scale)
 *   LR_RULE_ADASCALE  gain_from_adascale, computed by the caller with
 *                     adascale_gain() below
 * A scale that is not finite and positive gives 1 for every rule (nothing
 * sensible to rescale by), and so does an AdaScale gain that is not finite
 * and positive. */
double learning_rate_factor(enum lr_rule rule, double scale, double gain_from_adascale);

/* AdaScale's gain at `scale` (Johnson et al. 2020, as AdaptDL's
 * GradientNoiseScale.gain):
 *
 *   r = (var_b + sqr) / (var_b / scale + sqr)
 *
 * with sqr = grad_sqr = |G|^2 and var_b = grad_var_per_sample /
 * initial_global_bsz, the variance of a gradient averaged over the initial
 * batch.  r = scale * efficiency (adaptshim(7) "BATCH-SIZE CONTROL"):
 * between 1 (no noise, a bigger batch gains nothing) and scale (pure noise,
 * the linear rule).  As in
 * AdaptDL, sqr is clamped at 0 and var_b at 1e-6 from below, since early
 * unbiased estimates can be negative.  Returns 1 when a statistic is missing
 * or not finite (NAN before the first observation), initial_global_bsz is 0,
 * or scale is not finite and positive; exactly 1 at scale 1. */
double adascale_gain(double grad_sqr, double grad_var_per_sample, uint64_t initial_global_bsz,
                     double scale);

#endif
