/* test_vector_norm.c - squared norms against a plain double loop. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "vector_norm.h"

static double reference_float(const float *values, size_t count)
{
    double sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += (double)values[i] * (double)values[i];
    return sum;
}

Test(vector_norm, float_norms_match_a_double_loop_for_every_tail_length)
{
    float *values = malloc(3000 * sizeof *values);
    for (size_t i = 0; i < 3000; i++)
        values[i] = (float)sin((double)i * 0.37) * (float)(1 + i % 7);
    for (size_t count = 0; count <= 3000; count += (count < 600 ? 1 : 97)) {
        double expected = reference_float(values, count);
        double actual = squared_norm_float(values, count);
        cr_assert(fabs(actual - expected) <= 1e-5 * (expected + 1e-30) + 1e-30,
                  "count %zu: %.10g vs %.10g", count, actual, expected);
    }
    free(values);
}

Test(vector_norm, double_norms_match_a_plain_loop)
{
    double values[1000];
    double expected = 0;
    for (size_t i = 0; i < 1000; i++) {
        values[i] = cos((double)i) * 3.5;
        expected += values[i] * values[i];
    }
    cr_assert(fabs(squared_norm_double(values, 1000) - expected) <= 1e-12 * expected);
    cr_assert_eq(squared_norm_double(values, 0), 0.0);
}
