/* test_data_loop.c - loops with AdaptiveDataLoaderHelper semantics
 * (runtime/data_loop.h).
 *
 * AdaptDL's test_dataloader_restarts with its values: 100 records, batch
 * size 10; two batches with one replica (local 10), a checkpoint with the
 * third in hand, five batches with four replicas (local 3, global 12), a
 * checkpoint with the sixth in hand, then two batches with two replicas
 * (local 5), and every record handed out in a counted batch exactly once.
 * Also: skipdone after a restart in the second loop of an epoch, AdaptDL's
 * names, overlapping iterations and creation inside an iteration refused,
 * ElasticSampler's padding, and adaptation ending by progress. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "data_loop.h"

#define RECORDS 100
#define BATCH 10

struct saved_loop {
    uint64_t current_index, end_index;
    struct data_loop_position positions[8];
    size_t position_count;
};

static void save(const struct data_loop *loop, struct saved_loop *saved)
{
    saved->current_index = loop->current_index;
    saved->end_index = loop->end_index;
    saved->position_count = loop->position_count;
    /* a loop with no finished position yet may have no array at all */
    if (loop->position_count > 0)
        memcpy(saved->positions, loop->last_positions,
               loop->position_count * sizeof *loop->last_positions);
}

static void restore(struct data_loop *loop, const struct saved_loop *saved)
{
    cr_assert_eq(data_loop_set_saved(loop, saved->current_index, saved->end_index,
                                     saved->positions, saved->position_count), 0);
}

/* One run of `replicas` replicas (rank by rank: the loop needs no
 * communication without adaptation) from `saved`; each takes batches until
 * it holds batch `stop_at` (then "checkpoints") or the loop ends.  Counts
 * the records of counted batches into seen[].  Returns the batches taken by
 * rank 0 and the saved state. */
static unsigned run_replicas(unsigned replicas, const struct saved_loop *saved, long stop_at,
                             unsigned *seen, struct saved_loop *after, long *local_batch)
{
    unsigned taken = 0;
    for (unsigned rank = 0; rank < replicas; rank++) {
        struct data_loop_registry registry;
        data_loop_registry_init(&registry);
        struct data_loop loop;
        char error[256];
        cr_assert_eq(data_loop_create(&registry, &loop, -1, RECORDS, BATCH, true, 7, error,
                                      sizeof error), 0, "%s", error);
        if (saved != NULL)
            restore(&loop, saved);
        bool skipped;
        cr_assert_eq(data_loop_begin(&registry, &loop, 0, replicas, rank, &skipped, error,
                                     sizeof error), 0, "%s", error);
        cr_assert(!skipped);
        uint64_t indices[BATCH], in_hand[BATCH];
        long in_hand_count = 0, batches = 0, count;
        while ((count = data_loop_next_batch(&registry, &loop, indices, BATCH, error,
                                             sizeof error)) > 0) {
            for (long i = 0; i < in_hand_count; i++)   /* the batch before was counted */
                seen[in_hand[i]]++;
            memcpy(in_hand, indices, (size_t)count * sizeof *indices);
            in_hand_count = count;
            *local_batch = (long)loop.local_batch;
            if (batches == stop_at) {
                in_hand_count = 0;   /* never trained: the checkpoint does not count it */
                break;
            }
            batches++;
        }
        cr_assert_geq(count, 0, "%s", error);
        for (long i = 0; i < in_hand_count; i++)
            seen[in_hand[i]]++;
        if (rank == 0) {
            taken = (unsigned)batches;
            save(&loop, after);
        }
        data_loop_free(&loop);
        data_loop_registry_free(&registry);
    }
    return taken;
}

Test(data_loop, adaptdl_restarts_one_then_four_then_two_replicas)
{
    unsigned seen[RECORDS] = {0};
    struct saved_loop first, second, third;
    long local;
    cr_expect_eq(run_replicas(1, NULL, 2, seen, &first, &local), 2);
    cr_expect_eq(local, 10);
    cr_expect_eq(first.current_index, 20, "two batches of 10 done");
    cr_expect_eq(run_replicas(4, &first, 5, seen, &second, &local), 5);
    cr_expect_eq(local, 3, "ceil(10 / 4)");
    cr_expect_eq(second.current_index, 80, "20 + 5 batches of 12");
    cr_expect_eq(run_replicas(2, &second, -1, seen, &third, &local), 2, "idx == 1 at the end");
    cr_expect_eq(local, 5);
    cr_expect_eq(third.current_index, 0, "the iteration ended");
    for (unsigned id = 0; id < RECORDS; id++)
        cr_expect_eq(seen[id], 1, "record %u handed out %u times", id, seen[id]);
}

