/* test_verdict_table.c - adaptdl-verify's table (runtime/verdict_table.h):
 * the verdict of each kind of row, columns as wide as their widest cell,
 * and the per-pass lines of the rows that are not exact, named after
 * their case. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict_table.h"

static char *vt_print(const struct verdict_row *rows, size_t count)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    cr_assert_not_null(out);
    cr_assert_eq(verdict_table_print(out, rows, count), 0);
    fclose(out);
    return text;
}

Test(verdict_table, each_kind_of_row_has_its_verdict)
{
    struct resume_comparison exact = {.padding = 0}, padded = {.padding = 3},
                             loss = {.lost = 10, .repeated = 2};
    struct verdict_row row = {.kind = VERDICT_EXACT, .comparison = &exact};
    char cell[320];
    verdict_cell(&row, cell, sizeof cell);
    cr_expect_str_eq(cell, "exact");
    row.comparison = &padded;
    verdict_cell(&row, cell, sizeof cell);
    cr_expect_str_eq(cell, "exact (3 padding)");
    row = (struct verdict_row){.kind = VERDICT_NOT_EXACT, .comparison = &loss};
    verdict_cell(&row, cell, sizeof cell);
    cr_expect_str_eq(cell, "not exact: 10 lost, 2 repeated");
    row = (struct verdict_row){.kind = VERDICT_FAILED, .note = "run 2 ended with exit status 1"};
    verdict_cell(&row, cell, sizeof cell);
    cr_expect_str_eq(cell, "failed: run 2 ended with exit status 1");
    row = (struct verdict_row){.kind = VERDICT_NOT_RUN, .note = "no commit"};
    verdict_cell(&row, cell, sizeof cell);
    cr_expect_str_eq(cell, "not run: no commit");
}

Test(verdict_table, columns_line_up_and_passes_are_listed_for_rows_not_exact)
{
    struct pass_difference passes[] = {
        {.name = "train.bin", .pass = 0, .reference_records = 201, .run_records = 201},
        {.name = "train.bin", .pass = 2, .reference_records = 201, .run_records = 0,
         .lost = 201},
    };
    struct resume_comparison loss = {.passes = passes, .count = 2, .lost = 201};
    struct resume_comparison exact = {.passes = passes, .count = 1};
    struct verdict_row rows[] = {
        {.label = "mid-epoch kill", .runs = 2,
         .killed_after = "commit 8: train.bin pass 1 at 16 of 201", .kind = VERDICT_NOT_EXACT,
         .comparison = &loss},
        {.label = "  with ADAPTDL_RESUME=continue", .runs = 2,
         .killed_after = "commit 8: train.bin pass 1 at 16 of 201", .kind = VERDICT_EXACT,
         .comparison = &exact},
        {.label = "  with resume=whole-pass", .kind = VERDICT_NOT_RUN, .note = "not accepted"},
        {.label = "epoch-end kill", .runs = 3, .killed_after = "commit 7", .kind = VERDICT_NOT_EXACT,
         .comparison = &loss},
    };
    char *text = vt_print(rows, 4);
    const char *expected_lines[] = {
        "case                            runs  killed after                             verdict\n",
        "mid-epoch kill                  2     commit 8: train.bin pass 1 at 16 of 201  not exact: 201 lost, 0 repeated\n",
        "  with ADAPTDL_RESUME=continue  2     commit 8: train.bin pass 1 at 16 of 201  exact\n",
        "  with resume=whole-pass        -     -                                        not run: not accepted\n",
        "epoch-end kill                  3     commit 7                                 not exact: 201 lost, 0 repeated\n",
        "\nrecords lost or repeated, by pass, against the uninterrupted run:\n",
        "  mid-epoch kill: train.bin pass 2: 201 lost, 0 repeated (uninterrupted run: 201 records, this case: 0)\n",
        "  epoch-end kill: train.bin pass 2: 201 lost, 0 repeated (uninterrupted run: 201 records, this case: 0)\n",
    };
    size_t offset = 0;
    for (size_t i = 0; i < sizeof expected_lines / sizeof expected_lines[0]; i++) {
        cr_expect(strncmp(text + offset, expected_lines[i], strlen(expected_lines[i])) == 0,
                  "line %zu: expected\n%s\ngot\n%s", i, expected_lines[i], text + offset);
        offset += strlen(expected_lines[i]);
        if (offset > strlen(text))
            break;
    }
    cr_expect_eq(strlen(text), offset, "nothing more: %s", text);
    free(text);
}

Test(verdict_table, a_trial_row_not_exact_is_named_after_its_case)
{
    struct pass_difference passes[] = {
        {.name = "r.bin", .pass = 1, .reference_records = 10, .run_records = 12, .repeated = 2}};
    struct resume_comparison repeats = {.passes = passes, .count = 1, .repeated = 2};
    struct verdict_row rows[] = {
        {.label = "mid-epoch kill", .runs = 1, .kind = VERDICT_FAILED, .note = "run 2 crashed"},
        {.label = "  with ADAPTDL_RESUME=replay", .runs = 2, .kind = VERDICT_NOT_EXACT,
         .comparison = &repeats},
    };
    char *text = vt_print(rows, 2);
    cr_expect(strstr(text, "  mid-epoch kill, with ADAPTDL_RESUME=replay: r.bin pass 1: 0 lost, "
                           "2 repeated (uninterrupted run: 10 records, this case: 12)\n") != NULL,
              "%s", text);
    free(text);
}

Test(verdict_table, a_table_of_exact_rows_has_no_pass_lines)
{
    struct resume_comparison exact = {0};
    struct verdict_row rows[] = {{.label = "mid-epoch kill", .runs = 2, .killed_after = "commit 1",
                                  .kind = VERDICT_EXACT, .comparison = &exact}};
    char *text = vt_print(rows, 1);
    cr_expect_str_eq(text, "case            runs  killed after  verdict\n"
                           "mid-epoch kill  2     commit 1      exact\n");
    free(text);
}
