/* pass_state_arena.h - one region of memory shared by every process of a
 * job, holding the pass state of each data file (adaptshim(7) "After fork").
 *
 * A PyTorch Dataset often opens its file lazily in __getitem__, so the first
 * process to touch a data file may be a DataLoader worker, and with
 * non-persistent workers every epoch's workers are forked afresh from a
 * parent that never opened the file.  Pass state mapped at a file's
 * registration would then be private to one worker and lost with it.  The
 * arena is mapped once at start-up, before the trainer can fork, so every
 * descendant shares it: whichever process registers a file first claims its
 * block, and every other process that registers the same file (by device,
 * inode and record count) gets the same block.
 *
 * The arena is reserved with MAP_NORESERVE: only the pages a file's state
 * actually touches cost memory.  Blocks are never freed; files stay
 * registered until exit anyway. */
#ifndef ADAPTSHIM_PASS_STATE_ARENA_H
#define ADAPTSHIM_PASS_STATE_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Address space reserved for the arena: room for the delivery bits of
 * about 8 billion records in all, never committed unless used. */
#define PASS_STATE_ARENA_DEFAULT_BYTES ((size_t)1 << 30)

/* How many data files one job can share through the arena. */
#define PASS_STATE_ARENA_FILES 1024

struct pass_state_arena;

/* The identity of a data file's pass state: processes agree on a block only
 * when all three match (a file replaced in place gets a new inode or size). */
struct pass_state_key {
    uint64_t device;
    uint64_t inode;
    uint64_t record_count;
};

/* Makes a block ready for use; called once per block, under the arena's
 * lock, by the process that claims it first.  Returns 0, or -1 to give the
 * block back (the claim then fails). */
typedef int (*pass_state_initializer)(void *block, void *context);

/* Maps an arena of `bytes` (rounded up to pages).  NULL with errno set when
 * the memory cannot be mapped. */
struct pass_state_arena *pass_state_arena_create(size_t bytes);
void pass_state_arena_destroy(struct pass_state_arena *arena);

/* The block of `size` bytes for `key`: the existing one (*created = false),
 * or a new one made ready by `initialize` (*created = true).  NULL with
 * errno ENOSPC when the arena is full (no slot or not enough bytes left),
 * EINVAL when an existing block for the key has another size, or the
 * initializer's failure. */
void *pass_state_arena_claim(struct pass_state_arena *arena, const struct pass_state_key *key,
                             size_t size, pass_state_initializer initialize,
                             void *context, bool *created);

/* Bytes still free in the arena. */
size_t pass_state_arena_available(const struct pass_state_arena *arena);

#endif
