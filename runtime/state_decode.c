/* state_decode.c - reading a snapshot or the job record back from the
 * msgpack map of its format (FILE FORMAT in state_schema.c): one decoder per
 * field kind, driven by the same schema table as the encoder, with messages
 * that name the field, as in
 * "snapshot field files[2].name: expected a string, found nil".
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
 *    structure stays zeroed. */
#include "state_schema.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_message.h"
#include "msgpack_check.h"

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

/* Accepted msgpack types as a bit per msgpack_object_type. */
#define TYPE_BIT(type) (UINT32_C(1) << (type))
#define UNSIGNED_INTEGER TYPE_BIT(MSGPACK_OBJECT_POSITIVE_INTEGER)
#define ANY_INTEGER (UNSIGNED_INTEGER | TYPE_BIT(MSGPACK_OBJECT_NEGATIVE_INTEGER))
#define ANY_FLOAT (TYPE_BIT(MSGPACK_OBJECT_FLOAT32) | TYPE_BIT(MSGPACK_OBJECT_FLOAT64))

/* 0 when the object has one of the `accepted` types, else a message that
 * names `wanted` and the type found. */
static int expect_type(struct decode_context *context, const msgpack_object *object,
                       uint32_t accepted, const char *wanted)
{
    if ((unsigned)object->type < 32 && (accepted & TYPE_BIT(object->type)) != 0)
        return 0;
    return decode_fail(context, "expected %s, found %s", wanted, msgpack_type_name(object->type));
}

/* Where a field's value goes: the structure being decoded, the field's entry
 * in its schema, and the schema itself (for the magic text and the label). */
struct field_target {
    const struct record_schema *schema;
    const struct field_spec *field;
    void *structure;
};

static void *target_member(const struct field_target *target)
{
    return member_of(target->structure, target->field->offset);
}

static size_t *target_count(const struct field_target *target)
{
    return member_of(target->structure, target->field->count_offset);
}

/* Stores `object` into the target.  The object's type has already been
 * checked against the kind's accepted types (field_decodings below). */
typedef int (*field_decoder)(const msgpack_object *object, const struct field_target *target,
                             struct decode_context *context);

static int record_unpack(const msgpack_object *object, const struct record_schema *schema,
                         void *structure, struct decode_context *context);

static bool string_object_equals(const msgpack_object *object, const char *text)
{
    size_t length = strlen(text);
    return object->type == MSGPACK_OBJECT_STR && object->via.str.size == length &&
           memcmp(object->via.str.ptr, text, length) == 0;
}

static int decode_magic(const msgpack_object *object, const struct field_target *target,
                        struct decode_context *context)
{
    if (string_object_equals(object, target->schema->magic))
        return 0;
    return decode_fail(context, "not an adaptshim %s", target->schema->label);
}

static int decode_u32(const msgpack_object *object, const struct field_target *target,
                      struct decode_context *context)
{
    if (object->via.u64 > UINT32_MAX)
        return decode_fail(context, "%" PRIu64 " does not fit in 32 bits", object->via.u64);
    *(uint32_t *)target_member(target) = (uint32_t)object->via.u64;
    return 0;
}

static int decode_version(const msgpack_object *object, const struct field_target *target,
                          struct decode_context *context)
{
    if (object->via.u64 != STATE_FORMAT_VERSION)
        return decode_fail(context, "unsupported version %" PRIu64, object->via.u64);
    return decode_u32(object, target, context);
}

static int decode_u64(const msgpack_object *object, const struct field_target *target,
                      struct decode_context *context MAYBE_UNUSED)
{
    *(uint64_t *)target_member(target) = object->via.u64;
    return 0;
}

static int decode_i64(const msgpack_object *object, const struct field_target *target,
                      struct decode_context *context)
{
    if (object->type == MSGPACK_OBJECT_POSITIVE_INTEGER && object->via.u64 > INT64_MAX)
        return decode_fail(context, "%" PRIu64 " does not fit in a signed 64-bit integer",
                           object->via.u64);
    /* A positive integer up to INT64_MAX reads the same through via.i64. */
    *(int64_t *)target_member(target) = object->via.i64;
    return 0;
}

/* msgpack-c holds both float widths in via.f64. */
static int decode_double(const msgpack_object *object, const struct field_target *target,
                         struct decode_context *context MAYBE_UNUSED)
{
    *(double *)target_member(target) = object->via.f64;
    return 0;
}

static int decode_bool(const msgpack_object *object, const struct field_target *target,
                       struct decode_context *context MAYBE_UNUSED)
{
    *(bool *)target_member(target) = object->via.boolean;
    return 0;
}

static int decode_bytes(const msgpack_object *object, const struct field_target *target,
                        struct decode_context *context)
{
    size_t size = object->via.bin.size;
    unsigned char *copy = malloc(size ? size : 1);
    if (copy == NULL)
        return decode_fail(context, "out of memory for %zu bytes", size);
    memcpy(copy, object->via.bin.ptr, size);
    *(unsigned char **)target_member(target) = copy;
    *target_count(target) = size;
    return 0;
}

