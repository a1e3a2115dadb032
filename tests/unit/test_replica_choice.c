/* test_replica_choice.c - the replica count a job runs with next
 * (runtime/replica_choice.h, adaptdl-wrap(1) "The replica count"): the best predicted count in
 * MIN..MAX, taken only when it beats the current one by more than the
 * speedup threshold; the current count without a prediction for it; the
 * ends of the range; whether a move pays a restart; and the goodput table
 * predicted from a model, as the hints file holds it. */
#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

#include "replica_choice.h"

/* A table from a list of (replicas, goodput) pairs; the rest unknown. */
static struct replica_goodputs table_of(const double (*pairs)[2], size_t count)
{
    struct replica_goodputs table;
    replica_goodputs_clear(&table);
    for (size_t i = 0; i < count; i++)
        table.goodput[(size_t)pairs[i][0]] = pairs[i][1];
    return table;
}
#define TABLE(...)                                                                           \
    table_of((const double[][2]){__VA_ARGS__},                                               \
             sizeof((const double[][2]){__VA_ARGS__}) / sizeof(double[2]))

static struct replica_choice pick(const struct replica_goodputs *table, uint32_t minimum,
                                  uint32_t maximum, uint32_t current, double threshold)
{
    struct replica_choice choice;
    cr_assert_eq(replica_choice_pick(table, minimum, maximum, current, threshold, &choice), 0);
    return choice;
}

Test(replica_choice, grows_when_the_gain_beats_the_threshold)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, 180});
    struct replica_choice choice = pick(&table, 1, 2, 1, 1.05);
    cr_expect_eq(choice.replicas, 2);
    cr_expect_eq(choice.reason, REPLICA_CHOICE_MOVED);
    cr_expect_float_eq(choice.speedup, 1.8, 1e-12);
    cr_expect_float_eq(choice.goodput_current, 100, 1e-12);
    cr_expect_float_eq(choice.goodput_chosen, 180, 1e-12);
}

Test(replica_choice, a_gain_at_or_below_the_threshold_keeps_the_count)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, 105});
    struct replica_choice choice = pick(&table, 1, 2, 1, 1.05);
    cr_expect_eq(choice.replicas, 1, "1.05 is not above 1.05");
    cr_expect_eq(choice.reason, REPLICA_CHOICE_KEPT_BELOW_THRESHOLD);
    cr_expect_eq(choice.best, 2);
    table.goodput[2] = 105.01;
    cr_expect_eq(pick(&table, 1, 2, 1, 1.05).replicas, 2);
    cr_expect_eq(pick(&table, 1, 2, 1, 1.2).replicas, 1, "a higher threshold holds it back");
}

Test(replica_choice, shrinks_when_fewer_replicas_are_faster)
{
    struct replica_goodputs table = TABLE({1, 300}, {2, 200}, {3, 150}, {4, 120});
    cr_expect_eq(pick(&table, 1, 4, 4, 1.05).replicas, 1);
    cr_expect_eq(pick(&table, 2, 4, 4, 1.05).replicas, 2, "not below MIN");
}

Test(replica_choice, the_best_in_range_wins_not_the_nearest)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, 150}, {3, 160}, {4, 400}, {5, 900});
    cr_expect_eq(pick(&table, 1, 4, 1, 1.05).replicas, 4, "5 is outside 1..4");
    cr_expect_eq(pick(&table, 1, 5, 2, 1.05).replicas, 5);
}

Test(replica_choice, the_best_count_keeps_it)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, 180}, {3, 170});
    struct replica_choice choice = pick(&table, 1, 3, 2, 1.05);
    cr_expect_eq(choice.replicas, 2);
    cr_expect_eq(choice.reason, REPLICA_CHOICE_KEPT_BEST);
    cr_expect_float_eq(choice.speedup, 1.0, 1e-12);
}

Test(replica_choice, equal_goodputs_prefer_the_smallest_count)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, 200}, {3, 200});
    struct replica_choice choice = pick(&table, 1, 3, 1, 1.05);
    cr_expect_eq(choice.best, 2);
    cr_expect_eq(choice.replicas, 2);
}

