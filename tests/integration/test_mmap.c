/* test_mmap.c - the mmap rule (adaptshim(7) "Mappings"), through real processes: a mapping of a
 * data file shows the same view as read(2).
 *
 * With the C probe (tests/tools/mmap_probe.c) and plain_reader: two
 * replicas map disjoint, shuffled halves that together cover the records,
 * byte for byte what read(2) shows them; a window at an offset holds the
 * view's bytes and zeros after its end; reopening after a mapped pass maps
 * the next pass; a transparent view (shard=0, shuffle=0) maps the file;
 * writable mappings fail with EACCES and an error line.  With the numpy
 * trainer (tests/trainers/memmap_reader.py): numpy.memmap under two
 * replicas sees disjoint shuffled halves, the transparent run prints what a
 * run without the library prints, and np.load(mmap_mode='r') of an .npy
 * file sees its records shuffled.  The numpy tests skip when Debian's
 * python3 has no numpy. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define DIM 5
#define RECORD_SIZE (8 + 4 * DIM + 4)   /* ADSD: id, x[DIM], y */
#define HEADER_SIZE 16
#define PYTHON "/usr/bin/python3"

struct mmap_dataset {
    const char *directory;
    char *path;
    uint64_t records;
};

static void mmap_dataset_init(struct mmap_dataset *data, uint64_t records)
{
    data->directory = harness_temp_dir();
    data->path = harness_path_in(data->directory, "train.bin");
    data->records = records;
    harness_generate_dataset(data->path, records, DIM, 23);
}

static void mmap_dataset_remove(struct mmap_dataset *data)
{
    harness_remove_tree(data->directory);
    free((char *)data->directory);
    free(data->path);
}

/* The environment of rank `rank` of 2, with `keys` added to the data entry
 * (the header's count field is rewritten for each view). */
struct rank_environment {
    char data[700];
    char rank[64];
    char *variables[6];
};

static void rank_environment_init(struct rank_environment *environment,
                                  const struct mmap_dataset *data, unsigned rank,
                                  const char *keys)
{
    snprintf(environment->data, sizeof environment->data,
             "ADAPTDL_DATA=%s:record=%d:header=%d:count=8,u64le,%d%s", data->path,
             RECORD_SIZE, HEADER_SIZE, RECORD_SIZE, keys);
    snprintf(environment->rank, sizeof environment->rank, "ADAPTDL_REPLICA_RANK=%u", rank);
    char **variables = environment->variables;
    variables[0] = environment->data;
    variables[1] = "ADAPTDL_NUM_REPLICAS=2";
    variables[2] = environment->rank;
    variables[3] = "ADAPTDL_SEED=5";
    variables[4] = "ADAPTDL_LOG=info";
    variables[5] = NULL;
}

static void run_probe(struct run_result *result, const char *mode, const struct mmap_dataset *data,
                      const char *passes, char *const environment[], bool preload)
{
    char header[16], record[16];
    snprintf(header, sizeof header, "%d", HEADER_SIZE);
    snprintf(record, sizeof record, "%d", RECORD_SIZE);
    char *program = strdup(harness_build_path("tools/mmap_probe"));
    char *argv[] = {program, (char *)mode, data->path, header, record, (char *)passes, NULL};
    harness_run(result, argv, environment, preload, 60);
    free(program);
}

/* Ids printed for pass `pass` ("id I" lines after "pass P ..."; for the
 * numpy trainer "id I epoch E").  Returns how many. */
static size_t ids_of_pass(const char *output, unsigned pass, uint64_t *ids, size_t capacity)
{
    size_t count = 0;
    char *copy = strdup(output);
    char *save = NULL;
    long current = -1;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned long long value, epoch;
        unsigned header_pass;
        if (sscanf(line, "pass %u", &header_pass) == 1) {
            current = (long)header_pass;
        } else if (sscanf(line, "id %llu epoch %llu", &value, &epoch) == 2) {
            if (epoch == pass && count < capacity)
                ids[count++] = value;
        } else if (sscanf(line, "id %llu", &value) == 1 && current == (long)pass &&
                   count < capacity) {
            ids[count++] = value;
        }
    }
    free(copy);
    return count;
}

