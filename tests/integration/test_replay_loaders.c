/* test_replay_loaders.c - replay after a kill (adaptshim(7) "CHECKPOINT BINDING") with the
 * loaders of third-party C trainers (trainers/replay_loader): one that asks stdio for
 * the size and rewinds; two that take the record count from the size and
 * visit records in their own order (fseek + fread, pread); two that ask a
 * stat of the path for the size, before or after they open the file; and
 * one that reads records ahead of what it consumes, declared with
 * lookahead=.  Each run loads its checkpoint and runs every epoch from the
 * first again.  The passes before the bound one must end although the
 * loader reads nothing from them (some never even open the file then), and,
 * counting the first run's records up to the checkpoint the second run
 * resumed from, every epoch sees every record: exactly once for the
 * in-order loaders, at least once for the others, and at most lookahead
 * records twice for the read-ahead one. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define RECORDS 1000
#define RECORD_SIZE 64
#define EPOCHS 3
#define LOOKAHEAD 16

struct replay_case {
    const char *style;
    const char *checkpoint_every;
    const char *kill_after;
    bool in_order;              /* resumes exactly: no record twice */
    unsigned lookahead;         /* records that may be seen twice (lookahead=) */
    bool continues;             /* --continue, ADAPTDL_RESUME=continue */
    bool lengthens;             /* the shim lengthens a pass to the loader's count */
    bool resumed_epoch_empty;   /* continued at an epoch's end: the first epoch of
                                 * the resumed run reads the complete bound pass,
                                 * header-only (adaptshim(7) "CHECKPOINT BINDING"), and the next
                                 * one whole */
};

/* What the shim says when it lengthens a pass to a count taken once. */
#define REPLAY_NAMED_LENGTHENED "the pass is lengthened to 1000"

struct replay_job {
    const char *directory;
    char *data;
    char *checkpoint;
    char data_setting[600];
    char state_setting[600];
    char save_setting[600];
};

static void replay_job_init(struct replay_job *job, const struct replay_case *loader)
{
    job->directory = harness_temp_dir();
    job->data = harness_path_in(job->directory, "records.bin");
    job->checkpoint = harness_path_in(job->directory, "model.ckpt");
    unsigned char *bytes = calloc(RECORDS, RECORD_SIZE);
    cr_assert(bytes != NULL);
    for (uint64_t id = 0; id < RECORDS; id++)
        for (int i = 0; i < 8; i++)
            bytes[id * RECORD_SIZE + i] = (unsigned char)(id >> (8 * i));
    cr_assert_eq(harness_write_file(job->data, bytes, RECORDS * RECORD_SIZE), 0);
    free(bytes);
    char lookahead[64] = "";
    if (loader->lookahead > 0)
        snprintf(lookahead, sizeof lookahead, ":lookahead=%u", loader->lookahead);
    snprintf(job->data_setting, sizeof job->data_setting, "ADAPTDL_DATA=%s:record=%u%s",
             job->data, RECORD_SIZE, lookahead);
    snprintf(job->state_setting, sizeof job->state_setting, "ADAPTDL_CHECKPOINT_PATH=%s/state",
             job->directory);
    snprintf(job->save_setting, sizeof job->save_setting, "ADAPTDL_SAVE=%s", job->checkpoint);
}

static void replay_job_free(struct replay_job *job)
{
    free(job->data);
    free(job->checkpoint);
    free((char *)job->directory);
}

