/* test_cooperative_state.c - the cooperative API's state in bound snapshots
 * (runtime/cooperative_state.h): captured into a snapshot, encoded and
 * decoded as a snapshot file is, and restored into a fresh process's state,
 * objects created before the restore take their state in place, those
 * created after it take it by name at creation; registered buffers and
 * callbacks come back; a buffer of another size is refused with a message;
 * a snapshot of a trainer that never used the API restores nothing. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cooperative_state.h"
#include "log.h"
#include "replica_collective.h"
#include "thread_replicas.h"

struct process {
    struct cooperative_state state;
    struct data_loop loop;
    struct accumulator accumulator;
    double buffer[4];
};

static void process_init(struct process *process)
{
    memset(process, 0, sizeof *process);
    cooperative_state_init(&process->state);
}

static void process_add_objects(struct process *process)
{
    char error[256];
    cr_assert_eq(data_loop_create(&process->state.loops, &process->loop, -1, 40, 8, true, 2,
                                  error, sizeof error), 0, "%s", error);
    cr_assert_eq(cooperative_state_add_loop(&process->state, &process->loop, error,
                                            sizeof error), 0, "%s", error);
    accumulator_init(&process->accumulator, -1, 0);
    cr_assert_eq(cooperative_state_add_accumulator(&process->state, &process->accumulator,
                                                   error, sizeof error), 0, "%s", error);
}

static void process_free(struct process *process)
{
    data_loop_free(&process->loop);
    accumulator_free(&process->accumulator);
    cooperative_state_free(&process->state);
}

/* A run that trains: 2 batches of the loop, an accumulator with one
 * synchronization, 3 finished epochs, a registered buffer. */
static void first_run(struct process *process, struct adaptdl_snapshot *snapshot)
{
    process_init(process);
    char error[256];
    process->buffer[0] = 1.5;
    process->buffer[3] = -2;
    struct registered_state buffer = {.name = "weights", .buffer = process->buffer,
                                      .size = sizeof process->buffer};
    cr_assert_eq(cooperative_state_register(&process->state, &buffer, error, sizeof error), 0);
    process_add_objects(process);
    process->state.epochs.finished = 3;
    process->state.progress = 2.5;
    bool skipped;
    uint64_t indices[8];
    cr_assert_eq(data_loop_begin(&process->state.loops, &process->loop, -1, 1, 0, &skipped,
                                 error, sizeof error), 0);
    for (int batch = 0; batch < 3; batch++)
        cr_assert_eq(data_loop_next_batch(&process->state.loops, &process->loop, indices, 8,
                                          error, sizeof error), 8);
    accumulator_add(&process->accumulator, "loss", 4, error, sizeof error);
    cr_assert_eq(accumulator_synchronize(&process->accumulator, -1, false, error, sizeof error),
                 0);
    accumulator_desynchronize(&process->accumulator);
    memset(snapshot, 0, sizeof *snapshot);
    snapshot->version = STATE_FORMAT_VERSION;
    cr_assert_eq(cooperative_state_capture(&process->state, snapshot, error, sizeof error), 0,
                 "%s", error);
    /* through the file format, as a restart reads it */
    void *bytes;
    size_t size;
    cr_assert_eq(snapshot_encode(snapshot, &bytes, &size), 0);
    snapshot_free(snapshot);
    cr_assert_eq(snapshot_decode(bytes, size, snapshot, error, sizeof error), 0, "%s", error);
    free(bytes);
}

static void expect_restored(const struct process *process)
{
    cr_expect_eq(process->state.epochs.finished, 3);
    cr_expect_eq(process->state.progress, 2.5);
    cr_expect_eq(process->loop.current_index, 16, "two batches of 8 counted, the third in hand");
    cr_expect_eq(process->accumulator.results.count, 1);
    cr_expect_eq(process->accumulator.results.values[0], 4);
    cr_expect_eq(process->accumulator.history_count, 1, "the synchronization to replay");
    cr_expect_eq(process->buffer[0], 1.5);
    cr_expect_eq(process->buffer[3], -2);
}

