/* state_encode.c - writing a snapshot or the job record as the msgpack map
 * of its format (FILE FORMAT in state_schema.c): one packer per field kind,
 * driven by the schema table, then the fixed 18-byte checksum trailer over
 * everything before it. */
#include "state_schema.h"

#include <errno.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const void *const_member_of(const void *structure, size_t offset)
{
    return (const char *)structure + offset;
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

int state_encode(const struct record_schema *schema, const void *structure, void **data,
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
