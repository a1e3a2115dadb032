/* test_resume_history.c - a job's trained history from its runs' delivery
 * traces, and the per-pass comparison with an uninterrupted run
 * (runtime/resume_history.h).
 *
 * One data file f.bin of 4 records, two passes.  The uninterrupted run
 * delivers pass 0 as 2 0 3 1 and pass 1 as 1 3 0 2.  A killed run
 * delivers pass 0, one record of pass 1, commits checkpoint A (pass 1 at
 * index 1), delivers two more and is killed; what its restart does decides
 * the verdict.  Every expected count is worked out by hand in the test. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "resume_history.h"

#define RH_START "adaptshim-trace 1 pid 10 rank 0 replicas 1\n"
#define RH_START_RANK(r) "adaptshim-trace 1 pid 1" #r " rank " #r " replicas 2\n"
#define RH_REFERENCE RH_START "D f.bin 0 2 0 3 1\nD f.bin 1 1 3 0 2\n"
/* killed after checkpoint A, two records past it */
#define RH_KILLED RH_START "D f.bin 0 2 0 3 1\nD f.bin 1 1\n"                          \
    "B 8 000000000000000a f.bin train 1 1 4 0\nC 8 000000000000000a /s/ck\n"             \
    "D f.bin 1 3 0\nP 10 1\n"
#define RH_LOAD_A "L 8 000000000000000a /s/ck\n"

static void rh_add(struct resume_history *history, const char *const *texts, size_t count)
{
    struct trace_log logs[4];
    const struct trace_log *pointers[4];
    char error[512] = "";
    for (size_t i = 0; i < count; i++) {
        cr_assert_eq(trace_log_parse(&logs[i], texts[i], strlen(texts[i]), "test", error,
                                     sizeof error), 0, "%s", error);
        pointers[i] = &logs[i];
    }
    cr_assert_eq(resume_history_add_run(history, pointers, count, error, sizeof error), 0, "%s",
                 error);
    for (size_t i = 0; i < count; i++)
        trace_log_free(&logs[i]);
}

static void rh_add_one(struct resume_history *history, const char *text)
{
    rh_add(history, &text, 1);
}

/* The uninterrupted run, and a job of first_run followed by a restart whose
 * ranks wrote the traces restart_ranks[0..rank_count). */
static void rh_compare_runs(const char *first_run, const char *const *restart_ranks,
                            size_t rank_count, struct resume_history *reference,
                            struct resume_history *run, struct resume_comparison *comparison)
{
    resume_history_init(reference);
    resume_history_init(run);
    rh_add_one(reference, RH_REFERENCE);
    rh_add_one(run, first_run);
    rh_add(run, restart_ranks, rank_count);
    char error[512] = "";
    cr_assert_eq(resume_compare(reference, run, comparison, error, sizeof error), 0, "%s", error);
}

/* The uninterrupted run, and the killed run followed by `restart`. */
static void rh_compare(const char *restart, struct resume_history *reference,
                       struct resume_history *run, struct resume_comparison *comparison)
{
    rh_compare_runs(RH_KILLED, &restart, 1, reference, run, comparison);
}

static const struct pass_difference *rh_pass(const struct resume_comparison *comparison,
                                             uint64_t pass)
{
    for (size_t i = 0; i < comparison->count; i++)
        if (strcmp(comparison->passes[i].name, "f.bin") == 0 && comparison->passes[i].pass == pass)
            return &comparison->passes[i];
    cr_assert_fail("no pass %llu in the comparison", (unsigned long long)pass);
    return NULL;
}

static void rh_free(struct resume_history *reference, struct resume_history *run,
                    struct resume_comparison *comparison)
{
    resume_comparison_free(comparison);
    resume_history_free(reference);
    resume_history_free(run);
}

Test(resume_history, a_restart_that_serves_the_records_after_the_commit_is_exact)
{
    struct resume_history reference, run;
    struct resume_comparison comparison;
    rh_compare(RH_START RH_LOAD_A "D f.bin 1 3 0 2\n", &reference, &run, &comparison);
    cr_expect(resume_comparison_exact(&comparison), "lost %llu, repeated %llu",
              (unsigned long long)comparison.lost, (unsigned long long)comparison.repeated);
    cr_expect_eq(comparison.count, 2);
    cr_expect_eq(rh_pass(&comparison, 1)->run_records, 4,
                 "1 before the commit and 3 after the restart; the 2 after the commit are gone");
    cr_expect_eq(run.runs[1].start, HISTORY_START_RESTORED);
    cr_expect_eq(run.runs[1].restored_commit, 0);
    cr_expect(run.runs[0].stopped);
    rh_free(&reference, &run, &comparison);
}

