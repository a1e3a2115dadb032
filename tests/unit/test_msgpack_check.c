/* test_msgpack_check.c - the structural pass over raw msgpack bytes that
 * comes before a state file is unpacked (runtime/msgpack_check.h).
 *
 * msgpack-c allocates every array and map from its header count, so a
 * flipped count byte in a snapshot could ask for gigabytes: this pass must
 * accept exactly one complete object of every msgpack type, and reject a
 * buffer that ends inside one, holds more after it, uses the never-used
 * type byte, or claims more entries or bytes than are left, with a
 * message that says which and where.  The big-endian length fields are
 * read by msgpack_read_big_endian, which the checksum trailer uses too. */
#include <criterion/criterion.h>

#include <msgpack.h>
#include <stdint.h>
#include <string.h>

#include "msgpack_check.h"

#define BYTES(...) ((const unsigned char[]){__VA_ARGS__})
#define SIZE(...) sizeof((const unsigned char[]){__VA_ARGS__})
/* Checks a literal byte string; the message lands in `error`. */
#define CHECK(error, ...) \
    msgpack_structure_check(BYTES(__VA_ARGS__), SIZE(__VA_ARGS__), error, sizeof error)

Test(msgpack_read_big_endian, reads_the_length_fields_of_every_width)
{
    static const unsigned char bytes[] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x11};
    cr_expect_eq(msgpack_read_big_endian(bytes, 0), 0, "no bytes: 0");
    cr_expect_eq(msgpack_read_big_endian(bytes, 1), 0x12);
    cr_expect_eq(msgpack_read_big_endian(bytes, 2), 0x1234, "the first byte is the high one");
    cr_expect_eq(msgpack_read_big_endian(bytes, 4), UINT64_C(0x12345678));
    cr_expect_eq(msgpack_read_big_endian(bytes, 8), UINT64_C(0x123456789abcdef0),
                 "nothing past the count is read");
    cr_expect_eq(msgpack_read_big_endian(bytes + 7, 2), 0xf011, "unaligned");
    static const unsigned char all_ones[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    cr_expect_eq(msgpack_read_big_endian(all_ones, 8), UINT64_MAX);
    cr_expect_eq(msgpack_read_big_endian(all_ones, 4), UINT32_MAX);
}

