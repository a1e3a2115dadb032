/* state_schema.c - the two state formats (adaptshim(7) "CHECKPOINT BINDING"), bound snapshot and job
 * record, as tables, and freeing and initializing the structures they
 * describe.
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
 * Both formats are described by tables (struct record_schema, state_schema.h):
 * the encoder (state_encode.c) walks the table to write the map, the decoder
 * (state_decode.c) looks every key up in the same table, so the two cannot
 * drift apart.  Unknown keys are ignored (a later build may add fields
 * without a version bump); a known key twice, a missing one (unless the
 * table marks it optional: added later, so older files lack it) or one of
 * the wrong type is an error.
 *
 * The content hash, behind both the checksum and the content identities, is
 * XXH64 from libxxhash: see content_hash.c. */
#include "state_schema.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define SNAPSHOT_MAGIC "adaptshim-snapshot"
#define JOB_RECORD_MAGIC "adaptshim-job"


/* ------------------------------------------------------------------------- */
/* Schemas: the tables that define both formats                                */
/* ------------------------------------------------------------------------- */
#define MEMBER_SIZE(type, member) sizeof(((type *)0)->member)
#define FIELD(type, member, field_kind)                                                 \
    { .name = #member, .kind = field_kind, .offset = offsetof(type, member),            \
      .member_size = MEMBER_SIZE(type, member) }
#define RECORD_ARRAY(type, member, counter, schema)                                     \
    { .name = #member, .kind = FIELD_RECORD_ARRAY, .offset = offsetof(type, member),    \
      .member_size = MEMBER_SIZE(type, member), .count_offset = offsetof(type, counter), \
      .element = &schema }
#define BYTES(type, member, counter)                                                    \
    { .name = #member, .kind = FIELD_BYTES, .offset = offsetof(type, member),           \
      .member_size = MEMBER_SIZE(type, member), .count_offset = offsetof(type, counter) }

/* Added after format version 1 was first written: older files lack it. */
#define OPTIONAL_BYTES(type, member, counter)                                           \
    { .name = #member, .kind = FIELD_BYTES, .offset = offsetof(type, member),           \
      .member_size = MEMBER_SIZE(type, member), .count_offset = offsetof(type, counter), \
      .optional = true }

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
    OPTIONAL_BYTES(struct snapshot_file_position, delivered_after, delivered_after_size),
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
      .member_size = MEMBER_SIZE(struct adaptdl_snapshot, binding),
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
const struct record_schema snapshot_schema = {
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
      .member_size = MEMBER_SIZE(struct adaptdl_job_record, perf_params),
      .length = COUNT_OF(((struct adaptdl_job_record *)0)->perf_params) },
};
const struct record_schema job_record_schema = {
    "job record", JOB_RECORD_MAGIC, sizeof(struct adaptdl_job_record),
    COUNT_OF(job_record_fields), job_record_fields,
};

/* The decoder tracks seen fields in a 64-bit mask. */
_Static_assert(COUNT_OF(snapshot_fields) <= 64 && COUNT_OF(job_record_fields) <= 64,
               "too many fields for the seen-mask");

void *member_of(void *structure, size_t offset)
{
    return (char *)structure + offset;
}

/* ------------------------------------------------------------------------- */
/* Freeing, driven by the schema                                              */
/* ------------------------------------------------------------------------- */

static void record_array_free(const struct record_schema *element, void *elements, size_t count)
{
    if (elements == NULL)
        return;
    for (size_t index = 0; index < count; index++)
        record_free_members(element, (char *)elements + index * element->structure_size);
    free(elements);
}

void record_free_members(const struct record_schema *schema, void *structure)
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
