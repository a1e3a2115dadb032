/* verdict_table.c - adaptdl-verify's table of verdicts (see verdict_table.h). */
#include "verdict_table.h"

#include <inttypes.h>
#include <string.h>

#define VERDICT_CELL_SIZE 320
#define VERDICT_COLUMNS 4

void verdict_cell(const struct verdict_row *row, char *out, size_t out_size)
{
    const struct resume_comparison *comparison = row->comparison;
    switch (row->kind) {
    case VERDICT_EXACT:
        if (comparison != NULL && comparison->padding > 0)
            snprintf(out, out_size, "exact (%" PRIu64 " padding)", comparison->padding);
        else
            snprintf(out, out_size, "exact");
        return;
    case VERDICT_NOT_EXACT:
        snprintf(out, out_size, "not exact: %" PRIu64 " lost, %" PRIu64 " repeated",
                 comparison != NULL ? comparison->lost : 0,
                 comparison != NULL ? comparison->repeated : 0);
        return;
    case VERDICT_FAILED:
        snprintf(out, out_size, "failed: %s", row->note);
        return;
    case VERDICT_NOT_RUN:
        snprintf(out, out_size, "not run: %s", row->note);
        return;
    }
    snprintf(out, out_size, "?");
}

/* The row's cells: case, runs, killed after, verdict. */
static void verdict_row_cells(const struct verdict_row *row,
                              char cells[VERDICT_COLUMNS][VERDICT_CELL_SIZE])
{
    snprintf(cells[0], VERDICT_CELL_SIZE, "%s", row->label);
    if (row->runs > 0)
        snprintf(cells[1], VERDICT_CELL_SIZE, "%zu", row->runs);
    else
        snprintf(cells[1], VERDICT_CELL_SIZE, "-");
    snprintf(cells[2], VERDICT_CELL_SIZE, "%s", row->killed_after[0] ? row->killed_after : "-");
    verdict_cell(row, cells[3], VERDICT_CELL_SIZE);
}

static int verdict_print_line(FILE *out, char cells[VERDICT_COLUMNS][VERDICT_CELL_SIZE],
                              const size_t widths[VERDICT_COLUMNS])
{
    for (int column = 0; column < VERDICT_COLUMNS - 1; column++)
        if (fprintf(out, "%-*s  ", (int)widths[column], cells[column]) < 0)
            return -1;
    return fprintf(out, "%s\n", cells[VERDICT_COLUMNS - 1]) < 0 ? -1 : 0;
}

/* The per-pass lines of a row that is not exact, named after its case
 * (a trial row's case is the last row above it that is not indented). */
static int verdict_print_passes(FILE *out, const char *case_label, const struct verdict_row *row)
{
    const struct resume_comparison *comparison = row->comparison;
    if (comparison == NULL)
        return 0;
    const char *label = row->label;
    while (*label == ' ')
        label++;
    for (size_t i = 0; i < comparison->count; i++) {
        const struct pass_difference *pass = &comparison->passes[i];
        if (pass->lost == 0 && pass->repeated == 0)
            continue;
        if (fprintf(out, "  %s%s%s: %s pass %" PRIu64 ": %" PRIu64 " lost, %" PRIu64
                    " repeated (uninterrupted run: %" PRIu64 " records, this case: %" PRIu64
                    ")\n", case_label, label == row->label ? "" : ", ",
                    label == row->label ? "" : label, pass->name, pass->pass, pass->lost,
                    pass->repeated, pass->reference_records, pass->run_records) < 0)
            return -1;
    }
    return 0;
}

int verdict_table_print(FILE *out, const struct verdict_row *rows, size_t count)
{
    static const char *const headings[VERDICT_COLUMNS] = {"case", "runs", "killed after",
                                                          "verdict"};
    char cells[VERDICT_COLUMNS][VERDICT_CELL_SIZE];
    size_t widths[VERDICT_COLUMNS];
    for (int column = 0; column < VERDICT_COLUMNS; column++)
        widths[column] = strlen(headings[column]);
    for (size_t i = 0; i < count; i++) {
        verdict_row_cells(&rows[i], cells);
        for (int column = 0; column < VERDICT_COLUMNS; column++)
            if (strlen(cells[column]) > widths[column])
                widths[column] = strlen(cells[column]);
    }
    for (int column = 0; column < VERDICT_COLUMNS; column++)
        snprintf(cells[column], VERDICT_CELL_SIZE, "%s", headings[column]);
    if (verdict_print_line(out, cells, widths) != 0)
        return -1;
    bool any_not_exact = false;
    for (size_t i = 0; i < count; i++) {
        verdict_row_cells(&rows[i], cells);
        if (verdict_print_line(out, cells, widths) != 0)
            return -1;
        any_not_exact = any_not_exact || rows[i].kind == VERDICT_NOT_EXACT;
    }
    if (!any_not_exact)
        return 0;
    if (fprintf(out, "\nrecords lost or repeated, by pass, against the uninterrupted run:\n") < 0)
        return -1;
    const char *case_label = "";
    for (size_t i = 0; i < count; i++) {
        if (rows[i].label[0] != ' ')
            case_label = rows[i].label;
        if (rows[i].kind == VERDICT_NOT_EXACT &&
            verdict_print_passes(out, case_label, &rows[i]) != 0)
            return -1;
    }
    return 0;
}
