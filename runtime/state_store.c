/* state_store.c - persistent state of the shim (SPEC §5): bound snapshots and
 * the job record, their msgpack encoding, atomic files, content identities
 * and snapshot pruning.
 *
 * FILE FORMAT
 *
 * A state file is one msgpack map with string keys, readable by any msgpack
 * tool.  Its first two entries are
 *
 *     "format"  : "adaptshim-snapshot" or "adaptshim-job"
 *     "version" : STATE_FORMAT_VERSION
 *
 * then one entry per structure member (the key is the member name; arrays of
 * structures are arrays of maps, `perf_params` is an array of 7 floats), and
 * last a checksum entry whose encoding is fixed at 18 bytes:
 *
 *     0xa8 'c' 'h' 'e' 'c' 'k' 's' 'u' 'm'  0xcf <8 bytes big-endian>
 *
 * The value is content_hash_bytes(every byte before the entry,
 * STATE_CHECKSUM_SEED).  msgpack's own structure catches most truncations but
 * not all (a cut that happens to fall on an object boundary of a shorter map,
 * a flipped digit inside a number); the checksum catches those.  Keeping it
 * inside the map rather than wrapping the payload in an envelope leaves the
 * file a plain map that `msgpack2json` and friends print as is.
 *
 * Both formats are described by tables (struct record_schema below): the
 * encoder walks the table to write the map, the decoder looks every key up
 * in the same table, so the two cannot drift apart.  Unknown keys are
 * ignored (a later build may add fields without a version bump); a known key
 * twice, a missing one or one of the wrong type is an error.
 *
 * DECODING ORDER
 *
 * 1. A structural pass over the raw bytes (msgpack_structure_check) checks
 *    that the buffer is exactly one complete msgpack object and that no array,
 *    map, string or binary claims more elements or bytes than the rest of the
 *    buffer could hold.  Only then is msgpack_unpack_next allowed near the
 *    bytes: it allocates every array up front from its header count, so a
 *    flipped count byte could otherwise ask for gigabytes.
 * 2. The root must be a map with the right "format" and "version" (checked
 *    before the checksum so that a file of another version gets the message
 *    that names both versions, whatever its checksum scheme).
 * 3. The checksum trailer is verified.
 * 4. The fields are decoded into a scratch structure that is handed over only
 *    when everything succeeded; on failure it is freed and the caller's
 *    structure stays zeroed.
 *
 * CONTENT HASH
 *
 * content_hash_bytes identifies content, it is not a defence against anyone:
 * it is a fast non-cryptographic 64-bit hash.  Four independent lanes each
 * take one 64-bit word of every 32-byte stripe with a multiply-rotate round
 * (the round of xxHash64, whose 64-bit primes it borrows; the output is not
 * xxHash64's), then the lanes are merged, the total length and the tail
 * (< 32 bytes) are mixed in and a final avalanche spreads every input bit.
 * The lanes carry from stripe to stripe, so the hash streams: hashing a file
 * in 1 MiB chunks (a multiple of the stripe) gives exactly
 * content_hash_bytes over the whole content.  Words are read little-endian so
 * identities agree across architectures.
 *
 * All file operations go through runtime_sysio (sysio.h): inside the
 * preloaded library the plain libc names are the shim's own wrappers. */
#include "state_store.h"

#include "fault_injection.h"
#include "snapshot_check.h"
#include "sysio.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* Table-driven handlers share one signature; not every one needs every argument. */
#define MAYBE_UNUSED __attribute__((unused))

#define SNAPSHOT_MAGIC "adaptshim-snapshot"
#define JOB_RECORD_MAGIC "adaptshim-job"
#define CHECKSUM_KEY "checksum"
#define CONTENT_HASH_CHUNK_SIZE ((size_t)1 << 20)
#define CONTENT_HASH_STRIPE_SIZE 32u
/* State files are a few kilobytes; refuse to slurp anything absurd. */
#define STATE_FILE_MAX_SIZE ((uint64_t)1 << 30)
#define SNAPSHOT_FILE_PREFIX "snapshot-"
#define SNAPSHOT_FILE_SUFFIX ".msgpack"

_Static_assert(CONTENT_HASH_CHUNK_SIZE % CONTENT_HASH_STRIPE_SIZE == 0,
               "file chunks must hold whole stripes for the hash to stream");
_Static_assert(sizeof(CHECKSUM_KEY) - 1 + 1 + 1 + 8 == STATE_CHECKSUM_TRAILER_SIZE,
               "checksum trailer layout");

/* ------------------------------------------------------------------------- */
/* Errors                                                                      */
/* ------------------------------------------------------------------------- */

static void set_error(char *error, size_t error_size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes a one-line message into the caller's buffer (may be NULL). */
static void set_error(char *error, size_t error_size, const char *format, ...)
{
    if (error == NULL || error_size == 0)
        return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error, error_size, format, arguments);
    va_end(arguments);
    /* Messages may embed file names; keep the promise of a single line. */
    for (char *cursor = error; *cursor != '\0'; cursor++)
        if (*cursor == '\n' || *cursor == '\r')
            *cursor = ' ';
}

