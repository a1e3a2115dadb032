/* test_metrics.c - JSON lines for ADAPTDL_METRICS_FILE (adaptshim(7) "Metrics
 * file"; the decision events: "Decisions").
 *
 * Lines are built, written into a file of a fresh mkdtemp directory, read
 * back and checked two ways: exact strings where the format matters, and a
 * tiny JSON syntax checker (below) for everything a reader must be able to
 * parse.  The rate-limiting tests drive the writer with fake time, so they
 * are exact and do not sleep. */
#include <criterion/criterion.h>

#include <errno.h>
#include <float.h>
#include <ftw.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metrics.h"

static char *metrics_test_directory;
static char metrics_test_error[1024];

static int metrics_remove_entry(const char *path, const struct stat *status, int kind,
                                struct FTW *walk)
{
    return remove(path);
}

static void metrics_make_directory(void)
{
    metrics_test_directory = strdup("/tmp/adaptshim-test-metrics-XXXXXX");
    cr_assert_not_null(metrics_test_directory);
    cr_assert_not_null(mkdtemp(metrics_test_directory), "mkdtemp: %s", strerror(errno));
}

static void metrics_remove_directory(void)
{
    nftw(metrics_test_directory, metrics_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(metrics_test_directory);
}

TestSuite(metrics, .init = metrics_make_directory, .fini = metrics_remove_directory);

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static void metrics_path(char *out, size_t out_size, const char *name)
{
    int length = snprintf(out, out_size, "%s/%s", metrics_test_directory, name);
    cr_assert(length > 0 && (size_t)length < out_size);
}

static void metrics_open_named(struct metrics_writer *writer, const char *name, char *path,
                               size_t path_size)
{
    metrics_path(path, path_size, name);
    cr_assert_eq(metrics_writer_open(writer, path, 0, metrics_test_error,
                                     sizeof metrics_test_error),
                 0, "%s", metrics_test_error);
}

/* Whole file as a NUL-terminated string (the writer never writes NULs). */
static char *metrics_read_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    cr_assert_not_null(file, "fopen %s: %s", path, strerror(errno));
    size_t capacity = 1 << 16, used = 0;
    char *text = malloc(capacity);
    cr_assert_not_null(text);
    for (;;) {
        if (used + 4096 + 1 > capacity) {
            capacity *= 2;
            text = realloc(text, capacity);
            cr_assert_not_null(text);
        }
        size_t got = fread(text + used, 1, 4096, file);
        used += got;
        if (got == 0)
            break;
    }
    fclose(file);
    text[used] = '\0';
    *size = used;
    return text;
}

/* The tiny JSON checker: returns the position after one value, or NULL when
 * the text is not JSON.  Whitespace is skipped around values. */
static const char *json_check_value(const char *cursor);

static const char *json_skip_space(const char *cursor)
{
    while (*cursor == ' ' || *cursor == '\t' || *cursor == '\r' || *cursor == '\n')
        cursor++;
    return cursor;
}

static const char *json_check_string(const char *cursor)
{
    if (*cursor++ != '"')
        return NULL;
    while (*cursor != '"') {
        unsigned char byte = (unsigned char)*cursor;
        if (byte == '\0' || byte < 0x20)
            return NULL;
        if (byte == '\\') {
            cursor++;
            if (*cursor == 'u') {
                for (int digit = 1; digit <= 4; digit++)
                    if (!strchr("0123456789abcdefABCDEF", cursor[digit]) || !cursor[digit])
                        return NULL;
                cursor += 5;
                continue;
            }
            if (!*cursor || !strchr("\"\\/bfnrt", *cursor))
                return NULL;
        }
        cursor++;
    }
    return cursor + 1;
}

