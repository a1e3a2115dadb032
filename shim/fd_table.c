/* fd_table.c - descriptor -> slot table.
 *
 * One array indexed by descriptor, mapped once at the size of the process's
 * hard descriptor limit (capped): untouched pages cost nothing, and the array
 * never moves.  Untracked descriptors -- every descriptor of a process that
 * reads no dataset -- cost one comparison against fd_table_capacity, which
 * stays 0 until the first data file opens, and is 0 again once the process
 * freezes for its teardown (freeze.c).
 *
 * Threads: a wrapper takes a reference on the slot it works on
 * (fd_table_acquire), so a close() of the same number on another thread
 * cannot free the slot under it.  Loading an entry and taking its
 * reference must be one step against the removal of that entry, or the
 * slot could be freed between the two: both happen under a lock, one of
 * FD_TABLE_STRIPES chosen by the descriptor number, so that threads working
 * on different descriptors do not meet, and the lock is held for a few
 * instructions only (never across a read).  The global lock only guards
 * the creation of the array. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "fork_locks.h"
#include "real_functions.h"
#include "shim.h"

#define FD_TABLE_MAX_CAPACITY (1u << 20)
#define FD_TABLE_STRIPES 64

struct fd_slot **fd_table;
/* The bound the wrappers' fast path compares with: the table's size, or 0
 * once frozen (freeze.c). */
unsigned fd_table_capacity;
/* The table's size (under fd_table_lock once set). */
static unsigned fd_table_size;
static bool fd_table_frozen;    /* under fd_table_lock */
static pthread_mutex_t fd_table_lock = PTHREAD_MUTEX_INITIALIZER;

/* One cache line each, so that two stripes never share one. */
static struct fd_table_stripe {
    pthread_mutex_t lock;
    char padding[64 - sizeof(pthread_mutex_t) % 64];
} fd_table_stripes[FD_TABLE_STRIPES] = {
    [0 ... FD_TABLE_STRIPES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER},
};

static pthread_mutex_t *fd_table_stripe_of(int fd)
{
    return &fd_table_stripes[(unsigned)fd % FD_TABLE_STRIPES].lock;
}

void fd_table_fork_prepare(void)
{
    fork_lock_before(&fd_table_lock);
    for (unsigned i = 0; i < FD_TABLE_STRIPES; i++)
        fork_lock_before(&fd_table_stripes[i].lock);
}

void fd_table_fork_parent(void)
{
    for (unsigned i = FD_TABLE_STRIPES; i-- > 0;)
        fork_lock_after_in_parent(&fd_table_stripes[i].lock);
    fork_lock_after_in_parent(&fd_table_lock);
}

void fd_table_fork_child(void)
{
    fork_lock_after_in_child(&fd_table_lock);
    for (unsigned i = 0; i < FD_TABLE_STRIPES; i++)
        fork_lock_after_in_child(&fd_table_stripes[i].lock);
}

static int fd_table_create_locked(void)
{
    if (fd_table != NULL)
        return 0;
    struct rlimit limit;
    rlim_t capacity = 65536;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_max != RLIM_INFINITY &&
        limit.rlim_max > capacity)
        capacity = limit.rlim_max;
    if (capacity > FD_TABLE_MAX_CAPACITY)
        capacity = FD_TABLE_MAX_CAPACITY;
    void *table = REAL(mmap)(NULL, (size_t)capacity * sizeof(struct fd_slot *),
                             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED)
        return -1;
    __atomic_store_n(&fd_table, table, __ATOMIC_RELEASE);
    fd_table_size = (unsigned)capacity;
    if (!fd_table_frozen)
        __atomic_store_n(&fd_table_capacity, (unsigned)capacity, __ATOMIC_RELEASE);
    return 0;
}

void fd_table_freeze(void)
{
    pthread_mutex_lock(&fd_table_lock);
    fd_table_frozen = true;
    __atomic_store_n(&fd_table_capacity, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fd_table_lock);
}