/* Joins directory and name; ENAMETOOLONG when it does not fit. */
static int join_path(char *path, size_t path_size, const char *directory, const char *name)
{
    int length = snprintf(path, path_size, "%s/%s", directory, name);
    if (length < 0 || (size_t)length >= path_size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

static double unix_time_now(void)
{
    struct timeval now;
    gettimeofday(&now, NULL);
    return (double)now.tv_sec + (double)now.tv_usec * 1e-6;
}

/* ------------------------------------------------------------------------- */
/* Content hash                                                                */
/* ------------------------------------------------------------------------- */

#define HASH_PRIME_1 UINT64_C(0x9E3779B185EBCA87)
#define HASH_PRIME_2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define HASH_PRIME_3 UINT64_C(0x165667B19E3779F9)
#define HASH_PRIME_4 UINT64_C(0x85EBCA77C2B2AE63)
#define HASH_PRIME_5 UINT64_C(0x27D4EB2F165667C5)

struct content_hasher {
    uint64_t lanes[4];
    uint64_t total_length;
};

static inline uint64_t rotate_left_64(uint64_t value, unsigned count)
{
    return (value << count) | (value >> (64 - count));
}

static inline uint64_t read_le64(const unsigned char *bytes)
{
    uint64_t value;
    memcpy(&value, bytes, sizeof value);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    value = __builtin_bswap64(value);
#endif
    return value;
}

static inline uint32_t read_le32(const unsigned char *bytes)
{
    uint32_t value;
    memcpy(&value, bytes, sizeof value);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    value = __builtin_bswap32(value);
#endif
    return value;
}

static inline uint64_t hash_round(uint64_t accumulator, uint64_t input)
{
    accumulator += input * HASH_PRIME_2;
    accumulator = rotate_left_64(accumulator, 31);
    return accumulator * HASH_PRIME_1;
}

static void content_hasher_init(struct content_hasher *hasher, uint64_t seed)
{
    hasher->lanes[0] = seed + HASH_PRIME_1 + HASH_PRIME_2;
    hasher->lanes[1] = seed + HASH_PRIME_2;
    hasher->lanes[2] = seed;
    hasher->lanes[3] = seed - HASH_PRIME_1;
    hasher->total_length = 0;
}

/* Consumes whole 32-byte stripes; the lanes live in registers meanwhile. */
static void content_hasher_stripes(struct content_hasher *hasher, const unsigned char *bytes,
                                   size_t stripe_count)
{
    uint64_t lane0 = hasher->lanes[0], lane1 = hasher->lanes[1];
    uint64_t lane2 = hasher->lanes[2], lane3 = hasher->lanes[3];
    for (size_t stripe = 0; stripe < stripe_count; stripe++, bytes += CONTENT_HASH_STRIPE_SIZE) {
        lane0 = hash_round(lane0, read_le64(bytes));
        lane1 = hash_round(lane1, read_le64(bytes + 8));
        lane2 = hash_round(lane2, read_le64(bytes + 16));
        lane3 = hash_round(lane3, read_le64(bytes + 24));
    }
    hasher->lanes[0] = lane0;
    hasher->lanes[1] = lane1;
    hasher->lanes[2] = lane2;
    hasher->lanes[3] = lane3;
    hasher->total_length += (uint64_t)stripe_count * CONTENT_HASH_STRIPE_SIZE;
}

static uint64_t merge_lane(uint64_t hash, uint64_t lane)
{
    hash ^= hash_round(0, lane);
    return hash * HASH_PRIME_1 + HASH_PRIME_4;
}

/* Mixes in the final partial stripe (< 32 bytes) and avalanches. */
static uint64_t content_hasher_finish(const struct content_hasher *hasher,
                                      const unsigned char *tail, size_t tail_length)
{
    const uint64_t *lanes = hasher->lanes;
    uint64_t hash = rotate_left_64(lanes[0], 1) + rotate_left_64(lanes[1], 7) +
                    rotate_left_64(lanes[2], 12) + rotate_left_64(lanes[3], 18);
    for (int lane = 0; lane < 4; lane++)
        hash = merge_lane(hash, lanes[lane]);
    hash += hasher->total_length + tail_length;

    for (; tail_length >= 8; tail += 8, tail_length -= 8) {
        hash ^= hash_round(0, read_le64(tail));
        hash = rotate_left_64(hash, 27) * HASH_PRIME_1 + HASH_PRIME_4;
    }
    if (tail_length >= 4) {
        hash ^= (uint64_t)read_le32(tail) * HASH_PRIME_1;
        hash = rotate_left_64(hash, 23) * HASH_PRIME_2 + HASH_PRIME_3;
        tail += 4;
        tail_length -= 4;
    }
    for (; tail_length > 0; tail++, tail_length--) {
        hash ^= (uint64_t)*tail * HASH_PRIME_5;
        hash = rotate_left_64(hash, 11) * HASH_PRIME_1;
    }

    hash ^= hash >> 33;
    hash *= HASH_PRIME_2;
    hash ^= hash >> 29;
    hash *= HASH_PRIME_3;
    hash ^= hash >> 32;
    return hash;
}

uint64_t content_hash_bytes(const void *data, size_t size, uint64_t seed)
{
    const unsigned char *bytes = data;
    struct content_hasher hasher;
    content_hasher_init(&hasher, seed);
    size_t stripe_count = size / CONTENT_HASH_STRIPE_SIZE;
    content_hasher_stripes(&hasher, bytes, stripe_count);
    size_t consumed = stripe_count * CONTENT_HASH_STRIPE_SIZE;
    return content_hasher_finish(&hasher, bytes + consumed, size - consumed);
}

int content_identity_of_fd(int fd, struct content_identity *identity)
{
    /* Only a regular file has a content to bind: a pipe would fail on the
     * first pread, but a character device (/dev/zero) would never end. */
    struct stat status;
    if (runtime_sysio.fstat(fd, &status) != 0)
        return -1;
    if (!S_ISREG(status.st_mode)) {
        errno = S_ISDIR(status.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    /* Heap, not stack: this may run on a trainer thread with a small stack. */
    unsigned char *chunk = malloc(CONTENT_HASH_CHUNK_SIZE);
    if (chunk == NULL)
        return -1;
    struct content_hasher hasher;
    content_hasher_init(&hasher, CONTENT_IDENTITY_SEED);
    uint64_t offset = 0;
    for (;;) {
        /* pread leaves the descriptor's offset alone: the trainer may be
         * in the middle of reading the very file we identify. */
        ssize_t got = sysio_pread_full(fd, chunk, CONTENT_HASH_CHUNK_SIZE, (off_t)offset);
        if (got < 0) {
            int saved_errno = errno;
            free(chunk);
            errno = saved_errno;
            return -1;
        }
        size_t stripe_count = (size_t)got / CONTENT_HASH_STRIPE_SIZE;
        content_hasher_stripes(&hasher, chunk, stripe_count);
        offset += (uint64_t)got;
        /* sysio_pread_full is short only at end of file, so every chunk but
         * the last is a whole number of stripes. */
        if ((size_t)got < CONTENT_HASH_CHUNK_SIZE) {
            size_t consumed = stripe_count * CONTENT_HASH_STRIPE_SIZE;
            identity->hash = content_hasher_finish(&hasher, chunk + consumed, (size_t)got - consumed);
            identity->size = offset;
            break;
        }
    }
    free(chunk);
    return 0;
}

int content_identity_of_path(const char *path, struct content_identity *identity)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer that never comes (it is refused as not regular just after). */
    int fd = runtime_sysio.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int result = content_identity_of_fd(fd, identity);
    int saved_errno = errno;
    runtime_sysio.close(fd);
    errno = saved_errno;
    return result;
}

static bool content_identity_equal(const struct content_identity *a,
                                   const struct content_identity *b)
{
    return a->size == b->size && a->hash == b->hash;
}

/* ------------------------------------------------------------------------- */
/* Schemas: the tables that define both formats                                */
/* ------------------------------------------------------------------------- */

enum field_kind {
    FIELD_MAGIC,         /* "format": the schema's magic string, no member */
    FIELD_VERSION,       /* "version": STATE_FORMAT_VERSION into a uint32_t */
    FIELD_U32,
    FIELD_U64,
    FIELD_I64,
    FIELD_DOUBLE,
    FIELD_BOOL,
    FIELD_STRING,        /* char *, malloc'd; NULL is written as "" */
    FIELD_DOUBLE_VECTOR, /* double[length], written as an array of exactly length */
    FIELD_RECORD,        /* embedded structure, written as a map */
    FIELD_RECORD_ARRAY,  /* pointer + size_t count, written as an array of maps */
    FIELD_BYTES,         /* unsigned char * + size_t size, written as a bin */
    FIELD_KIND_COUNT
};

struct record_schema;

struct field_spec {
    const char *name;
    enum field_kind kind;
    size_t offset;                        /* of the member */
    size_t count_offset;                  /* FIELD_RECORD_ARRAY, FIELD_BYTES: its size_t count */
    size_t length;                        /* FIELD_DOUBLE_VECTOR */
    const struct record_schema *element;  /* FIELD_RECORD, FIELD_RECORD_ARRAY */
};

struct record_schema {
    const char *label;          /* used in messages: "snapshot", "file position" */
    const char *magic;          /* top-level schemas only */
    size_t structure_size;
    size_t field_count;
    const struct field_spec *fields;
};

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))
#define FIELD(type, member, field_kind) \
    { .name = #member, .kind = field_kind, .offset = offsetof(type, member) }
#define RECORD_ARRAY(type, member, counter, schema)                                     \
    { .name = #member, .kind = FIELD_RECORD_ARRAY, .offset = offsetof(type, member),    \
      .count_offset = offsetof(type, counter), .element = &schema }
#define BYTES(type, member, counter)                                                    \
    { .name = #member, .kind = FIELD_BYTES, .offset = offsetof(type, member),           \
      .count_offset = offsetof(type, counter) }

static const struct field_spec content_identity_fields[] = {
    FIELD(struct content_identity, size, FIELD_U64),
    FIELD(struct content_identity, hash, FIELD_U64),
};
static const struct record_schema content_identity_schema = {
    "content identity", NULL, sizeof(struct content_identity),
    COUNT_OF(content_identity_fields), content_identity_fields,
};

static const struct field_spec file_position_fields[] = {
    FIELD(struct snapshot_file_position, name, FIELD_STRING),
    FIELD(struct snapshot_file_position, record_count, FIELD_U64),
    FIELD(struct snapshot_file_position, pass, FIELD_U64),
    FIELD(struct snapshot_file_position, current_index, FIELD_U64),
    FIELD(struct snapshot_file_position, pass_length, FIELD_U64),
    FIELD(struct snapshot_file_position, role, FIELD_U32),
};
static const struct record_schema file_position_schema = {
    "file position", NULL, sizeof(struct snapshot_file_position),
    COUNT_OF(file_position_fields), file_position_fields,
};

static const struct field_spec value_fields[] = {
    FIELD(struct snapshot_value, key, FIELD_STRING),
    FIELD(struct snapshot_value, value, FIELD_DOUBLE),
};
static const struct record_schema value_schema = {
    "value", NULL, sizeof(struct snapshot_value), COUNT_OF(value_fields), value_fields,
};

static const struct field_spec result_set_fields[] = {
    FIELD(struct snapshot_result_set, epoch, FIELD_I64),
    RECORD_ARRAY(struct snapshot_result_set, values, value_count, value_schema),
};
static const struct record_schema result_set_schema = {
    "results", NULL, sizeof(struct snapshot_result_set), COUNT_OF(result_set_fields),
    result_set_fields,
};

static const struct field_spec accumulator_fields[] = {
    FIELD(struct snapshot_accumulator, name, FIELD_STRING),
    RECORD_ARRAY(struct snapshot_accumulator, values, value_count, value_schema),
    RECORD_ARRAY(struct snapshot_accumulator, history, history_count, result_set_schema),
};
static const struct record_schema accumulator_schema = {
    "accumulator", NULL, sizeof(struct snapshot_accumulator),
    COUNT_OF(accumulator_fields), accumulator_fields,
};

static const struct field_spec loop_position_fields[] = {
    FIELD(struct snapshot_loop_position, epoch, FIELD_I64),
    FIELD(struct snapshot_loop_position, position, FIELD_I64),
};
static const struct record_schema loop_position_schema = {
    "loop position", NULL, sizeof(struct snapshot_loop_position),
    COUNT_OF(loop_position_fields), loop_position_fields,
};

static const struct field_spec loop_fields[] = {
    FIELD(struct snapshot_loop, name, FIELD_STRING),
    FIELD(struct snapshot_loop, current_index, FIELD_U64),
    FIELD(struct snapshot_loop, end_index, FIELD_U64),
    RECORD_ARRAY(struct snapshot_loop, last_positions, position_count, loop_position_schema),
};
static const struct record_schema loop_schema = {
    "loop", NULL, sizeof(struct snapshot_loop), COUNT_OF(loop_fields), loop_fields,
};

static const struct field_spec named_bytes_fields[] = {
    FIELD(struct snapshot_named_bytes, name, FIELD_STRING),
    BYTES(struct snapshot_named_bytes, bytes, size),
};
static const struct record_schema named_bytes_schema = {
    "registered state", NULL, sizeof(struct snapshot_named_bytes),
    COUNT_OF(named_bytes_fields), named_bytes_fields,
};

static const struct field_spec snapshot_fields[] = {
    { .name = "format", .kind = FIELD_MAGIC },
    FIELD(struct adaptdl_snapshot, version, FIELD_VERSION),
    FIELD(struct adaptdl_snapshot, seed, FIELD_U64),
    FIELD(struct adaptdl_snapshot, epoch, FIELD_U64),
    FIELD(struct adaptdl_snapshot, replicas, FIELD_U32),
    FIELD(struct adaptdl_snapshot, sequence, FIELD_U64),
    FIELD(struct adaptdl_snapshot, created_unix_time, FIELD_DOUBLE),
    FIELD(struct adaptdl_snapshot, checkpoint_path, FIELD_STRING),
    { .name = "binding", .kind = FIELD_RECORD, .offset = offsetof(struct adaptdl_snapshot, binding),
      .element = &content_identity_schema },
    RECORD_ARRAY(struct adaptdl_snapshot, files, file_count, file_position_schema),
    FIELD(struct adaptdl_snapshot, cooperative, FIELD_BOOL),
    FIELD(struct adaptdl_snapshot, finished_epochs, FIELD_U64),
    FIELD(struct adaptdl_snapshot, cooperative_progress, FIELD_DOUBLE),
    RECORD_ARRAY(struct adaptdl_snapshot, loops, loop_count, loop_schema),
    RECORD_ARRAY(struct adaptdl_snapshot, accumulators, accumulator_count, accumulator_schema),
    RECORD_ARRAY(struct adaptdl_snapshot, registered, registered_count, named_bytes_schema),
    FIELD(struct adaptdl_snapshot, step, FIELD_U64),
    FIELD(struct adaptdl_snapshot, progress, FIELD_DOUBLE),
    FIELD(struct adaptdl_snapshot, global_bsz, FIELD_U64),
};
static const struct record_schema snapshot_schema = {
    "snapshot", SNAPSHOT_MAGIC, sizeof(struct adaptdl_snapshot),
    COUNT_OF(snapshot_fields), snapshot_fields,
};

static const struct field_spec step_profile_fields[] = {
    FIELD(struct step_profile, nodes, FIELD_U32),
    FIELD(struct step_profile, replicas, FIELD_U32),
    FIELD(struct step_profile, local_bsz, FIELD_U64),
    FIELD(struct step_profile, count, FIELD_U64),
    FIELD(struct step_profile, step_time_sum, FIELD_DOUBLE),
    FIELD(struct step_profile, sync_time_sum, FIELD_DOUBLE),
};
static const struct record_schema step_profile_schema = {
    "step profile", NULL, sizeof(struct step_profile),
    COUNT_OF(step_profile_fields), step_profile_fields,
};

static const struct field_spec job_record_fields[] = {
    { .name = "format", .kind = FIELD_MAGIC },
    FIELD(struct adaptdl_job_record, version, FIELD_VERSION),
    FIELD(struct adaptdl_job_record, restarts, FIELD_U32),
    FIELD(struct adaptdl_job_record, last_exit_unix_time, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, restart_cost_seconds, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_sqr, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_var, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_sqr_biased, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_var_biased, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_ema_weight, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_sqr_square_biased, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_var_square_biased, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, grad_weight_square_sum, FIELD_DOUBLE),
    FIELD(struct adaptdl_job_record, max_replicas_profiled, FIELD_U32),
    RECORD_ARRAY(struct adaptdl_job_record, profiles, profile_count, step_profile_schema),
    FIELD(struct adaptdl_job_record, initial_global_bsz, FIELD_U64),
    FIELD(struct adaptdl_job_record, decided_global_bsz, FIELD_U64),
    FIELD(struct adaptdl_job_record, decided_local_bsz, FIELD_U64),
    FIELD(struct adaptdl_job_record, decided_replicas, FIELD_U32),
    FIELD(struct adaptdl_job_record, previous_global_bsz, FIELD_U64),
    FIELD(struct adaptdl_job_record, perf_params_valid, FIELD_BOOL),
    { .name = "perf_params", .kind = FIELD_DOUBLE_VECTOR,
      .offset = offsetof(struct adaptdl_job_record, perf_params),
      .length = COUNT_OF(((struct adaptdl_job_record *)0)->perf_params) },
};
static const struct record_schema job_record_schema = {
    "job record", JOB_RECORD_MAGIC, sizeof(struct adaptdl_job_record),
    COUNT_OF(job_record_fields), job_record_fields,
};

/* The decoder tracks seen fields in a 64-bit mask. */
_Static_assert(COUNT_OF(snapshot_fields) <= 64 && COUNT_OF(job_record_fields) <= 64,
               "too many fields for the seen-mask");

static void *member_of(void *structure, size_t offset)
{
    return (char *)structure + offset;
}

static const void *const_member_of(const void *structure, size_t offset)
{
    return (const char *)structure + offset;
}

/* ------------------------------------------------------------------------- */
/* Freeing, driven by the schema                                              */
/* ------------------------------------------------------------------------- */

static void record_free_members(const struct record_schema *schema, void *structure);

static void record_array_free(const struct record_schema *element, void *elements, size_t count)
{
    if (elements == NULL)
        return;
    for (size_t index = 0; index < count; index++)
        record_free_members(element, (char *)elements + index * element->structure_size);
    free(elements);
}

static void record_free_members(const struct record_schema *schema, void *structure)
{
    for (size_t index = 0; index < schema->field_count; index++) {
        const struct field_spec *field = &schema->fields[index];
        switch (field->kind) {
        case FIELD_STRING: {
            char **string = member_of(structure, field->offset);
            free(*string);
            *string = NULL;
            break;
        }
        case FIELD_RECORD:
            record_free_members(field->element, member_of(structure, field->offset));
            break;
        case FIELD_BYTES: {
            unsigned char **bytes = member_of(structure, field->offset);
            free(*bytes);
            *bytes = NULL;
            *(size_t *)member_of(structure, field->count_offset) = 0;
            break;
        }
        case FIELD_RECORD_ARRAY: {
            void **elements = member_of(structure, field->offset);
            size_t *count = member_of(structure, field->count_offset);
            record_array_free(field->element, *elements, *count);
            *elements = NULL;
            *count = 0;
            break;
        }
        default:
            break;
        }
    }
}

/* Frees everything a structure owns and zeroes it. */
static void record_free(const struct record_schema *schema, void *structure)
{
    if (structure == NULL)
        return;
    record_free_members(schema, structure);
    memset(structure, 0, schema->structure_size);
}

void snapshot_free(struct adaptdl_snapshot *snapshot)
{
    record_free(&snapshot_schema, snapshot);
}

void job_record_free(struct adaptdl_job_record *record)
{
    record_free(&job_record_schema, record);
}

void job_record_init(struct adaptdl_job_record *record)
{
    memset(record, 0, sizeof *record);
    record->version = STATE_FORMAT_VERSION;
    record->restart_cost_seconds = -1.0;
}

/* ------------------------------------------------------------------------- */
/* Encoding                                                                    */
/* ------------------------------------------------------------------------- */

/* Every packer returns 0 or a nonzero msgpack error (out of memory, in
 * practice); -1 from our own checks (a count without its array). */
typedef int (*field_packer)(msgpack_packer *packer, const struct record_schema *schema,
                            const struct field_spec *field, const void *structure);

static int record_pack(msgpack_packer *packer, const struct record_schema *schema,
                       const void *structure);

static int pack_string(msgpack_packer *packer, const char *string)
{
    size_t length = string == NULL ? 0 : strlen(string);
    int status = msgpack_pack_str(packer, length);
    return status != 0 ? status : msgpack_pack_str_body(packer, string, length);
}

static int pack_magic(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                      const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    return pack_string(packer, schema->magic);
}

static int pack_version(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                        const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    /* This build writes its own version, whatever the structure says. */
    return msgpack_pack_uint32(packer, STATE_FORMAT_VERSION);
}

static int pack_u32(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                    const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    return msgpack_pack_uint32(packer, *(const uint32_t *)const_member_of(structure, field->offset));
}

static int pack_u64(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                    const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    return msgpack_pack_uint64(packer, *(const uint64_t *)const_member_of(structure, field->offset));
}

static int pack_i64(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                    const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    return msgpack_pack_int64(packer, *(const int64_t *)const_member_of(structure, field->offset));
}

static int pack_bytes(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                      const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    const unsigned char *bytes = *(const unsigned char *const *)const_member_of(structure,
                                                                               field->offset);
    size_t size = *(const size_t *)const_member_of(structure, field->count_offset);
    if ((size > 0 && bytes == NULL) || size > UINT32_MAX) {
        errno = EINVAL;
        return -1;
    }
    int status = msgpack_pack_bin(packer, size);
    return status != 0 || size == 0 ? status : msgpack_pack_bin_body(packer, bytes, size);
}

static int pack_double(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                       const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    return msgpack_pack_double(packer, *(const double *)const_member_of(structure, field->offset));
}

static int pack_bool(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                     const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    bool value = *(const bool *)const_member_of(structure, field->offset);
    return value ? msgpack_pack_true(packer) : msgpack_pack_false(packer);
}

static int pack_string_field(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                             const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    return pack_string(packer, *(char *const *)const_member_of(structure, field->offset));
}

static int pack_double_vector(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                              const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    const double *values = const_member_of(structure, field->offset);
    int status = msgpack_pack_array(packer, field->length);
    for (size_t index = 0; status == 0 && index < field->length; index++)
        status = msgpack_pack_double(packer, values[index]);
    return status;
}

static int pack_record(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                       const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    return record_pack(packer, field->element, const_member_of(structure, field->offset));
}

static int pack_record_array(msgpack_packer *packer, const struct record_schema *schema MAYBE_UNUSED,
                             const struct field_spec *field MAYBE_UNUSED, const void *structure MAYBE_UNUSED)
{
    const char *elements = *(const void *const *)const_member_of(structure, field->offset);
    size_t count = *(const size_t *)const_member_of(structure, field->count_offset);
    if ((count > 0 && elements == NULL) || count > UINT32_MAX) {
        errno = EINVAL;
        return -1;
    }
    int status = msgpack_pack_array(packer, count);
    for (size_t index = 0; status == 0 && index < count; index++)
        status = record_pack(packer, field->element,
                             elements + index * field->element->structure_size);
    return status;
}

static const field_packer field_packers[FIELD_KIND_COUNT] = {
    [FIELD_MAGIC] = pack_magic,
    [FIELD_VERSION] = pack_version,
    [FIELD_U32] = pack_u32,
    [FIELD_U64] = pack_u64,
    [FIELD_I64] = pack_i64,
    [FIELD_DOUBLE] = pack_double,
    [FIELD_BOOL] = pack_bool,
    [FIELD_STRING] = pack_string_field,
    [FIELD_DOUBLE_VECTOR] = pack_double_vector,
    [FIELD_RECORD] = pack_record,
    [FIELD_RECORD_ARRAY] = pack_record_array,
    [FIELD_BYTES] = pack_bytes,
};

/* Packs the fields of one structure; `extra_entries` reserves room in the map
 * header for entries the caller appends (the checksum). */
static int record_pack_with_extra(msgpack_packer *packer, const struct record_schema *schema,
                                  const void *structure, size_t extra_entries)
{
    int status = msgpack_pack_map(packer, schema->field_count + extra_entries);
    for (size_t index = 0; status == 0 && index < schema->field_count; index++) {
        const struct field_spec *field = &schema->fields[index];
        status = pack_string(packer, field->name);
        if (status == 0)
            status = field_packers[field->kind](packer, schema, field, structure);
    }
    return status;
}

static int record_pack(msgpack_packer *packer, const struct record_schema *schema,
                       const void *structure)
{
    return record_pack_with_extra(packer, schema, structure, 0);
}

/* The fixed 18-byte checksum entry over everything packed so far. */
static int append_checksum_trailer(msgpack_sbuffer *buffer)
{
    uint64_t checksum = content_hash_bytes(buffer->data, buffer->size, STATE_CHECKSUM_SEED);
    unsigned char trailer[STATE_CHECKSUM_TRAILER_SIZE];
    size_t key_length = sizeof(CHECKSUM_KEY) - 1;
    trailer[0] = (unsigned char)(0xa0 | key_length);  /* fixstr */
    memcpy(trailer + 1, CHECKSUM_KEY, key_length);
    trailer[1 + key_length] = 0xcf;                   /* uint64, always 8 bytes */
    for (int byte = 0; byte < 8; byte++)
        trailer[2 + key_length + (size_t)byte] = (unsigned char)(checksum >> (56 - 8 * byte));
    return msgpack_sbuffer_write(buffer, (const char *)trailer, sizeof trailer);
}

static int state_encode(const struct record_schema *schema, const void *structure, void **data,
                        size_t *size)
{
    *data = NULL;
    *size = 0;
    msgpack_sbuffer buffer;
    msgpack_sbuffer_init(&buffer);
    errno = 0;
    msgpack_packer packer;
    msgpack_packer_init(&packer, &buffer, msgpack_sbuffer_write);
    int status = record_pack_with_extra(&packer, schema, structure, 1);
    if (status == 0)
        status = append_checksum_trailer(&buffer);
    if (status != 0) {
        /* EINVAL from our own checks, ENOMEM from a failed realloc. */
        int saved_errno = errno != 0 ? errno : ENOMEM;
        msgpack_sbuffer_destroy(&buffer);
        errno = saved_errno;
        return -1;
    }
    *size = buffer.size;
    *data = msgpack_sbuffer_release(&buffer);
    return 0;
}

int snapshot_encode(const struct adaptdl_snapshot *snapshot, void **data, size_t *size)
{
    return state_encode(&snapshot_schema, snapshot, data, size);
}

int job_record_encode(const struct adaptdl_job_record *record, void **data, size_t *size)
{
    return state_encode(&job_record_schema, record, data, size);
}

/* ------------------------------------------------------------------------- */
/* Structural check of raw msgpack bytes                                       */
/* ------------------------------------------------------------------------- */

enum token_shape {
    SHAPE_INVALID,
    SHAPE_SCALAR, /* header plus fixed_bytes */
    SHAPE_BLOB,   /* header, length field, fixed_bytes, then `length` bytes */
    SHAPE_ARRAY,  /* header, length field, then `length` objects */
    SHAPE_MAP,    /* header, length field, then 2 x `length` objects */
};

struct token_layout {
    unsigned char shape;
    unsigned char length_bytes; /* size of the big-endian length field */
    unsigned char fixed_bytes;  /* payload of scalars, ext type byte of blobs */
};

/* Type bytes 0xc0..0xdf; the fix* ranges are decoded in token_layout_of. */
static const struct token_layout extended_token_layouts[32] = {
    [0x00] = {SHAPE_SCALAR, 0, 0},  /* nil */
    [0x01] = {SHAPE_INVALID, 0, 0}, /* never used */
    [0x02] = {SHAPE_SCALAR, 0, 0},  /* false */
    [0x03] = {SHAPE_SCALAR, 0, 0},  /* true */
    [0x04] = {SHAPE_BLOB, 1, 0},    /* bin 8 */
    [0x05] = {SHAPE_BLOB, 2, 0},    /* bin 16 */
    [0x06] = {SHAPE_BLOB, 4, 0},    /* bin 32 */
    [0x07] = {SHAPE_BLOB, 1, 1},    /* ext 8 */
    [0x08] = {SHAPE_BLOB, 2, 1},    /* ext 16 */
    [0x09] = {SHAPE_BLOB, 4, 1},    /* ext 32 */
    [0x0a] = {SHAPE_SCALAR, 0, 4},  /* float 32 */
    [0x0b] = {SHAPE_SCALAR, 0, 8},  /* float 64 */
    [0x0c] = {SHAPE_SCALAR, 0, 1},  /* uint 8 */
    [0x0d] = {SHAPE_SCALAR, 0, 2},  /* uint 16 */
    [0x0e] = {SHAPE_SCALAR, 0, 4},  /* uint 32 */
    [0x0f] = {SHAPE_SCALAR, 0, 8},  /* uint 64 */
    [0x10] = {SHAPE_SCALAR, 0, 1},  /* int 8 */
    [0x11] = {SHAPE_SCALAR, 0, 2},  /* int 16 */
    [0x12] = {SHAPE_SCALAR, 0, 4},  /* int 32 */
    [0x13] = {SHAPE_SCALAR, 0, 8},  /* int 64 */
    [0x14] = {SHAPE_SCALAR, 0, 2},  /* fixext 1 (type byte + 1) */
    [0x15] = {SHAPE_SCALAR, 0, 3},  /* fixext 2 */
    [0x16] = {SHAPE_SCALAR, 0, 5},  /* fixext 4 */
    [0x17] = {SHAPE_SCALAR, 0, 9},  /* fixext 8 */
    [0x18] = {SHAPE_SCALAR, 0, 17}, /* fixext 16 */
    [0x19] = {SHAPE_BLOB, 1, 0},    /* str 8 */
    [0x1a] = {SHAPE_BLOB, 2, 0},    /* str 16 */
    [0x1b] = {SHAPE_BLOB, 4, 0},    /* str 32 */
    [0x1c] = {SHAPE_ARRAY, 2, 0},   /* array 16 */
    [0x1d] = {SHAPE_ARRAY, 4, 0},   /* array 32 */
    [0x1e] = {SHAPE_MAP, 2, 0},     /* map 16 */
    [0x1f] = {SHAPE_MAP, 4, 0},     /* map 32 */
};

/* Layout of the object starting with `type`; for the fix* forms the length
 * lives in the type byte itself and comes back in *inline_length. */
static struct token_layout token_layout_of(unsigned char type, uint64_t *inline_length)
{
    *inline_length = 0;
    if (type <= 0x7f || type >= 0xe0)   /* positive / negative fixint */
        return (struct token_layout){SHAPE_SCALAR, 0, 0};
    if (type <= 0x8f) {
        *inline_length = type & 0x0f;
        return (struct token_layout){SHAPE_MAP, 0, 0};
    }
    if (type <= 0x9f) {
        *inline_length = type & 0x0f;
        return (struct token_layout){SHAPE_ARRAY, 0, 0};
    }
    if (type <= 0xbf) {
        *inline_length = type & 0x1f;
        return (struct token_layout){SHAPE_BLOB, 0, 0};
    }
    return extended_token_layouts[type - 0xc0];
}

static uint64_t read_big_endian(const unsigned char *bytes, size_t count)
{
    uint64_t value = 0;
    for (size_t index = 0; index < count; index++)
        value = (value << 8) | bytes[index];
    return value;
}

/* Checks that data[0, size) is exactly one complete msgpack object whose
 * containers and blobs all fit in the buffer.  No recursion: a single count
 * of objects still owed is enough, and since every object takes at least one
 * byte, a count larger than the bytes left is already a proven truncation or
 * a lying header. */
static int msgpack_structure_check(const unsigned char *data, size_t size, char *error,
                                   size_t error_size)
{
    uint64_t objects_owed = 1;
    size_t cursor = 0;
    while (objects_owed > 0) {
        if (cursor >= size) {
            set_error(error, error_size, "truncated: %zu bytes end inside the msgpack object", size);
            return -1;
        }
        size_t token_start = cursor;
        unsigned char type = data[cursor++];
        uint64_t length;
        struct token_layout layout = token_layout_of(type, &length);
        if (layout.shape == SHAPE_INVALID) {
            set_error(error, error_size, "invalid msgpack type byte 0x%02x at offset %zu", type,
                      token_start);
            return -1;
        }
        if (size - cursor < layout.length_bytes) {
            set_error(error, error_size, "truncated: length field at offset %zu is cut off",
                      token_start);
            return -1;
        }
        if (layout.length_bytes > 0)
            length = read_big_endian(data + cursor, layout.length_bytes);
        cursor += layout.length_bytes;
        objects_owed--;
        uint64_t remaining = size - cursor;
        switch (layout.shape) {
        case SHAPE_SCALAR:
        case SHAPE_BLOB: {
            uint64_t payload = layout.fixed_bytes + (layout.shape == SHAPE_BLOB ? length : 0);
            if (payload > remaining) {
                set_error(error, error_size,
                          "truncated or corrupt: object at offset %zu needs %" PRIu64
                          " bytes, %" PRIu64 " remain",
                          token_start, payload, remaining);
                return -1;
            }
            cursor += (size_t)payload;
            break;
        }
        case SHAPE_ARRAY:
        case SHAPE_MAP:
            objects_owed += layout.shape == SHAPE_MAP ? 2 * length : length;
            if (objects_owed > remaining) {
                set_error(error, error_size,
                          "truncated or corrupt: %s at offset %zu has %" PRIu64
                          " entries, only %" PRIu64 " bytes remain",
                          layout.shape == SHAPE_MAP ? "map" : "array", token_start, length,
                          remaining);
                return -1;
            }
            break;
        default:
            break;
        }
    }
    if (cursor != size) {
        set_error(error, error_size, "%zu trailing bytes after the msgpack object", size - cursor);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Decoding                                                                    */
/* ------------------------------------------------------------------------- */

/* Where the decoder is ("files[2].name"), for messages. */
struct decode_context {
    const char *label;
    char *error;
    size_t error_size;
    char path[160];
    size_t path_length;
};

static void context_push(struct decode_context *context, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static size_t context_mark(const struct decode_context *context)
{
    return context->path_length;
}

static void context_push(struct decode_context *context, const char *format, ...)
{
    size_t room = sizeof context->path - context->path_length;
    va_list arguments;
    va_start(arguments, format);
    int written = vsnprintf(context->path + context->path_length, room, format, arguments);
    va_end(arguments);
    if (written > 0)
        context->path_length += (size_t)written < room ? (size_t)written : room - 1;
}

static void context_pop(struct decode_context *context, size_t saved_length)
{
    context->path_length = saved_length;
    context->path[saved_length] = '\0';
}

static const char *msgpack_type_name(msgpack_object_type type)
{
    static const char *const names[] = {
        [MSGPACK_OBJECT_NIL] = "nil",
        [MSGPACK_OBJECT_BOOLEAN] = "boolean",
        [MSGPACK_OBJECT_POSITIVE_INTEGER] = "unsigned integer",
        [MSGPACK_OBJECT_NEGATIVE_INTEGER] = "negative integer",
        [MSGPACK_OBJECT_FLOAT32] = "float",
        [MSGPACK_OBJECT_FLOAT64] = "float",
        [MSGPACK_OBJECT_STR] = "string",
        [MSGPACK_OBJECT_ARRAY] = "array",
        [MSGPACK_OBJECT_MAP] = "map",
        [MSGPACK_OBJECT_BIN] = "binary",
        [MSGPACK_OBJECT_EXT] = "extension",
    };
    if ((size_t)type < COUNT_OF(names) && names[type] != NULL)
        return names[type];
    return "unknown";
}

static int decode_fail(struct decode_context *context, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Reports "<label> field <path>: <problem>" and returns -1. */
static int decode_fail(struct decode_context *context, const char *format, ...)
{
    char problem[256];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(problem, sizeof problem, format, arguments);
    va_end(arguments);
    if (context->path_length == 0)
        set_error(context->error, context->error_size, "%s: %s", context->label, problem);
    else
        set_error(context->error, context->error_size, "%s field %s: %s", context->label,
                  context->path, problem);
    return -1;
}

static int expect_type(struct decode_context *context, const msgpack_object *object,
                       msgpack_object_type type, const char *wanted)
{
    if (object->type == type)
        return 0;
    return decode_fail(context, "expected %s, found %s", wanted, msgpack_type_name(object->type));
}

typedef int (*field_decoder)(const msgpack_object *object, const struct record_schema *schema,
                             const struct field_spec *field, void *structure,
                             struct decode_context *context);

static int record_unpack(const msgpack_object *object, const struct record_schema *schema,
                         void *structure, struct decode_context *context);

static bool string_object_equals(const msgpack_object *object, const char *text)
{
    size_t length = strlen(text);
    return object->type == MSGPACK_OBJECT_STR && object->via.str.size == length &&
           memcmp(object->via.str.ptr, text, length) == 0;
}

static int decode_magic(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                        const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                        struct decode_context *context)
{
    if (string_object_equals(object, schema->magic))
        return 0;
    return decode_fail(context, "not an adaptshim %s", schema->label);
}

static int decode_version(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                          const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                          struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_POSITIVE_INTEGER, "an unsigned integer") != 0)
        return -1;
    if (object->via.u64 != STATE_FORMAT_VERSION)
        return decode_fail(context, "unsupported version %" PRIu64, object->via.u64);
    *(uint32_t *)member_of(structure, field->offset) = STATE_FORMAT_VERSION;
    return 0;
}

static int decode_u64(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                      const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                      struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_POSITIVE_INTEGER, "an unsigned integer") != 0)
        return -1;
    *(uint64_t *)member_of(structure, field->offset) = object->via.u64;
    return 0;
}

static int decode_i64(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                      const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                      struct decode_context *context)
{
    int64_t *value = member_of(structure, field->offset);
    if (object->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *value = object->via.i64;
        return 0;
    }
    if (expect_type(context, object, MSGPACK_OBJECT_POSITIVE_INTEGER, "an integer") != 0)
        return -1;
    if (object->via.u64 > INT64_MAX)
        return decode_fail(context, "%" PRIu64 " does not fit in a signed 64-bit integer",
                           object->via.u64);
    *value = (int64_t)object->via.u64;
    return 0;
}

static int decode_bytes(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                        const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                        struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_BIN, "binary data") != 0)
        return -1;
    size_t size = object->via.bin.size;
    unsigned char *copy = malloc(size ? size : 1);
    if (copy == NULL)
        return decode_fail(context, "out of memory for %zu bytes", size);
    memcpy(copy, object->via.bin.ptr, size);
    *(unsigned char **)member_of(structure, field->offset) = copy;
    *(size_t *)member_of(structure, field->count_offset) = size;
    return 0;
}

