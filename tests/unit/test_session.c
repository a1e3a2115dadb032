/* test_session.c - checkpoint commits of a session (adaptshim(7) "CHECKPOINT BINDING"): a snapshot
 * that cannot be written fails the commit with the write's errno and
 * leaves the previous snapshots as they were; a commit prunes with the
 * save glob, so a copy of a checkpoint keeps its snapshot; what cannot be
 * bound (a directory, a vanished file) is no failure; a state directory that
 * cannot be prepared is reported naming ADAPTDL_CHECKPOINT_PATH.
 * Failures are injected through the runtime_sysio table (each Criterion
 * test runs in its own process).  And the commit decision for a checkpoint
 * descriptor's close (session_close_commits): only a descriptor that still
 * refers to the file it was opened on commits.  A commit called directly
 * (session_commit_checkpoint) binds a snapshot holding the run's seed,
 * replicas, data positions and steps (in flight too) to the content's
 * identity, with a sequence past any restored one; whether a train record
 * was delivered decides whether a later checkpoint load may still restore. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock_time.h"
#include "log.h"
#include "session.h"
#include "state_files.h"
#include "sysio.h"
#include "unit_helpers.h"
#include "view_cursor.h"

static char *make_directory(void)
{
    return unit_make_temp_directory("/tmp/adaptshim-test-session-XXXXXX");
}

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    cr_assert_not_null(file);
    fputs(text, file);
    cr_assert_eq(fclose(file), 0);
}

static bool is_snapshot_name(const char *name)
{
    return strncmp(name, "snapshot-", 9) == 0;
}

static bool is_hidden_name(const char *name)
{
    return name[0] == '.';
}

/* Snapshot files (not temp files) in the state directory. */
static size_t count_snapshots(const char *state)
{
    return unit_directory_count_matching(state, is_snapshot_name);
}

/* Temporary files (hidden) in the state directory. */
static size_t count_hidden(const char *state)
{
    return unit_directory_count_matching(state, is_hidden_name);
}

struct session_fixture {
    struct runtime_session session;
    char *work;      /* the trainer's checkpoint directory */
    char *state;     /* ADAPTDL_CHECKPOINT_PATH */
};

static void fixture_init(struct session_fixture *fixture)
{
    session_init(&fixture->session);
    fixture->work = make_directory();
    fixture->state = unit_path_join(fixture->work, "state");
    cr_assert_eq(mkdir(fixture->state, 0755), 0);
    fixture->session.config.checkpoint_path = strdup(fixture->state);
    char *glob = unit_path_join(fixture->work, "ck*");
    fixture->session.config.save_glob = glob;
    fixture->session.config.num_replicas = 1;
    log_threshold = -1; /* the expected error lines are checked where they matter */
}

static void fixture_free(struct session_fixture *fixture)
{
    config_free(&fixture->session.config);
    free(fixture->state);
    unit_remove_temp_directory(fixture->work);
}

/* The trainer writes `content` at `name` and commits it. */
/* Sends the log's warnings and errors to DIRECTORY/log, whose path it
 * returns (malloc'ed). */
static char *capture_warnings(const char *directory)
{
    char *log_path = unit_path_join(directory, "log");
    char error[512] = "";
    cr_assert_eq(log_configure(LOG_LEVEL_WARN, log_path, 0, error, sizeof error), 0, "%s",
                 error);
    return log_path;
}

/* Closes the captured log and reads what it holds into text. */
static void read_captured_log(const char *log_path, char *text, size_t size)
{
    log_close();
    log_threshold = -1;
    FILE *log = fopen(log_path, "r");
    cr_assert_not_null(log);
    text[fread(text, 1, size - 1, log)] = '\0';
    fclose(log);
}

static int commit(struct session_fixture *fixture, const char *name, const char *content)
{
    char *path = unit_path_join(fixture->work, name);
    write_text(path, content);
    struct content_identity identity;
    int status = session_commit_checkpoint_file(&fixture->session, path, path, NULL, NULL,
                                                &identity);
    free(path);
    return status;
}

/* The state directory's disk is full; others (the log) are not. */
static const char *full_directory;

static ssize_t disk_full_write(int fd, const void *buffer, size_t size)
{
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, target, sizeof target - 1);
    target[length > 0 ? length : 0] = '\0';
    size_t prefix = strlen(full_directory);
    if (strncmp(target, full_directory, prefix) != 0 || target[prefix] != '/')
        return write(fd, buffer, size);
    errno = ENOSPC;
    return -1;
}

static int failing_fsync(int fd)
{
    (void)fd;
    errno = EIO;
    return -1;
}

