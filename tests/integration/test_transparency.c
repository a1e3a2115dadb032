/* test_transparency.c - adaptshim(7) "What the trainer sees": with shard=0 and shuffle=0 a
 * view is the file byte for byte, so every reading style of plain_reader
 * (plain, _FORTIFY_SOURCE=2 and _FILE_OFFSET_BITS=64 builds) and the example
 * trainers print exactly what they print without the library, even with
 * three replicas configured, and write byte-identical checkpoints.  mmap of
 * a transparent view maps the file; of a sharded one, holds the view.  With
 * shuffle on and one replica, a view holds the same records in another
 * order. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DIM 5
#define RECORD_SIZE (8 + 4 * DIM + 4)   /* ADSD: id, x[DIM], y */
#define HEADER_SIZE 16
#define BINARY_RECORDS 700
#define TEXT_RECORDS 400

static const char *const reader_modes[] = {
    "read", "pread", "readv", "stdio-fread", "stdio-fgets", "stdio-getc",
    "stdio-getc-unlocked", "stdio-fscanf", "getline",
};
#define READER_MODE_COUNT (sizeof reader_modes / sizeof reader_modes[0])

/* plain_reader and its variant builds (tests/tools/plain_reader_*.c). */
static const char *const reader_programs[] = {
    "trainers/plain_reader", "tools/plain_reader_fortify", "tools/plain_reader_lfs",
};
#define READER_PROGRAM_COUNT (sizeof reader_programs / sizeof reader_programs[0])

struct dataset {
    const char *directory;
    char *path;
    char entry[600];       /* ADAPTDL_DATA=... for shard=0 shuffle=0 */
    bool text;
};

static void dataset_init(struct dataset *data, bool text)
{
    data->directory = harness_temp_dir();
    data->text = text;
    if (text) {
        data->path = harness_path_in(data->directory, "train.txt");
        harness_generate_text(data->path, TEXT_RECORDS, 17);
        snprintf(data->entry, sizeof data->entry, "ADAPTDL_DATA=%s:lines:shard=0:shuffle=0",
                 data->path);
    } else {
        data->path = harness_path_in(data->directory, "train.bin");
        harness_generate_dataset(data->path, BINARY_RECORDS, DIM, 17);
        snprintf(data->entry, sizeof data->entry,
                 "ADAPTDL_DATA=%s:record=%d:header=%d:shard=0:shuffle=0", data->path,
                 RECORD_SIZE, HEADER_SIZE);
    }
}

static void run_reader(struct run_result *result, const char *program, const char *mode,
                       const char *path, char *const environment[], bool preload)
{
    char *binary = strdup(harness_build_path(program));
    char *argv[] = {binary, (char *)mode, (char *)path, NULL};
    harness_run(result, argv, environment, preload, 30);
    free(binary);
}

/* Every mode of one reader build: same stdout under the shim (three
 * replicas, rank 1, but shard=0 shuffle=0) as without it; the shim did
 * serve the file (its debug log names the match) and warned about nothing. */
static void check_reader_transparent(const struct dataset *data, const char *program)
{
    char *environment[] = {(char *)data->entry, "ADAPTDL_NUM_REPLICAS=3",
                           "ADAPTDL_REPLICA_RANK=1", "ADAPTDL_LOG=debug", NULL};
    char matched[700];
    snprintf(matched, sizeof matched, "data file %s matched", data->path);
    for (size_t i = 0; i < READER_MODE_COUNT; i++) {
        const char *mode = reader_modes[i];
        struct run_result plain, shimmed;
        run_reader(&plain, program, mode, data->path, NULL, false);
        run_reader(&shimmed, program, mode, data->path, environment, true);
        cr_assert_eq(plain.status, 0, "%s %s without the shim: %d %s", program, mode,
                     plain.status, plain.err);
        cr_expect_eq(shimmed.status, 0, "%s %s under the shim: status %d, stderr %s", program,
                     mode, shimmed.status, shimmed.err);
        cr_expect_str_eq(shimmed.out, plain.out, "%s %s on %s: under the shim [%s] without [%s]",
                         program, mode, data->path, shimmed.out, plain.out);
        cr_expect(strstr(shimmed.err, matched) != NULL,
                  "%s %s: the shim did not virtualize %s: %s", program, mode, data->path,
                  shimmed.err);
        cr_expect(strstr(shimmed.err, "warn:") == NULL && strstr(shimmed.err, "error:") == NULL,
                  "%s %s: unexpected warning: %s", program, mode, shimmed.err);
        run_result_free(&plain);
        run_result_free(&shimmed);
    }
}

