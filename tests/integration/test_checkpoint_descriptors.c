/* test_checkpoint_descriptors.c - checkpoint commits through the paths that
 * bypass the close wrapper (a checkpoint written through open +
 * fdopen + fclose, or any other path a trainer may take to its file,
 * commits exactly once, at the moment the file is complete: adaptshim(7)
 * "Descriptors closed inside libc"): glibc's
 * fclose of an fdopen'd stream and freopen close the descriptor inside
 * libc, and a raw close system call is seen by nobody.  What the shim
 * remembers of such a descriptor must never commit later, when the kernel
 * hands the number out again.  tests/tools/checkpoint_probe does the I/O;
 * the snapshots are read from the debug log ("snapshot N bound to ..." and
 * the file positions under it). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define CK_HEADER 16
#define CK_RECORD 32
#define CK_RECORDS 100

struct checkpoint_setup {
    const char *directory;
    char *data;
    char *checkpoint;
    char *other;
    char data_setting[600];
    char state_setting[600];
    char save_setting[600];
    char *environment[5];
};

static void checkpoint_setup_init(struct checkpoint_setup *s)
{
    s->directory = harness_temp_dir();
    s->data = harness_path_in(s->directory, "data.bin");
    s->checkpoint = harness_path_in(s->directory, "ck.bin");
    s->other = harness_path_in(s->directory, "other.txt");
    size_t size = CK_HEADER + CK_RECORDS * CK_RECORD;
    unsigned char *bytes = calloc(1, size);
    cr_assert(bytes != NULL);
    for (uint64_t id = 0; id < CK_RECORDS; id++)
        memcpy(bytes + CK_HEADER + id * CK_RECORD, &id, sizeof id);
    cr_assert_eq(harness_write_file(s->data, bytes, size), 0);
    free(bytes);
    cr_assert_eq(harness_write_file(s->other, "not a checkpoint\n", 17), 0);
    snprintf(s->data_setting, sizeof s->data_setting, "ADAPTDL_DATA=%s:record=%d:header=%d",
             s->data, CK_RECORD, CK_HEADER);
    snprintf(s->state_setting, sizeof s->state_setting, "ADAPTDL_CHECKPOINT_PATH=%s/state",
             s->directory);
    snprintf(s->save_setting, sizeof s->save_setting, "ADAPTDL_SAVE=%s/ck*", s->directory);
    s->environment[0] = s->data_setting;
    s->environment[1] = s->state_setting;
    s->environment[2] = s->save_setting;
    s->environment[3] = "ADAPTDL_LOG=debug";
    s->environment[4] = NULL;
}

static void run_checkpoint_probe(struct run_result *result, const struct checkpoint_setup *s,
                                 char *const arguments[])
{
    char *argv[8];
    size_t used = 0;
    argv[used++] = strdup(harness_build_path("tools/checkpoint_probe"));
    for (size_t i = 0; arguments[i] != NULL && used < 7; i++)
        argv[used++] = arguments[i];
    argv[used] = NULL;
    harness_run(result, argv, s->environment, true, 20);
    free(argv[0]);
    cr_assert_eq(result->status, 0, "checkpoint_probe %s: status %d\n%s%s", arguments[0],
                 result->status, result->out, result->err);
}

/* The data index a snapshot bound to the checkpoint records (the line
 * after "bound to"), or -1 without one. */
static long long bound_index(const char *log)
{
    const char *bound = strstr(log, " bound to ");
    const char *index = bound != NULL ? strstr(bound, " index ") : NULL;
    return index != NULL ? strtoll(index + strlen(" index "), NULL, 10) : -1;
}

/* Regression: glibc's fclose closed the fdopen'd descriptor behind the close
 * wrapper, so nothing was committed there; the close of the unrelated file
 * that got the number then bound a snapshot with the position 20 records
 * later (index 30). */
Test(checkpoint_descriptors, fdopen_then_fclose_commits_once_at_the_fclose)
{
    struct checkpoint_setup s;
    checkpoint_setup_init(&s);
    char header[16], record[16];
    snprintf(header, sizeof header, "%d", CK_HEADER);
    snprintf(record, sizeof record, "%d", CK_RECORD);
    char *arguments[] = {"fdopen", s.data, s.checkpoint, s.other, header, record, NULL};
    struct run_result r;
    run_checkpoint_probe(&r, &s, arguments);
    cr_expect(strstr(r.out, "same_fd 1\n") != NULL, "the test needs the number reused: %s",
              r.out);
    cr_expect_eq(harness_count_occurrences(r.err, " bound to "), 1, "one commit:\n%s", r.err);
    cr_expect_eq(bound_index(r.err), 10, "bound at the fclose, after 10 records:\n%s", r.err);
    run_result_free(&r);
}

/* Regression: a checkpoint descriptor closed by a raw system call stayed
 * remembered; the pipe and then the checkpoint's own read-only descriptor
 * that took its number each committed a snapshot when closed. */
Test(checkpoint_descriptors, a_stale_entry_never_commits_on_a_reused_number)
{
    struct checkpoint_setup s;
    checkpoint_setup_init(&s);
    char *arguments[] = {"stale", s.checkpoint, NULL};
    struct run_result r;
    run_checkpoint_probe(&r, &s, arguments);
    cr_expect_str_eq(r.out, "same_fd 1\nsame_fd 1\n", "the test needs the numbers reused");
    cr_expect_eq(harness_count_occurrences(r.err, " bound to "), 0,
                 "no close wrapper saw either checkpoint close:\n%s", r.err);
    run_result_free(&r);
}

/* Regression: freopen of a stream that writes a checkpoint failed with
 * EBADF. */
Test(checkpoint_descriptors, freopen_of_a_checkpoint_stream_commits_it)
{
    struct checkpoint_setup s;
    checkpoint_setup_init(&s);
    char *log = harness_path_in(s.directory, "log.txt");
    char *arguments[] = {"freopen", s.checkpoint, log, NULL};
    struct run_result r;
    run_checkpoint_probe(&r, &s, arguments);
    cr_expect_eq(harness_count_occurrences(r.err, " bound to "), 1, "%s", r.err);
    char expected[700];
    snprintf(expected, sizeof expected, " bound to %s (size 6,", s.checkpoint);
    cr_expect(strstr(r.err, expected) != NULL, "the checkpoint, complete:\n%s", r.err);
    char *text = harness_read_file(log, NULL);
    cr_expect(text != NULL && strcmp(text, "log\n") == 0);
    free(text);
    run_result_free(&r);
    free(log);
}

/* Regression: fcloseall was not interposed: a checkpoint written with stdio
 * and closed by it never committed, and the view stream stayed behind. */
Test(checkpoint_descriptors, fcloseall_commits_a_checkpoint_stream)
{
    struct checkpoint_setup s;
    checkpoint_setup_init(&s);
    char header[16], record[16];
    snprintf(header, sizeof header, "%d", CK_HEADER);
    snprintf(record, sizeof record, "%d", CK_RECORD);
    char *arguments[] = {"fcloseall", s.data, s.checkpoint, header, record, NULL};
    struct run_result r;
    run_checkpoint_probe(&r, &s, arguments);
    cr_expect(strstr(r.out, "fcloseall 0\n") != NULL, "%s", r.out);
    cr_expect_eq(harness_count_occurrences(r.err, " bound to "), 1, "one commit:\n%s", r.err);
    cr_expect_eq(bound_index(r.err), 10, "bound after the 10 records read:\n%s", r.err);
    run_result_free(&r);
}
