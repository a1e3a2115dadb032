/* test_descriptors.c - descriptor-level behaviour of a view
 * (INTERPOSITION-NOTES "Cases a test suite should cover", 4-7), probed with
 * tests/tools/fd_probe under the shim with shuffle on, two replicas, rank 1:
 * dup'd descriptors share one offset, pread leaves it alone, SEEK_END and
 * fstat give the view size, descriptor numbers freed by close, close_range,
 * closefrom or replaced by dup2 read their new file, F_DUPFD shares the
 * view, a fork child reads the inherited view (from its own copy of the
 * position), a vfork child that closes descriptors before exec leaves the
 * parent's views alone, threads read one view concurrently, and pipes, directories,
 * FIFOs and helper programs behave exactly as without the library.
 *
 * The expected view is what cat(1) prints under the same settings (cat's
 * output is checked against the layout of adaptshim(7) "What the trainer
 * sees" by test_sharding.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define HEADER_SIZE 16
#define RECORD_SIZE 24
#define RECORDS 101            /* odd: rank 1 of 2 gets a padded share */
#define VIEW_RECORDS 51
#define VIEW_SIZE (HEADER_SIZE + VIEW_RECORDS * RECORD_SIZE)
#define OTHER_TEXT "a file that is not data\nsecond line\n"

struct setup {
    const char *directory;
    size_t record_size;
    size_t records;
    char *data;                /* the data file (ids in the first 8 bytes of a record) */
    char *other;               /* a file that is not data */
    char data_entry[600];
    char *environment[6];
    unsigned char *view;       /* what cat reads under the shim */
    size_t view_size;
    unsigned char *file;       /* the physical file */
    size_t file_size;
};

/* A data file of `records` records of `record_size` bytes (its id in the
 * first 8 bytes, then a fill byte), a non-data file, and the view that rank
 * 1 of 2 reads with shuffle on. */
static void setup_init_geometry(struct setup *s, size_t record_size, size_t records)
{
    s->directory = harness_temp_dir();
    s->record_size = record_size;
    s->records = records;
    s->data = harness_path_in(s->directory, "ids.bin");
    s->other = harness_path_in(s->directory, "other.txt");
    s->file_size = HEADER_SIZE + records * record_size;
    s->file = calloc(1, s->file_size);
    memcpy(s->file, "IDSHEADER-------", HEADER_SIZE);
    for (uint64_t id = 0; id < records; id++) {
        memcpy(s->file + HEADER_SIZE + id * record_size, &id, sizeof id);
        memset(s->file + HEADER_SIZE + id * record_size + 8, (int)(id * 7 + 1), record_size - 8);
    }
    cr_assert_eq(harness_write_file(s->data, s->file, s->file_size), 0);
    cr_assert_eq(harness_write_file(s->other, OTHER_TEXT, strlen(OTHER_TEXT)), 0);
    snprintf(s->data_entry, sizeof s->data_entry,
             "ADAPTDL_DATA=%s:record=%zu:header=%d:shuffle=1", s->data, record_size, HEADER_SIZE);
    s->environment[0] = s->data_entry;
    s->environment[1] = "ADAPTDL_NUM_REPLICAS=2";
    s->environment[2] = "ADAPTDL_REPLICA_RANK=1";
    s->environment[3] = "ADAPTDL_SEED=5";
    s->environment[4] = NULL;

    char *out_path = harness_path_in(s->directory, "view");
    char *argv[] = {"/bin/cat", s->data, NULL};
    pid_t pid = harness_start(argv, s->environment, true, out_path, NULL);
    cr_assert_eq(harness_wait(pid, 20), 0, "cat under the shim");
    s->view = (unsigned char *)harness_read_file(out_path, &s->view_size);
    size_t expected = HEADER_SIZE + (records + 1) / 2 * record_size;
    cr_assert_eq(s->view_size, expected, "view of rank 1 of 2: %zu bytes, expected %zu",
                 s->view_size, expected);
    cr_assert_neq(memcmp(s->view + HEADER_SIZE, s->file + HEADER_SIZE + record_size,
                         s->view_size - HEADER_SIZE),
                  0, "the view differs from the file's own bytes");
    free(out_path);
}

static void setup_init(struct setup *s)
{
    setup_init_geometry(s, RECORD_SIZE, RECORDS);
    cr_assert_eq(s->view_size, VIEW_SIZE);
}

