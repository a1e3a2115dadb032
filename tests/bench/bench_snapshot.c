/* bench_snapshot.c - cost of writing a bound snapshot (the target: a
 * snapshot write, excluding the trainer's own file, under 1 ms plus one
 * fsync; adaptshim(7) "Benchmarks").
 *
 * A typical snapshot (3 data files, 2 accumulators, a realistic checkpoint
 * path) is encoded, and saved with snapshot_save (encode, temp file, write,
 * fsync, rename, fsync of the directory), SAVE_ITERATIONS times each.  The
 * reference is one bare fsync of a freshly written small file in the same
 * directory, since that is what the budget allows on top of 1 ms.  Medians
 * are reported because fsync latency has a long tail.  Note that a save
 * performs two syncs (file and directory), so on a disk where fsync
 * dominates, "save - fsync" is roughly one more fsync, not CPU work; the
 * encode line shows the CPU part alone.
 *
 * The directory defaults to a fresh one under $TMPDIR (or /tmp); pass a
 * directory as the first argument to measure another file system (the
 * state directory of a real job usually sits next to the checkpoints).
 *
 * Last, the throughput of content_hash_bytes over a 64 MiB buffer, which
 * bounds how fast a checkpoint's content identity can be computed. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "state_store.h"

#define SAVE_ITERATIONS 200
#define ENCODE_ITERATIONS 2000
#define HASH_BUFFER_SIZE ((size_t)64 << 20)
#define HASH_REPEATS 5

static volatile uint64_t bench_sink;

static int remove_entry(const char *path, const struct stat *status, int type, struct FTW *walk)
{
    (void)status;
    (void)type;
    (void)walk;
    return remove(path);
}

/* The snapshot a trainer with a train, a validation and a test file commits. */
static void make_typical_snapshot(struct adaptdl_snapshot *snapshot)
{
    static struct snapshot_file_position files[3] = {
        {.name = "train-shuffled.bin", .record_count = 1281167, .pass = 3,
         .current_index = 640583, .pass_length = 1281167, .role = 0},
        {.name = "validation.bin", .record_count = 50000, .pass_length = 50000, .role = 1},
        {.name = "test-split.txt", .record_count = 10000, .pass_length = 10000, .role = 1},
    };
    static struct snapshot_value results[2] = {
        {"loss_sum", 1234.5678},
        {"correct", 40012.0},
    };
    static struct snapshot_accumulator accumulators[2] = {
        {.name = "adaptdl-accumulator-epoch3-0", .value_count = 2, .values = results},
        {.name = "adaptdl-accumulator-epoch3-1", .value_count = 1, .values = results},
    };
    *snapshot = (struct adaptdl_snapshot){
        .version = STATE_FORMAT_VERSION,
        .seed = 42,
        .epoch = 3,
        .replicas = 4,
        .sequence = 17,
        .created_unix_time = 1712345678.5,
        .checkpoint_path = "/scratch/jobs/resnet50-elastic/checkpoints/model-epoch-003.pt",
        .binding = {.size = UINT64_C(102503713), .hash = UINT64_C(0x8c1f3a2b9d7e6f10)},
        .file_count = 3,
        .files = files,
        .accumulator_count = 2,
        .accumulators = accumulators,
        .step = 30012,
        .progress = 3.4375,
        .global_bsz = 512,
    };
}

/* Median microseconds of encoding alone. */
static double bench_encode(const struct adaptdl_snapshot *snapshot, size_t *encoded_size)
{
    static double samples[ENCODE_ITERATIONS];
    for (size_t iteration = 0; iteration < ENCODE_ITERATIONS; iteration++) {
        void *data;
        double start = bench_monotonic_seconds();
        if (snapshot_encode(snapshot, &data, encoded_size) != 0) {
            fprintf(stderr, "bench_snapshot: encode failed: %s\n", strerror(errno));
            exit(1);
        }
        samples[iteration] = (bench_monotonic_seconds() - start) * 1e6;
        bench_sink += ((unsigned char *)data)[*encoded_size - 1];
        free(data);
    }
    return bench_median(samples, ENCODE_ITERATIONS);
}

/* Median microseconds of snapshot_save (the same name each time, as a
 * trainer overwriting one checkpoint file with identical content would). */