/* Both ranks' ids of one pass: each has ceil(N/2), together they cover
 * every record (one padding record seen twice when N is odd), and neither
 * is the strided unshuffled shard. */
static void expect_disjoint_shuffled_halves(const uint64_t *const ids[2], const size_t count[2],
                                            uint64_t records)
{
    size_t half = (records + 1) / 2;
    unsigned *seen = calloc(records, sizeof *seen);
    for (unsigned rank = 0; rank < 2; rank++) {
        cr_expect_eq(count[rank], half, "rank %u mapped %zu records, expected %zu", rank,
                     count[rank], half);
        size_t strided = 0;
        for (size_t i = 0; i < count[rank]; i++) {
            cr_assert_lt(ids[rank][i], records);
            seen[ids[rank][i]]++;
            strided += ids[rank][i] == 2 * i + rank;
        }
        cr_expect_lt(strided, half / 4, "rank %u: shuffled (%zu records in strided place)",
                     rank, strided);
    }
    size_t twice = 0;
    for (uint64_t id = 0; id < records; id++) {
        cr_expect(seen[id] == 1 || seen[id] == 2, "record %llu seen %u times",
                  (unsigned long long)id, seen[id]);
        twice += seen[id] == 2;
    }
    cr_expect_eq(twice, 2 * half - records, "padding: %zu records twice", twice);
    free(seen);
}

/* --- the C probe ------------------------------------------------------------ */

static void check_two_replicas_with_probe(const char *mode)
{
    struct mmap_dataset data;
    mmap_dataset_init(&data, 301);
    uint64_t *ids[2];
    size_t count[2];
    for (unsigned rank = 0; rank < 2; rank++) {
        struct rank_environment environment;
        rank_environment_init(&environment, &data, rank, "");
        struct run_result result;
        run_probe(&result, mode, &data, "1", environment.variables, true);
        cr_assert_eq(result.status, 0, "%s rank %u: %s%s", mode, rank, result.out, result.err);
        cr_expect(strstr(result.err, "info: mmap of data file") != NULL &&
                      strstr(result.err, "bytes of memory") != NULL,
                  "the cost is logged at info: %s", result.err);
        ids[rank] = calloc(data.records, sizeof *ids[rank]);
        count[rank] = ids_of_pass(result.out, 0, ids[rank], data.records);
        run_result_free(&result);
    }
    expect_disjoint_shuffled_halves((const uint64_t *const *)ids, count, data.records);
    free(ids[0]);
    free(ids[1]);
    mmap_dataset_remove(&data);
}

Test(mmap, two_replicas_map_disjoint_shuffled_halves)
{
    check_two_replicas_with_probe("private");
}

Test(mmap, mmap64_maps_the_view_too)
{
    check_two_replicas_with_probe("private64");
}

/* numpy's memmap(mode='r') maps PROT_READ, MAP_SHARED */
Test(mmap, a_shared_read_only_mapping_shows_the_view)
{
    check_two_replicas_with_probe("shared-read");
}

/* plain_reader's mmap and read modes under the same settings print the
 * same size and hash: the mapping is byte for byte what read(2) shows. */
