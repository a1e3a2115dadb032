/* test_epoch_loop.c - the loop over epochs (runtime/epoch_loop.h), AdaptDL's
 * epoch_test: epochs run in order, a restart after epoch 5 of 10 starts at
 * epoch 5, a second loop continues where the first ended, overlapping loops
 * are refused, and leaving early finishes the current epoch. */
#include <criterion/criterion.h>

#include <string.h>

#include "epoch_loop.h"

Test(epoch_loop, a_restart_skips_the_finished_epochs)
{
    struct epoch_loop loop;
    epoch_loop_init(&loop);
    char error[256];
    cr_expect_eq(epoch_loop_current(&loop), EPOCH_LOOP_NONE);
    int64_t seen[10], count = 0;
    for (int64_t e = epoch_loop_begin(&loop, 10, error, sizeof error); e >= 0;
         e = epoch_loop_next(&loop)) {
        cr_expect_eq(epoch_loop_current(&loop), e);
        cr_expect_eq(loop.finished, e);
        seen[count++] = e;
        if (e == 5)
            break;   /* the restart: the snapshot holds finished = 5 */
    }
    cr_assert_eq(count, 6);
    for (int64_t i = 0; i < count; i++)
        cr_expect_eq(seen[i], i);
    int64_t finished_at_snapshot = loop.finished;
    cr_expect_eq(finished_at_snapshot, 5, "the epoch being run is not finished");

    struct epoch_loop restarted;
    epoch_loop_init(&restarted);
    restarted.finished = finished_at_snapshot;
    count = 0;
    for (int64_t e = epoch_loop_begin(&restarted, 10, error, sizeof error); e >= 0;
         e = epoch_loop_next(&restarted))
        seen[count++] = e;
    cr_assert_eq(count, 5);
    for (int64_t i = 0; i < count; i++)
        cr_expect_eq(seen[i], 5 + i);
    cr_expect_eq(epoch_loop_current(&restarted), EPOCH_LOOP_NONE);
    cr_expect_eq(restarted.finished, 10);
}

Test(epoch_loop, a_second_loop_continues_and_a_finished_one_runs_nothing)
{
    struct epoch_loop loop;
    epoch_loop_init(&loop);
    char error[256];
    int64_t last = -1;
    for (int64_t e = epoch_loop_begin(&loop, 3, error, sizeof error); e >= 0;
         e = epoch_loop_next(&loop))
        last = e;
    cr_expect_eq(last, 2);
    cr_expect_eq(epoch_loop_begin(&loop, 5, error, sizeof error), 3);
    cr_expect_eq(epoch_loop_next(&loop), 4);
    cr_expect_eq(epoch_loop_next(&loop), EPOCH_LOOP_NONE);
    cr_expect_eq(epoch_loop_begin(&loop, 5, error, sizeof error), EPOCH_LOOP_NONE,
                 "every epoch before 5 is finished");
}

Test(epoch_loop, overlapping_loops_are_refused_and_leaving_finishes_the_epoch)
{
    struct epoch_loop loop;
    epoch_loop_init(&loop);
    char error[256] = "";
    cr_assert_eq(epoch_loop_begin(&loop, 4, error, sizeof error), 0);
    cr_expect_eq(epoch_loop_begin(&loop, 4, error, sizeof error), EPOCH_LOOP_ERROR);
    cr_expect_not_null(strstr(error, "overlapping epoch loops"), "%s", error);
    cr_expect_eq(epoch_loop_current(&loop), 0, "the running loop is unchanged");
    epoch_loop_leave(&loop);
    cr_expect_eq(loop.finished, 1);
    cr_expect_eq(epoch_loop_current(&loop), EPOCH_LOOP_NONE);
    cr_expect_eq(epoch_loop_begin(&loop, 4, error, sizeof error), 1);
}