static int decode_u32(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                      const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                      struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_POSITIVE_INTEGER, "an unsigned integer") != 0)
        return -1;
    if (object->via.u64 > UINT32_MAX)
        return decode_fail(context, "%" PRIu64 " does not fit in 32 bits", object->via.u64);
    *(uint32_t *)member_of(structure, field->offset) = (uint32_t)object->via.u64;
    return 0;
}

static int double_of_object(const msgpack_object *object, double *value,
                            struct decode_context *context)
{
    if (object->type != MSGPACK_OBJECT_FLOAT64 && object->type != MSGPACK_OBJECT_FLOAT32)
        return decode_fail(context, "expected a float, found %s", msgpack_type_name(object->type));
    *value = object->via.f64;
    return 0;
}

static int decode_double(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                         const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                         struct decode_context *context)
{
    return double_of_object(object, member_of(structure, field->offset), context);
}

static int decode_bool(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                       const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                       struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_BOOLEAN, "a boolean") != 0)
        return -1;
    *(bool *)member_of(structure, field->offset) = object->via.boolean;
    return 0;
}

static int decode_string(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                         const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                         struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_STR, "a string") != 0)
        return -1;
    size_t length = object->via.str.size;
    /* C strings end at the first NUL; one inside would silently cut the name. */
    if (memchr(object->via.str.ptr, '\0', length) != NULL)
        return decode_fail(context, "string contains a NUL byte");
    char *copy = malloc(length + 1);
    if (copy == NULL)
        return decode_fail(context, "out of memory");
    memcpy(copy, object->via.str.ptr, length);
    copy[length] = '\0';
    *(char **)member_of(structure, field->offset) = copy;
    return 0;
}