Test(session, a_snapshot_that_cannot_be_written_fails_the_commit_with_its_errno)
{
    struct session_fixture fixture;
    fixture_init(&fixture);
    cr_assert_eq(commit(&fixture, "ck", "first"), 0);
    cr_assert_eq(count_snapshots(fixture.state), 1);

    char *log_path = capture_warnings(fixture.work);
    const struct runtime_sysio original = runtime_sysio;
    full_directory = fixture.state;
    runtime_sysio.write = disk_full_write;
    errno = 0;
    cr_expect_eq(commit(&fixture, "ck.tmp", "second"), -1);
    cr_expect_eq(errno, ENOSPC, "errno %d", errno);
    runtime_sysio = original;
    char text[2048];
    read_captured_log(log_path, text, sizeof text);
    cr_expect_not_null(strstr(text, "error: checkpoint "), "%s", text);
    cr_expect_not_null(strstr(text, "ck.tmp"), "names the checkpoint: %s", text);
    cr_expect_not_null(strstr(text, strerror(ENOSPC)), "names the errno: %s", text);
    cr_expect_not_null(strstr(text, "commit (its rename, close or fclose) fails"), "%s", text);
    cr_expect_eq(strchr(text, '\n'), text + strlen(text) - 1, "one line: %s", text);
    unlink(log_path);
    free(log_path);
    runtime_sysio.fsync = failing_fsync;
    cr_expect_eq(commit(&fixture, "ck.tmp", "third"), -1);
    cr_expect_eq(errno, EIO, "errno %d", errno);
    runtime_sysio = original;
    cr_expect_eq(count_snapshots(fixture.state), 1, "the first snapshot is intact");
    cr_expect_eq(count_hidden(fixture.state), 0, "no temp file left");
    cr_expect_eq(fixture.session.snapshots_written, 1);
    /* and the disk back: commits work again */
    cr_expect_eq(commit(&fixture, "ck", "fourth"), 0);
    fixture_free(&fixture);
}

Test(session, content_that_cannot_be_bound_is_no_failure)
{
    struct session_fixture fixture;
    fixture_init(&fixture);
    struct content_identity identity;
    char *missing = unit_path_join(fixture.work, "ck.gone");
    cr_expect_eq(session_commit_checkpoint_file(&fixture.session, missing, missing, NULL, NULL,
                                                &identity), 1);
    char *directory = unit_path_join(fixture.work, "ck.dir");
    cr_assert_eq(mkdir(directory, 0755), 0);
    cr_expect_eq(session_commit_checkpoint_file(&fixture.session, directory, directory, NULL,
                                                NULL, &identity), 1);
    cr_expect_eq(count_snapshots(fixture.state), 0);
    free(missing);
    free(directory);
    fixture_free(&fixture);

    /* without a state directory: nothing to write, no failure */
    struct runtime_session bare;
    session_init(&bare);
    char *work = make_directory();
    char *path = unit_path_join(work, "ck");
    write_text(path, "x");
    cr_expect_eq(session_commit_checkpoint_file(&bare, path, path, NULL, NULL, &identity), 1);
    free(path);
    unit_remove_temp_directory(work);
}

static int unreadable_open(const char *path, int flags, ...)
{
    (void)path, (void)flags;
    errno = EIO;
    return -1;
}

Test(session, content_that_cannot_be_read_fails_the_commit)
{
    struct session_fixture fixture;
    fixture_init(&fixture);
    char *path = unit_path_join(fixture.work, "ck");
    write_text(path, "content");
    const struct runtime_sysio original = runtime_sysio;
    runtime_sysio.open = unreadable_open;
    struct content_identity identity;
    cr_expect_eq(session_commit_checkpoint_file(&fixture.session, path, path, NULL, NULL,
                                                &identity), -1);
    cr_expect_eq(errno, EIO);
    runtime_sysio = original;
    free(path);
    fixture_free(&fixture);
}

/* Snapshots younger than the grace period are never pruned; these tests
 * age them by rewriting their creation time. */
static void age_snapshots(const char *state)
{
    DIR *listing = opendir(state);
    cr_assert_not_null(listing);
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (strncmp(entry->d_name, "snapshot-", 9) != 0)
            continue;
        void *data;
        size_t size;
        char error[256];
        cr_assert_eq(state_file_read(state, entry->d_name, &data, &size, error, sizeof error),
                     0, "%s", error);
        struct adaptdl_snapshot snapshot;
        cr_assert_eq(snapshot_decode(data, size, &snapshot, error, sizeof error), 0, "%s",
                     error);
        free(data);
        snapshot.created_unix_time -= 2 * SNAPSHOT_PRUNE_GRACE_SECONDS;
        cr_assert_eq(snapshot_save(state, &snapshot, error, sizeof error), 0, "%s", error);
        snapshot_free(&snapshot);
    }
    closedir(listing);
}

