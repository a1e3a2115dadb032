/* test_bad_input.c - bad input (adaptshim(7) "WHAT THE TRAINER SEES" and
 * "CHECKPOINT BINDING"): a record size that does not divide the payload
 * (EINVAL, one error line, tail=drop), a missing data file (the trainer's
 * own ENOENT), a data file opened for writing (not virtualized, a
 * warning), corrupt, truncated and missing snapshots (an error or warning
 * and a fresh start), a dataset whose record count changed since the
 * snapshot (exit status 2, nothing overwritten), and ADAPTDL_SAVE without
 * ADAPTDL_CHECKPOINT_PATH (a warning, the trainer runs as without the
 * library).  The trainer's checkpoint stays intact in every case.  Then the
 * state directory's own hazards: a full disk fails the trainer's commit
 * (rename, close, fclose) with ENOSPC; FIFOs, leftovers of killed writers,
 * sealed snapshots with values out of range, a renamed dataset, a state
 * directory that cannot be used and a mistyped variable name.  Last,
 * settings that can match nothing: a malformed data glob, a data glob or
 * hints file in a missing directory (exit 2), a checkpoint glob in one (a
 * warning). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"
#include "state_store.h"

#define DIM 4
#define RECORD_SIZE (8 + 4 * DIM + 4)   /* 28 */
#define HEADER_SIZE 16
#define RECORDS 200
#define CHECKPOINT_SIZE (32 + 4 * DIM) /* sgd_read: 32-byte header + float w[DIM] */

static size_t count_lines(const char *text)
{
    return harness_count_occurrences(text, "\n");
}

static void run_program(struct run_result *result, const char *program, char *const arguments[],
                        char *const environment[], bool preload)
{
    char *argv[16];
    size_t used = 0;
    argv[used++] = strdup(harness_build_path(program));
    for (size_t i = 0; arguments[i]; i++)
        argv[used++] = arguments[i];
    argv[used] = NULL;
    harness_run(result, argv, environment, preload, 60);
    free(argv[0]);
}

/* --- record geometry ----------------------------------------------------------- */

/* 200 records of 28 bytes: 5600 payload bytes, 5600 % 31 = 20. */
#define BAD_RECORD_SIZE 31

static char *make_dataset(const char **directory)
{
    *directory = harness_temp_dir();
    char *path = harness_path_in(*directory, "train.bin");
    harness_generate_dataset(path, RECORDS, DIM, 5);
    return path;
}

/* Runs plain_reader in `mode` on a fresh dataset declared with a record
 * size (BAD_RECORD_SIZE) that does not divide its payload; returns the
 * dataset's path. */
static char *run_reader_with_bad_record_size(struct run_result *result, const char *mode)
{
    const char *directory;
    char *path = make_dataset(&directory);
    char entry[600];
    snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:record=%d:header=%d", path, BAD_RECORD_SIZE,
             HEADER_SIZE);
    char *environment[] = {entry, NULL};
    char *arguments[] = {(char *)mode, path, NULL};
    run_program(result, "trainers/plain_reader", arguments, environment, true);
    return path;
}

static void check_bad_record_size(const char *mode)
{
    struct run_result result;
    char *path = run_reader_with_bad_record_size(&result, mode);
    cr_expect_eq(result.status, 1, "%s: status %d, stdout %s", mode, result.status, result.out);
    cr_expect_str_eq(result.out, "");
    char expected_error[700];
    snprintf(expected_error, sizeof expected_error, "%s %s: Invalid argument",
             strcmp(mode, "read") == 0 ? "cannot open" : "cannot fopen", path);
    cr_expect(strstr(result.err, expected_error) != NULL, "%s: the trainer sees EINVAL: %s", mode,
              result.err);
    /* every shim error line names the file, its size, header and record size */
    cr_expect_geq(harness_count_occurrences(result.err, "error:"), 1, "%s: no error line: %s", mode,
                  result.err);
    char size_text[32];
    snprintf(size_text, sizeof size_text, "%d", HEADER_SIZE + RECORDS * RECORD_SIZE);
    for (const char *line = strstr(result.err, "error:"); line;
         line = strstr(line + 1, "error:")) {
        const char *end = strchr(line, '\n');
        char *text = strndup(line, end ? (size_t)(end - line) : strlen(line));
        cr_expect(strstr(text, path) && strstr(text, size_text) && strstr(text, "header 16") &&
                      strstr(text, "record size 31"),
                  "%s: the error line names file, size %s, header and record size: %s", mode,
                  size_text, text);
        free(text);
    }
    run_result_free(&result);
    free(path);
}

Test(bad_input, record_size_not_dividing_payload_is_einval_with_one_error_line)
{
    check_bad_record_size("read");
    /* open(2) path: exactly the shim's error line and the trainer's own */
    struct run_result result;
    char *path = run_reader_with_bad_record_size(&result, "read");
    cr_expect_eq(harness_count_occurrences(result.err, "error:"), 1, "one error line: %s", result.err);
    cr_expect_eq(count_lines(result.err), 2, "the shim's line and plain_reader's: %s",
                 result.err);
    run_result_free(&result);
    free(path);
}

Test(bad_input, record_size_not_dividing_payload_fails_fopen_too)
{
    check_bad_record_size("stdio-fread");
}

/* plain_reader's stdio modes stat() the file before fopen(): the failed
 * registration is remembered, so one failing file gives one error line
 * (regression: it used to be logged by the stat and again by the fopen). */
Test(bad_input, record_size_error_is_logged_once_with_stat_then_fopen)
{
    struct run_result result;
    char *path = run_reader_with_bad_record_size(&result, "stdio-fread");
    cr_expect_eq(result.status, 1);
    cr_expect_eq(harness_count_occurrences(result.err, "error:"), 1, "one error line: %s", result.err);
    run_result_free(&result);
    free(path);
}

