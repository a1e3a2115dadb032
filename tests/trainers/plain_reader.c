/* plain_reader.c - reads a whole file once in one chosen style and reports
 * what it saw; the "transparency" probe for the data views.
 *
 *   plain_reader MODE PATH
 *
 * MODE and the calls it exercises:
 *   read                 open, fstat, read (chunks of 1, 7, 4093, ... bytes), close
 *   pread                open, fstat, pread at increasing offsets, close
 *   readv                open, fstat, readv into three odd-sized buffers, close
 *   stdio-fread          stat, fopen, fread (odd chunk sizes), fclose
 *   stdio-fgets          stat, fopen, fgets (odd buffer sizes), fclose
 *   stdio-getc           stat, fopen, getc, fclose
 *   stdio-getc-unlocked  stat, fopen, flockfile, getc_unlocked, funlockfile, fclose
 *   stdio-fscanf         stat, fopen, fscanf("%s") tokens, fclose
 *   getline              stat, fopen, getline, fclose
 *   mmap                 open, fstat, mmap, munmap, close
 * Output: "size S bytes B hash H", S the size from fstat/stat, B the bytes
 * read and H the 64-bit FNV-1a of those bytes (hex).  In fscanf mode B counts
 * the characters fscanf consumed through the last token and H hashes the
 * tokens, each followed by '\n'.  Errors: a message and exit status 1
 * (2 for usage). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Chunk sizes cycled through by the chunked modes: odd, mixed, unaligned. */
static const size_t chunk_sizes[] = {1, 7, 4093, 1, 65537, 7, 3, 4096, 4093, 2};
#define CHUNK_COUNT (sizeof chunk_sizes / sizeof chunk_sizes[0])
#define MAX_CHUNK 65537

struct digest {
    uint64_t bytes;
    uint64_t hash;
};

static void fail(const char *what, const char *path)
{
    fprintf(stderr, "plain_reader: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void hash_bytes(uint64_t *hash, const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; i++) {
        *hash ^= p[i];
        *hash *= 0x100000001b3ULL;
    }
}

static void digest_add(struct digest *d, const void *data, size_t size)
{
    hash_bytes(&d->hash, data, size);
    d->bytes += size;
}