Test(resume_history, a_pass_served_empty_after_the_restart_is_lost)
{
    struct resume_history reference, run;
    struct resume_comparison comparison;
    rh_compare(RH_START RH_LOAD_A, &reference, &run, &comparison);
    cr_expect_not(resume_comparison_exact(&comparison));
    cr_expect_eq(comparison.lost, 3);
    cr_expect_eq(comparison.repeated, 0);
    cr_expect_eq(rh_pass(&comparison, 0)->lost, 0);
    cr_expect_eq(rh_pass(&comparison, 1)->lost, 3);
    cr_expect_eq(rh_pass(&comparison, 1)->reference_records, 4);
    cr_expect_eq(rh_pass(&comparison, 1)->run_records, 1);
    rh_free(&reference, &run, &comparison);
}

Test(resume_history, a_record_served_again_after_the_restart_is_repeated)
{
    struct resume_history reference, run;
    struct resume_comparison comparison;
    rh_compare(RH_START RH_LOAD_A "D f.bin 1 1 3 0 2\n", &reference, &run, &comparison);
    cr_expect_eq(comparison.lost, 0);
    cr_expect_eq(comparison.repeated, 1, "record 1 was trained before the commit and again");
    cr_expect_eq(rh_pass(&comparison, 1)->repeated, 1);
    rh_free(&reference, &run, &comparison);
}

Test(resume_history, passes_only_one_side_has_are_lost_or_repeated_whole)
{
    struct resume_history reference, run;
    struct resume_comparison comparison;
    rh_compare(RH_START RH_LOAD_A "D f.bin 1 3 0 2\nD f.bin 2 0 1 2 3\n", &reference, &run,
               &comparison);
    cr_expect_eq(comparison.lost, 0);
    cr_expect_eq(comparison.repeated, 4);
    cr_expect_eq(rh_pass(&comparison, 2)->reference_records, 0);
    cr_expect_eq(rh_pass(&comparison, 2)->repeated, 4);
    rh_free(&reference, &run, &comparison);
}

/* A snapshot that counts a record in flight (lookahead=1) binds one record
 * short: that record is served again, and is not a repeat.  Without the
 * in-flight count, the same deliveries repeat record 3. */