Test(bad_input, tail_drop_reads_the_whole_records)
{
    const char *directory;
    char *path = make_dataset(&directory);
    char entry[600];
    snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:record=%d:header=%d:tail=drop:shard=0:shuffle=0",
             path, BAD_RECORD_SIZE, HEADER_SIZE);
    char *environment[] = {entry, NULL};
    size_t file_size;
    char *file = harness_read_file(path, &file_size);
    size_t view_size = HEADER_SIZE + (file_size - HEADER_SIZE) / BAD_RECORD_SIZE * BAD_RECORD_SIZE;
    char expected[128];
    snprintf(expected, sizeof expected, "size %zu bytes %zu hash %016" PRIx64 "\n", view_size,
             view_size, harness_fnv1a(file, view_size));
    const char *modes[] = {"read", "stdio-fread", "pread"};
    for (size_t i = 0; i < 3; i++) {
        char *arguments[] = {(char *)modes[i], path, NULL};
        struct run_result result;
        run_program(&result, "trainers/plain_reader", arguments, environment, true);
        cr_expect_eq(result.status, 0, "%s: %s", modes[i], result.err);
        cr_expect_str_eq(result.out, expected, "%s: the view drops the %zu trailing bytes",
                         modes[i], file_size - view_size);
        cr_expect_str_eq(result.err, "", "%s", modes[i]);
        run_result_free(&result);
    }
    free(file);
    free(path);
}

/* --- files that are not there, or not read-only --------------------------------- */

Test(bad_input, missing_data_file_is_the_trainers_own_enoent)
{
    const char *directory = harness_temp_dir();
    char *path = harness_path_in(directory, "missing.bin");
    char entry[600];
    snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:record=%d:header=%d", path, RECORD_SIZE,
             HEADER_SIZE);
    char glob_entry[600];
    snprintf(glob_entry, sizeof glob_entry, "ADAPTDL_DATA=%s/*.bin:record=%d", directory,
             RECORD_SIZE);
    const char *modes[] = {"read", "pread", "stdio-fread", "getline"};
    char *entries[] = {entry, glob_entry};
    for (size_t e = 0; e < 2; e++) {
        char *environment[] = {entries[e], NULL};
        for (size_t i = 0; i < 4; i++) {
            char *arguments[] = {(char *)modes[i], path, NULL};
            struct run_result plain, shimmed;
            run_program(&plain, "trainers/plain_reader", arguments, NULL, false);
            run_program(&shimmed, "trainers/plain_reader", arguments, environment, true);
            cr_expect_eq(plain.status, 1);
            cr_expect_eq(shimmed.status, plain.status, "%s", modes[i]);
            cr_expect_str_eq(shimmed.out, plain.out);
            cr_expect_str_eq(shimmed.err, plain.err, "%s: same message as without the shim",
                             modes[i]);
            cr_expect(strstr(shimmed.err, "No such file or directory") != NULL, "%s",
                      shimmed.err);
            run_result_free(&plain);
            run_result_free(&shimmed);
        }
    }
    free(path);
}

Test(bad_input, data_file_opened_for_writing_is_not_virtualized)
{
    const char *directory;
    char *path = make_dataset(&directory);
    size_t file_size;
    char *before = harness_read_file(path, &file_size);
    char entry[600];
    snprintf(entry, sizeof entry, "ADAPTDL_DATA=%s:record=%d:header=%d:shuffle=1", path,
             RECORD_SIZE, HEADER_SIZE);
    char *environment[] = {entry, "ADAPTDL_NUM_REPLICAS=2", "ADAPTDL_REPLICA_RANK=1",
                           "ADAPTDL_SEED=5", NULL};
    char *arguments[] = {"rdwr", path, NULL};
    struct run_result result;
    run_program(&result, "tools/fd_probe", arguments, environment, true);
    cr_assert_eq(result.status, 0, "%s", result.err);
    char expected[512];
    uint64_t hash = harness_fnv1a(before, file_size);
    snprintf(expected, sizeof expected,
             "fstat_size %zu\nseek_end %zu\nread whole %zu %016" PRIx64 "\n"
             "read stdio %zu %016" PRIx64 "\n",
             file_size, file_size, file_size, hash, file_size, hash);
    cr_expect_str_eq(result.out, expected, "O_RDWR and \"r+\" see the physical file");
    /* a warning per write-open, each naming the file */
    cr_expect_eq(harness_count_occurrences(result.err, "warn:"), 2, "%s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, path), 2, "the warnings name %s: %s", path,
                 result.err);
    cr_expect(strstr(result.err, "writing") != NULL, "%s", result.err);
    size_t after_size;
    char *after = harness_read_file(path, &after_size);
    cr_expect(after_size == file_size && memcmp(after, before, file_size) == 0,
              "the data file changed");
    /* the same settings do shard a read-only open: the probe saw the difference */
    char *read_arguments[] = {"read", path, NULL};
    struct run_result sharded;
    run_program(&sharded, "trainers/plain_reader", read_arguments, environment, true);
    char unexpected[64];
    snprintf(unexpected, sizeof unexpected, "size %zu ", file_size);
    cr_expect(strncmp(sharded.out, unexpected, strlen(unexpected)) != 0,
              "a read-only open is a view: %s", sharded.out);
    run_result_free(&sharded);
    run_result_free(&result);
    free(after);
    free(before);
    free(path);
}

/* --- snapshots ---------------------------------------------------------------------- */

struct training {
    const char *directory;
    char *data;
    char *checkpoint;
    char *state;
    char data_entry[600], state_entry[600], save_entry[600];
};

static void training_init(struct training *t)
{
    t->data = make_dataset(&t->directory);
    t->checkpoint = harness_path_in(t->directory, "ck");
    t->state = harness_path_in(t->directory, "state");
    snprintf(t->data_entry, sizeof t->data_entry,
             "ADAPTDL_DATA=%s:record=%d:header=%d:count=8,u64le,%d", t->data, RECORD_SIZE,
             HEADER_SIZE, RECORD_SIZE);
    snprintf(t->state_entry, sizeof t->state_entry, "ADAPTDL_CHECKPOINT_PATH=%s", t->state);
    snprintf(t->save_entry, sizeof t->save_entry, "ADAPTDL_SAVE=%s/ck*", t->directory);
}