Test(data_loop, adaptdl_names_and_misuse)
{
    struct data_loop_registry registry;
    data_loop_registry_init(&registry);
    struct data_loop a, b, c;
    char error[256] = "";
    cr_assert_eq(data_loop_create(&registry, &a, -1, 10, 2, false, 0, error, sizeof error), 0);
    cr_assert_eq(data_loop_create(&registry, &b, -1, 10, 2, false, 0, error, sizeof error), 0);
    cr_expect_str_eq(a.name, "adaptdl-dataloader-epochNone-0");
    cr_expect_str_eq(b.name, "adaptdl-dataloader-epochNone-1");
    bool skipped;
    cr_assert_eq(data_loop_begin(&registry, &a, 0, 1, 0, &skipped, error, sizeof error), 0);
    cr_expect_eq(data_loop_begin(&registry, &b, 0, 1, 0, &skipped, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "overlapping"), "%s", error);
    cr_expect_eq(data_loop_create(&registry, &c, 0, 10, 2, false, 0, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "may not be created"), "%s", error);
    data_loop_leave(&registry, &a);
    cr_expect_null(registry.current);
    cr_expect_eq(data_loop_last_position(&a, 0), 0);
    cr_assert_eq(data_loop_create(&registry, &c, 2, 10, 2, false, 0, error, sizeof error), 0);
    cr_expect_str_eq(c.name, "adaptdl-dataloader-epoch2-0");
    uint64_t indices[2];
    cr_expect_eq(data_loop_next_batch(&registry, &c, indices, 2, error, sizeof error), -1,
                 "not iterated");
    data_loop_free(&a);
    data_loop_free(&b);
    data_loop_free(&c);
    data_loop_registry_free(&registry);
}

/* A job with a train loop (shuffled) and a validation loop (in order) of
 * batches of 10 in one registry, and what the tests pass to and get from
 * the loops. */
struct train_and_valid {
    struct data_loop_registry registry;
    struct data_loop train, valid;
    char error[256];
    uint64_t indices[10];
    bool skipped;
};

static void train_and_valid_create(struct train_and_valid *job, uint64_t train_records,
                                   uint64_t valid_records)
{
    data_loop_registry_init(&job->registry);
    data_loop_create(&job->registry, &job->train, -1, train_records, 10, true, 1, job->error,
                     sizeof job->error);
    data_loop_create(&job->registry, &job->valid, -1, valid_records, 10, false, 1, job->error,
                     sizeof job->error);
}

static void train_and_valid_free(struct train_and_valid *job)
{
    data_loop_free(&job->train);
    data_loop_free(&job->valid);
    data_loop_registry_free(&job->registry);
}

/* Begins an iteration of loop in epoch on the job's one replica (skipped
 * or not: job->skipped). */
static int train_and_valid_begin(struct train_and_valid *job, struct data_loop *loop,
                                 int64_t epoch)
{
    return data_loop_begin(&job->registry, loop, epoch, 1, 0, &job->skipped, job->error,
                           sizeof job->error);
}

/* The next batch of loop into job->indices: its size, 0 at the end. */
static long train_and_valid_next_batch(struct train_and_valid *job, struct data_loop *loop)
{
    return data_loop_next_batch(&job->registry, loop, job->indices, 10, job->error,
                                sizeof job->error);
}

/* A restart: saves both loops as a checkpoint does, frees them and their
 * registry, and makes them again in a fresh registry, restored from what
 * was saved.  Returns the validation loop's saved current index. */
static uint64_t train_and_valid_restart(struct train_and_valid *job, uint64_t train_records,
                                        uint64_t valid_records)
{
    struct saved_loop saved_train, saved_valid;
    save(&job->train, &saved_train);
    save(&job->valid, &saved_valid);
    train_and_valid_free(job);
    train_and_valid_create(job, train_records, valid_records);
    restore(&job->train, &saved_train);
    restore(&job->valid, &saved_valid);
    return saved_valid.current_index;
}

/* A train and a validation loop per epoch; a restart in the middle of the
 * validation loop of epoch 0 skips the train loop's finished position and
 * continues the validation loop at its index. */