/* The probe binary: fd_probe, or fd_probe_lfs for the 64-bit entry points
 * (each test runs in a process of its own). */
static const char *fd_probe_program = "tools/fd_probe";

static void probe(struct run_result *result, const struct setup *s, const char *name,
                  const char *path, const char *third, bool preload)
{
    char *binary = strdup(harness_build_path(fd_probe_program));
    char *argv[] = {binary, (char *)name, (char *)path, (char *)third, NULL};
    harness_run(result, argv, s->environment, preload, 20);
    free(binary);
}

static void probe_ok(struct run_result *result, const struct setup *s, const char *name,
                     const char *third)
{
    probe(result, s, name, s->data, third, true);
    cr_assert_eq(result->status, 0, "fd_probe %s: status %d\nstdout %s\nstderr %s", name,
                 result->status, result->out, result->err);
}

/* The value of "LABEL VALUE" in the probe's output. */
static long long value_of(const char *output, const char *label)
{
    size_t length = strlen(label);
    const char *line = output;
    while (line != NULL && *line != '\0') {
        if (strncmp(line, label, length) == 0 && line[length] == ' ')
            return strtoll(line + length + 1, NULL, 10);
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    cr_assert_fail("no \"%s\" in the probe output:\n%s", label, output);
    return -1;
}

/* "read LABEL LENGTH HASH" must be the given bytes. */
static void expect_read(const char *output, const char *label, const void *bytes, size_t size,
                        const char *what)
{
    char expected[128];
    snprintf(expected, sizeof expected, "read %s %zu %016" PRIx64 "\n", label, size,
             harness_fnv1a(bytes, size));
    cr_expect(strstr(output, expected) != NULL, "%s: expected \"%.*s\" in\n%s", what,
              (int)strlen(expected) - 1, expected, output);
}

static void expect_view_read(const struct setup *s, const char *output, const char *label,
                             size_t offset, size_t size)
{
    char what[96];
    snprintf(what, sizeof what, "%s = view bytes [%zu, %zu)", label, offset, offset + size);
    expect_read(output, label, s->view + offset, size, what);
}

Test(descriptors, dup_shares_one_offset)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "dup", NULL);
    expect_view_read(&s, r.out, "a", 0, 100);
    expect_view_read(&s, r.out, "b", 100, 50);   /* read through the dup */
    expect_view_read(&s, r.out, "c", 150, 20);   /* through dup2(fd, 30) */
    cr_expect_eq(value_of(r.out, "offset_fd"), 170);
    cr_expect_eq(value_of(r.out, "offset_dup"), 170);
    cr_expect_eq(value_of(r.out, "offset_dup2"), 170);
    expect_view_read(&s, r.out, "d", 170, 10);   /* after closing one copy */
    cr_expect_eq(value_of(r.out, "offset_after_close"), 180);
    run_result_free(&r);
}

static void expect_positioned_reads_keep_the_offset(void)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "pread", NULL);
    expect_view_read(&s, r.out, "a", 0, 30);
    expect_view_read(&s, r.out, "b", 200, 40);
    cr_expect_eq(value_of(r.out, "offset_after_pread"), 30);
    expect_view_read(&s, r.out, "c", 30, 20);
    expect_view_read(&s, r.out, "d", 300, 25);   /* preadv */
    cr_expect_eq(value_of(r.out, "offset_after_preadv"), 50);
    expect_view_read(&s, r.out, "e", VIEW_SIZE - 10, 10);  /* stops at the view's end */
    cr_expect_eq(value_of(r.out, "pread_past_end"), 0);
    expect_view_read(&s, r.out, "f", 50, 5);
    expect_view_read(&s, r.out, "g", 400, 25);   /* preadv2 at an offset */
    cr_expect_eq(value_of(r.out, "offset_after_preadv2"), 55);
    /* preadv2 at -1 is a readv at the current offset: served short at the
     * end of the record it starts in (adaptshim(7) "Read-ahead outside the shim") */
    expect_view_read(&s, r.out, "h", 55, HEADER_SIZE + 2 * RECORD_SIZE - 55);
    cr_expect_eq(value_of(r.out, "offset_after_preadv2_current"), HEADER_SIZE + 2 * RECORD_SIZE);
    run_result_free(&r);
}

Test(descriptors, pread_does_not_move_the_offset)
{
    expect_positioned_reads_keep_the_offset();
}

