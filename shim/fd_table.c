/* fd_table.c - descriptor -> slot table.
 *
 * One array indexed by descriptor, mapped once at the size of the process's
 * hard descriptor limit (capped): untouched pages cost nothing, and the array
 * never moves, so lookups need no lock.  Untracked descriptors -- every
 * descriptor of a process that reads no dataset -- cost one comparison
 * against fd_table_capacity, which stays 0 until the first data file opens. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "real_functions.h"
#include "shim.h"

#define FD_TABLE_MAX_CAPACITY (1u << 20)

struct fd_slot **fd_table;
unsigned fd_table_capacity;
static pthread_mutex_t fd_table_lock = PTHREAD_MUTEX_INITIALIZER;

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
    fd_table = table;
    __atomic_store_n(&fd_table_capacity, (unsigned)capacity, __ATOMIC_RELEASE);
    return 0;
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

int fd_table_install(int fd, struct fd_slot *slot)
{
    pthread_mutex_lock(&fd_table_lock);
    if (fd_table_create_locked() != 0 || fd < 0 || (unsigned)fd >= fd_table_capacity) {
        pthread_mutex_unlock(&fd_table_lock);
        errno = EMFILE;
        return -1;
    }
    __atomic_add_fetch(&slot->references, 1, __ATOMIC_ACQ_REL);
    struct fd_slot *previous = fd_table[fd];
    __atomic_store_n(&fd_table[fd], slot, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fd_table_lock);
    fd_slot_release(previous);
    return 0;
}

struct fd_slot *fd_table_remove(int fd)
{
    if ((unsigned)fd >= fd_table_capacity)
        return NULL;
    pthread_mutex_lock(&fd_table_lock);
    struct fd_slot *slot = fd_table[fd];
    __atomic_store_n(&fd_table[fd], NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fd_table_lock);
    return slot;
}

void fd_table_share(int source, int target)
{
    if (source == target)
        return;
    struct fd_slot *slot = fd_table_lookup(source);
    if (slot != NULL) {
        fd_table_install(target, slot);
        return;
    }
    /* dup2 onto a tracked descriptor replaces it with an untracked one */
    fd_slot_release(fd_table_remove(target));
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
    struct fd_slot *slot = fd_table_lookup(fd);
    if (slot == NULL || slot->kind != FD_SLOT_INTERNAL)
        return;
    struct dataset_file *file = slot->file;
    /* Only above the range: a reopen could land inside it again.  When
     * nothing above is free, the file copies from its mapping from now on. */
    int moved = above >= 0 ? REAL(fcntl)(fd, F_DUPFD_CLOEXEC, above + 1) : -1;
    dataset_file_lock(file);
    file->source_fd = moved;   /* -1: copies fall back to the mapping */
    dataset_file_unlock(file);
    if (moved >= 0) {
        struct fd_slot *relocated = fd_slot_new_internal(file);
        if (relocated == NULL || fd_table_install(moved, relocated) != 0)
            free(relocated);
    }
    fd_slot_release(fd_table_remove(fd));
}