/* Two epochs of sgd_read (20 steps each), K=1, with or without --resume. */
static void train(const struct training *t, bool resume, struct run_result *result)
{
    char *arguments[] = {"--data", t->data, "--epochs", "2", "--batch", "10", "--lr", "0.05",
                         "--checkpoint", t->checkpoint, "--checkpoint-every", "5",
                         resume ? "--resume" : NULL, NULL};
    /* sgd_read --resume runs its epoch loop again from 0: replay style */
    char *environment[] = {(char *)t->data_entry, (char *)t->state_entry, (char *)t->save_entry,
                           "ADAPTDL_SEED=2", "ADAPTDL_RESUME=replay", NULL};
    run_program(result, "trainers/sgd_read", arguments, environment, true);
}

static void train_first_run(const struct training *t)
{
    struct run_result result;
    train(t, false, &result);
    cr_assert_eq(result.status, 0, "first run: %s", result.err);
    cr_assert(strstr(result.out, "epoch 1 records 200 step 40") != NULL, "%s", result.out);
    run_result_free(&result);
}

/* Applies `action` to every snapshot file of the state directory; returns
 * how many there were. */
static size_t for_each_snapshot(const char *state, void (*action)(const char *path))
{
    DIR *directory = opendir(state);
    cr_assert_not_null(directory, "no state directory %s", state);
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        if (strncmp(entry->d_name, "snapshot-", 9) != 0)
            continue;
        char *path = harness_path_in(state, entry->d_name);
        action(path);
        free(path);
        count++;
    }
    closedir(directory);
    return count;
}

static void overwrite_with_garbage(const char *path)
{
    size_t size;
    char *data = harness_read_file(path, &size);
    for (size_t i = 0; i < size; i++)
        data[i] = (char)(0x5a ^ (i * 37));
    cr_assert_eq(harness_write_file(path, data, size), 0);
    free(data);
}

static void truncate_to_half(const char *path)
{
    size_t size;
    char *data = harness_read_file(path, &size);
    cr_assert_eq(harness_write_file(path, data, size / 2), 0);
    free(data);
}

static void remove_file(const char *path)
{
    cr_assert_eq(unlink(path), 0);
}

/* The trainer checkpoint is whole: right size, right magic, the step it
 * should be at. */
static void expect_checkpoint_intact(const char *path, uint64_t step)
{
    size_t size;
    char *data = harness_read_file(path, &size);
    cr_assert_not_null(data, "checkpoint %s is gone", path);
    cr_expect_eq(size, CHECKPOINT_SIZE, "checkpoint size %zu", size);
    cr_expect_eq(memcmp(data, "SGDR", 4), 0, "checkpoint magic");
    uint64_t saved_step;
    memcpy(&saved_step, data + 16, sizeof saved_step);
    cr_expect_eq(saved_step, step, "checkpoint at step %" PRIu64 ", expected %" PRIu64,
                 saved_step, step);
    free(data);
}

/* Resumes after a complete first run whose snapshots were damaged by
 * `damage`: the run logs `message`, starts the data fresh (both epochs see
 * every record again) and finishes with an intact checkpoint. */
static void check_fresh_start_after(void (*damage)(const char *path), const char *message)
{
    struct training t;
    training_init(&t);
    train_first_run(&t);
    cr_assert_gt(for_each_snapshot(t.state, damage), 0, "no snapshot to damage");
    struct run_result result;
    train(&t, true, &result);
    cr_expect_eq(result.status, 0, "status %d: %s", result.status, result.err);
    cr_expect(strstr(result.out, "resumed at step 40") != NULL, "%s", result.out);
    cr_expect(strstr(result.out, "epoch 0 records 200 step 60") != NULL &&
                  strstr(result.out, "epoch 1 records 200 step 80") != NULL,
              "a fresh start delivers every record again:\n%s", result.out);
    cr_expect(strstr(result.err, message) != NULL, "stderr says \"%s\": %s", message,
              result.err);
    cr_expect(strstr(result.err, t.checkpoint) != NULL, "names the checkpoint: %s", result.err);
    cr_expect(strstr(result.err, "starts fresh") != NULL, "%s", result.err);
    expect_checkpoint_intact(t.checkpoint, 80);
    run_result_free(&result);
}

/* The control: intact snapshots resume where the checkpoint was (both
 * passes finished, so replay skips them). */
Test(bad_input, intact_snapshot_resumes_control)
{
    struct training t;
    training_init(&t);
    train_first_run(&t);
    struct run_result result;
    train(&t, true, &result);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "epoch 0 records 0 step 40") != NULL &&
                  strstr(result.out, "epoch 1 records 0 step 40") != NULL,
              "finished passes are skipped:\n%s", result.out);
    /* the one line: the skipped passes of a count= file read as empty
     * files (sgd_read accepts them; loaders that do not are told what to do) */
    cr_expect_eq(harness_count_occurrences(result.err, "\n"), 1, "%s", result.err);
    cr_expect_not_null(strstr(result.err, "ADAPTDL_RESUME=continue"), "%s", result.err);
    expect_checkpoint_intact(t.checkpoint, 40);
    run_result_free(&result);
}

Test(bad_input, corrupt_snapshot_is_reported_and_data_starts_fresh)
{
    check_fresh_start_after(overwrite_with_garbage, "cannot be used");
}

Test(bad_input, truncated_snapshot_is_reported_and_data_starts_fresh)
{
    check_fresh_start_after(truncate_to_half, "cannot be used");
}