/* The same through pread64, preadv64 and preadv64v2 (a program built with
 * _FILE_OFFSET_BITS=64); the shim's preadv64v2 is an alias of its preadv2,
 * as glibc's is. */
Test(descriptors, the_64_bit_positioned_reads_keep_the_offset)
{
    harness_expect_intercepted_imports(
        "tools/fd_probe_lfs",
        (const char *const[]){"pread64@", "preadv64@", "preadv64v2@", "lseek64@", NULL});
    fd_probe_program = "tools/fd_probe_lfs";
    expect_positioned_reads_keep_the_offset();
}

Test(descriptors, seek_end_and_fstat_are_the_view_size)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "seekend", NULL);
    cr_expect_eq(value_of(r.out, "fstat_size"), VIEW_SIZE);
    cr_expect_eq(value_of(r.out, "stat_size"), VIEW_SIZE);
    cr_expect_eq(value_of(r.out, "statx_size"), VIEW_SIZE);
    cr_expect_eq(value_of(r.out, "statx_fd_size"), VIEW_SIZE, "statx(fd, NULL, AT_EMPTY_PATH)");
    cr_expect_eq(value_of(r.out, "statx_fd_blksize"), value_of(r.out, "fstat_blksize"),
                 "statx reports the block size fstat does");
    cr_expect_eq(value_of(r.out, "seek_end"), VIEW_SIZE);
    cr_expect_eq(value_of(r.out, "seek_end_minus_10"), VIEW_SIZE - 10);
    expect_view_read(&s, r.out, "tail", VIEW_SIZE - 10, 10);
    cr_expect_eq(value_of(r.out, "read_at_end"), 0);
    cr_expect_eq(value_of(r.out, "offset_at_end"), VIEW_SIZE);
    run_result_free(&r);
}

static void expect_other_file(const struct setup *s, const char *output, const char *label)
{
    cr_expect_eq(value_of(output, "other_size"), (long long)strlen(OTHER_TEXT),
                 "fstat of the non-data file in a reused number");
    char what[96];
    snprintf(what, sizeof what, "%s reads the non-data file", label);
    expect_read(output, label, OTHER_TEXT, strlen(OTHER_TEXT), what);
    (void)s;
}

Test(descriptors, reused_descriptor_number_reads_the_real_file)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "reuse", s.other);
    expect_view_read(&s, r.out, "a", 0, 10);
    cr_expect_eq(value_of(r.out, "same_fd"), 1, "the test needs the number reused");
    expect_other_file(&s, r.out, "other");
    run_result_free(&r);
}

Test(descriptors, dup2_of_a_non_data_file_onto_a_view)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "dup2", s.other);
    expect_view_read(&s, r.out, "a", 0, 64);
    expect_view_read(&s, r.out, "b", 64, 16);
    expect_other_file(&s, r.out, "other");
    expect_view_read(&s, r.out, "c", 80, 16);   /* the other copy still holds the view */
    cr_expect_eq(value_of(r.out, "read_replaced_at_end"), 0);
    run_result_free(&r);
}

/* The probe closes a view's descriptors with `probe` (close_range or
 * closefrom), then opens two plain files that take the freed numbers: they
 * must read as themselves, not as the view. */
static void check_closing_untracks_the_numbers(const char *probe)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, probe, s.other);
    expect_view_read(&s, r.out, "a", 0, 40);
    cr_expect_eq(value_of(r.out, "same_fds"), 1, "the test needs the numbers reused");
    expect_other_file(&s, r.out, "other1");
    expect_other_file(&s, r.out, "other2");
    run_result_free(&r);
}

Test(descriptors, close_range_untracks_the_numbers)
{
    check_closing_untracks_the_numbers("close_range");
}

/* Regression: closefrom(3) (glibc 2.34) closes through the close_range
 * system call inside libc, which no wrapper saw; the shim kept the closed
 * numbers' view slots, and the next file opened in such a number (here a
 * plain text file) reported the view's size and read view bytes.  Fixed by
 * wrapping closefrom (shim/io_fd.c). */
Test(descriptors, closefrom_untracks_the_numbers)
{
    check_closing_untracks_the_numbers("closefrom");
}

/* The shim may keep a descriptor of its own per data file (and copy large
 * pieces with pread from it).  close_range(fd, ~0U) and closefrom(fd) right
 * after the first open close it too; after the freed numbers are taken by
 * another file, a reopened view must still read the data file's bytes.
 * Records of 8 KiB make the copies large. */