static const char *json_check_number(const char *cursor)
{
    const char *start = cursor;
    if (*cursor == '-')
        cursor++;
    if (*cursor == '0')
        cursor++;
    else if (*cursor >= '1' && *cursor <= '9')
        while (*cursor >= '0' && *cursor <= '9')
            cursor++;
    else
        return NULL;
    if (*cursor == '.') {
        cursor++;
        if (!(*cursor >= '0' && *cursor <= '9'))
            return NULL;
        while (*cursor >= '0' && *cursor <= '9')
            cursor++;
    }
    if (*cursor == 'e' || *cursor == 'E') {
        cursor++;
        if (*cursor == '+' || *cursor == '-')
            cursor++;
        if (!(*cursor >= '0' && *cursor <= '9'))
            return NULL;
        while (*cursor >= '0' && *cursor <= '9')
            cursor++;
    }
    return cursor > start ? cursor : NULL;
}

static const char *json_check_object(const char *cursor)
{
    cursor = json_skip_space(cursor + 1);
    if (*cursor == '}')
        return cursor + 1;
    for (;;) {
        cursor = json_check_string(json_skip_space(cursor));
        if (cursor == NULL)
            return NULL;
        cursor = json_skip_space(cursor);
        if (*cursor++ != ':')
            return NULL;
        cursor = json_check_value(cursor);
        if (cursor == NULL)
            return NULL;
        cursor = json_skip_space(cursor);
        if (*cursor == '}')
            return cursor + 1;
        if (*cursor++ != ',')
            return NULL;
    }
}

static const char *json_check_value(const char *cursor)
{
    cursor = json_skip_space(cursor);
    if (*cursor == '{')
        return json_check_object(cursor);
    if (*cursor == '"')
        return json_check_string(cursor);
    if (strncmp(cursor, "true", 4) == 0)
        return cursor + 4;
    if (strncmp(cursor, "false", 5) == 0)
        return cursor + 5;
    if (strncmp(cursor, "null", 4) == 0)
        return cursor + 4;
    return json_check_number(cursor);
}

/* True when [line, line + length) is exactly one JSON object. */
static bool json_is_one_object(const char *line, size_t length)
{
    char *copy = strndup(line, length);
    cr_assert_not_null(copy);
    const char *end = copy[0] == '{' ? json_check_value(copy) : NULL;
    bool valid = end != NULL && *json_skip_space(end) == '\0';
    free(copy);
    return valid;
}

/* Asserts that the file holds only complete lines, each one JSON object
 * ending in '\n'; returns how many. */
static size_t metrics_assert_complete_lines(const char *text, size_t size)
{
    cr_assert(size == 0 || text[size - 1] == '\n', "file does not end with a newline");
    size_t count = 0;
    const char *line = text;
    while (line < text + size) {
        const char *newline = memchr(line, '\n', (size_t)(text + size - line));
        cr_assert_not_null(newline);
        cr_assert(json_is_one_object(line, (size_t)(newline - line)), "not JSON: %.*s",
                  (int)(newline - line), line);
        count++;
        line = newline + 1;
    }
    return count;
}

/* The file at path holds exactly `expected` whole JSON lines. */
static void assert_file_has_complete_lines(const char *path, size_t expected)
{
    size_t size;
    char *text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), expected, "%s: %s", path, text);
    free(text);
}

/* Start of the value of "key" in a line (keys are unique in these tests). */
static const char *json_value_of(const char *text, const char *key)
{
    char needle[256];
    snprintf(needle, sizeof needle, "\"%s\": ", key);
    const char *found = strstr(text, needle);
    cr_assert_not_null(found, "no \"%s\" in %s", key, text);
    return found + strlen(needle);
}

static uint64_t json_step_of_line(const char *line)
{
    return strtoull(json_value_of(line, "step"), NULL, 10);
}

static void metrics_build_step(struct json_line *line, uint64_t step, double time_seconds)
{
    json_line_begin(line, "step", time_seconds);
    json_line_add_uint(line, "step", step);
    json_line_add_uint(line, "epoch", 0);
    json_line_add_double(line, "step_time", 0.125);
    json_line_end(line);
}

/* ---------------------------------------------------------------------------
 * Building lines
 * ------------------------------------------------------------------------ */

