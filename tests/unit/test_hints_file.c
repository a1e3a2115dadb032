/* test_hints_file.c - reading ADAPTDL_HINTS_FILE (runtime/hints_file.h): the
 * shim's own layout, the same object written any other valid way, and one
 * clear line for every kind of malformed file, with nothing half-read. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hints_file.h"
#include "metrics.h"

static struct replica_hints hints;
static char error[512];

static int parse(const char *text)
{
    return hints_parse(text, strlen(text), &hints, error, sizeof error);
}

/* What shim/events.c writes, built with the same line builder. */
Test(hints_file, reads_the_layout_the_shim_writes)
{
    struct json_line line;
    json_line_begin(&line, "hints", 1796307514.885035);
    json_line_begin_object(&line, "perf_params");
    json_line_add_double(&line, "alpha_c", 0.0022459021945606659);
    json_line_add_double(&line, "gamma", 1);
    json_line_end_object(&line);
    json_line_add_double(&line, "grad_sqr", 0.088631296165774726);
    json_line_add_uint(&line, "initial_global_bsz", 8);
    json_line_add_uint(&line, "max_profiled_replicas", 2);
    json_line_begin_object(&line, "goodput_by_replicas");
    json_line_add_double(&line, "1", 1781.0145039747979);
    json_line_add_double(&line, "2", 2374.6855712929751);
    json_line_add_double(&line, "3", NAN);   /* written as null */
    json_line_add_double(&line, "4", 3000.5);
    json_line_end_object(&line);
    json_line_end(&line);
    cr_assert(json_line_is_writable(&line));
    cr_assert_eq(hints_parse(line.text, line.length, &hints, error, sizeof error), 0, "%s",
                 error);
    cr_expect_eq(hints.goodputs.goodput[1], 1781.0145039747979, "read back exactly");
    cr_expect_eq(hints.goodputs.goodput[2], 2374.6855712929751);
    cr_expect(isnan(hints.goodputs.goodput[3]), "null: no prediction");
    cr_expect_eq(hints.goodputs.goodput[4], 3000.5);
    cr_expect(isnan(hints.goodputs.goodput[5]));
    cr_expect_eq(hints.max_profiled_replicas, 2);
}

Test(hints_file, any_valid_spelling_of_the_object_is_read)
{
    const char *text = "\n  {\r\n\t\"note\" : \"a \\\"quoted\\\" \\u00e9 string\",\n"
                       "  \"nested\": {\"deep\": [1, -2.5e-3, true, false, null, {\"x\": []}]},\n"
                       "  \"goodput_by_replicas\":{\"2\":2E2,\"10\":-0.0,\"1\":1e1 },\n"
                       "  \"later\": [] }\n\n";
    cr_assert_eq(parse(text), 0, "%s", error);
    cr_expect_eq(hints.goodputs.goodput[1], 10.0);
    cr_expect_eq(hints.goodputs.goodput[2], 200.0);
    cr_expect_eq(hints.goodputs.goodput[10], 0.0);
    cr_expect_eq(hints.max_profiled_replicas, 0, "absent");
}

Test(hints_file, an_empty_table_is_no_prediction)
{
    cr_assert_eq(parse("{\"goodput_by_replicas\": {}}"), 0, "%s", error);
    for (int replicas = 0; replicas <= REPLICA_CHOICE_MAX_REPLICAS; replicas++)
        cr_expect(isnan(hints.goodputs.goodput[replicas]));
}

/* Every malformed file: -1, one line that says where and what, and a table
 * with nothing in it (never half of one). */
