/* dataset_view.h - one data file and the view of its current pass
 * (adaptshim(7) "WHAT THE TRAINER SEES").
 *
 * A dataset_file is shared by every descriptor and stream the trainer opens
 * on the same physical file: it maps the file once, knows its records (fixed
 * size, or a line index built once), owns the file's pass tracker, and
 * materializes nothing per pass but the permutation key (plus, in `lines`
 * mode, the prefix sums of the view's line lengths).
 *
 * View layout: the header (verbatim, except a rewritten count field), then
 * the L records perm[s + r + j*K] (with AdaptDL's padding).  A pass of
 * length M > N (a statistical epoch, adaptshim(7) "Statistical epochs") reads logical index v as
 * record perm_w[v mod N] of sweep w = v / N, each sweep with its own
 * permutation keyed by (pass, w), as AdaptDL seeds by epoch and wrap count.  All functions
 * here are pure memory operations on the mapping; callers hold the
 * file's lock (dataset_file_lock), except dataset_view_run_copy. */
#ifndef ADAPTSHIM_DATASET_VIEW_H
#define ADAPTSHIM_DATASET_VIEW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "config.h"
#include "delivery_record.h"
#include "delivery_trace.h"
#include "pass_state_arena.h"
#include "pass_tracker.h"
#include "permutation.h"
#include "reader_processes.h"
#include "record_selection.h"

/* Physical indices of the view computed ahead, so that small records cost an
 * array lookup rather than a Feistel evaluation each (adaptshim(7) "Benchmarks"). */
#define VIEW_INDEX_BLOCK 1024

/* Pieces at least this large are copied with pread(2) from source_fd rather
 * than from the mapping: the kernel copies page-cached data faster than a
 * first touch of mapped pages faults it in (adaptshim(7) "Benchmarks", records of 4 KiB and
 * more).  Smaller pieces come from the mapping: no syscall per record. */
#define VIEW_PREAD_MIN_CHUNK 4096

/* How far ahead of the trainer the kernel is asked to read large records. */
#define VIEW_PREFETCH_BYTES (32u << 20)

/* The ways a trainer looks at a view without reading a record from it. */
enum view_sign {
    VIEW_SIGN_NONE,
    VIEW_SIGN_OPEN,               /* it opened the file */
    VIEW_SIGN_PATH_STAT,          /* it asked for the size of the file's path */
    VIEW_SIGN_SIZE_QUESTION,      /* it asked for the size of a descriptor or stream
                                   * it had open (fstat, SEEK_END) */
};

/* A size the trainer was given for a data file: which view it was of. */
struct size_answer {
    bool given;
    uint64_t view_generation;     /* view_generation of that view */
    uint64_t records;             /* its L */
};

/* What every process of a job must agree on about one data file: its pass,
 * which records of the pass's view were delivered, and the lock over them.
 * It lives in anonymous shared memory made when the file is first
 * registered, so processes forked after that (a PyTorch DataLoader's
 * workers) deliver into the same pass (adaptshim(7) "After fork"); the lock is process-shared
 * and robust, so a worker killed while holding it does not stop the others.
 * The storage of `delivery` and `selection` follows this struct in the
 * same mapping. */
struct dataset_pass_state {
    pthread_mutex_t lock;
    struct pass_tracker tracker;
    struct delivery_record delivery;  /* which records of the view were delivered */
    struct record_selection selection; /* the undelivered records a resumed pass serves */
    bool header_read_to_end;      /* a header-only view was read to its end */
    enum view_sign header_only_first_sign; /* how the trainer first looked at a
                                  * header-only view: that sign again ends it */
    bool mapped;                  /* a mapping handed out the whole view */
    uint64_t view_generation;     /* counts the views fixed (passes, restores) */
    struct reader_processes readers; /* processes that delivered records of the view */
    /* The view the trainer last asked the size of, by a size query of its
     * own (a stat of the path, SEEK_END): a loader that keeps a count it
     * took once reads later passes with it (stale_size.h). */
    struct size_answer size_told;
    /* The view any size answer was last about, fstat's included: a loader
     * that sized the file by fstat and then seeks past the view's end
     * counts with it. */
    struct size_answer size_reported;
    bool stale_size_warned;
    /* The most view bytes one read handed out that the trainer had placed
     * itself (a seek then a read, a pread, an fseek then an fread): the read
     * unit of a loader that positions every read.  Kept across passes. */
    uint64_t placed_read_unit;
    /* dataset_view_training_events() when the pass that began last had its
     * first record read: the same count at a reading again from the start
     * means nothing was trained meanwhile */
    uint64_t training_events_at_first_read;
    uint64_t served_again_pass_plus_one; /* the last pass served twice, plus one */
    bool own_sharding_warned;     /* dataset_view_read_one_replica_share said so */
    uint64_t mappings;            /* mappings made of the file, every pass */
    bool window_mappings_warned;  /* view_mapping_note_mapped said so */
};