Test(cooperative_state, objects_created_before_the_restore_take_their_state_in_place)
{
    struct process first, second;
    struct adaptdl_snapshot snapshot;
    first_run(&first, &snapshot);
    process_init(&second);
    char error[256];
    struct registered_state buffer = {.name = "weights", .buffer = second.buffer,
                                      .size = sizeof second.buffer};
    cr_assert_eq(cooperative_state_register(&second.state, &buffer, error, sizeof error), 0);
    process_add_objects(&second);
    cr_assert_eq(cooperative_state_restore(&second.state, &snapshot, error, sizeof error), 0,
                 "%s", error);
    expect_restored(&second);
    snapshot_free(&snapshot);
    process_free(&first);
    process_free(&second);
}

Test(cooperative_state, objects_created_after_the_restore_take_it_by_name)
{
    struct process first, second;
    struct adaptdl_snapshot snapshot;
    first_run(&first, &snapshot);
    process_init(&second);
    char error[256];
    cr_assert_eq(cooperative_state_restore(&second.state, &snapshot, error, sizeof error), 0,
                 "%s", error);
    struct registered_state buffer = {.name = "weights", .buffer = second.buffer,
                                      .size = sizeof second.buffer};
    cr_assert_eq(cooperative_state_register(&second.state, &buffer, error, sizeof error), 0);
    process_add_objects(&second);
    expect_restored(&second);
    snapshot_free(&snapshot);
    process_free(&first);
    process_free(&second);
}

/* An accumulator created with initial values (Accumulator(initial_dict))
 * after a restore takes the saved results by name, which replace the
 * initial ones; without a restore it keeps them. */