Test(mmap, a_mapping_holds_the_bytes_read_shows)
{
    struct mmap_dataset data;
    mmap_dataset_init(&data, 777);
    const char *programs[] = {"trainers/plain_reader", "tools/plain_reader_lfs"};
    for (size_t p = 0; p < 2; p++) {
        for (unsigned rank = 0; rank < 2; rank++) {
            struct rank_environment environment;
            rank_environment_init(&environment, &data, rank, ":shuffle=1");
            struct run_result mapped, read;
            char *program = strdup(harness_build_path(programs[p]));
            char *mmap_argv[] = {program, "mmap", data.path, NULL};
            char *read_argv[] = {program, "read", data.path, NULL};
            harness_run(&mapped, mmap_argv, environment.variables, true, 60);
            harness_run(&read, read_argv, environment.variables, true, 60);
            cr_assert_eq(mapped.status, 0, "%s", mapped.err);
            cr_assert_eq(read.status, 0, "%s", read.err);
            cr_expect_str_eq(mapped.out, read.out, "%s rank %u", programs[p], rank);
            cr_expect_eq(harness_count_occurrences(mapped.err, "warn:"), 0, "%s", mapped.err);
            run_result_free(&mapped);
            run_result_free(&read);
            free(program);
        }
    }
    mmap_dataset_remove(&data);
}

Test(mmap, a_window_at_an_offset_holds_the_view_and_zeros_after_it)
{
    struct mmap_dataset data;
    /* a view of 16 + 150 * 32 = 4816 bytes per rank: the window from 4096
     * holds its last 720 bytes, then zeros */
    mmap_dataset_init(&data, 300);
    for (unsigned rank = 0; rank < 2; rank++) {
        struct rank_environment environment;
        rank_environment_init(&environment, &data, rank, "");
        struct run_result window;
        run_probe(&window, "window", &data, "1", environment.variables, true);
        cr_assert_eq(window.status, 0, "%s", window.err);
        /* the view as read(2) shows it (binary: captured in a file) */
        size_t view_size = HEADER_SIZE + 150 * RECORD_SIZE;
        char *view_path = harness_path_in(data.directory, "view");
        char *cat_argv[] = {"/bin/cat", data.path, NULL};
        pid_t pid = harness_start(cat_argv, environment.variables, true, view_path, NULL);
        cr_assert_eq(harness_wait(pid, 60), 0);
        size_t size;
        char *view = harness_read_file(view_path, &size);
        cr_assert_eq(size, view_size);
        char expected[128];
        snprintf(expected, sizeof expected, "window bytes %zu hash %016llx zeros yes\n",
                 view_size - 4096,
                 (unsigned long long)harness_fnv1a(view + 4096, view_size - 4096));
        cr_expect_str_eq(window.out, expected, "rank %u", rank);
        free(view);
        free(view_path);
        run_result_free(&window);
    }
    mmap_dataset_remove(&data);
}

/* The probe reopens the file for its second pass: the first mapping began
 * pass 0, the reopen ended it, the second mapping shows pass 1. */
Test(mmap, reopening_after_a_mapped_pass_maps_the_next_pass)
{
    struct mmap_dataset data;
    mmap_dataset_init(&data, 201);
    uint64_t *ids[2][2];
    size_t count[2][2];
    for (unsigned rank = 0; rank < 2; rank++) {
        struct rank_environment environment;
        rank_environment_init(&environment, &data, rank, "");
        struct run_result result;
        run_probe(&result, "private", &data, "2", environment.variables, true);
        cr_assert_eq(result.status, 0, "%s", result.err);
        for (unsigned pass = 0; pass < 2; pass++) {
            ids[pass][rank] = calloc(data.records, sizeof(uint64_t));
            count[pass][rank] = ids_of_pass(result.out, pass, ids[pass][rank], data.records);
        }
        run_result_free(&result);
    }
    for (unsigned pass = 0; pass < 2; pass++)
        expect_disjoint_shuffled_halves((const uint64_t *const *)ids[pass], count[pass],
                                        data.records);
    cr_expect_neq(memcmp(ids[0][0], ids[1][0], count[0][0] * sizeof(uint64_t)), 0,
                  "pass 1 is another permutation");
    for (unsigned pass = 0; pass < 2; pass++)
        for (unsigned rank = 0; rank < 2; rank++)
            free(ids[pass][rank]);
    mmap_dataset_remove(&data);
}