struct dataset_file {
    char *path;                   /* absolute path */
    const char *basename;         /* points into path */
    const struct data_entry *entry;
    uint64_t device;              /* st_dev, st_ino: identity for lookups */
    uint64_t inode;
    const unsigned char *map;     /* whole file, read-only */
    int source_fd;                /* read-only descriptor of the file, or -1 */
    uint64_t source_fd_changes;   /* counts changes of source_fd (atomic) */
    uint64_t file_size;
    uint64_t header_size;
    uint64_t record_size;         /* 0 in lines mode */
    uint64_t record_count;        /* N */
    uint64_t payload_size;        /* bytes of whole records after the header */
    uint64_t *line_offsets;       /* lines mode: N + 1 offsets into the file */
    uint64_t seed;
    uint32_t replicas;            /* K used for this file (1 when shard=0) */
    uint32_t rank;

    struct dataset_pass_state *shared;
    size_t shared_size;           /* of its own mapping; 0 when in the arena */
    bool pass_state_adopted;      /* another process registered it first */
    unsigned open_cursors;        /* this process's open cursors (atomic) */
    pid_t reader_noted_pid;       /* this process is in shared->readers ... */
    uint64_t reader_noted_generation; /* ... of this view */

    /* the view of the current pass */
    struct record_permutation permutation;      /* of its first sweep (wrap 0) */
    struct record_permutation wrap_permutation; /* of sweep `wrap_cached` > 0 */
    uint64_t wrap_cached;                       /* 0: none */
    uint64_t view_pass_length;    /* M: logical records of the pass (statistical epochs) */
    uint64_t view_pass;
    uint64_t view_start_index;
    uint64_t view_length;         /* L */
    uint64_t view_selected;       /* tracker's `selected` for this view: 0, or
                                   * it serves shared->selection */
    uint64_t view_size;           /* header + payload of the view */
    uint64_t *view_line_prefix;   /* lines mode: L + 1 payload offsets */
    unsigned char *header;        /* header bytes as the view shows them */
    uint64_t view_generation;     /* of shared->view_generation the fields above show */
    uint64_t block_first;         /* first position cached in block_indices */
    uint64_t block_count;
    uint64_t block_indices[VIEW_INDEX_BLOCK];
    uint64_t last_lookup;         /* the last position a miss looked up */
    uint64_t prefetched_until;    /* view positions advised to the kernel */
    bool warned_empty_count_replay; /* the count=-under-replay warning was logged */

    struct dataset_file *next;    /* registry chaining */
    struct dataset_file *next_in_lock_order; /* the registry's chain by identity */
};

/* Takes the file's lock (dataset_pass_state) and brings this process's view
 * up to the shared pass: another process may have ended the pass or
 * restored a position since.  Every function below expects it held. */
void dataset_file_lock(struct dataset_file *file);
void dataset_file_unlock(struct dataset_file *file);
/* Sets the shuffle seed (a restored snapshot's) under the file's lock:
 * readers on other threads plan their copies with it under that lock
 * (view_copy.c).  The view in place keeps the order of its first sweep
 * until it is fixed again; later sweeps and views follow the new seed. */
void dataset_file_set_seed(struct dataset_file *file, uint64_t seed);
/* The lock alone, leaving this process's view as it is (the next
 * dataset_file_lock brings it up to date): for holding every file's lock
 * across a fork, where nothing is read. */
void dataset_file_lock_without_refresh(struct dataset_file *file);