Test(session, a_commit_prunes_with_the_save_glob)
{
    struct session_fixture fixture;
    fixture_init(&fixture);
    cr_assert_eq(commit(&fixture, "ck", "first"), 0);
    char *backup = unit_path_join(fixture.work, "ck.bak");
    write_text(backup, "first");              /* the user keeps a copy */
    cr_assert_eq(commit(&fixture, "ck", "second"), 0);
    age_snapshots(fixture.state);
    cr_assert_eq(commit(&fixture, "ck", "third"), 0);
    cr_expect_eq(count_snapshots(fixture.state), 2, "first (ck.bak) and third; second is gone");
    unlink(backup);
    age_snapshots(fixture.state);
    cr_assert_eq(commit(&fixture, "ck", "fourth"), 0);
    cr_expect_eq(count_snapshots(fixture.state), 1, "the copy is gone: so is its snapshot");
    free(backup);
    fixture_free(&fixture);
}

Test(session, an_unusable_state_directory_names_the_variable)
{
    struct runtime_session session;
    session_init(&session);
    char error[1024] = "";
    cr_expect_eq(session_prepare_state_directory(&session, error, sizeof error), 0,
                 "unset: nothing to prepare");
    char *work = make_directory();
    char *state = unit_path_join(work, "missing/state");
    session.config.checkpoint_path = state;
    cr_expect_eq(session_prepare_state_directory(&session, error, sizeof error), -1);
    cr_expect_eq(errno, ENOENT);
    cr_expect_eq(strncmp(error, "ADAPTDL_CHECKPOINT_PATH: ", 25), 0, "%s", error);
    cr_expect_not_null(strstr(error, state), "%s", error);
    cr_expect_not_null(strstr(error, "accepted:"), "%s", error);
    char *plain = unit_path_join(work, "plain");
    write_text(plain, "x");
    session.config.checkpoint_path = plain;
    cr_expect_eq(session_prepare_state_directory(&session, error, sizeof error), -1);
    cr_expect_eq(strncmp(error, "ADAPTDL_CHECKPOINT_PATH: ", 25), 0, "%s", error);
    cr_expect_not_null(strstr(error, "not a directory"), "%s", error);
    session.config.checkpoint_path = NULL;
    free(state);
    free(plain);
    unit_remove_temp_directory(work);
}

Test(session, a_close_on_the_file_opened_commits)
{
    struct file_identity opened = {.device = 2049, .inode = 77};
    struct file_identity now = opened;
    cr_expect(session_close_commits(&opened, &now));
}

Test(session, a_number_reused_for_another_file_never_commits)
{
    struct file_identity opened = {.device = 2049, .inode = 77};
    struct file_identity pipe = {.device = 13, .inode = 77};
    struct file_identity other = {.device = 2049, .inode = 78};
    cr_expect_not(session_close_commits(&opened, &pipe));
    cr_expect_not(session_close_commits(&opened, &other));
}

Test(session, an_unknown_file_never_commits)
{
    struct file_identity opened = {.device = 2049, .inode = 77};
    cr_expect_not(session_close_commits(&opened, NULL), "fstat failed: not a commit");
    cr_expect_not(session_close_commits(NULL, &opened));
}

/* A session configured by environment (which must parse). */
static void start_session(struct runtime_session *session, char *const environment[])
{
    session_init(session);
    char error[512];
    cr_assert_eq(config_parse(&session->config, environment, error, sizeof error), 0, "%s",
                 error);
}

/* Frees what session_prepare_globs and the matches made, and the
 * configuration. */
static void free_prepared_session(struct runtime_session *session)
{
    for (size_t i = 0; session->data_anchored_globs != NULL && i < session->config.data_count;
         i++)
        free(session->data_anchored_globs[i]);
    free(session->data_anchored_globs);
    free(session->save_anchored_glob);
    free(session->data_entry_matched);
    free(session->data_entry_overlap_warned);
    config_free(&session->config);
}

/* The globs of ADAPTDL_DATA and ADAPTDL_SAVE match the path as the trainer
 * passed it or its absolute form, with fnmatch flags 0 (`*` matches `/`);
 * the first data entry that matches wins. */