static void check_reopen_after(const char *name)
{
    struct setup s;
    setup_init_geometry(&s, 8192, 9);
    char *big_other = harness_path_in(s.directory, "big-other.bin");
    size_t big_size = 4 * s.file_size;
    unsigned char *big = malloc(big_size);
    for (size_t i = 0; i < big_size; i++)
        big[i] = (unsigned char)(i * 131 + 7);
    cr_assert_eq(harness_write_file(big_other, big, big_size), 0);
    struct run_result r;
    probe_ok(&r, &s, name, big_other);
    expect_view_read(&s, r.out, "view", 0, s.view_size);
    cr_expect_eq(value_of(r.out, "other_size"), (long long)big_size);
    expect_read(r.out, "other", big, big_size, "the other file through a reused number");
    run_result_free(&r);
    free(big);
}

Test(descriptors, view_survives_close_range_to_the_end)
{
    check_reopen_after("reopen_after_close_range");
}

Test(descriptors, view_survives_closefrom)
{
    check_reopen_after("reopen_after_closefrom");
}

/* An O_PATH descriptor of a data file is no view: its read fails with
 * EBADF (before, it read view bytes), and fstat gives the file's size. */
Test(descriptors, an_o_path_descriptor_is_not_a_view)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "opath", NULL);
    cr_expect_eq(value_of(r.out, "opath_read"), -1);
    cr_expect_eq(value_of(r.out, "opath_read_ebadf"), 1);
    cr_expect_eq(value_of(r.out, "opath_fstat_size"), (long long)(HEADER_SIZE + RECORDS *
                                                                  RECORD_SIZE));
    run_result_free(&r);
}

static void expect_duplicates_share_the_view(void)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "dupfd", NULL);
    cr_expect_eq(value_of(r.out, "dupfd_at_least_50"), 1);
    cr_expect_eq(value_of(r.out, "dupfd_cloexec_at_least_70"), 1);
    cr_expect_eq(value_of(r.out, "cloexec_flag"), 1);
    expect_view_read(&s, r.out, "a", 0, 64);
    expect_view_read(&s, r.out, "b", 64, 64);
    expect_view_read(&s, r.out, "c", 128, 64);
    cr_expect_eq(value_of(r.out, "offset_fd"), 192);
    cr_expect_eq(value_of(r.out, "offset_low"), 192);
    cr_expect_eq(value_of(r.out, "offset_cloexec"), 192);
    run_result_free(&r);
}

Test(descriptors, fcntl_dupfd_shares_the_view)
{
    expect_duplicates_share_the_view();
}

/* The same through fcntl64, which the shim exports as an alias of fcntl. */
Test(descriptors, fcntl64_dupfd_shares_the_view)
{
    harness_expect_intercepted_imports("tools/fd_probe_lfs",
                                       (const char *const[]){"fcntl64@", NULL});
    fd_probe_program = "tools/fd_probe_lfs";
    expect_duplicates_share_the_view();
}

/* A fork child reads the inherited descriptor and sees the view from the
 * parent's position.  Documented difference from the kernel (adaptshim(7) "After
 * fork"): the child continues with its own copy of the view position, so
 * the parent's offset does not move when the child reads. */
Test(descriptors, fork_child_reads_the_inherited_view)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "fork", NULL);
    expect_view_read(&s, r.out, "a", 0, 100);
    expect_view_read(&s, r.out, "child", 100, 200);
    cr_expect_eq(value_of(r.out, "child_offset"), 300);
    cr_expect_eq(value_of(r.out, "child_status"), 0);
    expect_view_read(&s, r.out, "parent", 100, 200);
    cr_expect_eq(value_of(r.out, "parent_offset"), 300);
    run_result_free(&r);
}

/* A vfork child shares the parent's memory until it execs, and so the
 * shim's descriptor table: when it closes the inherited descriptors first
 * (CPython's subprocess does: vfork, then close_range or closefrom for
 * close_fds=True, then exec), the wrappers remove the parent's view slots,
 * and the parent's data descriptor afterwards reads the physical file (from
 * the kernel offset 0, fstat reporting the file's size).  Regression: the
 * wrappers now recognise a vfork child (a pid cached at start-up, renewed by
 * a pthread_atfork child handler, which vfork does not run) and leave the
 * shared tables alone there. */
