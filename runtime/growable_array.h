/* growable_array.h - room for one more item in a heap array that doubles as
 * it fills.  The runtime keeps its lists (accumulator keys and results, the
 * cooperative API's loops and registered state, snapshot candidates) and
 * the shim its followed streams as a pointer, a count and a capacity; this
 * is the one place that grows such an array. */
#ifndef ADAPTSHIM_GROWABLE_ARRAY_H
#define ADAPTSHIM_GROWABLE_ARRAY_H

#include <stddef.h>

/* `items` holds *capacity items of item_size bytes, `count` of them in use.
 * Returns the array with room for at least one more: `items` itself while
 * count < *capacity, otherwise `items` reallocated to twice *capacity (to
 * first_capacity, at least 1, when *capacity is 0) with *capacity updated.
 * NULL when memory runs out or the size would not fit in a size_t: then
 * `items` is still the caller's and *capacity is unchanged.
 *
 * The caller stores the result back itself.  Returning the array instead of
 * writing through a `void **` keeps every array accessed only as its own
 * type. */
void *growable_array_make_room(void *items, size_t count, size_t *capacity, size_t item_size,
                               size_t first_capacity);

#endif