Test(msgpack_structure_check, accepts_one_complete_object_of_every_type)
{
    char error[256] = "";
    cr_expect_eq(CHECK(error, 0x00), 0, "positive fixint: %s", error);
    cr_expect_eq(CHECK(error, 0x7f), 0, "%s", error);
    cr_expect_eq(CHECK(error, 0xe0), 0, "negative fixint: %s", error);
    cr_expect_eq(CHECK(error, 0xc0), 0, "nil: %s", error);
    cr_expect_eq(CHECK(error, 0xc2), 0, "false: %s", error);
    cr_expect_eq(CHECK(error, 0xc3), 0, "true: %s", error);
    cr_expect_eq(CHECK(error, 0xcc, 0xff), 0, "uint 8: %s", error);
    cr_expect_eq(CHECK(error, 0xcd, 1, 2), 0, "uint 16: %s", error);
    cr_expect_eq(CHECK(error, 0xce, 1, 2, 3, 4), 0, "uint 32: %s", error);
    cr_expect_eq(CHECK(error, 0xcf, 1, 2, 3, 4, 5, 6, 7, 8), 0, "uint 64: %s", error);
    cr_expect_eq(CHECK(error, 0xd0, 0x80), 0, "int 8: %s", error);
    cr_expect_eq(CHECK(error, 0xd1, 1, 2), 0, "int 16: %s", error);
    cr_expect_eq(CHECK(error, 0xd2, 1, 2, 3, 4), 0, "int 32: %s", error);
    cr_expect_eq(CHECK(error, 0xd3, 1, 2, 3, 4, 5, 6, 7, 8), 0, "int 64: %s", error);
    cr_expect_eq(CHECK(error, 0xca, 1, 2, 3, 4), 0, "float 32: %s", error);
    cr_expect_eq(CHECK(error, 0xcb, 1, 2, 3, 4, 5, 6, 7, 8), 0, "float 64: %s", error);
    cr_expect_eq(CHECK(error, 0xa0), 0, "empty fixstr: %s", error);
    cr_expect_eq(CHECK(error, 0xa3, 'a', 'b', 'c'), 0, "fixstr: %s", error);
    cr_expect_eq(CHECK(error, 0xd9, 2, 'a', 'b'), 0, "str 8: %s", error);
    cr_expect_eq(CHECK(error, 0xda, 0, 1, 'a'), 0, "str 16: %s", error);
    cr_expect_eq(CHECK(error, 0xdb, 0, 0, 0, 1, 'a'), 0, "str 32: %s", error);
    cr_expect_eq(CHECK(error, 0xc4, 0), 0, "empty bin 8: %s", error);
    cr_expect_eq(CHECK(error, 0xc5, 0, 2, 9, 9), 0, "bin 16: %s", error);
    cr_expect_eq(CHECK(error, 0xc6, 0, 0, 0, 1, 9), 0, "bin 32: %s", error);
    cr_expect_eq(CHECK(error, 0xc7, 2, 5, 9, 9), 0, "ext 8 (length, type, data): %s", error);
    cr_expect_eq(CHECK(error, 0xc8, 0, 1, 5, 9), 0, "ext 16: %s", error);
    cr_expect_eq(CHECK(error, 0xc9, 0, 0, 0, 0, 5), 0, "empty ext 32: %s", error);
    cr_expect_eq(CHECK(error, 0xd4, 5, 9), 0, "fixext 1 (type, data): %s", error);
    cr_expect_eq(CHECK(error, 0xd5, 5, 9, 9), 0, "fixext 2: %s", error);
    cr_expect_eq(CHECK(error, 0xd6, 5, 9, 9, 9, 9), 0, "fixext 4: %s", error);
    cr_expect_eq(CHECK(error, 0xd7, 5, 1, 2, 3, 4, 5, 6, 7, 8), 0, "fixext 8: %s", error);
    cr_expect_eq(CHECK(error, 0xd8, 5, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8), 0,
                 "fixext 16: %s", error);
    cr_expect_eq(CHECK(error, 0x90), 0, "empty fixarray: %s", error);
    cr_expect_eq(CHECK(error, 0x92, 0x01, 0xc0), 0, "fixarray: %s", error);
    cr_expect_eq(CHECK(error, 0xdc, 0, 2, 0x01, 0x02), 0, "array 16: %s", error);
    cr_expect_eq(CHECK(error, 0xdd, 0, 0, 0, 1, 0x01), 0, "array 32: %s", error);
    cr_expect_eq(CHECK(error, 0x80), 0, "empty fixmap: %s", error);
    cr_expect_eq(CHECK(error, 0x81, 0xa1, 'k', 0x05), 0, "fixmap: %s", error);
    cr_expect_eq(CHECK(error, 0xde, 0, 1, 0x01, 0x02), 0, "map 16: %s", error);
    cr_expect_eq(CHECK(error, 0xdf, 0, 0, 0, 1, 0x01, 0x02), 0, "map 32: %s", error);
    /* containers in containers */
    cr_expect_eq(CHECK(error, 0x82, 0xa1, 'a', 0x92, 0x90, 0x80, 0xa1, 'b',
                       0x81, 0x01, 0x91, 0xc4, 1, 7), 0, "nested: %s", error);
}

Test(msgpack_structure_check, accepts_what_msgpack_c_packs)
{
    msgpack_sbuffer buffer;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer packer;
    msgpack_packer_init(&packer, &buffer, msgpack_sbuffer_write);
    msgpack_pack_map(&packer, 3);
    msgpack_pack_str_with_body(&packer, "values", 6);
    msgpack_pack_array(&packer, 300);           /* array 16 */
    for (int i = 0; i < 300; i++)
        msgpack_pack_int64(&packer, (int64_t)i * -100000);
    msgpack_pack_str_with_body(&packer, "blob", 4);
    static const char blob[70000] = {1};        /* bin 32 */
    msgpack_pack_bin_with_body(&packer, blob, sizeof blob);
    msgpack_pack_str_with_body(&packer, "x", 1);
    msgpack_pack_double(&packer, 0.5);
    char error[256] = "";
    cr_expect_eq(msgpack_structure_check((const unsigned char *)buffer.data, buffer.size, error,
                                         sizeof error), 0, "%s", error);
    msgpack_sbuffer_destroy(&buffer);
}

Test(msgpack_structure_check, every_truncation_of_an_object_is_rejected)
{
    static const unsigned char object[] = {
        0x83, 0xa1, 'a', 0xdc, 0, 2, 0xcd, 1, 2, 0xc0,
        0xa1, 'b', 0xc7, 2, 5, 9, 9,
        0xa1, 'c', 0x81, 0xd9, 1, 'k', 0xcb, 1, 2, 3, 4, 5, 6, 7, 8};
    char error[256] = "";
    cr_assert_eq(msgpack_structure_check(object, sizeof object, error, sizeof error), 0, "%s",
                 error);
    for (size_t size = 0; size < sizeof object; size++) {
        error[0] = '\0';
        cr_expect_eq(msgpack_structure_check(object, size, error, sizeof error), -1,
                     "cut at %zu accepted", size);
        cr_expect_not_null(strstr(error, "truncated"), "cut at %zu: %s", size, error);
    }
}