Test(session, globs_match_the_path_as_passed_or_its_absolute_form)
{
    char *environment[] = {"ADAPTDL_DATA=/data/*.bin:record=8;train.txt:lines;*.bin:record=4",
                           "ADAPTDL_SAVE=*/ck*", NULL};
    struct runtime_session session;
    start_session(&session, environment);
    const struct data_entry *entry = session_match_data(&session, "x/y.bin", "/data/x/y.bin");
    cr_assert_not_null(entry, "`*` matches `/` in the absolute form");
    cr_expect_eq(entry->record_size, 8, "the first entry that matches");
    entry = session_match_data(&session, "train.txt", "/home/u/train.txt");
    cr_assert_not_null(entry, "the path as passed");
    cr_expect(entry->lines);
    entry = session_match_data(&session, "other.bin", "/home/u/other.bin");
    cr_assert_not_null(entry);
    cr_expect_eq(entry->record_size, 4);
    cr_expect_null(session_match_data(&session, "notes.md", "/home/u/notes.md"));
    cr_expect(session_match_save(&session, "ck1", "/run/job/ck1"));
    cr_expect(!session_match_save(&session, "model.pt", "/run/job/model.pt"));
    config_free(&session.config);
}

/* A relative glob also matches the absolute form of a path, made absolute
 * against the working directory at start-up: `data.bin` matches the
 * trainer's `./data.bin` and `ck0` its `$PWD/ck0` (before, neither matched,
 * silently); an absolute glob is left as it is. */
Test(session, relative_globs_are_anchored_at_the_start_up_directory)
{
    char *environment[] = {"ADAPTDL_DATA=data.bin:record=8;/data/eval.bin:record=4",
                           "ADAPTDL_SAVE=ck0", NULL};
    struct runtime_session session;
    start_session(&session, environment);
    cr_expect_null(session_match_data(&session, "./data.bin", "/work/run/data.bin"),
                   "as written, the glob matches no form of ./data.bin");
    cr_expect_not(session_match_save(&session, "/work/run/ck0", "/work/run/ck0"));
    cr_assert_eq(session_prepare_globs(&session, "/work/run"), 0);
    char message[1024];
    cr_assert(session_describe_unmatched_globs(&session, true, true, message, sizeof message));
    cr_expect(strstr(message, "ADAPTDL_DATA entry \"data.bin\"") != NULL &&
                  strstr(message, "ADAPTDL_SAVE \"ck0\"") != NULL &&
                  strstr(message, "/data/eval.bin") == NULL,
              "the train entry and the save glob, not the eval entry: %s", message);
    cr_expect_str_eq(session.data_anchored_globs[0], "/work/run/data.bin");
    cr_expect_null(session.data_anchored_globs[1], "an absolute glob");
    const struct data_entry *entry =
        session_match_data(&session, "./data.bin", "/work/run/data.bin");
    cr_assert_not_null(entry);
    cr_expect_eq(entry->record_size, 8);
    cr_expect(session_match_save(&session, "/work/run/ck0", "/work/run/ck0"));
    cr_expect_not(session_match_save(&session, "/elsewhere/ck0", "/elsewhere/ck0"),
                  "another directory's ck0");
    cr_expect_not(session_describe_unmatched_globs(&session, true, true, message,
                                                   sizeof message),
                  "every one matched: %s", message);
    cr_expect_null(session_match_data(&session, "/other/data.bin", "/other/data.bin"));
    free_prepared_session(&session);
}

/* Two different globs that match one file: the first entry applies, and
 * the later one's keys (here its record size) would be ignored for that
 * file without a word.  One warn line names both entries and the path,
 * once per later entry. */
Test(session, a_file_two_entries_match_is_named_once_with_both_entries)
{
    char *work = make_directory();
    char *environment[] = {"ADAPTDL_DATA=/data/*.bin:record=8;/data/train*:record=4;"
                           "/data/eval.txt:lines",
                           NULL};
    struct runtime_session session;
    start_session(&session, environment);
    cr_assert_eq(session_prepare_globs(&session, "/work/run"), 0);
    char *log_path = capture_warnings(work);

    const struct data_entry *entry =
        session_match_data(&session, "/data/train.bin", "/data/train.bin");
    cr_assert_not_null(entry);
    cr_expect_eq(entry->record_size, 8, "the first entry applies");
    cr_expect_eq(session_match_data(&session, "/data/train2.bin", "/data/train2.bin"), entry);
    cr_expect_not_null(session_match_data(&session, "/data/eval.txt", "/data/eval.txt"));
    cr_expect_not_null(session_match_data(&session, "/data/other.bin", "/data/other.bin"));

    char text[2048];
    read_captured_log(log_path, text, sizeof text);
    cr_expect_not_null(strstr(text, "warn: ADAPTDL_DATA entries 1 (\"/data/*.bin\") and 2 "
                                    "(\"/data/train*\") both match \"/data/train.bin\": entry "
                                    "1, the first, applies and entry 2's keys are ignored"),
                       "%s", text);
    cr_expect_not_null(strstr(text, "accepted: globs that no file matches twice"), "%s", text);
    cr_expect_eq(strchr(text, '\n'), text + strlen(text) - 1, "one line, once: %s", text);

    unlink(log_path);
    free(log_path);
    unit_remove_temp_directory(work);
    free_prepared_session(&session);
}

