/* learning_rate.c - the learning-rate rules (learning_rate.h). */
#include "learning_rate.h"

#include <math.h>

/* AdaptDL's lower bound on the variance (GradientNoiseScale.var_avg). */
#define ADASCALE_VARIANCE_FLOOR 1e-6

static bool is_finite_positive(double x)
{
    return isfinite(x) && x > 0;
}

double learning_rate_factor(enum lr_rule rule, double scale, double gain_from_adascale)
{
    if (!is_finite_positive(scale))
        return 1.0;
    switch (rule) {
    case LR_RULE_NONE:
        return 1.0;
    case LR_RULE_LINEAR:
        return scale;
    case LR_RULE_SQRT:
        return sqrt(scale);
    case LR_RULE_ADASCALE:
        return is_finite_positive(gain_from_adascale) ? gain_from_adascale : 1.0;
    }
    return 1.0;
}

double adascale_gain(double grad_sqr, double grad_var_per_sample, uint64_t initial_global_bsz,
                     double scale)
{
    double sqr;
    double var_b;
    double gain;

    if (!isfinite(grad_sqr) || !isfinite(grad_var_per_sample) || initial_global_bsz == 0 ||
        !is_finite_positive(scale))
        return 1.0;
    sqr = fmax(grad_sqr, 0.0);
    var_b = fmax(grad_var_per_sample / (double)initial_global_bsz, ADASCALE_VARIANCE_FLOOR);
    gain = (var_b + sqr) / (var_b / scale + sqr);
    return is_finite_positive(gain) ? gain : 1.0;
}