Test(transparency, plain_reader_every_mode_binary)
{
    struct dataset data;
    dataset_init(&data, false);
    check_reader_transparent(&data, "trainers/plain_reader");
}

Test(transparency, plain_reader_every_mode_text)
{
    struct dataset data;
    dataset_init(&data, true);
    check_reader_transparent(&data, "trainers/plain_reader");
}

Test(transparency, fortified_reader_every_mode)
{
    struct dataset binary, text;
    dataset_init(&binary, false);
    dataset_init(&text, true);
    check_reader_transparent(&binary, "tools/plain_reader_fortify");
    check_reader_transparent(&text, "tools/plain_reader_fortify");
}

Test(transparency, large_file_offset_reader_every_mode)
{
    struct dataset binary, text;
    dataset_init(&binary, false);
    dataset_init(&text, true);
    check_reader_transparent(&binary, "tools/plain_reader_lfs");
    check_reader_transparent(&text, "tools/plain_reader_lfs");
}

/* The variant builds really are different programs reading the same bytes. */
Test(transparency, variant_builds_agree_without_the_shim)
{
    struct dataset data;
    dataset_init(&data, false);
    struct run_result reference;
    run_reader(&reference, reader_programs[0], "read", data.path, NULL, false);
    cr_assert_eq(reference.status, 0);
    for (size_t p = 1; p < READER_PROGRAM_COUNT; p++) {
        struct run_result other;
        run_reader(&other, reader_programs[p], "read", data.path, NULL, false);
        cr_expect_eq(other.status, 0, "%s: %s", reader_programs[p], other.err);
        cr_expect_str_eq(other.out, reference.out);
        run_result_free(&other);
    }
    run_result_free(&reference);
}

/* A transparent view maps the file itself: the same output as without the
 * library, no warning.  Sharded and shuffled, the mapping holds the view:
 * the same size and hash as the read(2) mode under the same settings. */
static void check_mmap(const struct dataset *data, const char *program)
{
    struct run_result plain, shimmed;
    char *transparent[] = {(char *)data->entry, "ADAPTDL_NUM_REPLICAS=3",
                           "ADAPTDL_REPLICA_RANK=1", NULL};
    run_reader(&plain, program, "mmap", data->path, NULL, false);
    run_reader(&shimmed, program, "mmap", data->path, transparent, true);
    cr_assert_eq(plain.status, 0);
    cr_expect_eq(shimmed.status, 0, "%s", shimmed.err);
    cr_expect_str_eq(shimmed.out, plain.out);
    cr_expect_eq(harness_count_occurrences(shimmed.err, "warn:"), 0, "no warning: %s",
                 shimmed.err);
    run_result_free(&plain);
    run_result_free(&shimmed);

    char sharded[700];
    if (data->text)
        snprintf(sharded, sizeof sharded, "ADAPTDL_DATA=%s:lines:shuffle=1", data->path);
    else
        snprintf(sharded, sizeof sharded, "ADAPTDL_DATA=%s:record=%d:header=%d:shuffle=1",
                 data->path, RECORD_SIZE, HEADER_SIZE);
    char *environment[] = {sharded, "ADAPTDL_NUM_REPLICAS=3", "ADAPTDL_REPLICA_RANK=1",
                           "ADAPTDL_SEED=4", NULL};
    struct run_result read;
    run_reader(&shimmed, program, "mmap", data->path, environment, true);
    run_reader(&read, program, "read", data->path, environment, true);
    cr_expect_eq(shimmed.status, 0, "%s", shimmed.err);
    cr_expect_eq(read.status, 0, "%s", read.err);
    long long size = -1;
    unsigned long long bytes = 0;
    char hash_text[32] = "";
    cr_assert_eq(sscanf(shimmed.out, "size %lld bytes %llu hash %31s", &size, &bytes, hash_text),
                 3, "output: %s", shimmed.out);
    size_t file_size;
    char *file = harness_read_file(data->path, &file_size);
    cr_expect_lt((size_t)size, file_size, "fstat reports the (smaller) view: %lld", size);
    cr_expect_str_eq(shimmed.out, read.out, "the mapping holds the view read(2) shows");
    cr_expect_eq(harness_count_occurrences(shimmed.err, "warn:"), 0, "no warning: %s",
                 shimmed.err);
    free(file);
    run_result_free(&shimmed);
    run_result_free(&read);
}