/* Commits checkpoint "ck1" of the content "weights of step 10": its path
 * (malloc'ed), and its content's identity in *identity. */
static char *commit_checkpoint(struct session_fixture *fixture,
                               struct content_identity *identity)
{
    cr_assert_eq(commit(fixture, "ck1", "weights of step 10"), 0);
    char *path = unit_path_join(fixture->work, "ck1");
    cr_assert_eq(content_identity_of_path(path, identity), 0);
    return path;
}

/* A fresh session of one replica on the fixture's state directory: the
 * job's next run. */
static void start_restarted_session(struct runtime_session *restarted,
                                    const struct session_fixture *fixture)
{
    session_init(restarted);
    restarted->config.checkpoint_path = strdup(fixture->state);
    restarted->config.num_replicas = 1;
}

/* A job that committed checkpoint ck1 (its path and content identity),
 * and the session of its next run. */
struct restart {
    struct session_fixture fixture;
    struct content_identity identity;
    char *path;
    struct runtime_session restarted;
};

static void restart_after_a_commit(struct restart *restart)
{
    fixture_init(&restart->fixture);
    restart->path = commit_checkpoint(&restart->fixture, &restart->identity);
    start_restarted_session(&restart->restarted, &restart->fixture);
}

/* A commit, then a fresh session (a restart) that loads that checkpoint:
 * the snapshot bound to its content is restored (0); a checkpoint of other
 * content finds none (1, a fresh start); a second load changes nothing. */
Test(session, a_restart_restores_the_snapshot_bound_to_the_checkpoint_it_loads)
{
    struct restart restart;
    restart_after_a_commit(&restart);
    char error[512] = "";
    struct content_identity other = {.size = restart.identity.size,
                                     .hash = restart.identity.hash ^ 1};
    cr_expect_eq(session_restore_checkpoint(&restart.restarted, restart.path, &other, error,
                                            sizeof error),
                 1, "no snapshot is bound to other content");

    struct runtime_session again;
    start_restarted_session(&again, &restart.fixture);
    cr_expect_eq(session_restore_checkpoint(&again, restart.path, &restart.identity, error,
                                            sizeof error),
                 0, "%s", error);
    cr_expect_eq(session_restore_checkpoint(&again, restart.path, &restart.identity, error,
                                            sizeof error),
                 1, "a second load is no restore");
    config_free(&restart.restarted.config);
    config_free(&again.config);
    /* a session lives as long as its process and has no teardown: the
     * positions the restore left pending (no file registered) go here */
    for (size_t i = 0; i < again.registry.pending_count; i++)
        free(again.registry.pending[i].position.name);
    free(again.registry.pending);
    free(restart.path);
    fixture_free(&restart.fixture);
}

/* A restarted trainer about to train without loading its checkpoint is
 * told so: the state directory holds a snapshot and no checkpoint was
 * opened for reading.  Nothing is said without snapshots, without a state
 * directory, or once a checkpoint was loaded (matching or not). */
Test(session, snapshots_never_loaded_are_described)
{
    struct session_fixture fixture;
    fixture_init(&fixture);
    char message[1024] = "";
    cr_expect_not(session_describe_unloaded_snapshots(&fixture.session, message,
                                                      sizeof message),
                  "an empty state directory: a first run");
    cr_assert_eq(commit(&fixture, "ck1", "weights of step 10"), 0);

    struct runtime_session restarted;
    start_restarted_session(&restarted, &fixture);
    cr_assert(session_describe_unloaded_snapshots(&restarted, message, sizeof message));
    char *checkpoint = unit_path_join(fixture.work, "ck1");
    cr_expect_not_null(strstr(message, fixture.state), "%s", message);
    cr_expect_not_null(strstr(message, checkpoint), "names the newest: %s", message);
    cr_expect_not_null(strstr(message, "no checkpoint matching ADAPTDL_SAVE was loaded"),
                       "%s", message);
    cr_expect_null(strchr(message, '\n'), "one line");

    char error[512];
    struct content_identity other = {.size = 1, .hash = 2};
    cr_expect_eq(session_restore_checkpoint(&restarted, checkpoint, &other, error,
                                            sizeof error), 1, "no snapshot bound to it");
    cr_expect_not(session_describe_unloaded_snapshots(&restarted, message, sizeof message),
                  "a checkpoint was loaded: its own warning said the rest");

    struct runtime_session without_directory;
    session_init(&without_directory);
    cr_expect_not(session_describe_unloaded_snapshots(&without_directory, message,
                                                      sizeof message));
    config_free(&restarted.config);
    free(checkpoint);
    fixture_free(&fixture);
}

