/* test_collective_cycle.c - steps and gradient pieces from the repeating
 * sequence of collectives (collective_cycle.h), for the call sequences of
 * real trainers: how many steps an iteration makes, which calls are
 * gradient pieces, and when the per-call rule takes over. */
#include <criterion/criterion.h>

#include <string.h>

#include "collective_cycle.h"

#define FLOAT_SUM(n) {COLLECTIVE_ALLREDUCE, COLLECTIVE_ELEMENT_FLOAT, true, (n)}
#define DOUBLE_SUM(n) {COLLECTIVE_ALLREDUCE, COLLECTIVE_ELEMENT_DOUBLE, true, (n)}
#define INT_SUM(n) {COLLECTIVE_ALLREDUCE, COLLECTIVE_ELEMENT_OTHER, true, (n)}
#define BARRIER {COLLECTIVE_BARRIER, COLLECTIVE_ELEMENT_OTHER, false, 0}

struct run {
    uint64_t boundaries;         /* cycle boundaries and ended gradient runs */
    uint64_t gradient_pieces;
    int64_t gradient_elements;   /* of the last iteration */
};

/* Feeds `iterations` repetitions of `calls`; a per-call boundary counts when
 * gradient pieces are pending, as the step monitor does. */
static struct run run_iterations(struct collective_cycle *cycle,
                                 const struct collective_call *calls, size_t count,
                                 int iterations)
{
    struct run run = {0};
    bool pending = false;
    for (int iteration = 0; iteration < iterations; iteration++) {
        run.gradient_elements = 0;
        for (size_t i = 0; i < count; i++) {
            struct collective_verdict verdict =
                collective_cycle_observe(cycle, &calls[i], (double)iteration);
            if (verdict.boundary == COLLECTIVE_BOUNDARY_BEFORE ||
                (verdict.boundary == COLLECTIVE_ENDS_GRADIENT_RUN && pending)) {
                run.boundaries++;
                pending = false;
            }
            if (verdict.gradient) {
                run.gradient_pieces++;
                run.gradient_elements += calls[i].count;
                pending = true;
            }
        }
    }
    return run;
}

/* llm_parallelisms' train_dp.c: the loss, then the gradients of the
 * embedding (432), fc_1 (16384 + 64) and fc_2 (1728 + 27). */
static const struct collective_call train_dp[] = {
    FLOAT_SUM(1), FLOAT_SUM(432), FLOAT_SUM(16384), FLOAT_SUM(64), FLOAT_SUM(1728), FLOAT_SUM(27),
};

Test(collective_cycle, train_dp_makes_one_step_per_iteration_without_settings)
{
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, false);
    struct run warm = run_iterations(&cycle, train_dp, 6, 2);
    cr_expect(collective_cycle_locked(&cycle), "two identical iterations lock the cycle");
    cr_expect_eq(cycle.period, 6);
    struct run run = run_iterations(&cycle, train_dp, 6, 100);
    cr_expect_eq(run.boundaries, 100, "one step per iteration, not %llu",
                 (unsigned long long)run.boundaries);
    /* the tensors of at least 16384 / 64 elements; the loss and the biases
     * of 64 and 27 add little to the norm and are left out with it */
    cr_expect_eq(run.gradient_elements, 432 + 16384 + 1728);
    cr_expect_leq(warm.boundaries, 4, "before the lock, the per-call rule: 2 per iteration");
}

Test(collective_cycle, the_per_call_rule_alone_splits_train_dp_in_two)
{
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, true);   /* ADAPTDL_GRAD_MIN=1024 given */
    run_iterations(&cycle, train_dp, 6, 2);
    struct run run = run_iterations(&cycle, train_dp, 6, 10);
    cr_expect_eq(run.boundaries, 10, "the cycle makes the steps under a given minimum too");
    cr_expect_eq(run.gradient_elements, 16384 + 1728, "the user's minimum decides the pieces");
}

/* Small models without settings: each iteration is one step, its gradient
 * a piece, its loss none (a 16-parameter model and its loss; the
 * time-to-target benchmark's 9-float gradient and its loss reduced with its
 * record count, 2 doubles, whose squares would swamp the gradient's norms). */