/* The line was finished within its buffer and is exactly `expected`. */
static void assert_line_is(const struct json_line *line, const char *expected)
{
    cr_assert(json_line_is_writable(line));
    cr_assert_eq(line->length, strlen(expected), "got %.*s", (int)line->length, line->text);
    cr_assert_arr_eq(line->text, expected, line->length, "got %.*s", (int)line->length,
                     line->text);
}

Test(metrics, exact_line_with_every_kind_of_member)
{
    struct json_line line;
    json_line_begin(&line, "decision", 12.5);
    json_line_add_bool(&line, "restart", true);
    json_line_begin_object(&line, "perf_params");
    json_line_add_double(&line, "alpha_c", 0.5);
    json_line_add_double(&line, "beta_c", 0.25);
    json_line_end_object(&line);
    json_line_add_uint(&line, "replicas", 4);
    json_line_add_int(&line, "delta", -3);
    json_line_add_null(&line, "nothing");
    json_line_add_double_or_null_if(&line, "efficiency", false, 0.9);
    json_line_add_double_or_null_if(&line, "goodput", true, 2.0);
    json_line_add_bool(&line, "final", false);
    json_line_add_string(&line, "reason", "speedup");
    json_line_add_string(&line, "absent", NULL);
    json_line_end(&line);

    assert_line_is(&line,
                   "{\"type\": \"decision\", \"time\": 12.5, \"restart\": true, "
                   "\"perf_params\": {\"alpha_c\": 0.5, \"beta_c\": 0.25}, \"replicas\": 4, "
                   "\"delta\": -3, \"nothing\": null, \"efficiency\": null, \"goodput\": 2, "
                   "\"final\": false, \"reason\": \"speedup\", \"absent\": null}\n");
}

Test(metrics, empty_nested_object_and_integer_extremes)
{
    struct json_line line;
    json_line_begin(&line, "t", 0);
    json_line_begin_object(&line, "empty");
    json_line_end_object(&line);
    json_line_begin_object(&line, "outer");
    json_line_begin_object(&line, "inner");
    json_line_add_uint(&line, "max", UINT64_MAX);
    json_line_end_object(&line);
    json_line_add_int(&line, "min", INT64_MIN);
    json_line_end_object(&line);
    json_line_end(&line);
    const char *expected = "{\"type\": \"t\", \"time\": 0, \"empty\": {}, \"outer\": "
                           "{\"inner\": {\"max\": 18446744073709551615}, "
                           "\"min\": -9223372036854775808}}\n";
    assert_line_is(&line, expected);
    cr_assert(json_is_one_object(line.text, line.length - 1));
}

Test(metrics, strings_are_escaped)
{
    struct json_line line;
    json_line_begin(&line, "quote\"type", 1);
    json_line_add_string(&line, "text",
                         "a\"b\\c\nd\te\rf\bg\fh\x01i\x1fj/k\x7f \xc3\xa9\xe2\x82\xac");
    json_line_add_string(&line, "key\nwith\\", "");
    json_line_end(&line);
    const char *expected =
        "{\"type\": \"quote\\\"type\", \"time\": 1, "
        "\"text\": \"a\\\"b\\\\c\\nd\\te\\rf\\bg\\fh\\u0001i\\u001fj/k\x7f \xc3\xa9\xe2\x82\xac\", "
        "\"key\\nwith\\\\\": \"\"}\n";
    assert_line_is(&line, expected);
    /* Only the final newline is a raw control character. */
    for (size_t index = 0; index + 1 < line.length; index++)
        cr_assert((unsigned char)line.text[index] >= 0x20, "raw control at %zu", index);
    cr_assert(json_is_one_object(line.text, line.length - 1));
}

Test(metrics, every_control_character_is_escaped)
{
    char all_controls[32];
    for (int byte = 1; byte < 32; byte++)
        all_controls[byte - 1] = (char)byte;
    all_controls[31] = '\0';
    struct json_line line;
    json_line_begin(&line, "t", 0);
    json_line_add_string(&line, "s", all_controls);
    json_line_end(&line);
    cr_assert(json_line_is_writable(&line));
    for (size_t index = 0; index + 1 < line.length; index++)
        cr_assert((unsigned char)line.text[index] >= 0x20);
    cr_assert(json_is_one_object(line.text, line.length - 1));
}

