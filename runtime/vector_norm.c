/* vector_norm.c - squared norms (see vector_norm.h).
 *
 * Blocks of 256 elements are summed in the element type with an
 * OpenMP "simd reduction" (compiled with -fopenmp-simd: no OpenMP runtime),
 * which lets the compiler vectorize the reduction it may not reorder on its
 * own; the block sums are added in double, so the rounding error stays that
 * of a 256-element float sum whatever the gradient's size.
 *
 * The float and the double version are one definition instantiated twice
 * (C has no generics, and _Generic would still need both bodies). */
#include "vector_norm.h"

#define NORM_BLOCK 256

#define DEFINE_SQUARED_NORM(type, name)                                          \
    static type name##_block(const type *values, size_t count)                  \
    {                                                                            \
        type sum = 0;                                                            \
        _Pragma("omp simd reduction(+ : sum)")                                   \
        for (size_t i = 0; i < count; i++)                                       \
            sum += values[i] * values[i];                                        \
        return sum;                                                              \
    }                                                                            \
                                                                                 \
    double name(const type *values, size_t count)                               \
    {                                                                            \
        double total = 0.0;                                                      \
        for (size_t start = 0; start < count; start += NORM_BLOCK) {             \
            size_t length = count - start < NORM_BLOCK ? count - start : NORM_BLOCK; \
            total += (double)name##_block(values + start, length);               \
        }                                                                        \
        return total;                                                            \
    }

DEFINE_SQUARED_NORM(float, squared_norm_float)
DEFINE_SQUARED_NORM(double, squared_norm_double)

/* The mean's norm the same way: (a + b)^2 summed per block, the total / 4. */
#define DEFINE_MEAN_PAIR_SQUARED_NORM(type, name)                                \
    static type name##_block(const type *a, const type *b, size_t count)        \
    {                                                                            \
        type sum = 0;                                                            \
        _Pragma("omp simd reduction(+ : sum)")                                   \
        for (size_t i = 0; i < count; i++)                                       \
            sum += (a[i] + b[i]) * (a[i] + b[i]);                                \
        return sum;                                                              \
    }                                                                            \
                                                                                 \
    double name(const type *a, const type *b, size_t count)                     \
    {                                                                            \
        double total = 0.0;                                                      \
        for (size_t start = 0; start < count; start += NORM_BLOCK) {             \
            size_t length = count - start < NORM_BLOCK ? count - start : NORM_BLOCK; \
            total += (double)name##_block(a + start, b + start, length);         \
        }                                                                        \
        return total * 0.25;                                                     \
    }

DEFINE_MEAN_PAIR_SQUARED_NORM(float, mean_pair_squared_norm_float)
DEFINE_MEAN_PAIR_SQUARED_NORM(double, mean_pair_squared_norm_double)