/* Moves the pass state of a file just made by dataset_file_init (device
 * and inode set) into the job's arena, so that every process of the job
 * shares it, including processes forked before this one registered the file.
 * When another process registered the file first, its pass is adopted:
 * pass_state_adopted is set and this process's view is rebuilt from it.
 * -1 with errno when the arena has no room (the file keeps its own state,
 * shared only with processes forked after now). */
int dataset_file_share_pass_state_in_arena(struct dataset_file *file,
                                           struct pass_state_arena *arena);

/* Builds a dataset_file over an existing mapping.  Validates the record
 * geometry (tail=error|drop) and builds the line index.  -1 with a one-line
 * message naming the file, its size, header and record size on failure
 * (the caller reports EINVAL). */
int dataset_file_init(struct dataset_file *file, const struct data_entry *entry,
                      const char *absolute_path, const void *map, uint64_t file_size,
                      uint64_t seed, uint32_t replicas, uint32_t rank,
                      char *error, size_t error_size);
void dataset_file_release(struct dataset_file *file);

/* (Re)builds the view of the tracker's current pass. -1 on allocation failure. */
int dataset_view_fix(struct dataset_file *file);

/* The physical record index at view position `position` (the permutation
 * of its sweep, the replica's shard, the pass's start). */
uint64_t dataset_view_logical_to_physical(struct dataset_file *file, uint64_t position);
/* Lines mode: the view record holding payload offset `payload_offset`, the
 * last j with view_line_prefix[j] <= payload_offset. */
uint64_t dataset_view_line_at(const struct dataset_file *file, uint64_t payload_offset);

/* Copies view bytes [offset, offset + size) into buffer, stopping at the
 * view's end.  Returns the number copied.  Holds the lock throughout; readers
 * use the plan below instead. */
size_t dataset_view_copy(struct dataset_file *file, uint64_t offset, void *buffer,
                         size_t size);

/* --- copies made without the lock (adaptshim(7) "Benchmarks") ----------------------------------
 *
 * Threads reading one file must copy in parallel, so no lock is held across
 * a copy.  The bytes of a view are bytes of the file, at places that depend
 * only on the view, which does not change as long as its generation
 * (view_generation) does not: under the lock a reader plans which file
 * ranges make up the view bytes it wants (dataset_view_plan_copy), releases
 * the lock, copies them from the mapping or with pread from source_fd
 * (dataset_view_run_copy), and takes the lock again to account for them.
 * The mapping lives as long as the process, so a plan stays valid even when
 * the view is replaced meanwhile; the bytes are then those of the view the
 * reader had when it planned.  Only a header that differs from the file's
 * (a rewritten count= field) is copied at planning, under the lock.
 *
 * Fixed-size records are planned as one run of the view with a copy of the
 * view's parameters (its permutation, start, length, sharding), and the
 * copy computes each record's place itself: for small records that index
 * arithmetic is as much work as the copy, and it too runs without the lock.
 * Lines are planned piece by piece (their offsets live in arrays that a new
 * view replaces). */
#define VIEW_COPY_PLAN_PIECES 256
/* A run of fixed-size records planned at once: at most this many records
 * and VIEW_COPY_RUN_BYTES bytes (half the prefetch window, so that each
 * planned run keeps the kernel's read-ahead going). */
#define VIEW_COPY_RUN_RECORDS 4096
#define VIEW_COPY_RUN_BYTES (VIEW_PREFETCH_BYTES / 2)

struct view_copy_piece {
    uint64_t file_offset;
    uint64_t length;
};

/* What a copy needs to know of a view of fixed-size records. */
struct view_record_layout {
    uint64_t header_size;
    uint64_t record_size;
    uint64_t record_count;        /* N */
    uint64_t pass;
    uint64_t pass_length;         /* M */
    uint64_t start_index;
    uint32_t replicas;
    uint32_t rank;
    /* the resumed pass's records (record_selection.h), or NULL: fixed
     * while no trainer read has begun, and a restore comes before those */
    const struct record_selection *selection;
    uint64_t selected;            /* indices the selected view holds */
    bool shuffle;
    uint64_t seed;
    const char *basename;         /* the file's, lives as long as it does */
    struct record_permutation permutation;  /* of sweep 0 */
};