Test(metrics, non_finite_doubles_become_null)
{
    struct json_line line;
    json_line_begin(&line, "t", NAN);
    json_line_add_double(&line, "nan", NAN);
    json_line_add_double(&line, "minus_nan", -NAN);
    json_line_add_double(&line, "inf", INFINITY);
    json_line_add_double(&line, "minus_inf", -INFINITY);
    json_line_add_double_or_null_if(&line, "present_inf", true, INFINITY);
    json_line_begin_object(&line, "perf_params");
    json_line_add_double(&line, "gamma", NAN);
    json_line_end_object(&line);
    json_line_end(&line);
    const char *expected = "{\"type\": \"t\", \"time\": null, \"nan\": null, "
                           "\"minus_nan\": null, \"inf\": null, \"minus_inf\": null, "
                           "\"present_inf\": null, \"perf_params\": {\"gamma\": null}}\n";
    assert_line_is(&line, expected);
}

/* Doubles must come back bit for bit: these are the numbers anyone will use
 * to recompute a decision (adaptshim(7) "BATCH-SIZE CONTROL"). */
Test(metrics, doubles_round_trip_exactly)
{
    double values[64 + 16] = {
        0.1, 1.0 / 3.0, 2.0 / 3.0, M_PI, -M_E, 1e21, 1e22, 123456789012345678.0,
        DBL_MAX, -DBL_MAX, DBL_MIN, 4.9406564584124654e-324, 2.2250738585072009e-308,
        0.0, -0.0, 5e-324 * 3,
    };
    size_t count = 16;
    uint64_t state = 0x9e3779b97f4a7c15u;
    while (count < sizeof values / sizeof values[0]) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        double candidate;
        memcpy(&candidate, &state, sizeof candidate);
        if (isfinite(candidate))
            values[count++] = candidate;
    }
    for (size_t index = 0; index < count; index++) {
        struct json_line line;
        json_line_begin(&line, "t", values[index]);
        json_line_add_double(&line, "value", values[index]);
        json_line_end(&line);
        cr_assert(json_line_is_writable(&line));
        cr_assert(json_is_one_object(line.text, line.length - 1), "%.*s", (int)line.length,
                  line.text);
        char *terminated = strndup(line.text, line.length);
        double parsed = strtod(json_value_of(terminated, "value"), NULL);
        double parsed_time = strtod(json_value_of(terminated, "time"), NULL);
        cr_assert(memcmp(&parsed, &values[index], sizeof parsed) == 0,
                  "%.17g came back as %.17g from %s", values[index], parsed, terminated);
        cr_assert(memcmp(&parsed_time, &values[index], sizeof parsed) == 0);
        free(terminated);
    }
}

/* A trainer may switch LC_NUMERIC to a locale with a decimal comma; the
 * output must stay JSON. */
Test(metrics, doubles_ignore_a_decimal_comma_locale)
{
    const char *candidates[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8",
                                "de_DE", "fr_FR"};
    const char *chosen = NULL;
    for (size_t index = 0; index < sizeof candidates / sizeof candidates[0] && !chosen; index++)
        if (setlocale(LC_NUMERIC, candidates[index]) != NULL)
            chosen = candidates[index];
    if (chosen == NULL) {
        metrics_remove_directory();  /* a skipped test does not run the suite's fini */
        cr_skip_test("no locale with a decimal comma is installed");
    }
    struct json_line line;
    json_line_begin(&line, "t", 0.5);
    json_line_add_double(&line, "value", -1234.375);
    json_line_add_double(&line, "small", 0.1);
    json_line_end(&line);
    setlocale(LC_NUMERIC, "C");
    const char *expected = "{\"type\": \"t\", \"time\": 0.5, \"value\": -1234.375, "
                           "\"small\": 0.10000000000000001}\n";
    cr_assert_arr_eq(line.text, expected, strlen(expected), "%s: %.*s", chosen,
                     (int)line.length, line.text);
}

