/* bench_threads.c - throughput of THREADS threads reading one replica's
 * shuffled shard of one file at once (the target: the
 * throughput of threaded readers of one file grows with the thread count up
 * to the cores; adaptshim(7) "Benchmarks").  The view
 * is cut into batches of about 64 KiB of whole records; thread t reads
 * batches t, t + THREADS, t + 2 THREADS, ..., so together the threads read
 * the view once.  Two ways:
 *   view  - under the shim (run with LD_PRELOAD and ADAPTDL_DATA set): the
 *           file opened once, each batch one pread(2) of the view;
 *   plain - a plain program reading the same records in the same order, the
 *           way the shim copies them: records of 4 KiB and more by pread
 *           from one descriptor, smaller ones copied from one mapping.
 * The order comes from the runtime's own permutation, so both deliver the
 * same bytes.  Prints "MODE THREADS records/s checksum".
 *
 * usage: bench_threads MODE PATH RECORD THREADS REPLICAS RANK SEED */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "permutation.h"

#define BENCH_MAX_THREADS 64
#define BENCH_BATCH_BYTES (1u << 16)
#define BENCH_PREAD_MIN_RECORD 4096

struct bench_shared {
    bool view;
    int fd;
    const unsigned char *map;     /* plain mode, small records */
    uint64_t record_size;
    uint64_t record_count;        /* N of the physical file */
    uint64_t replicas, rank;
    uint64_t length;              /* records of the view */
    uint64_t batch_records;
    struct record_permutation permutation;
    unsigned threads;
    pthread_barrier_t start;
};

struct bench_thread {
    struct bench_shared *shared;
    unsigned index;
    uint64_t records;
    uint64_t sum;
    bool failed;
};

/* Records [first, first + count) of the view, read as the plain program does. */
static bool bench_plain_batch(const struct bench_shared *shared, uint64_t first,
                              uint64_t count, unsigned char *out)
{
    for (uint64_t j = first; j < first + count; j++) {
        uint64_t logical = view_logical_index(shared->record_count, (uint32_t)shared->replicas,
                                              (uint32_t)shared->rank, 0, j);
        uint64_t physical = record_permutation_apply(&shared->permutation, logical);
        uint64_t offset = physical * shared->record_size;
        if (shared->map != NULL)
            memcpy(out, shared->map + offset, shared->record_size);
        else if (pread(shared->fd, out, shared->record_size, (off_t)offset) !=
                 (ssize_t)shared->record_size)
            return false;
        out += shared->record_size;
    }
    return true;
}

static void *bench_reader(void *argument)
{
    struct bench_thread *self = argument;
    struct bench_shared *shared = self->shared;
    unsigned char *buffer = malloc(shared->batch_records * shared->record_size);
    if (buffer == NULL) {
        self->failed = true;
        return NULL;
    }
    pthread_barrier_wait(&shared->start);
    for (uint64_t first = (uint64_t)self->index * shared->batch_records;
         first < shared->length; first += (uint64_t)shared->threads * shared->batch_records) {
        uint64_t count = shared->length - first < shared->batch_records ? shared->length - first
                                                                        : shared->batch_records;
        uint64_t bytes = count * shared->record_size;
        bool ok = shared->view ? pread(shared->fd, buffer, bytes,
                                       (off_t)(first * shared->record_size)) == (ssize_t)bytes
                               : bench_plain_batch(shared, first, count, buffer);
        if (!ok) {
            self->failed = true;
            break;
        }
        self->sum += bench_checksum(0, buffer, bytes);
        self->records += count;
    }
    free(buffer);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 8 || (strcmp(argv[1], "view") != 0 && strcmp(argv[1], "plain") != 0)) {
        fprintf(stderr, "usage: %s view|plain PATH RECORD THREADS REPLICAS RANK SEED\n",
                argv[0]);
        return 2;
    }
    const char *path = argv[2];
    struct bench_shared shared = {
        .view = strcmp(argv[1], "view") == 0,
        .record_size = strtoull(argv[3], NULL, 10),
        .threads = (unsigned)strtoul(argv[4], NULL, 10),
        .replicas = strtoull(argv[5], NULL, 10),
        .rank = strtoull(argv[6], NULL, 10),
    };
    uint64_t seed = strtoull(argv[7], NULL, 10);
    if (shared.record_size == 0 || shared.threads == 0 || shared.threads > BENCH_MAX_THREADS ||
        shared.replicas == 0 || shared.rank >= shared.replicas) {
        fprintf(stderr, "bench_threads: RECORD must be positive, THREADS 1..%d and RANK below "
                        "REPLICAS\n", BENCH_MAX_THREADS);
        return 2;
    }
    shared.fd = open(path, O_RDONLY);
    struct stat status;
    if (shared.fd < 0 || fstat(shared.fd, &status) != 0) {
        perror(path);
        return 1;
    }
    if (shared.view) {
        /* under the shim fstat shows the view */
        shared.length = (uint64_t)status.st_size / shared.record_size;
    } else {
        shared.record_count = (uint64_t)status.st_size / shared.record_size;
        shared.length = view_length(shared.record_count, (uint32_t)shared.replicas, 0);
        const char *slash = strrchr(path, '/');
        record_permutation_init(&shared.permutation, shared.record_count, true, seed,
                                slash ? slash + 1 : path, 0, 0);
        if (shared.record_size < BENCH_PREAD_MIN_RECORD) {
            shared.map = mmap(NULL, (size_t)status.st_size, PROT_READ, MAP_SHARED, shared.fd, 0);
            if (shared.map == MAP_FAILED) {
                perror("mmap");
                return 1;
            }
        }
    }
    shared.batch_records = BENCH_BATCH_BYTES / shared.record_size;
    if (shared.batch_records == 0)
        shared.batch_records = 1;
    pthread_barrier_init(&shared.start, NULL, shared.threads + 1);
    struct bench_thread threads[BENCH_MAX_THREADS];
    pthread_t handles[BENCH_MAX_THREADS];
    for (unsigned i = 0; i < shared.threads; i++) {
        threads[i] = (struct bench_thread){.shared = &shared, .index = i};
        if (pthread_create(&handles[i], NULL, bench_reader, &threads[i]) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    pthread_barrier_wait(&shared.start);
    double start = bench_monotonic_seconds();
    uint64_t records = 0, sum = 0;
    bool failed = false;
    for (unsigned i = 0; i < shared.threads; i++) {
        pthread_join(handles[i], NULL);
        records += threads[i].records;
        sum += threads[i].sum;
        failed |= threads[i].failed;
    }
    double elapsed = bench_monotonic_seconds() - start;
    if (failed || records != shared.length) {
        fprintf(stderr, "bench_threads: read %" PRIu64 " of %" PRIu64 " records\n", records,
                shared.length);
        return 1;
    }
    printf("%s %u %.0f %016" PRIx64 "\n", argv[1], shared.threads, (double)records / elapsed,
           sum);
    return 0;
}