Test(bad_input, checkpoint_without_snapshot_warns_and_starts_fresh)
{
    struct training t;
    training_init(&t);
    train_first_run(&t);
    cr_assert_gt(for_each_snapshot(t.state, remove_file), 0);
    struct run_result result;
    train(&t, true, &result);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "epoch 0 records 200 step 60") != NULL, "%s", result.out);
    cr_expect(strstr(result.err, "warn:") != NULL, "a warning: %s", result.err);
    cr_expect(strstr(result.err, "no bound snapshot") != NULL, "%s", result.err);
    cr_expect(strstr(result.err, t.checkpoint) != NULL, "names the checkpoint: %s", result.err);
    cr_expect(strstr(result.err, t.state) != NULL, "names the state directory: %s", result.err);
    char identity[64];
    snprintf(identity, sizeof identity, "size %d, hash ", CHECKPOINT_SIZE);
    cr_expect(strstr(result.err, identity) != NULL, "names the content identity: %s",
              result.err);
    expect_checkpoint_intact(t.checkpoint, 80);
    run_result_free(&result);
}

Test(bad_input, changed_record_count_refuses_to_resume)
{
    struct training t;
    training_init(&t);
    train_first_run(&t);
    size_t checkpoint_size;
    char *checkpoint_before = harness_read_file(t.checkpoint, &checkpoint_size);
    harness_generate_dataset(t.data, RECORDS + 60, DIM, 5);  /* more records, same path */
    struct run_result result;
    train(&t, true, &result);
    cr_expect_eq(result.status, 2, "status %d: %s", result.status, result.err);
    cr_expect(strstr(result.err, "different data") != NULL, "%s", result.err);
    cr_expect(strstr(result.err, "260 records") != NULL && strstr(result.err, "200 records"),
              "both record counts: %s", result.err);
    cr_expect(strstr(result.err, t.data) != NULL, "names the data file: %s", result.err);
    cr_expect(strstr(result.out, "epoch 0") == NULL, "no training happened: %s", result.out);
    size_t after_size;
    char *checkpoint_after = harness_read_file(t.checkpoint, &after_size);
    cr_expect(after_size == checkpoint_size &&
                  memcmp(checkpoint_after, checkpoint_before, checkpoint_size) == 0,
              "the checkpoint was overwritten");
    /* the state is unharmed too: with the original data back, it resumes */
    harness_generate_dataset(t.data, RECORDS, DIM, 5);
    struct run_result again;
    train(&t, true, &again);
    cr_expect_eq(again.status, 0, "%s", again.err);
    cr_expect(strstr(again.out, "epoch 1 records 0 step 40") != NULL, "%s", again.out);
    run_result_free(&again);
    run_result_free(&result);
    free(checkpoint_before);
    free(checkpoint_after);
}

Test(bad_input, save_without_checkpoint_path_warns_and_runs_normally)
{
    struct training t;
    training_init(&t);
    char transparent[600];
    snprintf(transparent, sizeof transparent,
             "ADAPTDL_DATA=%s:record=%d:header=%d:shard=0:shuffle=0", t.data, RECORD_SIZE,
             HEADER_SIZE);
    char *environment[] = {transparent, t.save_entry, NULL};
    const char *other_directory = harness_temp_dir();
    char *other_checkpoint = harness_path_in(other_directory, "ck");
    for (int resume = 0; resume < 2; resume++) {
        char *arguments[] = {"--data", t.data, "--epochs", "2", "--batch", "10", "--lr", "0.05",
                             "--checkpoint", t.checkpoint, "--checkpoint-every", "5",
                             resume ? "--resume" : NULL, NULL};
        char *plain_arguments[] = {"--data", t.data, "--epochs", "2", "--batch", "10", "--lr",
                                   "0.05", "--checkpoint", other_checkpoint,
                                   "--checkpoint-every", "5", resume ? "--resume" : NULL, NULL};
        struct run_result shimmed, plain;
        run_program(&shimmed, "trainers/sgd_read", arguments, environment, true);
        run_program(&plain, "trainers/sgd_read", plain_arguments, NULL, false);
        cr_expect_eq(shimmed.status, 0, "%s", shimmed.err);
        cr_expect_str_eq(shimmed.out, plain.out, "run %d: the trainer runs as without the shim",
                         resume);
        cr_expect(strstr(shimmed.err, "ADAPTDL_SAVE") && strstr(shimmed.err, "ADAPTDL_CHECKPOINT_PATH"),
                  "the warning names both variables: %s", shimmed.err);
        cr_expect_geq(harness_count_occurrences(shimmed.err, "warn:"), 1, "%s", shimmed.err);
        cr_expect_eq(harness_count_occurrences(shimmed.err, "error:"), 0, "%s", shimmed.err);
        expect_checkpoint_intact(t.checkpoint, resume ? 80 : 40);
        size_t a_size, b_size;
        char *a = harness_read_file(t.checkpoint, &a_size);
        char *b = harness_read_file(other_checkpoint, &b_size);
        cr_expect(a_size == b_size && memcmp(a, b, a_size) == 0,
                  "run %d: checkpoint differs from the run without the shim", resume);
        free(a);
        free(b);
        run_result_free(&shimmed);
        run_result_free(&plain);
    }
}

/* --- the state directory: full disks and hostile files (adaptshim(7)
 * "Full disks and hostile state files") -------------------------------------- */

/* sgd_read on the training's data with its own environment additions;
 * `full_disk` runs it over the full-disk preload library (tests/faults),
 * whose disk under t->state is full. */
static void train_with(const struct training *t, const char *epochs, bool resume,
                       const char *save_entry, char *const extra[], bool full_disk,
                       struct run_result *result)
{
    char *arguments[] = {"--data", t->data, "--epochs", (char *)epochs, "--batch", "10",
                         "--lr", "0.05", "--checkpoint", t->checkpoint, "--checkpoint-every",
                         "5", resume ? "--resume" : NULL, NULL};
    char preload[2 * PATH_MAX + 32], directory[PATH_MAX + 32];
    /* sgd_read --resume runs its epoch loop again from 0: replay style */
    char *environment[16] = {(char *)t->data_entry, (char *)t->state_entry,
                             (char *)(save_entry ? save_entry : t->save_entry),
                             "ADAPTDL_SEED=2", "ADAPTDL_RESUME=replay"};
    size_t used = 5;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++)
        environment[used++] = extra[i];
    if (full_disk) {
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so"));
        snprintf(preload + strlen(preload), sizeof preload - strlen(preload), " %s",
                 harness_build_path("faults/full_disk.so"));
        snprintf(directory, sizeof directory, "FULL_DISK_DIRECTORY=%s", t->state);
        environment[used++] = preload;
        environment[used++] = directory;
    }
    environment[used] = NULL;
    run_program(result, "trainers/sgd_read", arguments, environment, !full_disk);
}

