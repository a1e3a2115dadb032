/* test_accumulator.c - AdaptDL's Accumulator (runtime/accumulator.h).
 *
 * The scenario of AdaptDL's accumulator_test, with the very same values:
 * one replica adds 15, synchronizes (15), subtracts 5 and checkpoints; four
 * replicas restart, replay the first synchronization without communicating
 * (15), add their rank to "a" and "b" and synchronize (16, 6); two replicas
 * restart, replay both (15; 16 and 6), subtract 5 from "b" and "c" and
 * synchronize (16, -4, -10), clear, and synchronize again (empty).  Replicas
 * are threads joined by an in-process all-gather; a restart is a fresh
 * accumulator restored from the saved results and history, as a snapshot
 * restore does.  Also: accumulation mode reads as an empty dictionary,
 * results inside a loop are not kept for replay, finished epochs' history
 * is dropped, and misuse gets a message. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accumulator.h"
#include "replica_collective.h"
#include "thread_replicas.h"

#define MAX_REPLICAS 4

/* What a checkpoint keeps of an accumulator. */
struct saved_accumulator {
    struct accumulator_dict results;
    struct accumulator_results history[8];
    size_t history_count;
};

static void save(const struct accumulator *accumulator, struct saved_accumulator *saved)
{
    cr_assert_eq(accumulator_dict_copy(&saved->results, &accumulator->results), 0);
    saved->history_count = accumulator->history_count;
    for (size_t i = 0; i < accumulator->history_count; i++) {
        saved->history[i].epoch = accumulator->history[i].epoch;
        cr_assert_eq(accumulator_dict_copy(&saved->history[i].values,
                                           &accumulator->history[i].values), 0);
    }
}

static void saved_free(struct saved_accumulator *saved)
{
    accumulator_dict_free(&saved->results);
    for (size_t i = 0; i < saved->history_count; i++)
        accumulator_dict_free(&saved->history[i].values);
    saved->history_count = 0;
}

static double value_or_nan(const struct accumulator *accumulator, const char *key)
{
    double value;
    return accumulator_get(accumulator, key, &value) ? value : -999999.0;
}

struct run {
    struct saved_accumulator *restore_from;   /* NULL: a fresh start */
    struct saved_accumulator saved;           /* rank 0's state at the end */
    unsigned run_index;
    /* observations per rank */
    double first_a[MAX_REPLICAS];
    size_t first_size_outside[MAX_REPLICAS];
    double second_a[MAX_REPLICAS], second_b[MAX_REPLICAS];
    size_t second_size[MAX_REPLICAS];
    double third_a[MAX_REPLICAS], third_b[MAX_REPLICAS], third_c[MAX_REPLICAS];
    size_t last_size[MAX_REPLICAS];
    int failures[MAX_REPLICAS];
};

static void replica_body(unsigned rank, unsigned replicas, void *argument)
{
    struct run *run = argument;
    char error[256];
    struct accumulator accumulator;
    accumulator_init(&accumulator, -1, 0);
    if (run->restore_from != NULL &&
        accumulator_restore(&accumulator, &run->restore_from->results,
                            run->restore_from->history, run->restore_from->history_count) != 0)
        run->failures[rank]++;
    if (run->run_index == 0)
        run->failures[rank] += accumulator_add(&accumulator, "a", 15, error, sizeof error) != 0;
    run->first_size_outside[rank] = accumulator_size(&accumulator);
    run->failures[rank] += accumulator_synchronize(&accumulator, -1, false, error,
                                                   sizeof error) != 0;
    run->first_a[rank] = value_or_nan(&accumulator, "a");
    accumulator_desynchronize(&accumulator);
    if (run->run_index == 0) {
        run->failures[rank] += accumulator_add(&accumulator, "a", -5, error, sizeof error) != 0;
        run->failures[rank] += accumulator_sum_updates(&accumulator, error, sizeof error) != 0;
        goto checkpoint;
    }
    if (run->run_index == 1) {
        accumulator_add(&accumulator, "a", rank, error, sizeof error);
        accumulator_add(&accumulator, "b", rank, error, sizeof error);
    }
    run->failures[rank] += accumulator_synchronize(&accumulator, -1, false, error,
                                                   sizeof error) != 0;
    run->second_size[rank] = accumulator_size(&accumulator);
    run->second_a[rank] = value_or_nan(&accumulator, "a");
    run->second_b[rank] = value_or_nan(&accumulator, "b");
    accumulator_desynchronize(&accumulator);
    if (run->run_index == 1) {
        run->failures[rank] += accumulator_sum_updates(&accumulator, error, sizeof error) != 0;
        goto checkpoint;
    }
    accumulator_add(&accumulator, "b", -5, error, sizeof error);
    accumulator_add(&accumulator, "c", -5, error, sizeof error);
    run->failures[rank] += accumulator_synchronize(&accumulator, -1, false, error,
                                                   sizeof error) != 0;
    run->third_a[rank] = value_or_nan(&accumulator, "a");
    run->third_b[rank] = value_or_nan(&accumulator, "b");
    run->third_c[rank] = value_or_nan(&accumulator, "c");
    accumulator_clear(&accumulator, error, sizeof error);
    accumulator_desynchronize(&accumulator);
    run->failures[rank] += accumulator_synchronize(&accumulator, -1, false, error,
                                                   sizeof error) != 0;
    run->last_size[rank] = accumulator_size(&accumulator);
    accumulator_desynchronize(&accumulator);
checkpoint:
    if (rank == 0)
        save(&accumulator, &run->saved);
    accumulator_free(&accumulator);
}

