/* signal_action_cell.h - a signal disposition that a signal handler reads
 * while another thread, or the very code the signal interrupted, replaces
 * it (the trainer's own action for a stop signal, shim/signals.c).
 *
 * A struct sigaction is about 150 bytes: a handler that copied it while a
 * sigaction() call was writing it (on another thread, or on the thread the
 * signal interrupted in the middle of the copy) could take the new handler
 * with the old flags, or half of a mask.  So a value is never written where
 * a reader may be: each change is written whole into a slot of its own
 * (one of a small ring), and only then published by an atomic store of the
 * slot's index.  A reader takes the published index and copies that slot.
 * Every slot also carries a sequence number, odd while its slot is being
 * written; a reader that finds it odd, or changed across its copy, reads
 * again from the newest published slot.  That can only happen when the
 * ring went round while it copied (SIGNAL_ACTION_CELL_SLOTS changes in
 * flight at once): a signal that interrupts a change never meets its slot,
 * since that slot is not the published one, so a handler never waits for
 * the code it interrupted.  Every access is a lock-free atomic (the value
 * is copied word by word), so publish and read are async-signal-safe and
 * free of data races. */
#ifndef ADAPTSHIM_SIGNAL_ACTION_CELL_H
#define ADAPTSHIM_SIGNAL_ACTION_CELL_H

#include <signal.h>
#include <stdbool.h>

/* One disposition: `installed` false means none was set (SIG_DFL). */
struct signal_action_value {
    bool installed;
    struct sigaction action;
};

#define SIGNAL_ACTION_CELL_SLOTS 8
#define SIGNAL_ACTION_CELL_WORDS \
    ((sizeof(struct signal_action_value) + sizeof(unsigned long) - 1) / sizeof(unsigned long))

struct signal_action_slot {
    unsigned long sequence;                        /* odd while being written */
    unsigned long words[SIGNAL_ACTION_CELL_WORDS]; /* a signal_action_value */
};

/* All zero is a cell whose value is "none installed" (static storage
 * needs no initialization). */
struct signal_action_cell {
    unsigned published;          /* the slot readers take */
    unsigned long next_ticket;   /* counts changes; picks their slots */
    struct signal_action_slot slots[SIGNAL_ACTION_CELL_SLOTS];
};

/* Replaces the value (async-signal-safe). */
void signal_action_cell_publish(struct signal_action_cell *cell,
                                const struct signal_action_value *value);
/* A whole copy of the latest value (async-signal-safe). */
void signal_action_cell_read(struct signal_action_cell *cell, struct signal_action_value *out);

#endif