Test(descriptors, vfork_child_closing_descriptors_leaves_the_parents_view)
{
    struct setup s;
    setup_init(&s);
    const char *hows[] = {"close", "close_range", "closefrom"};
    for (size_t i = 0; i < 3; i++) {
        struct run_result r;
        probe_ok(&r, &s, "vfork", hows[i]);
        expect_view_read(&s, r.out, "a", 0, 100);
        cr_expect_eq(value_of(r.out, "child_status"), 0, "%s", hows[i]);
        expect_view_read(&s, r.out, "parent", 100, 200);
        cr_expect_eq(value_of(r.out, "parent_offset"), 300, "%s", hows[i]);
        cr_expect_eq(value_of(r.out, "parent_size"), VIEW_SIZE, "%s: fstat of the parent's view",
                     hows[i]);
        run_result_free(&r);
    }
}

Test(descriptors, threads_read_one_view_concurrently)
{
    struct setup s;
    setup_init(&s);
    char geometry[32];
    snprintf(geometry, sizeof geometry, "%d,%d", RECORD_SIZE, HEADER_SIZE);
    for (int round = 0; round < 3; round++) {
        struct run_result r;
        probe_ok(&r, &s, "threads", geometry);
        expect_view_read(&s, r.out, "whole", 0, VIEW_SIZE);
        cr_expect_eq(value_of(r.out, "thread_failures"), 0, "%s", r.out);
        expect_view_read(&s, r.out, "threads_pread", 0, VIEW_SIZE);
        expect_view_read(&s, r.out, "threads_sequential", 0, VIEW_SIZE);
        cr_expect_eq(value_of(r.out, "pread_matches_whole"), 1);
        cr_expect_eq(value_of(r.out, "sequential_matches_whole"), 1);
        cr_expect_eq(value_of(r.out, "offset_after_threads"), VIEW_SIZE);
        cr_expect_eq(value_of(r.out, "read_at_end"), 0);
        run_result_free(&r);
    }
}

Test(descriptors, pipe_in_a_freed_number_is_a_pipe)
{
    struct setup s;
    setup_init(&s);
    struct run_result r;
    probe_ok(&r, &s, "pipe", NULL);
    expect_view_read(&s, r.out, "a", 0, 10);
    cr_expect_eq(value_of(r.out, "same_fd"), 1, "the test needs the number reused");
    cr_expect_eq(value_of(r.out, "is_fifo"), 1);
    expect_read(r.out, "pipe", "pipe-payload\n", 13, "the pipe's bytes");
    run_result_free(&r);
}

/* Helper programs and pipes under the shim: exactly as without it. */
Test(descriptors, shell_helpers_and_pipes_are_untouched)
{
    struct setup s;
    setup_init(&s);
    char script[1024];
    snprintf(script, sizeof script,
             "cat /proc/self/status >/dev/null; ls /; echo pipe-data | tr a-z A-Z | cat; "
             "cat %s; ls %s; wc -c < %s; head -c 5 %s | od -c",
             s.other, s.directory, s.other, s.other);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct run_result plain, shimmed;
    harness_run(&plain, argv, s.environment, false, 20);
    harness_run(&shimmed, argv, s.environment, true, 20);
    cr_assert_eq(plain.status, 0, "%s", plain.err);
    cr_expect_eq(shimmed.status, 0);
    cr_expect_str_eq(shimmed.out, plain.out);
    cr_expect_str_eq(shimmed.err, plain.err);
    cr_expect(strstr(shimmed.out, "PIPE-DATA\n") != NULL);
    run_result_free(&plain);
    run_result_free(&shimmed);
}

/* --- non-regular files named by the glob ----------------------------------------- */

struct special_setup {
    struct setup base;
    char *subdirectory;
    char *fifo;
    char glob_entry[600];
};

static void special_setup_init(struct special_setup *s)
{
    setup_init(&s->base);
    s->subdirectory = harness_path_in(s->base.directory, "sub");
    s->fifo = harness_path_in(s->base.directory, "fifo");
    cr_assert_eq(mkdir(s->subdirectory, 0755), 0);
    cr_assert_eq(mkfifo(s->fifo, 0644), 0);
    char *inner = harness_path_in(s->subdirectory, "inner.txt");
    cr_assert_eq(harness_write_file(inner, "x", 1), 0);
    free(inner);
    /* every name in the directory is "data", including the directory and the FIFO */
    snprintf(s->glob_entry, sizeof s->glob_entry, "ADAPTDL_DATA=%s/*:record=%d:header=%d",
             s->base.directory, RECORD_SIZE, HEADER_SIZE);
    s->base.environment[0] = s->glob_entry;
}

