/* view_mapping.h - what an mmap(2) of a data file gets (adaptshim(7) "Mappings").
 *
 * A mapping must show the same view as read(2).  The policy, decided here
 * and applied by the thin wrapper in shim/io_mmap.c:
 *   - a writable mapping (PROT_WRITE, shared or private) is refused with
 *     EACCES: a data file is the trainer's input, never its output;
 *   - a read-only mapping of a view that is byte-for-byte the file (a
 *     transparent view: shard=0, shuffle=0, header unchanged) maps the file
 *     itself, with the caller's flags;
 *   - any other read-only mapping, MAP_PRIVATE or MAP_SHARED alike, is
 *     served from anonymous memory filled with the view's bytes.  Shared
 *     read-only mappings count as reads because numpy's memmap(mode='r')
 *     and np.load(mmap_mode='r') make exactly those (Python's mmap module
 *     maps ACCESS_READ as PROT_READ, MAP_SHARED), and without PROT_WRITE
 *     nothing the trainer does through them can reach the file.
 *
 * Delivery: a mapping hands the trainer every byte at once, but the shim
 * cannot see which records the trainer then touches.  So a mapping delivers
 * no record (a snapshot taken meanwhile binds the pass's start: a resume
 * repeats records, never loses one), yet it begins its pass, as a read of a
 * payload byte would, so that the pass ends by the usual rules (a reopen of
 * the file, a read returning 0).  The mapping shows the pass current when it
 * was made; a new mapping after that pass ended shows the next one.
 *
 * Also here: the small table of anonymous mappings the shim made, so that
 * munmap of them stays plain munmap and mremap of them can be refused. */
#ifndef ADAPTSHIM_VIEW_MAPPING_H
#define ADAPTSHIM_VIEW_MAPPING_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset_view.h"

enum view_mapping_kind {
    VIEW_MAPPING_PHYSICAL = 1,   /* map the file itself: the view is the file */
    VIEW_MAPPING_FROM_VIEW,      /* anonymous memory holding the view's bytes */
    VIEW_MAPPING_REFUSED,        /* fail with plan.error */
};

/* The trainer's mmap arguments that matter to the policy. */
struct view_mapping_request {
    int64_t offset;              /* file offset of the mapping (must be page aligned) */
    uint64_t length;             /* bytes asked for */
    int protection;              /* PROT_* */
    int flags;                   /* MAP_* */
};

struct view_mapping_plan {
    enum view_mapping_kind kind;
    int error;                   /* VIEW_MAPPING_REFUSED: errno for the caller */
    const char *reason;          /* VIEW_MAPPING_REFUSED: why, for the log line */
    uint64_t mapped_length;      /* length rounded up to whole pages */
    uint64_t filled_length;      /* view bytes the mapping holds; the rest is zero */
    uint64_t resident_bytes;     /* filled_length rounded up to pages: its memory cost */
    int anonymous_flags;         /* FROM_VIEW: flags of the anonymous mapping */
};

/* True when the current view of `file` is byte-for-byte the physical file:
 * every record once, in file order, on one replica, from index 0, with the
 * header as the file has it (a rewritten count that comes out unchanged
 * still counts as unchanged).  Caller holds file->lock. */
bool view_mapping_view_is_file(const struct dataset_file *file);

/* Flags of the anonymous mapping that replaces a trainer's mapping: private
 * and anonymous, keeping only the placement and memory flags that still mean
 * something without a file (MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_NORESERVE,
 * MAP_LOCKED, MAP_32BIT). */
int view_mapping_anonymous_flags(int flags);

/* The pure policy: which kind of mapping a request gets and its page
 * arithmetic, given whether the view is the file, the view's size and the
 * page size.  Arguments the kernel would reject (length 0, an offset that
 * is negative or not page aligned, a length that overflows) are refused
 * with EINVAL, as the kernel would. */
void view_mapping_plan_request(const struct view_mapping_request *request, bool view_is_file,
                               uint64_t view_size, uint64_t page_size,
                               struct view_mapping_plan *plan);

