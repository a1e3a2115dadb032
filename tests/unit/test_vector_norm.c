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

/* The mean of two gradients, against a plain double loop, for tails of
 * every length around the block size. */
Test(vector_norm, mean_pair_norms_match_a_double_loop)
{
    enum { LENGTH = 1200 };
    float *a = malloc(LENGTH * sizeof *a), *b = malloc(LENGTH * sizeof *b);
    double a_double[LENGTH], b_double[LENGTH];
    for (size_t i = 0; i < LENGTH; i++) {
        a[i] = (float)sin((double)i * 0.37) * (float)(1 + i % 5);
        b[i] = (float)cos((double)i * 0.11) - 0.5f;
        a_double[i] = a[i];
        b_double[i] = b[i];
    }
    for (size_t count = 0; count <= LENGTH; count += (count < 600 ? 1 : 61)) {
        double expected = 0;
        for (size_t i = 0; i < count; i++)
            expected += (a_double[i] + b_double[i]) * (a_double[i] + b_double[i]) / 4;
        double from_floats = mean_pair_squared_norm_float(a, b, count);
        double from_doubles = mean_pair_squared_norm_double(a_double, b_double, count);
        cr_assert(fabs(from_floats - expected) <= 1e-5 * (expected + 1e-30) + 1e-30,
                  "floats, count %zu: %.10g vs %.10g", count, from_floats, expected);
        cr_assert(fabs(from_doubles - expected) <= 1e-12 * (expected + 1e-30) + 1e-30,
                  "doubles, count %zu: %.10g vs %.10g", count, from_doubles, expected);
    }
    free(a);
    free(b);
}
