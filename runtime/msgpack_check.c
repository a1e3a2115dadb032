/* msgpack_check.c - the structural pass over raw msgpack bytes that comes
 * before any decoding of a state file (see msgpack_check.h). */
#include "msgpack_check.h"

#include <inttypes.h>
#include <stdbool.h>

#include "error_message.h"


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

uint64_t msgpack_read_big_endian(const unsigned char *bytes, size_t count)
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
int msgpack_structure_check(const unsigned char *data, size_t size, char *error,
                                   size_t error_size)
{
    uint64_t objects_owed = 1;
    size_t cursor = 0;
    while (objects_owed > 0) {
        if (cursor >= size) {
            error_message(error, error_size, "truncated: %zu bytes end inside the msgpack object", size);
            return -1;
        }
        size_t token_start = cursor;
        unsigned char type = data[cursor++];
        uint64_t length;
        struct token_layout layout = token_layout_of(type, &length);
        if (layout.shape == SHAPE_INVALID) {
            error_message(error, error_size, "invalid msgpack type byte 0x%02x at offset %zu", type,
                      token_start);
            return -1;
        }
        if (size - cursor < layout.length_bytes) {
            error_message(error, error_size, "truncated: length field at offset %zu is cut off",
                      token_start);
            return -1;
        }
        if (layout.length_bytes > 0)
            length = msgpack_read_big_endian(data + cursor, layout.length_bytes);
        cursor += layout.length_bytes;
        objects_owed--;
        uint64_t remaining = size - cursor;
        switch (layout.shape) {
        case SHAPE_SCALAR:
        case SHAPE_BLOB: {
            uint64_t payload = layout.fixed_bytes + (layout.shape == SHAPE_BLOB ? length : 0);
            if (payload > remaining) {
                error_message(error, error_size,
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
                error_message(error, error_size,
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
        error_message(error, error_size, "%zu trailing bytes after the msgpack object", size - cursor);
        return -1;
    }
    return 0;
}