/* The same for the current view of `file` (takes the file's lock). */
void view_mapping_plan_for_file(struct dataset_file *file,
                                const struct view_mapping_request *request,
                                uint64_t page_size, struct view_mapping_plan *plan);

/* Copies the current view's bytes [offset, offset + capacity) into
 * destination, stopping at the view's end (the caller's anonymous memory is
 * zero beyond, as a file mapping is past EOF within its last page), and
 * begins the pass (view_mapping_note_mapped).  Returns the bytes copied and
 * the pass they belong to.  Takes file->lock. */
uint64_t view_mapping_fill(struct dataset_file *file, uint64_t offset, void *destination,
                           uint64_t capacity, uint64_t *pass);

/* A mapping of the current view was made (from memory or of the file
 * itself): begins the pass without delivering a record, telling the pass
 * observer ("mapped").  Takes file->lock.  A file mapped anew again and
 * again while its view is not the file itself is most likely a loader that
 * samples random windows of a memmap (nanoGPT's get_batch maps the file
 * for every batch): its windows are no records the shim can shard or
 * shuffle, and each mapping copies the whole view; at the
 * VIEW_MAPPING_WINDOW_SIGN-th mapping one warn line says so and names
 * shard=0:shuffle=0 (adaptshim(7) "Mappings", limits).  A trainer that maps once per epoch says
 * it only after that many epochs in one process, and the line says "if". */
#define VIEW_MAPPING_WINDOW_SIGN 16
void view_mapping_note_mapped(struct dataset_file *file);

/* --- memory ----------------------------------------------------------------- */
/* MemAvailable of a /proc/meminfo text, in bytes.  -1 when absent. */
int view_mapping_parse_meminfo(const char *text, uint64_t *available_bytes);
/* MemAvailable of this machine (reads /proc/meminfo through runtime_sysio).
 * -1 when it cannot be read: the caller then relies on the anonymous mmap
 * failing. */
int view_mapping_available_memory(uint64_t *available_bytes);

/* --- the shim's anonymous mappings ------------------------------------------ */
#define VIEW_MAPPING_TABLE_CAPACITY 1024

struct view_mapping_entry {
    uintptr_t start;
    uint64_t length;             /* page-rounded */
    const struct dataset_file *file;
    uint64_t pass;
};

struct view_mapping_table {
    pthread_mutex_t lock;
    unsigned count;              /* read without the lock by the munmap fast path */
    bool frozen;                 /* view_mapping_table_freeze: remembers nothing more */
    struct view_mapping_entry entries[VIEW_MAPPING_TABLE_CAPACITY];
};

#define VIEW_MAPPING_TABLE_INITIALIZER { .lock = PTHREAD_MUTEX_INITIALIZER }

/* True when the table holds no mapping (one atomic load: the munmap and
 * mremap wrappers' fast path). */
static inline bool view_mapping_table_empty(struct view_mapping_table *table)
{
    return __atomic_load_n(&table->count, __ATOMIC_ACQUIRE) == 0;
}

/* Forgets every mapping and remembers none from now on, so that the table
 * reads empty for good: for a process in its teardown, whose munmap and
 * mremap go straight to the kernel. */
void view_mapping_table_freeze(struct view_mapping_table *table);
/* Remembers a mapping (not once frozen: 0 then, nothing to recognize).  -1
 * when the table is full (the mapping still works; only an mremap of it
 * goes unrecognized). */
int view_mapping_table_add(struct view_mapping_table *table, const void *start,
                           uint64_t length, const struct dataset_file *file, uint64_t pass);
/* Copies into *found the first remembered mapping that overlaps
 * [start, start + length).  False when none does. */
bool view_mapping_table_find_overlap(struct view_mapping_table *table, const void *start,
                                     uint64_t length, struct view_mapping_entry *found);
/* [start, start + length) was unmapped: forgets the mappings inside it and
 * trims those it cuts at one end (a hole in the middle keeps the entry
 * whole, still refusing mremap of what remains).  Returns the bytes of
 * remembered mappings that were unmapped. */
uint64_t view_mapping_table_forget_range(struct view_mapping_table *table, const void *start,
                                         uint64_t length);

#endif