Test(msgpack_structure_check, truncations_are_named_with_their_offset)
{
    char error[256] = "";
    cr_expect_eq(msgpack_structure_check(BYTES(0x01), 0, error, sizeof error), -1);
    cr_expect_str_eq(error, "truncated: 0 bytes end inside the msgpack object");
    cr_expect_eq(CHECK(error, 0x92, 0xcd, 0x01, 0x02), -1);
    cr_expect_str_eq(error, "truncated: 4 bytes end inside the msgpack object",
                     "an array one element short");
    cr_expect_eq(CHECK(error, 0x91, 0xdc, 0x00), -1);
    cr_expect_str_eq(error, "truncated: length field at offset 1 is cut off");
    cr_expect_eq(CHECK(error, 0x92, 0x01, 0xcd, 0x01), -1);
    cr_expect_str_eq(error, "truncated or corrupt: object at offset 2 needs 2 bytes, 1 remain");
    cr_expect_eq(CHECK(error, 0xa5, 'a', 'b'), -1);
    cr_expect_str_eq(error, "truncated or corrupt: object at offset 0 needs 5 bytes, 2 remain");
    cr_expect_eq(CHECK(error, 0xc7, 3, 5, 9, 9), -1, "ext 8 counts its type byte too");
    cr_expect_str_eq(error, "truncated or corrupt: object at offset 0 needs 4 bytes, 3 remain");
}

Test(msgpack_structure_check, a_count_larger_than_the_bytes_left_is_rejected_at_once)
{
    char error[256] = "";
    cr_expect_eq(CHECK(error, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02), -1);
    cr_expect_str_eq(error, "truncated or corrupt: array at offset 0 has 4294967295 entries, "
                            "only 2 bytes remain");
    /* a map owes two objects an entry: 2 entries need at least 4 bytes */
    cr_expect_eq(CHECK(error, 0x82, 0x01, 0x02, 0x03), -1);
    cr_expect_str_eq(error, "truncated or corrupt: map at offset 0 has 2 entries, only 3 bytes "
                            "remain");
    cr_expect_eq(CHECK(error, 0x81, 0x01, 0xdf, 0x80, 0x00, 0x00, 0x00), -1);
    cr_expect_str_eq(error, "truncated or corrupt: map at offset 2 has 2147483648 entries, "
                            "only 0 bytes remain");
    cr_expect_eq(CHECK(error, 0xc6, 0xff, 0xff, 0xff, 0xff, 0x00), -1, "a lying bin 32");
    cr_expect_str_eq(error, "truncated or corrupt: object at offset 0 needs 4294967295 bytes, "
                            "1 remain");
}

Test(msgpack_structure_check, the_never_used_type_byte_is_rejected)
{
    char error[256] = "";
    cr_expect_eq(CHECK(error, 0xc1), -1);
    cr_expect_str_eq(error, "invalid msgpack type byte 0xc1 at offset 0");
    cr_expect_eq(CHECK(error, 0x92, 0x01, 0xc1), -1);
    cr_expect_str_eq(error, "invalid msgpack type byte 0xc1 at offset 2");
}

Test(msgpack_structure_check, bytes_after_the_object_are_rejected)
{
    char error[256] = "";
    cr_expect_eq(CHECK(error, 0x01, 0x02), -1);
    cr_expect_str_eq(error, "1 trailing bytes after the msgpack object");
    cr_expect_eq(CHECK(error, 0x90, 0x90, 0x90, 0x90), -1);
    cr_expect_str_eq(error, "3 trailing bytes after the msgpack object");
}

Test(msgpack_structure_check, works_without_an_error_buffer)
{
    cr_expect_eq(msgpack_structure_check(BYTES(0xc1), 1, NULL, 0), -1);
    cr_expect_eq(msgpack_structure_check(BYTES(0x91, 0x01), 2, NULL, 0), 0);
    char error[4] = "";
    cr_expect_eq(msgpack_structure_check(BYTES(0x01, 0x02), 2, error, sizeof error), -1);
    cr_expect_str_eq(error, "1 t", "cut to the buffer, terminated");
}
