/* previous_gradients.h - the previous step's gradient pieces, for AdaptDL's
 * single-replica noise estimator (with one replica the difference
 * estimator pairs each step's gradient with the previous step's).
 *
 * One copy per gradient piece of a step is kept, by the piece's position in
 * the step (pieces come in the same order and sizes every step), and
 * |(a + b)/2|^2 is computed while both are at hand: the trainer's buffer is
 * overwritten by its next step. */
#ifndef ADAPTSHIM_PREVIOUS_GRADIENTS_H
#define ADAPTSHIM_PREVIOUS_GRADIENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PREVIOUS_GRADIENTS_PIECES 64

struct previous_gradient {
    void *data;
    size_t count;
    size_t element;               /* 4: float, 8: double */
    uint64_t step;                /* the step it was kept in */
};

struct previous_gradients {
    struct previous_gradient pieces[PREVIOUS_GRADIENTS_PIECES];
};

/* Piece `index` of step `step` is `gradient` (count elements of `element`
 * bytes, 4 or 8).  Returns true with *mean_sqr = |(a + b)/2|^2 when the same
 * piece of step - 1 is kept (same size and type), else false; then keeps
 * this piece for the next step (nothing kept when memory runs out or the
 * index is beyond PREVIOUS_GRADIENTS_PIECES). */
bool previous_gradients_pair(struct previous_gradients *gradients, size_t index,
                             const void *gradient, size_t count, size_t element, uint64_t step,
                             double *mean_sqr);

void previous_gradients_free(struct previous_gradients *gradients);

#endif
