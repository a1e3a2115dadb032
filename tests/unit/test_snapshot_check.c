/* test_snapshot_check.c - range checks of decoded snapshots (a state
 * file is used whole or reported and not used: adaptshim(7) "Full disks and
 * hostile state files").
 *
 * A baseline that a run could have captured is accepted; each mutation of
 * it that no capture writes (an index past its pass, a pass no planner
 * makes, a directory in a file name...) is refused with a message naming
 * the field and what is accepted.  Snapshots captured from a registry are
 * accepted as they are. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_registry.h"
#include "pass_tracker.h"
#include "snapshot_check.h"

/* Two train files (one in a statistical pass longer than N) and an eval file. */
static void make_baseline(struct adaptdl_snapshot *snapshot)
{
    memset(snapshot, 0, sizeof *snapshot);
    snapshot->version = STATE_FORMAT_VERSION;
    snapshot->replicas = 4;
    snapshot->epoch = 3;
    snapshot->progress = 12.5;
    snapshot->global_bsz = 256;
    static const struct snapshot_file_position positions[] = {
        {.name = "train-0.bin", .record_count = 1000, .pass = 3, .current_index = 400,
         .pass_length = 1000, .role = DATA_ROLE_TRAIN},
        {.name = "train-1.bin", .record_count = 1000, .pass = 2, .current_index = 2500,
         .pass_length = 3000, .role = DATA_ROLE_TRAIN},
        {.name = "val.txt", .record_count = 50, .pass = 9, .current_index = 50,
         .pass_length = 50, .role = DATA_ROLE_EVAL},
        {.name = "empty.bin", .record_count = 0, .pass = 0, .current_index = 0,
         .pass_length = 0, .role = DATA_ROLE_EVAL},
    };
    snapshot->file_count = sizeof positions / sizeof positions[0];
    snapshot->files = calloc(snapshot->file_count, sizeof *snapshot->files);
    cr_assert_not_null(snapshot->files);
    for (size_t i = 0; i < snapshot->file_count; i++) {
        snapshot->files[i] = positions[i];
        snapshot->files[i].name = strdup(positions[i].name);
    }
}

static void accept(const struct adaptdl_snapshot *snapshot, const char *what)
{
    char error[320] = "";
    cr_expect_eq(snapshot_check_ranges(snapshot, error, sizeof error), 0, "%s: %s", what, error);
}

/* Refused, with `expected` in the one-line message. */
static void refuse(const struct adaptdl_snapshot *snapshot, const char *expected)
{
    char error[320] = "";
    cr_expect_eq(snapshot_check_ranges(snapshot, error, sizeof error), -1, "accepted: %s",
                 expected);
    cr_expect_not_null(strstr(error, expected), "\"%s\" lacks \"%s\"", error, expected);
}

Test(snapshot_check, a_snapshot_a_run_could_capture_is_accepted)
{
    struct adaptdl_snapshot snapshot;
    make_baseline(&snapshot);
    accept(&snapshot, "baseline");
    snapshot.files[0].pass_length = 0; /* 0 stands for N */
    accept(&snapshot, "pass_length 0");
    snapshot.files[1].pass_length = pass_tracker_longest_pass(1000);
    snapshot.files[1].current_index = snapshot.files[1].pass_length;
    accept(&snapshot, "the longest pass, complete");
    snapshot.files[1].pass_length = 1; /* a statistical pass may be short */
    snapshot.files[1].current_index = 0;
    accept(&snapshot, "a short train pass");
    snapshot_free(&snapshot);

    struct adaptdl_snapshot empty = {.version = STATE_FORMAT_VERSION, .replicas = 1};
    accept(&empty, "no files at all");
}

static void break_replicas(struct adaptdl_snapshot *s) { s->replicas = 0; }
static void break_replicas_high(struct adaptdl_snapshot *s) { s->replicas = (1u << 20) + 1; }
static void break_progress_nan(struct adaptdl_snapshot *s) { s->progress = NAN; }
static void break_progress_negative(struct adaptdl_snapshot *s) { s->progress = -1; }
static void break_global_bsz(struct adaptdl_snapshot *s) { s->global_bsz = UINT64_MAX; }
static void break_name_slash(struct adaptdl_snapshot *s)
{
    free(s->files[0].name);
    s->files[0].name = strdup("../train-0.bin");
}
static void break_name_empty(struct adaptdl_snapshot *s) { s->files[0].name[0] = '\0'; }
static void break_name_control(struct adaptdl_snapshot *s) { s->files[0].name[2] = '\n'; }
static void break_role(struct adaptdl_snapshot *s) { s->files[2].role = 7; }
static void break_index_past_pass(struct adaptdl_snapshot *s) { s->files[0].current_index = 1001; }
static void break_index_past_zero_length(struct adaptdl_snapshot *s)
{
    s->files[0].pass_length = 0;
    s->files[0].current_index = 1001;
}
static void break_huge_pass(struct adaptdl_snapshot *s)
{
    s->files[1].pass_length = UINT64_MAX - 1;
}
static void break_just_too_long(struct adaptdl_snapshot *s)
{
    s->files[1].pass_length = pass_tracker_longest_pass(1000) + 1;
}
static void break_eval_length(struct adaptdl_snapshot *s) { s->files[2].pass_length = 40; }
static void break_empty_file_length(struct adaptdl_snapshot *s) { s->files[3].pass_length = 5; }
static void break_epoch(struct adaptdl_snapshot *s) { s->epoch = 9; }