Test(transparency, mmap_maps_the_file_or_holds_the_view)
{
    struct dataset binary, text;
    dataset_init(&binary, false);
    dataset_init(&text, true);
    for (size_t p = 0; p < READER_PROGRAM_COUNT; p++) {
        check_mmap(&binary, reader_programs[p]);
        check_mmap(&text, reader_programs[p]);
    }
    harness_remove_tree(binary.directory);
    harness_remove_tree(text.directory);
}

/* --- shuffled view, one replica: same records, another order --------------- */

static int compare_records(const void *a, const void *b)
{
    return memcmp(*(const unsigned char *const *)a, *(const unsigned char *const *)b,
                  RECORD_SIZE);
}

static int compare_lines(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Splits text into its lines (in place), returning how many. */
static size_t split_lines(char *text, size_t size, char **lines, size_t capacity)
{
    size_t count = 0;
    char *start = text;
    for (size_t i = 0; i < size; i++) {
        if (text[i] != '\n')
            continue;
        text[i] = '\0';
        if (count < capacity)
            lines[count] = start;
        count++;
        start = text + i + 1;
    }
    return count;
}

static char *read_view_with_cat(const char *path, char *const environment[], size_t *size)
{
    const char *directory = harness_temp_dir();
    char *out_path = harness_path_in(directory, "view");
    char *argv[] = {"/bin/cat", (char *)path, NULL};
    pid_t pid = harness_start(argv, environment, true, out_path, NULL);
    cr_assert_eq(harness_wait(pid, 30), 0, "cat under the shim failed");
    char *view = harness_read_file(out_path, size);
    cr_assert_not_null(view);
    free(out_path);
    return view;
}

static void check_shuffled_single_replica(const struct dataset *data)
{
    char entry[700];
    if (data->text)
        snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:lines:shard=1:shuffle=1", data->path);
    else
        snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:record=%d:header=%d:shard=1:shuffle=1",
                 data->path, RECORD_SIZE, HEADER_SIZE);
    char *environment[] = {entry, "ADAPTDL_NUM_REPLICAS=1", "ADAPTDL_REPLICA_RANK=0",
                           "ADAPTDL_SEED=3", NULL};
    size_t file_size;
    char *file = harness_read_file(data->path, &file_size);
    cr_assert_not_null(file);

    /* every byte-oriented mode of every build sees file-size bytes, all the
     * same view (a build whose entry points bypassed the view would not) */
    char first_hash[32] = "";
    for (size_t n = 0; n < READER_PROGRAM_COUNT * READER_MODE_COUNT; n++) {
        const char *program = reader_programs[n / READER_MODE_COUNT];
        size_t i = n % READER_MODE_COUNT;
        if (strcmp(reader_modes[i], "stdio-fscanf") == 0)
            continue;  /* counts token bytes, not the file's */
        struct run_result plain, shimmed;
        run_reader(&plain, program, reader_modes[i], data->path, NULL, false);
        run_reader(&shimmed, program, reader_modes[i], data->path, environment, true);
        cr_expect_eq(shimmed.status, 0, "%s %s: %s", program, reader_modes[i], shimmed.err);
        long long size = -1;
        unsigned long long bytes = 0;
        char hash[32] = "", plain_hash[32] = "";
        cr_assert_eq(sscanf(shimmed.out, "size %lld bytes %llu hash %31s", &size, &bytes, hash),
                     3, "%s output: %s", reader_modes[i], shimmed.out);
        cr_assert_eq(sscanf(plain.out, "size %*d bytes %*u hash %31s", plain_hash), 1);
        cr_expect_eq((size_t)size, file_size, "%s: size %lld, file %zu", reader_modes[i], size,
                     file_size);
        cr_expect_eq((size_t)bytes, file_size, "%s: %llu bytes read, file has %zu",
                     reader_modes[i], bytes, file_size);
        cr_expect_str_neq(hash, plain_hash, "%s: shuffled view equals the file", reader_modes[i]);
        if (first_hash[0] == '\0')
            strcpy(first_hash, hash);
        cr_expect_str_eq(hash, first_hash, "%s %s sees another view than plain_reader read",
                         program, reader_modes[i]);
        run_result_free(&plain);
        run_result_free(&shimmed);
    }

    /* the view read by cat is a permutation of the records */
    size_t view_size;
    char *view = read_view_with_cat(data->path, environment, &view_size);
    cr_assert_eq(view_size, file_size);
    cr_expect_neq(memcmp(view, file, file_size), 0, "the view is not shuffled");
    if (data->text) {
        static char *file_lines[TEXT_RECORDS + 1], *view_lines[TEXT_RECORDS + 1];
        size_t file_count = split_lines(file, file_size, file_lines, TEXT_RECORDS + 1);
        size_t view_count = split_lines(view, view_size, view_lines, TEXT_RECORDS + 1);
        cr_assert_eq(file_count, TEXT_RECORDS);
        cr_assert_eq(view_count, TEXT_RECORDS, "%zu lines in the view", view_count);
        size_t in_place = 0;
        for (size_t i = 0; i < TEXT_RECORDS; i++)
            in_place += strcmp(file_lines[i], view_lines[i]) == 0;
        cr_expect_lt(in_place, TEXT_RECORDS / 4, "%zu lines in place", in_place);
        qsort(file_lines, TEXT_RECORDS, sizeof file_lines[0], compare_lines);
        qsort(view_lines, TEXT_RECORDS, sizeof view_lines[0], compare_lines);
        for (size_t i = 0; i < TEXT_RECORDS; i++)
            cr_expect_str_eq(view_lines[i], file_lines[i], "line %zu of the sorted view", i);
    } else {
        cr_expect_eq(memcmp(view, file, HEADER_SIZE), 0, "header verbatim");
        static const unsigned char *file_records[BINARY_RECORDS], *view_records[BINARY_RECORDS];
        size_t in_place = 0;
        for (size_t i = 0; i < BINARY_RECORDS; i++) {
            file_records[i] = (unsigned char *)file + HEADER_SIZE + i * RECORD_SIZE;
            view_records[i] = (unsigned char *)view + HEADER_SIZE + i * RECORD_SIZE;
            in_place += memcmp(file_records[i], view_records[i], RECORD_SIZE) == 0;
        }
        cr_expect_lt(in_place, BINARY_RECORDS / 4, "%zu records in place", in_place);
        qsort(file_records, BINARY_RECORDS, sizeof file_records[0], compare_records);
        qsort(view_records, BINARY_RECORDS, sizeof view_records[0], compare_records);
        for (size_t i = 0; i < BINARY_RECORDS; i++)
            cr_expect_eq(memcmp(view_records[i], file_records[i], RECORD_SIZE), 0,
                         "record %zu of the sorted view differs", i);
    }
    free(view);
    free(file);
}

