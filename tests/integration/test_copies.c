/* test_copies.c - sendfile, splice and copy_file_range out of a data view
 * into destinations that take fewer bytes than they are offered
 * (shim/io_copy.c): a non-blocking pipe that fills up (a short count, or
 * -1 with EAGAIN and nothing consumed) and a file under RLIMIT_FSIZE (a
 * short count, then EFBIG).  Whatever the destination refused stays in the
 * view, to be copied again: every byte of the view arrives once, in order,
 * and after every call the source position equals the bytes delivered.
 * tests/tools/copy_probe drives the copies; the expected view is what
 * plain_reader reads with read(2) under the same settings. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define COPY_HEADER 16
#define COPY_RECORD 1024
#define COPY_RECORDS 301        /* rank 1 of 2: 151 records, 154640 bytes */

struct copy_setup {
    const char *directory;
    char *data;
    char data_entry[600];
    char *environment[5];
    char expected[128];         /* "read received LENGTH HASH" of the view */
    long long view_size;
};

static void copy_setup_init(struct copy_setup *s)
{
    s->directory = harness_temp_dir();
    s->data = harness_path_in(s->directory, "records.bin");
    size_t size = COPY_HEADER + (size_t)COPY_RECORDS * COPY_RECORD;
    unsigned char *bytes = malloc(size);
    cr_assert(bytes != NULL);
    memcpy(bytes, "COPYHEADER------", COPY_HEADER);
    for (size_t id = 0; id < COPY_RECORDS; id++)
        for (size_t i = 0; i < COPY_RECORD; i++)
            bytes[COPY_HEADER + id * COPY_RECORD + i] = (unsigned char)(id * 31 + i * 7 + 1);
    cr_assert_eq(harness_write_file(s->data, bytes, size), 0);
    free(bytes);
    snprintf(s->data_entry, sizeof s->data_entry, "ADAPTDL_DATA=%s:record=%d:header=%d:shuffle=1",
             s->data, COPY_RECORD, COPY_HEADER);
    s->environment[0] = s->data_entry;
    s->environment[1] = "ADAPTDL_NUM_REPLICAS=2";
    s->environment[2] = "ADAPTDL_REPLICA_RANK=1";
    s->environment[3] = "ADAPTDL_SEED=9";
    s->environment[4] = NULL;

    char *reader = strdup(harness_build_path("trainers/plain_reader"));
    char *argv[] = {reader, "read", s->data, NULL};
    struct run_result view;
    harness_run(&view, argv, s->environment, true, 20);
    cr_assert_eq(view.status, 0, "plain_reader: %s", view.err);
    long long reported_size;
    unsigned long long bytes_read;
    char hash[32];
    cr_assert_eq(sscanf(view.out, "size %lld bytes %llu hash %31s", &reported_size, &bytes_read,
                        hash), 3, "%s", view.out);
    cr_assert_eq(reported_size, COPY_HEADER + 151LL * COPY_RECORD, "a sharded view");
    cr_assert_eq((long long)bytes_read, reported_size);
    s->view_size = reported_size;
    snprintf(s->expected, sizeof s->expected, "read received %lld %s\n", reported_size, hash);
    run_result_free(&view);
    free(reader);
}

/* The probe binary: copy_probe, or copy_probe_lfs for the 64-bit entry
 * points (each test runs in a process of its own). */
static const char *copy_probe_program = "tools/copy_probe";

static void run_copy_probe(struct run_result *result, const struct copy_setup *s,
                           const char *how, const char *out)
{
    char *probe = strdup(harness_build_path(copy_probe_program));
    char *argv[] = {probe, (char *)how, s->data, (char *)out, NULL};
    harness_run(result, argv, s->environment, true, 60);
    free(probe);
    cr_assert_eq(result->status, 0, "copy_probe %s: status %d\n%s%s", how, result->status,
                 result->out, result->err);
}

static long long probe_value(const char *output, const char *label)
{
    const char *found = strstr(output, label);
    cr_assert(found != NULL, "no \"%s\" in\n%s", label, output);
    return strtoll(found + strlen(label), NULL, 10);
}

/* Regression: the view gave up a whole 64 KiB chunk per call and the bytes
 * the full pipe refused were lost (only the first 4112 bytes arrived). */
static void expect_pipe_copy_is_exact(const char *how)
{
    struct copy_setup s;
    copy_setup_init(&s);
    struct run_result r;
    run_copy_probe(&r, &s, how, NULL);
    cr_expect(strstr(r.out, s.expected) != NULL, "%s: every byte of the view once, in order: "
              "expected \"%.*s\" in\n%s", how, (int)strlen(s.expected) - 1, s.expected, r.out);
    cr_expect_eq(probe_value(r.out, "consistent "), 1,
                 "%s: after each call the source stands after what the pipe took\n%s", how,
                 r.out);
    cr_expect_gt(probe_value(r.out, "eagain "), 0, "%s: the pipe was full at least once", how);
    cr_expect_gt(probe_value(r.out, "short "), 0, "%s: short counts happened", how);
    cr_expect_eq(probe_value(r.out, "offset_at_end "), s.view_size);
    run_result_free(&r);
}

Test(copies, sendfile_into_a_full_non_blocking_pipe_loses_nothing)
{
    expect_pipe_copy_is_exact("sendfile");
}

Test(copies, sendfile_with_an_offset_into_a_full_pipe_loses_nothing)
{
    expect_pipe_copy_is_exact("sendfile-offset");
}

/* The same through sendfile64 and fcntl64 (a program built with
 * _FILE_OFFSET_BITS=64), which the shim exports as aliases of its sendfile
 * and fcntl, as glibc does. */
Test(copies, sendfile64_into_a_full_pipe_loses_nothing)
{
    harness_expect_intercepted_imports("tools/copy_probe_lfs",
                                       (const char *const[]){"sendfile64@", "fcntl64@", NULL});
    copy_probe_program = "tools/copy_probe_lfs";
    expect_pipe_copy_is_exact("sendfile");
    expect_pipe_copy_is_exact("sendfile-offset");
}

Test(copies, splice_into_a_full_non_blocking_pipe_loses_nothing)
{
    expect_pipe_copy_is_exact("splice");
}

/* As the kernel's: copy_file_range writes regular files only. */
Test(copies, copy_file_range_into_a_pipe_is_einval_and_consumes_nothing)
{
    struct copy_setup s;
    copy_setup_init(&s);
    struct run_result r;
    run_copy_probe(&r, &s, "copy_file_range-pipe", NULL);
    cr_expect(strstr(r.out, "result -1 errno 22\n") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "offset 0\n") != NULL, "%s", r.out);
    run_result_free(&r);
}

/* Regression: the bytes past the size limit were consumed and lost. */
Test(copies, copy_file_range_cut_short_by_a_size_limit_loses_nothing)
{
    struct copy_setup s;
    copy_setup_init(&s);
    char *out = harness_path_in(s.directory, "copy.bin");
    struct run_result r;
    run_copy_probe(&r, &s, "copy_file_range-limit", out);
    cr_expect(strstr(r.out, "first 10000 offset 10000\n") != NULL, "short at the limit:\n%s",
              r.out);
    cr_expect(strstr(r.out, "second -1 errno 27 offset 10000\n") != NULL,
              "EFBIG, nothing consumed:\n%s", r.out);
    cr_expect(strstr(r.out, s.expected) != NULL, "the copy is the view: expected \"%.*s\" in\n%s",
              (int)strlen(s.expected) - 1, s.expected, r.out);
    run_result_free(&r);
    free(out);
}