Test(snapshot_check, values_no_capture_writes_are_refused_naming_the_field)
{
    static const struct {
        void (*mutate)(struct adaptdl_snapshot *snapshot);
        const char *field;
    } cases[] = {
        {break_replicas, "replicas 0"},
        {break_replicas_high, "replicas 1048577"},
        {break_progress_nan, "progress"},
        {break_progress_negative, "progress -1"},
        {break_global_bsz, "global_bsz"},
        {break_name_slash, "basename"},
        {break_name_empty, "basename"},
        {break_name_control, "basename"},
        {break_role, "role 7"},
        {break_index_past_pass, "current_index 1001"},
        {break_index_past_zero_length, "current_index 1001"},
        {break_huge_pass, "pass_length 18446744073709551614"},
        {break_just_too_long, "pass_length 4096001"},
        {break_eval_length, "pass_length 40 of an eval file"},
        {break_empty_file_length, "pass_length 5 for a file of 0 records"},
        {break_epoch, "epoch 9"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct adaptdl_snapshot snapshot;
        make_baseline(&snapshot);
        cases[i].mutate(&snapshot);
        char error[320] = "";
        cr_expect_eq(snapshot_check_ranges(&snapshot, error, sizeof error), -1, "case %zu", i);
        cr_expect_not_null(strstr(error, cases[i].field), "case %zu names \"%s\": %s", i,
                           cases[i].field, error);
        cr_expect_not_null(strstr(error, "accepted"), "case %zu says what is: %s", i, error);
        cr_expect_null(strchr(error, '\n'), "case %zu: one line", i);
        snapshot_free(&snapshot);
    }
}

/* What dataset_registry_capture writes passes, whatever the files did. */
Test(snapshot_check, registry_captures_are_accepted)
{
    struct dataset_registry registry;
    dataset_registry_init(&registry, RESUME_REPLAY);
    static unsigned char bytes[8 * 30];
    struct data_entry train = {.record_size = 8, .role = DATA_ROLE_TRAIN, .shuffle = true,
                               .shard = true};
    struct data_entry eval = {.record_size = 8, .role = DATA_ROLE_EVAL, .shard = true};
    struct dataset_file files[2];
    char error[320] = "";
    cr_assert_eq(dataset_file_init(&files[0], &train, "/d/train.bin", bytes, sizeof bytes, 1,
                                   3, 1, error, sizeof error), 0, "%s", error);
    cr_assert_eq(dataset_file_init(&files[1], &eval, "/d/val.bin", bytes, 8 * 10, 1, 3, 1,
                                   error, sizeof error), 0, "%s", error);
    files[0].inode = 1;
    files[1].inode = 2;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(dataset_registry_add(&registry, &files[i], error, sizeof error), 0);
    for (int pass = 0; pass < 3; pass++) {
        struct adaptdl_snapshot snapshot = {.version = STATE_FORMAT_VERSION, .replicas = 3};
        cr_assert_eq(dataset_registry_capture(&registry, NULL, NULL, &snapshot), 0);
        cr_expect_eq(snapshot_check_ranges(&snapshot, error, sizeof error), 0, "pass %d: %s",
                     pass, error);
        snapshot_free(&snapshot);
        cr_assert_eq(dataset_view_end_pass(&files[0]), 0);
    }
    for (int i = 0; i < 2; i++)
        dataset_file_release(&files[i]);
    pthread_mutex_destroy(&registry.lock);
    free(registry.pending);
}

/* A delivered set names indices after current_index and before the pass's
 * end only (train-0.bin: index 400 of 1000, so 600 bits, 75 bytes). */
Test(snapshot_check, a_delivered_set_outside_its_pass_is_refused)
{
    struct adaptdl_snapshot snapshot;
    make_baseline(&snapshot);
    unsigned char bytes[76] = {0};
    snapshot.files[0].delivered_after = bytes;
    snapshot.files[0].delivered_after_size = 75;
    bytes[0] = 0x02;
    bytes[74] = 0x80;
    accept(&snapshot, "indices 401 and 999");
    bytes[0] = 0x03;
    refuse(&snapshot, "names current_index itself");
    bytes[0] = 0x02;
    snapshot.files[0].delivered_after_size = 76;
    refuse(&snapshot, "at most 75 bytes");
    snapshot.files[0].current_index = 1000;
    snapshot.files[0].delivered_after_size = 1;
    refuse(&snapshot, "indices past the pass");
    snapshot.files[0].delivered_after = NULL;
    snapshot.files[0].delivered_after_size = 0;
    snapshot_free(&snapshot);
}