/* A real full disk where the test may make one: a 256 KiB tmpfs on the state
 * directory, in a mount namespace of this test's own process (the trainers
 * it starts inherit it; nothing outside sees it).  Needs the mount
 * privilege, which is checked: false means the caller falls back to the
 * full-disk preload library, so the assertions run either way. */
static bool mount_small_filesystem(const char *directory)
{
    if (mkdir(directory, 0755) != 0 && errno != EEXIST)
        return false;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("adaptshim-test", directory, "tmpfs", 0, "size=256k,mode=0755") != 0) {
        cr_log_warn("no tmpfs of its own (%s): the disk is made full by preload", strerror(errno));
        return false;
    }
    return true;
}

/* Fills the filesystem holding `directory` up to its last block. */
static char *fill_filesystem(const char *directory)
{
    char *filler = harness_path_in(directory, "filler");
    int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0, "%s", strerror(errno));
    static char block[4096];
    while (write(fd, block, sizeof block) > 0)
        ;
    cr_assert_eq(errno, ENOSPC, "filling %s: %s", directory, strerror(errno));
    close(fd);
    return filler;
}

/* The shim's error line about the failed snapshot: one, naming the errno. */
static void expect_failed_snapshot_line(const char *err, const char *checkpoint)
{
    const char *line = strstr(err, "snapshot not written");
    cr_expect_not_null(line, "the shim says why: %s", err);
    if (line == NULL)
        return;
    const char *end = strchr(line, '\n');
    char *text = strndup(line, end ? (size_t)(end - line) : strlen(line));
    cr_expect_not_null(strstr(text, strerror(ENOSPC)), "names the errno: %s", text);
    cr_expect_not_null(strstr(text, "commit (its rename, close or fclose) fails"), "%s", text);
    free(text);
    const char *start = line;
    while (start > err && start[-1] != '\n')
        start--;
    cr_expect_not_null(strstr(start, checkpoint), "names the checkpoint: %.300s", start);
}

/* A resume after the failed commit continues exactly from the checkpoint
 * before it: both epochs of run 1 skipped, the third one whole. */
static void expect_exact_resume_at_step_40(const struct training *t, const char *save_entry)
{
    struct run_result result;
    train_with(t, "3", true, save_entry, NULL, false, &result);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "resumed at step 40") && strstr(result.out, "epoch 0 records 0 ") &&
                  strstr(result.out, "epoch 1 records 0 ") &&
                  strstr(result.out, "epoch 2 records 200 step 60"),
              "the checkpoint of step 40 resumes with its snapshot:\n%s", result.out);
    cr_expect_null(strstr(result.err, "no bound snapshot"), "%s", result.err);
    run_result_free(&result);
}

/* adaptshim(7) "CHECKPOINT BINDING": the snapshot of a rename-commit cannot be written, so the
 * trainer's rename fails with ENOSPC and ck keeps the step-40 checkpoint,
 * whose snapshot resumes it exactly.  (Before: the rename went through and
 * the newest checkpoint had no snapshot.) */
Test(bad_input, full_disk_fails_the_rename_commit_and_the_previous_checkpoint_resumes,
     .timeout = 120)
{
    struct training t;
    training_init(&t);
    char save_exact[600];
    snprintf(save_exact, sizeof save_exact, "ADAPTDL_SAVE=%s", t.checkpoint);
    bool real_disk = mount_small_filesystem(t.state);
    struct run_result result;
    train_with(&t, "2", false, save_exact, NULL, false, &result);
    cr_assert_eq(result.status, 0, "first run: %s", result.err);
    run_result_free(&result);
    char *filler = real_disk ? fill_filesystem(t.state) : NULL;

    train_with(&t, "3", true, save_exact, NULL, !real_disk, &result);
    cr_expect_eq(result.status, 1, "the trainer sees its rename fail: %d %s", result.status,
                 result.err);
    cr_expect_not_null(strstr(result.out, "resumed at step 40"), "%s", result.out);
    char expected[1200];
    snprintf(expected, sizeof expected, "renaming %s.tmp to %s: %s", t.checkpoint, t.checkpoint,
             strerror(ENOSPC));
    cr_expect_not_null(strstr(result.err, expected), "%s", result.err);
    expect_failed_snapshot_line(result.err, t.checkpoint);
    expect_checkpoint_intact(t.checkpoint, 40);
    run_result_free(&result);

    if (filler != NULL)
        cr_assert_eq(unlink(filler), 0);
    expect_exact_resume_at_step_40(&t, save_exact);
    free(filler);
    if (real_disk)
        umount2(t.state, MNT_DETACH);
}

/* With ADAPTDL_SAVE=DIR/ck* the close of ck.tmp is a commit too (written in
 * place, then renamed): that close fails, sgd_read stops before its rename. */
Test(bad_input, full_disk_fails_the_close_commit, .timeout = 120)
{
    struct training t;
    training_init(&t);
    struct run_result result;
    train_with(&t, "2", false, NULL, NULL, false, &result);
    cr_assert_eq(result.status, 0, "first run: %s", result.err);
    run_result_free(&result);
    train_with(&t, "3", true, NULL, NULL, true, &result);
    cr_expect_eq(result.status, 1, "%d %s", result.status, result.err);
    char expected[700];
    snprintf(expected, sizeof expected, "flushing %s.tmp: %s", t.checkpoint, strerror(ENOSPC));
    cr_expect_not_null(strstr(result.err, expected), "%s", result.err);
    expect_failed_snapshot_line(result.err, t.checkpoint);
    expect_checkpoint_intact(t.checkpoint, 40);
    run_result_free(&result);
    expect_exact_resume_at_step_40(&t, NULL);
}

