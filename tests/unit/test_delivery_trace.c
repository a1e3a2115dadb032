/* test_delivery_trace.c - the delivery trace's writer (ADAPTDL_TRACE_FILE,
 * runtime/delivery_trace.h), read back with runtime/trace_log.h.
 *
 * Views are built in memory (as in test_view_cursor.c) from records that
 * hold their own physical index in their first 8 bytes, so that what the
 * trace says was delivered is checked against the bytes the reads handed
 * out, not against the view's own arithmetic.  The stop after a commit
 * (ADAPTDL_TRACE_STOP_AFTER) runs in a forked child, which must be found
 * stopped, its stop line in the trace. */
#include <criterion/criterion.h>

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "content_hash.h"
#include "delivery_trace.h"
#include "state_store.h"
#include "trace_log.h"
#include "view_cursor.h"

#define DT_RECORD 16
#define DT_COUNT 10

struct dt_data {
    unsigned char bytes[DT_RECORD * DT_COUNT];
    struct data_entry entry;
    struct dataset_file file;
    char directory[64];
    char trace[128];
};

static int dt_remove_entry(const char *path, const struct stat *status, int kind,
                           struct FTW *where)
{
    (void)status;
    (void)where;
    return kind == FTW_DP ? rmdir(path) : unlink(path);
}

/* N = 10 records of 16 bytes, shuffled, replica `rank` of `replicas`, and
 * a trace opened in a fresh directory. */
static void dt_setup(struct dt_data *data, uint32_t replicas, uint32_t rank,
                     uint64_t stop_after)
{
    memset(data, 0, sizeof *data);
    for (uint64_t index = 0; index < DT_COUNT; index++)
        memcpy(data->bytes + index * DT_RECORD, &index, sizeof index);
    data->entry = (struct data_entry){.record_size = DT_RECORD, .role = DATA_ROLE_TRAIN,
                                      .shuffle = true, .shard = true, .tail = TAIL_ERROR};
    char error[256] = "";
    cr_assert_eq(dataset_file_init(&data->file, &data->entry, "/data/my train%.bin", data->bytes,
                                   sizeof data->bytes, 7, replicas, rank, error, sizeof error),
                 0, "%s", error);
    snprintf(data->directory, sizeof data->directory, "/tmp/adaptshim-test-trace-XXXXXX");
    cr_assert_not_null(mkdtemp(data->directory), "mkdtemp: %s", strerror(errno));
    snprintf(data->trace, sizeof data->trace, "%s/trace-%%r", data->directory);
    cr_assert_eq(delivery_trace_open(data->trace, rank, replicas, stop_after, error,
                                     sizeof error), 0, "%s", error);
    snprintf(data->trace, sizeof data->trace, "%s/trace-%u", data->directory, rank);
}