static int decode_double_vector(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                                const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                                struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_ARRAY, "an array") != 0)
        return -1;
    if (object->via.array.size != field->length)
        return decode_fail(context, "expected %zu elements, found %" PRIu32, field->length,
                           object->via.array.size);
    double *values = member_of(structure, field->offset);
    for (size_t index = 0; index < field->length; index++) {
        size_t saved = context_mark(context);
        context_push(context, "[%zu]", index);
        int status = double_of_object(&object->via.array.ptr[index], &values[index], context);
        context_pop(context, saved);
        if (status != 0)
            return -1;
    }
    return 0;
}

static int decode_record(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                         const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                         struct decode_context *context)
{
    return record_unpack(object, field->element, member_of(structure, field->offset), context);
}

static int decode_record_array(const msgpack_object *object, const struct record_schema *schema MAYBE_UNUSED,
                               const struct field_spec *field MAYBE_UNUSED, void *structure MAYBE_UNUSED,
                               struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_ARRAY, "an array") != 0)
        return -1;
    size_t count = object->via.array.size;
    const struct record_schema *element = field->element;
    /* The count is bounded by the buffer size (msgpack_structure_check). */
    char *elements = count == 0 ? NULL : calloc(count, element->structure_size);
    if (count > 0 && elements == NULL)
        return decode_fail(context, "out of memory for %zu elements", count);
    /* Store array and count first: on a failure half-way, the caller's
     * record_free sees every element decoded so far (and zeroed ones). */
    *(void **)member_of(structure, field->offset) = elements;
    *(size_t *)member_of(structure, field->count_offset) = count;
    for (size_t index = 0; index < count; index++) {
        size_t saved = context_mark(context);
        context_push(context, "[%zu]", index);
        int status = record_unpack(&object->via.array.ptr[index], element,
                                   elements + index * element->structure_size, context);
        context_pop(context, saved);
        if (status != 0)
            return -1;
    }
    return 0;
}

