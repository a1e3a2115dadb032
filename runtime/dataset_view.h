/* dataset_view.h - one data file and the view of its current pass (SPEC §3).
 *
 * A dataset_file is shared by every descriptor and stream the trainer opens
 * on the same physical file: it maps the file once, knows its records (fixed
 * size, or a line index built once), owns the file's pass tracker, and
 * materializes nothing per pass but the permutation key (plus, in `lines`
 * mode, the prefix sums of the view's line lengths).
 *
 * View layout: the header (verbatim, except a rewritten count field), then
 * the L records perm[s + r + j*K] (with AdaptDL's padding).  A pass of
 * length M > N (a statistical epoch, SPEC §7) reads logical index v as
 * record perm_w[v mod N] of sweep w = v / N, each sweep with its own
 * permutation keyed by (pass, w), as AdaptDL seeds by epoch and wrap count.  All functions
 * here are pure memory operations on the mapping; callers hold `lock`. */
#ifndef ADAPTSHIM_DATASET_VIEW_H
#define ADAPTSHIM_DATASET_VIEW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pass_tracker.h"
#include "permutation.h"

/* Physical indices of the view computed ahead, so that small records cost an
 * array lookup rather than a Feistel evaluation each (SPEC §10). */
#define VIEW_INDEX_BLOCK 1024

/* Pieces at least this large are copied with pread(2) from source_fd rather
 * than from the mapping: the kernel copies page-cached data faster than a
 * first touch of mapped pages faults it in (SPEC §10, records of 4 KiB and
 * more).  Smaller pieces come from the mapping: no syscall per record. */
#define VIEW_PREAD_MIN_CHUNK 4096

/* How far ahead of the trainer the kernel is asked to read large records. */
#define VIEW_PREFETCH_BYTES (32u << 20)

struct dataset_file {
    char *path;                   /* absolute path */
    const char *basename;         /* points into path */
    const struct data_entry *entry;
    uint64_t device;              /* st_dev, st_ino: identity for lookups */
    uint64_t inode;
    const unsigned char *map;     /* whole file, read-only */
    int source_fd;                /* read-only descriptor of the file, or -1 */
    uint64_t file_size;
    uint64_t header_size;
    uint64_t record_size;         /* 0 in lines mode */
    uint64_t record_count;        /* N */
    uint64_t payload_size;        /* bytes of whole records after the header */
    uint64_t *line_offsets;       /* lines mode: N + 1 offsets into the file */
    uint64_t seed;
    uint32_t replicas;            /* K used for this file (1 when shard=0) */
    uint32_t rank;

    struct pass_tracker tracker;

    /* the view of the current pass */
    struct record_permutation permutation;      /* of its first sweep (wrap 0) */
    struct record_permutation wrap_permutation; /* of sweep `wrap_cached` > 0 */
    uint64_t wrap_cached;                       /* 0: none */
    uint64_t view_pass_length;    /* M: logical records of the pass (SPEC §7) */
    uint64_t view_pass;
    uint64_t view_start_index;
    uint64_t view_length;         /* L */
    uint64_t view_size;           /* header + payload of the view */
    uint64_t *view_line_prefix;   /* lines mode: L + 1 payload offsets */
    unsigned char *header;        /* header bytes as the view shows them */
    uint64_t frontier;            /* view bytes consumed in order this pass */
    uint64_t block_first;         /* first position cached in block_indices */
    uint64_t block_count;
    uint64_t block_indices[VIEW_INDEX_BLOCK];
    uint64_t prefetched_until;    /* view positions advised to the kernel */
    bool warned_empty_count_replay; /* the count=-under-replay warning was logged */

    pthread_mutex_t lock;
    struct dataset_file *next;    /* registry chaining */
};

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

/* Copies view bytes [offset, offset + size) into buffer, stopping at the
 * view's end.  Returns the number copied. */
size_t dataset_view_copy(struct dataset_file *file, uint64_t offset, void *buffer,
                         size_t size);

/* Number of whole records of the view that lie before `offset`. */
uint64_t dataset_view_records_before(const struct dataset_file *file, uint64_t offset);

/* A read delivered view bytes [offset, offset + count): advances the in-order
 * frontier and the tracker's delivered count when it continues the frontier. */
void dataset_view_note_read(struct dataset_file *file, uint64_t offset, uint64_t count);

/* Ends the current pass and fixes the next view. */
int dataset_view_end_pass(struct dataset_file *file);

/* Applies a restored position (pass_tracker_restore) and re-fixes the view
 * when it was accepted. */
bool dataset_view_restore(struct dataset_file *file, enum resume_mode resume,
                          uint64_t pass, uint64_t current_index, uint64_t pass_length);

/* True when a restore under replay will show passes of a file whose entry
 * has `count=` as skipped, header-only views: their count field then reads
 * 0, which loaders that insist on a positive count reject (SPEC §4). */
bool dataset_view_replay_empties_count_field(const struct dataset_file *file);

/* True when at least one payload byte of the current pass was read. */
static inline bool dataset_view_started(const struct dataset_file *file)
{
    return file->tracker.started;
}

#endif