/* sgd_stdio writes its checkpoint in place and checks fclose: the fclose
 * fails with ENOSPC. */
Test(bad_input, full_disk_fails_the_fclose_commit, .timeout = 120)
{
    struct training t;
    training_init(&t);
    char preload[2 * PATH_MAX + 32], directory[PATH_MAX + 32];
    /* two steps: harness_build_path returns one buffer */
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", harness_build_path("libadaptshim.so"));
    snprintf(preload + strlen(preload), sizeof preload - strlen(preload), " %s",
             harness_build_path("faults/full_disk.so"));
    snprintf(directory, sizeof directory, "FULL_DISK_DIRECTORY=%s", t.state);
    char *arguments[] = {"--data", t.data, "--epochs", "2", "--batch", "10", "--lr", "0.05",
                         "--checkpoint", t.checkpoint, "--checkpoint-every", "5", NULL};
    char *healthy[] = {t.data_entry, t.state_entry, t.save_entry, "ADAPTDL_RESUME=continue",
                       NULL};
    struct run_result result;
    run_program(&result, "trainers/sgd_stdio", arguments, healthy, true);
    cr_assert_eq(result.status, 0, "a healthy disk: %s", result.err);
    run_result_free(&result);
    char *full[] = {t.data_entry, t.state_entry, t.save_entry, "ADAPTDL_RESUME=continue",
                    preload, directory, NULL};
    run_program(&result, "trainers/sgd_stdio", arguments, full, false);
    cr_expect_eq(result.status, 1, "%d %s", result.status, result.err);
    char expected[700];
    snprintf(expected, sizeof expected, "writing checkpoint %s: %s", t.checkpoint,
             strerror(ENOSPC));
    cr_expect_not_null(strstr(result.err, expected), "%s", result.err);
    expect_failed_snapshot_line(result.err, t.checkpoint);
    run_result_free(&result);
}

/* A FIFO under the job record's name (and under a snapshot's) used to hang
 * every process before main: both are reported and passed over. */
Test(bad_input, fifos_in_the_state_directory_are_reported_not_waited_on, .timeout = 90)
{
    struct training t;
    training_init(&t);
    cr_assert_eq(mkdir(t.state, 0755), 0);
    char *job = harness_path_in(t.state, "job.msgpack");
    char *snapshot = harness_path_in(t.state, "snapshot-1-0000000000000001.msgpack");
    cr_assert_eq(mkfifo(job, 0644), 0);
    cr_assert_eq(mkfifo(snapshot, 0644), 0);
    struct run_result result;
    char *arguments[] = {"--data", t.data, "--epochs", "2", "--batch", "10", "--lr", "0.05",
                         "--checkpoint", t.checkpoint, "--checkpoint-every", "5", NULL};
    char *environment[] = {t.data_entry, t.state_entry, t.save_entry, "ADAPTDL_RESUME=replay",
                           NULL};
    char *argv[16];
    size_t used = 0;
    argv[used++] = strdup(harness_build_path("trainers/sgd_read"));
    for (size_t i = 0; arguments[i]; i++)
        argv[used++] = arguments[i];
    argv[used] = NULL;
    harness_run(&result, argv, environment, true, 30);
    free(argv[0]);
    cr_expect_eq(result.status, 0, "status %d (137: it hung): %s", result.status, result.err);
    cr_expect(strstr(result.out, "epoch 1 records 200 step 40") != NULL, "%s", result.out);
    cr_expect_not_null(strstr(result.err, "not a regular file"), "%s", result.err);
    cr_expect_not_null(strstr(result.err, "job.msgpack"), "names the file: %s", result.err);
    run_result_free(&result);
    /* the snapshot FIFO is no snapshot: a resume finds its own */
    train(&t, true, &result);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "epoch 1 records 0 step 40") != NULL, "%s", result.out);
    run_result_free(&result);
    free(job);
    free(snapshot);
}

/* Temp files of a writer killed between creating and renaming them (and
 * its writability probes) are removed once they are older than the grace
 * period; a young one may be a write in flight on another host and stays. */
Test(bad_input, leftovers_of_killed_snapshot_writes_are_removed, .timeout = 120)
{
    struct training t;
    training_init(&t);
    train_first_run(&t);
    static const char *const stale[] = {
        ".snapshot-48-00000000deadbeef.msgpack.tmp.4242.7",
        ".job.msgpack.tmp.4242.8",
        ".adaptshim-probe.4242.1",
    };
    const char *young = ".snapshot-48-00000000feedface.msgpack.tmp.4243.1";
    struct timeval now;
    gettimeofday(&now, NULL);
    struct timespec an_hour_ago[2] = {{.tv_sec = now.tv_sec - 3600}, {.tv_sec = now.tv_sec - 3600}};
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
        char *path = harness_path_in(t.state, stale[i]);
        cr_assert_eq(harness_write_file(path, "partial", 7), 0);
        cr_assert_eq(utimensat(AT_FDCWD, path, an_hour_ago, 0), 0);
        free(path);
    }
    char *young_path = harness_path_in(t.state, young);
    cr_assert_eq(harness_write_file(young_path, "partial", 7), 0);
    struct run_result result;
    train(&t, true, &result);
    cr_expect_eq(result.status, 0, "%s", result.err);
    run_result_free(&result);
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
        char *path = harness_path_in(t.state, stale[i]);
        cr_expect_neq(access(path, F_OK), 0, "%s is still there", stale[i]);
        free(path);
    }
    cr_expect_eq(access(young_path, F_OK), 0, "a young temp file may be in flight");
    free(young_path);
}

