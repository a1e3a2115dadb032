/* shim.h - shared state of the preloaded layer.
 *
 * The shim holds no policy: it maps descriptors and streams to runtime
 * objects, and translates each interposed call into runtime calls.  What a
 * wrapper may assume:
 *   - shim_guarded(): the shim itself is running on this thread; every
 *     wrapper then passes straight through to the real function;
 *   - shim_paths_active(): this process virtualizes data or binds
 *     checkpoints (configuration parsed, not disabled, target matched),
 *     and is not frozen for its teardown (freeze.c);
 *   - fd_table_acquire(fd): the descriptor's slot with a reference held for
 *     the duration of the call, NULL for untracked ones. */
#ifndef ADAPTSHIM_SHIM_H
#define ADAPTSHIM_SHIM_H

#include <stdbool.h>
#include <stdio.h>

#include "session.h"
#include "view_cursor.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_LIKELY(condition) __builtin_expect(!!(condition), 1)
#define SHIM_UNLIKELY(condition) __builtin_expect(!!(condition), 0)

/* --- recursion guard ------------------------------------------------------- */
extern __thread int shim_guard_depth;
static inline void shim_guard_enter(void) { shim_guard_depth++; }
static inline void shim_guard_leave(void) { shim_guard_depth--; }
static inline bool shim_guarded(void) { return shim_guard_depth > 0; }

/* --- process state ---------------------------------------------------------- */
/* FROZEN: the process is tearing down (after MPI_Finalize, or once the
 * library's destructor ran): every wrapper passes through (freeze.c). */
enum shim_state {
    SHIM_STATE_UNINITIALIZED = 0,
    SHIM_STATE_INACTIVE,
    SHIM_STATE_ACTIVE,
    SHIM_STATE_FROZEN,
};
extern int shim_state;
extern struct runtime_session shim_session;

/* Makes the shim a pass-through for good (freeze.c): at MPI_Finalize's
 * return and in the library's destructor; `why` is logged. */
void shim_freeze(const char *why);
/* io_mmap.c's part of it: the view mappings are forgotten for good. */
void shim_mappings_freeze(void);
static inline bool shim_frozen(void)
{
    return __atomic_load_n(&shim_state, __ATOMIC_ACQUIRE) == SHIM_STATE_FROZEN;
}

/* Parses the configuration once (lazily: wrappers may run before any
 * constructor).  Leaves shim_state INACTIVE or ACTIVE. */
void shim_ensure_initialized(void);
/* True when the configuration was parsed and the shim is not disabled or
 * excluded by ADAPTDL_TARGET (whether or not it virtualizes any file). */
bool shim_configured(void);

/* Writes "adaptshim: MESSAGE" as one line on stderr and exits with status 2
 * at once (_exit: nothing of the trainer runs after it). */
void shim_exit_with_message(const char *message) __attribute__((noreturn));

/* The one-line configuration error found at initialization, or NULL. */
const char *shim_configuration_error(void);

static inline bool shim_paths_active(void)
{
    int state = __atomic_load_n(&shim_state, __ATOMIC_ACQUIRE);
    if (SHIM_LIKELY(state == SHIM_STATE_ACTIVE))
        return !shim_guarded();
    if (state == SHIM_STATE_UNINITIALIZED && !shim_guarded())
        shim_ensure_initialized();
    return __atomic_load_n(&shim_state, __ATOMIC_ACQUIRE) == SHIM_STATE_ACTIVE &&
           !shim_guarded();
}

/* A vfork child shares the parent's memory, so its close() before exec must
 * not touch the parent's tables: wrappers that change them check this first.
 * (fork children have their own copy and refresh the pid in an atfork
 * handler; vfork runs no handler.) */
bool shim_in_vfork_child(void);
/* In a forked child (fork_safety.c): the process id that
 * shim_in_vfork_child compares with becomes the child's. */
void shim_note_process_after_fork(void);
/* True in a process forked from the one that started the trainer (a
 * DataLoader worker): it writes no job record, metrics exit event or
 * summary of its own (adaptshim(7) "After fork").  A process that execs starts afresh. */
bool shim_in_forked_child(void);

/* --- descriptors ------------------------------------------------------------ */
/* VIEW: a trainer's descriptor on a data view.  CHECKPOINT_WRITER: a
 * trainer's checkpoint open for writing.  INTERNAL: the shim's own read-only
 * descriptor of a data file, which the trainer never opened and must not
 * disturb (see io_fd.c). */
enum fd_slot_kind { FD_SLOT_VIEW = 1, FD_SLOT_CHECKPOINT_WRITER = 2, FD_SLOT_INTERNAL = 3 };

/* Shared by descriptors that dup'd each other, as they share a file offset.
 *
 * Lifetime: `references` counts every holder of the slot: each table entry
 * (each descriptor number, `descriptors` of them), each stdio stream built
 * on it, and each call in progress that took it with fd_table_acquire.  So
 * a close() on one thread removes the slot from the table while a read on
 * another still uses it, and the last fd_slot_release frees it. */
struct fd_slot {
    enum fd_slot_kind kind;
    int references;
    int descriptors;                 /* table entries holding it */
    struct view_cursor cursor;       /* FD_SLOT_VIEW */
    char *checkpoint_path;           /* FD_SLOT_CHECKPOINT_WRITER: absolute path */
    struct file_identity checkpoint_file; /* FD_SLOT_CHECKPOINT_WRITER: the file opened */
    struct dataset_file *file;       /* FD_SLOT_INTERNAL */
};