Test(transparency, shuffled_single_replica_is_a_permutation_binary)
{
    struct dataset data;
    dataset_init(&data, false);
    check_shuffled_single_replica(&data);
}

Test(transparency, shuffled_single_replica_is_a_permutation_text)
{
    struct dataset data;
    dataset_init(&data, true);
    check_shuffled_single_replica(&data);
}

/* --- the example trainers ----------------------------------------------------- */

static bool directory_has_snapshot(const char *path)
{
    DIR *directory = opendir(path);
    if (directory == NULL)
        return false;
    bool found = false;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL)
        if (strncmp(entry->d_name, "snapshot-", 9) == 0)
            found = true;
    closedir(directory);
    return found;
}

static void expect_same_file(const char *a, const char *b)
{
    size_t a_size, b_size;
    char *a_bytes = harness_read_file(a, &a_size);
    char *b_bytes = harness_read_file(b, &b_size);
    cr_assert(a_bytes != NULL && b_bytes != NULL, "missing %s or %s", a, b);
    cr_expect(a_size == b_size && memcmp(a_bytes, b_bytes, a_size) == 0,
              "%s (%zu bytes) and %s (%zu bytes) differ", a, a_size, b, b_size);
    free(a_bytes);
    free(b_bytes);
}

/* Runs a trainer once without and once with the shim (three replicas, rank
 * 1, shard=0 shuffle=0, checkpoints bound to snapshots): same stdout, same
 * checkpoint (and the other output files named in `outputs`). */
