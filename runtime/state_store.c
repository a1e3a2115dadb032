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
#include "error_message.h"
#include "state_store.h"

#include "msgpack_check.h"
#include "state_files.h"
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
/* State files are a few kilobytes; refuse to slurp anything absurd. */

_Static_assert(sizeof(CHECKSUM_KEY) - 1 + 1 + 1 + 8 == STATE_CHECKSUM_TRAILER_SIZE,
               "checksum trailer layout");

/* ------------------------------------------------------------------------- */
/* Errors                                                                      */
/* ------------------------------------------------------------------------- */

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
        error_message(context->error, context->error_size, "%s: %s", context->label, problem);
    else
        error_message(context->error, context->error_size, "%s field %s: %s", context->label,
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
        error_message(error, error_size, "not an adaptshim %s (no \"format\" field)", schema->label);
        return -1;
    }
    if (!string_object_equals(magic, schema->magic)) {
        if (magic->type == MSGPACK_OBJECT_STR)
            error_message(error, error_size, "not an adaptshim %s (format \"%.*s\", expected \"%s\")",
                      schema->label, (int)(magic->via.str.size > 64 ? 64 : magic->via.str.size),
                      magic->via.str.ptr, schema->magic);
        else
            error_message(error, error_size, "not an adaptshim %s (format field is a %s)",
                      schema->label, msgpack_type_name(magic->type));
        return -1;
    }
    const msgpack_object *version = map_lookup(root, "version");
    if (version == NULL || version->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        error_message(error, error_size, "%s has no valid format version", schema->label);
        return -1;
    }
    if (version->via.u64 != STATE_FORMAT_VERSION) {
        error_message(error, error_size, "%s format version %" PRIu64 ", this build reads version %u",
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
        error_message(error, error_size, "%s has no checksum trailer (truncated or corrupt)",
                  schema->label);
        return -1;
    }
    uint64_t stored = msgpack_read_big_endian(trailer + 2 + key_length, 8);
    uint64_t computed = content_hash_bytes(data, size - STATE_CHECKSUM_TRAILER_SIZE,
                                           STATE_CHECKSUM_SEED);
    if (stored != computed) {
        error_message(error, error_size,
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
        error_message(error, error_size, "not an adaptshim %s (top level is a %s, not a map)",
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
        error_message(error, error_size, "%s is empty", schema->label);
        return -1;
    }
    char structure_error[256];
    if (msgpack_structure_check(data, size, structure_error, sizeof structure_error) != 0) {
        error_message(error, error_size, "%s: %s", schema->label, structure_error);
        return -1;
    }

    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    msgpack_unpack_return unpack_status = msgpack_unpack_next(&unpacked, data, size, &offset);
    int result = -1;
    if (unpack_status != MSGPACK_UNPACK_SUCCESS || offset != size) {
        error_message(error, error_size, "%s: msgpack rejects the data (%s)", schema->label,
                  unpack_status == MSGPACK_UNPACK_NOMEM_ERROR ? "too deeply nested or out of memory"
                                                              : "parse error");
    } else {
        void *scratch = calloc(1, schema->structure_size);
        if (scratch == NULL) {
            error_message(error, error_size, "%s: out of memory", schema->label);
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

void snapshot_file_name(const struct content_identity *binding, char *name, size_t name_size)
{
    snprintf(name, name_size, SNAPSHOT_FILE_PREFIX "%" PRIu64 "-%016" PRIx64 SNAPSHOT_FILE_SUFFIX,
             binding->size, binding->hash);
}


static int state_save(const char *directory, const char *name, const struct record_schema *schema,
                      const void *structure, char *error, size_t error_size)
{
    void *data;
    size_t size;
    if (state_encode(schema, structure, &data, &size) != 0) {
        int saved_errno = errno;
        error_message(error, error_size, "cannot encode %s for '%s/%s': %s", schema->label, directory,
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
        error_message(error, error_size, "%s file '%s/%s': %s", schema->label, directory, name,
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
        error_message(error, error_size,
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
        error_message(error, error_size, "snapshot file '%s/%s': %s", directory, name, range_error);
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