extern struct fd_slot **fd_table;
extern unsigned fd_table_capacity;

/* True when fd has a slot now (another thread may remove it at once): the
 * fast path of every wrapper.  Untracked descriptors of a process that
 * opened no data file cost one comparison. */
static inline bool fd_table_tracked(int fd)
{
    unsigned capacity = __atomic_load_n(&fd_table_capacity, __ATOMIC_ACQUIRE);
    if (SHIM_LIKELY((unsigned)fd >= capacity))
        return false;
    return __atomic_load_n(&fd_table[fd], __ATOMIC_RELAXED) != NULL;
}

struct fd_slot *fd_table_acquire_tracked(int fd);
void fd_slot_release(struct fd_slot *slot);

/* The descriptor's slot with a reference taken (release it with
 * fd_slot_release when the call is done), or NULL for untracked ones. */
static inline struct fd_slot *fd_table_acquire(int fd)
{
    if (SHIM_LIKELY(!fd_table_tracked(fd)))
        return NULL;
    return fd_table_acquire_tracked(fd);
}

/* The view slot of fd with a reference taken (release it with
 * fd_slot_release when the call is done); NULL when fd is not a view of a
 * data file, or the shim itself is reading.  Costs one comparison for a
 * descriptor the shim does not track: every read, stat, mmap and copy
 * wrapper starts here. */
static inline struct fd_slot *shim_view_slot_acquire(int fd)
{
    if (SHIM_LIKELY(!fd_table_tracked(fd)) || shim_guarded())
        return NULL;
    struct fd_slot *slot = fd_table_acquire(fd);
    if (slot != NULL && slot->kind != FD_SLOT_VIEW) {
        fd_slot_release(slot);
        return NULL;
    }
    return slot;
}

/* Installs slot at fd (taking one reference); any previous slot there is
 * released.  -1 when fd is beyond the table. */
int fd_table_install(int fd, struct fd_slot *slot);
/* Removes fd's slot and returns it with the table's reference (the caller
 * releases it), or NULL.  *last_descriptor (may be NULL): no other
 * descriptor holds the slot any more. */
struct fd_slot *fd_table_remove(int fd, bool *last_descriptor);
/* close(2) of fd and the removal of its slot as one step for the other
 * threads: none of them finds the slot gone while the descriptor still
 * reads the physical file, nor a slot that a concurrent open installed in
 * the freed number removed.  Returns close's result; *removed gets the
 * slot as fd_table_remove gives it. */
int fd_table_close(int fd, int (*real_close)(int), struct fd_slot **removed,
                   bool *last_descriptor);
/* Makes `target` share source's slot (dup semantics). */
void fd_table_share(int source, int target);
void fd_slot_release(struct fd_slot *slot);
/* Freezing (freeze.c): the fast path's bound becomes 0, so that every
 * descriptor is untracked to the wrappers from now on; the table itself
 * stays as it is for calls already past their fast path. */
void fd_table_freeze(void);
/* Around fork (shim/fork_safety.c): the table's locks are taken before,
 * given back in the parent, made anew in the child. */
void fd_table_fork_prepare(void);
void fd_table_fork_parent(void);
void fd_table_fork_child(void);
struct fd_slot *fd_slot_new_view(struct dataset_file *file);
struct fd_slot *fd_slot_new_checkpoint_writer(const char *absolute_path,
                                              const struct file_identity *file);
struct fd_slot *fd_slot_new_internal(struct dataset_file *file);
/* The kernel closed fd where no wrapper saw it (glibc's fclose or freopen of
 * a stream), or hands its number out again (a fresh open, dup): forgets
 * whatever the table remembers there, without committing anything.  The
 * shim's own descriptor of a data file found there is gone too: that file
 * copies from its mapping from then on. */
void shim_forget_descriptor(int fd);
/* Whether closing fd, whose slot is a checkpoint writer, commits that
 * checkpoint now: its last descriptor, closed by the trainer, still on the
 * file it was opened on (session_close_commits). */
bool shim_close_commits(int fd, const struct fd_slot *slot, bool last_descriptor);
/* Moves the shim's internal descriptor at fd out of the way of a trainer
 * operation on that number (to a descriptor above `above`, or reopened),
 * updating the file's source_fd. */
void shim_relocate_internal_fd(int fd, int above);

/* --- paths -------------------------------------------------------------------- */
/* Absolute, lexically normalized form of path relative to dirfd. -1 if too long. */
int shim_absolute_path(int dirfd, const char *path, char *out, size_t out_size);

/* The dataset_file for a path that matches an ADAPTDL_DATA entry, creating
 * and registering it on first use.  NULL with *matched false when the path
 * is not a data file; NULL with *matched true and errno set on failure
 * (EINVAL for a file whose geometry is wrong, after an error log line). */
struct dataset_file *shim_dataset_for_path(int dirfd, const char *path, bool *matched);

/* Called after every successful open of a path: starts tracking data views
 * and checkpoint writers, and restores on a checkpoint read-open.  Returns
 * fd, or -1 with errno (the descriptor is then closed). */
int shim_track_opened(int fd, int dirfd, const char *path, int flags);

/* A checkpoint file was committed (closed after writing, or is the source of
 * a rename onto a checkpoint name): write the bound snapshot.  0, or -1 with
 * errno when the snapshot could not be written: the wrapper then fails the
 * trainer's rename, close or fclose with that errno (adaptshim(7) "Full disks and hostile state
 * files"). */
int shim_commit_checkpoint_path(const char *content_path, const char *checkpoint_path);

#endif