struct view_copy_plan {
    uint64_t bytes;               /* view bytes planned, everything included */
    uint64_t direct_bytes;        /* header bytes already copied at planning */
    size_t piece_count;           /* their bytes follow the direct ones */
    uint64_t run_payload_offset;  /* then run_bytes of records, from this payload offset */
    uint64_t run_bytes;
    int source_fd;
    uint64_t source_fd_changes;   /* of source_fd when planned */
    struct view_record_layout layout;   /* when run_bytes > 0 */
    struct view_copy_piece pieces[VIEW_COPY_PLAN_PIECES];
};

/* Plans view bytes [offset, offset + size), stopping at the view's end or
 * when a batch is full; their destination starts `position` bytes into the
 * vectors (where the direct bytes go at once).  Lock held.  Returns
 * plan->bytes (0 at or past the view's end). */
uint64_t dataset_view_plan_copy(struct dataset_file *file, uint64_t offset, uint64_t size,
                                const struct iovec *vector, int count, uint64_t position,
                                struct view_copy_plan *plan);
/* Copies what was planned to its destination (after the direct bytes); no
 * lock needed.  A piece read with pread while source_fd changed (the
 * trainer's dup2 or close_range over the shim's descriptor, which moves it
 * first: dataset_view_set_source_fd) may hold another file's bytes: then
 * everything is copied again from the mapping. */
void dataset_view_run_copy(const struct dataset_file *file, const struct view_copy_plan *plan,
                           const struct iovec *vector, int count, uint64_t position);
/* Changes source_fd (-1: copy from the mapping only).  Lock held; called
 * before the old descriptor may close. */
void dataset_view_set_source_fd(struct dataset_file *file, int fd);

/* Number of whole records of the view that lie before `offset`. */
uint64_t dataset_view_records_before(const struct dataset_file *file, uint64_t offset);

/* A read handed view bytes [offset, offset + count) to the trainer: every
 * record whose last byte lies there is delivered (adaptshim(7) "Delivery").  Header bytes
 * deliver nothing. */
void dataset_view_note_read(struct dataset_file *file, uint64_t offset, uint64_t count);

/* A read the trainer placed itself handed out view bytes [offset, offset +
 * count).  When its payload part ends inside a record (llm.c's B*T+1
 * tokens), the loader's read unit is at least that part: a loader whose
 * placed reads are whole records (a batch of them, a short last batch) has
 * none, and is never cut short. */
void dataset_view_note_placed_read(struct dataset_file *file, uint64_t offset, uint64_t count);

/* True when records of the view remain undelivered, but fewer bytes of them
 * than one read of a loader that places its reads: llm.c reads B*T+1
 * tokens per batch and moves by B*T, so it counts (ntok - 1) / (B*T)
 * batches and never reads the last record of its view.  Such a pass is
 * over for the loader: its end rules (a reopen, a rewind, a size question,
 * a checkpoint commit) treat it as covered, so that its next epoch gets a
 * new pass and a checkpoint taken after its last batch binds the next pass
 * rather than a view of that one record.  Fixed-size records only; a
 * loader that reads on (sequential reads, placed reads of whole records,
 * whose last batch may be short) is never cut short. */
bool dataset_view_rest_is_less_than_a_placed_read(const struct dataset_file *file);

/* A trainer that shards the data itself (PyTorch's DistributedSampler,
 * llm.c's process_rank/num_processes, `index % world_size`) under the
 * shim's sharding reads only 1/K of its view each epoch.  True when the
 * trainer looks at the file again (a reopen, a stat of the path, a size
 * question) with that share of the view delivered, give or take one record
 * (K >= 2 replicas, the view at least 2K records), and this was not said of
 * the file yet: the caller says it once, with the setting that fixes it
 * (shard=0).  Sets the flag that says it was said. */
bool dataset_view_read_one_replica_share(struct dataset_file *file);

/* True when every record of the view was delivered and the processes that
 * read it are done with it, although no read returned 0: the trainer's loop
 * over this pass is over.  When worker processes (other than the caller)
 * delivered records, they must all have exited: a PyTorch DataLoader joins
 * its workers only once its iterator is exhausted.  When only the caller
 * delivered them, it must have closed every descriptor and stream it had
 * on the file (llm.c's fclose at the end of an epoch, a Dataset's close).
 * A mapping never finishes a pass this way (reader_processes.h). */
