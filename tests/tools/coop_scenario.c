/* coop_scenario.c - AdaptDL's own restart scenarios, through the cooperative
 * API under mpirun, with AdaptDL's exact expected values
 * (tests/integration/test_cooperative.c runs it three times: 1, then 4,
 * then 2 replicas, with ADAPTDL_NUM_RESTARTS 0, 1, 2).
 *
 *   coop_scenario accumulator_and_loop CHECKPOINT
 *       accumulator_test and test_dataloader_restarts of AdaptDL, in one
 *       program: the accumulator's updates are summed over the replicas and
 *       its earlier results replayed without communicating; a loop over 100
 *       records with batch size 10 takes 2 batches with 1 replica (local 10),
 *       5 with 4 (local 3) and 2 with 2 (local 5); set, remove and clear of
 *       keys; misuse errors.
 *   coop_scenario epochs CHECKPOINT
 *       epoch_test: 10 epochs, a restart in epoch 5 continues at epoch 5;
 *       a data loop iteration left open is refused at the epoch's end.
 *
 *   coop_scenario late_load CHECKPOINT
 *       a restarted run that begins its epoch loop before loading the
 *       checkpoint: warned, and the late load restores the registered state
 *       only (the harness checks the two log lines).
 *
 *   coop_scenario world CHECKPOINT
 *       under mpirun with no ADAPTDL_* variable: the API's layout is MPI's,
 *       accumulators sum over every rank (one made with initial values
 *       too, with AdaptDL's dictionary rules), a loop shares the records
 *       out.
 *   coop_scenario no_world CHECKPOINT
 *       processes told ADAPTDL_NUM_REPLICAS=2 but each its own MPI world:
 *       accumulator synchronization is refused with a message.
 *
 * A "restart" is a checkpoint (adaptdl_synchronize_states on every rank, then
 * rank 0 writes CHECKPOINT.tmp and renames it onto CHECKPOINT) and exit 0;
 * the next run loads CHECKPOINT first.  Each failed expectation prints
 * "FAIL rank R: ..." and the program exits 1; the end prints "rank R ok". */
#define _GNU_SOURCE
#include <inttypes.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adaptdl.h"

static int rank, size, failures;