Test(cooperative_state, initial_values_give_way_to_restored_results)
{
    struct process first;
    struct adaptdl_snapshot snapshot;
    first_run(&first, &snapshot);
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256] = "";
    cr_assert_eq(cooperative_state_restore(&state, &snapshot, error, sizeof error), 0, "%s",
                 error);
    struct accumulator accumulator;
    accumulator_init(&accumulator, -1, 0);
    cr_assert_eq(accumulator_set_initial(&accumulator, "loss", 100, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_add_accumulator(&state, &accumulator, error, sizeof error),
                 0);
    cr_assert_eq(accumulator.results.count, 1);
    cr_expect_eq(accumulator.results.values[0], 4, "the saved sum, not the initial 100");
    accumulator_free(&accumulator);
    cooperative_state_free(&state);

    cooperative_state_init(&state);
    accumulator_init(&accumulator, -1, 0);
    cr_assert_eq(accumulator_set_initial(&accumulator, "loss", 100, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_add_accumulator(&state, &accumulator, error, sizeof error),
                 0);
    cr_expect_eq(accumulator.results.values[0], 100, "nothing restored: the initial value");
    accumulator_free(&accumulator);
    cooperative_state_free(&state);
    snapshot_free(&snapshot);
    process_free(&first);
}

static int saved_calls, loaded_calls;
static char loaded[16];

/* The context is a string literal: the bytes handed out stay the caller's. */
static int save_text(void *context, void **bytes, size_t *size)
{
    saved_calls++;
    *bytes = context;
    *size = strlen(context) + 1;
    return 0;
}

static int load_text(void *context, const void *bytes, size_t size)
{
    (void)context;
    loaded_calls++;
    if (size > sizeof loaded)
        return -1;
    memcpy(loaded, bytes, size);
    return 0;
}

Test(cooperative_state, callbacks_come_back_and_a_buffer_of_another_size_is_refused)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256] = "";
    struct registered_state callbacks = {.name = "optimizer", .save = save_text,
                                         .load = load_text, .context = "adam:42"};
    double small[2] = {7, 8};
    struct registered_state buffer = {.name = "weights", .buffer = small, .size = sizeof small};
    cr_assert_eq(cooperative_state_register(&state, &callbacks, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_register(&state, &buffer, error, sizeof error), 0);
    cr_expect_eq(cooperative_state_register(&state, &buffer, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "registered already"), "%s", error);
    struct adaptdl_snapshot snapshot = {0};
    cr_assert_eq(cooperative_state_capture(&state, &snapshot, error, sizeof error), 0);
    cr_expect_eq(saved_calls, 1);
    cooperative_state_free(&state);

    cooperative_state_init(&state);
    cr_assert_eq(cooperative_state_restore(&state, &snapshot, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_register(&state, &callbacks, error, sizeof error), 0);
    cr_expect_eq(loaded_calls, 1);
    cr_expect_str_eq(loaded, "adam:42");
    double big[3];
    struct registered_state other = {.name = "weights", .buffer = big, .size = sizeof big};
    cr_expect_eq(cooperative_state_register(&state, &other, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "24 bytes but the restored snapshot holds 16"), "%s",
                       error);
    snapshot_free(&snapshot);
    cooperative_state_free(&state);
}

/* A save callback's bytes stay the trainer's (adaptdl.h): static memory and
 * a buffer the trainer keeps and reuses are copied at each capture, never
 * freed by the library (freeing them aborted the process at the commit);
 * bytes without a pointer fail the capture with a message. */
static const char static_state[] = "static optimizer state";

static int save_static(void *context, void **bytes, size_t *size)
{
    (void)context;
    *bytes = (void *)static_state;
    *size = sizeof static_state;
    return 0;
}

struct owned_buffer {
    char bytes[32];
    unsigned saves;
};

static int save_owned(void *context, void **bytes, size_t *size)
{
    struct owned_buffer *owned = context;
    owned->saves++;
    snprintf(owned->bytes, sizeof owned->bytes, "save %u", owned->saves);
    *bytes = owned->bytes;
    *size = strlen(owned->bytes) + 1;
    return 0;
}

static int save_no_pointer(void *context, void **bytes, size_t *size)
{
    (void)context;
    *bytes = NULL;
    *size = 8;
    return 0;
}

static int load_nothing(void *context, const void *bytes, size_t size)
{
    (void)context, (void)bytes, (void)size;
    return 0;
}

static void capture_encode_and_free(struct cooperative_state *state, const char *first_name,
                                    const char *first_bytes)
{
    struct adaptdl_snapshot snapshot = {0};
    snapshot.version = STATE_FORMAT_VERSION;
    char error[256] = "";
    cr_assert_eq(cooperative_state_capture(state, &snapshot, error, sizeof error), 0, "%s",
                 error);
    cr_assert_eq(snapshot.registered_count, 2);
    cr_expect_str_eq(snapshot.registered[0].name, first_name);
    cr_expect_str_eq((const char *)snapshot.registered[0].bytes, first_bytes);
    void *encoded;
    size_t size;
    cr_assert_eq(snapshot_encode(&snapshot, &encoded, &size), 0);
    free(encoded);
    snapshot_free(&snapshot);   /* frees the copies only */
}

Test(cooperative_state, save_callback_bytes_stay_the_callers_and_are_copied)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256] = "";
    struct owned_buffer owned = {.saves = 0};
    struct registered_state fixed = {.name = "fixed", .save = save_static,
                                     .load = load_nothing};
    struct registered_state reused = {.name = "reused", .save = save_owned,
                                      .load = load_nothing, .context = &owned};
    cr_assert_eq(cooperative_state_register(&state, &fixed, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_register(&state, &reused, error, sizeof error), 0);
    capture_encode_and_free(&state, "fixed", static_state);
    capture_encode_and_free(&state, "fixed", static_state);
    cr_expect_eq(owned.saves, 2, "one save per capture");
    cr_expect_str_eq(owned.bytes, "save 2", "the caller's buffer is left as it wrote it");
    cr_expect_str_eq(static_state, "static optimizer state");

    struct registered_state broken = {.name = "broken", .save = save_no_pointer,
                                      .load = load_nothing};
    cr_assert_eq(cooperative_state_register(&state, &broken, error, sizeof error), 0);
    struct adaptdl_snapshot snapshot = {0};
    cr_expect_eq(cooperative_state_capture(&state, &snapshot, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "\"broken\": its save callback gave 8 bytes but no "
                                     "pointer"), "%s", error);
    cr_expect_null(strchr(error, '\n'), "one line");
    snapshot_free(&snapshot);
    cooperative_state_free(&state);
}

