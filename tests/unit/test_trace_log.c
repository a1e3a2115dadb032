/* test_trace_log.c - reading a delivery trace back (runtime/trace_log.h):
 * every kind of line, a last line cut short by a kill, and one-line errors
 * that name the line and what is accepted for every malformed input. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "trace_log.h"

#define TL_START "adaptshim-trace 1 pid 42 rank 1 replicas 2\n"

static int tl_parse(struct trace_log *log, const char *text, char *error, size_t error_size)
{
    return trace_log_parse(log, text, strlen(text), "t.trace", error, error_size);
}

Test(trace_log, every_kind_of_line_is_read)
{
    const char *text = TL_START
        "D f%20one.bin 3 7 2* 0\n"
        "B 16 00000000000000ff f%20one.bin train 3 2 10 1\n"
        "C 16 00000000000000FF /s/ck%20a\n"
        "L 5 1 /s/old\n"
        "P 42 1\n";
    struct trace_log log;
    char error[256] = "";
    cr_assert_eq(tl_parse(&log, text, error, sizeof error), 0, "%s", error);
    cr_assert_eq(log.count, 6);
    cr_expect_not(log.cut_short);
    const struct trace_event *e = log.events;
    cr_expect_eq(e[0].kind, TRACE_EVENT_START);
    cr_expect_eq(e[0].pid, 42);
    cr_expect_eq(e[0].rank, 1);
    cr_expect_eq(e[0].replicas, 2);
    cr_expect_eq(e[1].kind, TRACE_EVENT_DELIVERY);
    cr_expect_str_eq(e[1].name, "f one.bin");
    cr_expect_eq(e[1].pass, 3);
    cr_assert_eq(e[1].record_count, 3);
    cr_expect(e[1].records[0].physical == 7 && !e[1].records[0].padding);
    cr_expect(e[1].records[1].physical == 2 && e[1].records[1].padding);
    cr_expect(e[1].records[2].physical == 0 && !e[1].records[2].padding);
    cr_expect_eq(e[2].kind, TRACE_EVENT_BINDING);
    cr_expect(e[2].identity.size == 16 && e[2].identity.hash == 0xff);
    cr_expect(e[2].train);
    cr_expect(e[2].pass == 3 && e[2].index == 2 && e[2].length == 10 && e[2].in_flight == 1);
    cr_expect_eq(e[3].kind, TRACE_EVENT_COMMIT);
    cr_expect_eq(e[3].identity.hash, 0xff, "hexadecimal in either case");
    cr_expect_str_eq(e[3].path, "/s/ck a");
    cr_expect_eq(e[4].kind, TRACE_EVENT_LOAD);
    cr_expect(e[4].identity.size == 5 && e[4].identity.hash == 1);
    cr_expect_eq(e[5].kind, TRACE_EVENT_STOP);
    cr_expect(e[5].pid == 42 && e[5].commits == 1);
    trace_log_free(&log);
}

Test(trace_log, a_last_line_cut_short_is_left_out)
{
    struct trace_log log;
    char error[256] = "";
    cr_assert_eq(tl_parse(&log, TL_START "D f.bin 0 1 2\nD f.bin 0 3 4", error, sizeof error), 0,
                 "%s", error);
    cr_expect_eq(log.count, 2);
    cr_expect(log.cut_short);
    trace_log_free(&log);
}

struct tl_bad {
    const char *text;
    const char *expected;   /* in the message */
};

Test(trace_log, malformed_lines_are_one_line_errors)
{
    static const struct tl_bad cases[] = {
        {"D f.bin 0 1\n", "line 1: not a delivery trace"},
        {"adaptshim-trace 2 pid 1 rank 0 replicas 1\n", "format version 2"},
        {"adaptshim-trace 1 pid 1 rank 2 replicas 2\n", "rank outside"},
        {"adaptshim-trace 1 pid 1\n", "without its pid, rank and replicas"},
        {TL_START "X 1\n", "line 2: an unknown kind of line"},
        {TL_START "D f.bin 0\n", "without a record"},
        {TL_START "D f.bin 0 1 x2\n", "record index"},
        {TL_START "D f.bin zero 1\n", "the pass is missing or not a number"},
        {TL_START "D f%2.bin 0 1\n", "badly escaped"},
        {TL_START "B 1 2 f.bin test 0 0 1 0\n", "train or eval"},
        {TL_START "B 1 2 f.bin train 0 0 1\n", "records in flight"},
        {TL_START "C 1 2\n", "checkpoint path"},
        {TL_START "C 1 2 /p extra\n", "more fields"},
        {TL_START "L 1 xyz /p\n", "content hash"},
        {TL_START "P 1\n", "commits"},
        {TL_START "\n", "an empty line"},
        {"", "no complete line"},
        {"adaptshim-trace 1 pid 1 rank 0 replicas 1", "no complete line"},
        {TL_START "D f.bin 0 99999999999999999999999\n", "record index"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct trace_log log;
        char error[512] = "";
        cr_expect_eq(tl_parse(&log, cases[i].text, error, sizeof error), -1, "case %zu", i);
        cr_expect(strstr(error, cases[i].expected) != NULL, "case %zu: \"%s\" lacks \"%s\"", i,
                  error, cases[i].expected);
        cr_expect(strstr(error, "t.trace") == error, "case %zu names the source: %s", i, error);
        cr_expect(strchr(error, '\n') == NULL, "case %zu: one line", i);
        cr_expect_eq(log.count, 0, "case %zu: nothing half-read", i);
    }
}

Test(trace_log, a_missing_file_is_named)
{
    struct trace_log log;
    char error[512] = "";
    cr_expect_eq(trace_log_read(&log, "/nonexistent/run0-rank0.trace", error, sizeof error), -1);
    cr_expect(strstr(error, "/nonexistent/run0-rank0.trace") != NULL, "%s", error);
}
