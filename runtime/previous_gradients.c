/* previous_gradients.c - the previous step's gradient pieces (see
 * previous_gradients.h). */
#include "previous_gradients.h"
#include "vector_norm.h"

#include <stdlib.h>
#include <string.h>

static double previous_gradients_mean_sqr(const void *previous, const void *gradient,
                                          size_t count, size_t element)
{
    if (element == sizeof(float))
        return mean_pair_squared_norm_float(previous, gradient, count);
    return mean_pair_squared_norm_double(previous, gradient, count);
}

bool previous_gradients_pair(struct previous_gradients *gradients, size_t index,
                             const void *gradient, size_t count, size_t element, uint64_t step,
                             double *mean_sqr)
{
    *mean_sqr = 0;
    if (index >= PREVIOUS_GRADIENTS_PIECES ||
        (element != sizeof(float) && element != sizeof(double)))
        return false;
    struct previous_gradient *previous = &gradients->pieces[index];
    bool valid = previous->data != NULL && previous->count == count &&
                 previous->element == element && previous->step + 1 == step;
    if (valid)
        *mean_sqr = previous_gradients_mean_sqr(previous->data, gradient, count, element);
    if (previous->data == NULL || previous->count != count || previous->element != element) {
        void *grown = realloc(previous->data, count ? count * element : 1);
        if (grown == NULL)
            return valid;
        previous->data = grown;
        previous->count = count;
        previous->element = element;
    }
    memcpy(previous->data, gradient, count * element);
    previous->step = step;
    return valid;
}

void previous_gradients_free(struct previous_gradients *gradients)
{
    for (size_t i = 0; i < PREVIOUS_GRADIENTS_PIECES; i++)
        free(gradients->pieces[i].data);
    memset(gradients, 0, sizeof *gradients);
}
