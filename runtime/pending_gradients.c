/* pending_gradients.c - the table of posted, not yet completed gradient
 * all-reduces (see pending_gradients.h).  Entries are unordered: a taken
 * entry's slot gets the last entry, so adding and taking stay a scan of at
 * most PENDING_GRADIENTS_MAX entries and no more. */
#include "pending_gradients.h"

#include <stddef.h>

/* Caller holds table->lock. */
static bool pending_gradients_take_locked(struct pending_gradients *table, const void *request,
                                          struct pending_gradient *taken)
{
    for (int index = 0; index < table->count; index++) {
        if (table->entries[index].request != request)
            continue;
        if (taken != NULL)
            *taken = table->entries[index];
        table->entries[index] = table->entries[table->count - 1];
        __atomic_store_n(&table->count, table->count - 1, __ATOMIC_RELAXED);
        return true;
    }
    return false;
}

bool pending_gradients_add(struct pending_gradients *table,
                           const struct pending_gradient *gradient)
{
    pthread_mutex_lock(&table->lock);
    pending_gradients_take_locked(table, gradient->request, NULL);
    bool added = table->count < PENDING_GRADIENTS_MAX;
    if (added) {
        table->entries[table->count] = *gradient;
        __atomic_store_n(&table->count, table->count + 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&table->lock);
    return added;
}

bool pending_gradients_take(struct pending_gradients *table, const void *request,
                            struct pending_gradient *taken)
{
    if (pending_gradients_is_empty(table))
        return false;
    pthread_mutex_lock(&table->lock);
    bool found = pending_gradients_take_locked(table, request, taken);
    pthread_mutex_unlock(&table->lock);
    return found;
}

bool pending_gradients_is_empty(const struct pending_gradients *table)
{
    return __atomic_load_n(&table->count, __ATOMIC_RELAXED) == 0;
}