Test(accumulator, adaptdl_restarts_one_then_four_then_two_replicas)
{
    struct run first = {.restore_from = NULL, .run_index = 0};
    thread_replicas_run(1, replica_body, &first);
    cr_expect_eq(first.failures[0], 0);
    cr_expect_eq(first.first_size_outside[0], 0, "accumulation mode reads as empty");
    cr_expect_eq(first.first_a[0], 15);

    struct run second = {.restore_from = &first.saved, .run_index = 1};
    thread_replicas_run(4, replica_body, &second);
    for (unsigned rank = 0; rank < 4; rank++) {
        cr_expect_eq(second.failures[rank], 0, "rank %u", rank);
        cr_expect_eq(second.first_a[rank], 15, "rank %u replays the first result", rank);
        cr_expect_eq(second.second_size[rank], 2, "rank %u", rank);
        cr_expect_eq(second.second_a[rank], 16, "rank %u: 10 + 0+1+2+3", rank);
        cr_expect_eq(second.second_b[rank], 6, "rank %u", rank);
    }

    struct run third = {.restore_from = &second.saved, .run_index = 2};
    thread_replicas_run(2, replica_body, &third);
    for (unsigned rank = 0; rank < 2; rank++) {
        cr_expect_eq(third.failures[rank], 0, "rank %u", rank);
        cr_expect_eq(third.first_a[rank], 15, "rank %u", rank);
        cr_expect_eq(third.second_a[rank], 16, "rank %u replays the second result", rank);
        cr_expect_eq(third.second_b[rank], 6, "rank %u", rank);
        cr_expect_eq(third.third_a[rank], 16, "rank %u", rank);
        cr_expect_eq(third.third_b[rank], -4, "rank %u: 6 - 5 - 5", rank);
        cr_expect_eq(third.third_c[rank], -10, "rank %u", rank);
        cr_expect_eq(third.last_size[rank], 0, "rank %u: cleared", rank);
    }
    saved_free(&first.saved);
    saved_free(&second.saved);
    saved_free(&third.saved);
}

Test(accumulator, results_inside_a_loop_are_not_replayed)
{
    struct accumulator accumulator;
    accumulator_init(&accumulator, 3, 1);
    cr_expect_str_eq(accumulator.name, "adaptdl-accumulator-epoch3-1");
    char error[256];
    accumulator_add(&accumulator, "loss", 2.5, error, sizeof error);
    cr_assert_eq(accumulator_synchronize(&accumulator, 3, true, error, sizeof error), 0);
    cr_expect_eq(value_or_nan(&accumulator, "loss"), 2.5);
    accumulator_desynchronize(&accumulator);
    cr_expect_eq(accumulator.history_count, 0, "inside a loop nothing is kept");
    accumulator_free(&accumulator);
}

Test(accumulator, entering_a_synchronization_drops_finished_epochs)
{
    struct accumulator accumulator;
    accumulator_init(&accumulator, -1, 0);
    char error[256];
    for (int64_t epoch = 0; epoch < 3; epoch++) {
        accumulator_add(&accumulator, "n", 1, error, sizeof error);
        cr_assert_eq(accumulator_synchronize(&accumulator, epoch, false, error, sizeof error), 0);
        cr_expect_eq(value_or_nan(&accumulator, "n"), (double)epoch + 1);
        accumulator_desynchronize(&accumulator);
        cr_expect_eq(accumulator.history_count, 1, "epoch %lld: only its own results",
                     (long long)epoch);
        cr_expect_eq(accumulator.history[0].epoch, epoch);
    }
    /* outside any epoch loop nothing is dropped */
    cr_assert_eq(accumulator_synchronize(&accumulator, -1, false, error, sizeof error), 0);
    accumulator_desynchronize(&accumulator);
    cr_expect_eq(accumulator.history_count, 2);
    accumulator_free(&accumulator);
}