Test(mmap, a_transparent_view_maps_the_file_byte_for_byte)
{
    struct mmap_dataset data;
    mmap_dataset_init(&data, 333);
    struct run_result plain;
    run_probe(&plain, "private", &data, "2", NULL, false);
    cr_assert_eq(plain.status, 0, "%s", plain.err);
    const char *modes[] = {"private", "shared-read", "private64"};
    for (size_t m = 0; m < 3; m++) {
        struct rank_environment environment;
        rank_environment_init(&environment, &data, 1, ":shard=0:shuffle=0");
        struct run_result shimmed;
        run_probe(&shimmed, modes[m], &data, "2", environment.variables, true);
        cr_expect_eq(shimmed.status, 0, "%s", shimmed.err);
        cr_expect_str_eq(shimmed.out, plain.out, "%s", modes[m]);
        cr_expect_null(strstr(shimmed.err, "bytes of memory"), "the file itself: %s",
                       shimmed.err);
        run_result_free(&shimmed);
    }
    run_result_free(&plain);
    mmap_dataset_remove(&data);
}

/* munmap(view, its size) unmaps whole pages: the view is forgotten with
 * the rest of its last page, so that memory the program maps there later
 * is its own (an mremap of it once failed with EINVAL, "the memory holding
 * a view"). */
Test(mmap, memory_mapped_where_an_unmapped_view_was_is_the_programs_own)
{
    struct mmap_dataset data;
    mmap_dataset_init(&data, 333);
    struct rank_environment environment;
    rank_environment_init(&environment, &data, 1, "");
    struct run_result result;
    run_probe(&result, "reuse", &data, "3", environment.variables, true);
    cr_assert_eq(result.status, 0, "%s%s", result.out, result.err);
    cr_expect_eq(harness_count_occurrences(result.out, "reuse mremap ok"), 3, "%s%s",
                 result.out, result.err);
    cr_expect_null(strstr(result.err, "refused"), "%s", result.err);
    run_result_free(&result);
    mmap_dataset_remove(&data);
}

Test(mmap, writable_mappings_fail_with_eacces)
{
    struct mmap_dataset data;
    mmap_dataset_init(&data, 50);
    const char *modes[] = {"shared-write", "private-write"};
    const char *keys[] = {"", ":shard=0:shuffle=0"};
    for (size_t m = 0; m < 2; m++) {
        for (size_t k = 0; k < 2; k++) {
            struct rank_environment environment;
            rank_environment_init(&environment, &data, 0, keys[k]);
            struct run_result result;
            run_probe(&result, modes[m], &data, "1", environment.variables, true);
            cr_expect_eq(result.status, 3, "%s%s: %s", modes[m], keys[k], result.out);
            cr_expect_str_eq(result.out, "mmap failed: EACCES\n");
            cr_expect(strstr(result.err, "error: mmap of data file") &&
                          strstr(result.err, data.path) && strstr(result.err, "accepted"),
                      "one error line naming the file and what is accepted: %s", result.err);
            run_result_free(&result);
        }
    }
    mmap_dataset_remove(&data);
}

/* --- the numpy trainer ------------------------------------------------------ */

static void skip_without_numpy(void)
{
    char *argv[] = {PYTHON, "-c", "import numpy", NULL};
    struct run_result result;
    int status = access(PYTHON, X_OK) == 0 ? harness_run(&result, argv, NULL, false, 60) : 127;
    if (status == 127 || status != 0) {
        if (status != 127)
            run_result_free(&result);
        cr_skip("%s -c 'import numpy' fails: the numpy trainer tests need python3-numpy",
                PYTHON);
    }
    run_result_free(&result);
}

static void run_numpy_trainer(struct run_result *result, char *const arguments[],
                              char *const environment[], bool preload)
{
    char *script = strdup(harness_build_path("trainers/memmap_reader.py"));
    char *argv[8] = {PYTHON, script};
    harness_append_list(argv, 2, sizeof argv / sizeof argv[0], arguments);
    harness_run(result, argv, environment, preload, 120);
    free(script);
}

