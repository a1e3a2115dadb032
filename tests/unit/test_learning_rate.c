/* test_learning_rate.c - the learning-rate rules and AdaScale's gain
 * (runtime/learning_rate.c, adaptshim(7) "BATCH-SIZE CONTROL"). */
#include <criterion/criterion.h>

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "learning_rate.h"

/* --- learning-rate rules ----------------------------------------------------- */

Test(learning_rate_factor, factor_per_rule)
{
    cr_assert_eq(learning_rate_factor(LR_RULE_NONE, 4.0, 2.5), 1.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_LINEAR, 4.0, 2.5), 4.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_SQRT, 4.0, 2.5), 2.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, 4.0, 2.5), 2.5);
    /* smaller than the initial batch: every rule scales down */
    cr_assert_eq(learning_rate_factor(LR_RULE_LINEAR, 0.25, 1), 0.25);
    cr_assert_eq(learning_rate_factor(LR_RULE_SQRT, 0.25, 1), 0.5);
    cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, 0.25, 0.4), 0.4);
}

Test(learning_rate_factor, scale_one_is_factor_one)
{
    cr_assert_eq(learning_rate_factor(LR_RULE_NONE, 1.0, 1.0), 1.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_LINEAR, 1.0, 1.0), 1.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_SQRT, 1.0, 1.0), 1.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, 1.0,
                                                adascale_gain(3.0, 50.0, 32, 1.0)),
                 1.0);
}

Test(learning_rate_factor, unusable_inputs_give_one)
{
    static const double bad_scales[] = {0.0, -2.0, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad_scales / sizeof bad_scales[0]; i++) {
        cr_assert_eq(learning_rate_factor(LR_RULE_LINEAR, bad_scales[i], 2), 1.0);
        cr_assert_eq(learning_rate_factor(LR_RULE_SQRT, bad_scales[i], 2), 1.0);
        cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, bad_scales[i], 2), 1.0);
    }
    cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, 4.0, NAN), 1.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, 4.0, INFINITY), 1.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, 4.0, 0.0), 1.0);
    cr_assert_eq(learning_rate_factor(LR_RULE_ADASCALE, 4.0, -1.0), 1.0);
    cr_assert_eq(learning_rate_factor((enum lr_rule)42, 4.0, 2.0), 1.0);
}

/* --- AdaScale's gain ------------------------------------------------------- */

Test(adascale_gain, known_value_matches_spec_efficiency)
{
    /* grad_var per sample 64 over B0 = 64: var_b = 1; sqr = 1; scale 4:
     * r = (1 + 1) / (1/4 + 1) = 1.6, and the statistical efficiency is r / 4 */
    double gain = adascale_gain(1.0, 64.0, 64, 4.0);
    double efficiency = (1.0 + 1.0) / (1.0 / 4.0 + 1.0) / 4.0;
    cr_assert_float_eq(gain, 1.6, 1e-12);
    cr_assert_float_eq(gain, 4.0 * efficiency, 1e-12);
}

Test(adascale_gain, scale_one_is_exactly_one)
{
    cr_assert_eq(adascale_gain(1.0, 64.0, 64, 1.0), 1.0);
    cr_assert_eq(adascale_gain(0.0, 0.0, 64, 1.0), 1.0);
    cr_assert_eq(adascale_gain(-3.0, -7.0, 64, 1.0), 1.0);
    cr_assert_eq(adascale_gain(1e-30, 1e30, 1, 1.0), 1.0);
}

Test(adascale_gain, missing_or_non_finite_statistics_give_one)
{
    cr_assert_eq(adascale_gain(NAN, 64.0, 64, 4.0), 1.0);
    cr_assert_eq(adascale_gain(1.0, NAN, 64, 4.0), 1.0);
    cr_assert_eq(adascale_gain(NAN, NAN, 64, 4.0), 1.0);
    cr_assert_eq(adascale_gain(INFINITY, 64.0, 64, 4.0), 1.0);
    cr_assert_eq(adascale_gain(1.0, -INFINITY, 64, 4.0), 1.0);
    cr_assert_eq(adascale_gain(1.0, 64.0, 0, 4.0), 1.0);
    cr_assert_eq(adascale_gain(1.0, 64.0, 64, 0.0), 1.0);
    cr_assert_eq(adascale_gain(1.0, 64.0, 64, -4.0), 1.0);
    cr_assert_eq(adascale_gain(1.0, 64.0, 64, NAN), 1.0);
    cr_assert_eq(adascale_gain(1.0, 64.0, 64, INFINITY), 1.0);
    /* finite but overflowing in the sum: still 1, never NaN */
    cr_assert_eq(adascale_gain(DBL_MAX, DBL_MAX, 1, 4.0), 1.0);
}

Test(adascale_gain, noise_only_is_linear_and_signal_only_is_one)
{
    /* no signal: every extra sample helps fully, r = scale */
    cr_assert_float_eq(adascale_gain(0.0, 100.0, 10, 8.0), 8.0, 1e-12);
    /* a negative |G|^2 estimate is clamped at 0, as in AdaptDL */
    cr_assert_float_eq(adascale_gain(-5.0, 100.0, 10, 8.0), 8.0, 1e-12);
    /* no noise: the variance floor 1e-6 keeps r just above 1 */
    cr_assert_float_eq(adascale_gain(1.0, 0.0, 10, 8.0), 1.0, 1e-5);
    cr_assert(adascale_gain(1.0, 0.0, 10, 8.0) >= 1.0);
    cr_assert_float_eq(adascale_gain(1.0, -50.0, 10, 8.0), 1.0, 1e-5);
    /* nothing measured but zeros: the floor alone, r = scale (as AdaptDL) */
    cr_assert_float_eq(adascale_gain(0.0, 0.0, 10, 8.0), 8.0, 1e-12);
}

Test(adascale_gain, lies_between_one_and_scale)
{
    static const double scales[] = {0.125, 0.5, 1.5, 2.0, 7.0, 100.0};
    static const double ratios[] = {0.001, 0.1, 1.0, 10.0, 1000.0};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        for (size_t j = 0; j < sizeof ratios / sizeof ratios[0]; j++) {
            double scale = scales[i];
            double gain = adascale_gain(1.0, ratios[j] * 256.0, 256, scale);
            double low = fmin(1.0, scale);
            double high = fmax(1.0, scale);
            cr_assert(gain >= low - 1e-12 && gain <= high + 1e-12,
                      "scale %g ratio %g: gain %g", scale, ratios[j], gain);
        }
    }
}

Test(adascale_gain, grows_with_scale)
{
    double previous = adascale_gain(2.0, 300.0, 128, 1.0);
    for (double scale = 1.5; scale <= 64.0; scale *= 1.5) {
        double gain = adascale_gain(2.0, 300.0, 128, scale);
        cr_assert(gain > previous, "scale %g", scale);
        previous = gain;
    }
}