Test(replica_choice, no_prediction_for_the_current_count_keeps_it)
{
    struct replica_goodputs none;
    replica_goodputs_clear(&none);
    struct replica_choice choice = pick(&none, 1, 4, 3, 1.05);
    cr_expect_eq(choice.replicas, 3, "no hints yet");
    cr_expect_eq(choice.reason, REPLICA_CHOICE_KEPT_NO_PREDICTION);
    cr_expect(isnan(choice.speedup));
    /* a table that stops below the current count (AdaptDL predicts up to
     * twice the most replicas profiled) */
    struct replica_goodputs short_table = TABLE({1, 100}, {2, 500});
    cr_expect_eq(pick(&short_table, 1, 8, 6, 1.05).replicas, 6);
}

Test(replica_choice, unusable_predictions_are_no_predictions)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, INFINITY}, {3, -5}, {4, 0});
    cr_expect_eq(pick(&table, 1, 4, 1, 1.05).replicas, 1);
    cr_expect_eq(pick(&table, 1, 4, 1, 1.05).reason, REPLICA_CHOICE_KEPT_BEST);
    cr_expect_eq(pick(&table, 1, 4, 3, 1.05).reason, REPLICA_CHOICE_KEPT_NO_PREDICTION);
    cr_expect(!replica_goodputs_known(&table, 0));
    cr_expect(!replica_goodputs_known(&table, REPLICA_CHOICE_MAX_REPLICAS + 1));
}

Test(replica_choice, a_current_count_outside_the_range_moves_into_it)
{
    struct replica_goodputs none;
    replica_goodputs_clear(&none);
    struct replica_choice above = pick(&none, 1, 4, 9, 1.05);
    cr_expect_eq(above.replicas, 4);
    cr_expect(above.clamped);
    struct replica_choice below = pick(&none, 2, 4, 1, 1.05);
    cr_expect_eq(below.replicas, 2);
    cr_expect(below.clamped);
    /* then the rule applies from the end it was moved to */
    struct replica_goodputs table = TABLE({2, 100}, {3, 300});
    cr_expect_eq(pick(&table, 2, 3, 1, 1.05).replicas, 3);
    cr_expect(!pick(&table, 2, 3, 2, 1.05).clamped);
}

Test(replica_choice, a_range_of_one_count_is_that_count)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, 1000});
    cr_expect_eq(pick(&table, 1, 1, 1, 1.05).replicas, 1);
    cr_expect_eq(pick(&table, 1, 1, 2, 1.05).replicas, 1);
}

Test(replica_choice, counts_beyond_the_table_are_never_chosen)
{
    struct replica_goodputs table = TABLE({1, 100}, {64, 1000});
    cr_expect_eq(pick(&table, 1, 1000, 1, 1.05).replicas, 64);
    cr_expect_eq(pick(&table, 1, 1000, 500, 1.05).replicas, 500, "no prediction for 500");
}

Test(replica_choice, invalid_arguments_are_refused)
{
    struct replica_goodputs table = TABLE({1, 100});
    struct replica_choice choice;
    memset(&choice, 0x5a, sizeof choice);
    struct replica_choice untouched = choice;
    cr_expect_eq(replica_choice_pick(&table, 0, 2, 1, 1.05, &choice), -1);
    cr_expect_eq(replica_choice_pick(&table, 3, 2, 1, 1.05, &choice), -1);
    cr_expect_eq(replica_choice_pick(&table, 1, 2, 0, 1.05, &choice), -1);
    cr_expect_eq(replica_choice_pick(&table, 1, 2, 1, 0.9, &choice), -1);
    cr_expect_eq(replica_choice_pick(&table, 1, 2, 1, NAN, &choice), -1);
    cr_expect_eq(memcmp(&choice, &untouched, sizeof choice), 0);
}

Test(replica_choice, a_move_pays_a_restart_only_within_the_payback_time)
{
    struct replica_goodputs table = TABLE({1, 100}, {2, 150});
    struct replica_choice choice = pick(&table, 1, 2, 1, 1.05);
    /* S = 1.5: C * S / (S - 1) = 3 C */
    cr_expect(replica_choice_restart_pays(&choice, 30, 90));
    cr_expect(!replica_choice_restart_pays(&choice, 30, 89.9));
    cr_expect(replica_choice_restart_pays(&choice, 0, 0));
    struct replica_choice kept = pick(&table, 1, 2, 2, 1.05);
    cr_expect(!replica_choice_restart_pays(&kept, 0, 1e9), "no move, no restart");
    struct replica_choice held = pick(&table, 1, 2, 1, 1.6);
    cr_expect(!replica_choice_restart_pays(&held, 0, 1e9), "below the threshold");
}