/* --- session_commit_checkpoint and session_train_record_delivered ---------- */

#define SESSION_RECORD 8
#define SESSION_RECORDS 6

/* A data file of SESSION_RECORDS 8-byte records registered in the session;
 * `bytes` must outlive it. */
static struct dataset_file *register_file(struct runtime_session *session,
                                          struct data_entry *entry, const char *path,
                                          unsigned char *bytes, enum data_role role,
                                          uint64_t inode)
{
    for (uint64_t index = 0; index < SESSION_RECORDS; index++)
        memcpy(bytes + index * SESSION_RECORD, &index, sizeof index);
    *entry = (struct data_entry){
        .record_size = SESSION_RECORD, .role = role, .shuffle = true, .tail = TAIL_ERROR};
    struct dataset_file *file = malloc(sizeof *file);
    cr_assert_not_null(file);
    char error[256] = "";
    cr_assert_eq(dataset_file_init(file, entry, path, bytes, SESSION_RECORD * SESSION_RECORDS,
                                   session->config.seed, 1, 0, error, sizeof error), 0, "%s",
                 error);
    file->device = 1;
    file->inode = inode;
    pthread_mutex_lock(&session->registry.lock);
    int status = dataset_registry_add(&session->registry, file, error, sizeof error);
    pthread_mutex_unlock(&session->registry.lock);
    cr_assert_eq(status, 0, "%s", error);
    return file;
}

static void release_files(struct runtime_session *session)
{
    struct dataset_file *file = session->registry.files;
    while (file != NULL) {
        struct dataset_file *next = file->next;
        dataset_file_release(file);
        free(file);
        file = next;
    }
    session->registry.files = NULL;
}

static void read_records(struct dataset_file *file, unsigned records)
{
    struct view_cursor cursor;
    view_cursor_open(&cursor, file);
    unsigned char buffer[SESSION_RECORD];
    for (unsigned i = 0; i < records; i++)
        cr_assert_eq(view_cursor_read(&cursor, buffer, sizeof buffer), SESSION_RECORD);
    view_cursor_close(&cursor);
}

static void two_steps_in_flight(uint64_t *steps, uint64_t *records)
{
    *steps = 2;
    *records = 16;
}

/* Commits /job/model.pt of content `identity` directly and loads the
 * snapshot bound to it into *snapshot. */
static void commit_and_load_bound(struct session_fixture *fixture,
                                  const struct content_identity *identity,
                                  struct adaptdl_snapshot *snapshot)
{
    char error[512] = "";
    cr_assert_eq(session_commit_checkpoint(&fixture->session, "/job/model.pt", identity, NULL,
                                           NULL, error, sizeof error), 0, "%s", error);
    cr_assert_eq(snapshot_load_bound(fixture->state, identity, snapshot, error, sizeof error), 0,
                 "%s", error);
}

