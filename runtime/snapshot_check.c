/* snapshot_check.c - range checks of a decoded snapshot (see snapshot_check.h).
 *
 * What a capture (dataset_registry_capture, session_commit_checkpoint) can
 * write, and so what is accepted:
 *   - replicas: the K of the committing run, 1 .. SNAPSHOT_REPLICA_LIMIT;
 *   - epoch: the highest pass among the train positions (0 without any);
 *   - per file: a basename; role train or eval; a pass length M (0 stands
 *     for N) that is N for an eval file and 1 .. N * PASS_TRACKER_MAX_SWEEPS
 *     for a train file (statistical epochs plan other lengths); 0 for an
 *     empty file; current_index 0 .. M; delivered_after, when present,
 *     names only indices in (current_index, M);
 *   - progress: finite and not negative; global_bsz within what
 *     ADAPTDL_BATCH_SIZE accepts. */
#include "error_message.h"
#include "snapshot_check.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_text.h"
#include "pass_tracker.h"

/* As ADAPTDL_NUM_REPLICAS and ADAPTDL_BATCH_SIZE accept (config.c). */
#define SNAPSHOT_REPLICA_LIMIT ((uint64_t)1 << 20)
#define SNAPSHOT_BATCH_SIZE_LIMIT ((uint64_t)1 << 40)

/* The pass length a position stands for: 0 is N (pass_tracker_restore). */
static uint64_t effective_pass_length(const struct snapshot_file_position *position)
{
    return position->pass_length == 0 ? position->record_count : position->pass_length;
}

static bool name_is_a_basename(const char *name)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > NAME_MAX)
        return false;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return false;
    for (const unsigned char *cursor = (const unsigned char *)name; *cursor; cursor++)
        if (*cursor == '/' || *cursor < 0x20)
            return false;
    return true;
}

/* One rule per row: the rows are tried in order and the first broken one is
 * reported, with the accepted range. */
typedef int (*position_rule)(const struct snapshot_file_position *position, size_t index,
                             char *error, size_t error_size);

static int rule_name(const struct snapshot_file_position *position, size_t index, char *error,
                     size_t error_size)
{
    if (name_is_a_basename(position->name))
        return 0;
    const char *name = position->name != NULL ? position->name : "";
    char quoted[96];
    config_quote_for_message(quoted, sizeof quoted, name, strlen(name));
    return error_message(error, error_size,
                        "file position %zu: name \"%s\" is not a file's basename; accepted: "
                        "a non-empty name without '/' or control characters",
                        index, quoted);
}

static int rule_role(const struct snapshot_file_position *position, size_t index, char *error,
                     size_t error_size)
{
    if (position->role == DATA_ROLE_TRAIN || position->role == DATA_ROLE_EVAL)
        return 0;
    return error_message(error, error_size,
                        "file position %zu (\"%s\"): role %" PRIu32 " is unknown; accepted: %d "
                        "(train) or %d (eval)",
                        index, position->name, position->role, DATA_ROLE_TRAIN, DATA_ROLE_EVAL);
}

static int rule_pass_length(const struct snapshot_file_position *position, size_t index,
                            char *error, size_t error_size)
{
    uint64_t records = position->record_count;
    uint64_t length = effective_pass_length(position);
    if (records == 0 && length == 0)
        return 0;
    if (records == 0)
        return error_message(error, error_size,
                            "file position %zu (\"%s\"): pass_length %" PRIu64 " for a file of 0 "
                            "records; accepted: 0",
                            index, position->name, length);
    if (position->role == DATA_ROLE_EVAL && length != records)
        return error_message(error, error_size,
                            "file position %zu (\"%s\"): pass_length %" PRIu64 " of an eval file "
                            "of %" PRIu64 " records; accepted: %" PRIu64 " (eval passes are "
                            "never planned)",
                            index, position->name, length, records, records);
    uint64_t longest = pass_tracker_longest_pass(records);
    if (length > longest)
        return error_message(error, error_size,
                            "file position %zu (\"%s\"): pass_length %" PRIu64 " of a file of "
                            "%" PRIu64 " records; accepted: 1 to %" PRIu64 " (%u sweeps)",
                            index, position->name, length, records, longest,
                            PASS_TRACKER_MAX_SWEEPS);
    return 0;
}