Test(cooperative_state, a_snapshot_of_a_transparent_trainer_restores_nothing)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    state.epochs.finished = 2;
    struct adaptdl_snapshot snapshot = {0};
    char error[256];
    cr_assert_eq(cooperative_state_capture(&state, &snapshot, error, sizeof error), 0);
    cr_expect(!snapshot.cooperative, "the API was never used");
    cr_expect_eq(snapshot.loop_count, 0);
    cr_assert_eq(cooperative_state_restore(&state, &snapshot, error, sizeof error), 0);
    cr_expect_eq(state.epochs.finished, 2, "unchanged");
    snapshot_free(&snapshot);
    cooperative_state_free(&state);
}

/* Destroying a loop or an accumulator stops tracking it: the next snapshot
 * holds only the objects still alive, in creation order; removing an object
 * that is not tracked (or twice) changes nothing. */
Test(cooperative_state, a_removed_loop_is_no_longer_captured)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256];
    struct data_loop loops[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(data_loop_create(&state.loops, &loops[i], -1, 40, 8, false, 2, error,
                                      sizeof error), 0, "%s", error);
        cr_assert_eq(cooperative_state_add_loop(&state, &loops[i], error, sizeof error), 0,
                     "%s", error);
    }
    cr_assert_eq(state.loop_list.count, 3);
    cooperative_state_remove_loop(&state, &loops[1]);
    cr_expect_eq(state.loop_list.count, 2);
    cr_expect_eq(state.loop_list.items[0], &loops[0]);
    cr_expect_eq(state.loop_list.items[1], &loops[2], "the others keep their order");
    cooperative_state_remove_loop(&state, &loops[1]);
    struct data_loop stranger;
    memset(&stranger, 0, sizeof stranger);
    cooperative_state_remove_loop(&state, &stranger);
    cr_expect_eq(state.loop_list.count, 2, "removing what is not tracked changes nothing");

    struct adaptdl_snapshot snapshot = {0};
    cr_assert_eq(cooperative_state_capture(&state, &snapshot, error, sizeof error), 0, "%s",
                 error);
    cr_assert_eq(snapshot.loop_count, 2);
    cr_expect_str_eq(snapshot.loops[0].name, loops[0].name);
    cr_expect_str_eq(snapshot.loops[1].name, loops[2].name);
    snapshot_free(&snapshot);

    cooperative_state_remove_loop(&state, &loops[0]);
    cooperative_state_remove_loop(&state, &loops[2]);
    cr_expect_eq(state.loop_list.count, 0);
    for (int i = 0; i < 3; i++)
        data_loop_free(&loops[i]);
    cooperative_state_free(&state);
}

Test(cooperative_state, a_removed_accumulator_is_no_longer_captured_or_synchronized)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256];
    struct accumulator kept, removed;
    accumulator_init(&kept, -1, 0);
    accumulator_init(&removed, -1, 1);
    cr_assert_eq(cooperative_state_add_accumulator(&state, &kept, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_add_accumulator(&state, &removed, error, sizeof error), 0);
    cooperative_state_remove_accumulator(&state, &removed);
    cr_expect_eq(state.accumulator_list.count, 1);
    cr_expect_eq(state.accumulator_list.items[0], &kept);
    cooperative_state_remove_accumulator(&state, &removed);
    cr_expect_eq(state.accumulator_list.count, 1, "removing twice changes nothing");

    accumulator_add(&kept, "n", 1, error, sizeof error);
    accumulator_add(&removed, "n", 1, error, sizeof error);
    cr_assert_eq(cooperative_state_synchronize(&state, error, sizeof error), 0, "%s", error);
    cr_expect_eq(kept.results.count, 1);
    cr_expect_eq(removed.results.count, 0, "a removed accumulator is not summed");
    cr_expect_eq(removed.updates.count, 1);

    struct adaptdl_snapshot snapshot = {0};
    cr_assert_eq(cooperative_state_capture(&state, &snapshot, error, sizeof error), 0, "%s",
                 error);
    cr_assert_eq(snapshot.accumulator_count, 1);
    cr_expect_str_eq(snapshot.accumulators[0].name, "adaptdl-accumulator-epochNone-0");
    snapshot_free(&snapshot);
    accumulator_free(&kept);
    accumulator_free(&removed);
    cooperative_state_free(&state);
}