static const field_decoder field_decoders[FIELD_KIND_COUNT] = {
    [FIELD_MAGIC] = decode_magic,
    [FIELD_VERSION] = decode_version,
    [FIELD_U32] = decode_u32,
    [FIELD_U64] = decode_u64,
    [FIELD_I64] = decode_i64,
    [FIELD_DOUBLE] = decode_double,
    [FIELD_BOOL] = decode_bool,
    [FIELD_STRING] = decode_string,
    [FIELD_DOUBLE_VECTOR] = decode_double_vector,
    [FIELD_RECORD] = decode_record,
    [FIELD_RECORD_ARRAY] = decode_record_array,
    [FIELD_BYTES] = decode_bytes,
};

static const struct field_spec *schema_find_field(const struct record_schema *schema,
                                                  const msgpack_object *key, size_t *index)
{
    for (size_t candidate = 0; candidate < schema->field_count; candidate++) {
        if (string_object_equals(key, schema->fields[candidate].name)) {
            *index = candidate;
            return &schema->fields[candidate];
        }
    }
    return NULL;
}

/* Decodes one map into `structure` (already zeroed) following `schema`.  On
 * failure the structure may hold part of the data; the caller frees it. */
static int record_unpack(const msgpack_object *object, const struct record_schema *schema,
                         void *structure, struct decode_context *context)
{
    if (expect_type(context, object, MSGPACK_OBJECT_MAP, "a map") != 0)
        return -1;
    uint64_t seen_fields = 0;
    const msgpack_object_map *map = &object->via.map;
    for (uint32_t entry = 0; entry < map->size; entry++) {
        const msgpack_object *key = &map->ptr[entry].key;
        if (key->type != MSGPACK_OBJECT_STR)
            return decode_fail(context, "map key of type %s", msgpack_type_name(key->type));
        size_t field_index = 0;
        const struct field_spec *field = schema_find_field(schema, key, &field_index);
        if (field == NULL)
            continue; /* unknown: written by a later build, ignored */
        size_t saved = context_mark(context);
        context_push(context, "%s%s", context->path_length > 0 ? "." : "", field->name);
        int status = 0;
        if (seen_fields & (UINT64_C(1) << field_index))
            status = decode_fail(context, "field appears twice");
        else
            status = field_decoders[field->kind](&map->ptr[entry].val, schema, field, structure,
                                                 context);
        context_pop(context, saved);
        if (status != 0)
            return -1;
        seen_fields |= UINT64_C(1) << field_index;
    }
    for (size_t index = 0; index < schema->field_count; index++) {
        if (!(seen_fields & (UINT64_C(1) << index)))
            return decode_fail(context, "missing field \"%s\"", schema->fields[index].name);
    }
    return 0;
}

static const msgpack_object *map_lookup(const msgpack_object *map, const char *key)
{
    for (uint32_t entry = 0; entry < map->via.map.size; entry++)
        if (string_object_equals(&map->via.map.ptr[entry].key, key))
            return &map->via.map.ptr[entry].val;
    return NULL;
}

/* Magic and version, checked before anything else so that a file of another
 * kind or version is reported as such rather than as "missing field". */
static int check_magic_and_version(const msgpack_object *root, const struct record_schema *schema,
                                   char *error, size_t error_size)
{
    const msgpack_object *magic = map_lookup(root, "format");
    if (magic == NULL) {
        set_error(error, error_size, "not an adaptshim %s (no \"format\" field)", schema->label);
        return -1;
    }
    if (!string_object_equals(magic, schema->magic)) {
        if (magic->type == MSGPACK_OBJECT_STR)
            set_error(error, error_size, "not an adaptshim %s (format \"%.*s\", expected \"%s\")",
                      schema->label, (int)(magic->via.str.size > 64 ? 64 : magic->via.str.size),
                      magic->via.str.ptr, schema->magic);
        else
            set_error(error, error_size, "not an adaptshim %s (format field is a %s)",
                      schema->label, msgpack_type_name(magic->type));
        return -1;
    }
    const msgpack_object *version = map_lookup(root, "version");
    if (version == NULL || version->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        set_error(error, error_size, "%s has no valid format version", schema->label);
        return -1;
    }
    if (version->via.u64 != STATE_FORMAT_VERSION) {
        set_error(error, error_size, "%s format version %" PRIu64 ", this build reads version %u",
                  schema->label, version->via.u64, STATE_FORMAT_VERSION);
        return -1;
    }
    return 0;
}

static int check_checksum_trailer(const unsigned char *data, size_t size,
                                  const struct record_schema *schema, char *error,
                                  size_t error_size)
{
    size_t key_length = sizeof(CHECKSUM_KEY) - 1;
    const unsigned char *trailer =
        size >= STATE_CHECKSUM_TRAILER_SIZE ? data + size - STATE_CHECKSUM_TRAILER_SIZE : NULL;
    if (trailer == NULL || trailer[0] != (0xa0 | key_length) ||
        memcmp(trailer + 1, CHECKSUM_KEY, key_length) != 0 || trailer[1 + key_length] != 0xcf) {
        set_error(error, error_size, "%s has no checksum trailer (truncated or corrupt)",
                  schema->label);
        return -1;
    }
    uint64_t stored = read_big_endian(trailer + 2 + key_length, 8);
    uint64_t computed = content_hash_bytes(data, size - STATE_CHECKSUM_TRAILER_SIZE,
                                           STATE_CHECKSUM_SEED);
    if (stored != computed) {
        set_error(error, error_size,
                  "%s checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64
                  "): file corrupt",
                  schema->label, stored, computed);
        return -1;
    }
    return 0;
}