/* A fresh training that has run one epoch, which must end with status 0. */
static void training_run_one_epoch(struct training *t)
{
    training_init(t);
    struct run_result result;
    train_with(t, "1", false, NULL, NULL, false, &result);
    cr_assert_eq(result.status, 0, "%s", result.err);
    run_result_free(&result);
}

static void past_its_pass(struct adaptdl_snapshot *snapshot)
{
    for (size_t i = 0; i < snapshot->file_count; i++)
        snapshot->files[i].current_index = snapshot->files[i].pass_length + 50;
}

/* An index past its pass used to be clamped: the rest of the pass was
 * skipped without a word.  Now the snapshot is refused as a whole. */
Test(bad_input, sealed_snapshot_with_an_index_past_its_pass_is_refused_and_data_starts_fresh)
{
    struct training t;
    training_run_one_epoch(&t);
    struct run_result result;
    cr_assert_gt(harness_edit_snapshots(t.state, past_its_pass), 0);
    train_with(&t, "2", true, NULL, NULL, false, &result);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect(strstr(result.out, "epoch 0 records 200") && strstr(result.out, "epoch 1 records 200"),
              "a fresh start, nothing skipped:\n%s", result.out);
    cr_expect_not_null(strstr(result.err, "current_index"), "names the field: %s", result.err);
    cr_expect_not_null(strstr(result.err, "starts fresh"), "%s", result.err);
    run_result_free(&result);
}

static void endless_pass(struct adaptdl_snapshot *snapshot)
{
    /* (length + 1) * 8 bytes of line offsets wrap around to 8 */
    for (size_t i = 0; i < snapshot->file_count; i++)
        snapshot->files[i].pass_length = ((uint64_t)1 << 61) + snapshot->files[i].current_index;
}

/* A pass length no planner makes, on a lines file, used to crash the
 * trainer (SIGSEGV) when its pass began. */
Test(bad_input, sealed_snapshot_with_an_endless_pass_on_a_lines_file_is_refused, .timeout = 120)
{
    const char *directory = harness_temp_dir();
    char *data = harness_path_in(directory, "text.txt");
    harness_generate_text(data, 100, 5);
    char *state = harness_path_in(directory, "state");
    char *checkpoint = harness_path_in(directory, "bigram.ck");
    char data_setting[600], state_setting[600], save_setting[600];
    snprintf(data_setting, sizeof data_setting, "ADAPTDL_DATA=%s:lines", data);
    snprintf(state_setting, sizeof state_setting, "ADAPTDL_CHECKPOINT_PATH=%s", state);
    snprintf(save_setting, sizeof save_setting, "ADAPTDL_SAVE=%s", checkpoint);
    char *environment[] = {data_setting, state_setting, save_setting, NULL};
    char *first[] = {"--data", data, "--epochs", "1", "--checkpoint", checkpoint,
                     "--checkpoint-every", "30", NULL};
    struct run_result result;
    run_program(&result, "trainers/bigram_text", first, environment, true);
    cr_assert_eq(result.status, 0, "%s", result.err);
    run_result_free(&result);
    cr_assert_gt(harness_edit_snapshots(state, endless_pass), 0);
    char *again[] = {"--data", data, "--epochs", "2", "--checkpoint", checkpoint,
                     "--checkpoint-every", "30", "--resume", NULL};
    run_program(&result, "trainers/bigram_text", again, environment, true);
    cr_expect_eq(result.status, 0, "status %d (139: SIGSEGV): %s", result.status, result.err);
    cr_expect(strstr(result.out, "epoch 0 lines 100") && strstr(result.out, "epoch 1 lines 100"),
              "a fresh start:\n%s", result.out);
    cr_expect_not_null(strstr(result.err, "pass_length"), "names the field: %s", result.err);
    cr_expect_not_null(strstr(result.err, "starts fresh"), "%s", result.err);
    run_result_free(&result);
    free(data);
    free(state);
    free(checkpoint);
}

/* Positions follow the file's basename, so a dataset renamed since the
 * checkpoint cannot take its old position (that would be a guess): it
 * starts fresh, and now says so instead of silently re-reading. */
Test(bad_input, renamed_dataset_warns_and_starts_fresh)
{
    struct training t;
    training_run_one_epoch(&t);
    struct run_result result;
    char *renamed = harness_path_in(t.directory, "renamed.bin");
    cr_assert_eq(rename(t.data, renamed), 0);
    struct training moved = t;
    moved.data = renamed;
    snprintf(moved.data_entry, sizeof moved.data_entry,
             "ADAPTDL_DATA=%s:record=%d:header=%d:count=8,u64le,%d", renamed, RECORD_SIZE,
             HEADER_SIZE, RECORD_SIZE);
    train_with(&moved, "2", true, NULL, NULL, false, &result);
    cr_expect_eq(result.status, 0, "%s", result.err);
    cr_expect_not_null(strstr(result.out, "epoch 0 records 200"), "fresh: %s", result.out);
    const char *warning = strstr(result.err, "not named in the restored snapshot");
    cr_expect_not_null(warning, "%s", result.err);
    cr_expect_not_null(strstr(result.err, renamed), "names the file: %s", result.err);
    cr_expect_not_null(strstr(result.err, "\"train.bin\""), "and its old name: %s", result.err);
    run_result_free(&result);
    free(renamed);
}

/* adaptshim(7) "ENVIRONMENT": errors about ADAPTDL_CHECKPOINT_PATH name it and say what is
 * accepted (exit 2 before main); a mistyped name warns with the closest. */