void fd_slot_release(struct fd_slot *slot)
{
    if (slot == NULL)
        return;
    if (__atomic_sub_fetch(&slot->references, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    if (slot->kind == FD_SLOT_VIEW)
        view_cursor_close(&slot->cursor);
    free(slot->checkpoint_path);
    free(slot);
}

struct fd_slot *fd_table_acquire_tracked(int fd)
{
    pthread_mutex_t *stripe = fd_table_stripe_of(fd);
    pthread_mutex_lock(stripe);
    struct fd_slot *slot = __atomic_load_n(&fd_table[fd], __ATOMIC_RELAXED);
    if (slot != NULL)
        __atomic_add_fetch(&slot->references, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(stripe);
    return slot;
}

int fd_table_install(int fd, struct fd_slot *slot)
{
    pthread_mutex_lock(&fd_table_lock);
    int status = fd_table_create_locked();
    unsigned size = fd_table_size;
    pthread_mutex_unlock(&fd_table_lock);
    /* (the table's size, not the fast path's bound: an open that was under
     * way when the process froze still succeeds) */
    if (status != 0 || fd < 0 || (unsigned)fd >= size) {
        errno = EMFILE;
        return -1;
    }
    pthread_mutex_t *stripe = fd_table_stripe_of(fd);
    pthread_mutex_lock(stripe);
    __atomic_add_fetch(&slot->references, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&slot->descriptors, 1, __ATOMIC_RELAXED);
    struct fd_slot *previous = fd_table[fd];
    if (previous != NULL)
        __atomic_sub_fetch(&previous->descriptors, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&fd_table[fd], slot, __ATOMIC_RELEASE);
    pthread_mutex_unlock(stripe);
    fd_slot_release(previous);
    return 0;
}

/* Caller holds fd's stripe. */
static struct fd_slot *fd_table_remove_locked(int fd, bool *last_descriptor)
{
    struct fd_slot *slot = fd_table[fd];
    bool last = false;
    if (slot != NULL) {
        last = __atomic_sub_fetch(&slot->descriptors, 1, __ATOMIC_RELAXED) == 0;
        __atomic_store_n(&fd_table[fd], NULL, __ATOMIC_RELEASE);
    }
    if (last_descriptor != NULL)
        *last_descriptor = last;
    return slot;
}

struct fd_slot *fd_table_remove(int fd, bool *last_descriptor)
{
    if (last_descriptor != NULL)
        *last_descriptor = false;
    if (!fd_table_tracked(fd))
        return NULL;
    pthread_mutex_t *stripe = fd_table_stripe_of(fd);
    pthread_mutex_lock(stripe);
    struct fd_slot *slot = fd_table_remove_locked(fd, last_descriptor);
    pthread_mutex_unlock(stripe);
    return slot;
}

int fd_table_close(int fd, int (*real_close)(int), struct fd_slot **removed,
                   bool *last_descriptor)
{
    *removed = NULL;
    if (last_descriptor != NULL)
        *last_descriptor = false;
    if (!fd_table_tracked(fd))
        return real_close(fd);
    pthread_mutex_t *stripe = fd_table_stripe_of(fd);
    pthread_mutex_lock(stripe);
    *removed = fd_table_remove_locked(fd, last_descriptor);
    int result = real_close(fd);
    int saved = errno;
    pthread_mutex_unlock(stripe);
    errno = saved;
    return result;
}

void fd_table_share(int source, int target)
{
    if (source == target)
        return;
    struct fd_slot *slot = fd_table_acquire(source);
    if (slot != NULL) {
        fd_table_install(target, slot);
        fd_slot_release(slot);
        return;
    }
    /* dup2 onto a tracked descriptor replaces it with an untracked one */
    fd_slot_release(fd_table_remove(target, NULL));
}

struct fd_slot *fd_slot_new_view(struct dataset_file *file)
{
    struct fd_slot *slot = calloc(1, sizeof *slot);
    if (slot == NULL)
        return NULL;
    slot->kind = FD_SLOT_VIEW;
    view_cursor_open(&slot->cursor, file);
    return slot;
}

struct fd_slot *fd_slot_new_checkpoint_writer(const char *absolute_path,
                                              const struct file_identity *file)
{
    struct fd_slot *slot = calloc(1, sizeof *slot);
    if (slot == NULL)
        return NULL;
    slot->kind = FD_SLOT_CHECKPOINT_WRITER;
    slot->checkpoint_file = *file;
    slot->checkpoint_path = strdup(absolute_path);
    if (slot->checkpoint_path == NULL) {
        free(slot);
        return NULL;
    }
    return slot;
}

struct fd_slot *fd_slot_new_internal(struct dataset_file *file)
{
    struct fd_slot *slot = calloc(1, sizeof *slot);
    if (slot == NULL)
        return NULL;
    slot->kind = FD_SLOT_INTERNAL;
    slot->file = file;
    return slot;
}

void shim_relocate_internal_fd(int fd, int above)
{
    struct fd_slot *slot = fd_table_acquire(fd);
    if (slot == NULL || slot->kind != FD_SLOT_INTERNAL) {
        fd_slot_release(slot);
        return;
    }
    struct dataset_file *file = slot->file;
    fd_slot_release(slot);
    /* Only above the range: a reopen could land inside it again.  When
     * nothing above is free, the file copies from its mapping from now on. */
    int moved = above >= 0 ? REAL(fcntl)(fd, F_DUPFD_CLOEXEC, above + 1) : -1;
    dataset_file_lock(file);
    dataset_view_set_source_fd(file, moved);   /* -1: copies fall back to the mapping */
    dataset_file_unlock(file);
    if (moved >= 0) {
        struct fd_slot *relocated = fd_slot_new_internal(file);
        if (relocated == NULL || fd_table_install(moved, relocated) != 0)
            free(relocated);
    }
    fd_slot_release(fd_table_remove(fd, NULL));
}
