/* content_hash.h - the identity of a trainer checkpoint's content
 * (adaptshim(7) "Checkpoint binding"): size plus a fast hash, which binds a snapshot to one
 * checkpoint. */
#ifndef ADAPTSHIM_CONTENT_HASH_H
#define ADAPTSHIM_CONTENT_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Seed of the content identity hash (content_identity_of_fd/_path). */
#define CONTENT_IDENTITY_SEED UINT64_C(0)

/* Identity of a trainer checkpoint's content: size plus a fast hash. */
struct content_identity {
    uint64_t size;
    uint64_t hash;
};

static inline bool content_identity_equal(const struct content_identity *a,
                                   const struct content_identity *b)
{
    return a->size == b->size && a->hash == b->hash;
}

/* Hashes a whole file by descriptor (reads with pread, leaves the offset).
 * Returns 0, or -1 with errno set. */
int content_identity_of_fd(int fd, struct content_identity *identity);
int content_identity_of_path(const char *path, struct content_identity *identity);
/* The hash function itself, over a memory buffer (seeded, streaming-free). */
uint64_t content_hash_bytes(const void *data, size_t size, uint64_t seed);

#endif
