/* test_documented_variables.c - every variable of config.c's table is
 * documented in adaptshim(7): the manual page shim/adaptshim.7 has, in its
 * ENVIRONMENT section, an entry (a .TP tag) that names it in bold.  A
 * variable added to the table without its entry fails here, by name.
 *
 * The page is read from the source tree: ADAPTSHIM_SOURCE when set, else
 * the current directory (the unit tests run from the repository's root). */
#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_text.h"

#define PAGE "shim/adaptshim.7"

static char *read_page(void)
{
    const char *source = getenv("ADAPTSHIM_SOURCE");
    char path[4096];
    int written = snprintf(path, sizeof path, "%s/%s",
                           source != NULL && source[0] != '\0' ? source : ".", PAGE);
    cr_assert(written > 0 && (size_t)written < sizeof path, "source path too long");
    FILE *stream = fopen(path, "r");
    cr_assert_not_null(stream, "cannot open %s: run the unit tests from the repository's root "
                               "or set ADAPTSHIM_SOURCE", path);
    cr_assert_eq(fseek(stream, 0, SEEK_END), 0);
    long size = ftell(stream);
    cr_assert_gt(size, 0, "%s is empty", path);
    rewind(stream);
    char *text = malloc((size_t)size + 1);
    cr_assert_not_null(text);
    cr_assert_eq(fread(text, 1, (size_t)size, stream), (size_t)size);
    text[size] = '\0';
    fclose(stream);
    return text;
}

/* The ENVIRONMENT section: from its .SH line to the next .SH, cut in place. */
static char *environment_section(char *page)
{
    char *start = strstr(page, "\n.SH \"ENVIRONMENT\"\n");
    if (start == NULL)
        start = strstr(page, "\n.SH ENVIRONMENT\n");
    cr_assert_not_null(start, PAGE " has no ENVIRONMENT section");
    start++;
    char *end = strstr(start + 1, "\n.SH ");
    if (end != NULL)
        end[1] = '\0';
    return start;
}

/* Whether a tag line (the line after a .TP) of `section` names `name` as
 * \fBname\fR: the whole name, not a longer one it begins. */
static bool has_entry(const char *section, const char *name)
{
    char bold[256];
    int written = snprintf(bold, sizeof bold, "\\fB%s\\fR", name);
    cr_assert(written > 0 && (size_t)written < sizeof bold);
    for (const char *tp = strstr(section, ".TP\n"); tp != NULL; tp = strstr(tp + 1, ".TP\n")) {
        const char *tag = tp + strlen(".TP\n");
        const char *tag_end = strchr(tag, '\n');
        size_t tag_length = tag_end != NULL ? (size_t)(tag_end - tag) : strlen(tag);
        const char *hit = strstr(tag, bold);
        if (hit != NULL && hit + strlen(bold) <= tag + tag_length)
            return true;
    }
    return false;
}

Test(documented_variables, every_variable_of_the_configuration_table_has_an_entry_in_adaptshim_7)
{
    char *page = read_page();
    const char *section = environment_section(page);
    size_t count = config_table_variable_count();
    size_t undocumented = 0;

    cr_assert_gt(count, 0, "the configuration table is empty");
    for (size_t i = 0; i < count; i++) {
        const char *name = config_table_variable_name(i);
        if (!has_entry(section, name)) {
            undocumented++;
            cr_expect_fail("%s is read by runtime/config.c's table but has no entry in the "
                           "ENVIRONMENT section of " PAGE " (a .TP tag naming it in bold)",
                           name);
        }
    }
    cr_expect_eq(undocumented, 0, "%zu of %zu variables are undocumented", undocumented, count);
    free(page);
}