Test(data_loop, skipdone_after_a_restart_in_the_second_loop_of_an_epoch)
{
    struct train_and_valid job;
    train_and_valid_create(&job, 30, 20);
    cr_assert_eq(train_and_valid_begin(&job, &job.train, 0), 0);
    unsigned train_batches = 0;
    while (train_and_valid_next_batch(&job, &job.train) > 0)
        train_batches++;
    cr_expect_eq(train_batches, 3);
    cr_assert_eq(train_and_valid_begin(&job, &job.valid, 0), 0);
    train_and_valid_next_batch(&job, &job.valid);
    train_and_valid_next_batch(&job, &job.valid);
    /* checkpoint with the second batch in hand */
    cr_expect_eq(train_and_valid_restart(&job, 30, 20), 10);
    cr_assert_eq(train_and_valid_begin(&job, &job.train, 0), 0);
    cr_expect(job.skipped, "the train loop finished position 0 of epoch 0");
    cr_expect_eq(train_and_valid_next_batch(&job, &job.train), 0);
    cr_assert_eq(train_and_valid_begin(&job, &job.valid, 0), 0);
    cr_expect(!job.skipped);
    cr_expect_eq(train_and_valid_next_batch(&job, &job.valid), 10);
    cr_expect_eq(job.indices[0], 10, "continues at index 10 (shuffle off)");
    cr_expect_eq(train_and_valid_next_batch(&job, &job.valid), 0);
    cr_assert_eq(train_and_valid_begin(&job, &job.train, 1), 0);
    cr_expect(!job.skipped, "epoch 1 runs");
    data_loop_leave(&job.registry, &job.train);
    train_and_valid_free(&job);
}

/* A checkpoint after both loops of epoch 0 finished: after the restart
 * both are skipped.  Each skipped iteration takes one position, as
 * AdaptDL's context does, so the second loop finds its own finished
 * position; and a skipped iteration is over at once, so the next loop may
 * begin without a batch request in between. */
Test(data_loop, every_loop_finished_before_the_restart_is_skipped)
{
    struct train_and_valid job;
    train_and_valid_create(&job, 20, 20);
    struct data_loop *loops[] = {&job.train, &job.valid};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(train_and_valid_begin(&job, loops[i], 0), 0, "%s", job.error);
        while (train_and_valid_next_batch(&job, loops[i]) > 0)
            continue;
    }
    train_and_valid_restart(&job, 20, 20);
    cr_assert_eq(train_and_valid_begin(&job, &job.train, 0), 0, "%s", job.error);
    cr_expect(job.skipped, "the train loop finished position 0 of epoch 0");
    /* no batch request: the skipped iteration is already over */
    cr_assert_eq(train_and_valid_begin(&job, &job.valid, 0), 0, "%s", job.error);
    cr_expect(job.skipped, "the validation loop finished position 1 of epoch 0");
    cr_expect_eq(train_and_valid_next_batch(&job, &job.valid), 0,
                 "a skipped iteration hands out nothing");
    cr_expect_eq(train_and_valid_next_batch(&job, &job.train), 0);
    cr_assert_eq(train_and_valid_begin(&job, &job.train, 1), 0, "%s", job.error);
    cr_expect(!job.skipped, "epoch 1 runs");
    cr_expect_eq(train_and_valid_next_batch(&job, &job.train), 10);
    data_loop_leave(&job.registry, &job.train);
    train_and_valid_free(&job);
}

/* 10 records over 3 replicas: ceil(10/3) = 4 each; rank 1 and 2 are short
 * by one and pad with permutation[rank], as ElasticSampler does. */
Test(data_loop, short_replicas_pad_with_their_rank_s_record)
{
    for (unsigned rank = 0; rank < 3; rank++) {
        struct data_loop_registry registry;
        data_loop_registry_init(&registry);
        struct data_loop loop;
        char error[256];
        bool skipped;
        data_loop_create(&registry, &loop, -1, 10, 12, false, 0, error, sizeof error);
        cr_assert_eq(data_loop_begin(&registry, &loop, 0, 3, rank, &skipped, error,
                                     sizeof error), 0);
        uint64_t indices[4];
        cr_assert_eq(data_loop_next_batch(&registry, &loop, indices, 4, error, sizeof error), 4);
        for (unsigned j = 0; j < 3; j++)
            cr_expect_eq(indices[j], rank + 3 * j);
        cr_expect_eq(indices[3], rank == 0 ? 9 : rank, "rank %u", rank);
        cr_expect_eq(data_loop_next_batch(&registry, &loop, indices, 4, error, sizeof error), 0);
        data_loop_free(&loop);
        data_loop_registry_free(&registry);
    }
}

static double fixed_progress;
static double progress_source(void *context)
{
    (void)context;
    return fixed_progress;
}

/* With adaptation the iteration ends by statistical progress: N (e+1) / B,
 * even in the middle of a sweep, or sweeps again with a new permutation. */