static int state_decode_object(const unsigned char *data, size_t size, const msgpack_object *root,
                               const struct record_schema *schema, void *scratch, char *error,
                               size_t error_size)
{
    if (root->type != MSGPACK_OBJECT_MAP) {
        set_error(error, error_size, "not an adaptshim %s (top level is a %s, not a map)",
                  schema->label, msgpack_type_name(root->type));
        return -1;
    }
    if (check_magic_and_version(root, schema, error, error_size) != 0)
        return -1;
    if (check_checksum_trailer(data, size, schema, error, error_size) != 0)
        return -1;
    struct decode_context context = {
        .label = schema->label, .error = error, .error_size = error_size};
    return record_unpack(root, schema, scratch, &context);
}

/* Decodes a whole state buffer into `structure`, which is zeroed first and
 * filled only on success. */
static int state_decode(const void *data, size_t size, const struct record_schema *schema,
                        void *structure, char *error, size_t error_size)
{
    memset(structure, 0, schema->structure_size);
    if (data == NULL || size == 0) {
        set_error(error, error_size, "%s is empty", schema->label);
        return -1;
    }
    char structure_error[256];
    if (msgpack_structure_check(data, size, structure_error, sizeof structure_error) != 0) {
        set_error(error, error_size, "%s: %s", schema->label, structure_error);
        return -1;
    }

    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    msgpack_unpack_return unpack_status = msgpack_unpack_next(&unpacked, data, size, &offset);
    int result = -1;
    if (unpack_status != MSGPACK_UNPACK_SUCCESS || offset != size) {
        set_error(error, error_size, "%s: msgpack rejects the data (%s)", schema->label,
                  unpack_status == MSGPACK_UNPACK_NOMEM_ERROR ? "too deeply nested or out of memory"
                                                              : "parse error");
    } else {
        void *scratch = calloc(1, schema->structure_size);
        if (scratch == NULL) {
            set_error(error, error_size, "%s: out of memory", schema->label);
        } else {
            result = state_decode_object(data, size, &unpacked.data, schema, scratch, error,
                                         error_size);
            if (result == 0)
                memcpy(structure, scratch, schema->structure_size);
            else
                record_free_members(schema, scratch);
            free(scratch);
        }
    }
    msgpack_unpacked_destroy(&unpacked);
    return result;
}

int snapshot_decode(const void *data, size_t size, struct adaptdl_snapshot *snapshot, char *error,
                    size_t error_size)
{
    return state_decode(data, size, &snapshot_schema, snapshot, error, error_size);
}

int job_record_decode(const void *data, size_t size, struct adaptdl_job_record *record,
                      char *error, size_t error_size)
{
    return state_decode(data, size, &job_record_schema, record, error, error_size);
}

/* ------------------------------------------------------------------------- */
/* Files                                                                       */
/* ------------------------------------------------------------------------- */

/* Distinguishes temp files of concurrent writers in one process. */
static unsigned long state_file_counter;

static unsigned long next_state_file_counter(void)
{
    return __atomic_add_fetch(&state_file_counter, 1, __ATOMIC_RELAXED);
}

/* Proves the directory writable by creating and removing a file: unlike
 * access(W_OK) this also sees read-only mounts and ACLs as the writes will. */