Test(session, a_commit_writes_a_snapshot_bound_to_the_checkpoints_content)
{
    struct session_fixture fixture;
    fixture_init(&fixture);
    fixture.session.config.seed = 1234;
    fixture.session.config.num_replicas = 3;
    unsigned char bytes[SESSION_RECORD * SESSION_RECORDS];
    struct data_entry entry;
    struct dataset_file *file = register_file(&fixture.session, &entry, "/data/train.bin",
                                              bytes, DATA_ROLE_TRAIN, 11);
    read_records(file, 2);
    statistical_epochs_note_step(&fixture.session.epochs, 2, NAN, NAN);
    fixture.session.uncounted_steps = two_steps_in_flight;

    struct content_identity identity = {.size = 4096, .hash = UINT64_C(0x0123456789abcdef)};
    double before = clock_unix_seconds();
    char error[512] = "";
    cr_assert_eq(session_commit_checkpoint(&fixture.session, "/job/model.pt", &identity, NULL,
                                           NULL, error, sizeof error), 0, "%s", error);
    cr_expect_eq(fixture.session.snapshots_written, 1);
    cr_expect_eq(count_snapshots(fixture.state), 1);
    cr_expect_eq(count_hidden(fixture.state), 0, "no temp file left");

    struct adaptdl_snapshot snapshot;
    cr_assert_eq(snapshot_load_bound(fixture.state, &identity, &snapshot, error, sizeof error),
                 0, "%s", error);
    cr_expect_eq(snapshot.binding.size, identity.size);
    cr_expect_eq(snapshot.binding.hash, identity.hash);
    cr_expect_str_eq(snapshot.checkpoint_path, "/job/model.pt");
    cr_expect_eq(snapshot.seed, 1234);
    cr_expect_eq(snapshot.replicas, 3);
    cr_expect_eq(snapshot.sequence, 1);
    cr_expect_geq(snapshot.created_unix_time, before - 1e-3);
    cr_expect_leq(snapshot.created_unix_time, clock_unix_seconds() + 1e-3);
    cr_expect_eq(snapshot.step, 3, "one counted step and two in flight");
    cr_assert_eq(snapshot.file_count, 1);
    cr_expect_str_eq(snapshot.files[0].name, "train.bin");
    cr_expect_eq(snapshot.files[0].record_count, SESSION_RECORDS);
    cr_expect_eq(snapshot.files[0].pass, 0);
    cr_expect_eq(snapshot.files[0].current_index, 2, "the records delivered so far");
    snapshot_free(&snapshot);

    /* commits count on, and past a restored snapshot's sequence */
    struct content_identity second = {.size = 1, .hash = 2};
    commit_and_load_bound(&fixture, &second, &snapshot);
    cr_expect_eq(snapshot.sequence, 2);
    snapshot_free(&snapshot);
    fixture.session.registry.restored_sequence = 40;
    struct content_identity third = {.size = 1, .hash = 3};
    commit_and_load_bound(&fixture, &third, &snapshot);
    cr_expect_eq(snapshot.sequence, 41);
    snapshot_free(&snapshot);
    cr_expect_eq(fixture.session.snapshots_written, 3);
    release_files(&fixture.session);
    fixture_free(&fixture);
}

Test(session, a_commit_without_a_state_directory_writes_nothing_and_warns_once)
{
    struct runtime_session session;
    session_init(&session);
    char *work = make_directory();
    char error[512] = "";
    char *log_path = capture_warnings(work);
    struct content_identity identity = {.size = 1, .hash = 1};
    cr_expect_eq(session_commit_checkpoint(&session, "/job/first.pt", &identity, NULL, NULL,
                                           error, sizeof error), 1);
    cr_expect_eq(session_commit_checkpoint(&session, "/job/second.pt", &identity, NULL, NULL,
                                           error, sizeof error), 1);
    cr_expect_eq(session.snapshots_written, 0);
    char text[2048];
    read_captured_log(log_path, text, sizeof text);
    cr_expect_not_null(strstr(text, "warn: checkpoint /job/first.pt committed, but "
                                    "ADAPTDL_CHECKPOINT_PATH is unset"), "%s", text);
    cr_expect_eq(strchr(text, '\n'), text + strlen(text) - 1, "one warning: %s", text);
    unlink(log_path);
    free(log_path);
    unit_remove_temp_directory(work);
}

Test(session, a_commit_whose_snapshot_cannot_be_written_fails_with_the_writes_errno)
{
    struct session_fixture fixture;
    fixture_init(&fixture);
    struct content_identity identity = {.size = 10, .hash = 20};
    const struct runtime_sysio original = runtime_sysio;
    full_directory = fixture.state;
    runtime_sysio.write = disk_full_write;
    char error[512] = "";
    errno = 0;
    cr_expect_eq(session_commit_checkpoint(&fixture.session, "/job/model.pt", &identity, NULL,
                                           NULL, error, sizeof error), -1);
    cr_expect_eq(errno, ENOSPC, "errno %d", errno);
    runtime_sysio = original;
    cr_expect_not_null(strstr(error, strerror(ENOSPC)), "%s", error);
    cr_expect_eq(fixture.session.snapshots_written, 0);
    cr_expect_eq(count_snapshots(fixture.state), 0);
    cr_expect_eq(count_hidden(fixture.state), 0, "no temp file left");
    fixture_free(&fixture);
}