Test(metrics, overflow_marks_the_line_invalid)
{
    static char long_text[JSON_LINE_CAPACITY + 100];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    struct json_line line;
    json_line_begin(&line, "t", 0);
    json_line_add_string(&line, "long", long_text);
    cr_assert(line.invalid);
    cr_assert_leq(line.length, JSON_LINE_CAPACITY);
    /* Sticky: smaller members afterwards do not revive it. */
    json_line_add_uint(&line, "small", 1);
    json_line_end(&line);
    cr_assert_not(json_line_is_writable(&line));

    char path[4096];
    struct metrics_writer writer;
    metrics_open_named(&writer, "overflow.jsonl", path, sizeof path);
    cr_assert_eq(metrics_write_event(&writer, &line), -1);
    metrics_offer_step(&writer, &line, 0);
    metrics_flush_latest_step(&writer);
    cr_assert_eq(writer.lines_dropped, 2);
    cr_assert_eq(writer.lines_written, 0);
    metrics_writer_close(&writer);
    size_t size;
    char *text = metrics_read_file(path, &size);
    cr_assert_eq(size, 0, "wrote %s", text);
    free(text);
}

/* Around the capacity, lines switch from complete to dropped exactly once,
 * and whatever is written is whole. */
Test(metrics, lines_near_the_capacity_are_whole_or_absent)
{
    static char text_buffer[JSON_LINE_CAPACITY + 1];
    char path[4096];
    struct metrics_writer writer;
    metrics_open_named(&writer, "boundary.jsonl", path, sizeof path);
    bool seen_invalid = false;
    size_t written = 0;
    for (size_t size = JSON_LINE_CAPACITY - 64; size <= JSON_LINE_CAPACITY; size++) {
        memset(text_buffer, 'y', size);
        text_buffer[size] = '\0';
        struct json_line line;
        json_line_begin(&line, "t", 0);
        json_line_add_string(&line, "s", text_buffer);
        json_line_end(&line);
        if (json_line_is_writable(&line)) {
            cr_assert_not(seen_invalid, "size %zu fits after a smaller one did not", size);
            cr_assert_leq(line.length, JSON_LINE_CAPACITY);
            cr_assert_eq(line.text[line.length - 1], '\n');
            written++;
        } else {
            seen_invalid = true;
        }
        metrics_write_event(&writer, &line);
    }
    cr_assert(seen_invalid);
    cr_assert_gt(written, 0);
    metrics_writer_close(&writer);
    assert_file_has_complete_lines(path, written);
}

Test(metrics, misuse_invalidates_the_line)
{
    struct json_line line;

    json_line_begin(&line, "t", 0);
    json_line_begin_object(&line, "open");
    json_line_end(&line);
    cr_assert_not(json_line_is_writable(&line), "an object left open");

    json_line_begin(&line, "t", 0);
    json_line_end_object(&line);
    json_line_end(&line);
    cr_assert_not(json_line_is_writable(&line), "closing an object never opened");

    json_line_begin(&line, "t", 0);
    json_line_end(&line);
    cr_assert(json_line_is_writable(&line));
    json_line_add_uint(&line, "late", 1);
    cr_assert_not(json_line_is_writable(&line), "a member after the end");

    json_line_begin(&line, "t", 0);
    for (int depth = 0; depth <= JSON_LINE_MAX_DEPTH; depth++)
        json_line_begin_object(&line, "deeper");
    for (int depth = 0; depth <= JSON_LINE_MAX_DEPTH; depth++)
        json_line_end_object(&line);
    json_line_end(&line);
    cr_assert_not(json_line_is_writable(&line), "too deep");

    json_line_begin(&line, "t", 0);
    json_line_end(&line);
    cr_assert(json_line_is_writable(&line), "begin resets an invalid line");
}

/* ---------------------------------------------------------------------------
 * Writing lines
 * ------------------------------------------------------------------------ */