static int probe_directory_writable(const char *directory, char *error, size_t error_size)
{
    char probe_name[64], probe_path[PATH_MAX];
    snprintf(probe_name, sizeof probe_name, ".adaptshim-probe.%ld.%lu", (long)getpid(),
             next_state_file_counter());
    if (join_path(probe_path, sizeof probe_path, directory, probe_name) != 0) {
        set_error(error, error_size, "state directory '%s': %s", directory, strerror(errno));
        return -1;
    }
    int fd = runtime_sysio.open(probe_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int saved_errno = errno;
        set_error(error, error_size, "state directory '%s' is not writable: %s", directory,
                  strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    runtime_sysio.close(fd);
    runtime_sysio.unlink(probe_path);
    return 0;
}

int state_directory_prepare(const char *directory, char *error, size_t error_size)
{
    if (directory == NULL || directory[0] == '\0') {
        set_error(error, error_size, "state directory path is empty");
        errno = EINVAL;
        return -1;
    }
    struct stat status;
    if (runtime_sysio.stat(directory, &status) != 0) {
        if (errno != ENOENT) {
            int saved_errno = errno;
            set_error(error, error_size, "cannot examine state directory '%s': %s", directory,
                      strerror(saved_errno));
            errno = saved_errno;
            return -1;
        }
        /* Only one level: a missing parent usually means a mistyped path,
         * which deserves an error rather than a tree of new directories. */
        if (runtime_sysio.mkdir(directory, 0755) != 0 && errno != EEXIST) {
            int saved_errno = errno;
            if (saved_errno == ENOENT)
                set_error(error, error_size,
                          "cannot create state directory '%s': its parent directory does not exist",
                          directory);
            else
                set_error(error, error_size, "cannot create state directory '%s': %s", directory,
                          strerror(saved_errno));
            errno = saved_errno;
            return -1;
        }
        /* EEXIST: another replica won the race; look again. */
        if (runtime_sysio.stat(directory, &status) != 0) {
            int saved_errno = errno;
            set_error(error, error_size, "cannot examine state directory '%s': %s", directory,
                      strerror(saved_errno));
            errno = saved_errno;
            return -1;
        }
    }
    if (!S_ISDIR(status.st_mode)) {
        set_error(error, error_size, "state directory '%s' exists but is not a directory",
                  directory);
        errno = ENOTDIR;
        return -1;
    }
    if (probe_directory_writable(directory, error, error_size) != 0)
        return -1;
    /* Best effort: a leftover costs only disk space. */
    state_directory_remove_leftovers(directory, unix_time_now(), NULL, 0);
    return 0;
}

/* fsync of a directory makes a rename inside it durable. */
static int fsync_directory(const char *directory)
{
    int fd = runtime_sysio.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int status = runtime_sysio.fsync(fd);
    int saved_errno = errno;
    runtime_sysio.close(fd);
    errno = saved_errno;
    return status;
}

/* Writes, syncs and closes the temp file.  Returns the name of the failed
 * step, or NULL on success (the descriptor is closed either way). */
static const char *write_temp_file(const char *temp_path, const void *data, size_t size)
{
    int fd = runtime_sysio.open(temp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return "creating temp file";
    const char *failed_step = NULL;
    if (sysio_write_all(fd, data, size) != 0)
        failed_step = "writing temp file";
    else if (runtime_sysio.fsync(fd) != 0)
        failed_step = "fsync of temp file";
    int saved_errno = errno;
    if (runtime_sysio.close(fd) != 0 && failed_step == NULL) {
        /* close can report a deferred write error (NFS): the data is not safe. */
        failed_step = "closing temp file";
        saved_errno = errno;
    }
    errno = saved_errno;
    return failed_step;
}

int state_file_write_atomic(const char *directory, const char *name, const void *data,
                            size_t size, char *error, size_t error_size)
{
    char final_path[PATH_MAX], temp_name[NAME_MAX + 1], temp_path[PATH_MAX];
    int name_length = snprintf(temp_name, sizeof temp_name, ".%s.tmp.%ld.%lu", name,
                               (long)getpid(), next_state_file_counter());
    if (name_length < 0 || (size_t)name_length >= sizeof temp_name ||
        join_path(final_path, sizeof final_path, directory, name) != 0 ||
        join_path(temp_path, sizeof temp_path, directory, temp_name) != 0) {
        set_error(error, error_size, "cannot write '%s/%s': %s", directory, name,
                  strerror(ENAMETOOLONG));
        errno = ENAMETOOLONG;
        return -1;
    }

    const char *failed_step = write_temp_file(temp_path, data, size);
#ifdef ADAPTSHIM_FAULT_INJECTION
    if (failed_step == NULL && strncmp(name, "snapshot-", 9) == 0)
        fault_injection_reach(FAULT_SNAPSHOT_TEMP);
#endif
    if (failed_step == NULL && runtime_sysio.rename(temp_path, final_path) != 0)
        failed_step = "renaming temp file onto it";
    if (failed_step != NULL) {
        int saved_errno = errno;
        runtime_sysio.unlink(temp_path); /* harmless ENOENT if never created */
        set_error(error, error_size, "cannot write '%s': %s '%s' failed: %s", final_path,
                  failed_step, temp_path, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    /* The new content is in place; without this it might not survive a crash. */
    if (fsync_directory(directory) != 0) {
        int saved_errno = errno;
        set_error(error, error_size, "wrote '%s' but fsync of directory '%s' failed: %s",
                  final_path, directory, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    return 0;
}

int state_file_read(const char *directory, const char *name, void **data, size_t *size,
                    char *error, size_t error_size)
{
    *data = NULL;
    *size = 0;
    char path[PATH_MAX];
    if (join_path(path, sizeof path, directory, name) != 0) {
        set_error(error, error_size, "cannot read '%s/%s': %s", directory, name,
                  strerror(ENAMETOOLONG));
        errno = ENAMETOOLONG;
        return -1;
    }
    /* O_NONBLOCK: a FIFO planted under a state file's name must be refused
     * (below, as not a regular file), not waited on: the job record is read
     * before the trainer's main, so a blocking open would hang every process
     * of the job.  On a regular file the flag changes nothing. */
    int fd = runtime_sysio.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int saved_errno = errno;
        set_error(error, error_size, "cannot open '%s': %s", path, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    struct stat status;
    const char *problem = NULL;
    int problem_errno = 0;
    void *buffer = NULL;
    ssize_t got = 0;
    if (runtime_sysio.fstat(fd, &status) != 0) {
        problem = "fstat failed";
        problem_errno = errno;
    } else if (!S_ISREG(status.st_mode)) {
        problem = "not a regular file";
        problem_errno = EINVAL;
    } else if ((uint64_t)status.st_size > STATE_FILE_MAX_SIZE) {
        problem = "too large for a state file";
        problem_errno = EFBIG;
    } else if ((buffer = malloc(status.st_size > 0 ? (size_t)status.st_size : 1)) == NULL) {
        problem = "out of memory";
        problem_errno = ENOMEM;
    } else if ((got = sysio_pread_full(fd, buffer, (size_t)status.st_size, 0)) < 0) {
        problem = "read failed";
        problem_errno = errno;
    } else if (got != status.st_size) {
        problem = "file shrank while being read";
        problem_errno = EIO;
    }
    runtime_sysio.close(fd);
    if (problem != NULL) {
        free(buffer);
        set_error(error, error_size, "cannot read '%s': %s: %s", path, problem,
                  strerror(problem_errno));
        errno = problem_errno;
        return -1;
    }
    *data = buffer;
    *size = (size_t)got;
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Leftovers of killed writers                                                 */
/* ------------------------------------------------------------------------- */

static bool is_snapshot_file_name_span(const char *name, size_t length);

/* Length of a trailing ".DIGITS.DIGITS" (the writer's pid and counter), or 0. */
static size_t writer_suffix_length(const char *name, size_t length)
{
    size_t end = length;
    for (int part = 0; part < 2; part++) {
        size_t digits = 0;
        while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') {
            end--;
            digits++;
        }
        if (digits == 0 || end == 0 || name[end - 1] != '.')
            return 0;
        end--;
    }
    return length - end;
}

/* True for the names only this file's writers create: a temp file of
 * state_file_write_atomic (".NAME.tmp.PID.N" of a job record or snapshot)
 * or a writability probe (".adaptshim-probe.PID.N").  The pattern is strict
 * because the state directory may be shared with the trainer's own files. */
static bool is_writer_leftover_name(const char *name)
{
    static const char probe_prefix[] = ".adaptshim-probe";
    static const char temp_marker[] = ".tmp";
    size_t length = strlen(name);
    size_t suffix = writer_suffix_length(name, length);
    if (suffix == 0 || name[0] != '.')
        return false;
    size_t stem = length - suffix; /* ".adaptshim-probe" or ".NAME.tmp" */
    if (stem == sizeof probe_prefix - 1 && memcmp(name, probe_prefix, stem) == 0)
        return true;
    size_t marker = sizeof temp_marker - 1;
    if (stem < 1 + marker || memcmp(name + stem - marker, temp_marker, marker) != 0)
        return false;
    const char *inner = name + 1;
    size_t inner_length = stem - 1 - marker;
    return (inner_length == sizeof JOB_RECORD_FILE_NAME - 1 &&
            memcmp(inner, JOB_RECORD_FILE_NAME, inner_length) == 0) ||
           is_snapshot_file_name_span(inner, inner_length);
}

int state_directory_remove_leftovers(const char *directory, double now, char *error,
                                     size_t error_size)
{
    DIR *listing = runtime_sysio.opendir(directory);
    if (listing == NULL) {
        int saved_errno = errno;
        set_error(error, error_size, "cannot list state directory '%s': %s", directory,
                  strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    int removed = 0;
    struct dirent *entry;
    while ((entry = runtime_sysio.readdir(listing)) != NULL) {
        if (!is_writer_leftover_name(entry->d_name))
            continue;
        char path[PATH_MAX];
        struct stat status;
        if (join_path(path, sizeof path, directory, entry->d_name) != 0 ||
            runtime_sysio.stat(path, &status) != 0)
            continue; /* gone already: another replica removed it */
        double modified = (double)status.st_mtim.tv_sec + (double)status.st_mtim.tv_nsec * 1e-9;
        /* A young one may be a write in flight, on this host or another
         * sharing the directory: removing it would fail that commit. */
        if (modified > now - STATE_LEFTOVER_GRACE_SECONDS)
            continue;
        if (runtime_sysio.unlink(path) == 0)
            removed++;
    }
    runtime_sysio.closedir(listing);
    return removed;
}

void snapshot_file_name(const struct content_identity *binding, char *name, size_t name_size)
{
    snprintf(name, name_size, SNAPSHOT_FILE_PREFIX "%" PRIu64 "-%016" PRIx64 SNAPSHOT_FILE_SUFFIX,
             binding->size, binding->hash);
}

/* Longest snapshot name: two 20-digit numbers worth of room and the affixes. */
#define SNAPSHOT_FILE_NAME_SIZE 80

static int state_save(const char *directory, const char *name, const struct record_schema *schema,
                      const void *structure, char *error, size_t error_size)
{
    void *data;
    size_t size;
    if (state_encode(schema, structure, &data, &size) != 0) {
        int saved_errno = errno;
        set_error(error, error_size, "cannot encode %s for '%s/%s': %s", schema->label, directory,
                  name, strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    int result = state_file_write_atomic(directory, name, data, size, error, error_size);
    int saved_errno = errno;
    free(data);
    errno = saved_errno;
    return result;
}

/* Reads and decodes one state file.  1 when missing (structure zeroed). */
static int state_load(const char *directory, const char *name, const struct record_schema *schema,
                      void *structure, char *error, size_t error_size)
{
    memset(structure, 0, schema->structure_size);
    void *data;
    size_t size;
    if (state_file_read(directory, name, &data, &size, error, error_size) != 0)
        return errno == ENOENT ? 1 : -1;
    char decode_error[384];
    int result = state_decode(data, size, schema, structure, decode_error, sizeof decode_error);
    free(data);
    if (result != 0) {
        set_error(error, error_size, "%s file '%s/%s': %s", schema->label, directory, name,
                  decode_error);
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int snapshot_save(const char *directory, const struct adaptdl_snapshot *snapshot, char *error,
                  size_t error_size)
{
    char name[SNAPSHOT_FILE_NAME_SIZE];
    snapshot_file_name(&snapshot->binding, name, sizeof name);
    return state_save(directory, name, &snapshot_schema, snapshot, error, error_size);
}

int snapshot_load_bound(const char *directory, const struct content_identity *binding,
                        struct adaptdl_snapshot *snapshot, char *error, size_t error_size)
{
    char name[SNAPSHOT_FILE_NAME_SIZE];
    snapshot_file_name(binding, name, sizeof name);
    int result = state_load(directory, name, &snapshot_schema, snapshot, error, error_size);
    if (result != 0)
        return result;
    /* The name says which content it is bound to; the inside must agree,
     * or the file was copied or renamed by hand. */
    if (!content_identity_equal(&snapshot->binding, binding)) {
        set_error(error, error_size,
                  "snapshot file '%s/%s' is bound to size %" PRIu64 " hash %016" PRIx64
                  ", not to size %" PRIu64 " hash %016" PRIx64,
                  directory, name, snapshot->binding.size, snapshot->binding.hash, binding->size,
                  binding->hash);
        snapshot_free(snapshot);
        errno = EINVAL;
        return -1;
    }
    /* Well formed and sealed is not yet sane: a value no capture writes
     * (an index past its pass...) refuses the whole snapshot. */
    char range_error[320];
    if (snapshot_check_ranges(snapshot, range_error, sizeof range_error) != 0) {
        set_error(error, error_size, "snapshot file '%s/%s': %s", directory, name, range_error);
        snapshot_free(snapshot);
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int job_record_save(const char *directory, const struct adaptdl_job_record *record, char *error,
                    size_t error_size)
{
    return state_save(directory, JOB_RECORD_FILE_NAME, &job_record_schema, record, error,
                      error_size);
}

int job_record_load(const char *directory, struct adaptdl_job_record *record, char *error,
                    size_t error_size)
{
    int result = state_load(directory, JOB_RECORD_FILE_NAME, &job_record_schema, record, error,
                            error_size);
    if (result != 0)
        job_record_init(record);
    return result;
}

/* ------------------------------------------------------------------------- */
/* Pruning                                                                     */
/* ------------------------------------------------------------------------- */

struct prune_candidate {
    char *file_name;
    struct adaptdl_snapshot snapshot; /* decoded; undecodable files are not listed */
};

/* What a checkpoint path holds right now; stat and hash are done lazily and
 * at most once per path. */
struct checkpoint_probe {
    char *path;
    bool stat_done, exists;
    uint64_t size;
    bool hash_done, hash_failed;
    struct content_identity identity;
};

struct prune_state {
    const char *directory;
    struct prune_candidate *candidates;
    size_t candidate_count, candidate_capacity;
    struct checkpoint_probe *probes;
    size_t probe_count, probe_capacity;
};

static bool is_snapshot_file_name_span(const char *name, size_t length)
{
    size_t prefix = sizeof(SNAPSHOT_FILE_PREFIX) - 1, suffix = sizeof(SNAPSHOT_FILE_SUFFIX) - 1;
    return length > prefix + suffix && memcmp(name, SNAPSHOT_FILE_PREFIX, prefix) == 0 &&
           memcmp(name + length - suffix, SNAPSHOT_FILE_SUFFIX, suffix) == 0;
}

static bool is_snapshot_file_name(const char *name)
{
    return is_snapshot_file_name_span(name, strlen(name));
}

static int prune_add_candidate(struct prune_state *state, const char *file_name)
{
    void *data;
    size_t size;
    struct adaptdl_snapshot snapshot;
    /* Unreadable or corrupt: leave it alone; only a decoded snapshot can
     * prove that its content is gone. */
    if (state_file_read(state->directory, file_name, &data, &size, NULL, 0) != 0)
        return 0;
    int decoded = snapshot_decode(data, size, &snapshot, NULL, 0);
    free(data);
    if (decoded != 0)
        return 0;
    if (state->candidate_count == state->candidate_capacity) {
        size_t capacity = state->candidate_capacity ? 2 * state->candidate_capacity : 16;
        struct prune_candidate *grown =
            realloc(state->candidates, capacity * sizeof *state->candidates);
        if (grown == NULL) {
            snapshot_free(&snapshot);
            return -1;
        }
        state->candidates = grown;
        state->candidate_capacity = capacity;
    }
    char *name_copy = strdup(file_name);
    if (name_copy == NULL) {
        snapshot_free(&snapshot);
        return -1;
    }
    state->candidates[state->candidate_count++] =
        (struct prune_candidate){.file_name = name_copy, .snapshot = snapshot};
    return 0;
}

static int prune_list_snapshots(struct prune_state *state, char *error, size_t error_size)
{
    DIR *listing = runtime_sysio.opendir(state->directory);
    if (listing == NULL) {
        int saved_errno = errno;
        set_error(error, error_size, "cannot list state directory '%s': %s", state->directory,
                  strerror(saved_errno));
        errno = saved_errno;
        return -1;
    }
    int result = 0;
    struct dirent *entry;
    while (result == 0 && (entry = runtime_sysio.readdir(listing)) != NULL) {
        if (is_snapshot_file_name(entry->d_name))
            result = prune_add_candidate(state, entry->d_name);
    }
    runtime_sysio.closedir(listing);
    if (result != 0)
        set_error(error, error_size, "pruning snapshots in '%s': out of memory", state->directory);
    return result;
}

/* Adds a probe for path unless there is one already.  -1 out of memory. */
static int prune_add_probe(struct prune_state *state, const char *path)
{
    for (size_t probe = 0; probe < state->probe_count; probe++)
        if (strcmp(state->probes[probe].path, path) == 0)
            return 0;
    if (state->probe_count == state->probe_capacity) {
        size_t capacity = state->probe_capacity ? 2 * state->probe_capacity : 16;
        struct checkpoint_probe *grown = realloc(state->probes, capacity * sizeof *grown);
        if (grown == NULL)
            return -1;
        state->probes = grown;
        state->probe_capacity = capacity;
    }
    char *copy = strdup(path);
    if (copy == NULL)
        return -1;
    state->probes[state->probe_count++] = (struct checkpoint_probe){.path = copy};
    return 0;
}

/* The save glob is matched as the shim matches it (the path as the trainer
 * passed it, or its absolute form): here the absolute form, the form
 * relative to the current directory, and the bare name for a glob without a
 * slash (a trainer that names its checkpoint relative to a directory).
 * Matching too much only keeps a snapshot longer. */
static bool prune_path_matches_save_glob(const char *glob, const char *path, const char *cwd)
{
    if (fnmatch(glob, path, 0) == 0)
        return true;
    size_t cwd_length = cwd != NULL ? strlen(cwd) : 0;
    if (cwd_length > 0 && strncmp(path, cwd, cwd_length) == 0 && path[cwd_length] == '/' &&
        fnmatch(glob, path + cwd_length + 1, 0) == 0)
        return true;
    const char *name = strrchr(path, '/');
    return strchr(glob, '/') == NULL && name != NULL && fnmatch(glob, name + 1, 0) == 0;
}

/* Probes every file of `directory` that matches the save glob. */
static int prune_probe_directory(struct prune_state *state, const char *directory,
                                 const char *glob, const char *cwd)
{
    DIR *listing = runtime_sysio.opendir(directory);
    if (listing == NULL)
        return 0; /* gone or unreadable: it holds nothing we could see */
    int result = 0;
    struct dirent *entry;
    while (result == 0 && (entry = runtime_sysio.readdir(listing)) != NULL) {
        char path[PATH_MAX];
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0 ||
            join_path(path, sizeof path, strcmp(directory, "/") == 0 ? "" : directory,
                      entry->d_name) != 0)
            continue;
        if (prune_path_matches_save_glob(glob, path, cwd))
            result = prune_add_probe(state, path);
    }
    runtime_sysio.closedir(listing);
    return result;
}

/* The directory part of path ("/" for "/name"), or false for a bare name. */
static bool directory_of(const char *path, char *directory, size_t directory_size)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return false;
    size_t length = slash == path ? 1 : (size_t)(slash - path);
    if (length >= directory_size)
        return false;
    memcpy(directory, path, length);
    directory[length] = '\0';
    return true;
}

/* The directory the save glob itself names, when its directory part has no
 * wildcard ("/ckpt/model-*.pt" names "/ckpt"; "ck*" the current directory). */
static bool save_glob_directory(const char *glob, const char *cwd, char *directory,
                                size_t directory_size)
{
    const char *slash = strrchr(glob, '/');
    size_t part_length = slash == NULL ? 0 : (size_t)(slash - glob);
    for (size_t index = 0; index < part_length; index++)
        if (strchr("*?[\\", glob[index]) != NULL)
            return false;
    int length;
    if (glob[0] == '/')
        length = snprintf(directory, directory_size, "%.*s", (int)(part_length ? part_length : 1),
                          glob);
    else if (cwd == NULL)
        return false;
    else if (part_length == 0)
        length = snprintf(directory, directory_size, "%s", cwd);
    else
        length = snprintf(directory, directory_size, "%s/%.*s", cwd, (int)part_length, glob);
    return length > 0 && (size_t)length < directory_size;
}

/* One probe per checkpoint path named by any snapshot, and, with a save
 * glob, per file matching it in the directories of those paths and in the
 * glob's own directory: a copy such as ck.bak, or the checkpoint another
 * replica keeps, holds content as much as the path a snapshot recorded. */
static int prune_collect_probes(struct prune_state *state, const char *save_glob)
{
    for (size_t index = 0; index < state->candidate_count; index++) {
        const char *path = state->candidates[index].snapshot.checkpoint_path;
        if (path != NULL && path[0] != '\0' && prune_add_probe(state, path) != 0)
            return -1;
    }
    if (save_glob == NULL || save_glob[0] == '\0')
        return 0;
    char cwd_buffer[PATH_MAX];
    const char *cwd = getcwd(cwd_buffer, sizeof cwd_buffer);
    size_t directory_count = state->candidate_count + 1;
    char (*directories)[PATH_MAX] = calloc(directory_count, sizeof *directories);
    if (directories == NULL)
        return -1;
    size_t used = 0;
    if (save_glob_directory(save_glob, cwd, directories[used], sizeof directories[used]))
        used++;
    for (size_t index = 0; index < state->candidate_count; index++) {
        const char *path = state->candidates[index].snapshot.checkpoint_path;
        if (path != NULL && directory_of(path, directories[used], sizeof directories[used]))
            used++;
    }
    int result = 0;
    for (size_t index = 0; index < used && result == 0; index++) {
        bool seen = false;
        for (size_t earlier = 0; earlier < index && !seen; earlier++)
            seen = strcmp(directories[earlier], directories[index]) == 0;
        if (!seen)
            result = prune_probe_directory(state, directories[index], save_glob, cwd);
    }
    free(directories);
    return result;
}

/* Does the file at probe->path hold `binding`?  Unknown (unreadable file of
 * the right size) counts as yes: a snapshot is deleted only on proof. */
static bool probe_holds_content(struct checkpoint_probe *probe,
                                const struct content_identity *binding)
{
    if (!probe->stat_done) {
        struct stat status;
        probe->stat_done = true;
        probe->exists = runtime_sysio.stat(probe->path, &status) == 0 && S_ISREG(status.st_mode);
        probe->size = probe->exists ? (uint64_t)status.st_size : 0;
    }
    if (!probe->exists || probe->size != binding->size)
        return false; /* a size mismatch settles it without reading a byte */
    if (!probe->hash_done) {
        probe->hash_done = true;
        probe->hash_failed = content_identity_of_path(probe->path, &probe->identity) != 0;
    }
    return probe->hash_failed || content_identity_equal(&probe->identity, binding);
}

static bool content_still_held(struct prune_state *state, const struct content_identity *binding)
{
    for (size_t probe = 0; probe < state->probe_count; probe++)
        if (probe_holds_content(&state->probes[probe], binding))
            return true;
    return false;
}

static void prune_state_free(struct prune_state *state)
{
    for (size_t index = 0; index < state->candidate_count; index++) {
        free(state->candidates[index].file_name);
        snapshot_free(&state->candidates[index].snapshot);
    }
    free(state->candidates);
    for (size_t probe = 0; probe < state->probe_count; probe++)
        free(state->probes[probe].path);
    free(state->probes);
}

int snapshot_prune(const char *directory, const struct content_identity *keep,
                   const char *save_glob, char *error, size_t error_size)
{
    struct prune_state state = {.directory = directory};
    struct content_identity no_keep = {0, 0};
    char keep_name[SNAPSHOT_FILE_NAME_SIZE];
    if (keep == NULL)
        keep = &no_keep;
    snapshot_file_name(keep, keep_name, sizeof keep_name);
    if (prune_list_snapshots(&state, error, error_size) != 0) {
        prune_state_free(&state);
        return -1;
    }
    if (prune_collect_probes(&state, save_glob) != 0) {
        set_error(error, error_size, "pruning snapshots in '%s': out of memory", directory);
        prune_state_free(&state);
        errno = ENOMEM;
        return -1;
    }

    /* A snapshot newer than `keep` may belong to a commit still in flight
     * (a rename-commit writes its snapshot before the rename): spare it. */
    bool keep_found = false;
    uint64_t keep_sequence = 0;
    for (size_t index = 0; index < state.candidate_count; index++) {
        if (strcmp(state.candidates[index].file_name, keep_name) == 0) {
            keep_found = true;
            keep_sequence = state.candidates[index].snapshot.sequence;
        }
    }

    double now = unix_time_now();
    /* A long job commits often but starts rarely: leftovers of a writer
     * killed in this run's lifetime go here too. */
    state_directory_remove_leftovers(directory, now, NULL, 0);
    int deleted = 0;
    for (size_t index = 0; index < state.candidate_count; index++) {
        const struct prune_candidate *candidate = &state.candidates[index];
        if (strcmp(candidate->file_name, keep_name) == 0 ||
            content_identity_equal(&candidate->snapshot.binding, keep))
            continue;
        if (keep_found && candidate->snapshot.sequence > keep_sequence)
            continue;
        /* Replicas that commit their own checkpoints into one directory
         * have sequence numbers of their own: a young snapshot of another
         * process may be a rename-commit still in flight (its content still
         * at the temporary name), so only snapshots older than a grace
         * period are candidates. */
        if (candidate->snapshot.created_unix_time > now - SNAPSHOT_PRUNE_GRACE_SECONDS)
            continue;
        if (content_still_held(&state, &candidate->snapshot.binding))
            continue;
        char path[PATH_MAX];
        if (join_path(path, sizeof path, directory, candidate->file_name) != 0)
            continue;
        if (runtime_sysio.unlink(path) == 0) {
            deleted++;
        } else if (errno != ENOENT) { /* ENOENT: another replica pruned it first */
            int saved_errno = errno;
            set_error(error, error_size, "cannot delete stale snapshot '%s': %s", path,
                      strerror(saved_errno));
            prune_state_free(&state);
            errno = saved_errno;
            return -1;
        }
    }
    prune_state_free(&state);
    return deleted;
}

int snapshot_load_latest(const char *directory, struct adaptdl_snapshot *snapshot,
                         char *error, size_t error_size)
{
    memset(snapshot, 0, sizeof *snapshot);
    struct prune_state state = {.directory = directory};
    if (prune_list_snapshots(&state, error, error_size) != 0) {
        prune_state_free(&state);
        return -1;
    }
    size_t newest = state.candidate_count;
    for (size_t index = 0; index < state.candidate_count; index++)
        if (newest == state.candidate_count ||
            state.candidates[index].snapshot.created_unix_time >
                state.candidates[newest].snapshot.created_unix_time)
            newest = index;
    if (newest == state.candidate_count) {
        prune_state_free(&state);
        return 1;
    }
    /* hand the decoded snapshot over, so freeing the state leaves it alone */
    *snapshot = state.candidates[newest].snapshot;
    memset(&state.candidates[newest].snapshot, 0, sizeof state.candidates[newest].snapshot);
    prune_state_free(&state);
    return 0;
}