static void check_trainer_transparent(const struct dataset *data, const char *trainer,
                                      const char *const *arguments, const char *const *outputs)
{
    const char *runs[2] = {harness_temp_dir(), harness_temp_dir()};
    struct run_result results[2];
    for (int shim = 0; shim < 2; shim++) {
        char *argv[32];
        size_t used = 0;
        char *binary = strdup(harness_build_path(trainer));
        argv[used++] = binary;
        argv[used++] = "--data";
        argv[used++] = data->path;
        for (size_t i = 0; arguments[i]; i++)
            argv[used++] = (char *)arguments[i];
        argv[used++] = "--checkpoint";
        argv[used++] = harness_path_in(runs[shim], "ck");
        for (size_t i = 0; outputs[i]; i++) {
            argv[used++] = (char *)outputs[i];
            argv[used++] = harness_path_in(runs[shim], outputs[i] + 2);
        }
        argv[used] = NULL;
        char state[600], save[600];
        snprintf(state, sizeof state, "ADAPTDL_CHECKPOINT_PATH=%s/state", runs[shim]);
        snprintf(save, sizeof save, "ADAPTDL_SAVE=%s/ck*", runs[shim]);
        char *environment[] = {(char *)data->entry, "ADAPTDL_NUM_REPLICAS=3",
                               "ADAPTDL_REPLICA_RANK=1", state, save, NULL};
        harness_run(&results[shim], argv, environment, shim == 1, 60);
        cr_assert_eq(results[shim].status, 0, "%s (%s): status %d, stderr %s", trainer,
                     shim ? "shim" : "plain", results[shim].status, results[shim].err);
        free(binary);
    }
    cr_expect_str_eq(results[1].out, results[0].out, "%s: under the shim:\n%s\nwithout:\n%s",
                     trainer, results[1].out, results[0].out);
    cr_expect_str_eq(results[1].err, "", "%s: the shim said something: %s", trainer,
                     results[1].err);
    char *with = harness_path_in(runs[1], "ck"), *without = harness_path_in(runs[0], "ck");
    expect_same_file(with, without);
    for (size_t i = 0; outputs[i]; i++)
        expect_same_file(harness_path_in(runs[1], outputs[i] + 2),
                         harness_path_in(runs[0], outputs[i] + 2));
    /* the shim was active: the checkpoints were bound to snapshots */
    char *state = harness_path_in(runs[1], "state");
    cr_expect(directory_has_snapshot(state), "%s: no snapshot in %s", trainer, state);
    run_result_free(&results[0]);
    run_result_free(&results[1]);
}

Test(transparency, sgd_read_same_output_and_checkpoint)
{
    struct dataset data;
    dataset_init(&data, false);
    const char *arguments[] = {"--epochs", "3", "--batch", "16", "--lr", "0.05",
                               "--checkpoint-every", "7", NULL};
    const char *outputs[] = {"--final", "--ids-log", NULL};
    check_trainer_transparent(&data, "trainers/sgd_read", arguments, outputs);
}

Test(transparency, sgd_stdio_same_output_and_checkpoint)
{
    struct dataset data;
    dataset_init(&data, false);
    const char *arguments[] = {"--epochs", "3", "--batch", "16", "--lr", "0.05",
                               "--checkpoint-every", "7", NULL};
    const char *outputs[] = {"--final", "--ids-log", NULL};
    check_trainer_transparent(&data, "trainers/sgd_stdio", arguments, outputs);
}

Test(transparency, bigram_text_same_output_and_checkpoint)
{
    struct dataset data;
    dataset_init(&data, true);
    const char *arguments[] = {"--epochs", "3", "--checkpoint-every", "45", NULL};
    const char *outputs[] = {"--ids-log", NULL};
    check_trainer_transparent(&data, "trainers/bigram_text", arguments, outputs);
}