Test(mmap, numpy_memmap_under_two_replicas_sees_disjoint_shuffled_halves)
{
    skip_without_numpy();
    struct mmap_dataset data;
    mmap_dataset_init(&data, 257);
    uint64_t *ids[2][2];
    size_t count[2][2];
    for (unsigned rank = 0; rank < 2; rank++) {
        struct rank_environment environment;
        rank_environment_init(&environment, &data, rank, "");
        char *arguments[] = {data.path, "5", "2", NULL};
        struct run_result result;
        run_numpy_trainer(&result, arguments, environment.variables, true);
        cr_assert_eq(result.status, 0, "%s", result.err);
        for (unsigned epoch = 0; epoch < 2; epoch++) {
            ids[epoch][rank] = calloc(data.records, sizeof(uint64_t));
            count[epoch][rank] = ids_of_pass(result.out, epoch, ids[epoch][rank],
                                             data.records);
        }
        run_result_free(&result);
    }
    for (unsigned epoch = 0; epoch < 2; epoch++)
        expect_disjoint_shuffled_halves((const uint64_t *const *)ids[epoch], count[epoch],
                                        data.records);
    cr_expect_neq(memcmp(ids[0][1], ids[1][1], count[0][1] * sizeof(uint64_t)), 0,
                  "each epoch maps the next pass");
    for (unsigned epoch = 0; epoch < 2; epoch++)
        for (unsigned rank = 0; rank < 2; rank++)
            free(ids[epoch][rank]);
    mmap_dataset_remove(&data);
}

Test(mmap, numpy_memmap_of_a_transparent_view_prints_what_it_prints_alone)
{
    skip_without_numpy();
    struct mmap_dataset data;
    mmap_dataset_init(&data, 200);
    char *arguments[] = {data.path, "5", "2", NULL};
    struct run_result plain, shimmed;
    run_numpy_trainer(&plain, arguments, NULL, false);
    cr_assert_eq(plain.status, 0, "%s", plain.err);
    struct rank_environment environment;
    rank_environment_init(&environment, &data, 1, ":shard=0:shuffle=0");
    run_numpy_trainer(&shimmed, arguments, environment.variables, true);
    cr_expect_eq(shimmed.status, 0, "%s", shimmed.err);
    cr_expect_str_eq(shimmed.out, plain.out);
    run_result_free(&plain);
    run_result_free(&shimmed);
    mmap_dataset_remove(&data);
}

/* Writes DIR/train.npy (a structured array of the ADSD records' shape, ids
 * 0..records-1) with numpy itself; returns the .npy header's size. */
static size_t write_npy(const struct mmap_dataset *data, const char *npy_path)
{
    char program[600];
    snprintf(program, sizeof program,
             "import numpy as np\n"
             "t = np.dtype([('id', '<u8'), ('x', '<f4', (%d,)), ('y', '<f4')])\n"
             "a = np.zeros(%llu, dtype=t)\n"
             "a['id'] = np.arange(%llu)\n"
             "a['y'] = np.arange(%llu) * 0.5\n"
             "np.save('%s', a)\n",
             DIM, (unsigned long long)data->records, (unsigned long long)data->records,
             (unsigned long long)data->records, npy_path);
    char *argv[] = {PYTHON, "-c", program, NULL};
    struct run_result result;
    cr_assert_eq(harness_run(&result, argv, NULL, false, 60), 0, "%s", result.err);
    run_result_free(&result);
    size_t size;
    unsigned char *bytes = (unsigned char *)harness_read_file(npy_path, &size);
    cr_assert_geq(size, 10);
    cr_assert_eq(bytes[6], 1, ".npy format version 1.0");
    size_t header = 10 + (size_t)bytes[8] + 256 * (size_t)bytes[9];
    cr_assert_eq((size - header) % RECORD_SIZE, 0);
    free(bytes);
    return header;
}

/* The .npy header states the array's shape in text, which a view cannot
 * rewrite: np.load under sharding would find the view too short.  Shuffled
 * without sharding (the view's size is the file's), every record is there
 * once, in another order. */
