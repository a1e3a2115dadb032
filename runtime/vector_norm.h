/* vector_norm.h - squared Euclidean norms of gradient buffers, fast enough to
 * run on every gradient all-reduce (the target: a trainer's step time within
 * 1% of its time without the shim; adaptshim(7) "Benchmarks"). */
#ifndef ADAPTSHIM_VECTOR_NORM_H
#define ADAPTSHIM_VECTOR_NORM_H

#include <stddef.h>

double squared_norm_float(const float *values, size_t count);
double squared_norm_double(const double *values, size_t count);

/* |(a + b) / 2|^2: the squared norm of the mean of two gradients of the same
 * shape (the single-replica difference estimator pairs each step's gradient
 * with the previous one's), summed as the norms above are. */
double mean_pair_squared_norm_float(const float *a, const float *b, size_t count);
double mean_pair_squared_norm_double(const double *a, const double *b, size_t count);

#endif