static void dt_teardown(struct dt_data *data)
{
    delivery_trace_close();
    dataset_file_release(&data->file);
    nftw(data->directory, dt_remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void dt_read_trace(const struct dt_data *data, struct trace_log *log)
{
    char error[512] = "";
    cr_assert_eq(trace_log_read(log, data->trace, error, sizeof error), 0, "%s", error);
}

/* The physical index a record read out of the view holds. */
static uint64_t dt_record_index(const unsigned char *record)
{
    uint64_t index;
    memcpy(&index, record, sizeof index);
    return index;
}

Test(delivery_trace, reads_are_traced_with_the_records_they_handed_out)
{
    struct dt_data data;
    /* K = 3, rank 1: offsets 1, 4, 7 and 10, the last at N = 10: padding */
    dt_setup(&data, 3, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[DT_RECORD * DT_COUNT];
    size_t total = 0;
    /* a record and a half, then the rest: the half delivers nothing yet */
    size_t pieces[] = {DT_RECORD + DT_RECORD / 2, sizeof buffer};
    for (size_t i = 0; i < 2; i++) {
        size_t wanted = pieces[i] < sizeof buffer - total ? pieces[i] : sizeof buffer - total;
        ssize_t got = view_cursor_read(&cursor, buffer + total, wanted);
        cr_assert_geq(got, 0);
        total += (size_t)got;
    }
    view_cursor_close(&cursor);
    cr_assert_eq(total, 4 * DT_RECORD, "the view of rank 1 of 3 holds 4 records");
    delivery_trace_close();

    struct trace_log log;
    dt_read_trace(&data, &log);
    cr_assert_eq(log.events[0].kind, TRACE_EVENT_START);
    cr_expect_eq(log.events[0].rank, 1);
    cr_expect_eq(log.events[0].replicas, 3);
    cr_expect_eq(log.events[0].pid, (uint64_t)getpid());
    size_t seen = 0;
    for (size_t i = 1; i < log.count; i++) {
        const struct trace_event *event = &log.events[i];
        cr_assert_eq(event->kind, TRACE_EVENT_DELIVERY);
        cr_expect_str_eq(event->name, "my train%.bin");
        cr_expect_eq(event->pass, 0);
        for (size_t r = 0; r < event->record_count; r++, seen++) {
            cr_assert_lt(seen, 4);
            cr_expect_eq(event->records[r].physical, dt_record_index(buffer + seen * DT_RECORD),
                         "record %zu", seen);
            cr_expect_eq(event->records[r].padding, seen == 3, "record %zu", seen);
        }
    }
    cr_expect_eq(seen, 4);
    cr_expect_eq(log.events[1].record_count, 1, "the first read delivered one whole record");
    trace_log_free(&log);
    dt_teardown(&data);
}

Test(delivery_trace, a_record_delivered_again_is_traced_once)
{
    struct dt_data data;
    dt_setup(&data, 1, 0, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char records[4 * DT_RECORD];
    cr_assert_eq(view_cursor_pread(&cursor, records, DT_RECORD, 3 * DT_RECORD), DT_RECORD);
    uint64_t third = dt_record_index(records);
    cr_assert_eq(view_cursor_pread(&cursor, records, DT_RECORD, 3 * DT_RECORD), DT_RECORD);
    cr_assert_eq(view_cursor_pread(&cursor, records, DT_RECORD, 1 * DT_RECORD), DT_RECORD);
    uint64_t first = dt_record_index(records);
    /* records 1, 2 and 3 at once: only 2, between two old ones, is new */
    cr_assert_eq(view_cursor_pread(&cursor, records, 3 * DT_RECORD, 1 * DT_RECORD),
                 3 * DT_RECORD);
    uint64_t second = dt_record_index(records + DT_RECORD);
    view_cursor_close(&cursor);
    delivery_trace_close();

    struct trace_log log;
    dt_read_trace(&data, &log);
    cr_assert_eq(log.count, 4, "a start line and three delivery lines, got %zu", log.count);
    uint64_t expected[] = {third, first, second};
    for (size_t i = 0; i < 3; i++) {
        cr_expect_eq(log.events[i + 1].record_count, 1, "line %zu", i + 2);
        cr_expect_eq(log.events[i + 1].records[0].physical, expected[i], "line %zu", i + 2);
    }
    trace_log_free(&log);
    dt_teardown(&data);
}

Test(delivery_trace, bindings_commits_and_loads_are_read_back)
{
    struct dt_data data;
    dt_setup(&data, 1, 0, 0);
    struct content_identity identity = {.size = 123, .hash = 0x00ab00cd00ef0012ull};
    struct snapshot_file_position position = {.pass = 4, .current_index = 7, .pass_length = 10,
                                              .role = DATA_ROLE_EVAL};
    delivery_trace_binding(&identity, &data.file, &position, 2);
    delivery_trace_commit("/ck dir/model 100%.ckpt", &identity);
    struct content_identity other = {.size = 9, .hash = 1};
    delivery_trace_load("/ck dir/old\n.ckpt", &other);
    delivery_trace_close();

    struct trace_log log;
    dt_read_trace(&data, &log);
    cr_assert_eq(log.count, 4);
    const struct trace_event *binding = &log.events[1], *commit = &log.events[2],
                             *load = &log.events[3];
    cr_assert_eq(binding->kind, TRACE_EVENT_BINDING);
    cr_expect(content_identity_equal(&binding->identity, &identity));
    cr_expect_str_eq(binding->name, "my train%.bin");
    cr_expect_not(binding->train);
    cr_expect_eq(binding->pass, 4);
    cr_expect_eq(binding->index, 7);
    cr_expect_eq(binding->length, 10);
    cr_expect_eq(binding->in_flight, 2);
    cr_assert_eq(commit->kind, TRACE_EVENT_COMMIT);
    cr_expect(content_identity_equal(&commit->identity, &identity));
    cr_expect_str_eq(commit->path, "/ck dir/model 100%.ckpt");
    cr_assert_eq(load->kind, TRACE_EVENT_LOAD);
    cr_expect(content_identity_equal(&load->identity, &other));
    cr_expect_str_eq(load->path, "/ck dir/old\n.ckpt");
    trace_log_free(&log);
    dt_teardown(&data);
}

Test(delivery_trace, a_closed_trace_writes_nothing)
{
    struct dt_data data;
    dt_setup(&data, 1, 0, 0);
    delivery_trace_close();
    cr_expect_not(delivery_trace_active);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[DT_RECORD * DT_COUNT];
    cr_expect_eq(view_cursor_read(&cursor, buffer, sizeof buffer), (ssize_t)sizeof buffer);
    view_cursor_close(&cursor);
    struct content_identity identity = {1, 2};
    delivery_trace_commit("/ck", &identity);
    delivery_trace_load("/ck", &identity);
    struct trace_log log;
    dt_read_trace(&data, &log);
    cr_expect_eq(log.count, 1, "only the start line");
    trace_log_free(&log);
    dt_teardown(&data);
}

/* The child reads a record, commits, then reads another: it must stop at
 * that read, after saying so in the trace, and not before. */
Test(delivery_trace, a_process_stops_at_its_first_delivery_after_the_commits_asked)
{
    struct dt_data data;
    dt_setup(&data, 1, 0, 1);
    fflush(NULL);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        struct view_cursor cursor;
        view_cursor_open(&cursor, &data.file);
        unsigned char record[DT_RECORD];
        if (view_cursor_read(&cursor, record, DT_RECORD) != DT_RECORD)
            _exit(3);
        struct content_identity identity = {8, 0x77};
        delivery_trace_commit("/ck", &identity);
        if (view_cursor_read(&cursor, record, DT_RECORD) != DT_RECORD)
            _exit(4);
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, WUNTRACED), child);
    cr_expect(WIFSTOPPED(status), "the child stopped itself (status %#x)", status);
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    struct trace_log log;
    dt_read_trace(&data, &log);
    cr_assert_eq(log.count, 4, "start, delivery, commit, stop: %zu lines", log.count);
    cr_expect_eq(log.events[1].kind, TRACE_EVENT_DELIVERY);
    cr_expect_eq(log.events[2].kind, TRACE_EVENT_COMMIT);
    cr_expect_eq(log.events[3].kind, TRACE_EVENT_STOP);
    cr_expect_eq(log.events[3].pid, (uint64_t)child);
    cr_expect_eq(log.events[3].commits, 1);
    trace_log_free(&log);
    dt_teardown(&data);
}

Test(delivery_trace, names_and_paths_are_escaped_both_ways)
{
    const char text[] = "a b%c\n\x7f~!";
    char escaped[3 * sizeof text];
    size_t length = delivery_trace_escape(text, strlen(text), escaped);
    cr_expect_str_eq(escaped, "a%20b%25c%0A%7F~!");
    cr_expect_eq(length, strlen("a%20b%25c%0A%7F~!"));
    char *back = trace_log_unescape(escaped, length);
    cr_assert_not_null(back);
    cr_expect_str_eq(back, text);
    free(back);
    cr_expect_null(trace_log_unescape("bad%2", 5));
    cr_expect_null(trace_log_unescape("bad%zz", 6));
    cr_expect_null(trace_log_unescape("nul%00", 6), "a NUL would cut the name short");
}

Test(delivery_trace, the_variables_are_parsed_and_known)
{
    char *environment[] = {"ADAPTDL_TRACE_FILE=/tmp/t-%r-%p", "ADAPTDL_TRACE_STOP_AFTER=3", NULL};
    struct adaptdl_config config;
    char error[512] = "";
    cr_assert_eq(config_parse(&config, environment, error, sizeof error), 0, "%s", error);
    cr_expect_str_eq(config.trace_file, "/tmp/t-%r-%p");
    cr_expect_eq(config.trace_stop_after, 3);
    config_free(&config);
    size_t cursor = 0;
    char warning[512];
    cr_expect_not(config_next_unknown_variable(environment, &cursor, warning, sizeof warning),
                  "%s", warning);

    char *malformed[] = {"ADAPTDL_TRACE_STOP_AFTER=two", NULL};
    cr_expect_eq(config_parse(&config, malformed, error, sizeof error), -1);
    cr_expect(strstr(error, "ADAPTDL_TRACE_STOP_AFTER") != NULL && strstr(error, "two") != NULL,
              "%s", error);
    char *empty[] = {"ADAPTDL_TRACE_FILE=", NULL};
    cr_expect_eq(config_parse(&config, empty, error, sizeof error), -1);
    cr_expect(strstr(error, "ADAPTDL_TRACE_FILE") != NULL, "%s", error);
}

Test(delivery_trace, an_unwritable_trace_is_a_message_naming_the_variable)
{
    char error[512] = "";
    cr_expect_eq(delivery_trace_open("/nonexistent-directory/trace-%r", 0, 1, 0, error,
                                     sizeof error), -1);
    cr_expect(strstr(error, "ADAPTDL_TRACE_FILE") != NULL, "%s", error);
    cr_expect_not(delivery_trace_active);
}