Test(descriptors, directory_named_by_the_glob_is_left_alone)
{
    struct special_setup s;
    special_setup_init(&s);
    struct run_result plain, shimmed;
    probe(&plain, &s.base, "dir", s.subdirectory, NULL, false);
    probe(&shimmed, &s.base, "dir", s.subdirectory, NULL, true);
    cr_assert_eq(plain.status, 0, "%s", plain.err);
    cr_expect_eq(shimmed.status, 0, "%s", shimmed.err);
    cr_expect_str_eq(shimmed.out, plain.out);
    cr_expect_str_eq(shimmed.err, "");
    cr_expect_eq(value_of(shimmed.out, "read_errno"), EISDIR);
    cr_expect_eq(value_of(shimmed.out, "entries"), 1);
    run_result_free(&plain);
    run_result_free(&shimmed);
    /* the glob is live: the regular file next to them is a view */
    char *reader = strdup(harness_build_path("trainers/plain_reader"));
    char *argv[] = {reader, "read", s.base.data, NULL};
    struct run_result view;
    harness_run(&view, argv, s.base.environment, true, 20);
    cr_expect_eq(view.status, 0, "%s", view.err);
    char expected[64];
    snprintf(expected, sizeof expected, "size %d bytes %d ", VIEW_SIZE, VIEW_SIZE);
    cr_expect(strncmp(view.out, expected, strlen(expected)) == 0, "a view: %s", view.out);
    run_result_free(&view);
    free(reader);
}

/* Writes payload into the FIFO as soon as a reader has it open, then closes
 * it at once (as `echo ... > fifo` does).  Returns the writer's pid. */
static pid_t start_fifo_writer(const char *fifo, const char *payload)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid != 0)
        return pid;
    signal(SIGPIPE, SIG_IGN);
    double deadline = harness_monotonic_seconds() + 10;
    int fd;
    while ((fd = open(fifo, O_WRONLY | O_NONBLOCK)) < 0) {
        if (errno != ENXIO || harness_monotonic_seconds() > deadline)
            _exit(3);
        usleep(1000);
    }
    size_t length = strlen(payload);
    ssize_t written = write(fd, payload, length);
    close(fd);
    _exit(written == (ssize_t)length ? 0 : 4);
}

static void check_fifo(const char *name)
{
    struct special_setup s;
    special_setup_init(&s);
    static const char payload[] = "fifo-payload\n";
    struct run_result results[2];
    for (int shim = 0; shim < 2; shim++) {
        pid_t writer = start_fifo_writer(s.fifo, payload);
        char *binary = strdup(harness_build_path("tools/fd_probe"));
        char *argv[] = {binary, (char *)name, s.fifo, NULL};
        harness_run(&results[shim], argv, s.base.environment, shim == 1, 5);
        free(binary);
        kill(writer, SIGKILL);  /* a writer that never found a reader */
        waitpid(writer, NULL, 0);
    }
    cr_assert_eq(results[0].status, 0, "%s without the shim: %s", name, results[0].err);
    cr_expect_eq(results[1].status, 0, "%s under the shim: status %d (137: hung) %s", name,
                 results[1].status, results[1].err);
    cr_expect_str_eq(results[1].out, results[0].out, "%s", name);
    expect_read(results[1].out, "fifo", payload, strlen(payload), "the FIFO's bytes");
    cr_expect_str_eq(results[1].err, "");
    run_result_free(&results[0]);
    run_result_free(&results[1]);
}

Test(descriptors, fifo_named_by_the_glob_is_left_alone_by_open)
{
    check_fifo("fifo");
}

/* Regression: fopen of a non-regular file matched by the glob used to open
 * it once to classify it, close it and let the real fopen open it again; on
 * a FIFO the writer's bytes were lost with the first open and the reader
 * then waited for a writer that never came (status 137 here).  Fixed in
 * shim/io_stdio.c by fdopen'ing the descriptor already open. */
Test(descriptors, fifo_named_by_the_glob_is_left_alone_by_fopen)
{
    check_fifo("fifo-stdio");
}
