/* pass_state_arena.c - pass-state blocks shared across fork, found by file
 * identity (see pass_state_arena.h). */
#include "pass_state_arena.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sysio.h"

/* Blocks hold process-shared mutexes and 64-bit words: cache-line aligned. */
#define PASS_STATE_ARENA_ALIGNMENT 64

struct pass_state_slot {
    struct pass_state_key key;
    size_t offset;                /* of the block, from the arena's start */
    size_t size;
};

/* Lives at the start of the shared mapping; every field after `lock` is
 * read and written under it, except `used` which is also read atomically. */
struct pass_state_arena {
    pthread_mutex_t lock;         /* process-shared, robust */
    size_t total;                 /* bytes of the mapping */
    size_t used;                  /* offset of the first free byte */
    size_t slot_count;
    struct pass_state_slot slots[PASS_STATE_ARENA_FILES];
};

static size_t pass_state_arena_round_up(size_t value, size_t unit)
{
    return (value + unit - 1) / unit * unit;
}

struct pass_state_arena *pass_state_arena_create(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t minimum = pass_state_arena_round_up(sizeof(struct pass_state_arena), page);
    size_t total = pass_state_arena_round_up(bytes, page);
    if (total < minimum)
        total = minimum;
    void *memory = runtime_sysio.mmap(NULL, total, PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED)
        return NULL;
    struct pass_state_arena *arena = memory;
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&arena->lock, &attributes);
    pthread_mutexattr_destroy(&attributes);
    arena->total = total;
    arena->used = pass_state_arena_round_up(sizeof *arena, PASS_STATE_ARENA_ALIGNMENT);
    arena->slot_count = 0;
    return arena;
}

void pass_state_arena_destroy(struct pass_state_arena *arena)
{
    if (arena != NULL)
        runtime_sysio.munmap(arena, arena->total);
}

static void pass_state_arena_lock(struct pass_state_arena *arena)
{
    /* A process killed while claiming left at most a slot not yet counted
     * (slot_count moves last), so the table is consistent as it is. */
    if (pthread_mutex_lock(&arena->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&arena->lock);
}

static bool pass_state_key_equal(const struct pass_state_key *a, const struct pass_state_key *b)
{
    return a->device == b->device && a->inode == b->inode &&
           a->record_count == b->record_count;
}

static struct pass_state_slot *pass_state_arena_find(struct pass_state_arena *arena,
                                                     const struct pass_state_key *key)
{
    for (size_t i = 0; i < arena->slot_count; i++)
        if (pass_state_key_equal(&arena->slots[i].key, key))
            return &arena->slots[i];
    return NULL;
}

void *pass_state_arena_claim(struct pass_state_arena *arena, const struct pass_state_key *key,
                             size_t size, pass_state_initializer initialize,
                             void *context, bool *created)
{
    *created = false;
    pass_state_arena_lock(arena);
    void *block = NULL;
    int error = 0;
    struct pass_state_slot *slot = pass_state_arena_find(arena, key);
    size_t rounded = pass_state_arena_round_up(size, PASS_STATE_ARENA_ALIGNMENT);
    if (slot != NULL) {
        if (slot->size == size)
            block = (unsigned char *)arena + slot->offset;
        else
            error = EINVAL;
    } else if (arena->slot_count == PASS_STATE_ARENA_FILES ||
               rounded > arena->total - arena->used) {
        error = ENOSPC;
    } else {
        void *candidate = (unsigned char *)arena + arena->used;
        if (initialize(candidate, context) != 0) {
            error = errno ? errno : ENOMEM;
        } else {
            slot = &arena->slots[arena->slot_count];
            slot->key = *key;
            slot->offset = arena->used;
            slot->size = size;
            __atomic_store_n(&arena->used, arena->used + rounded, __ATOMIC_RELEASE);
            arena->slot_count++;
            block = candidate;
            *created = true;
        }
    }
    pthread_mutex_unlock(&arena->lock);
    if (block == NULL)
        errno = error;
    return block;
}

size_t pass_state_arena_available(const struct pass_state_arena *arena)
{
    return arena->total - __atomic_load_n(&arena->used, __ATOMIC_ACQUIRE);
}