static double bench_save(const char *directory, struct adaptdl_snapshot *snapshot)
{
    static double samples[SAVE_ITERATIONS];
    char error[512];
    for (size_t iteration = 0; iteration < SAVE_ITERATIONS; iteration++) {
        snapshot->sequence++;
        double start = bench_monotonic_seconds();
        if (snapshot_save(directory, snapshot, error, sizeof error) != 0) {
            fprintf(stderr, "bench_snapshot: %s\n", error);
            exit(1);
        }
        samples[iteration] = (bench_monotonic_seconds() - start) * 1e6;
    }
    return bench_median(samples, SAVE_ITERATIONS);
}

/* Median microseconds of one fsync of a small, freshly written file. */
static double bench_fsync(const char *directory, size_t file_size)
{
    static double samples[SAVE_ITERATIONS];
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync-probe", directory);
    char *content = calloc(1, file_size);
    for (size_t iteration = 0; iteration < SAVE_ITERATIONS; iteration++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, content, file_size) != (ssize_t)file_size) {
            fprintf(stderr, "bench_snapshot: %s: %s\n", path, strerror(errno));
            exit(1);
        }
        double start = bench_monotonic_seconds();
        if (fsync(fd) != 0) {
            fprintf(stderr, "bench_snapshot: fsync: %s\n", strerror(errno));
            exit(1);
        }
        samples[iteration] = (bench_monotonic_seconds() - start) * 1e6;
        close(fd);
    }
    unlink(path);
    free(content);
    return bench_median(samples, SAVE_ITERATIONS);
}

/* Best-of-N GB/s of content_hash_bytes over a 64 MiB buffer. */
static double bench_hash(void)
{
    unsigned char *buffer = malloc(HASH_BUFFER_SIZE);
    if (buffer == NULL) {
        fprintf(stderr, "bench_snapshot: out of memory\n");
        exit(1);
    }
    uint64_t state = 88172645463325252u;
    for (size_t index = 0; index < HASH_BUFFER_SIZE; index += 8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        memcpy(buffer + index, &state, 8);
    }
    double best = 0;
    for (int repeat = 0; repeat < HASH_REPEATS; repeat++) {
        double start = bench_monotonic_seconds();
        bench_sink += content_hash_bytes(buffer, HASH_BUFFER_SIZE, (uint64_t)repeat);
        double rate = (double)HASH_BUFFER_SIZE / (bench_monotonic_seconds() - start) / 1e9;
        if (rate > best)
            best = rate;
    }
    free(buffer);
    return best;
}

int main(int argc, char **argv)
{
    char template_path[4096];
    const char *base = argc > 1 ? argv[1] : getenv("TMPDIR");
    snprintf(template_path, sizeof template_path, "%s/adaptshim-bench-snapshot-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    char *directory = mkdtemp(template_path);
    if (directory == NULL) {
        fprintf(stderr, "bench_snapshot: mkdtemp %s: %s\n", template_path, strerror(errno));
        return 1;
    }

    struct adaptdl_snapshot snapshot;
    make_typical_snapshot(&snapshot);
    size_t encoded_size = 0;
    double encode_us = bench_encode(&snapshot, &encoded_size);
    double save_us = bench_save(directory, &snapshot);
    double fsync_us = bench_fsync(directory, encoded_size);
    double hash_gbps = bench_hash();
    nftw(directory, remove_entry, 8, FTW_DEPTH | FTW_PHYS);

    printf("snapshot: 3 files, %zu bytes encoded, directory %s\n", encoded_size,
           base != NULL && base[0] != '\0' ? base : "/tmp");
    printf("snapshot encode          median %9.2f us (%d runs)\n", encode_us, ENCODE_ITERATIONS);
    printf("snapshot save            median %9.2f us (%d runs; encode, write, fsync, rename, "
           "fsync dir)\n",
           save_us, SAVE_ITERATIONS);
    printf("bare fsync (%zu B file)  median %9.2f us (%d runs)\n", encoded_size, fsync_us,
           SAVE_ITERATIONS);
    printf("save / (fsync)                  %9.2f x\n", fsync_us > 0 ? save_us / fsync_us : 0.0);
    printf("save - fsync                    %9.2f us (budget: < 1000 us)\n",
           save_us - fsync_us);
    printf("content_hash_bytes (64 MiB)     %9.2f GB/s (best of %d)\n", hash_gbps, HASH_REPEATS);
    return 0;
}