static void expect(int condition, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void expect(int condition, const char *format, ...)
{
    if (condition)
        return;
    va_list arguments;
    va_start(arguments, format);
    printf("FAIL rank %d: ", rank);
    vprintf(format, arguments);
    printf("\n");
    va_end(arguments);
    failures++;
}

static void load(const char *checkpoint)
{
    FILE *file = fopen(checkpoint, "rb");
    if (file == NULL)
        return;
    char text[64] = "";
    expect(fread(text, 1, sizeof text - 1, file) > 0, "checkpoint %s is empty", checkpoint);
    fclose(file);
}

/* Checkpoints and leaves: the harness starts the next run. */
static void restart(const char *checkpoint, unsigned next_replicas)
{
    expect(adaptdl_synchronize_states() == 0, "synchronize_states: %s", adaptdl_last_error());
    if (rank == 0) {
        char temp[4096];
        snprintf(temp, sizeof temp, "%s.tmp", checkpoint);
        FILE *file = fopen(temp, "wb");
        fprintf(file, "restart %u for %u replicas\n", adaptdl_num_restarts(), next_replicas);
        fclose(file);
        rename(temp, checkpoint);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d restart with %u replicas\n", rank, next_replicas);
    MPI_Finalize();
    exit(failures ? 1 : 0);
}

static double value_of(adaptdl_accumulator *accumulator, const char *key)
{
    double value = -12345;
    expect(adaptdl_accumulator_get(accumulator, key, &value), "no key %s", key);
    return value;
}

static void accumulator_and_loop(const char *checkpoint)
{
    unsigned restarts = adaptdl_num_restarts();
    adaptdl_accumulator *accumulator = adaptdl_accumulator_create();
    adaptdl_loop *loop = adaptdl_loop_create(100, 10, true);
    expect(accumulator != NULL && loop != NULL, "create: %s", adaptdl_last_error());

    /* accumulator_test */
    if (restarts == 0)
        adaptdl_accumulator_add(accumulator, "a", 15);
    expect(adaptdl_accumulator_size(accumulator) == 0, "accumulation mode reads as empty");
    adaptdl_accumulator_synchronize(accumulator);
    expect(value_of(accumulator, "a") == 15, "a == 15 (restart %u)", restarts);
    adaptdl_accumulator_desynchronize(accumulator);
    if (restarts == 0)
        adaptdl_accumulator_subtract(accumulator, "a", 5);
    if (restarts >= 1) {
        if (restarts == 1) {
            adaptdl_accumulator_add(accumulator, "a", rank);
            adaptdl_accumulator_add(accumulator, "b", rank);
        }
        expect(adaptdl_accumulator_size(accumulator) == 0, "accumulation mode reads as empty");
        adaptdl_accumulator_synchronize(accumulator);
        expect(adaptdl_accumulator_size(accumulator) == 2, "two keys, not %zu",
               adaptdl_accumulator_size(accumulator));
        expect(value_of(accumulator, "a") == 16, "a == 16 (restart %u)", restarts);
        expect(value_of(accumulator, "b") == 6, "b == 6 (restart %u)", restarts);
        adaptdl_accumulator_desynchronize(accumulator);
    }
    if (restarts == 2) {
        adaptdl_accumulator_subtract(accumulator, "b", 5);
        adaptdl_accumulator_subtract(accumulator, "c", 5);
        adaptdl_accumulator_synchronize(accumulator);
        expect(value_of(accumulator, "a") == 16, "a == 16");
        expect(value_of(accumulator, "b") == -4, "b == -4");
        expect(value_of(accumulator, "c") == -10, "c == -10");
        expect(adaptdl_accumulator_set(accumulator, "c", 7) == 0 &&
                   value_of(accumulator, "c") == 7,
               "set c = 7: %s", adaptdl_last_error());
        expect(adaptdl_accumulator_remove(accumulator, "c") == 0 &&
                   adaptdl_accumulator_size(accumulator) == 2,
               "remove c: %s", adaptdl_last_error());
        expect(adaptdl_accumulator_remove(accumulator, "c") == -1 &&
                   adaptdl_last_error()[0] != '\0',
               "removing an absent key fails with a message");
        adaptdl_accumulator_clear(accumulator);
        adaptdl_accumulator_desynchronize(accumulator);
        adaptdl_accumulator_synchronize(accumulator);
        expect(adaptdl_accumulator_size(accumulator) == 0, "cleared");
        adaptdl_accumulator_desynchronize(accumulator);
        expect(adaptdl_accumulator_set(accumulator, "a", 1) == -1 &&
                   adaptdl_accumulator_size(accumulator) == 0,
               "no set in accumulation mode");
    }
    expect(adaptdl_accumulator_add(NULL, "a", 1) == -1 &&
               strstr(adaptdl_last_error(), "no accumulator"),
           "a call on no accumulator fails with a message");
    expect(adaptdl_accumulator_clear(NULL) == -1 && adaptdl_accumulator_synchronize(NULL) == -1,
           "clear and synchronize of no accumulator fail");

    /* test_dataloader_restarts */
    uint64_t indices[16];
    long idx = -1, count;
    unsigned expected_local = (10 + size - 1) / size;
    expect(adaptdl_loop_begin(loop) == 1, "begin: %s", adaptdl_last_error());
    expect(adaptdl_loop_begin(loop) == -1 && strstr(adaptdl_last_error(), "overlapping"),
           "a second begin is an overlapping iteration");
    expect(adaptdl_accumulator_create() == NULL &&
               strstr(adaptdl_last_error(), "may not be created"),
           "no accumulator inside an iteration");
    expect(adaptdl_loop_create(5, 1, false) == NULL, "no loop inside an iteration");
    while ((count = adaptdl_loop_next(loop, indices, 16)) > 0) {
        idx++;
        if (restarts == 0 && idx == 2)
            restart(checkpoint, 4);
        if (restarts == 1 && idx == 5)
            restart(checkpoint, 2);
        expect(count == (long)expected_local, "batch %ld: %ld records, expected %u", idx, count,
               expected_local);
        expect(adaptdl_loop_local_batch_size(loop) == expected_local, "local batch size");
        expect(adaptdl_loop_global_batch_size(loop) == expected_local * (unsigned)size,
               "global batch size");
    }
    expect(count == 0, "the loop ended: %s", adaptdl_last_error());
    expect(idx == 1, "the last run takes 2 batches, idx == %ld", idx);
    adaptdl_loop_destroy(loop);
    adaptdl_accumulator_destroy(accumulator);
}

/* An iteration may not stay open across epochs: with one open, the next
 * epoch and leaving the epoch loop fail and change nothing. */
static void iteration_left_open(adaptdl_loop *probe, int64_t epoch)
{
    uint64_t indices[4];
    expect(adaptdl_loop_begin(probe) == 1, "probe begin: %s", adaptdl_last_error());
    expect(adaptdl_loop_next(probe, indices, 4) > 0, "probe batch: %s", adaptdl_last_error());
    expect(adaptdl_next_epoch() == ADAPTDL_ERROR &&
               strstr(adaptdl_last_error(), "may not stay open across epochs"),
           "the next epoch with an open iteration is refused: %s", adaptdl_last_error());
    expect(adaptdl_leave_epoch_loop() == -1, "leaving with an open iteration is refused");
    expect(adaptdl_current_epoch() == epoch, "still in epoch %" PRId64, epoch);
    adaptdl_loop_break(probe);
}

static void epochs(const char *checkpoint)
{
    unsigned restarts = adaptdl_num_restarts();
    expect(adaptdl_current_epoch() == ADAPTDL_NONE, "no epoch before the loop");
    int64_t first = restarts == 0 ? 0 : 5;
    expect(adaptdl_finished_epochs() == first, "finished %" PRId64 ", expected %" PRId64,
           adaptdl_finished_epochs(), first);
    int64_t expected = first;
    adaptdl_loop *probe = adaptdl_loop_create(8, 2, false);
    expect(probe != NULL, "create: %s", adaptdl_last_error());
    for (int64_t epoch = adaptdl_remaining_epochs_until(10); epoch >= 0;
         epoch = adaptdl_next_epoch()) {
        expect(epoch == expected, "epoch %" PRId64 ", expected %" PRId64, epoch, expected);
        expect(adaptdl_current_epoch() == epoch, "current epoch");
        expect(adaptdl_finished_epochs() == epoch, "finished == current");
        expect(adaptdl_remaining_epochs_until(10) == ADAPTDL_ERROR &&
                   strstr(adaptdl_last_error(), "overlapping"),
               "overlapping epoch loops are refused");
        if (restarts == 0 && epoch == 5)
            restart(checkpoint, 5);
        iteration_left_open(probe, epoch);
        expected++;
    }
    adaptdl_loop_destroy(probe);
    expect(expected == 10, "ran up to epoch %" PRId64, expected - 1);
    expect(adaptdl_current_epoch() == ADAPTDL_NONE, "no epoch after the loop");
}

/* AdaptDL's Accumulator(initial_dict) and its dictionary rules: initial
 * values are the results the replicas' updates are summed into; in
 * synchronized mode a missing key cannot be added to, and get leaves the
 * value alone; outside it a value cannot be set. */
static void initial_values(void)
{
    const char *keys[] = {"best", "count"};
    const double values[] = {10, 0};
    adaptdl_accumulator *initial = adaptdl_accumulator_create_with_values(keys, values, 2);
    expect(initial != NULL, "create with values: %s", adaptdl_last_error());
    expect(adaptdl_accumulator_create_with_values(NULL, values, 2) == NULL &&
               strstr(adaptdl_last_error(), "no keys"),
           "values without keys are refused: %s", adaptdl_last_error());
    expect(adaptdl_accumulator_size(initial) == 0, "accumulation mode reads as empty");
    expect(adaptdl_accumulator_set(initial, "best", 1) == -1, "no set in accumulation mode");
    adaptdl_accumulator_add(initial, "count", 1);
    expect(adaptdl_accumulator_synchronize(initial) == 0, "synchronize: %s",
           adaptdl_last_error());
    expect(value_of(initial, "best") == 10, "the initial value stays");
    expect(value_of(initial, "count") == size, "count summed to %g", value_of(initial, "count"));
    expect(adaptdl_accumulator_add(initial, "missing", 1) == -1 &&
               strstr(adaptdl_last_error(), "no key \"missing\""),
           "adding to a missing key when synchronized is refused: %s", adaptdl_last_error());
    double untouched = -3;
    expect(!adaptdl_accumulator_get(initial, "missing", &untouched) && untouched == -3,
           "get of a missing key is false and leaves the value");
    adaptdl_accumulator_desynchronize(initial);
    adaptdl_accumulator_destroy(initial);
}

/* The API answers as MPI's world (run without ADAPTDL_* variables under
 * mpirun): its replica count and rank are MPI's, an accumulator sums over
 * every rank, and a loop over 100 records in global batches of 10 hands
 * each rank its share, all records once between them. */
static void world(void)
{
    expect(adaptdl_replica_rank() == (unsigned)rank, "the API says rank %u, MPI %d",
           adaptdl_replica_rank(), rank);
    adaptdl_accumulator *sums = adaptdl_accumulator_create();
    adaptdl_loop *loop = adaptdl_loop_create(100, 10, true);
    expect(sums != NULL && loop != NULL, "create: %s", adaptdl_last_error());
    uint64_t indices[16];
    long count, records = 0;
    expect(adaptdl_loop_begin(loop) == 1, "begin: %s", adaptdl_last_error());
    while ((count = adaptdl_loop_next(loop, indices, 16)) > 0) {
        records += count;
        for (long i = 0; i < count; i++)
            expect(indices[i] < 100, "index %" PRIu64, indices[i]);
    }
    expect(count == 0, "the loop ended: %s", adaptdl_last_error());
    long share = (100 + size - 1) / size;
    expect(records == share, "this rank got %ld records, its share is %ld", records, share);
    adaptdl_accumulator_add(sums, "ranks", rank + 1);
    adaptdl_accumulator_add(sums, "records", (double)records);
    expect(adaptdl_accumulator_synchronize(sums) == 0, "synchronize: %s", adaptdl_last_error());
    expect(value_of(sums, "ranks") == size * (size + 1) / 2, "ranks summed to %g",
           value_of(sums, "ranks"));
    expect(value_of(sums, "records") == share * size, "records summed to %g",
           value_of(sums, "records"));
    adaptdl_accumulator_desynchronize(sums);
    expect(adaptdl_loop_current_index(loop) == 0, "no current index outside the iteration");
    initial_values();
    adaptdl_loop_destroy(loop);
    adaptdl_accumulator_destroy(sums);
}

/* Processes told they are replicas (ADAPTDL_NUM_REPLICAS) but started
 * without a shared MPI world (each its own singleton): a synchronization
 * is refused with a message rather than summed over this process alone. */
static void no_world(void)
{
    adaptdl_accumulator *sums = adaptdl_accumulator_create();
    expect(sums != NULL, "create: %s", adaptdl_last_error());
    adaptdl_accumulator_add(sums, "n", adaptdl_replica_rank() + 1);
    expect(adaptdl_accumulator_synchronize(sums) == -1, "synchronize with no world succeeded");
    expect(strstr(adaptdl_last_error(), "reaches 1") != NULL, "the message: %s",
           adaptdl_last_error());
    expect(adaptdl_accumulator_size(sums) == 0, "nothing summed");
    expect(adaptdl_synchronize_states() == -1, "synchronize_states with no world succeeded");
    printf("replica %u of %u refused: %s\n", adaptdl_replica_rank(), adaptdl_num_replicas(),
           adaptdl_last_error());
    adaptdl_accumulator_destroy(sums);
}

/* A restarted trainer that reads its checkpoint only after the epoch loop
 * began: the first run registers a value, finishes epoch 0 and
 * checkpoints in epoch 1; the second begins the epoch loop without the
 * checkpoint (warned: it starts at epoch 0), then loads it inside epoch 0
 * (an error line: only the registered value comes back, the epochs stay
 * this run's). */
static void late_load(const char *checkpoint)
{
    static double registered;
    expect(adaptdl_register_buffer("late-value", &registered, sizeof registered) == 0,
           "register: %s", adaptdl_last_error());
    unsigned restarts = adaptdl_num_restarts();
    int64_t epoch = adaptdl_remaining_epochs_until(3);
    expect(epoch == 0, "the epoch loop starts at 0, not %" PRId64, epoch);
    if (restarts == 0) {
        registered = 42;
        expect(adaptdl_next_epoch() == 1, "epoch 1");
        restart(checkpoint, 1);
    }
    load(checkpoint);
    expect(registered == 42, "the registered value comes back with the late load, not %g",
           registered);
    expect(adaptdl_current_epoch() == 0 && adaptdl_finished_epochs() == 0,
           "a late load leaves the epochs as they are: current %" PRId64 ", finished %" PRId64,
           adaptdl_current_epoch(), adaptdl_finished_epochs());
    expect(adaptdl_leave_epoch_loop() == 0, "leave: %s", adaptdl_last_error());
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 3) {
        fprintf(stderr, "usage: coop_scenario accumulator_and_loop|epochs|late_load|world|"
                        "no_world CHECKPOINT\n");
        return 2;
    }
    if (strcmp(argv[1], "no_world") != 0)
        expect(adaptdl_num_replicas() == (unsigned)size, "the API says %u replicas, MPI %d",
               adaptdl_num_replicas(), size);
    if (strcmp(argv[1], "late_load") != 0)
        load(argv[2]);
    if (strcmp(argv[1], "late_load") == 0)
        late_load(argv[2]);
    else if (strcmp(argv[1], "world") == 0)
        world();
    else if (strcmp(argv[1], "no_world") == 0)
        no_world();
    else if (strcmp(argv[1], "accumulator_and_loop") == 0)
        accumulator_and_loop(argv[2]);
    else if (strcmp(argv[1], "epochs") == 0)
        epochs(argv[2]);
    else
        expect(0, "unknown scenario %s", argv[1]);
    printf("rank %d %s\n", rank, failures ? "failed" : "ok");
    MPI_Finalize();
    return failures ? 1 : 0;
}