/* Before a checkpoint every replica sums every accumulator's pending
 * updates into its results (AdaptDL's State.sync), so the snapshot carries
 * them; a failing collective is reported and leaves the updates pending. */
struct synchronize_run {
    double loss[3], count[3], other[3];
    size_t pending[3];
    int status[3];
};

static void synchronize_body(unsigned rank, unsigned replicas, void *argument)
{
    struct synchronize_run *run = argument;
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256];
    struct accumulator first, second;
    accumulator_init(&first, -1, 0);
    accumulator_init(&second, -1, 1);
    cooperative_state_add_accumulator(&state, &first, error, sizeof error);
    cooperative_state_add_accumulator(&state, &second, error, sizeof error);
    accumulator_add(&first, "loss", 0.5 * (rank + 1), error, sizeof error);
    accumulator_add(&first, "count", 1, error, sizeof error);
    accumulator_add(&second, "other", 10, error, sizeof error);
    run->status[rank] = cooperative_state_synchronize(&state, error, sizeof error);
    long index = accumulator_dict_find(&first.results, "loss");
    run->loss[rank] = index >= 0 ? first.results.values[index] : -1;
    index = accumulator_dict_find(&first.results, "count");
    run->count[rank] = index >= 0 ? first.results.values[index] : -1;
    index = accumulator_dict_find(&second.results, "other");
    run->other[rank] = index >= 0 ? second.results.values[index] : -1;
    run->pending[rank] = first.updates.count + second.updates.count;
    accumulator_free(&first);
    accumulator_free(&second);
    cooperative_state_free(&state);
}

Test(cooperative_state, synchronize_sums_every_accumulator_over_the_replicas)
{
    struct synchronize_run run;
    memset(&run, 0, sizeof run);
    thread_replicas_run(3, synchronize_body, &run);
    for (unsigned rank = 0; rank < 3; rank++) {
        cr_expect_eq(run.status[rank], 0, "rank %u", rank);
        cr_expect_eq(run.loss[rank], 3.0, "rank %u: 0.5 + 1 + 1.5", rank);
        cr_expect_eq(run.count[rank], 3, "rank %u", rank);
        cr_expect_eq(run.other[rank], 30, "rank %u: the second accumulator too", rank);
        cr_expect_eq(run.pending[rank], 0, "rank %u: the updates are consumed", rank);
    }
}

Test(cooperative_state, synchronize_without_accumulators_does_nothing)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[64] = "untouched";
    cr_expect_eq(cooperative_state_synchronize(&state, error, sizeof error), 0);
    cr_expect_str_eq(error, "untouched");
    cooperative_state_free(&state);
}

static int failing_calls;

static int failing_allgather(void *context, const void *bytes, size_t size,
                             struct replica_gathered *gathered, char *error, size_t error_size)
{
    (void)context;
    (void)bytes;
    (void)size;
    (void)gathered;
    failing_calls++;
    snprintf(error, error_size, "the transport is down");
    return -1;
}