static int rule_current_index(const struct snapshot_file_position *position, size_t index,
                              char *error, size_t error_size)
{
    uint64_t length = effective_pass_length(position);
    if (position->current_index <= length)
        return 0;
    return error_message(error, error_size,
                        "file position %zu (\"%s\"): current_index %" PRIu64 " is past its "
                        "pass_length %" PRIu64 "; accepted: 0 to %" PRIu64,
                        index, position->name, position->current_index, length, length);
}

/* The bitmap names indices after current_index and before M only. */
static int rule_delivered_after(const struct snapshot_file_position *position, size_t index,
                                char *error, size_t error_size)
{
    size_t size = position->delivered_after_size;
    if (size == 0)
        return 0;
    uint64_t length = effective_pass_length(position);
    uint64_t span = length - position->current_index;
    uint64_t last_byte_bits = span % 8;
    const unsigned char *bytes = position->delivered_after;
    bool fits = size <= (span + 7) / 8 &&
                (size < (span + 7) / 8 || last_byte_bits == 0 ||
                 (bytes[size - 1] >> last_byte_bits) == 0);
    if (fits && (bytes[0] & 1u) == 0)
        return 0;
    return error_message(error, error_size,
                        "file position %zu (\"%s\"): delivered_after of %zu bytes names %s; "
                        "accepted: at most %" PRIu64 " bytes naming indices after "
                        "current_index %" PRIu64 " and before pass_length %" PRIu64,
                        index, position->name, size,
                        fits ? "current_index itself" : "indices past the pass",
                        (span + 7) / 8, position->current_index, length);
}

static const position_rule position_rules[] = {
    rule_name,
    rule_role,
    rule_pass_length,
    rule_current_index,
    rule_delivered_after,
};

/* The epoch a capture writes: the highest pass among train positions. */
static uint64_t captured_epoch(const struct adaptdl_snapshot *snapshot)
{
    uint64_t epoch = 0;
    for (size_t i = 0; i < snapshot->file_count; i++)
        if (snapshot->files[i].role == DATA_ROLE_TRAIN && snapshot->files[i].pass > epoch)
            epoch = snapshot->files[i].pass;
    return epoch;
}

int snapshot_check_ranges(const struct adaptdl_snapshot *snapshot, char *error,
                          size_t error_size)
{
    if (snapshot->replicas < 1 || snapshot->replicas > SNAPSHOT_REPLICA_LIMIT)
        return error_message(error, error_size,
                            "replicas %" PRIu32 " is out of range; accepted: 1 to %" PRIu64,
                            snapshot->replicas, SNAPSHOT_REPLICA_LIMIT);
    if (!isfinite(snapshot->progress) || snapshot->progress < 0)
        return error_message(error, error_size,
                            "progress %g is out of range; accepted: a finite number >= 0",
                            snapshot->progress);
    if (snapshot->global_bsz > SNAPSHOT_BATCH_SIZE_LIMIT)
        return error_message(error, error_size,
                            "global_bsz %" PRIu64 " is out of range; accepted: 0 (no "
                            "adaptation) to %" PRIu64,
                            snapshot->global_bsz, SNAPSHOT_BATCH_SIZE_LIMIT);
    for (size_t i = 0; i < snapshot->file_count; i++)
        for (size_t rule = 0; rule < sizeof position_rules / sizeof position_rules[0]; rule++)
            if (position_rules[rule](&snapshot->files[i], i, error, error_size) != 0)
                return -1;
    uint64_t epoch = captured_epoch(snapshot);
    if (snapshot->epoch != epoch)
        return error_message(error, error_size,
                            "epoch %" PRIu64 " disagrees with its train positions; accepted: "
                            "%" PRIu64 ", the highest pass among them",
                            snapshot->epoch, epoch);
    return 0;
}