Test(mmap, numpy_load_with_mmap_mode_sees_the_records_shuffled)
{
    skip_without_numpy();
    struct mmap_dataset data = {.directory = harness_temp_dir(), .records = 300};
    data.path = harness_path_in(data.directory, "train.npy");
    size_t header = write_npy(&data, data.path);
    char entry[700];
    snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:record=%d:header=%zu:shard=0", data.path,
             RECORD_SIZE, header);
    char *environment[] = {entry, "ADAPTDL_NUM_REPLICAS=2", "ADAPTDL_REPLICA_RANK=1",
                           "ADAPTDL_SEED=9", NULL};
    char *arguments[] = {"--npy", data.path, NULL};
    struct run_result plain, shimmed;
    run_numpy_trainer(&plain, arguments, NULL, false);
    run_numpy_trainer(&shimmed, arguments, environment, true);
    cr_assert_eq(plain.status, 0, "%s", plain.err);
    cr_assert_eq(shimmed.status, 0, "%s", shimmed.err);
    uint64_t *ids = calloc(data.records, sizeof *ids);
    size_t count = ids_of_pass(shimmed.out, 0, ids, data.records);
    cr_expect_eq(count, data.records);
    unsigned *seen = calloc(data.records, sizeof *seen);
    size_t in_place = 0;
    for (size_t i = 0; i < count; i++) {
        cr_assert_lt(ids[i], data.records);
        seen[ids[i]]++;
        in_place += ids[i] == i;
    }
    for (uint64_t id = 0; id < data.records; id++)
        cr_expect_eq(seen[id], 1, "record %llu seen %u times", (unsigned long long)id, seen[id]);
    cr_expect_lt(in_place, 30, "shuffled: %zu records in place", in_place);

    /* and the transparent run prints what numpy prints alone */
    snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:record=%d:header=%zu:shard=0:shuffle=0",
             data.path, RECORD_SIZE, header);
    struct run_result transparent;
    run_numpy_trainer(&transparent, arguments, environment, true);
    cr_expect_eq(transparent.status, 0, "%s", transparent.err);
    cr_expect_str_eq(transparent.out, plain.out);
    free(ids);
    free(seen);
    run_result_free(&plain);
    run_result_free(&shimmed);
    run_result_free(&transparent);
    mmap_dataset_remove(&data);
}

/* adaptshim(7) "Mappings", limits: a loader that samples random windows of a memmap made for
 * every batch (nanoGPT's get_batch) under a sharded, shuffled view is told
 * in one warn line that windows cannot be sharded, with the setting to use;
 * with that setting (shard=0:shuffle=0) it maps the file itself and hears
 * nothing. */
Test(mmap, random_windows_of_a_memmap_per_batch_are_named_once)
{
    skip_without_numpy();
    struct mmap_dataset data;
    mmap_dataset_init(&data, 257);
    static const char *const keys[] = {"", ":shard=0:shuffle=0"};
    for (unsigned setting = 0; setting < 2; setting++) {
        struct rank_environment environment;
        rank_environment_init(&environment, &data, 1, keys[setting]);
        char *arguments[] = {"--windows", data.path, "40", NULL};
        struct run_result result;
        run_numpy_trainer(&result, arguments, environment.variables, true);
        cr_assert_eq(result.status, 0, "%s", result.err);
        cr_expect_eq(harness_count_occurrences(result.out, " starts "), 40, "%s", result.out);
        size_t lines = harness_count_occurrences(result.err, "random windows");
        cr_expect_eq(lines, setting == 0 ? 1 : 0, "with \"%s\": %zu lines: %s", keys[setting],
                     lines, result.err);
        if (setting == 0)
            cr_expect(strstr(result.err, "shard=0:shuffle=0") != NULL &&
                          strstr(result.err, data.path) != NULL,
                      "names the file and the setting: %s", result.err);
        run_result_free(&result);
    }
    mmap_dataset_remove(&data);
}