Test(collective_cycle, small_gradients_are_found_and_their_losses_left_out)
{
    static const struct {
        struct collective_call calls[2];
        int64_t gradient_elements;
    } cases[] = {
        {{FLOAT_SUM(16), DOUBLE_SUM(1)}, 16},
        {{FLOAT_SUM(9), DOUBLE_SUM(2)}, 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct collective_cycle cycle;
        collective_cycle_init(&cycle, 1024, false);
        run_iterations(&cycle, cases[i].calls, 2, 2);
        struct run run = run_iterations(&cycle, cases[i].calls, 2, 50);
        cr_expect_eq(run.boundaries, 50, "case %zu", i);
        cr_expect_eq(run.gradient_pieces, 50, "case %zu", i);
        cr_expect_eq(run.gradient_elements, cases[i].gradient_elements, "case %zu", i);
        char message[512];
        cr_expect_not(collective_cycle_missing_gradient(&cycle, 100.0, message,
                                                        sizeof message));
    }
}

Test(collective_cycle, the_boundary_comes_after_the_last_gradient_piece)
{
    /* metrics (an int count and a loss) before the gradient buckets */
    static const struct collective_call calls[] = {INT_SUM(1), FLOAT_SUM(1), FLOAT_SUM(4096),
                                                   FLOAT_SUM(4096), FLOAT_SUM(2048)};
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, false);
    run_iterations(&cycle, calls, 5, 2);
    cr_assert(collective_cycle_locked(&cycle));
    for (int i = 0; i < 5; i++) {
        struct collective_verdict verdict = collective_cycle_observe(&cycle, &calls[i], 3);
        cr_expect_eq(verdict.boundary == COLLECTIVE_BOUNDARY_BEFORE, i == 0, "call %d", i);
        cr_expect_eq(verdict.gradient, i >= 2, "call %d", i);
    }
}

Test(collective_cycle, an_evaluation_breaks_the_cycle_and_it_locks_again)
{
    static const struct collective_call step[] = {FLOAT_SUM(1), FLOAT_SUM(5000)};
    static const struct collective_call evaluation[] = {BARRIER, DOUBLE_SUM(3)};
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, false);
    run_iterations(&cycle, step, 2, 5);
    cr_assert(collective_cycle_locked(&cycle));
    struct collective_verdict verdict = collective_cycle_observe(&cycle, &evaluation[0], 5);
    cr_expect_not(collective_cycle_locked(&cycle), "a call off the cycle unlocks it");
    cr_expect_eq(verdict.boundary, COLLECTIVE_ENDS_GRADIENT_RUN);
    verdict = collective_cycle_observe(&cycle, &evaluation[1], 5);
    cr_expect_not(verdict.gradient, "3 doubles are no gradient by the per-call rule");
    struct run run = run_iterations(&cycle, step, 2, 10);
    cr_expect(collective_cycle_locked(&cycle));
    cr_expect_eq(cycle.locks, 2);
    cr_expect_geq(run.boundaries, 9, "steps go on through the unlocked calls");
    cr_expect_leq(run.boundaries, 10);
}

Test(collective_cycle, every_replica_locks_at_the_same_call)
{
    /* two replicas see the same sequence: the same verdicts, call for call */
    static const struct collective_call calls[] = {FLOAT_SUM(2048), FLOAT_SUM(7), BARRIER,
                                                   FLOAT_SUM(2048), FLOAT_SUM(7)};
    struct collective_cycle a, b;
    collective_cycle_init(&a, 1024, false);
    collective_cycle_init(&b, 1024, false);
    for (int i = 0; i < 200; i++) {
        const struct collective_call *call = &calls[(i * 7 + i / 13) % 5];
        struct collective_verdict va = collective_cycle_observe(&a, call, i);
        struct collective_verdict vb = collective_cycle_observe(&b, call, i + 0.5);
        cr_assert_eq(va.gradient, vb.gradient, "call %d", i);
        cr_assert_eq(va.boundary, vb.boundary, "call %d", i);
    }
}

