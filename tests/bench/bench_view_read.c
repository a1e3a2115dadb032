/* bench_view_read.c - throughput of reading one replica's shuffled shard of a
 * dataset, three ways, for SPEC §10:
 *   view  - the trainer-like way under the shim: read(2) of batches from the
 *           view, in order (run with LD_PRELOAD and ADAPTDL_DATA set);
 *   pread - a plain program that preads each record of the same order;
 *   mmap  - a plain program that maps the file and copies each record.
 * The order of the plain programs comes from the runtime's own permutation,
 * so all three deliver the same bytes.  Prints "MODE records/s checksum".
 *
 * usage: bench_view_read MODE PATH RECORD HEADER REPLICAS RANK SEED */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

static double bench_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static uint64_t bench_checksum(uint64_t sum, const unsigned char *data, uint64_t size)
{
    /* touch one word per 64 bytes so the copy cannot be optimized away */
    for (uint64_t i = 0; i + 8 <= size; i += 64) {
        uint64_t word;
        memcpy(&word, data + i, sizeof word);
        sum = sum * 31 + word;
    }
    return sum;
}

static uint64_t bench_view(const struct bench_setup *setup, uint64_t *records)
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
        if (got <= 0)
            break;
        sum = bench_checksum(sum, buffer, (uint64_t)got);
        total += (uint64_t)got;
    }
    close(fd);
    free(buffer);
    *records = total / setup->record_size;
    return sum;
}

static uint64_t bench_physical_record(const struct bench_setup *setup,
                                      const struct record_permutation *permutation, uint64_t j)
{
    uint64_t logical = view_logical_index(setup->record_count, setup->replicas, setup->rank,
                                          0, j);
    return record_permutation_apply(permutation, logical);
}

static uint64_t bench_pread(const struct bench_setup *setup, uint64_t *records)
{
    int fd = open(setup->path, O_RDONLY);
    struct record_permutation permutation;
    const char *slash = strrchr(setup->path, '/');
    record_permutation_init(&permutation, setup->record_count, true, setup->seed,
                            slash ? slash + 1 : setup->path, 0, 0);
    uint64_t length = view_length(setup->record_count, setup->replicas, 0);
    unsigned char *buffer = malloc(setup->record_size);
    uint64_t sum = 0;
    for (uint64_t j = 0; j < length; j++) {
        uint64_t physical = bench_physical_record(setup, &permutation, j);
        off_t offset = (off_t)(setup->header_size + physical * setup->record_size);
        if (pread(fd, buffer, setup->record_size, offset) != (ssize_t)setup->record_size)
            exit(1);
        sum = bench_checksum(sum, buffer, setup->record_size);
    }
    close(fd);
    free(buffer);
    *records = length;
    return sum;
}

static uint64_t bench_mmap(const struct bench_setup *setup, uint64_t *records)
{
    int fd = open(setup->path, O_RDONLY);
    struct stat status;
    fstat(fd, &status);
    const unsigned char *map = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    struct record_permutation permutation;
    const char *slash = strrchr(setup->path, '/');
    record_permutation_init(&permutation, setup->record_count, true, setup->seed,
                            slash ? slash + 1 : setup->path, 0, 0);
    uint64_t length = view_length(setup->record_count, setup->replicas, 0);
    unsigned char *buffer = malloc(setup->record_size);
    uint64_t sum = 0;
    for (uint64_t j = 0; j < length; j++) {
        uint64_t physical = bench_physical_record(setup, &permutation, j);
        memcpy(buffer, map + setup->header_size + physical * setup->record_size,
               setup->record_size);
        sum = bench_checksum(sum, buffer, setup->record_size);
    }
    munmap((void *)map, (size_t)status.st_size);
    free(buffer);
    *records = length;
    return sum;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s view|pread|mmap PATH RECORD HEADER REPLICAS RANK SEED\n",
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
    struct stat status;
    if (stat(setup.path, &status) != 0) {
        perror(setup.path);
        return 1;
    }
    /* the physical record count: under the shim stat shows the view, so the
     * plain modes are the ones that need it */
    setup.record_count = ((uint64_t)status.st_size - setup.header_size) / setup.record_size;
    uint64_t records = 0;
    double start = bench_now();
    uint64_t sum = strcmp(setup.mode, "view") == 0    ? bench_view(&setup, &records)
                   : strcmp(setup.mode, "pread") == 0 ? bench_pread(&setup, &records)
                                                      : bench_mmap(&setup, &records);
    double elapsed = bench_now() - start;
    printf("%s %.0f %016" PRIx64 "\n", setup.mode, (double)records / elapsed, sum);
    return 0;
}