Test(resume_history, records_in_flight_at_the_commit_are_trained_only_if_not_counted)
{
    static const struct {
        const char *name;
        const char *binding;        /* the commit's B line: its last field is in flight */
        bool exact;
        uint64_t repeated;
    } cases[] = {
        {"records_counted_in_flight_are_not_trained",
         "B 8 000000000000000a f.bin train 1 1 4 1\n", true, 0},
        {"records_handed_out_before_the_commit_are_trained",
         "B 8 000000000000000a f.bin train 1 1 4 0\n", false, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char first_run[512];
        snprintf(first_run, sizeof first_run,
                 RH_START "D f.bin 0 2 0 3 1\nD f.bin 1 1 3\n%sC 8 000000000000000a /s/ck\n",
                 cases[i].binding);
        const char *restart = RH_START RH_LOAD_A "D f.bin 1 3 0 2\n";
        struct resume_history reference, run;
        struct resume_comparison comparison;
        rh_compare_runs(first_run, &restart, 1, &reference, &run, &comparison);
        cr_expect_eq(resume_comparison_exact(&comparison), cases[i].exact,
                     "%s: lost %llu, repeated %llu", cases[i].name,
                     (unsigned long long)comparison.lost,
                     (unsigned long long)comparison.repeated);
        cr_expect_eq(comparison.repeated, cases[i].repeated, "%s", cases[i].name);
        cr_expect_eq(comparison.lost, 0, "%s", cases[i].name);
        rh_free(&reference, &run, &comparison);
    }
}

/* A restart that loads no checkpoint trains from scratch: its history
 * starts over, and a whole new run is exact. */
Test(resume_history, a_restart_without_a_checkpoint_starts_the_history_over)
{
    struct resume_history reference, run;
    struct resume_comparison comparison;
    rh_compare(RH_START "D f.bin 0 1 0 2 3\nD f.bin 1 0 1 2 3\n", &reference, &run, &comparison);
    cr_expect(resume_comparison_exact(&comparison));
    cr_expect_eq(run.runs[1].start, HISTORY_START_FRESH);
    rh_free(&reference, &run, &comparison);
}

Test(resume_history, a_checkpoint_no_commit_wrote_starts_the_history_over)
{
    struct resume_history reference, run;
    struct resume_comparison comparison;
    rh_compare(RH_START "L 8 000000000000000b /s/ck\nD f.bin 1 3 0 2\n", &reference, &run,
               &comparison);
    cr_expect_eq(run.runs[1].start, HISTORY_START_UNKNOWN);
    cr_expect_eq(run.runs[1].loaded.hash, 0xb);
    cr_expect_eq(comparison.lost, 5, "pass 0 and record 1 of pass 1 were dropped");
    rh_free(&reference, &run, &comparison);
}

/* Two replicas in the last run: their deliveries add up, and the padding
 * (record 3 again on rank 1) is counted apart. */
Test(resume_history, replicas_of_a_run_add_up_and_padding_is_apart)
{
    struct resume_history reference, run;
    struct resume_comparison comparison;
    const char *ranks[] = {RH_START_RANK(0) RH_LOAD_A "D f.bin 1 3 2\n",
                           RH_START_RANK(1) RH_LOAD_A "D f.bin 1 0 3*\n"};
    rh_compare_runs(RH_KILLED, ranks, 2, &reference, &run, &comparison);
    cr_expect(resume_comparison_exact(&comparison), "lost %llu, repeated %llu",
              (unsigned long long)comparison.lost, (unsigned long long)comparison.repeated);
    cr_expect_eq(comparison.padding, 1);
    cr_expect_eq(rh_pass(&comparison, 1)->padding, 1);
    uint64_t padding = 0;
    cr_expect_eq(resume_history_records(&run, &padding), 9);
    cr_expect_eq(padding, 1);
    rh_free(&reference, &run, &comparison);
}

/* Run 2 restores A and commits B, then dies; run 3 goes back to A (B's
 * history stood on what run 3 drops); run 4 loading B again finds it
 * superseded. */
Test(resume_history, a_commit_whose_history_was_taken_back_is_not_restored)
{
    struct resume_history run;
    resume_history_init(&run);
    rh_add_one(&run, RH_KILLED);
    rh_add_one(&run, RH_START RH_LOAD_A "D f.bin 1 3\n"
                     "B 8 000000000000000b f.bin train 1 2 4 0\nC 8 000000000000000b /s/ck\n");
    rh_add_one(&run, RH_START RH_LOAD_A);
    cr_expect_eq(run.runs[2].start, HISTORY_START_RESTORED);
    cr_expect_eq(run.runs[2].restored_commit, 0);
    cr_expect(run.commits[1].superseded);
    cr_expect_eq(run.files[0].count, 5, "pass 0 and record 1 of pass 1");
    rh_add_one(&run, RH_START "L 8 000000000000000b /s/ck\n");
    cr_expect_eq(run.runs[3].start, HISTORY_START_UNKNOWN);
    cr_expect_eq(run.files[0].count, 0);
    cr_expect_eq(run.commit_count, 2);
    cr_expect_eq(run.commits[1].ordinal, 2);
    cr_expect_eq(run.commits[1].run, 1);
    resume_history_free(&run);
}

/* A capture whose snapshot was not written (no C line) binds nothing; the
 * commit after it, of other content, has its own binding. */
Test(resume_history, a_binding_counts_only_for_its_own_commit)
{
    struct resume_history run;
    resume_history_init(&run);
    rh_add_one(&run, RH_START "D f.bin 0 2 0\nB 8 00000000000000c1 f.bin train 0 2 4 0\n"
                     "D f.bin 0 3\nB 8 00000000000000c2 f.bin train 0 3 4 0\n"
                     "C 8 00000000000000c2 /s/ck\n");
    cr_assert_eq(run.commit_count, 1);
    const struct history_binding *binding = &run.commits[0].bindings[0];
    cr_expect(binding->bound);
    cr_expect_eq(binding->index, 3);
    cr_expect_eq(binding->length, 3);
    resume_history_free(&run);
}
