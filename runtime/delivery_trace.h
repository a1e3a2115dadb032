/* delivery_trace.h - the delivery trace (ADAPTDL_TRACE_FILE): every record
 * the shim hands the trainer, what each checkpoint commit bound, and which
 * checkpoint the trainer loaded, as text lines that adaptdl-verify compares
 * between an uninterrupted run and runs killed and restarted (adaptdl-verify(1)).
 *
 * One line per event, written with one write(2) on a descriptor opened with
 * O_APPEND, so that the lines of the trainer's threads and of its forked
 * workers (which inherit the descriptor) never interleave.  Delivery and
 * binding lines are written under the data file's lock, so their order in
 * the file is the order of the file's deliveries and captures.  Version 1:
 *
 *   adaptshim-trace 1 pid PID rank R replicas K
 *       a process opened the trace (its first line)
 *   D NAME PASS INDEX INDEX ...
 *       one read delivered these records of pass PASS of data file NAME for
 *       the first time in the pass (a record read again, or a stream's
 *       fetch handed over again, is not repeated), in view order; INDEX is
 *       the physical record index, followed by `*` when the position is
 *       AdaptDL's padding (a record the pass already holds); a long read is
 *       split over several D lines
 *   B SIZE HASH NAME ROLE PASS INDEX LENGTH IN_FLIGHT
 *       a snapshot for the checkpoint content SIZE/HASH binds data file NAME
 *       (ROLE train or eval) at pass PASS, current_index INDEX of a pass of
 *       LENGTH records; IN_FLIGHT of the records delivered before this line
 *       count as not consumed yet (lookahead=), most recent first
 *   C SIZE HASH PATH
 *       the snapshot bound to that content is written: the trainer's
 *       checkpoint PATH is committed (its B lines came just before)
 *   L SIZE HASH PATH
 *       the trainer opened its checkpoint PATH, of that content, for reading
 *   P PID COMMITS
 *       this process stopped itself with SIGSTOP at its first delivery after
 *       COMMITS commits (ADAPTDL_TRACE_STOP_AFTER), for adaptdl-verify to
 *       kill it there
 *
 * SIZE and PASS-like fields are decimal, HASH 16 hexadecimal digits (XXH64,
 * content_hash.h).  NAME is the data file's basename (positions match files
 * by basename, adaptshim(7) "CHECKPOINT BINDING") and PATH an absolute path, both with every byte
 * below '!', above '~' and '%' itself written as %XX.
 *
 * Off (no ADAPTDL_TRACE_FILE), a delivery costs one predictable branch. */
#ifndef ADAPTSHIM_DELIVERY_TRACE_H
#define ADAPTSHIM_DELIVERY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct adaptdl_config;
struct content_identity;
struct dataset_file;
struct snapshot_file_position;

#define DELIVERY_TRACE_MAGIC "adaptshim-trace"
#define DELIVERY_TRACE_VERSION 1

/* Set once a trace file is open; read on every delivery. */
extern bool delivery_trace_active;

/* Opens the trace `pattern` names (%r rank, %p pid) for appending and
 * writes its first line; stop_after_commits > 0 makes the process stop
 * itself at its first delivery after that many commits of the job's
 * processes (the counter lives in memory shared with processes forked
 * later).  0, or -1 with a one-line message naming ADAPTDL_TRACE_FILE. */
int delivery_trace_open(const char *pattern, uint32_t rank, uint32_t replicas,
                        uint64_t stop_after_commits, char *error, size_t error_size);
/* delivery_trace_open with the configuration's ADAPTDL_TRACE_FILE and
 * ADAPTDL_TRACE_STOP_AFTER; nothing when the first is unset, a warning
 * when it cannot be opened. */
void delivery_trace_start(const struct adaptdl_config *config);
/* Closes the trace (tests; a process's trace otherwise lives until exit). */
void delivery_trace_close(void);

/* Writes the D lines of view positions [first, last) of the file's current
 * view.  Lock held. */
void delivery_trace_write_deliveries(struct dataset_file *file, uint64_t first, uint64_t last);

/* A read delivered view positions [first, last) (dataset_view_note_read). */
static inline void delivery_trace_deliveries(struct dataset_file *file, uint64_t first,
                                             uint64_t last)
{
    if (__builtin_expect(delivery_trace_active, 0) && last > first)
        delivery_trace_write_deliveries(file, first, last);
}

/* A snapshot for the checkpoint content `binding` captured `position` for
 * `file`, `in_flight` records short of what was delivered.  Lock held. */
void delivery_trace_binding(const struct content_identity *binding,
                            const struct dataset_file *file,
                            const struct snapshot_file_position *position, uint64_t in_flight);
/* The snapshot bound to `identity` is written: checkpoint_path is committed. */
void delivery_trace_commit(const char *checkpoint_path, const struct content_identity *identity);
/* The trainer opened its checkpoint for reading. */
void delivery_trace_load(const char *checkpoint_path, const struct content_identity *identity);

/* Writes `text` (length bytes) into out with the trace's escapes (%XX for
 * bytes below '!', above '~' and '%'); out holds at least 3 * length + 1
 * bytes.  Returns the length written, NUL excluded. */
size_t delivery_trace_escape(const char *text, size_t length, char *out);

#endif