bool dataset_view_readers_finished_pass(const struct dataset_file *file);

/* How many records a snapshot counts as not consumed yet beyond the
 * stdio buffers: the entry's lookahead=, or 0 once the readers finished
 * the pass (no batch can be in flight any more).  More than the current
 * pass delivered reaches back into the previous one (a loader that read to
 * the end still holds its last records: pass_tracker_position), but only
 * while this process has the file open: once it closed it since, nothing of
 * the previous pass can be in flight, and the count stops at what the
 * current pass delivered. */
uint64_t dataset_view_records_in_flight(const struct dataset_file *file);

/* Ends the pass when its readers finished it, so that a snapshot taken
 * between the trainer's loops binds the next pass at index 0 (adaptshim(7) "Passes",
 * rule 4: as once a read had returned 0) rather than a complete pass,
 * which a trainer that restores "epoch e+1" would see as an empty epoch.
 * Returns whether it ended the pass. */
bool dataset_view_end_pass_finished_by_readers(struct dataset_file *file);

/* Every record of the current view was delivered; for a header-only view,
 * it was read to its end; or a mapping handed out the whole view.  Only
 * then do a rewind and a reopen end the pass. */
bool dataset_view_covered(const struct dataset_file *file);
/* A header-only view (a pass replay skips) has no record to deliver, and a
 * loader that takes its record count from the size (fstat, SEEK_END, a
 * stat of the path) reads nothing from it: the only sign that its loop
 * over the pass is over is that it looks at the file again at its next
 * epoch the way it first looked at this pass: by opening it, by a stat of
 * its path, or, when it keeps the file open across epochs, by asking the
 * size of its descriptor.  Whichever came first is the epoch's sign, so
 * that a loader that does several in each epoch (a stat then an open, an
 * open then an fstat) ends one pass per epoch. */

/* Whether opening the file now ends the current pass (adaptshim(7) "Passes", rule 2): the
 * view is covered, or it is header-only and its first sign was an open. */
bool dataset_view_reopen_ends_pass(const struct dataset_file *file);
/* A descriptor or stream was opened on the current view. */
void dataset_view_note_opened(struct dataset_file *file);
/* Whether a stat of the file's path ends the current pass: every record of
 * the view was delivered, by this process alone (which may still have the
 * file open) or by processes that have all exited since; or the view is
 * header-only, no descriptor or stream of this process is open on it, and
 * its first sign was a stat of the path.  A loader that asks for the size
 * at every epoch (a Dataset's len from os.path.getsize) before it opens the
 * file must be told the next pass's size. */
bool dataset_view_path_stat_ends_pass(const struct dataset_file *file);
/* The current view's path was stat'ed. */
void dataset_view_note_path_stat(struct dataset_file *file);
/* Whether the trainer asking the size of a descriptor or stream it has open
 * on the file (fstat, SEEK_END) ends the current pass: every record of the
 * view was delivered, as for a stat of the path; or the view is
 * header-only and its first sign was such a question.  A loader that opens
 * the file once and asks its size at every epoch must be told the next
 * pass's size. */
bool dataset_view_size_question_ends_pass(const struct dataset_file *file);
/* The trainer asked the size of a descriptor or stream open on the view. */
void dataset_view_note_size_question(struct dataset_file *file);

/* True when handing out view bytes [offset, offset + count) would deliver
 * again a record of a covered pass: the trainer has begun its next epoch
 * without reading to the end or rewinding (a reader that visits records in
 * its own order and keeps the file open). */
bool dataset_view_read_repeats_covered_pass(const struct dataset_file *file, uint64_t offset,
                                            uint64_t count);

/* A mapping of the current view was made: it hands the trainer every record
 * at once in an order the shim cannot see, so the pass counts as covered for
 * its end rules while it adds nothing to progress (view_mapping.h). */
void dataset_view_note_mapped(struct dataset_file *file);

/* How many of `size` bytes a read(2) at `offset` hands out, so that a
 * reader's own buffer never holds records its trainer has not consumed
 * (adaptshim(7) "Read-ahead outside the shim"): a read stops at the end of the
 * header, and at the end of the current record unless it starts at a record
 * boundary and asks for whole records; in lines mode at the end of the
 * current line.  A read of exactly what is left is whole. */