Test(accumulator, nested_synchronizations_and_misuse)
{
    struct accumulator accumulator;
    accumulator_init(&accumulator, -1, 0);
    char error[256] = "";
    cr_expect_eq(accumulator_set(&accumulator, "x", 1, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "synchronized mode"), "%s", error);
    cr_expect_eq(accumulator_add(&accumulator, "", 1, error, sizeof error), -1);
    cr_expect_eq(accumulator_remove(&accumulator, "x", error, sizeof error), -1);
    double value;
    accumulator_add(&accumulator, "x", 4, error, sizeof error);
    cr_expect(!accumulator_get(&accumulator, "x", &value), "accumulation mode reads as empty");
    cr_assert_eq(accumulator_synchronize(&accumulator, -1, false, error, sizeof error), 0);
    cr_assert_eq(accumulator_synchronize(&accumulator, -1, false, error, sizeof error), 0);
    accumulator_add(&accumulator, "x", 1, error, sizeof error);   /* results[x] += 1 */
    accumulator_desynchronize(&accumulator);
    cr_expect(accumulator_get(&accumulator, "x", &value), "still inside the outer block");
    cr_expect_eq(value, 5);
    cr_expect_eq(accumulator_set(&accumulator, "y", 7, error, sizeof error), 0);
    cr_expect_str_eq(accumulator_key(&accumulator, 1), "y");
    cr_expect_eq(accumulator_remove(&accumulator, "x", error, sizeof error), 0);
    cr_expect_eq(accumulator_size(&accumulator), 1);
    accumulator_desynchronize(&accumulator);
    cr_expect_eq(accumulator_size(&accumulator), 0);
    cr_expect_eq(accumulator.history_count, 1, "one synchronization, the nested one is none");
    cr_expect_eq(accumulator.history[0].values.values[0], 4, "the history keeps a copy");
    accumulator_free(&accumulator);
}

/* The dictionary underneath: init leaves it empty (and find says so), add
 * creates a key at 0 and then sums into it, keys stay in insertion order
 * and are copied, and growing past the first allocation keeps every entry. */
Test(accumulator, a_fresh_dictionary_is_empty_and_finds_nothing)
{
    struct accumulator_dict dict;
    memset(&dict, 0xa5, sizeof dict);
    accumulator_dict_init(&dict);
    cr_expect_eq(dict.count, 0);
    cr_expect_eq(dict.capacity, 0);
    cr_expect_null(dict.keys);
    cr_expect_null(dict.values);
    cr_expect_eq(accumulator_dict_find(&dict, "a"), -1);
    cr_expect_eq(accumulator_dict_find(&dict, ""), -1);
    accumulator_dict_free(&dict);
}

Test(accumulator, dictionary_add_creates_at_zero_then_sums_in_insertion_order)
{
    struct accumulator_dict dict;
    accumulator_dict_init(&dict);
    char key[] = "loss";
    cr_assert_eq(accumulator_dict_add(&dict, key, 2.5), 0);
    cr_assert_eq(accumulator_dict_add(&dict, "count", -1), 0);
    key[0] = 'm';   /* the dictionary holds its own copy */
    cr_assert_eq(accumulator_dict_add(&dict, "loss", 0.25), 0);
    cr_assert_eq(accumulator_dict_add(&dict, "count", -2), 0);
    cr_expect_eq(dict.count, 2, "a key added twice is one entry");
    cr_expect_eq(accumulator_dict_find(&dict, "loss"), 0);
    cr_expect_eq(accumulator_dict_find(&dict, "count"), 1);
    cr_expect_eq(accumulator_dict_find(&dict, "moss"), -1);
    cr_expect_eq(accumulator_dict_find(&dict, "los"), -1, "no prefix match");
    cr_expect_eq(accumulator_dict_find(&dict, "Loss"), -1, "keys are case-sensitive");
    cr_expect_str_eq(dict.keys[0], "loss");
    cr_expect_eq(dict.values[0], 2.75);
    cr_expect_eq(dict.values[1], -3);
    accumulator_dict_free(&dict);
    cr_expect_eq(dict.count, 0, "free leaves an empty dictionary");
    cr_expect_eq(accumulator_dict_find(&dict, "loss"), -1);
}