Test(metrics, several_lines_parse_back)
{
    char path[4096];
    struct metrics_writer writer;
    metrics_open_named(&writer, "events.jsonl", path, sizeof path);
    cr_assert(metrics_writer_enabled(&writer));
    for (uint64_t index = 0; index < 5; index++) {
        struct json_line line;
        json_line_begin(&line, "pass_begin", 0.5 * (double)index);
        json_line_add_uint(&line, "pass", index);
        json_line_add_string(&line, "file", "train \"set\".bin");
        json_line_begin_object(&line, "range");
        json_line_add_uint(&line, "begin", index * 10);
        json_line_add_uint(&line, "end", index * 10 + 9);
        json_line_end_object(&line);
        json_line_end(&line);
        cr_assert_eq(metrics_write_event(&writer, &line), 0);
    }
    cr_assert_eq(writer.lines_written, 5);
    metrics_writer_close(&writer);
    cr_assert_not(metrics_writer_enabled(&writer));

    size_t size;
    char *text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), 5);
    const char *third = text;
    for (int skip = 0; skip < 2; skip++)
        third = strchr(third, '\n') + 1;
    const char *expected = "{\"type\": \"pass_begin\", \"time\": 1, \"pass\": 2, "
                           "\"file\": \"train \\\"set\\\".bin\", "
                           "\"range\": {\"begin\": 20, \"end\": 29}}\n";
    cr_assert_eq(strncmp(third, expected, strlen(expected)), 0, "got %s", third);
    free(text);
}

Test(metrics, reopening_appends)
{
    char path[4096];
    struct metrics_writer writer;
    struct json_line line;
    metrics_build_step(&line, 1, 0);
    metrics_open_named(&writer, "append.jsonl", path, sizeof path);
    metrics_write_event(&writer, &line);
    metrics_writer_close(&writer);
    metrics_open_named(&writer, "append.jsonl", path, sizeof path);
    metrics_write_event(&writer, &line);
    metrics_writer_close(&writer);
    assert_file_has_complete_lines(path, 2);
}

Test(metrics, pattern_expands_rank_and_pid)
{
    char pattern[4096], expected[4096];
    metrics_path(pattern, sizeof pattern, "metrics-%r-%p.jsonl");
    char name[128];
    snprintf(name, sizeof name, "metrics-7-%ld.jsonl", (long)getpid());
    metrics_path(expected, sizeof expected, name);

    struct metrics_writer writer;
    cr_assert_eq(metrics_writer_open(&writer, pattern, 7, metrics_test_error,
                                     sizeof metrics_test_error),
                 0, "%s", metrics_test_error);
    struct json_line line;
    metrics_build_step(&line, 3, 0);
    metrics_write_event(&writer, &line);
    metrics_writer_close(&writer);

    cr_assert_eq(access(expected, F_OK), 0, "%s does not exist", expected);
    assert_file_has_complete_lines(expected, 1);
}

Test(metrics, open_error_names_variable_path_and_reason)
{
    char path[4096];
    metrics_path(path, sizeof path, "missing-directory/rank-%r.jsonl");
    struct metrics_writer writer;
    memset(metrics_test_error, 0, sizeof metrics_test_error);
    cr_assert_eq(metrics_writer_open(&writer, path, 3, metrics_test_error,
                                     sizeof metrics_test_error),
                 -1);
    cr_assert_not(metrics_writer_enabled(&writer));
    char expanded[4096];
    metrics_path(expanded, sizeof expanded, "missing-directory/rank-3.jsonl");
    cr_assert_not_null(strstr(metrics_test_error, "ADAPTDL_METRICS_FILE"), "%s",
                       metrics_test_error);
    cr_assert_not_null(strstr(metrics_test_error, expanded), "%s", metrics_test_error);
    cr_assert_not_null(strstr(metrics_test_error, strerror(ENOENT)), "%s",
                       metrics_test_error);
    cr_assert_null(strchr(metrics_test_error, '\n'), "one line");

    /* A disabled writer accepts lines and writes nothing. */
    struct json_line line;
    metrics_build_step(&line, 1, 0);
    cr_assert_eq(metrics_write_event(&writer, &line), 0);
    metrics_offer_step(&writer, &line, 0);
    metrics_flush_latest_step(&writer);
    metrics_writer_close(&writer);
}

