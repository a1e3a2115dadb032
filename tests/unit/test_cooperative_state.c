/* test_cooperative_state.c - the cooperative API's state in bound snapshots
 * (runtime/cooperative_state.h): captured into a snapshot, encoded and
 * decoded as a snapshot file is, and restored into a fresh process's state,
 * objects created before the restore take their state in place, those
 * created after it take it by name at creation; registered buffers and
 * callbacks come back; a buffer of another size is refused with a message;
 * a snapshot of a trainer that never used the API restores nothing. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "cooperative_state.h"

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

static int saved_calls, loaded_calls;
static char loaded[16];

static int save_text(void *context, void **bytes, size_t *size)
{
    saved_calls++;
    *bytes = strdup(context);
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