/* Runs the loader as run `name` to its end; returns its exit status. */
static int run_loader(const struct replay_job *job, const struct replay_case *loader,
                      const char *name, const char *kill_after, char *out_path[1])
{
    char file[64];
    snprintf(file, sizeof file, "%s.out", name);
    *out_path = harness_path_in(job->directory, file);
    snprintf(file, sizeof file, "%s.err", name);
    char *err_path = harness_path_in(job->directory, file);
    char *program = strdup(harness_build_path("trainers/replay_loader"));
    char record[16];
    snprintf(record, sizeof record, "%u", RECORD_SIZE);
    char *argv[] = {program, "--style", (char *)loader->style, "--data", job->data,
                    "--record", record, "--epochs", "3", "--checkpoint", job->checkpoint,
                    "--checkpoint-every", (char *)loader->checkpoint_every,
                    "--ahead", "16", loader->continues ? "--continue" : "--ahead", "16",
                    kill_after ? "--kill-after" : NULL, (char *)kill_after, NULL};
    char *environment[] = {(char *)job->data_setting, (char *)job->state_setting,
                           (char *)job->save_setting, "ADAPTDL_SEED=11",
                           loader->continues ? "ADAPTDL_RESUME=continue" : "ADAPTDL_RESUME=replay",
                           kill_after ? NULL : "ADAPTDL_NUM_RESTARTS=1", NULL};
    pid_t pid = harness_start(argv, environment, true, *out_path, err_path);
    int status = harness_wait(pid, 120);
    if (status != 0 && status != HARNESS_KILLED_BY(SIGKILL)) {
        char *err = harness_read_output(err_path);
        cr_log_error("%s: %s: %.2000s", name, harness_describe_status(status), err);
        free(err);
    }
    free(err_path);
    free(program);
    return status;
}

static void check_replay_after_a_kill(const struct replay_case *loader)
{
    struct replay_job job;
    replay_job_init(&job, loader);
    char *first_out, *second_out;
    int first = run_loader(&job, loader, "run1", loader->kill_after, &first_out);
    cr_assert_eq(first, HARNESS_KILLED_BY(SIGKILL), "the first run kills itself, got %s",
                 harness_describe_status(first));
    int second = run_loader(&job, loader, "run2", NULL, &second_out);
    cr_assert_eq(second, 0, "the resumed run: %s", harness_describe_status(second));
    uint64_t step = 0;
    cr_assert(harness_resume_point(second_out, &step) && step > 0,
              "the second run resumed from a checkpoint");
    unsigned *counts = calloc(EPOCHS * RECORDS, sizeof *counts);
    struct id_log log;
    harness_read_record_stream(first_out, &log);
    record_stream_count_until(&log, step, counts, RECORDS, EPOCHS);
    id_log_free(&log);
    harness_read_record_stream(second_out, &log);
    record_stream_count_until(&log, UINT64_MAX, counts, RECORDS, EPOCHS);
    id_log_free(&log);
    bool passed = true;
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        if (loader->resumed_epoch_empty && epoch == step / RECORDS)
            continue;
        size_t missing = 0, repeated = 0;
        for (uint64_t id = 0; id < RECORDS; id++) {
            missing += counts[epoch * RECORDS + id] == 0;
            repeated += counts[epoch * RECORDS + id] > 1;
        }
        size_t repeats_allowed = loader->in_order ? loader->lookahead : RECORDS;
        cr_expect(missing == 0 && repeated <= repeats_allowed,
                  "%s, epoch %u: %zu records lost, %zu seen twice (%zu allowed)",
                  loader->style, epoch, missing, repeated, repeats_allowed);
        passed = passed && missing == 0 && repeated <= repeats_allowed;
    }
    free(counts);
    char *second_err_path = harness_path_in(job.directory, "run2.err");
    char *second_err = harness_read_output(second_err_path);
    bool named = strstr(second_err, REPLAY_NAMED_LENGTHENED) != NULL;
    cr_expect(named == loader->lengthens, "%s: the resumed run %s \"%s\": %.2000s",
              loader->style, loader->lengthens ? "says" : "does not say",
              REPLAY_NAMED_LENGTHENED, second_err);
    passed = passed && named == loader->lengthens;
    free(second_err);
    free(second_err_path);
    char *output = harness_read_output(second_out);
    /* the first run is killed in epoch 1 (or at the end of epoch 0): the
     * resumed run's epoch 2 is a whole fresh pass */
    cr_expect(strstr(output, "epoch_end 2 records 1000\n") != NULL,
              "%s: the resumed run's last epoch is whole: %.400s", loader->style, output);
    passed = passed && strstr(output, "epoch_end 2 records 1000\n") != NULL;
    if (loader->resumed_epoch_empty) {
        cr_expect(strstr(output, "epoch_end 1 records 0\n") != NULL,
                  "%s: the complete bound pass is header-only: %.400s", loader->style, output);
        passed = passed && strstr(output, "epoch_end 1 records 0\n") != NULL;
    }
    free(output);
    free(first_out);
    free(second_out);
    if (passed)
        harness_remove_temp_dir(job.directory);
    replay_job_free(&job);
}