Test(accumulator, dictionary_keeps_every_entry_when_it_grows)
{
    struct accumulator_dict dict;
    accumulator_dict_init(&dict);
    char key[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "k%d", i);
        cr_assert_eq(accumulator_dict_add(&dict, key, i), 0);
    }
    cr_assert_eq(dict.count, 100);
    cr_expect_geq(dict.capacity, 100);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "k%d", i);
        long index = accumulator_dict_find(&dict, key);
        cr_expect_eq(index, i, "%s", key);
        if (index >= 0)
            cr_expect_eq(dict.values[index], i, "%s", key);
    }
    cr_assert_eq(accumulator_dict_add(&dict, "k99", 1), 0);
    cr_expect_eq(dict.count, 100);
    cr_expect_eq(dict.values[99], 100);
    accumulator_dict_free(&dict);
}

/* Replicas that share no transport (ADAPTDL_NUM_REPLICAS=2, no MPI world):
 * a synchronization is refused with the collective's message, the results
 * stay empty and the updates pending, instead of each replica summing its
 * own (1 and 2 where the job's sum is 3). */
Test(accumulator, replicas_without_a_shared_world_refuse_to_synchronize)
{
    replica_collective_use_single();
    replica_collective_expect(2, 1);
    struct accumulator accumulator;
    accumulator_init(&accumulator, -1, 0);
    char error[512] = "";
    cr_assert_eq(accumulator_add(&accumulator, "n", 2, error, sizeof error), 0);
    cr_expect_eq(accumulator_synchronize(&accumulator, -1, false, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "the job has 2 replicas"), "%s", error);
    cr_expect_eq(accumulator_size(&accumulator), 0, "not synchronized");
    cr_expect_eq(accumulator.results.count, 0, "nothing summed");
    cr_expect_eq(accumulator.updates.count, 1, "the update stays pending");
    cr_expect_eq(accumulator.history_count, 0);
    cr_expect_eq(accumulator_sum_updates(&accumulator, error, sizeof error), -1);

    /* the refused synchronization did not count: the next one is the
     * epoch's first, the one a restart replays first */
    replica_collective_expect(1, 0);
    cr_assert_eq(accumulator_synchronize(&accumulator, -1, false, error, sizeof error), 0,
                 "%s", error);
    double value = 0;
    cr_expect(accumulator_get(&accumulator, "n", &value));
    cr_expect_eq(value, 2);
    accumulator_desynchronize(&accumulator);
    cr_expect_eq(accumulator.history_count, 1);
    cr_assert_eq(accumulator.sync_count_used, 1);
    cr_expect_eq(accumulator.sync_counts[0].count, 1, "one synchronization happened");
    replica_collective_expect(0, 0);
    accumulator_free(&accumulator);
}

/* In synchronized mode the accumulator reads and writes as a plain
 * dictionary: adding to a key it does not hold is refused, as AdaptDL's
 * accum[key] += value raises KeyError there (it used to create the key);
 * adding to a held key, and adding anything in accumulation mode, work. */
Test(accumulator, adding_to_a_missing_key_in_synchronized_mode_is_refused)
{
    struct accumulator accumulator;
    accumulator_init(&accumulator, 2, 0);
    char error[256] = "";
    cr_assert_eq(accumulator_add(&accumulator, "seen", 1, error, sizeof error), 0);
    cr_assert_eq(accumulator_synchronize(&accumulator, 2, false, error, sizeof error), 0);
    cr_expect_eq(accumulator_add(&accumulator, "unseen", 1, error, sizeof error), -1);
    cr_expect_str_eq(error, "accumulator adaptdl-accumulator-epoch2-0: no key \"unseen\" to add "
                            "to in synchronized mode; set it first, or add before "
                            "synchronizing (AdaptDL raises KeyError)");
    cr_expect_eq(accumulator_size(&accumulator), 1, "nothing created");
    cr_expect_eq(accumulator_add(&accumulator, "seen", 2, error, sizeof error), 0);
    double value = 0;
    cr_expect(accumulator_get(&accumulator, "seen", &value));
    cr_expect_eq(value, 3);
    value = -7;
    cr_expect_not(accumulator_get(&accumulator, "unseen", &value));
    cr_expect_eq(value, -7, "an absent key leaves the value untouched");
    cr_expect_eq(accumulator_set(&accumulator, "unseen", 5, error, sizeof error), 0);
    cr_expect_eq(accumulator_add(&accumulator, "unseen", 1, error, sizeof error), 0, "%s",
                 error);
    accumulator_desynchronize(&accumulator);
    cr_expect_eq(accumulator_add(&accumulator, "new", 1, error, sizeof error), 0,
                 "accumulation mode creates keys");
    accumulator_free(&accumulator);
}

