/* content_hash.c - the identity of a trainer checkpoint's content: its size
 * plus a fast seeded hash, streamed over the file (see content_hash.h). */
#include "content_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sysio.h"

#define CONTENT_HASH_CHUNK_SIZE ((size_t)1 << 20)
#define CONTENT_HASH_STRIPE_SIZE 32u

_Static_assert(CONTENT_HASH_CHUNK_SIZE % CONTENT_HASH_STRIPE_SIZE == 0,
               "file chunks must hold whole stripes for the hash to stream");


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