/* Killed half-way through epoch 1: epoch 0 is replayed as an empty pass. */
Test(replay_loaders, stdio_size_query_and_rewind, .timeout = 240)
{
    static const struct replay_case loader = {"stdio-size-rewind", "50", "1500", true, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

Test(replay_loaders, stdio_own_order_from_the_size, .timeout = 240)
{
    static const struct replay_case loader = {"stdio-own-order", "50", "1500", false, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

Test(replay_loaders, pread_own_order_from_fstat, .timeout = 240)
{
    static const struct replay_case loader = {"pread-own-order", "50", "1500", false, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

/* The count from one fstat at start-up, taken before the checkpoint is
 * loaded, under continue: the resumed pass holds the 550 records left, and
 * the loader preads all 1000 of its own order; the pass is lengthened at
 * its first pread past the end, while under way. */
Test(replay_loaders, pread_own_order_from_one_fstat_before_the_checkpoint, .timeout = 240)
{
    static const struct replay_case loader = {"pread-sized-once", "50", "1500", false, 0,
                                              .continues = true, .lengthens = true};
    check_replay_after_a_kill(&loader);
}

/* One descriptor opened at start-up and kept, its size asked by fstat at
 * every epoch: nothing but that question ends an epoch, since a pread
 * neither rewinds nor reopens.  Replayed, the skipped pass 0 is header-only
 * and ends at the second epoch's fstat; the bound pass holds the 500
 * records left and ends at the third's. */
Test(replay_loaders, pread_from_one_descriptor_sized_at_every_epoch, .timeout = 240)
{
    static const struct replay_case loader = {"pread-open-once", "50", "1500", false, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

/* Killed just after the checkpoint at the end of epoch 0: the bound pass is
 * complete, header-only under replay, and the fstat of epoch 1 ends it. */
Test(replay_loaders, pread_from_one_descriptor_killed_at_an_epoch_end, .timeout = 240)
{
    static const struct replay_case loader = {"pread-open-once", "50", "1000", false, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

/* The same loader restoring its own epoch: the resumed pass holds the 500
 * records left and the loader, which asks again after the restore, reads
 * those; the fstat of its next epoch gives it the next pass whole. */
Test(replay_loaders, pread_from_one_descriptor_resumed, .timeout = 240)
{
    static const struct replay_case loader = {"pread-open-once", "50", "1500", false, 0,
                                              .continues = true};
    check_replay_after_a_kill(&loader);
}

/* Restored at the end of epoch 0, the loader's epoch 1 reads the complete
 * bound pass, header-only (adaptshim(7) "CHECKPOINT BINDING": the shim cannot tell "epoch 0 done"
 * from "epoch 1 next"); its epoch 2 must not be empty too. */
Test(replay_loaders, pread_from_one_descriptor_resumed_at_an_epoch_end, .timeout = 240)
{
    static const struct replay_case loader = {"pread-open-once", "50", "1000", false, 0,
                                              .continues = true, .resumed_epoch_empty = true};
    check_replay_after_a_kill(&loader);
}

/* One stream fopen'ed at start-up and kept, its size asked by
 * fseek(SEEK_END) + ftell at every epoch, then an fseek and fread per
 * record of its own shuffle. */
Test(replay_loaders, stdio_one_stream_sized_at_every_epoch, .timeout = 240)
{
    static const struct replay_case loader = {"stdio-open-once", "50", "1500", false, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

Test(replay_loaders, stdio_one_stream_resumed, .timeout = 240)
{
    static const struct replay_case loader = {"stdio-open-once", "50", "1500", false, 0,
                                              .continues = true};
    check_replay_after_a_kill(&loader);
}

/* A map-style Dataset's length from a stat of the path at every epoch, the
 * file opened only for a record: from a skipped pass it reads nothing and
 * never opens the file, and the next epoch's stat must see the next pass. */
Test(replay_loaders, stat_for_the_size_then_a_lazy_open, .timeout = 240)
{
    static const struct replay_case loader = {"stat-lazy-open", "50", "1500", true, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

/* Open, then a stat of the path: one pass ends per epoch, not two. */
Test(replay_loaders, open_then_stat_for_the_size, .timeout = 240)
{
    static const struct replay_case loader = {"open-then-stat", "50", "1500", true, 0,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

/* The checkpoint after record 990 comes after the read that returned 0
 * (the loader holds 16 records): it binds pass 0 at 974, not pass 1. */
Test(replay_loaders, read_ahead_past_the_end_of_a_pass, .timeout = 240)
{
    static const struct replay_case loader = {"read-ahead", "330", "995", true, LOOKAHEAD,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

/* Killed mid-pass: a checkpoint the read-ahead loader commits before its
 * reads reach the end binds the pass it is in. */
Test(replay_loaders, read_ahead_in_the_middle_of_a_pass, .timeout = 240)
{
    static const struct replay_case loader = {"read-ahead", "70", "1520", true, LOOKAHEAD,
                                              .continues = false};
    check_replay_after_a_kill(&loader);
}

/* --- an ordinary PyTorch script under replay ------------------------------ */

#define TORCH_RECORDS 160
#define TORCH_DIM 4

/* How the first run of trainers/torch_dataset.py ends, and what its
 * Dataset does with its file. */
struct torch_case {
    const char *workers;    /* DataLoader workers */
    unsigned lookahead;     /* records the workers hold in flight */
    bool leave_open;        /* --leave-open --size-first: the Dataset is never
                             * closed, and asks for the size before it opens */
    int stop_signal;        /* SIGKILL, or a stop signal the run ends by with 143 */
    bool to_process_group;  /* the signal goes to the trainer's workers too */
    bool continues;         /* ADAPTDL_RESUME=continue: the trainer resumes its epoch */
    /* the runs (bit 0: the first, bit 1: the resumed one) that build their
     * Dataset once (--dataset-once): no read of the trainer's own between
     * epochs, whose workers are forked anew */
    unsigned dataset_once_runs;
    /* every run builds its Dataset once, before it loads the checkpoint
     * (--dataset-first): its count is the one of the view before the restore */
    bool dataset_first;
    /* the resumed pass is lengthened back to that count: no record is lost,
     * and one epoch may see records again (adaptshim(7) "Loaders that take the
     * size once") */
    bool lengthened;
    int resumed_status;     /* of the resumed run */
    const char *epochs;     /* --epochs; NULL: 3 */
    /* A Dataset built once after the restore counts the resumed pass: the
     * resumed run's second and third epochs must read the next pass on,
     * not its first records twice. */
    bool reads_the_pass_on;
    /* A loader the views cannot serve whole (its Dataset's length taken
     * once, from a view of another size): what the resumed run must say
     * about it.  Its records are then not counted. */
    const char *named;
    unsigned signal_lines;  /* checkpoint lines before the signal; 0: by the rule below */
};

#define TORCH_FIRST_RUN 1u
#define TORCH_EVERY_RUN 3u

/* The lines of stale_size.h. */
#define TORCH_NAMED_STALE_COUNT "but the trainer last asked the file's size"
#define TORCH_NAMED_REPLAY_UNREAD "the trainer ended before replay reached pass"
#define TORCH_NAMED_LENGTHENED "the pass is lengthened to 160"
#define TORCH_NAMED_CANNOT_REPLAY "a loader that keeps its count cannot replay"

/* A stop signal to the trainer alone goes at step 36, 4 steps of 0.4 s
 * before the end of epoch 1: with --dataset-once the workers of epoch 2 are
 * forked after it, and the deadline passes before the 24 steps left would
 * end the job, but after PyTorch would have seen a worker that stopped on
 * its own (it checks its workers every 5 s).  Any other signal goes at
 * step 28: 12 batches are left in the epoch and two workers hold 4 of them,
 * so the workers read after the signal. */
#define TORCH_STOP_SECONDS "ADAPTDL_STOP_SECONDS=8"
#define TORCH_LATE_SIGNAL_LINES 10     /* checkpoint lines up to step 36 */
#define TORCH_EARLY_SIGNAL_LINES 8     /* up to step 28 */

/* Starts run `run` of the case; the first runs in a process group of its
 * own (setsid(1) keeps its pid) when the signal goes to the group. */
static pid_t torch_start(const struct torch_case *c, struct dataset_job *job,
                         const char *data_setting, const char *checkpoint, unsigned run,
                         const char *output, const char *error)
{
    char *program = strdup(harness_build_path("trainers/torch_dataset.py"));
    bool stops = c->stop_signal != SIGKILL;
    char *argv[24] = {"/usr/bin/setsid", "/usr/bin/python3", program, "--data", job->data,
                      "--epochs", c->epochs ? (char *)c->epochs : "3", "--batch", "8", "--checkpoint", (char *)checkpoint,
                      "--checkpoint-every", "4", "--workers", (char *)c->workers,
                      "--shuffle", "0", "--sleep-us", stops && run == 0 ? "400000" : "10000"};
    size_t count = 19;
    if (!c->continues)
        argv[count++] = "--replay";
    if (c->leave_open) {
        argv[count++] = "--leave-open";
        argv[count++] = "--size-first";
    }
    if (c->dataset_once_runs & (1u << run))
        argv[count++] = "--dataset-once";
    if (c->dataset_first)
        argv[count++] = "--dataset-first";
    argv[count] = NULL;
    char *const *command = c->to_process_group && run == 0 ? argv : argv + 1;
    char *environment[] = {(char *)data_setting, job->state_setting, job->save_setting,
                           "ADAPTDL_SEED=11", TORCH_STOP_SECONDS,
                           c->continues ? "ADAPTDL_RESUME=continue" : "ADAPTDL_RESUME=replay",
                           run == 1 ? "ADAPTDL_NUM_RESTARTS=1" : NULL, NULL};
    pid_t pid = harness_start(command, environment, true, output, error);
    free(program);
    return pid;
}

/* The records the resumed run (its output at `path`) read in its second and
 * third epochs, a count kept from its first: the second epoch's, then the
 * rest of that pass, not the same ones again. */
static void expect_the_pass_read_on(const char *path)
{
    struct id_log log;
    harness_read_record_stream(path, &log);
    uint64_t first_epoch = UINT64_MAX;
    for (size_t i = 0; i < log.count; i++)
        if (log.events[i].kind == ID_EVENT_RECORD && log.events[i].epoch < first_epoch)
            first_epoch = log.events[i].epoch;
    bool seen[TORCH_RECORDS] = {false};
    size_t second_epoch_reads = 0, distinct = 0;
    for (size_t i = 0; i < log.count; i++) {
        const struct id_event *event = &log.events[i];
        if (event->kind != ID_EVENT_RECORD || event->value >= TORCH_RECORDS ||
            event->epoch < first_epoch + 1 || event->epoch > first_epoch + 2)
            continue;
        second_epoch_reads += event->epoch == first_epoch + 1;
        distinct += !seen[event->value];
        seen[event->value] = true;
    }
    cr_expect(second_epoch_reads > 0 && second_epoch_reads < TORCH_RECORDS,
              "the second epoch read the first epoch's count: %zu", second_epoch_reads);
    cr_expect_gt(distinct, second_epoch_reads,
                 "the third epoch read on: %zu distinct records in two epochs of %zu",
                 distinct, second_epoch_reads);
    id_log_free(&log);
}

/* trainers/torch_dataset.py --replay (a map-style Dataset that reads the
 * header when it is built, at every epoch, and takes its length from
 * os.path.getsize; DataLoader with the case's workers, batches of 8, in
 * order), ended by the case's signal in its second epoch and run again:
 * every epoch sees every record, at most `lookahead` twice. */
static void check_torch_replay(const struct torch_case *c)
{
    if (!harness_python_has("torch"))
        cr_skip_test("/usr/bin/python3 cannot import torch: torch_dataset.py not run");
    struct dataset_job job;
    dataset_job_init(&job, TORCH_RECORDS, TORCH_DIM, 3);
    char data_setting[700];
    if (c->lookahead > 0)
        snprintf(data_setting, sizeof data_setting, "%s:lookahead=%u", job.data_setting,
                 c->lookahead);
    else
        snprintf(data_setting, sizeof data_setting, "%s", job.data_setting);
    char *checkpoint = harness_path_in(job.directory, "ckpt");
    char *outputs[2], *errors[2];
    for (unsigned run = 0; run < 2; run++) {
        char name[32];
        snprintf(name, sizeof name, "torch%u.out", run);
        outputs[run] = harness_path_in(job.directory, name);
        snprintf(name, sizeof name, "torch%u.err", run);
        errors[run] = harness_path_in(job.directory, name);
        pid_t pid = torch_start(c, &job, data_setting, checkpoint, run, outputs[run],
                                errors[run]);
        int status;
        if (run == 0) {
            /* epoch 0 writes 6 checkpoint lines (steps 4 to 20, then its end) */
            bool late = c->stop_signal != SIGKILL && !c->to_process_group;
            size_t lines = c->signal_lines     ? c->signal_lines
                           : late              ? TORCH_LATE_SIGNAL_LINES
                                               : TORCH_EARLY_SIGNAL_LINES;
            cr_assert(harness_wait_for_lines(outputs[run], "checkpoint step", lines, pid, 180),
                      "the first run reaches its second epoch");
            kill(c->to_process_group ? -pid : pid, c->stop_signal);
            status = harness_wait(pid, 60);
        } else {
            status = harness_wait(pid, 180);
        }
        int expected = run == 1                      ? c->resumed_status
                       : c->stop_signal != SIGKILL ? 143
                                                   : 0;
        if (run == 1 || expected != 0) {
            char *err = harness_read_output(errors[run]);
            cr_assert(status == expected,
                      "run %u: %s, not status %d: %.2000s", run,
                      harness_describe_status(status), expected, err);
            /* a worker that stopped on its own fails the trainer's batch,
             * which the shim's 143 at exit would hide (workers still
             * feeding their queue when the trainer's deadline ends it may
             * print a BrokenPipeError of their own: not a failure) */
            cr_expect(strstr(err, "exited unexpectedly") == NULL,
                      "run %u: the trainer lost a worker: %.3000s", run, err);
            if (run == 1 && c->named != NULL)
                cr_expect(strstr(err, c->named) != NULL, "the resumed run says \"%s\": %.3000s",
                          c->named, err);
            if (run == 1 && c->lengthened)
                cr_expect(strstr(err, TORCH_NAMED_LENGTHENED) != NULL,
                          "the resumed run says \"%s\": %.3000s", TORCH_NAMED_LENGTHENED, err);
            if (run == 1 && c->named == NULL)
                cr_expect(strstr(err, TORCH_NAMED_STALE_COUNT) == NULL &&
                              strstr(err, TORCH_NAMED_REPLAY_UNREAD) == NULL &&
                              strstr(err, TORCH_NAMED_CANNOT_REPLAY) == NULL &&
                              (c->lengthened || strstr(err, TORCH_NAMED_LENGTHENED) == NULL),
                          "a loader the views serve whole is not named: %.3000s", err);
            free(err);
        }
    }
    if (c->reads_the_pass_on)
        expect_the_pass_read_on(outputs[1]);
    if (c->named != NULL) {
        for (unsigned run = 0; run < 2; run++) {
            free(outputs[run]);
            free(errors[run]);
        }
        free(checkpoint);
        harness_remove_temp_dir(job.directory);
        return;
    }
    uint64_t step = 0;
    cr_assert(harness_resume_point(outputs[1], &step) && step > 0);
    unsigned *counts = calloc(EPOCHS * TORCH_RECORDS, sizeof *counts);
    struct id_log log;
    harness_read_record_stream(outputs[0], &log);
    record_stream_count_until(&log, step, counts, TORCH_RECORDS, EPOCHS);
    id_log_free(&log);
    harness_read_record_stream(outputs[1], &log);
    record_stream_count_until(&log, UINT64_MAX, counts, TORCH_RECORDS, EPOCHS);
    id_log_free(&log);
    bool passed = true;
    unsigned epochs_seen_again = 0;  /* beyond the lookahead */
    for (unsigned epoch = 0; epoch < EPOCHS; epoch++) {
        size_t missing = 0, repeated = 0;
        for (uint64_t id = 0; id < TORCH_RECORDS; id++) {
            missing += counts[epoch * TORCH_RECORDS + id] == 0;
            repeated += counts[epoch * TORCH_RECORDS + id] > 1;
        }
        bool again = c->lengthened && repeated > c->lookahead && epochs_seen_again++ == 0;
        cr_expect(missing == 0 && (repeated <= c->lookahead || again),
                  "%s workers, epoch %u: %zu records lost, %zu seen twice (%u allowed)",
                  c->workers, epoch, missing, repeated, c->lookahead);
        passed = passed && missing == 0 && (repeated <= c->lookahead || again);
    }
    free(counts);
    for (unsigned run = 0; run < 2; run++) {
        free(outputs[run]);
        free(errors[run]);
    }
    free(checkpoint);
    if (passed)
        harness_remove_temp_dir(job.directory);
}

/* Two workers with the default prefetch factor hold 2 * 2 batches of 8. */
#define TORCH_TWO_WORKERS .workers = "2", .lookahead = 2 * 2 * 8

Test(replay_loaders, torch_dataloader_without_workers, .timeout = 400)
{
    check_torch_replay(&(struct torch_case){.workers = "0", .stop_signal = SIGKILL});
}

/* Resumed in its epoch, the next epoch's Dataset asks for the size while
 * the old one still holds the file open: it is told the whole pass, not
 * what was left of the bound one. */
Test(replay_loaders, torch_dataloader_without_workers_leaving_its_file_open, .timeout = 400)
{
    check_torch_replay(&(struct torch_case){.workers = "0", .leave_open = true,
                                            .stop_signal = SIGKILL, .continues = true});
}

Test(replay_loaders, torch_dataloader_with_two_workers, .timeout = 400)
{
    check_torch_replay(&(struct torch_case){TORCH_TWO_WORKERS, .stop_signal = SIGKILL});
}

/* The same with a Dataset that asks for the file's size before it opens it
 * (in the process that forks the workers, at every epoch) and never closes
 * what it opened; each worker opens the file for itself. */
Test(replay_loaders, torch_dataloader_with_two_workers_leaving_its_file_open, .timeout = 400)
{
    check_torch_replay(&(struct torch_case){TORCH_TWO_WORKERS, .leave_open = true,
                                            .stop_signal = SIGKILL});
}

/* SIGTERM to the trainer alone (a container runtime's stop), whose Dataset
 * is built once: the workers of the next epoch, forked after the signal,
 * must not stop on their own, which would fail the trainer's next batch;
 * the trainer, which reads nothing itself, stops at the deadline with 143.
 * The resumed run builds its Dataset each epoch: one built once could not
 * be resumed exactly (see the cases below). */
Test(replay_loaders, torch_dataloader_with_two_workers_stopped_by_sigterm, .timeout = 400)
{
    check_torch_replay(&(struct torch_case){TORCH_TWO_WORKERS, .stop_signal = SIGTERM,
                                            .dataset_once_runs = TORCH_FIRST_RUN});
}

/* A Dataset built once takes its length from the first view it is shown.
 * Under replay that is a skipped pass, an empty file: the trainer reads
 * nothing and ends as if done, and the shim says which pass it never read.
 * Under continue it is the resumed pass: the next epoch is read with its
 * shorter count, and the shim says so as that epoch begins (adaptshim(7)
 * "Loaders that take the size once"). */
Test(replay_loaders, a_dataset_built_once_replayed_is_named, .timeout = 400)
{
    check_torch_replay(&(struct torch_case){.workers = "0", .stop_signal = SIGKILL,
                                            .dataset_once_runs = TORCH_EVERY_RUN,
                                            .named = TORCH_NAMED_REPLAY_UNREAD});
}

/* Killed after the line of step 32, which comes before its rename: the
 * checkpoint of step 28 or 32 binds pass 1 at record 32 or 64 (4 or 8
 * batches less the 4 in flight), never at its start. */
Test(replay_loaders, a_dataset_built_once_resumed_before_its_last_epoch_is_named,
     .timeout = 400)
{
    check_torch_replay(&(struct torch_case){TORCH_TWO_WORKERS, .stop_signal = SIGKILL,
                                            .dataset_once_runs = TORCH_EVERY_RUN,
                                            .continues = true, .signal_lines = 9,
                                            .named = TORCH_NAMED_STALE_COUNT});
}

/* A Dataset built once before the trainer loads its checkpoint has the
 * count of the view before the restore, the whole file: the resumed pass is
 * lengthened to it instead of ending at the records left, so the resumed
 * epoch reads every index it asks for (records seen before the kill come
 * round again), and the next epochs are whole. */
Test(replay_loaders, a_dataset_built_before_its_checkpoint_is_loaded_resumes_whole,
     .timeout = 400)
{
    check_torch_replay(&(struct torch_case){.workers = "0", .stop_signal = SIGKILL,
                                            .continues = true, .dataset_first = true,
                                            .lengthened = true});
}

Test(replay_loaders, a_dataset_built_before_its_checkpoint_is_loaded_resumes_whole_with_workers,
     .timeout = 400)
{
    check_torch_replay(&(struct torch_case){TORCH_TWO_WORKERS, .stop_signal = SIGKILL,
                                            .continues = true, .dataset_first = true,
                                            .lengthened = true});
}

/* Under replay its first epoch is a skipped pass, an empty file read with
 * the whole count: nothing can serve that, and the shim says so before the
 * trainer fails on the record it does not get. */
Test(replay_loaders, a_dataset_built_before_its_checkpoint_is_loaded_cannot_replay,
     .timeout = 400)
{
    check_torch_replay(&(struct torch_case){.workers = "0", .stop_signal = SIGKILL,
                                            .dataset_first = true, .resumed_status = 1,
                                            .named = TORCH_NAMED_CANNOT_REPLAY});
}

/* The same Dataset built once after the restore, without workers, over
 * four epochs: its count is the resumed pass's, and every later epoch
 * continues the pass where the last one stopped instead of reading its
 * first records again. */
Test(replay_loaders, a_dataset_built_once_after_a_restore_reads_each_pass_on, .timeout = 400)
{
    check_torch_replay(&(struct torch_case){.workers = "0", .stop_signal = SIGKILL,
                                            .dataset_once_runs = TORCH_EVERY_RUN,
                                            .continues = true, .epochs = "4",
                                            .reads_the_pass_on = true,
                                            .named = TORCH_NAMED_STALE_COUNT});
}

/* SIGTERM to the whole process group (a batch scheduler signals every
 * process of the job) while the workers still have batches to read: the
 * workers, signalled too, leave the stop to the trainer, which stops at its
 * next read of the file (the next epoch's Dataset reads the header).  (Not
 * SIGINT: Python's own handler turns it into
 * KeyboardInterrupt, which the deadline then runs, as adaptshim(7) "What a stop guarantees"
 * says.) */
Test(replay_loaders, torch_dataloader_with_two_workers_stopped_by_a_group_sigterm,
     .timeout = 400)
{
    check_torch_replay(&(struct torch_case){TORCH_TWO_WORKERS, .stop_signal = SIGTERM,
                                            .to_process_group = true});
}
