/* bench_view_read.c - throughput of reading one replica's shuffled shard of a
 * dataset, for adaptshim(7) "Benchmarks".  Three ways that deliver the same bytes:
 *   view  - the trainer-like way under the shim: read(2) of batches of whole
 *           records from the view, in order (run with LD_PRELOAD and
 *           ADAPTDL_DATA set);
 *   pread - a plain program that preads each record of the same order;
 *   mmap  - a plain program that maps the file and copies each record.
 * The order of the plain programs comes from the runtime's own permutation.
 *
 * And readers whose reads are not whole records, each run twice: under the
 * shim on the view (view-*: to the end of the view), and plain on the file
 * (plain-*: as many bytes as the view holds, in file order -- the same reads
 * the program makes without the shim):
 *   *-chunks  - read(2) of 8 KiB buffers, a reader with a buffer of its own
 *               (C++'s filebuf, Python with buffering=8192);
 *   *-blksize - read(2) of buffers of fstat's st_blksize, as the
 *               BufferedReader of Python's open(path, 'rb') refills (the shim
 *               reports the record size there);
 *   *-stdio   - fopen and fread of one record at a time through stdio.
 * Prints "MODE records/s checksum records-per-call" ("-" for the mapping, which
 * makes no calls).
 *
 * usage: bench_view_read MODE PATH RECORD HEADER REPLICAS RANK SEED */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "permutation.h"

struct bench_setup {
    const char *mode;
    const char *path;
    uint64_t record_size;
    uint64_t header_size;
    uint64_t replicas;
    uint64_t rank;
    uint64_t seed;
    uint64_t record_count;
};

/* What a reader did: records read, and the calls it made to get them
 * (read(2), pread or fread; none for the mapping). */
struct bench_result {
    uint64_t records;
    uint64_t calls;
};

static uint64_t bench_view(const struct bench_setup *setup, bool plain,
                           struct bench_result *result)
{
    int fd = open(setup->path, O_RDONLY);
    if (fd < 0) {
        perror(setup->path);
        exit(1);
    }
    uint64_t batch_records = (1u << 16) / setup->record_size;
    if (batch_records == 0)
        batch_records = 1;
    size_t batch_size = batch_records * setup->record_size;
    unsigned char *buffer = malloc(batch_size);
    unsigned char header[4096];
    if (setup->header_size && read(fd, header, setup->header_size) != (ssize_t)setup->header_size)
        exit(1);
    uint64_t sum = 0;
    uint64_t total = 0;
    for (;;) {
        ssize_t got = read(fd, buffer, batch_size);
        result->calls++;
        if (got <= 0)
            break;
        sum = bench_checksum(sum, buffer, (uint64_t)got);
        total += (uint64_t)got;
    }
    close(fd);
    free(buffer);
    result->records = total / setup->record_size;
    return sum;
}

/* Python's io.DEFAULT_BUFFER_SIZE and C++'s BUFSIZ, a size most records do
 * not divide */
#define BENCH_CHUNK_SIZE 8192

/* The bytes a plain-* reader reads: header and one replica's share, as the
 * view under the shim shows them.  0 for view-* readers: to the end. */
static uint64_t bench_byte_limit(const struct bench_setup *setup, bool plain)
{
    if (!plain)
        return 0;
    return setup->header_size +
           view_length(setup->record_count, setup->replicas, 0) * setup->record_size;
}

/* read(2) of `chunk_size` buffers until the end (or the byte limit). */
static uint64_t bench_read_buffers(const struct bench_setup *setup, int fd, bool plain,
                                   size_t chunk_size, struct bench_result *result)
{
    uint64_t limit = bench_byte_limit(setup, plain);
    unsigned char *buffer = malloc(chunk_size);
    uint64_t sum = 0;
    uint64_t total = 0;
    while (limit == 0 || total < limit) {
        size_t want = chunk_size;
        if (limit != 0 && limit - total < want)
            want = (size_t)(limit - total);
        ssize_t got = read(fd, buffer, want);
        result->calls++;
        if (got < 0) {
            perror(setup->path);
            exit(1);
        }
        if (got == 0)
            break;
        sum = bench_checksum(sum, buffer, (uint64_t)got);
        total += (uint64_t)got;
    }
    free(buffer);
    result->records = (total - setup->header_size) / setup->record_size;
    return sum;
}