Test(metrics, pattern_too_long_is_an_error)
{
    static char pattern[8192];
    memset(pattern, 'a', sizeof pattern - 1);
    pattern[sizeof pattern - 1] = '\0';
    struct metrics_writer writer;
    cr_assert_eq(metrics_writer_open(&writer, pattern, 0, metrics_test_error,
                                     sizeof metrics_test_error),
                 -1);
    cr_assert_not_null(strstr(metrics_test_error, "ADAPTDL_METRICS_FILE"));
    cr_assert_not(metrics_writer_enabled(&writer));
}

Test(metrics, zero_initialized_writer_is_disabled)
{
    static struct metrics_writer writer;
    struct json_line line;
    metrics_build_step(&line, 1, 0);
    cr_assert_not(metrics_writer_enabled(&writer));
    cr_assert_eq(metrics_write_event(&writer, &line), 0);
    metrics_flush_latest_step(&writer);
    metrics_writer_close(&writer);
    cr_assert_eq(writer.lines_written, 0);
}

Test(metrics, writing_keeps_errno)
{
    char path[4096];
    struct metrics_writer writer;
    metrics_open_named(&writer, "errno.jsonl", path, sizeof path);
    struct json_line line;
    metrics_build_step(&line, 1, 0);
    errno = EAGAIN;
    metrics_write_event(&writer, &line);
    metrics_offer_step(&writer, &line, 0);
    metrics_offer_step(&writer, &line, 0.01);
    metrics_flush_latest_step(&writer);
    cr_assert_eq(errno, EAGAIN);
    metrics_writer_close(&writer);
    cr_assert_eq(errno, EAGAIN);
}

/* ---------------------------------------------------------------------------
 * Rate-limited step lines
 * ------------------------------------------------------------------------ */

Test(metrics, step_lines_are_rate_limited_and_latest_is_flushed)
{
    char path[4096];
    struct metrics_writer writer;
    metrics_open_named(&writer, "steps.jsonl", path, sizeof path);
    cr_assert_float_eq(writer.min_step_interval_seconds, METRICS_DEFAULT_STEP_INTERVAL_SECONDS,
                       1e-12);

    struct json_line line;
    for (uint64_t step = 0; step < 100; step++) {
        metrics_build_step(&line, step, 0.001 * (double)step);
        metrics_offer_step(&writer, &line, 0.001 * (double)step);
    }
    size_t size;
    char *text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), 1, "%s", text);
    cr_assert_eq(json_step_of_line(text), 0);
    free(text);

    metrics_flush_latest_step(&writer);
    metrics_flush_latest_step(&writer); /* nothing pending any more */
    text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), 2, "%s", text);
    cr_assert_eq(json_step_of_line(strchr(text, '\n') + 1), 99);
    free(text);

    /* 0.25 s after the last written step (0.0), the next one is due. */
    metrics_build_step(&line, 100, 0.25);
    metrics_offer_step(&writer, &line, 0.25);
    /* ... and the one right after is not, until the interval passes again. */
    metrics_build_step(&line, 101, 0.3);
    metrics_offer_step(&writer, &line, 0.3);
    metrics_build_step(&line, 102, 0.51);
    metrics_offer_step(&writer, &line, 0.51);
    text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), 4, "%s", text);
    const char *last = text + size - 1;
    while (last > text && last[-1] != '\n')
        last--;
    cr_assert_eq(json_step_of_line(last), 102, "%s", text);
    free(text);

    /* Step 101 was superseded by 102, so nothing is pending now. */
    metrics_flush_latest_step(&writer);
    cr_assert_eq(writer.lines_written, 4);
    metrics_writer_close(&writer);
}

Test(metrics, interval_is_configurable)
{
    char path[4096];
    struct metrics_writer writer;
    metrics_open_named(&writer, "interval.jsonl", path, sizeof path);
    writer.min_step_interval_seconds = 0;
    struct json_line line;
    for (uint64_t step = 0; step < 10; step++) {
        metrics_build_step(&line, step, 0);
        metrics_offer_step(&writer, &line, 0);
    }
    metrics_writer_close(&writer);
    assert_file_has_complete_lines(path, 10);
}

