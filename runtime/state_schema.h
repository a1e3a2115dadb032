/* state_schema.h - what the state formats' encoder (state_encode.c) and
 * decoder (state_decode.c) share: the schema tables that define both formats
 * (state_schema.c), the helpers that walk them, and the two entry points the
 * save and load of state_store.c call.  Internal to the runtime; the public
 * interface is state_records.h (the structures, their encoding) and
 * state_store.h (their files).  Only the codec and state_store.c include
 * it; it includes state_records.h, never state_store.h. */
#ifndef ADAPTSHIM_STATE_SCHEMA_H
#define ADAPTSHIM_STATE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "state_records.h"

/* Table-driven handlers share one signature; not every one needs every argument. */
#define MAYBE_UNUSED __attribute__((unused))

#define CHECKSUM_KEY "checksum"

_Static_assert(sizeof(CHECKSUM_KEY) - 1 + 1 + 1 + 8 == STATE_CHECKSUM_TRAILER_SIZE,
               "checksum trailer layout");

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
    size_t member_size;                   /* sizeof the member: it must fit the kind */
    size_t count_offset;                  /* FIELD_RECORD_ARRAY, FIELD_BYTES: its size_t count */
    size_t length;                        /* FIELD_DOUBLE_VECTOR */
    const struct record_schema *element;  /* FIELD_RECORD, FIELD_RECORD_ARRAY */
    bool optional;                        /* a map without it decodes as zero */
};

struct record_schema {
    const char *label;          /* used in messages: "snapshot", "file position" */
    const char *magic;          /* top-level schemas only */
    size_t structure_size;
    size_t field_count;
    const struct field_spec *fields;
};

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* The top-level schemas (state_schema.c). */
extern const struct record_schema snapshot_schema;
extern const struct record_schema job_record_schema;

void *member_of(void *structure, size_t offset);
/* Frees what the members of one structure own, following `schema`. */
void record_free_members(const struct record_schema *schema, void *structure);

/* Encodes `structure` as a checksummed msgpack map (state_encode.c): 0, or
 * -1 with errno (EINVAL, ENOMEM) and *data NULL. */
int state_encode(const struct record_schema *schema, const void *structure, void **data,
                 size_t *size);
/* Decodes a whole state buffer into `structure`, which is zeroed first and
 * filled only on success (state_decode.c): 0, or -1 with a one-line message. */
int state_decode(const void *data, size_t size, const struct record_schema *schema,
                 void *structure, char *error, size_t error_size);

#endif
