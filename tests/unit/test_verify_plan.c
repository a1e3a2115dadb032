/* test_verify_plan.c - where adaptdl-verify kills its cases, how it names a
 * commit, and the ADAPTDL_DATA of a fix trial (runtime/verify_plan.h). */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "verify_plan.h"

#define VP_START "adaptshim-trace 1 pid 10 rank 0 replicas 1\n"

static void vp_history(struct resume_history *history, const char *text)
{
    struct trace_log log;
    char error[512] = "";
    cr_assert_eq(trace_log_parse(&log, text, strlen(text), "test", error, sizeof error), 0,
                 "%s", error);
    const struct trace_log *pointer = &log;
    resume_history_init(history);
    cr_assert_eq(resume_history_add_run(history, &pointer, 1, error, sizeof error), 0, "%s",
                 error);
    trace_log_free(&log);
}

/* An uninterrupted run of train file t.bin (4 records, 3 passes) and eval
 * file e.bin, committing: 1 before training, 2 inside pass 0, 3 at the end
 * of pass 0, 4 inside pass 1 for a reader in its own order (bound at 0,
 * two records read), 5 inside pass 1, 6 at its end, 7 inside pass 2. */
#define VP_RUN VP_START                                                                  \
    "B 1 1 t.bin train 0 0 4 0\nC 1 1 /s/ck\n"                                           \
    "D t.bin 0 0 1\nD e.bin 0 0 1 2 3\n"                                                 \
    "B 1 2 t.bin train 0 2 4 0\nB 1 2 e.bin eval 0 4 4 0\nC 1 2 /s/ck\n"                 \
    "D t.bin 0 2 3\nB 1 3 t.bin train 0 4 4 0\nC 1 3 /s/ck\n"                            \
    "D t.bin 1 3 1\nB 1 4 t.bin train 1 0 4 0\nC 1 4 /s/ck\n"                            \
    "D t.bin 1 0\nB 1 5 t.bin train 1 3 4 0\nC 1 5 /s/ck\n"                              \
    "D t.bin 1 2\nB 1 6 t.bin train 2 0 4 0\nC 1 6 /s/ck\n"                              \
    "D t.bin 2 1\nB 1 7 t.bin train 2 1 4 0\nC 1 7 /s/ck\n"

Test(verify_plan, commits_are_told_apart_by_what_they_bound)
{
    struct resume_history history;
    vp_history(&history, VP_RUN);
    cr_assert_eq(history.commit_count, 7);
    enum commit_place expected[] = {COMMIT_BEFORE_TRAINING, COMMIT_MID_EPOCH, COMMIT_EPOCH_END,
                                    COMMIT_MID_EPOCH,       COMMIT_MID_EPOCH, COMMIT_EPOCH_END,
                                    COMMIT_MID_EPOCH};
    for (size_t i = 0; i < history.commit_count; i++)
        cr_expect_eq(verify_commit_place(&history, &history.commits[i]), expected[i],
                     "commit %zu", i + 1);
    resume_history_free(&history);
}

Test(verify_plan, a_case_is_killed_after_a_commit_with_something_left_to_resume)
{
    struct resume_history history;
    vp_history(&history, VP_RUN);
    /* mid-epoch: the first one in a pass after the first, not the last */
    cr_expect_eq(verify_choose_commit(&history, COMMIT_MID_EPOCH), 4);
    cr_expect_eq(verify_choose_commit(&history, COMMIT_EPOCH_END), 6);
    resume_history_free(&history);

    vp_history(&history, VP_START "D t.bin 0 0\nB 1 1 t.bin train 0 1 4 0\nC 1 1 /s/ck\n"
                                  "D t.bin 0 1 2 3\nB 1 2 t.bin train 1 0 4 0\nC 1 2 /s/ck\n");
    cr_expect_eq(verify_choose_commit(&history, COMMIT_MID_EPOCH), 1, "the only one, in pass 0");
    cr_expect_eq(verify_choose_commit(&history, COMMIT_EPOCH_END), 2, "the last, as the only one");
    resume_history_free(&history);

    vp_history(&history, VP_START "D t.bin 0 0 1 2 3\nB 1 1 t.bin train 1 0 4 0\nC 1 1 /s/ck\n");
    cr_expect_eq(verify_choose_commit(&history, COMMIT_MID_EPOCH), 0);
    resume_history_free(&history);
}

Test(verify_plan, a_commit_is_named_by_its_train_file_position)
{
    struct resume_history history;
    vp_history(&history, VP_RUN);
    char text[160];
    verify_describe_commit(&history, &history.commits[1], text, sizeof text);
    cr_expect_str_eq(text, "commit 2: t.bin pass 0 at 2 of 4");
    verify_describe_commit(&history, &history.commits[3], text, sizeof text);
    cr_expect_str_eq(text, "commit 4: t.bin pass 1 at 0 (2 read) of 4");
    resume_history_free(&history);

    vp_history(&history, VP_START "B 1 1 a.bin train 0 0 4 0\nB 1 1 b.bin train 0 0 4 0\n"
                                  "C 1 1 /s/ck\nC 1 2 /s/ck\n");
    verify_describe_commit(&history, &history.commits[0], text, sizeof text);
    cr_expect_str_eq(text, "commit 1: a.bin pass 0 at 0 of 4 (+1 file)");
    verify_describe_commit(&history, &history.commits[1], text, sizeof text);
    cr_expect_str_eq(text, "commit 2: no data file bound");
    resume_history_free(&history);
}

Test(verify_plan, a_key_is_added_to_every_train_entry)
{
    char error[512] = "";
    char *data = verify_data_with_key("a.bin:record=8;b.bin:record=8:role=eval;c\\;d.bin:lines",
                                      "lookahead=4", error, sizeof error);
    cr_assert_not_null(data, "%s", error);
    /* the entries after the first are eval unless they say otherwise */
    cr_expect_str_eq(data, "a.bin:record=8:lookahead=4;b.bin:record=8:role=eval;c\\;d.bin:lines");
    free(data);

    data = verify_data_with_key("a.bin:record=8;c\\;d.bin:lines:role=train", "lookahead=4",
                                error, sizeof error);
    cr_assert_not_null(data, "%s", error);
    cr_expect_str_eq(data, "a.bin:record=8:lookahead=4;c\\;d.bin:lines:role=train:lookahead=4");
    free(data);

    data = verify_data_with_key("a.bin:record=8:lookahead=2", "lookahead=4", error, sizeof error);
    cr_assert_not_null(data, "%s", error);
    cr_expect_str_eq(data, "a.bin:record=8:lookahead=2", "a key already given stays as given");
    free(data);
}

Test(verify_plan, a_key_the_library_does_not_take_is_refused_with_its_message)
{
    char error[512] = "";
    cr_expect_null(verify_data_with_key("a.bin:record=8", "nonsense=1", error, sizeof error));
    cr_expect(strstr(error, "nonsense") != NULL, "%s", error);
    cr_expect_null(verify_data_with_key("a.bin:record=x", "lookahead=4", error, sizeof error));
    cr_expect(strstr(error, "ADAPTDL_DATA") != NULL, "%s", error);
}