static int open_or_die(const char *path, off_t *size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        fail("cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0)
        fail("fstat on", path);
    *size = st.st_size;
    return fd;
}

static FILE *fopen_or_die(const char *path, off_t *size)
{
    struct stat st;
    if (stat(path, &st) != 0)
        fail("stat on", path);
    *size = st.st_size;
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        fail("cannot fopen", path);
    return file;
}

static void close_stream(FILE *file, const char *path)
{
    if (ferror(file))
        fail("reading", path);
    if (fclose(file) != 0)
        fail("closing", path);
}

/* One call of a descriptor mode's read function: reads (into its own
 * buffers) what call number `call` reads at offset (read and readv ignore
 * it), digests it and returns the bytes read, 0 at end of file or -1 with
 * errno set. */
typedef ssize_t descriptor_read_call(int fd, size_t call, off_t offset, struct digest *d);

/* read: chunks of the sizes in chunk_sizes. */
static ssize_t call_read(int fd, size_t call, off_t offset, struct digest *d)
{
    static char buffer[MAX_CHUNK];
    (void)offset;
    ssize_t n = read(fd, buffer, chunk_sizes[call % CHUNK_COUNT]);
    if (n > 0)
        digest_add(d, buffer, (size_t)n);
    return n;
}

/* pread: the same chunks, each at the offset after the bytes read so far. */
static ssize_t call_pread(int fd, size_t call, off_t offset, struct digest *d)
{
    static char buffer[MAX_CHUNK];
    ssize_t n = pread(fd, buffer, chunk_sizes[call % CHUNK_COUNT], offset);
    if (n > 0)
        digest_add(d, buffer, (size_t)n);
    return n;
}

/* readv: three odd-sized buffers at a time. */
static ssize_t call_readv(int fd, size_t call, off_t offset, struct digest *d)
{
    static char first[1], second[7], third[4093];
    struct iovec parts[] = {{first, sizeof first}, {second, sizeof second}, {third, sizeof third}};
    (void)call;
    (void)offset;
    ssize_t n = readv(fd, parts, 3);
    ssize_t left = n;
    for (int k = 0; k < 3 && left > 0; k++) {
        size_t used = (size_t)left < parts[k].iov_len ? (size_t)left : parts[k].iov_len;
        digest_add(d, parts[k].iov_base, used);
        left -= (ssize_t)used;
    }
    return n;
}

/* open, fstat, read_call until it returns 0 (again after EINTR), close;
 * an error is "plain_reader: WHAT PATH: ..." and exit status 1. */
static void read_with_descriptor(const char *path, off_t *size, struct digest *d,
                                 descriptor_read_call *read_call, const char *what)
{
    int fd = open_or_die(path, size);
    off_t offset = 0;
    for (size_t i = 0;; i++) {
        ssize_t n = read_call(fd, i, offset, d);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail(what, path);
        if (n == 0)
            break;
        offset += n;
    }
    close(fd);
}

static void read_with_mmap(const char *path, off_t *size, struct digest *d)
{
    int fd = open_or_die(path, size);
    if (*size > 0) {
        void *map = mmap(NULL, (size_t)*size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED)
            fail("mmap of", path);
        digest_add(d, map, (size_t)*size);
        if (munmap(map, (size_t)*size) != 0)
            fail("munmap of", path);
    }
    close(fd);
}

static void read_with_fread(const char *path, off_t *size, struct digest *d)
{
    static char buffer[MAX_CHUNK];
    FILE *file = fopen_or_die(path, size);
    for (size_t i = 0;; i++) {
        size_t n = fread(buffer, 1, chunk_sizes[i % CHUNK_COUNT], file);
        digest_add(d, buffer, n);
        if (n < chunk_sizes[i % CHUNK_COUNT])
            break;
    }
    close_stream(file, path);
}

/* fgets into a buffer pre-filled with 0x01: the last NUL is the terminator,
 * so lines holding NUL bytes are measured right too. */
static void read_with_fgets(const char *path, off_t *size, struct digest *d)
{
    static char buffer[MAX_CHUNK + 1];
    FILE *file = fopen_or_die(path, size);
    for (size_t i = 0;; i++) {
        size_t capacity = chunk_sizes[i % CHUNK_COUNT] + 1;  /* fgets reads at most capacity-1 */
        memset(buffer, 1, capacity);
        if (fgets(buffer, (int)capacity, file) == NULL)
            break;
        size_t length = capacity - 1;
        while (buffer[length] != '\0')
            length--;
        digest_add(d, buffer, length);
    }
    close_stream(file, path);
}

static void read_with_getc(const char *path, off_t *size, struct digest *d, int unlocked)
{
    FILE *file = fopen_or_die(path, size);
    if (unlocked)
        flockfile(file);
    for (;;) {
        int c = unlocked ? getc_unlocked(file) : getc(file);
        if (c == EOF)
            break;
        unsigned char byte = (unsigned char)c;
        digest_add(d, &byte, 1);
    }
    if (unlocked)
        funlockfile(file);
    close_stream(file, path);
}

static void read_with_fscanf(const char *path, off_t *size, struct digest *d)
{
    static char token[4096];
    FILE *file = fopen_or_die(path, size);
    uint64_t consumed = 0;
    int start, end;
    while (fscanf(file, " %n%4095s%n", &start, token, &end) == 1) {
        hash_bytes(&d->hash, token, (size_t)(end - start));
        hash_bytes(&d->hash, "\n", 1);
        consumed += (uint64_t)end;
    }
    d->bytes = consumed;
    close_stream(file, path);
}

static void read_with_getline(const char *path, off_t *size, struct digest *d)
{
    FILE *file = fopen_or_die(path, size);
    char *line = NULL;
    size_t capacity = 0;
    ssize_t n;
    while ((n = getline(&line, &capacity, file)) > 0)
        digest_add(d, line, (size_t)n);
    free(line);
    close_stream(file, path);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: plain_reader MODE PATH\n"
                        "  MODE: read pread readv stdio-fread stdio-fgets stdio-getc "
                        "stdio-getc-unlocked stdio-fscanf getline mmap\n");
        return 2;
    }
    const char *mode = argv[1], *path = argv[2];
    struct digest d = {0, 0xcbf29ce484222325ULL};
    off_t size = 0;
    if (strcmp(mode, "read") == 0) read_with_descriptor(path, &size, &d, call_read, "read on");
    else if (strcmp(mode, "pread") == 0) read_with_descriptor(path, &size, &d, call_pread, "pread on");
    else if (strcmp(mode, "readv") == 0) read_with_descriptor(path, &size, &d, call_readv, "readv on");
    else if (strcmp(mode, "stdio-fread") == 0) read_with_fread(path, &size, &d);
    else if (strcmp(mode, "stdio-fgets") == 0) read_with_fgets(path, &size, &d);
    else if (strcmp(mode, "stdio-getc") == 0) read_with_getc(path, &size, &d, 0);
    else if (strcmp(mode, "stdio-getc-unlocked") == 0) read_with_getc(path, &size, &d, 1);
    else if (strcmp(mode, "stdio-fscanf") == 0) read_with_fscanf(path, &size, &d);
    else if (strcmp(mode, "getline") == 0) read_with_getline(path, &size, &d);
    else if (strcmp(mode, "mmap") == 0) read_with_mmap(path, &size, &d);
    else {
        fprintf(stderr, "plain_reader: unknown mode '%s'\n", mode);
        return 2;
    }
    printf("size %lld bytes %" PRIu64 " hash %016" PRIx64 "\n", (long long)size, d.bytes, d.hash);
    return fflush(stdout) == 0 ? 0 : 1;
}