Test(metrics, close_writes_the_pending_step)
{
    char path[4096];
    struct metrics_writer writer;
    metrics_open_named(&writer, "close.jsonl", path, sizeof path);
    struct json_line line;
    for (uint64_t step = 1; step <= 3; step++) {
        metrics_build_step(&line, step, 0.01 * (double)step);
        metrics_offer_step(&writer, &line, 0.01 * (double)step);
    }
    metrics_writer_close(&writer);
    size_t size;
    char *text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), 2);
    cr_assert_eq(json_step_of_line(text), 1);
    cr_assert_eq(json_step_of_line(strchr(text, '\n') + 1), 3);
    free(text);
}

/* The preemption path flushes from a signal handler. */
static struct metrics_writer metrics_signal_writer;

static void metrics_flush_on_signal(int signal_number)
{
    metrics_flush_latest_step(&metrics_signal_writer);
}

Test(metrics, flush_from_a_signal_handler)
{
    char path[4096];
    metrics_open_named(&metrics_signal_writer, "signal.jsonl", path, sizeof path);
    struct sigaction action = {.sa_handler = metrics_flush_on_signal};
    sigemptyset(&action.sa_mask);
    cr_assert_eq(sigaction(SIGUSR2, &action, NULL), 0);
    struct json_line line;
    for (uint64_t step = 0; step < 50; step++) {
        metrics_build_step(&line, step, 0.001 * (double)step);
        metrics_offer_step(&metrics_signal_writer, &line, 0.001 * (double)step);
    }
    raise(SIGUSR2);
    raise(SIGUSR2);
    signal(SIGUSR2, SIG_DFL);
    metrics_writer_close(&metrics_signal_writer);
    size_t size;
    char *text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), 2);
    cr_assert_eq(json_step_of_line(strchr(text, '\n') + 1), 49);
    free(text);
}

/* Several processes appending to one file (ranks sharing a pattern without
 * %r, or a forked trainer) never produce a torn or mixed line. */
Test(metrics, concurrent_appenders_never_interleave)
{
    enum { PROCESSES = 4, LINES_EACH = 300 };
    char path[4096];
    metrics_path(path, sizeof path, "shared.jsonl");
    static char padding[2000];
    pid_t children[PROCESSES];
    for (int child = 0; child < PROCESSES; child++) {
        children[child] = fork();
        cr_assert_geq(children[child], 0);
        if (children[child] != 0)
            continue;
        memset(padding, 'a' + child, sizeof padding - 1);
        struct metrics_writer writer;
        if (metrics_writer_open(&writer, path, (uint32_t)child, metrics_test_error,
                                sizeof metrics_test_error) != 0)
            _exit(1);
        for (uint64_t index = 0; index < LINES_EACH; index++) {
            struct json_line line;
            json_line_begin(&line, "event", (double)index);
            json_line_add_uint(&line, "writer", (uint64_t)child);
            json_line_add_string(&line, "padding", padding);
            json_line_end(&line);
            if (metrics_write_event(&writer, &line) != 0)
                _exit(2);
        }
        metrics_writer_close(&writer);
        _exit(0);
    }
    for (int child = 0; child < PROCESSES; child++) {
        int status;
        cr_assert_eq(waitpid(children[child], &status, 0), children[child]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    size_t size;
    char *text = metrics_read_file(path, &size);
    cr_assert_eq(metrics_assert_complete_lines(text, size), PROCESSES * LINES_EACH);
    /* Each line's padding is all one writer's letter. */
    for (const char *line = text; line < text + size; line = strchr(line, '\n') + 1) {
        unsigned writer_index = (unsigned)strtoul(json_value_of(line, "writer"), NULL, 10);
        const char *padding_text = json_value_of(line, "padding") + 1;
        for (size_t index = 0; index < sizeof padding - 1; index++)
            cr_assert_eq(padding_text[index], 'a' + (char)writer_index);
    }
    free(text);
}
