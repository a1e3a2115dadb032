/* growable_array.c - room for one more item in a doubling array (see
 * growable_array.h). */
#include "growable_array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

void *growable_array_make_room(void *items, size_t count, size_t *capacity, size_t item_size,
                               size_t first_capacity)
{
    if (count < *capacity)
        return items;
    size_t grown;
    if (*capacity == 0) {
        grown = first_capacity > 0 ? first_capacity : 1;
    } else if (*capacity > SIZE_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    } else {
        grown = *capacity * 2;
    }
    /* Checked here rather than left to reallocarray so that the failure is
     * the same under every allocator, sanitizers included. */
    if (item_size > 0 && grown > SIZE_MAX / item_size) {
        errno = ENOMEM;
        return NULL;
    }
    void *resized = reallocarray(items, grown, item_size);
    if (resized == NULL)
        return NULL;
    *capacity = grown;
    return resized;
}