Test(session, a_train_record_delivered_is_one_of_a_train_file)
{
    struct runtime_session session;
    session_init(&session);
    cr_expect_not(session_train_record_delivered(&session), "no file");
    unsigned char eval_bytes[SESSION_RECORD * SESSION_RECORDS];
    unsigned char train_bytes[SESSION_RECORD * SESSION_RECORDS];
    struct data_entry eval_entry, train_entry;
    struct dataset_file *eval = register_file(&session, &eval_entry, "/data/eval.bin",
                                              eval_bytes, DATA_ROLE_EVAL, 1);
    struct dataset_file *train = register_file(&session, &train_entry, "/data/train.bin",
                                               train_bytes, DATA_ROLE_TRAIN, 2);
    read_records(eval, SESSION_RECORDS);
    cr_expect_not(session_train_record_delivered(&session), "evaluation records do not count");
    struct view_cursor cursor;
    view_cursor_open(&cursor, train);
    cr_expect_not(session_train_record_delivered(&session), "an open delivers nothing");
    unsigned char buffer[SESSION_RECORD];
    cr_assert_eq(view_cursor_read(&cursor, buffer, 3), 3);
    cr_expect_not(session_train_record_delivered(&session), "part of a record");
    cr_assert_eq(view_cursor_read(&cursor, buffer, SESSION_RECORD - 3), SESSION_RECORD - 3);
    cr_expect(session_train_record_delivered(&session), "a whole record");
    while (view_cursor_read(&cursor, buffer, sizeof buffer) > 0)
        ;
    cr_assert_eq(train->view_pass, 1, "the pass ended");
    cr_expect(session_train_record_delivered(&session), "and stays delivered in the next pass");
    view_cursor_close(&cursor);
    release_files(&session);
}

/* --- one restore, whichever threads load checkpoints at once ---------------- */

#define RESTORE_RACE_ROUNDS 300
/* Eval files registered in the restarted session: deciding that no train
 * record was delivered looks at each of them, which keeps the two loads
 * side by side long enough to meet. */
#define RESTORE_RACE_FILES 400

struct restore_race {
    struct runtime_session *session;
    const char *path;
    const struct content_identity *identity;
    pthread_barrier_t *start;
    int status;
};

static void *restore_race_load(void *argument)
{
    struct restore_race *race = argument;
    char error[512] = "";
    pthread_barrier_wait(race->start);
    race->status = session_restore_checkpoint(race->session, race->path, race->identity, error,
                                              sizeof error);
    return NULL;
}

/* A session lives as long as its process and has no teardown: what a
 * restore left pending goes here. */
static void free_restored_positions(struct runtime_session *session)
{
    for (size_t i = 0; i < session->registry.pending_count; i++)
        free(session->registry.pending[i].position.name);
    free(session->registry.pending);
    session->registry.pending = NULL;
    session->registry.pending_count = 0;
}

/* Two threads load checkpoint shards at the same moment; returns how many
 * restored. */
static unsigned restore_race_round(struct runtime_session *session, const char *path,
                                   const struct content_identity *identity)
{
    pthread_barrier_t start;
    cr_assert_eq(pthread_barrier_init(&start, NULL, 2), 0);
    struct restore_race races[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        races[i] = (struct restore_race){session, path, identity, &start, -2};
        cr_assert_eq(pthread_create(&threads[i], NULL, restore_race_load, &races[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    cr_assert(races[0].status >= 0 && races[1].status >= 0, "%d %d", races[0].status,
              races[1].status);
    return (races[0].status == 0) + (races[1].status == 0);
}

/* A trainer that loads its checkpoint shards on several threads at once:
 * exactly one load restores, the other finds the restore taken.
 * Regression: the flag was a plain bool, read and then set, so both could
 * restore.  (Each round starts the same session afresh.) */
Test(session, two_threads_loading_checkpoints_at_once_restore_once)
{
    struct restart restart;
    restart_after_a_commit(&restart);
    static unsigned char bytes[RESTORE_RACE_FILES][SESSION_RECORD * SESSION_RECORDS];
    static struct data_entry entries[RESTORE_RACE_FILES];
    for (unsigned i = 0; i < RESTORE_RACE_FILES; i++) {
        char name[64];
        snprintf(name, sizeof name, "/data/eval%u.bin", i);
        register_file(&restart.restarted, &entries[i], name, bytes[i], DATA_ROLE_EVAL, 10 + i);
    }
    unsigned both_restored = 0, none_restored = 0;
    for (unsigned round = 0; round < RESTORE_RACE_ROUNDS; round++) {
        __atomic_store_n(&restart.restarted.restore_attempted, false, __ATOMIC_SEQ_CST);
        unsigned restored = restore_race_round(&restart.restarted, restart.path, &restart.identity);
        both_restored += restored == 2;
        none_restored += restored == 0;
    }
    cr_expect_eq(both_restored, 0, "both threads restored in %u of %u rounds", both_restored,
                 RESTORE_RACE_ROUNDS);
    cr_expect_eq(none_restored, 0, "neither restored in %u of %u rounds", none_restored,
                 RESTORE_RACE_ROUNDS);
    free_restored_positions(&restart.restarted);
    release_files(&restart.restarted);
    config_free(&restart.restarted.config);
    free(restart.path);
    fixture_free(&restart.fixture);
}