Test(cooperative_state, synchronize_reports_a_failing_collective)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256] = "";
    struct accumulator first, second;
    accumulator_init(&first, -1, 0);
    accumulator_init(&second, -1, 1);
    cooperative_state_add_accumulator(&state, &first, error, sizeof error);
    cooperative_state_add_accumulator(&state, &second, error, sizeof error);
    accumulator_add(&first, "loss", 2, error, sizeof error);
    replica_collective.allgather = failing_allgather;
    cr_expect_eq(cooperative_state_synchronize(&state, error, sizeof error), -1);
    replica_collective_use_single();
    cr_expect_str_eq(error, "the transport is down");
    cr_expect_eq(failing_calls, 1, "the first failure stops it");
    cr_expect_eq(first.results.count, 0);
    cr_expect_eq(first.updates.count, 1, "the updates stay pending");
    cr_expect_eq(cooperative_state_synchronize(&state, error, sizeof error), 0, "%s", error);
    cr_expect_eq(first.results.count, 1, "summed once the collective works");
    accumulator_free(&first);
    accumulator_free(&second);
    cooperative_state_free(&state);
}

/* An iteration may not stay open across epochs: with a data loop being
 * iterated, the next epoch, leaving the epoch loop and beginning one are
 * refused with a one-line message naming the loop, and nothing changes;
 * once the iteration is left, the same calls go through.  (The next epoch
 * used to be entered with the iteration still open.) */