/* AdaptDL's Accumulator(initial_dict): the initial values are the results
 * a synchronization adds the updates to (accumulation mode still reads as
 * empty); a key given twice takes the last value; a restore replaces them
 * as AdaptDL's load_state does; they can be given to a new accumulator
 * only. */
Test(accumulator, initial_values_are_the_results_until_a_restore_replaces_them)
{
    struct accumulator accumulator;
    accumulator_init(&accumulator, -1, 0);
    char error[256] = "";
    cr_assert_eq(accumulator_set_initial(&accumulator, "best", 9, error, sizeof error), 0);
    cr_assert_eq(accumulator_set_initial(&accumulator, "count", 1, error, sizeof error), 0);
    cr_assert_eq(accumulator_set_initial(&accumulator, "best", 10, error, sizeof error), 0);
    cr_expect_eq(accumulator_set_initial(&accumulator, "", 1, error, sizeof error), -1);
    cr_expect_eq(accumulator_size(&accumulator), 0, "accumulation mode reads as empty");
    cr_assert_eq(accumulator_add(&accumulator, "count", 2, error, sizeof error), 0);
    cr_assert_eq(accumulator_synchronize(&accumulator, -1, false, error, sizeof error), 0);
    cr_assert_eq(accumulator_size(&accumulator), 2);
    cr_expect_str_eq(accumulator_key(&accumulator, 0), "best");
    double value = 0;
    cr_expect(accumulator_get(&accumulator, "best", &value));
    cr_expect_eq(value, 10);
    cr_expect(accumulator_get(&accumulator, "count", &value));
    cr_expect_eq(value, 3);
    accumulator_desynchronize(&accumulator);
    cr_expect_eq(accumulator_set_initial(&accumulator, "late", 1, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "at its creation only"), "%s", error);

    struct accumulator restored;
    accumulator_init(&restored, -1, 0);
    cr_assert_eq(accumulator_set_initial(&restored, "best", 1, error, sizeof error), 0);
    cr_assert_eq(accumulator_restore(&restored, &accumulator.results, accumulator.history,
                                     accumulator.history_count), 0);
    cr_assert_eq(accumulator.results.count, 2);
    cr_expect_eq(restored.results.values[0], 10, "the saved results win");
    accumulator_free(&restored);
    accumulator_free(&accumulator);
}

/* A restore while a synchronized block is open (a checkpoint loaded inside
 * it) replaced the results and history the block was reading, which were
 * then read after being freed (found by fuzz_cooperative_api); the block
 * reads the restored results now, whether it was a fresh synchronization
 * or a replayed one. */
Test(accumulator, a_restore_inside_a_synchronized_block_reads_the_restored_results)
{
    struct accumulator saved;
    accumulator_init(&saved, -1, 0);
    char error[256] = "";
    cr_assert_eq(accumulator_add(&saved, "loss", 7, error, sizeof error), 0);
    cr_assert_eq(accumulator_synchronize(&saved, -1, false, error, sizeof error), 0);
    accumulator_desynchronize(&saved);

    for (int replayed = 0; replayed < 2; replayed++) {
        struct accumulator accumulator;
        accumulator_init(&accumulator, -1, 0);
        if (replayed)
            cr_assert_eq(accumulator_restore(&accumulator, &saved.results, saved.history,
                                             saved.history_count), 0);
        else
            cr_assert_eq(accumulator_add(&accumulator, "other", 1, error, sizeof error), 0);
        cr_assert_eq(accumulator_synchronize(&accumulator, -1, false, error, sizeof error), 0);
        cr_assert_eq(accumulator_restore(&accumulator, &saved.results, saved.history,
                                         saved.history_count), 0);
        double value = 0;
        cr_expect(accumulator_get(&accumulator, "loss", &value), "replayed %d", replayed);
        cr_expect_eq(value, 7);
        cr_expect_eq(accumulator_size(&accumulator), 1);
        accumulator_desynchronize(&accumulator);
        cr_expect_eq(accumulator_size(&accumulator), 0, "the block is closed as it was opened");
        accumulator_free(&accumulator);
    }
    accumulator_free(&saved);
}
