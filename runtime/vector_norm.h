/* vector_norm.h - squared Euclidean norms of gradient buffers, fast enough to
 * run on every gradient all-reduce (the target: a trainer's step time within
 * 1% of its time without the shim; adaptshim(7) "Benchmarks"). */
#ifndef ADAPTSHIM_VECTOR_NORM_H
#define ADAPTSHIM_VECTOR_NORM_H

#include <stddef.h>

double squared_norm_float(const float *values, size_t count);
double squared_norm_double(const double *values, size_t count);

#endif