Test(cooperative_state, an_iteration_left_open_across_epochs_is_refused)
{
    struct cooperative_state state;
    cooperative_state_init(&state);
    char error[256] = "";
    struct data_loop loop;
    cr_assert_eq(data_loop_create(&state.loops, &loop, -1, 20, 4, false, 0, error,
                                  sizeof error), 0, "%s", error);
    cr_assert_eq(cooperative_state_add_loop(&state, &loop, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_begin_epochs(&state, 3, error, sizeof error), 0);
    bool skipped;
    uint64_t indices[4];
    cr_assert_eq(data_loop_begin(&state.loops, &loop, 0, 1, 0, &skipped, error, sizeof error),
                 0);
    cr_assert_eq(data_loop_next_batch(&state.loops, &loop, indices, 4, error, sizeof error), 4);

    cr_expect_eq(cooperative_state_next_epoch(&state, error, sizeof error), EPOCH_LOOP_ERROR);
    cr_expect_not_null(strstr(error, "epoch 0 cannot end while adaptdl-dataloader-epochNone-0 "
                                     "is being iterated"), "%s", error);
    cr_expect_null(strchr(error, '\n'), "one line");
    cr_expect_eq(state.epochs.current, 0, "still in epoch 0");
    cr_expect_eq(state.epochs.finished, 0);
    cr_expect_eq(state.loops.current, &loop, "the iteration is still open");
    error[0] = '\0';
    cr_expect_eq(cooperative_state_leave_epochs(&state, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "cannot be left in epoch 0"), "%s", error);
    cr_expect(state.epochs.running);

    data_loop_leave(&state.loops, &loop);
    cr_expect_eq(cooperative_state_next_epoch(&state, error, sizeof error), 1);
    cr_expect_eq(cooperative_state_leave_epochs(&state, error, sizeof error), 0);
    cr_expect_eq(state.epochs.finished, 2);

    /* an iteration outside epochs cannot run into an epoch loop either */
    cr_assert_eq(data_loop_begin(&state.loops, &loop, -1, 1, 0, &skipped, error, sizeof error),
                 0);
    error[0] = '\0';
    cr_expect_eq(cooperative_state_begin_epochs(&state, 3, error, sizeof error),
                 EPOCH_LOOP_ERROR);
    cr_expect_not_null(strstr(error, "an epoch loop cannot begin while"), "%s", error);
    cr_expect(!state.epochs.running);
    data_loop_leave(&state.loops, &loop);
    cr_expect_eq(cooperative_state_begin_epochs(&state, 3, error, sizeof error), 2);
    cr_expect_eq(cooperative_state_next_epoch(&state, error, sizeof error), EPOCH_LOOP_NONE);
    cr_expect_eq(cooperative_state_next_epoch(&state, error, sizeof error), EPOCH_LOOP_NONE,
                 "outside a loop: nothing to end");
    cr_expect_eq(cooperative_state_leave_epochs(&state, error, sizeof error), 0);
    data_loop_free(&loop);
    cooperative_state_free(&state);
}

/* A checkpoint loaded after the epoch loop began would have the finished
 * epochs run again while loops and accumulators took positions and sums of
 * a later epoch: such a late restore applies only the registered state
 * (the trainer's, with the model it loaded), to objects that exist and to
 * those registered later; loops and accumulators, existing or created
 * later, and the epoch count stay as this run has them.  (It used to
 * restore loops and accumulators into the running epoch 0.) */
static void expect_epoch_objects_fresh(const struct process *process)
{
    cr_expect_eq(process->state.epochs.finished, 0, "the epochs are this run's");
    cr_expect_eq(process->state.epochs.current, 0);
    cr_expect_eq(process->state.progress, 0);
    cr_expect_eq(process->loop.current_index, 0, "no saved index of a later epoch");
    cr_expect_eq(data_loop_last_position(&process->loop, -1), -1);
    cr_expect_eq(process->accumulator.results.count, 0, "no sums of a later epoch");
    cr_expect_eq(process->accumulator.history_count, 0);
    cr_expect_eq(process->buffer[0], 1.5, "registered state comes back");
    cr_expect_eq(process->buffer[3], -2);
}

Test(cooperative_state, a_checkpoint_loaded_after_the_epoch_loop_began_restores_registered_state_only)
{
    struct process first, late;
    struct adaptdl_snapshot snapshot;
    first_run(&first, &snapshot);
    process_init(&late);
    char error[256] = "";
    struct registered_state buffer = {.name = "weights", .buffer = late.buffer,
                                      .size = sizeof late.buffer};
    cr_assert_eq(cooperative_state_register(&late.state, &buffer, error, sizeof error), 0);
    process_add_objects(&late);
    cr_assert_eq(cooperative_state_begin_epochs(&late.state, 10, error, sizeof error), 0);
    char log_path[] = "/tmp/adaptshim-test-late-restore-XXXXXX";
    int log_fd = mkstemp(log_path);
    cr_assert_geq(log_fd, 0);
    close(log_fd);
    cr_assert_eq(log_configure(LOG_LEVEL_WARN, log_path, 0, error, sizeof error), 0, "%s",
                 error);
    cr_assert_eq(cooperative_state_restore(&late.state, &snapshot, error, sizeof error), 0,
                 "%s", error);
    log_close();
    expect_epoch_objects_fresh(&late);
    char logged[1024] = "";
    FILE *log_file = fopen(log_path, "r");
    cr_assert_not_null(log_file);
    cr_expect_not_null(fgets(logged, sizeof logged, log_file));
    cr_expect_eq(fgetc(log_file), EOF, "one line");
    fclose(log_file);
    unlink(log_path);
    cr_expect_not_null(strstr(logged, "error: restore: checkpoint (unnamed) was loaded after the "
                                      "epoch loop began (in epoch 0): its 3 finished epochs"),
                       "%s", logged);
    cr_expect_not_null(strstr(logged, "load the checkpoint before "
                                      "adaptdl_remaining_epochs_until"), "%s", logged);
    log_threshold = -1;   /* the later late restores say the same */
    process_free(&late);

    /* objects created after the late restore take nothing either, but
     * state registered after it does */
    process_init(&late);
    cr_assert_eq(cooperative_state_begin_epochs(&late.state, 10, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_restore(&late.state, &snapshot, error, sizeof error), 0,
                 "%s", error);
    buffer.buffer = late.buffer;
    cr_assert_eq(cooperative_state_register(&late.state, &buffer, error, sizeof error), 0);
    process_add_objects(&late);
    expect_epoch_objects_fresh(&late);

    /* the same holds once the epoch loop is over */
    cr_assert_eq(cooperative_state_leave_epochs(&late.state, error, sizeof error), 0);
    cr_assert_eq(cooperative_state_restore(&late.state, &snapshot, error, sizeof error), 0);
    cr_expect_eq(late.state.epochs.finished, 1, "one epoch left early, none restored");
    snapshot_free(&snapshot);
    process_free(&first);
    process_free(&late);
}