Test(collective_cycle, no_gradient_in_30_seconds_is_one_line_naming_the_setting)
{
    static const struct collective_call calls[] = {FLOAT_SUM(512), INT_SUM(4)};
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, true);   /* a user's minimum above the gradient */
    char message[512] = "";
    collective_cycle_observe(&cycle, &calls[0], 10.0);
    collective_cycle_observe(&cycle, &calls[1], 20.0);
    cr_expect_not(collective_cycle_missing_gradient(&cycle, 39.0, message, sizeof message));
    cr_assert(collective_cycle_missing_gradient(&cycle, 40.5, message, sizeof message));
    cr_expect(strstr(message, "ADAPTDL_GRAD_MIN=512") != NULL, "%s", message);
    cr_expect(strchr(message, '\n') == NULL);
    cr_expect_not(collective_cycle_missing_gradient(&cycle, 80.0, message, sizeof message),
                  "once");
}

Test(collective_cycle, a_sequence_that_never_repeats_keeps_the_per_call_rule)
{
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, false);
    for (int i = 0; i < 300; i++) {
        struct collective_call call = FLOAT_SUM(2000 + i);
        struct collective_verdict verdict = collective_cycle_observe(&cycle, &call, i);
        cr_assert(verdict.gradient);
        cr_assert_eq(verdict.boundary, COLLECTIVE_NO_BOUNDARY);
    }
    cr_expect_not(collective_cycle_locked(&cycle));
}

/* 300 gradient buckets of one size, then a barrier: [G] repeats long before
 * the barrier comes, and a cycle of gradient pieces only says nothing of
 * where a step ends: the barrier does, one step per iteration. */
Test(collective_cycle, many_equal_buckets_then_a_barrier_make_one_step)
{
    struct collective_call calls[301];
    for (int i = 0; i < 300; i++)
        calls[i] = (struct collective_call)FLOAT_SUM(4096);
    calls[300] = (struct collective_call)BARRIER;
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, false);
    struct run run = run_iterations(&cycle, calls, 301, 6);
    cr_expect_eq(run.boundaries, 6, "%llu", (unsigned long long)run.boundaries);
    cr_expect_eq(run.gradient_pieces, 6 * 300);
}

/* A 16-float gradient and nothing else (its reads end the steps): the
 * repetition makes it a gradient piece, and the cycle places no boundary
 * of its own. */
Test(collective_cycle, a_lone_small_gradient_is_a_piece_and_reads_end_its_steps)
{
    static const struct collective_call calls[] = {FLOAT_SUM(16)};
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, false);
    run_iterations(&cycle, calls, 1, 2);
    struct run run = run_iterations(&cycle, calls, 1, 20);
    cr_expect_eq(run.gradient_pieces, 20);
    cr_expect_eq(run.boundaries, 0, "no boundary from the cycle");
    cr_expect(collective_cycle_locked(&cycle));
    cr_expect_not(collective_cycle_makes_boundaries(&cycle));
}

/* The time-to-target benchmark's trainer validates every 32 steps: 32 x
 * [gradient, loss], then [validation sums].  That whole sequence repeats
 * too (65 calls); after each validation the step's own period (2) must
 * lock again, not the 65-call one, which would make one step of 32. */
Test(collective_cycle, a_validation_every_32_steps_keeps_one_step_per_iteration)
{
    struct collective_call calls[65];
    for (int i = 0; i < 32; i++) {
        calls[2 * i] = (struct collective_call)FLOAT_SUM(9);
        calls[2 * i + 1] = (struct collective_call)DOUBLE_SUM(1);
    }
    calls[64] = (struct collective_call)DOUBLE_SUM(2);
    struct collective_cycle cycle;
    collective_cycle_init(&cycle, 1024, false);
    run_iterations(&cycle, calls, 65, 3);
    struct run run = run_iterations(&cycle, calls, 65, 10);
    cr_expect_geq(run.boundaries, 10 * 32 - 10 * 2, "%llu boundaries in 320 iterations",
                  (unsigned long long)run.boundaries);
    cr_expect_leq(run.boundaries, 10 * 33);
    cr_expect_eq(run.gradient_pieces, 10 * 32);
}