Test(hints_file, malformed_files_are_one_line_and_read_nothing)
{
    static const struct {
        const char *text;
        const char *says;
    } cases[] = {
        {"", "at its end: expected a JSON object"},
        {"   ", "at its end: expected a JSON object"},
        {"[1, 2]", "byte 1: expected a JSON object"},
        {"{\"goodput_by_replicas\": {\"1\": 5}", "at its end: expected ',' or '}'"},
        {"{\"goodput_by_replicas\": {\"1\": 5}} x", "byte 35: text after the JSON object"},
        {"{\"a\": 1}", "no \"goodput_by_replicas\" member"},
        {"{\"goodput_by_replicas\": [1, 2]}", "goodput_by_replicas is not an object"},
        {"{\"goodput_by_replicas\": {\"0\": 1}}", "has the key \"0\""},
        {"{\"goodput_by_replicas\": {\"65\": 1}}", "has the key \"65\""},
        {"{\"goodput_by_replicas\": {\"01\": 1}}", "has the key \"01\""},
        {"{\"goodput_by_replicas\": {\"two\": 1}}", "has the key \"two\""},
        {"{\"goodput_by_replicas\": {\"1\": \"fast\"}}", "a number or null as the goodput of 1"},
        {"{\"goodput_by_replicas\": {\"1\": 1, \"2\": }}", "a number or null as the goodput of 2"},
        {"{\"goodput_by_replicas\": {\"1\": 1 \"2\": 2}}", "expected ',' or '}' in goodput_by"},
        {"{\"goodput_by_replicas\": {\"1\": 01}}", "expected ',' or '}' in goodput_by"},
        {"{\"goodput_by_replicas\": {\"1\": 1.}}", "no digit after its '.'"},
        {"{\"goodput_by_replicas\": {\"1\": 1e}}", "no digit in its exponent"},
        {"{\"a\": tru, \"goodput_by_replicas\": {}}", "expected a JSON value"},
        {"{\"a\": \"open, \"goodput_by_replicas\": {}}", "expected ',' or '}'"},
        {"{\"a\": \"never closed", "a string that never ends"},
        {"{\"a\": \"bad \\q escape\"}", "an unknown escape"},
        {"{\"a\": \"\\u12\"}", "four hex digits"},
        {"{\"a\": \"tab\there\"}", "a control character"},
        {"{\"a\" 1}", "expected ':'"},
        {"{\"a\": 1,}", "expected a string"},
        {"{\"max_profiled_replicas\": \"2\", \"goodput_by_replicas\": {}}", "expected a number"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_expect_eq(parse(cases[i].text), -1, "case %zu accepted: %s", i, cases[i].text);
        cr_expect(strstr(error, cases[i].says) != NULL, "case %zu: \"%s\" does not say \"%s\"",
                  i, error, cases[i].says);
        cr_expect(strchr(error, '\n') == NULL, "one line: %s", error);
        cr_expect(isnan(hints.goodputs.goodput[1]), "case %zu: nothing is kept", i);
    }
}

Test(hints_file, a_half_read_table_is_not_kept)
{
    cr_expect_eq(parse("{\"goodput_by_replicas\": {\"1\": 100, \"2\": 180, \"x\": 1}}"), -1);
    cr_expect(isnan(hints.goodputs.goodput[1]) && isnan(hints.goodputs.goodput[2]));
}

Test(hints_file, nesting_is_bounded)
{
    char text[512] = "{\"a\": ";
    for (int i = 0; i < 40; i++)
        strcat(text, "[");
    for (int i = 0; i < 40; i++)
        strcat(text, "]");
    strcat(text, ", \"goodput_by_replicas\": {}}");
    cr_expect_eq(parse(text), -1);
    cr_expect(strstr(error, "nested deeper than") != NULL, "%s", error);
}

Test(hints_file, binary_content_is_refused)
{
    const char text[] = "{\"goodput_by_replicas\": {\"1\": 1}}\0garbage";
    cr_expect_eq(hints_parse(text, sizeof text - 1, &hints, error, sizeof error), -1);
    cr_expect(strstr(error, "NUL byte") != NULL, "%s", error);
}

Test(hints_file, a_truncated_copy_of_a_valid_file_never_parses)
{
    const char *text = "{\"type\": \"hints\", \"max_profiled_replicas\": 1, "
                       "\"goodput_by_replicas\": {\"1\": 1781.5, \"2\": 2374.25}}";
    size_t length = strlen(text);
    for (size_t cut = 0; cut < length; cut++) {
        cr_expect_eq(hints_parse(text, cut, &hints, error, sizeof error), -1, "cut at %zu", cut);
        cr_expect(error[0] != '\0');
    }
    cr_expect_eq(hints_parse(text, length, &hints, error, sizeof error), 0, "%s", error);
}
