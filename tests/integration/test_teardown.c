/* test_teardown.c - the frozen pass-through of a process's teardown: after
 * MPI_Finalize, and once the library's destructor has run, every wrapper
 * goes straight to the real function, so what reads a data file then gets
 * the file's own bytes and sizes, and nothing crashes.  (Regression: under
 * an MPI trainer the shim's read ran on PMIx's event thread after
 * MPI_Finalize and crashed inside the descriptor table.)
 *
 * - tests/tools/teardown_mpi reads its data file through a view before
 *   MPI_Finalize, then after it from a thread, the main thread and an
 *   atexit handler, through the descriptor it kept and through new ones;
 * - tests/faults/read_at_unload.so, listed after the shim in LD_PRELOAD,
 *   reads the file from its destructor, which runs after the shim's. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DIM 3
#define RECORD_SIZE (8 + 4 * DIM + 4)   /* ADSD: id, x[DIM], y */
#define HEADER_SIZE 16
#define RECORDS 90

/* A shuffled, sharded view of a fresh dataset: its bytes differ from the
 * file's, so a read that reaches the file shows. */
struct teardown_data {
    const char *directory;
    char *path;
    char setting[700];
    char hash[32];       /* of the file itself, as the probes print it */
    char expected[64];   /* "SIZE HASH" of the file itself */
};

static void teardown_data_init(struct teardown_data *data)
{
    data->directory = harness_temp_dir();
    data->path = harness_path_in(data->directory, "train.bin");
    harness_generate_dataset(data->path, RECORDS, DIM, 51);
    snprintf(data->setting, sizeof data->setting, "ADAPTDL_DATA=%s:record=%d:header=%d",
             data->path, RECORD_SIZE, HEADER_SIZE);
    size_t size;
    char *bytes = harness_read_file(data->path, &size);
    cr_assert_not_null(bytes);
    snprintf(data->hash, sizeof data->hash, "%016" PRIx64, harness_fnv1a(bytes, size));
    snprintf(data->expected, sizeof data->expected, "%zu %s", size, data->hash);
    free(bytes);
}

static void teardown_data_free(struct teardown_data *data)
{
    harness_remove_temp_dir(data->directory);
    free(data->path);
}

/* The "SIZE HASH" of the line `name` printed (empty when there is none). */
static void reported(const char *output, const char *name, char *out, size_t out_size)
{
    out[0] = '\0';
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s ", name);
    for (const char *line = output; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t length = end ? (size_t)(end - line) : strlen(line);
        if (strncmp(line, prefix, strlen(prefix)) == 0) {
            size_t value = length - strlen(prefix);
            snprintf(out, out_size, "%.*s", (int)value, line + strlen(prefix));
            return;
        }
        line = end ? end + 1 : NULL;
    }
}

Test(teardown, reads_after_mpi_finalize_get_the_files_own_bytes, .timeout = 120)
{
    struct teardown_data data;
    teardown_data_init(&data);
    char *environment[] = {data.setting, "ADAPTDL_NUM_REPLICAS=2", "ADAPTDL_REPLICA_RANK=0",
                           "ADAPTDL_SEED=4", NULL};
    char *program = strdup(harness_build_path("tools/teardown_mpi"));
    char *argv[] = {program, data.path, NULL};
    struct run_result result;
    harness_run(&result, argv, environment, true, 90);
    cr_assert_eq(result.status, 0, "%s\nstdout %s\nstderr %s",
                 harness_describe_status(result.status), result.out, result.err);
    char seen[64];
    reported(result.out, "before_kept", seen, sizeof seen);
    cr_assert_neq(seen[0], '\0', "%s", result.out);
    cr_expect_str_neq(seen, data.expected, "before MPI_Finalize the descriptor reads the view");
    static const char *const after[] = {"thread_kept", "thread_open", "main_fopen",
                                        "atexit_kept", "atexit_open"};
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) {
        reported(result.out, after[i], seen, sizeof seen);
        cr_expect_str_eq(seen, data.expected, "%s after MPI_Finalize reads the file itself:\n%s",
                         after[i], result.out);
    }
    run_result_free(&result);
    free(program);
    teardown_data_free(&data);
}

Test(teardown, a_read_from_a_destructor_after_the_librarys_gets_the_files_own_bytes)
{
    struct teardown_data data;
    teardown_data_init(&data);
    char preload[1200], path[800];
    /* (harness_build_path answers in one buffer: one call at a time) */
    char *library = strdup(harness_build_path("libadaptshim.so"));
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", library,
             harness_build_path("faults/read_at_unload.so"));
    free(library);
    snprintf(path, sizeof path, "READ_AT_UNLOAD_PATH=%s", data.path);
    char *environment[] = {data.setting, "ADAPTDL_NUM_REPLICAS=2", "ADAPTDL_REPLICA_RANK=1",
                           "ADAPTDL_SEED=4", preload, path, NULL};
    char *program = strdup(harness_build_path("trainers/plain_reader"));
    char *argv[] = {program, "read", data.path, NULL};
    struct run_result result;
    harness_run(&result, argv, environment, false, 60);
    cr_assert_eq(result.status, 0, "%s\nstdout %s\nstderr %s",
                 harness_describe_status(result.status), result.out, result.err);
    char seen[64];
    reported(result.out, "size", seen, sizeof seen);
    cr_assert_neq(seen[0], '\0', "%s", result.out);
    cr_expect_null(strstr(seen, data.hash), "the trainer itself reads the view: %s", result.out);
    reported(result.out, "unload", seen, sizeof seen);
    cr_expect_str_eq(seen, data.expected, "the destructor reads the file itself:\n%s",
                     result.out);
    run_result_free(&result);
    free(program);
    teardown_data_free(&data);
}
