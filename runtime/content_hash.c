/* content_hash.c - the identity of a trainer checkpoint's content: its size
 * plus XXH64 (libxxhash), streamed over the file (see content_hash.h). */
#include "content_hash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "sysio.h"

#define CONTENT_HASH_CHUNK_SIZE ((size_t)1 << 20)

uint64_t content_hash_bytes(const void *data, size_t size, uint64_t seed)
{
    return XXH64(data, size, seed);
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
    XXH64_state_t *hasher = XXH64_createState();
    if (chunk == NULL || hasher == NULL || XXH64_reset(hasher, CONTENT_IDENTITY_SEED) != XXH_OK) {
        free(chunk);
        XXH64_freeState(hasher);
        errno = ENOMEM;
        return -1;
    }
    uint64_t offset = 0;
    for (;;) {
        /* pread leaves the descriptor's offset alone: the trainer may be
         * in the middle of reading the very file we identify. */
        ssize_t got = sysio_pread_full(fd, chunk, CONTENT_HASH_CHUNK_SIZE, (off_t)offset);
        if (got < 0) {
            int saved_errno = errno;
            free(chunk);
            XXH64_freeState(hasher);
            errno = saved_errno;
            return -1;
        }
        XXH64_update(hasher, chunk, (size_t)got);
        offset += (uint64_t)got;
        /* sysio_pread_full is short only at end of file */
        if ((size_t)got < CONTENT_HASH_CHUNK_SIZE)
            break;
    }
    identity->hash = XXH64_digest(hasher);
    identity->size = offset;
    XXH64_freeState(hasher);
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

