/* signal_action_cell.c - publishing a disposition to signal handlers (see
 * signal_action_cell.h). */
#include "signal_action_cell.h"

#include <string.h>

_Static_assert(__atomic_always_lock_free(sizeof(unsigned long), 0),
               "a signal handler may only use lock-free atomics");
_Static_assert(__atomic_always_lock_free(sizeof(unsigned), 0),
               "a signal handler may only use lock-free atomics");

static void signal_action_slot_store(struct signal_action_slot *slot,
                                     const struct signal_action_value *value)
{
    unsigned long words[SIGNAL_ACTION_CELL_WORDS] = {0};
    memcpy(words, value, sizeof *value);
    unsigned long sequence = __atomic_load_n(&slot->sequence, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->sequence, sequence + 1, __ATOMIC_RELAXED);
    /* the odd sequence is seen before any word of the new value */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (size_t i = 0; i < SIGNAL_ACTION_CELL_WORDS; i++)
        __atomic_store_n(&slot->words[i], words[i], __ATOMIC_RELAXED);
    __atomic_store_n(&slot->sequence, sequence + 2, __ATOMIC_RELEASE);
}

void signal_action_cell_publish(struct signal_action_cell *cell,
                                const struct signal_action_value *value)
{
    /* Slot 0 holds the initial value; the n-th change goes to slot n % SLOTS
     * (n from 1), never to the slot published before it. */
    unsigned long ticket = __atomic_add_fetch(&cell->next_ticket, 1, __ATOMIC_RELAXED);
    unsigned index = (unsigned)(ticket % SIGNAL_ACTION_CELL_SLOTS);
    signal_action_slot_store(&cell->slots[index], value);
    /* release: a reader that takes this index sees the whole value */
    __atomic_store_n(&cell->published, index, __ATOMIC_RELEASE);
}

/* One attempt at copying slot `index`: false when a writer was in it. */
static bool signal_action_slot_copy(struct signal_action_slot *slot,
                                    struct signal_action_value *out)
{
    unsigned long before = __atomic_load_n(&slot->sequence, __ATOMIC_ACQUIRE);
    if (before & 1)
        return false;
    unsigned long words[SIGNAL_ACTION_CELL_WORDS];
    for (size_t i = 0; i < SIGNAL_ACTION_CELL_WORDS; i++)
        words[i] = __atomic_load_n(&slot->words[i], __ATOMIC_RELAXED);
    /* the words are read before the sequence is looked at again */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&slot->sequence, __ATOMIC_RELAXED) != before)
        return false;
    memcpy(out, words, sizeof *out);
    return true;
}

void signal_action_cell_read(struct signal_action_cell *cell, struct signal_action_value *out)
{
    for (;;) {
        unsigned index = __atomic_load_n(&cell->published, __ATOMIC_ACQUIRE);
        if (signal_action_slot_copy(&cell->slots[index], out))
            return;
    }
}