Test(replica_choice, descriptions_name_the_numbers)
{
    char line[320];
    struct replica_goodputs table = TABLE({1, 100}, {2, 180});
    struct replica_choice moved = pick(&table, 1, 2, 1, 1.05);
    cr_expect_str_eq(replica_choice_describe(&moved, line, sizeof line),
                     "2 replicas: predicted goodput 180 against 100 with 1 (speedup 1.800 > "
                     "1.050)");
    struct replica_choice held = pick(&table, 1, 2, 1, 2.0);
    cr_expect_str_eq(replica_choice_describe(&held, line, sizeof line),
                     "1 replica kept: 2 would give goodput 180 against 100 (speedup 1.800, not "
                     "above 2.000)");
    struct replica_goodputs none;
    replica_goodputs_clear(&none);
    struct replica_choice unknown = pick(&none, 1, 4, 6, 1.05);
    cr_expect_str_eq(replica_choice_describe(&unknown, line, sizeof line),
                     "4 replicas (moved into 1..4) kept: no predicted goodput for 4 replicas");
}

/* --- the table predicted from a model ------------------------------------- */

static const struct goodput_model profiled_model = {
    .perf = {.alpha_c = 0.002, .beta_c = 3e-4, .alpha_n = 1.1e-8, .beta_n = 1.1e-8,
             .alpha_r = 1e-8, .beta_r = 1e-8, .gamma = 1},
    .grad = {.sqr = 0.09, .var = 0.35},
    .initial_global_bsz = 8,
};

Test(replica_choice, the_table_covers_twice_the_most_replicas_profiled)
{
    struct replica_goodputs table;
    replica_goodputs_predict(&profiled_model, 1, 3, 1, 256, 0, 0, &table);
    for (uint32_t replicas = 1; replicas <= 6; replicas++) {
        struct goodput_choice expected;
        cr_assert_eq(goodput_optimize(&profiled_model, 1, replicas, 256, 0, 0, false, &expected),
                     0);
        cr_expect_float_eq(table.goodput[replicas], expected.goodput, 1e-9 * expected.goodput,
                           "%u replicas", replicas);
    }
    cr_expect(isnan(table.goodput[7]), "nothing past twice the most profiled");
    replica_goodputs_predict(&profiled_model, 1, 0, 2, 256, 0, 0, &table);
    cr_expect(!isnan(table.goodput[4]) && isnan(table.goodput[5]),
              "nothing profiled: twice the current count");
    replica_goodputs_predict(&profiled_model, 1, 100, 1, 256, 0, 0, &table);
    cr_expect(!isnan(table.goodput[REPLICA_CHOICE_MAX_REPLICAS]), "capped at 64");
}

/* From one replica, the priors (no network cost observed, half of the step
 * per sample) promise a second replica about a third more goodput: the
 * choice the shim and the launcher make for a job that starts at 1. */
Test(replica_choice, one_profiled_replica_predicts_that_two_pay)
{
    struct goodput_model model = profiled_model;
    model.perf.alpha_c = 0.001;
    model.perf.beta_c = 0.001 / 8;
    model.grad.sqr = NAN;   /* no statistics: the initial batch, split */
    model.grad.var = NAN;
    struct replica_goodputs table;
    replica_goodputs_predict(&model, 1, 1, 1, 256, 0, 0, &table);
    struct replica_choice choice = pick(&table, 1, 2, 1, 1.05);
    cr_expect_eq(choice.replicas, 2);
    /* (plus the 1e-8 s network floor) */
    cr_expect_float_eq(choice.speedup, 4.0 / 3.0, 1e-5, "%.9f", choice.speedup);
    cr_expect(replica_choice_restart_pays(&choice, 30, 600), "120 s payback");
}

Test(replica_choice, configurations_the_optimizer_refuses_have_no_prediction)
{
    struct replica_goodputs table;
    /* two nodes cannot hold one replica */
    replica_goodputs_predict(&profiled_model, 2, 2, 2, 256, 0, 0, &table);
    cr_expect(isnan(table.goodput[1]));
    cr_expect(!isnan(table.goodput[2]));
}