Test(data_loop, adaptation_ends_the_iteration_by_progress)
{
    struct data_loop_registry registry;
    data_loop_registry_init(&registry);
    registry.progress = progress_source;
    struct data_loop loop;
    char error[256];
    bool skipped;
    data_loop_create(&registry, &loop, -1, 20, 5, true, 3, error, sizeof error);
    cr_assert_eq(data_loop_autoscale(&loop, 40, error, sizeof error), 0);
    cr_expect_eq(data_loop_autoscale(&loop, 4, error, sizeof error), -1);
    fixed_progress = 0;
    cr_assert_eq(data_loop_begin(&registry, &loop, 0, 1, 0, &skipped, error, sizeof error), 0);
    uint64_t indices[5];
    unsigned batches = 0;
    while (batches < 6 &&
           data_loop_next_batch(&registry, &loop, indices, 5, error, sizeof error) > 0)
        batches++;
    cr_expect_eq(batches, 6, "a second sweep began: progress 0 is not enough");
    cr_expect_eq(loop.current_index, 25);
    fixed_progress = 4.0;   /* 20 * (0 + 1) / 5 */
    cr_expect_eq(data_loop_next_batch(&registry, &loop, indices, 5, error, sizeof error), 0);
    cr_expect_null(registry.current);
    data_loop_free(&loop);
    data_loop_registry_free(&registry);
}

/* The per-epoch counters that name loops and accumulators (AdaptDL's
 * count per epoch): each epoch counts on its own from 0, -1 (outside any
 * epoch loop) is an epoch like the others, an epoch never taken reads 0,
 * and freeing leaves counters that read 0 and can count again. */
Test(data_loop, epoch_counters_count_each_epoch_from_zero)
{
    struct epoch_counters counters;
    memset(&counters, 0, sizeof counters);
    cr_expect_eq(epoch_counters_get(&counters, 0), 0, "nothing taken yet");
    cr_expect_eq(epoch_counters_get(&counters, -1), 0);
    uint64_t before = 99;
    cr_assert_eq(epoch_counters_take(&counters, 3, &before), 0);
    cr_expect_eq(before, 0);
    cr_assert_eq(epoch_counters_take(&counters, 3, &before), 0);
    cr_expect_eq(before, 1, "the count before this take");
    cr_assert_eq(epoch_counters_take(&counters, -1, &before), 0);
    cr_expect_eq(before, 0, "another epoch counts on its own");
    cr_assert_eq(epoch_counters_take(&counters, 3, &before), 0);
    cr_expect_eq(before, 2);
    cr_expect_eq(epoch_counters_get(&counters, 3), 3);
    cr_expect_eq(epoch_counters_get(&counters, -1), 1);
    cr_expect_eq(epoch_counters_get(&counters, 4), 0);
    cr_expect_eq(epoch_counters_get(&counters, INT64_MIN), 0);
    cr_expect_eq(counters.count, 2, "one entry per epoch");

    for (int64_t epoch = 100; epoch < 150; epoch++)
        cr_assert_eq(epoch_counters_take(&counters, epoch, &before), 0);
    cr_expect_eq(counters.count, 52);
    cr_expect_eq(epoch_counters_get(&counters, 3), 3, "earlier epochs survive growing");
    cr_expect_eq(epoch_counters_get(&counters, 149), 1);

    epoch_counters_free(&counters);
    cr_expect_null(counters.entries);
    cr_expect_eq(counters.count, 0);
    cr_expect_eq(epoch_counters_get(&counters, 3), 0, "freed counters read 0");
    cr_assert_eq(epoch_counters_take(&counters, 3, &before), 0);
    cr_expect_eq(before, 0, "and count again from 0");
    epoch_counters_free(&counters);
    epoch_counters_free(&counters);
    cr_expect_eq(counters.count, 0, "freeing twice is harmless");
}

/* The registry's counters are the ones that name its loops. */
Test(data_loop, the_registry_s_loop_counter_names_its_loops)
{
    struct data_loop_registry registry;
    data_loop_registry_init(&registry);
    char error[256];
    struct data_loop first, second;
    cr_assert_eq(data_loop_create(&registry, &first, 2, 10, 2, false, 1, error, sizeof error),
                 0, "%s", error);
    cr_expect_eq(epoch_counters_get(&registry.loops_created, 2), 1);
    uint64_t before;
    cr_assert_eq(epoch_counters_take(&registry.loops_created, 2, &before), 0);
    cr_expect_eq(before, 1);
    cr_assert_eq(data_loop_create(&registry, &second, 2, 10, 2, false, 1, error, sizeof error),
                 0, "%s", error);
    cr_expect_eq(epoch_counters_get(&registry.loops_created, 2), 3);
    cr_expect_str_eq(first.name, "adaptdl-dataloader-epoch2-0");
    cr_expect_str_eq(second.name, "adaptdl-dataloader-epoch2-2", "count 1 was taken above");
    data_loop_free(&first);
    data_loop_free(&second);
    data_loop_registry_free(&registry);
}
