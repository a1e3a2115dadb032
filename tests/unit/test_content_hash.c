/* test_content_hash.c - the content hash is XXH64 (runtime/content_hash.h):
 * known values of the reference algorithm, so that a snapshot bound by one
 * build binds in another, and a file hashed in 1 MiB chunks hashes as the
 * same bytes in memory. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "content_hash.h"

Test(content_hash, known_xxh64_values)
{
    cr_expect_eq(content_hash_bytes("", 0, 0), UINT64_C(0xEF46DB3751D8E999));
    cr_expect_eq(content_hash_bytes("abc", 3, 0), UINT64_C(0x44BC2CF5AD770999));
}

Test(content_hash, a_file_hashes_as_its_bytes)
{
    size_t size = (3u << 20) + 17; /* three whole chunks and a tail */
    unsigned char *bytes = malloc(size);
    cr_assert_not_null(bytes);
    for (size_t i = 0; i < size; i++)
        bytes[i] = (unsigned char)(i * 131 + (i >> 12));
    char path[] = "/tmp/adaptshim-hash-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, bytes, size), (ssize_t)size);
    struct content_identity identity;
    cr_assert_eq(content_identity_of_fd(fd, &identity), 0);
    close(fd);
    unlink(path);
    cr_expect_eq(identity.size, size);
    cr_expect_eq(identity.hash, content_hash_bytes(bytes, size, CONTENT_IDENTITY_SEED));
    free(bytes);
}

Test(content_hash, identities_are_equal_only_in_size_and_hash)
{
    struct content_identity a = {.size = 10, .hash = 99};
    struct content_identity same = {.size = 10, .hash = 99};
    struct content_identity other_size = {.size = 11, .hash = 99};
    struct content_identity other_hash = {.size = 10, .hash = 98};
    cr_expect(content_identity_equal(&a, &same));
    cr_expect_not(content_identity_equal(&a, &other_size));
    cr_expect_not(content_identity_equal(&a, &other_hash));
}