static int decode_string(const msgpack_object *object, const struct field_target *target,
                         struct decode_context *context)
{
    size_t length = object->via.str.size;
    /* C strings end at the first NUL; one inside would silently cut the name. */
    if (memchr(object->via.str.ptr, '\0', length) != NULL)
        return decode_fail(context, "string contains a NUL byte");
    char *copy = malloc(length + 1);
    if (copy == NULL)
        return decode_fail(context, "out of memory");
    memcpy(copy, object->via.str.ptr, length);
    copy[length] = '\0';
    *(char **)target_member(target) = copy;
    return 0;
}

static int decode_double_vector(const msgpack_object *object, const struct field_target *target,
                                struct decode_context *context)
{
    size_t length = target->field->length;
    if (object->via.array.size != length)
        return decode_fail(context, "expected %zu elements, found %" PRIu32, length,
                           object->via.array.size);
    double *values = target_member(target);
    size_t saved = context_mark(context);
    for (size_t index = 0; index < length; index++) {
        const msgpack_object *element = &object->via.array.ptr[index];
        context_push(context, "[%zu]", index);
        if (expect_type(context, element, ANY_FLOAT, "a float") != 0)
            return -1;
        context_pop(context, saved);
        values[index] = element->via.f64;
    }
    return 0;
}

static int decode_record(const msgpack_object *object, const struct field_target *target,
                         struct decode_context *context)
{
    return record_unpack(object, target->field->element, target_member(target), context);
}

static int decode_record_array(const msgpack_object *object, const struct field_target *target,
                               struct decode_context *context)
{
    size_t count = object->via.array.size;
    const struct record_schema *element = target->field->element;
    /* The count is bounded by the buffer size (msgpack_structure_check). */
    char *elements = count == 0 ? NULL : calloc(count, element->structure_size);
    if (count > 0 && elements == NULL)
        return decode_fail(context, "out of memory for %zu elements", count);
    /* Store array and count first: on a failure half-way, the caller's
     * record_free sees every element decoded so far (and zeroed ones). */
    *(void **)target_member(target) = elements;
    *target_count(target) = count;
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

/* How each field kind is read: the msgpack types it accepts (none means
 * the decoder judges the object itself),
 * what the message calls them, and the decoder. */
struct field_decoding {
    uint32_t accepted_types;
    const char *accepted_text;
    field_decoder decode;
};

static const struct field_decoding field_decodings[FIELD_KIND_COUNT] = {
    [FIELD_MAGIC] = {0, NULL, decode_magic},
    [FIELD_VERSION] = {UNSIGNED_INTEGER, "an unsigned integer", decode_version},
    [FIELD_U32] = {UNSIGNED_INTEGER, "an unsigned integer", decode_u32},
    [FIELD_U64] = {UNSIGNED_INTEGER, "an unsigned integer", decode_u64},
    [FIELD_I64] = {ANY_INTEGER, "an integer", decode_i64},
    [FIELD_DOUBLE] = {ANY_FLOAT, "a float", decode_double},
    [FIELD_BOOL] = {TYPE_BIT(MSGPACK_OBJECT_BOOLEAN), "a boolean", decode_bool},
    [FIELD_STRING] = {TYPE_BIT(MSGPACK_OBJECT_STR), "a string", decode_string},
    [FIELD_DOUBLE_VECTOR] = {TYPE_BIT(MSGPACK_OBJECT_ARRAY), "an array", decode_double_vector},
    [FIELD_RECORD] = {TYPE_BIT(MSGPACK_OBJECT_MAP), "a map", decode_record},
    [FIELD_RECORD_ARRAY] = {TYPE_BIT(MSGPACK_OBJECT_ARRAY), "an array", decode_record_array},
    [FIELD_BYTES] = {TYPE_BIT(MSGPACK_OBJECT_BIN), "binary data", decode_bytes},
};

/* Checks the object's type against the field kind, then decodes it. */
static int decode_field(const msgpack_object *object, const struct field_target *target,
                        struct decode_context *context)
{
    const struct field_decoding *decoding = &field_decodings[target->field->kind];
    if (decoding->accepted_types != 0 &&
        expect_type(context, object, decoding->accepted_types, decoding->accepted_text) != 0)
        return -1;
    return decoding->decode(object, target, context);
}
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
    if (expect_type(context, object, TYPE_BIT(MSGPACK_OBJECT_MAP), "a map") != 0)
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
            status = decode_field(&map->ptr[entry].val,
                                  &(struct field_target){schema, field, structure}, context);
        context_pop(context, saved);
        if (status != 0)
            return -1;
        seen_fields |= UINT64_C(1) << field_index;
    }
    for (size_t index = 0; index < schema->field_count; index++) {
        if (!(seen_fields & (UINT64_C(1) << index)) && !schema->fields[index].optional)
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
int state_decode(const void *data, size_t size, const struct record_schema *schema,
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