Test(bad_input, checkpoint_path_errors_name_the_variable_and_typos_warn)
{
    struct training t;
    training_init(&t);
    char *missing_parent = harness_path_in(t.directory, "no/such/state");
    char state_entry[700];
    snprintf(state_entry, sizeof state_entry, "ADAPTDL_CHECKPOINT_PATH=%s", missing_parent);
    char *arguments[] = {"--data", t.data, "--epochs", "1", "--batch", "10", "--lr", "0.05",
                         "--checkpoint", t.checkpoint, NULL};
    char *bad_path[] = {t.data_entry, state_entry, t.save_entry, NULL};
    struct run_result result;
    run_program(&result, "trainers/sgd_read", arguments, bad_path, true);
    cr_expect_eq(result.status, 2, "%d %s", result.status, result.err);
    cr_expect_str_eq(result.out, "", "nothing of the trainer ran");
    cr_expect_not_null(strstr(result.err, "ADAPTDL_CHECKPOINT_PATH"), "%s", result.err);
    cr_expect_not_null(strstr(result.err, missing_parent), "%s", result.err);
    cr_expect_not_null(strstr(result.err, "accepted"), "%s", result.err);
    cr_expect_eq(count_lines(result.err), 1, "%s", result.err);
    run_result_free(&result);

    char *typo[] = {t.data_entry, t.state_entry, t.save_entry, "ADAPTDL_SEEDS=3", NULL};
    run_program(&result, "trainers/sgd_read", arguments, typo, true);
    cr_expect_eq(result.status, 0, "a warning, not an error: %s", result.err);
    cr_expect_eq(harness_count_occurrences(result.err, "warn:"), 1, "%s", result.err);
    cr_expect_not_null(strstr(result.err, "ADAPTDL_SEEDS"), "%s", result.err);
    cr_expect_not_null(strstr(result.err, "is ADAPTDL_SEED\n"), "the closest name: %s", result.err);
    run_result_free(&result);
    free(missing_parent);
}

/* The case `name`: sgd_read with `environment` stops before its main with
 * status 2 and one line naming `variable` and `value` and what is accepted. */
static void expect_refused_before_main(const char *name, const struct training *t,
                                       char *const environment[], const char *variable,
                                       const char *value)
{
    char *arguments[] = {"--data", t->data, "--epochs", "1", "--batch", "10", "--lr", "0.05",
                         "--checkpoint", t->checkpoint, NULL};
    struct run_result result;
    run_program(&result, "trainers/sgd_read", arguments, environment, true);
    cr_expect_eq(result.status, 2, "%s: %s: status %d, %s", name, variable, result.status,
                 result.err);
    cr_expect_str_eq(result.out, "", "%s: %s: nothing of the trainer ran", name, variable);
    cr_expect_not_null(strstr(result.err, variable), "%s: %s", name, result.err);
    cr_expect_not_null(strstr(result.err, value), "%s: names %s: %s", name, value, result.err);
    cr_expect_not_null(strstr(result.err, "accepted"), "%s: %s", name, result.err);
    cr_expect_eq(count_lines(result.err), 1, "%s: %s", name, result.err);
    run_result_free(&result);
}

/* adaptshim(7) "ENVIRONMENT": a data glob fnmatch cannot match as written (an unclosed '[',
 * which glibc takes as a literal '[': no file matched, silently) stops the
 * trainer before main. */
/* And a data glob under a directory that does not exist matches nothing:
 * data is in place before a job starts, so it is an error too. */
Test(bad_input, a_data_glob_that_cannot_match_stops_the_trainer_before_main)
{
    static const struct {
        const char *name;
        const char *glob;       /* in the training directory */
        const char *says;
    } cases[] = {
        {"a_malformed_data_glob", "train[0-9.bin", "has a '[' that no ']' closes"},
        {"a_data_glob_in_a_missing_directory", "no/such/*.bin", "no/such\" does not exist"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct training t;
        training_init(&t);
        char data_entry[700];
        snprintf(data_entry, sizeof data_entry, "ADAPTDL_DATA=%s/%s:record=%d:header=%d",
                 t.directory, cases[i].glob, RECORD_SIZE, HEADER_SIZE);
        char *environment[] = {data_entry, t.state_entry, t.save_entry, NULL};
        expect_refused_before_main(cases[i].name, &t, environment, "ADAPTDL_DATA entry 1",
                                   cases[i].says);
    }
}

/* A hints file whose directory does not exist would fail every write, long
 * after the start: an error at start-up naming the path. */
Test(bad_input, a_hints_file_in_a_missing_directory_stops_the_trainer_before_main)
{
    struct training t;
    training_init(&t);
    char *missing_hints = harness_path_in(t.directory, "no/such/hints.json");
    char hints_entry[700];
    snprintf(hints_entry, sizeof hints_entry, "ADAPTDL_HINTS_FILE=%s", missing_hints);
    char *environment[] = {t.data_entry, t.state_entry, t.save_entry, hints_entry, NULL};
    expect_refused_before_main("a_hints_file_in_a_missing_directory", &t, environment,
                               "ADAPTDL_HINTS_FILE", missing_hints);
    free(missing_hints);
}

/* A checkpoint glob under a directory that does not exist yet is one
 * warning: the trainer may create its checkpoint directory itself. */
Test(bad_input, a_checkpoint_glob_in_a_missing_directory_warns_and_runs)
{
    struct training t;
    training_init(&t);
    char save_entry[700];
    snprintf(save_entry, sizeof save_entry, "ADAPTDL_SAVE=%s/later/ck*", t.directory);
    char *environment[] = {t.data_entry, t.state_entry, save_entry, NULL};
    char *arguments[] = {"--data", t.data, "--epochs", "1", "--batch", "10", "--lr", "0.05",
                         "--checkpoint", t.checkpoint, NULL};
    struct run_result result;
    run_program(&result, "trainers/sgd_read", arguments, environment, true);
    cr_expect_eq(result.status, 0, "a warning, not an error: %s", result.err);
    cr_expect_not_null(strstr(result.out, "epoch 0 records 200"), "%s", result.out);
    const char *warning = strstr(result.err, "warn: ADAPTDL_SAVE: the directory");
    cr_expect_not_null(warning, "%s", result.err);
    cr_expect(warning != NULL && strstr(warning, "/later\" of \"") != NULL &&
                  strstr(warning, "does not exist at start-up") != NULL,
              "%s", result.err);
    run_result_free(&result);
}