static int bench_open(const struct bench_setup *setup)
{
    int fd = open(setup->path, O_RDONLY);
    if (fd < 0) {
        perror(setup->path);
        exit(1);
    }
    return fd;
}

/* read(2) of BENCH_CHUNK_SIZE buffers, whatever the record size. */
static uint64_t bench_chunks(const struct bench_setup *setup, bool plain,
                             struct bench_result *result)
{
    int fd = bench_open(setup);
    uint64_t sum = bench_read_buffers(setup, fd, plain, BENCH_CHUNK_SIZE, result);
    close(fd);
    return sum;
}

/* read(2) of buffers sized as Python's open() sizes them: st_blksize when it
 * is above 1, io.DEFAULT_BUFFER_SIZE otherwise. */
static uint64_t bench_blksize(const struct bench_setup *setup, bool plain,
                              struct bench_result *result)
{
    int fd = bench_open(setup);
    struct stat status;
    if (fstat(fd, &status) != 0) {
        perror(setup->path);
        exit(1);
    }
    size_t chunk_size = status.st_blksize > 1 ? (size_t)status.st_blksize : BENCH_CHUNK_SIZE;
    uint64_t sum = bench_read_buffers(setup, fd, plain, chunk_size, result);
    close(fd);
    return sum;
}

/* fopen, the header, then fread of one record at a time until the end. */
static uint64_t bench_stdio(const struct bench_setup *setup, bool plain,
                            struct bench_result *result)
{
    FILE *stream = fopen(setup->path, "rb");
    if (stream == NULL) {
        perror(setup->path);
        exit(1);
    }
    uint64_t limit = bench_byte_limit(setup, plain);
    uint64_t record_limit =
        limit == 0 ? UINT64_MAX : (limit - setup->header_size) / setup->record_size;
    unsigned char header[4096];
    unsigned char *record = malloc(setup->record_size);
    if (setup->header_size &&
        fread(header, 1, setup->header_size, stream) != setup->header_size)
        exit(1);
    uint64_t sum = 0;
    uint64_t count = 0;
    while (count < record_limit) {
        result->calls++;
        if (fread(record, setup->record_size, 1, stream) != 1)
            break;
        sum = bench_checksum(sum, record, setup->record_size);
        count++;
    }
    fclose(stream);
    free(record);
    result->records = count;
    return sum;
}

static uint64_t bench_physical_record(const struct bench_setup *setup,
                                      const struct record_permutation *permutation, uint64_t j)
{
    uint64_t logical = view_logical_index(setup->record_count, setup->replicas, setup->rank,
                                          0, j);
    return record_permutation_apply(permutation, logical);
}

/* Where the pread and mmap readers take a record from: the descriptor, or
 * the mapping when map is not NULL. */
struct bench_source {
    int fd;
    const unsigned char *map;
};

/* Reads every record of this rank's view in the view's order, as a program
 * that does the permutation itself would: one pread per record, or one copy
 * out of the mapping (the choice is a branch that goes the same way every
 * time). */
static uint64_t bench_in_view_order(const struct bench_setup *setup,
                                    const struct bench_source *source,
                                    struct bench_result *result)
{
    struct record_permutation permutation;
    const char *slash = strrchr(setup->path, '/');
    record_permutation_init(&permutation, setup->record_count, true, setup->seed,
                            slash ? slash + 1 : setup->path, 0, 0);
    uint64_t length = view_length(setup->record_count, setup->replicas, 0);
    unsigned char *buffer = malloc(setup->record_size);
    uint64_t sum = 0;
    for (uint64_t j = 0; j < length; j++) {
        uint64_t physical = bench_physical_record(setup, &permutation, j);
        uint64_t offset = setup->header_size + physical * setup->record_size;
        if (source->map != NULL) {
            memcpy(buffer, source->map + offset, setup->record_size);
        } else {
            if (pread(source->fd, buffer, setup->record_size, (off_t)offset) !=
                (ssize_t)setup->record_size)
                exit(1);
            result->calls++;
        }
        sum = bench_checksum(sum, buffer, setup->record_size);
    }
    free(buffer);
    result->records = length;
    return sum;
}