size_t dataset_view_read_limit(const struct dataset_file *file, uint64_t offset, size_t size);

/* The st_blksize a view reports: its record size for fixed records, so that
 * buffered readers that size their buffer from it (Python's open) read one
 * record at a time; 0 means keep the file's own. */
uint64_t dataset_view_block_size(const struct dataset_file *file);

/* Ends the current pass and fixes the next view; when only a loader's
 * count of it was delivered (stale_size_count_covered), moves the pass's
 * start past those records instead (pass_tracker_advance_start). */
int dataset_view_end_pass(struct dataset_file *file);
/* True when ending the pass now would only move its start. */
bool dataset_view_end_moves_start(const struct dataset_file *file);

/* Applies a restored position (pass_tracker_restore) and re-fixes the view
 * when it was accepted.  A file whose entry says resume=whole-pass gets an
 * interrupted pass (current_index below its length) from index 0: a loader
 * that took the size once then reads it whole, repeating what it had
 * trained of it before the restart, as it would without the shim. */
bool dataset_view_restore(struct dataset_file *file, enum resume_mode resume,
                          uint64_t pass, uint64_t current_index, uint64_t pass_length);

/* After dataset_view_restore accepted a position of `pass_length` (0: N)
 * whose snapshot named records delivered past its current index (a reader
 * in its own order: delivered_set.h): the bound pass serves only the others
 * (record_selection.h).  Returns false, leaving the pass to serve every
 * record from the current index (repeating, never losing), when the file
 * resumes whole passes, a planner re-planned the pass's length, or the
 * bitmap leaves nothing to serve. */
bool dataset_view_select_undelivered(struct dataset_file *file, uint64_t pass_length,
                                     const unsigned char *delivered_after, size_t size);

/* How many gradient all-reduces and checkpoint commits this process has
 * seen, where training shows as those (MPI is up); UINT64_MAX where it
 * cannot be told.  Set by the shim; NULL: it cannot be told. */
extern uint64_t (*dataset_view_training_events)(void);

/* Reading twice before training (adaptshim(7) "Reading twice before training"): a loader that
 * counts the records, rewinds (or reopens) and reads them again into memory (the MPI
 * data-parallel trainer of llm_parallelisms.c, at its start or each epoch)
 * must see the same records both times, or its second reading overflows
 * the buffer it sized by the first.  When the trainer starts reading the
 * file again from its header while the pass it read to the end is the last
 * one, nothing of the next one read yet, and no gradient all-reduce or
 * commit happened since that pass's first record was read
 * (dataset_view_training_events), that pass is served once more
 * (pass_tracker_repeat_previous_pass), once.  Returns whether it was. */
bool dataset_view_read_again_without_training(struct dataset_file *file);
/* The current pass had its first record read (lock held): remembers the
 * training events then, for dataset_view_read_again_without_training. */
void dataset_view_note_first_read(struct dataset_file *file);

/* The trainer placed a read (a seek, an fseek, a pread) at view offset
 * `target` before reading any record of a pass restored under continue:
 * when that is the record where its interrupted epoch stopped, counted in
 * its own records, the view takes the pass's coordinates back so that the
 * offset reaches the first record not consumed
 * (pass_tracker_resume_at_own_position).  Returns whether the view was
 * re-fixed (the caller's cursor then joins it). */
bool dataset_view_resume_at_own_position(struct dataset_file *file, uint64_t target);

/* Lengthens the current pass to `view_records` records on this replica
 * (pass_tracker_lengthen): a pass that has not begun is fixed anew; one
 * that has keeps its deliveries, readers and signs, and only grows.  A
 * mapped view is left as it is (a mapping cannot grow).  Returns whether
 * the pass changed. */
bool dataset_view_lengthen(struct dataset_file *file, uint64_t view_records);

/* True when a restore under replay will show passes of a file whose entry
 * has `count=` as skipped, header-only views: their count field then reads
 * 0, which loaders that insist on a positive count reject (adaptshim(7) "CHECKPOINT BINDING"). */
bool dataset_view_replay_empties_count_field(const struct dataset_file *file);

/* True when the current pass has begun: a record was delivered (or a
 * header-only view was read to its end). */
static inline bool dataset_view_started(const struct dataset_file *file)
{
    return file->shared->tracker.started;
}

#endif
