/* vector_norm.c - squared norms (see vector_norm.h).
 *
 * Blocks of 256 elements are summed in the element type with an
 * OpenMP "simd reduction" (compiled with -fopenmp-simd: no OpenMP runtime),
 * which lets the compiler vectorize the reduction it may not reorder on its
 * own; the block sums are added in double, so the rounding error stays that
 * of a 256-element float sum whatever the gradient's size. */
#include "vector_norm.h"

#define NORM_BLOCK 256

static float squared_norm_float_block(const float *values, size_t count)
{
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (size_t i = 0; i < count; i++)
        sum += values[i] * values[i];
    return sum;
}

double squared_norm_float(const float *values, size_t count)
{
    double total = 0.0;
    for (size_t start = 0; start < count; start += NORM_BLOCK) {
        size_t length = count - start < NORM_BLOCK ? count - start : NORM_BLOCK;
        total += (double)squared_norm_float_block(values + start, length);
    }
    return total;
}

static double squared_norm_double_block(const double *values, size_t count)
{
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (size_t i = 0; i < count; i++)
        sum += values[i] * values[i];
    return sum;
}

double squared_norm_double(const double *values, size_t count)
{
    double total = 0.0;
    for (size_t start = 0; start < count; start += NORM_BLOCK) {
        size_t length = count - start < NORM_BLOCK ? count - start : NORM_BLOCK;
        total += squared_norm_double_block(values + start, length);
    }
    return total;
}