static uint64_t bench_pread(const struct bench_setup *setup, bool plain,
                            struct bench_result *result)
{
    struct bench_source source = {open(setup->path, O_RDONLY), NULL};
    uint64_t sum = bench_in_view_order(setup, &source, result);
    close(source.fd);
    return sum;
}

static uint64_t bench_mmap(const struct bench_setup *setup, bool plain,
                           struct bench_result *result)
{
    int fd = open(setup->path, O_RDONLY);
    struct stat status;
    fstat(fd, &status);
    const unsigned char *map = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    struct bench_source source = {-1, map};
    uint64_t sum = bench_in_view_order(setup, &source, result);
    munmap((void *)map, (size_t)status.st_size);
    return sum;
}

/* Every reader takes `plain` (whether it reads the file without the shim);
 * those with one way of reading ignore it. */
struct bench_mode {
    const char *name;
    uint64_t (*run)(const struct bench_setup *setup, bool plain, struct bench_result *result);
    bool plain;     /* read the file without the shim: stop at the view's size */
};

static const struct bench_mode bench_modes[] = {
    {"view", bench_view, false},
    {"pread", bench_pread, true},
    {"mmap", bench_mmap, true},
    {"view-chunks", bench_chunks, false},
    {"plain-chunks", bench_chunks, true},
    {"view-blksize", bench_blksize, false},
    {"plain-blksize", bench_blksize, true},
    {"view-stdio", bench_stdio, false},
    {"plain-stdio", bench_stdio, true},
};

static const struct bench_mode *bench_mode_find(const char *name)
{
    for (size_t i = 0; i < sizeof bench_modes / sizeof bench_modes[0]; i++)
        if (strcmp(bench_modes[i].name, name) == 0)
            return &bench_modes[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr,
                "usage: %s view|pread|mmap|{view,plain}-{chunks,blksize,stdio} "
                "PATH RECORD HEADER REPLICAS RANK SEED\n",
                argv[0]);
        return 2;
    }
    struct bench_setup setup = {
        .mode = argv[1],
        .path = argv[2],
        .record_size = strtoull(argv[3], NULL, 10),
        .header_size = strtoull(argv[4], NULL, 10),
        .replicas = strtoull(argv[5], NULL, 10),
        .rank = strtoull(argv[6], NULL, 10),
        .seed = strtoull(argv[7], NULL, 10),
    };
    const struct bench_mode *mode = bench_mode_find(setup.mode);
    if (mode == NULL) {
        fprintf(stderr, "bench_view_read: unknown mode '%s'; accepted: view, pread, mmap, "
                        "view- or plain- followed by chunks, blksize or stdio\n", setup.mode);
        return 2;
    }
    if (setup.record_size == 0 || setup.header_size > 4096) {
        fprintf(stderr, "bench_view_read: RECORD must be at least 1 and HEADER at most 4096\n");
        return 2;
    }
    struct stat status;
    if (stat(setup.path, &status) != 0) {
        perror(setup.path);
        return 1;
    }
    /* the physical record count: under the shim stat shows the view, so the
     * plain modes are the ones that need it */
    setup.record_count = ((uint64_t)status.st_size - setup.header_size) / setup.record_size;
    struct bench_result result = {0, 0};
    double start = bench_monotonic_seconds();
    uint64_t sum = mode->run(&setup, mode->plain, &result);
    double elapsed = bench_monotonic_seconds() - start;
    char per_call[32] = "-";
    if (result.calls != 0)
        snprintf(per_call, sizeof per_call, "%.1f", (double)result.records / (double)result.calls);
    printf("%s %.0f %016" PRIx64 " %s\n", setup.mode, (double)result.records / elapsed, sum,
           per_call);
    return 0;
}
