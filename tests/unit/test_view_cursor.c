/* test_view_cursor.c - descriptor operations on a data view and the pass
 * rules they trigger (adaptshim(7) "Passes").
 *
 * A pass ends when a read returns 0, when the position moves from past the
 * header back to at most the header after every record was delivered, when
 * the file is reopened after that, or when a read would deliver a record of
 * such a covered pass again.  Queries (lseek SEEK_CUR 0),
 * pread and opens that deliver nothing never end a pass; a second read at
 * the end of a pass that is over returns 0 again without ending the next
 * one; every cursor of a file shares its pass.  A stdio stream's fetch
 * delivers nothing until the stream reports what its trainer consumed, and
 * such a report for a pass that is over counts for nothing. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "stale_size.h"
#include "view_cursor.h"

#define VC_HEADER 4
#define VC_RECORD 8
#define VC_COUNT 10

/* A dataset of VC_COUNT 8-byte records, each holding its own index. */
struct vc_data {
    unsigned char bytes[VC_HEADER + VC_RECORD * VC_COUNT];
    struct data_entry entry;
    struct dataset_file file;
};

static void vc_setup(struct vc_data *data, uint64_t header, bool shuffle, uint32_t replicas,
                     uint32_t rank)
{
    memset(data, 0, sizeof *data);
    for (uint64_t i = 0; i < header; i++)
        data->bytes[i] = (unsigned char)('h' + i);
    for (uint64_t index = 0; index < VC_COUNT; index++)
        memcpy(data->bytes + header + index * VC_RECORD, &index, sizeof index);
    data->entry = (struct data_entry){
        .record_size = VC_RECORD,
        .header_size = header,
        .role = DATA_ROLE_TRAIN,
        .shuffle = shuffle,
        .shard = true,
        .tail = TAIL_ERROR,
    };
    char error[256] = "";
    cr_assert_eq(dataset_file_init(&data->file, &data->entry, "/data/cursor.bin", data->bytes,
                                   header + VC_RECORD * VC_COUNT, 3, replicas, rank, error,
                                   sizeof error), 0, "%s", error);
}

static void vc_teardown(struct vc_data *data)
{
    dataset_file_release(&data->file);
}

/* Reads exactly `size` bytes into out, looping over short reads as every
 * reader does (the view must have them). */
static void vc_read_fully(struct view_cursor *cursor, unsigned char *out, size_t size)
{
    size_t total = 0;
    while (total < size) {
        ssize_t got = view_cursor_read(cursor, out + total, size - total);
        cr_assert_gt(got, 0, "the view ended after %zu of %zu bytes", total, size);
        total += (size_t)got;
    }
}

static void vc_read_exactly(struct view_cursor *cursor, size_t size)
{
    unsigned char buffer[256];
    cr_assert_leq(size, sizeof buffer);
    vc_read_fully(cursor, buffer, size);
}

/* Reads until a read returns 0; returns the bytes read before it. */
static size_t vc_read_to_end(struct view_cursor *cursor, size_t chunk, unsigned char *out,
                             size_t out_size)
{
    unsigned char buffer[64];
    size_t total = 0;
    for (;;) {
        ssize_t got = view_cursor_read(cursor, buffer, chunk);
        cr_assert_geq(got, 0);
        if (got == 0)
            return total;
        if (out != NULL) {
            cr_assert_leq(total + (size_t)got, out_size);
            memcpy(out + total, buffer, (size_t)got);
        }
        total += (size_t)got;
    }
}

/* The two ways a loader asks the size of a descriptor it keeps open. */
static uint64_t vc_size_by_fstat(struct view_cursor *cursor)
{
    return view_cursor_size(cursor, SIZE_QUESTION_ANY);
}

static uint64_t vc_size_by_seek_end(struct view_cursor *cursor)
{
    off_t end = view_cursor_seek(cursor, 0, SEEK_END);
    cr_assert_geq(end, 0);
    return (uint64_t)end;
}

Test(view_cursor, read_to_the_end_then_zero_ends_the_pass)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char view[VC_HEADER + VC_RECORD * VC_COUNT];
    cr_assert_eq(vc_read_to_end(&cursor, 7, view, sizeof view), sizeof view);
    cr_expect_eq(memcmp(view, data.bytes, sizeof view), 0, "unshuffled K=1 view is the file");
    cr_expect_eq(data.file.view_pass, 1);
    cr_expect_eq(data.file.shared->tracker.passes_completed, 1);
    cr_expect_eq(data.file.shared->tracker.records_served, VC_COUNT);
    cr_expect_not(dataset_view_started(&data.file), "the next pass has not begun");
    cr_expect_eq(cursor.offset, sizeof view);
    vc_teardown(&data);
}

Test(view_cursor, the_last_record_read_does_not_end_the_pass_by_itself)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, VC_HEADER + VC_RECORD * VC_COUNT);
    cr_expect_eq(data.file.view_pass, 0, "only a read returning 0 ends it");
    uint64_t pass, index;
    pass_tracker_position(&data.file.shared->tracker, 0, &pass, &index, &(uint64_t){0});
    cr_expect_eq(pass, 0);
    cr_expect_eq(index, VC_COUNT, "all delivered: current_index N");
    vc_teardown(&data);
}

Test(view_cursor, a_second_read_at_eof_does_not_end_another_pass)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 2, 1);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_to_end(&cursor, 16, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    unsigned char buffer[16];
    cr_expect_eq(view_cursor_read(&cursor, buffer, sizeof buffer), 0);
    cr_expect_eq(view_cursor_read(&cursor, buffer, sizeof buffer), 0);
    struct iovec vector = {buffer, sizeof buffer};
    cr_expect_eq(view_cursor_readv(&cursor, &vector, 1), 0);
    cr_expect_eq(data.file.view_pass, 1);
    cr_expect_eq(data.file.shared->tracker.passes_completed, 1);
    vc_teardown(&data);
}

Test(view_cursor, a_second_read_at_eof_of_a_header_only_pass_does_not_swallow_the_next)
{
    /* replay skipping passes 0 and 1: their views are the header alone, so
     * the end of each lies at the header; a loop that reads once more after
     * the 0 must neither end pass 1 nor read its records */
    for (uint64_t header = 0; header <= VC_HEADER; header += VC_HEADER) {
        struct vc_data data;
        vc_setup(&data, header, true, 1, 0);
        cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 0, 0));
        struct view_cursor cursor;
        view_cursor_open(&cursor, &data.file);
        unsigned char buffer[32];
        cr_assert_eq(vc_read_to_end(&cursor, sizeof buffer, NULL, 0), header);
        cr_assert_eq(data.file.view_pass, 1);
        cr_expect_eq(view_cursor_read(&cursor, buffer, sizeof buffer), 0,
                     "header %llu: still at the end of pass 0", (unsigned long long)header);
        struct iovec vector = {buffer, sizeof buffer};
        cr_expect_eq(view_cursor_readv(&cursor, &vector, 1), 0);
        cr_expect_eq(data.file.view_pass, 1, "header %llu: pass 1 must not be skipped too",
                     (unsigned long long)header);
        /* the next epoch's rewind joins pass 1, which ends at its own EOF */
        cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
        cr_assert_eq(vc_read_to_end(&cursor, sizeof buffer, NULL, 0), header);
        cr_expect_eq(data.file.view_pass, 2);
        cr_expect_eq(data.file.view_length, VC_COUNT);
        vc_teardown(&data);
    }
}

Test(view_cursor, lseek_back_to_the_header_after_every_record_ends_the_pass)
{
    static const off_t targets[] = {0, 1, VC_HEADER};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        struct vc_data data;
        vc_setup(&data, VC_HEADER, true, 1, 0);
        struct view_cursor cursor;
        view_cursor_open(&cursor, &data.file);
        vc_read_exactly(&cursor, VC_HEADER + VC_RECORD + 1);
        /* llm.c seeks to its own batch order, index 0 anywhere in the epoch */
        cr_assert_eq(view_cursor_seek(&cursor, targets[i], SEEK_SET), targets[i]);
        cr_expect_eq(data.file.view_pass, 0, "seek to %lld with records undelivered",
                     (long long)targets[i]);
        cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER + VC_RECORD, SEEK_SET),
                     VC_HEADER + VC_RECORD);
        vc_read_exactly(&cursor, VC_RECORD * (VC_COUNT - 1));
        cr_assert_eq(view_cursor_seek(&cursor, targets[i], SEEK_SET), targets[i]);
        cr_expect_eq(data.file.view_pass, 1, "seek to %lld", (long long)targets[i]);
        cr_expect_eq(cursor.pass, 1);
        /* a second rewind before reading anything ends nothing more */
        cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
        cr_expect_eq(data.file.view_pass, 1);
        vc_teardown(&data);
    }
}

Test(view_cursor, lseek_inside_the_payload_does_not_end_the_pass)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, VC_HEADER + 3 * VC_RECORD);
    cr_expect_eq(view_cursor_seek(&cursor, VC_HEADER + 1, SEEK_SET), VC_HEADER + 1);
    cr_expect_eq(view_cursor_seek(&cursor, -1, SEEK_END),
                 VC_HEADER + VC_RECORD * VC_COUNT - 1);
    cr_expect_eq(view_cursor_seek(&cursor, 5, SEEK_END), VC_HEADER + VC_RECORD * VC_COUNT + 5,
                 "past the end is allowed");
    cr_expect_eq(data.file.view_pass, 0);
    vc_teardown(&data);
}

Test(view_cursor, lseek_seek_cur_zero_never_ends_a_pass)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, VC_HEADER + VC_RECORD);
    cr_expect_eq(view_cursor_seek(&cursor, 0, SEEK_CUR), VC_HEADER + VC_RECORD);
    cr_expect_eq(data.file.view_pass, 0);
    /* at the end of an ended pass, a query neither joins nor ends anything */
    vc_read_to_end(&cursor, 32, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    cr_expect_eq(view_cursor_seek(&cursor, 0, SEEK_CUR), VC_HEADER + VC_RECORD * VC_COUNT);
    cr_expect_eq(cursor.pass, 0);
    unsigned char buffer[8];
    cr_expect_eq(view_cursor_read(&cursor, buffer, sizeof buffer), 0);
    cr_expect_eq(data.file.view_pass, 1);
    vc_teardown(&data);
}

Test(view_cursor, lseek_to_zero_before_any_payload_does_not_end_a_pass)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, VC_HEADER);
    cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
    cr_expect_eq(data.file.view_pass, 0);
    /* moving forward without reading, then back: still nothing consumed */
    cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_END), VC_HEADER + VC_RECORD * VC_COUNT);
    cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
    cr_expect_eq(data.file.view_pass, 0);
    vc_teardown(&data);
}

Test(view_cursor, rewinding_after_eof_joins_the_next_pass_without_ending_it)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 2, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_to_end(&cursor, 13, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
    cr_expect_eq(data.file.view_pass, 1);
    cr_expect_eq(cursor.pass, 1);
    /* and reads pass 1's view */
    unsigned char got[VC_HEADER + VC_RECORD * 5], expected[sizeof got];
    vc_read_fully(&cursor, got, sizeof got);
    cr_assert_eq(dataset_view_copy(&data.file, 0, expected, sizeof expected), sizeof expected);
    cr_expect_eq(memcmp(got, expected, sizeof got), 0);
    cr_expect(dataset_view_started(&data.file));
    vc_teardown(&data);
}

Test(view_cursor, reopening_ends_the_pass_only_after_every_record_was_delivered)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor first, second;
    view_cursor_open(&first, &data.file);
    view_cursor_open(&second, &data.file);
    cr_expect_eq(data.file.view_pass, 0, "two opens deliver nothing");
    vc_read_exactly(&first, VC_HEADER);
    view_cursor_open(&second, &data.file);
    cr_expect_eq(data.file.view_pass, 0, "the header alone is not a record");
    vc_read_exactly(&first, VC_RECORD * (VC_COUNT - 1));
    view_cursor_open(&second, &data.file);
    cr_expect_eq(data.file.view_pass, 0, "a record is still undelivered");
    vc_read_exactly(&first, VC_RECORD);
    view_cursor_open(&second, &data.file);
    cr_expect_eq(data.file.view_pass, 1, "reopened after every record was delivered");
    cr_expect_eq(second.pass, 1);
    cr_expect_eq(second.offset, 0);
    view_cursor_open(&second, &data.file);
    cr_expect_eq(data.file.view_pass, 1);
    vc_teardown(&data);
}

Test(view_cursor, pread_never_ends_a_pass_nor_moves_the_offset)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, VC_HEADER + 2);
    unsigned char buffer[32], expected[32];
    cr_expect_eq(view_cursor_pread(&cursor, buffer, 8, VC_HEADER + 8), 8);
    cr_assert_eq(dataset_view_copy(&data.file, VC_HEADER + 8, expected, 8), 8);
    cr_expect_eq(memcmp(buffer, expected, 8), 0);
    cr_expect_eq(view_cursor_pread(&cursor, buffer, sizeof buffer, 0), (ssize_t)sizeof buffer);
    cr_expect_eq(view_cursor_pread(&cursor, buffer, sizeof buffer, 10000), 0);
    cr_expect_eq(view_cursor_pread(&cursor, buffer, sizeof buffer,
                                   VC_HEADER + VC_RECORD * VC_COUNT), 0);
    struct iovec vector = {buffer, sizeof buffer};
    cr_expect_eq(view_cursor_preadv(&cursor, &vector, 1, 20000), 0);
    cr_expect_eq(cursor.offset, VC_HEADER + 2);
    cr_expect_eq(data.file.view_pass, 0);
    vc_teardown(&data);
}

Test(view_cursor, pread_from_the_start_counts_records_in_order)
{
    /* a loader reading the file with pread only still makes progress */
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[VC_RECORD];
    cr_assert_eq(view_cursor_pread(&cursor, buffer, VC_HEADER, 0), VC_HEADER);
    for (uint64_t j = 0; j < 3; j++)
        cr_assert_eq(view_cursor_pread(&cursor, buffer, VC_RECORD, VC_HEADER + j * VC_RECORD),
                     VC_RECORD);
    cr_expect_eq(data.file.shared->tracker.delivered, 3);
    cr_expect_eq(cursor.offset, 0);
    vc_teardown(&data);
}

Test(view_cursor, seek_end_and_size_report_the_view)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 3, 1);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    /* N = 10, K = 3: L = 4 */
    cr_expect_eq(view_cursor_size(&cursor, SIZE_QUESTION_ANY), VC_HEADER + 4 * VC_RECORD);
    cr_expect_eq(view_cursor_seek(&cursor, 0, SEEK_END), VC_HEADER + 4 * VC_RECORD);
    cr_expect_eq(view_cursor_seek(&cursor, -VC_RECORD, SEEK_END), VC_HEADER + 3 * VC_RECORD);
    vc_teardown(&data);
}

Test(view_cursor, the_next_view_is_fixed_as_soon_as_a_pass_ends)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 2, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 1, 6, 0));
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    cr_expect_eq(view_cursor_size(&cursor, SIZE_QUESTION_ANY), VC_HEADER,
                 "pass 0 skipped: header only");
    vc_read_to_end(&cursor, 64, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    /* bound pass 1 from index 6: 4 records left over K = 2 */
    cr_expect_eq(view_cursor_size(&cursor, SIZE_QUESTION_ANY), VC_HEADER + 2 * VC_RECORD);
    cr_expect_eq(view_cursor_seek(&cursor, 0, SEEK_END), VC_HEADER + 2 * VC_RECORD);
    vc_teardown(&data);
}

Test(view_cursor, seek_errors)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, 20);
    errno = 0;
    cr_expect_eq(view_cursor_seek(&cursor, -1, SEEK_SET), -1);
    cr_expect_eq(errno, EINVAL);
    errno = 0;
    cr_expect_eq(view_cursor_seek(&cursor, -21, SEEK_CUR), -1);
    cr_expect_eq(errno, EINVAL);
    errno = 0;
    cr_expect_eq(view_cursor_seek(&cursor, 0, 42), -1);
    cr_expect_eq(errno, EINVAL);
    errno = 0;
    cr_expect_eq(view_cursor_seek(&cursor, INT64_MAX, SEEK_CUR), -1);
    cr_expect_eq(errno, EOVERFLOW);
    cr_expect_eq(cursor.offset, 20, "failed seeks move nothing");
    cr_expect_eq(data.file.view_pass, 0);
    /* the view is one data extent */
    cr_expect_eq(view_cursor_seek(&cursor, 30, SEEK_DATA), 30);
    cr_expect_eq(view_cursor_seek(&cursor, 30, SEEK_HOLE), VC_HEADER + VC_RECORD * VC_COUNT);
    errno = 0;
    cr_expect_eq(view_cursor_seek(&cursor, VC_HEADER + VC_RECORD * VC_COUNT, SEEK_DATA), -1);
    cr_expect_eq(errno, ENXIO);
    vc_teardown(&data);
}

Test(view_cursor, readv_is_read)
{
    static const size_t lengths[] = {3, 0, 9, 1, 20, 7, 64};
    struct vc_data a, b;
    vc_setup(&a, VC_HEADER, true, 3, 2);
    vc_setup(&b, VC_HEADER, true, 3, 2);
    struct view_cursor by_read, by_readv;
    view_cursor_open(&by_read, &a.file);
    view_cursor_open(&by_readv, &b.file);
    for (int round = 0; round < 3; round++) {
        unsigned char via_read[128], via_readv[128];
        size_t total = 0;
        struct iovec vector[sizeof lengths / sizeof lengths[0]];
        for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
            vector[i] = (struct iovec){via_readv + total, lengths[i]};
            total += lengths[i];
        }
        ssize_t got_readv = view_cursor_readv(&by_readv, vector,
                                              (int)(sizeof lengths / sizeof lengths[0]));
        /* readv is one read of the vectors' total size */
        ssize_t got_read = view_cursor_read(&by_read, via_read, total);
        cr_expect_eq(got_readv, got_read, "round %d", round);
        cr_expect_eq(memcmp(via_read, via_readv, (size_t)got_read), 0);
        cr_expect_eq(by_read.offset, by_readv.offset);
        cr_expect_eq(a.file.shared->tracker.delivered, b.file.shared->tracker.delivered);
    }
    /* both are at the end of the 36-byte view now; a 0 ends the pass */
    unsigned char buffer[8];
    struct iovec vector[2] = {{buffer, 0}, {buffer, sizeof buffer}};
    cr_assert_eq(view_cursor_read(&by_read, buffer, sizeof buffer), 0);
    cr_expect_eq(view_cursor_readv(&by_readv, vector, 2), 0);
    cr_expect_eq(a.file.view_pass, 1);
    cr_expect_eq(b.file.view_pass, 1);
    /* an empty vector reads nothing and ends nothing */
    cr_assert_eq(view_cursor_seek(&by_readv, 0, SEEK_SET), 0);
    cr_expect_eq(view_cursor_readv(&by_readv, vector, 1), 0);
    cr_expect_eq(view_cursor_readv(&by_readv, vector, 0), 0);
    cr_expect_eq(b.file.view_pass, 1);
    vc_teardown(&a);
    vc_teardown(&b);
}

Test(view_cursor, preadv_is_pread)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 2, 1);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    uint64_t size = view_cursor_size(&cursor, SIZE_QUESTION_ANY);
    for (uint64_t offset = 0; offset <= size; offset += 3) {
        unsigned char via_pread[64], via_preadv[64];
        struct iovec vector[3] = {{via_preadv, 5}, {via_preadv + 5, 0}, {via_preadv + 5, 11}};
        ssize_t expected = view_cursor_pread(&cursor, via_pread, 16, offset);
        cr_assert_eq(view_cursor_preadv(&cursor, vector, 3, offset), expected);
        cr_assert_eq(memcmp(via_pread, via_preadv, (size_t)expected), 0);
    }
    cr_expect_eq(cursor.offset, 0);
    cr_expect_eq(data.file.view_pass, 0);
    vc_teardown(&data);
}

Test(view_cursor, cursors_on_one_file_share_the_pass)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor loader, probe;
    view_cursor_open(&loader, &data.file);
    view_cursor_open(&probe, &data.file);
    vc_read_exactly(&loader, VC_HEADER + 3 * VC_RECORD);
    uint64_t pass, index;
    pass_tracker_position(&data.file.shared->tracker, 0, &pass, &index, &(uint64_t){0});
    cr_expect_eq(index, 3);
    /* the probe rereads from the start: not in order, no extra progress */
    vc_read_exactly(&probe, VC_HEADER + VC_RECORD);
    pass_tracker_position(&data.file.shared->tracker, 0, &pass, &index, &(uint64_t){0});
    cr_expect_eq(index, 3);
    /* the loader finishes the pass; the probe, mid-way, sees its end too */
    vc_read_to_end(&loader, 32, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    unsigned char buffer[8];
    cr_expect_eq(view_cursor_read(&probe, buffer, sizeof buffer), 0);
    cr_expect_eq(data.file.view_pass, 1);
    /* a third cursor that has not read anything starts on pass 1 */
    struct view_cursor late;
    view_cursor_open(&late, &data.file);
    cr_expect_eq(late.pass, 1);
    vc_teardown(&data);
}

Test(view_cursor, an_unread_cursor_joins_the_pass_another_one_started)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor first, second;
    view_cursor_open(&first, &data.file);
    view_cursor_open(&second, &data.file);
    vc_read_to_end(&first, 64, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    /* second was opened in pass 0 but never read: it reads pass 1 */
    unsigned char got[VC_HEADER + VC_RECORD], expected[sizeof got];
    vc_read_fully(&second, got, sizeof got);
    cr_assert_eq(dataset_view_copy(&data.file, 0, expected, sizeof expected), sizeof expected);
    cr_expect_eq(memcmp(got, expected, sizeof got), 0);
    cr_expect_eq(second.pass, 1);
    vc_teardown(&data);
}

/* --- the stdio helpers ----------------------------------------------------- */

Test(view_cursor, move_applies_no_pass_rule)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, VC_HEADER + 2 * VC_RECORD);
    /* glibc seeking its cookie back to a buffer boundary is not a rewind */
    cr_expect_eq(view_cursor_move(&cursor, 0, SEEK_SET), 0);
    cr_expect_eq(data.file.view_pass, 0);
    cr_expect_eq(view_cursor_move(&cursor, 5, SEEK_CUR), 5);
    cr_expect_eq(view_cursor_move(&cursor, -2, SEEK_END), VC_HEADER + VC_RECORD * VC_COUNT - 2);
    errno = 0;
    cr_expect_eq(view_cursor_move(&cursor, -1, SEEK_SET), -1);
    cr_expect_eq(errno, EINVAL);
    errno = 0;
    cr_expect_eq(view_cursor_move(&cursor, 0, 99), -1);
    cr_expect_eq(errno, EINVAL);
    cr_expect_eq(data.file.view_pass, 0);
    vc_teardown(&data);
}

Test(view_cursor, move_joins_the_current_pass_except_for_a_query)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_to_end(&cursor, 64, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    /* ftell: SEEK_CUR 0 reports the old end and stays on the old pass */
    cr_expect_eq(view_cursor_move(&cursor, 0, SEEK_CUR), VC_HEADER + VC_RECORD * VC_COUNT);
    cr_expect_eq(cursor.pass, 0);
    unsigned char buffer[8];
    cr_expect_eq(view_cursor_read(&cursor, buffer, sizeof buffer), 0);
    cr_expect_eq(data.file.view_pass, 1);
    /* an explicit move joins pass 1 without ending it */
    cr_expect_eq(view_cursor_move(&cursor, 0, SEEK_SET), 0);
    cr_expect_eq(cursor.pass, 1);
    cr_expect_eq(data.file.view_pass, 1);
    vc_teardown(&data);
}

Test(view_cursor, reposition_rule_ends_a_pass_on_rewind_after_every_record)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    /* nothing read yet: moving to 0 is harmless */
    cr_expect_not(view_cursor_reposition_rule(&cursor, VC_HEADER + 8, 0));
    cr_expect_eq(data.file.view_pass, 0);
    vc_read_exactly(&cursor, VC_HEADER + 2 * VC_RECORD);
    /* back to the header with records undelivered: a seek, no pass end */
    cr_expect_not(view_cursor_reposition_rule(&cursor, VC_HEADER + 9, VC_HEADER));
    cr_expect_eq(data.file.view_pass, 0);
    vc_read_exactly(&cursor, (VC_COUNT - 2) * VC_RECORD);
    /* forward, or from the header to the start: not a rewind */
    cr_expect_not(view_cursor_reposition_rule(&cursor, VC_HEADER + 2, VC_HEADER + 40));
    cr_expect_not(view_cursor_reposition_rule(&cursor, VC_HEADER, 0));
    cr_expect_eq(data.file.view_pass, 0);
    /* back to the header after every record: the pass ends, the buffer is stale */
    cr_expect(view_cursor_reposition_rule(&cursor, VC_HEADER + 9, VC_HEADER));
    cr_expect_eq(data.file.view_pass, 1);
    /* until the stream moves (view_cursor_move), it is still stale, and a
     * second rewind does not end pass 1 */
    cr_expect(view_cursor_reposition_rule(&cursor, VC_HEADER + 9, 0));
    cr_expect_eq(data.file.view_pass, 1);
    cr_expect_eq(view_cursor_move(&cursor, 0, SEEK_SET), 0);
    cr_expect_not(view_cursor_reposition_rule(&cursor, 0, 0));
    cr_expect_eq(data.file.view_pass, 1);
    vc_teardown(&data);
}

Test(view_cursor, reposition_rule_after_eof_discards_the_buffer)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_to_end(&cursor, 64, NULL, 0);
    cr_assert_eq(data.file.view_pass, 1);
    cr_expect(view_cursor_reposition_rule(&cursor, VC_HEADER + VC_RECORD * VC_COUNT, 0));
    cr_expect_eq(data.file.view_pass, 1, "rewind after EOF ends nothing more");
    vc_teardown(&data);
}

Test(view_cursor, a_header_only_pass_ends_when_the_trainer_rewinds_without_reading_eof)
{
    /* A trainer that reads the header, learns from its count field (or from
     * fstat) that there are no records, and rewinds for the next epoch never
     * sees a read return 0: the rewind must end the skipped pass. */
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 0, 0));
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char header[VC_HEADER];
    cr_assert_eq(view_cursor_read(&cursor, header, sizeof header), VC_HEADER);
    cr_assert_eq(data.file.view_pass, 0);
    cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
    cr_expect_eq(data.file.view_pass, 1, "the rewind ends skipped pass 0");
    cr_assert_eq(view_cursor_read(&cursor, header, sizeof header), VC_HEADER);
    cursor.offset = VC_HEADER;
    /* a reopen ends skipped pass 1 the same way */
    struct view_cursor reopened;
    view_cursor_open(&reopened, &data.file);
    cr_expect_eq(data.file.view_pass, 2, "the reopen ends skipped pass 1");
    cr_expect_eq(data.file.view_length, VC_COUNT, "pass 2 is the bound one");
    /* a seek that only skips the header does not end anything */
    cr_assert_eq(view_cursor_seek(&reopened, VC_HEADER, SEEK_SET), VC_HEADER);
    cr_expect_eq(data.file.view_pass, 2);
    vc_teardown(&data);
}

/* A loader that takes its record count from the size (fstat, SEEK_END and
 * ftell) reads nothing from a pass replay skips, whatever its header: it
 * closes the file and opens it again for its next epoch.  That reopen ends
 * the skipped pass; the first open after the restore does not. */
Test(view_cursor, a_header_only_pass_ends_when_a_loader_that_read_nothing_reopens)
{
    for (uint64_t header = 0; header <= VC_HEADER; header += VC_HEADER) {
        struct vc_data data;
        vc_setup(&data, header, true, 1, 0);
        cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 0, 0));
        struct view_cursor first, second, third;
        view_cursor_open(&first, &data.file);
        cr_expect_eq(data.file.view_pass, 0, "header %llu: the first open ends nothing",
                     (unsigned long long)header);
        cr_expect_eq(view_cursor_seek(&first, 0, SEEK_END), (off_t)header);
        view_cursor_close(&first);
        view_cursor_open(&second, &data.file);
        cr_expect_eq(data.file.view_pass, 1, "header %llu: the reopen ends skipped pass 0",
                     (unsigned long long)header);
        view_cursor_close(&second);
        view_cursor_open(&third, &data.file);
        cr_expect_eq(data.file.view_pass, 2, "header %llu: and skipped pass 1",
                     (unsigned long long)header);
        cr_expect_eq(data.file.view_length, VC_COUNT, "header %llu: pass 2 is the bound one",
                     (unsigned long long)header);
        view_cursor_close(&third);
        view_cursor_open(&first, &data.file);
        cr_expect_eq(data.file.view_pass, 2,
                     "header %llu: a reopen of a pass with records left ends nothing",
                     (unsigned long long)header);
        view_cursor_close(&first);
        vc_teardown(&data);
    }
}

/* A loader that asks a stat of the path for the size at every epoch: from a
 * pass replay skips it reads nothing, and may not even open the file; its
 * next stat ends the pass and reports the next one.  One that opens the
 * file first and then asks for the size ends one pass per epoch, at its
 * open, and one that asks first and then opens, at its stat. */
Test(view_cursor, a_stat_of_the_path_ends_a_header_only_pass_first_seen_by_a_stat)
{
    struct vc_data data;
    vc_setup(&data, 0, true, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 4, 0));
    cr_expect_eq(view_cursor_path_stat(&data.file), 0, "skipped pass 0: empty");
    cr_expect_eq(view_cursor_path_stat(&data.file), 0, "skipped pass 1: empty");
    cr_expect_eq(data.file.view_pass, 1);
    cr_expect_eq(view_cursor_path_stat(&data.file), (VC_COUNT - 4) * VC_RECORD,
                 "bound pass 2 from index 4");
    cr_expect_eq(view_cursor_path_stat(&data.file), (VC_COUNT - 4) * VC_RECORD,
                 "a pass with records left is not ended by a stat");
    cr_expect_eq(data.file.view_pass, 2);
    vc_teardown(&data);

    /* a stat, then an open, at every epoch */
    vc_setup(&data, 0, true, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 0, 0));
    struct view_cursor cursor;
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        cr_expect_eq(view_cursor_path_stat(&data.file), 0);
        view_cursor_open(&cursor, &data.file);
        cr_expect_eq(data.file.view_pass, epoch, "stat then open: epoch %llu sees pass %llu",
                     (unsigned long long)epoch, (unsigned long long)epoch);
        cr_expect_eq(view_cursor_path_stat(&data.file), 0, "a stat while the file is open");
        cr_expect_eq(data.file.view_pass, epoch);
        view_cursor_close(&cursor);
    }
    cr_expect_eq(view_cursor_path_stat(&data.file), VC_COUNT * VC_RECORD, "bound pass 2");
    vc_teardown(&data);

    /* an open, then a stat, at every epoch */
    vc_setup(&data, 0, true, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 0, 0));
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        view_cursor_open(&cursor, &data.file);
        view_cursor_close(&cursor);
        cr_expect_eq(data.file.view_pass, epoch, "open then stat: epoch %llu sees pass %llu",
                     (unsigned long long)epoch, (unsigned long long)epoch);
        cr_expect_eq(view_cursor_path_stat(&data.file), epoch < 2 ? 0 : VC_COUNT * VC_RECORD);
    }
    vc_teardown(&data);
}

/* Once every record of a pass was delivered, a stat of the path reports
 * the next pass's size: after a partial bound pass, the next is a whole
 * one.  Whether the file is still open does not matter: a PyTorch Dataset
 * made anew at each epoch calls os.path.getsize while the old Dataset, its
 * file open, is not yet released.  The old descriptor stays on the pass
 * just ended (it reads 0 and ends nothing) until the loader moves it. */
Test(view_cursor, a_stat_of_the_path_after_a_covered_pass_reports_the_next_one)
{
    for (int keep_open = 0; keep_open <= 1; keep_open++) {
        struct vc_data data;
        vc_setup(&data, 0, true, 1, 0);
        cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 0, 6, 0));
        struct view_cursor cursor;
        view_cursor_open(&cursor, &data.file);
        cr_expect_eq(view_cursor_path_stat(&data.file), 4 * VC_RECORD,
                     "a pass with records left is not ended by a stat");
        unsigned char records[4 * VC_RECORD];
        vc_read_fully(&cursor, records, sizeof records);
        if (!keep_open)
            view_cursor_close(&cursor);
        cr_expect_eq(view_cursor_path_stat(&data.file), VC_COUNT * VC_RECORD,
                     "open %d: pass 1 is whole", keep_open);
        cr_expect_eq(data.file.view_pass, 1);
        cr_expect_eq(view_cursor_path_stat(&data.file), VC_COUNT * VC_RECORD,
                     "open %d: one stat ends one pass", keep_open);
        cr_expect_eq(data.file.view_pass, 1);
        if (keep_open) {
            unsigned char byte;
            cr_expect_eq(view_cursor_read(&cursor, &byte, 1), 0, "the old pass is over");
            cr_expect_eq(data.file.view_pass, 1, "and its end ends nothing more");
            cr_assert_eq(view_cursor_move(&cursor, 0, SEEK_SET), 0);
            cr_expect_eq(view_cursor_read(&cursor, records, VC_RECORD), VC_RECORD,
                         "moved, it reads pass 1");
            view_cursor_close(&cursor);
        }
        vc_teardown(&data);
    }
}

/* A loader that opened the file before the restore and keeps it open asks
 * its descriptor's size at every epoch (fstat, or SEEK_END) and preads: the
 * question ends a header-only pass the second time, and a covered one at
 * once, so every epoch is told the next pass's size.  The descriptor stays
 * on the pass it finished until moved, as after a stat of the path. */
Test(view_cursor, a_size_asked_of_a_kept_descriptor_after_a_covered_pass_reports_the_next_one)
{
    for (int by_seek = 0; by_seek <= 1; by_seek++) {
        struct vc_data data;
        vc_setup(&data, 0, true, 1, 0);
        struct view_cursor cursor;
        view_cursor_open(&cursor, &data.file);
        cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 1, 6, 0));
        uint64_t (*size_of)(struct view_cursor *) =
            by_seek ? vc_size_by_seek_end : vc_size_by_fstat;
        cr_expect_eq(size_of(&cursor), 0, "seek %d: pass 0 is skipped, header-only", by_seek);
        cr_expect_eq(data.file.view_pass, 0, "its first sign does not end it");
        cr_expect_eq(size_of(&cursor), 4 * VC_RECORD, "seek %d: the second does", by_seek);
        cr_expect_eq(data.file.view_pass, 1);
        unsigned char record[VC_RECORD];
        for (uint64_t i = 0; i < 3; i++)
            cr_assert_eq(view_cursor_pread(&cursor, record, VC_RECORD, i * VC_RECORD),
                         VC_RECORD);
        cr_expect_eq(size_of(&cursor), 4 * VC_RECORD, "one record of the pass is left");
        cr_expect_eq(data.file.view_pass, 1);
        cr_assert_eq(view_cursor_pread(&cursor, record, VC_RECORD, 3 * VC_RECORD), VC_RECORD);
        cr_expect_eq(size_of(&cursor), VC_COUNT * VC_RECORD, "seek %d: pass 2 is whole",
                     by_seek);
        cr_expect_eq(data.file.view_pass, 2);
        cr_expect_eq(size_of(&cursor), VC_COUNT * VC_RECORD, "one question ends one pass");
        cr_expect_eq(data.file.view_pass, 2);
        view_cursor_close(&cursor);
        vc_teardown(&data);
    }
}

/* A worker process still alive may hold batches its parent has not trained
 * on yet: the parent's stat does not end the pass under it. */
Test(view_cursor, a_stat_of_the_path_waits_for_live_reader_processes)
{
    struct vc_data data;
    vc_setup(&data, 0, true, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 0, 6, 0));
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char records[4 * VC_RECORD];
    vc_read_fully(&cursor, records, sizeof records);
    view_cursor_close(&cursor);
    /* the parent of this test process stands for a live worker */
    reader_processes_add(&data.file.shared->readers, getppid());
    cr_expect_eq(view_cursor_path_stat(&data.file), 4 * VC_RECORD);
    cr_expect_eq(data.file.view_pass, 0);
    vc_teardown(&data);
}

/* A stdio loader that asks for the size (fseek SEEK_END, ftell), rewinds and
 * freads: glibc's fetch at the end of a header-only view returns 0 on a
 * stream the trainer moved, and that ends the pass, as it would on a
 * stream never moved. */
Test(view_cursor, a_fetch_at_the_end_of_a_header_only_pass_ends_it_after_the_trainer_moved)
{
    for (uint64_t header = 0; header <= VC_HEADER; header += VC_HEADER) {
        struct vc_data data;
        vc_setup(&data, header, true, 1, 0);
        cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 1, 0, 0));
        struct view_cursor cursor;
        view_cursor_open(&cursor, &data.file);
        cr_assert_eq(view_cursor_move(&cursor, 0, SEEK_END), (off_t)header);
        view_cursor_reposition_rule(&cursor, 0, header);
        cr_assert_eq(view_cursor_move(&cursor, 0, SEEK_SET), 0);
        view_cursor_reposition_rule(&cursor, header, 0);
        unsigned char buffer[64];
        uint64_t pass, offset;
        ssize_t got = view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset);
        cr_assert_eq(got, (ssize_t)header);
        if (got > 0) {
            view_cursor_deliver(&cursor, pass, offset, (uint64_t)got, false);
            got = view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset);
        }
        cr_expect_eq(got, 0);
        cr_expect_eq(data.file.view_pass, 1, "header %llu: the fetch returning 0 ends pass 0",
                     (unsigned long long)header);
        view_cursor_close(&cursor);
        vc_teardown(&data);
    }
}

Test(view_cursor, a_read_that_repeats_a_covered_pass_reads_the_next_one)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    /* a reader that visits records in its own order and never rewinds */
    for (int k = VC_COUNT - 1; k >= 0; k--) {
        cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER + k * VC_RECORD, SEEK_SET),
                     VC_HEADER + k * VC_RECORD);
        vc_read_exactly(&cursor, VC_RECORD);
    }
    cr_expect_eq(data.file.view_pass, 0);
    cr_expect(dataset_view_covered(&data.file));
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER + 3 * VC_RECORD, SEEK_SET),
                 VC_HEADER + 3 * VC_RECORD);
    unsigned char got[VC_RECORD], expected[VC_RECORD];
    vc_read_fully(&cursor, got, sizeof got);
    cr_expect_eq(data.file.view_pass, 1, "the read began the next epoch");
    cr_assert_eq(dataset_view_copy(&data.file, VC_HEADER + 3 * VC_RECORD, expected,
                                   sizeof expected), sizeof expected);
    cr_expect_eq(memcmp(got, expected, sizeof got), 0, "and shows the next pass's record");
    cr_expect_eq(data.file.shared->delivery.delivered, 1);
    vc_teardown(&data);
}

/* --- peek and consume (copies whose destination may take fewer bytes) ------- */

/* A copy to a destination that takes `taken` bytes of each peek of `chunk`
 * (at the cursor) until the view is exhausted: what it received must be the
 * view, and the cursor and delivery must follow what was taken. */
Test(view_cursor, peek_then_partial_consume_moves_only_past_what_was_taken)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor reference, cursor;
    view_cursor_open(&reference, &data.file);
    unsigned char view[VC_HEADER + VC_RECORD * VC_COUNT];
    size_t view_size = sizeof view;
    cr_assert_eq(dataset_view_copy(&data.file, 0, view, view_size), view_size);
    view_cursor_open(&cursor, &data.file);
    unsigned char received[sizeof view];
    size_t total = 0;
    for (int round = 0; round < 200 && total < view_size; round++) {
        unsigned char buffer[24];
        struct view_cursor_peek peek;
        ssize_t got = view_cursor_peek(&cursor, buffer, sizeof buffer, NULL, &peek);
        cr_assert_gt(got, 0, "the view ended after %zu bytes", total);
        cr_expect_eq(peek.offset, total);
        cr_expect_eq(cursor.offset, total, "a peek leaves the cursor where it is");
        /* the destination takes 5 bytes, then none, then all: like a pipe
         * that fills up and drains */
        size_t taken = round % 3 == 0 ? ((size_t)got < 5 ? (size_t)got : 5)
                       : round % 3 == 1 ? 0 : (size_t)got;
        memcpy(received + total, buffer, taken);
        view_cursor_consume(&cursor, &peek, taken);
        total += taken;
        cr_expect_eq(cursor.offset, total);
    }
    cr_assert_eq(total, view_size);
    cr_expect_eq(memcmp(received, view, view_size), 0, "every byte once, in order");
    cr_expect_eq(data.file.shared->tracker.delivered, VC_COUNT);
    cr_expect_eq(data.file.view_pass, 0, "only a read returning 0 ends the pass");
    unsigned char byte;
    struct view_cursor_peek peek;
    cr_expect_eq(view_cursor_peek(&cursor, &byte, 1, NULL, &peek), 0);
    cr_expect_eq(data.file.view_pass, 1, "a peek returning 0 at the end ends it, as a read");
    vc_teardown(&data);
}

Test(view_cursor, a_refused_peek_delivers_nothing)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[VC_HEADER + 3 * VC_RECORD];
    struct view_cursor_peek peek;
    cr_assert_eq(view_cursor_peek(&cursor, buffer, VC_HEADER, NULL, &peek), VC_HEADER);
    view_cursor_consume(&cursor, &peek, VC_HEADER);
    cr_assert_eq(view_cursor_peek(&cursor, buffer, 3 * VC_RECORD, NULL, &peek), 3 * VC_RECORD);
    view_cursor_consume(&cursor, &peek, 0);     /* EAGAIN: nothing taken */
    cr_expect_eq(cursor.offset, VC_HEADER);
    cr_expect_eq(data.file.shared->tracker.delivered, 0);
    view_cursor_consume(&cursor, &peek, 2 * VC_RECORD + 1);
    cr_expect_eq(cursor.offset, VC_HEADER + 2 * VC_RECORD + 1);
    cr_expect_eq(data.file.shared->tracker.delivered, 2, "a record counts once it is whole");
    vc_teardown(&data);
}

Test(view_cursor, a_peek_at_an_offset_never_moves_the_cursor)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    vc_read_exactly(&cursor, VC_HEADER + 2);
    unsigned char buffer[VC_RECORD], expected[VC_RECORD];
    struct view_cursor_peek peek;
    uint64_t at = VC_HEADER;
    cr_assert_eq(view_cursor_peek(&cursor, buffer, VC_RECORD, &at, &peek), VC_RECORD);
    cr_assert_eq(dataset_view_copy(&data.file, VC_HEADER, expected, VC_RECORD), VC_RECORD);
    cr_expect_eq(memcmp(buffer, expected, VC_RECORD), 0);
    cr_expect_eq(data.file.shared->tracker.delivered, 0, "nothing before the consume");
    view_cursor_consume(&cursor, &peek, VC_RECORD);
    cr_expect_eq(data.file.shared->tracker.delivered, 1);
    cr_expect_eq(cursor.offset, VC_HEADER + 2);
    at = VC_HEADER + VC_RECORD * VC_COUNT;
    cr_expect_eq(view_cursor_peek(&cursor, buffer, VC_RECORD, &at, &peek), 0);
    cr_expect_eq(data.file.view_pass, 0, "positioned: never ends a pass");
    vc_teardown(&data);
}

/* --- fetch and deliver (stdio streams built on a cursor) --------------------- */

/* A stream's buffer fills through view_cursor_fetch, with no read limit and
 * no delivery; the stream reports what its trainer consumed with
 * view_cursor_deliver, for the pass the bytes were fetched in. */
Test(view_cursor, fetch_copies_past_the_read_limit_and_delivers_nothing)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[64];
    uint64_t pass = 99, offset = 99;
    cr_assert_eq(view_cursor_fetch(&cursor, buffer, 20, &pass, &offset), 20,
                 "a read would stop at the header's end");
    cr_expect_eq(pass, 0);
    cr_expect_eq(offset, 0);
    cr_expect_eq(memcmp(buffer, data.bytes, 20), 0);
    cr_expect_eq(cursor.offset, 20, "the cursor moves as a read's");
    cr_expect_eq(data.file.shared->tracker.delivered, 0, "the buffer is not the trainer's");
    cr_expect_not(dataset_view_started(&data.file));
    cr_assert_eq(view_cursor_fetch(&cursor, buffer, 10, &pass, &offset), 10);
    cr_expect_eq(offset, 20, "where these bytes start in the view");
    cr_expect_eq(memcmp(buffer, data.bytes + 20, 10), 0);

    struct vc_data other;
    vc_setup(&other, VC_HEADER, false, 1, 0);
    struct view_cursor reader;
    view_cursor_open(&reader, &other.file);
    cr_expect_eq(view_cursor_read(&reader, buffer, 20), VC_HEADER, "read's limit, for contrast");
    vc_teardown(&other);
    vc_teardown(&data);
}

Test(view_cursor, deliver_counts_a_record_once_its_last_byte_is_consumed)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[VC_HEADER + VC_RECORD * VC_COUNT];
    uint64_t pass, offset;
    cr_assert_eq(view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset),
                 sizeof buffer);
    view_cursor_deliver(&cursor, pass, offset, VC_HEADER, false);
    cr_expect_eq(data.file.shared->tracker.delivered, 0, "the header delivers nothing");
    cr_expect_not(dataset_view_started(&data.file));
    view_cursor_deliver(&cursor, pass, VC_HEADER, VC_RECORD - 1, false);
    cr_expect_eq(data.file.shared->tracker.delivered, 0, "a record short of its last byte");
    view_cursor_deliver(&cursor, pass, VC_HEADER + VC_RECORD - 1, 1, false);
    cr_expect_eq(data.file.shared->tracker.delivered, 1);
    cr_expect(dataset_view_started(&data.file), "the first record begins the pass");
    view_cursor_deliver(&cursor, pass, VC_HEADER + VC_RECORD, 3 * VC_RECORD, false);
    cr_expect_eq(data.file.shared->tracker.delivered, 4);
    cr_expect_eq(data.file.view_pass, 0, "delivering never ends a pass");
    vc_teardown(&data);
}

Test(view_cursor, deliver_for_a_pass_that_is_over_does_nothing)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[VC_HEADER + VC_RECORD * VC_COUNT];
    uint64_t pass, offset;
    cr_assert_eq(view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset),
                 sizeof buffer);
    cr_expect_eq(view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset), 0);
    cr_assert_eq(data.file.view_pass, 1, "the stream never moved: its 0 ends the pass");
    cr_expect_eq(data.file.shared->tracker.records_served, 0, "none of it was consumed");
    view_cursor_deliver(&cursor, 0, VC_HEADER, 3 * VC_RECORD, false);
    cr_expect_eq(data.file.shared->tracker.delivered, 0, "bytes of pass 0 count for nothing");
    cr_expect_not(dataset_view_started(&data.file), "pass 1 has not begun");
    cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
    cr_assert_eq(view_cursor_fetch(&cursor, buffer, 2 * VC_RECORD, &pass, &offset),
                 2 * VC_RECORD);
    cr_expect_eq(pass, 1, "bytes of the next pass say so");
    view_cursor_deliver(&cursor, pass, offset, 2 * VC_RECORD, false);
    cr_expect_eq(data.file.shared->tracker.delivered, 1, "header and one record");
    vc_teardown(&data);
}

Test(view_cursor, a_fetch_returning_zero_after_the_trainer_moved_ends_only_a_covered_pass)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char buffer[VC_HEADER + VC_RECORD * VC_COUNT];
    uint64_t pass, offset;
    /* a loader that seeks its stream to its own batch order reaches the end
     * of the view with whatever batch comes last */
    cr_expect_not(view_cursor_reposition_rule(&cursor, 0, VC_HEADER + 5 * VC_RECORD));
    cr_assert_eq(view_cursor_move(&cursor, VC_HEADER + 5 * VC_RECORD, SEEK_SET),
                 VC_HEADER + 5 * VC_RECORD);
    cr_assert_eq(view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset),
                 5 * VC_RECORD);
    view_cursor_deliver(&cursor, pass, offset, 5 * VC_RECORD, false);
    cr_expect_eq(view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset), 0);
    cr_expect_eq(data.file.view_pass, 0, "five records are still to come: no pass end");
    cr_expect_eq(view_cursor_fetch(&cursor, buffer, 0, &pass, &offset), 0);
    cr_expect_eq(data.file.view_pass, 0);
    /* the loader goes back for the first half, then glibc asks for more */
    cr_expect_not(view_cursor_reposition_rule(&cursor, VC_HEADER + VC_RECORD * VC_COUNT, 0));
    cr_assert_eq(view_cursor_move(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    cr_assert_eq(view_cursor_fetch(&cursor, buffer, 5 * VC_RECORD, &pass, &offset),
                 5 * VC_RECORD);
    view_cursor_deliver(&cursor, pass, offset, 5 * VC_RECORD, false);
    cr_assert(dataset_view_covered(&data.file));
    cr_assert_eq(view_cursor_move(&cursor, 0, SEEK_END), VC_HEADER + VC_RECORD * VC_COUNT);
    cr_expect_eq(view_cursor_fetch(&cursor, buffer, sizeof buffer, &pass, &offset), 0);
    cr_expect_eq(data.file.view_pass, 1, "covered: the 0 ends the pass");
    vc_teardown(&data);
}

/* --- a loader that takes the size once (runtime/stale_size.h) ------------- */

/* Reads every record of the current pass, by index as a map-style Dataset
 * does, then seeks back to the first record, which ends the covered pass. */
static void vc_read_pass_by_index(struct view_cursor *cursor, uint64_t records)
{
    for (uint64_t index = 0; index < records; index++) {
        off_t at = (off_t)(VC_HEADER + index * VC_RECORD);
        cr_assert_eq(view_cursor_seek(cursor, at, SEEK_SET), at);
        vc_read_exactly(cursor, VC_RECORD);
    }
    cr_assert_eq(view_cursor_seek(cursor, VC_HEADER, SEEK_SET), VC_HEADER);
}

/* The first record of the current pass, with what stale_size says then. */
static bool vc_first_read_is_stale(struct vc_data *data, struct view_cursor *cursor,
                                   char *message, size_t message_size)
{
    dataset_file_lock(&data->file);
    bool stale = stale_size_pass_begins_unasked(&data->file, message, message_size);
    dataset_file_unlock(&data->file);
    vc_read_exactly(cursor, VC_RECORD);
    return stale;
}

Test(stale_size, a_pass_read_with_the_count_of_a_resumed_pass_is_named_once)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 0, 6, 0));
    cr_expect_eq(view_cursor_path_stat(&data.file), VC_HEADER + 4 * VC_RECORD,
                 "the resumed pass holds the 4 records left");
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    vc_read_pass_by_index(&cursor, 4);
    cr_assert_eq(data.file.view_pass, 1);
    char message[1024] = "";
    cr_expect(vc_first_read_is_stale(&data, &cursor, message, sizeof message),
              "pass 1 is read with the count of pass 0");
    cr_expect_not_null(strstr(message, "/data/cursor.bin: pass 1 holds 10 records"), "%s",
                       message);
    cr_expect_not_null(strstr(message, "when its view held 4"), "%s", message);
    cr_expect_null(strchr(message, '\n'), "one line");
    vc_read_pass_by_index(&cursor, VC_COUNT);
    cr_expect_not(vc_first_read_is_stale(&data, &cursor, message, sizeof message),
                  "said once per file");
    vc_teardown(&data);
}

Test(stale_size, a_loader_that_asks_in_each_epoch_is_never_named)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 0, 6, 0));
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    char message[1024];
    uint64_t records = 4;
    for (int epoch = 0; epoch < 3; epoch++) {
        /* by path in even epochs, by a seek to the end in odd ones */
        if (epoch % 2 == 0)
            records = (view_cursor_path_stat(&data.file) - VC_HEADER) / VC_RECORD;
        else
            records = ((uint64_t)view_cursor_seek(&cursor, 0, SEEK_END) - VC_HEADER) /
                      VC_RECORD;
        cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
        cr_expect_not(vc_first_read_is_stale(&data, &cursor, message, sizeof message),
                      "epoch %d", epoch);
        vc_read_pass_by_index(&cursor, records);
    }
    cr_expect_eq(data.file.view_pass, 3);
    vc_teardown(&data);
}

Test(stale_size, a_count_taken_once_that_stays_right_is_never_named)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, true, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    uint64_t records = (view_cursor_path_stat(&data.file) - VC_HEADER) / VC_RECORD;
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    char message[1024];
    for (int epoch = 0; epoch < 3; epoch++) {
        cr_expect_not(vc_first_read_is_stale(&data, &cursor, message, sizeof message),
                      "every pass holds %llu records", (unsigned long long)records);
        vc_read_pass_by_index(&cursor, records);
    }
    vc_teardown(&data);
}

Test(stale_size, a_size_asked_through_a_stream_counts_and_fstat_does_not)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 0, 6, 0));
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    cr_expect_eq(view_cursor_size(&cursor, SIZE_QUESTION_TRAINER), VC_HEADER + 4 * VC_RECORD);
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    vc_read_pass_by_index(&cursor, 4);
    cr_expect_eq(view_cursor_size(&cursor, SIZE_QUESTION_ANY), VC_HEADER + VC_COUNT * VC_RECORD,
                 "an fstat sees the next pass but asks nothing");
    char message[1024];
    cr_expect(vc_first_read_is_stale(&data, &cursor, message, sizeof message));
    vc_teardown(&data);
}

Test(stale_size, a_replay_that_never_reached_its_bound_pass_is_named)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 4, 0));
    char message[1024] = "";
    cr_expect(stale_size_replay_unfinished(&data.file, message, sizeof message),
              "passes 0 and 1 skipped, pass 2 never read");
    cr_expect_not_null(strstr(message, "/data/cursor.bin: the trainer ended before replay "
                                       "reached pass 2"), "%s", message);
    cr_expect_not_null(strstr(message, "at record 4 of 10"), "%s", message);
    cr_expect_not_null(strstr(message, "ADAPTDL_RESUME=continue"), "%s", message);
    cr_expect_null(strchr(message, '\n'), "one line");
    /* two skipped passes, each its header read to the end */
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    for (int skipped = 0; skipped < 2; skipped++) {
        cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_SET), 0);
        cr_assert_eq(vc_read_to_end(&cursor, 64, NULL, 0), VC_HEADER);
    }
    cr_assert_eq(data.file.view_pass, 2);
    cr_expect(stale_size_replay_unfinished(&data.file, message, sizeof message),
              "the bound pass reached, none of its records read");
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    vc_read_exactly(&cursor, VC_RECORD);
    cr_expect_not(stale_size_replay_unfinished(&data.file, message, sizeof message),
                  "the bound pass begun");
    vc_teardown(&data);
}

Test(stale_size, only_an_unread_bound_pass_of_a_replay_with_records_left_is_named)
{
    char message[1024];
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_expect_not(stale_size_replay_unfinished(&data.file, message, sizeof message),
                  "no restore");
    vc_teardown(&data);
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 2, 4, 0));
    cr_expect_not(stale_size_replay_unfinished(&data.file, message, sizeof message),
                  "continue starts at the bound pass: nothing is skipped");
    vc_teardown(&data);
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, VC_COUNT, 0));
    cr_expect_not(stale_size_replay_unfinished(&data.file, message, sizeof message),
                  "a bound pass that was complete has nothing left to read");
    vc_teardown(&data);
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_REPLAY, 2, 0, 0));
    cr_expect_not(stale_size_replay_unfinished(&data.file, message, sizeof message),
                  "a pass bound at its first record: a finished job restarted ends so too");
    vc_teardown(&data);
}

Test(stale_size, what_is_noted_is_the_current_views_count)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 0, 6, 0));
    dataset_file_lock(&data.file);
    const struct size_answer *told = &data.file.shared->size_told;
    const struct size_answer *reported = &data.file.shared->size_reported;
    cr_expect_not(told->given, "nothing asked yet");
    stale_size_note_answer(&data.file, SIZE_QUESTION_ANY);
    cr_expect(reported->given, "an fstat's answer is reported");
    cr_expect_not(told->given, "but it is not a size the trainer asked for");
    stale_size_note_answer(&data.file, SIZE_QUESTION_TRAINER);
    cr_expect(told->given);
    cr_expect_eq(told->records, 4, "the resumed view's 4 records");
    cr_expect_eq(told->view_generation, data.file.shared->view_generation);
    cr_expect_eq(reported->records, 4);
    char message[1024];
    cr_expect_not(stale_size_pass_begins_unasked(&data.file, message, sizeof message),
                  "the view just asked about is not stale");
    dataset_file_unlock(&data.file);
    vc_teardown(&data);
}

/* --- a count told before a restore (stale_size_first_payload_read) -------- */

/* What the first read from past the header would find, asked directly. */
static enum stale_size_answer vc_first_payload_answer(struct vc_data *data, uint64_t *told,
                                                      char *message, size_t message_size)
{
    dataset_file_lock(&data->file);
    enum stale_size_answer answer =
        stale_size_first_payload_read(&data->file, told, message, message_size);
    dataset_file_unlock(&data->file);
    return answer;
}

/* The index held by the record at view position `position`, read by seek. */
static uint64_t vc_record_at(struct view_cursor *cursor, uint64_t position)
{
    off_t at = (off_t)(VC_HEADER + position * VC_RECORD);
    cr_assert_eq(view_cursor_seek(cursor, at, SEEK_SET), at);
    uint64_t index = UINT64_MAX;
    vc_read_fully(cursor, (unsigned char *)&index, sizeof index);
    return index;
}

/* A loader told the whole file's size (a Dataset built before the trainer
 * loads its checkpoint), then the restore of (`resume`, pass, index). */
static void vc_setup_told_whole_then_restored(struct vc_data *data, enum resume_mode resume,
                                              uint64_t pass, uint64_t index)
{
    vc_setup(data, VC_HEADER, false, 1, 0);
    cr_assert_eq(view_cursor_path_stat(&data->file), VC_HEADER + VC_COUNT * VC_RECORD);
    cr_assert(dataset_view_restore(&data->file, resume, pass, index, 0));
}

Test(stale_size, a_count_told_before_a_restore_lengthens_the_resumed_pass)
{
    struct vc_data data;
    vc_setup_told_whole_then_restored(&data, RESUME_CONTINUE, 0, 6);
    uint64_t told = 0;
    char message[1024] = "";
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_LENGTHEN);
    cr_expect_eq(told, VC_COUNT);
    cr_expect_not_null(strstr(message, "/data/cursor.bin: pass 0 from index 6 holds 4 records, "
                                       "but the trainer reads it with the 10"), "%s", message);
    cr_expect_not_null(strstr(message, "lengthened to 10, the last 6"), "%s", message);
    cr_expect_null(strchr(message, '\n'), "one line");
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_LENGTHEN, "the answer stands until it is acted on");
    cr_expect_str_empty(message, "said once per file");

    /* its first item, at a position past the resumed view's end */
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    cr_expect_eq(vc_record_at(&cursor, 7), 3, "the fourth record of the next sweep");
    cr_expect_eq(data.file.view_length, VC_COUNT);
    cr_expect_eq(view_cursor_size(&cursor, SIZE_QUESTION_ANY), VC_HEADER + VC_COUNT * VC_RECORD);
    bool seen[VC_COUNT] = {false};
    for (uint64_t position = 0; position < VC_COUNT; position++) {
        uint64_t index = vc_record_at(&cursor, position);
        cr_assert_lt(index, VC_COUNT);
        seen[index] = true;
        if (position < 4)
            cr_expect_eq(index, 6 + position, "the records left come first");
    }
    for (uint64_t index = 0; index < VC_COUNT; index++)
        cr_expect(seen[index], "record %llu read", (unsigned long long)index);
    cr_expect_eq(data.file.view_pass, 0, "one pass");
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_SERVE_AS_IS, "begun");
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    cr_expect_eq(vc_record_at(&cursor, 0), 0, "the next pass, whole and plain");
    cr_expect_eq(data.file.view_pass, 1);
    cr_expect_eq(data.file.view_length, VC_COUNT);
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, a_header_read_or_a_size_asked_again_keeps_the_resumed_pass_exact)
{
    struct vc_data data;
    vc_setup_told_whole_then_restored(&data, RESUME_CONTINUE, 0, 6);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    unsigned char header[64];
    cr_expect_eq(view_cursor_read(&cursor, header, sizeof header), VC_HEADER,
                 "a buffered header read stops at the header");
    cr_expect_eq(data.file.view_length, 4, "reading the header decides nothing");
    /* a Dataset built anew after the restore asks again */
    cr_expect_eq(view_cursor_path_stat(&data.file), VC_HEADER + 4 * VC_RECORD);
    uint64_t told = 0;
    char message[1024];
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_SERVE_AS_IS);
    cr_expect_eq(vc_record_at(&cursor, 0), 6);
    cr_expect_eq(data.file.view_length, 4);
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, a_pread_past_the_resumed_views_end_is_served_too)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    cr_assert_eq(view_cursor_seek(&cursor, 0, SEEK_END), VC_HEADER + VC_COUNT * VC_RECORD);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 0, 6, 0));
    uint64_t index = UINT64_MAX;
    cr_expect_eq(view_cursor_pread(&cursor, &index, sizeof index, VC_HEADER + 9 * VC_RECORD),
                 (ssize_t)sizeof index);
    cr_expect_eq(index, 5, "the last record of the next sweep");
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, a_complete_resumed_pass_read_with_a_count_gives_way_to_the_next)
{
    struct vc_data data;
    vc_setup_told_whole_then_restored(&data, RESUME_CONTINUE, 2, VC_COUNT);
    uint64_t told = 0;
    char message[1024];
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_END_COMPLETE_PASS);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    cr_expect_eq(vc_record_at(&cursor, 3), 3);
    cr_expect_eq(data.file.view_pass, 3, "pass 2 was complete: pass 3 is read");
    cr_expect_eq(data.file.view_length, VC_COUNT);
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, a_skipped_pass_read_with_a_count_is_named_and_stays_empty)
{
    struct vc_data data;
    vc_setup_told_whole_then_restored(&data, RESUME_REPLAY, 1, 6);
    uint64_t told = 0;
    char message[1024] = "";
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_CANNOT_REPLAY);
    cr_expect_not_null(strstr(message, "/data/cursor.bin: replay skips pass 0, an empty "
                                       "file, but the trainer reads it with the 10 records"),
                       "%s", message);
    cr_expect_not_null(strstr(message, "ADAPTDL_RESUME=continue"), "%s", message);
    cr_expect_null(strchr(message, '\n'), "one line");
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    uint64_t index;
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER + 2 * VC_RECORD, SEEK_SET),
                 VC_HEADER + 2 * VC_RECORD);
    cr_expect_eq(view_cursor_read(&cursor, &index, sizeof index), 0, "nothing to read");
    cr_expect(data.file.shared->tracker.skipped || data.file.view_pass == 1,
              "still replaying");
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, an_eval_file_or_an_unasked_pass_is_served_as_it_is)
{
    struct vc_data data;
    vc_setup(&data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 0, 6, 0));
    uint64_t told = 0;
    char message[1024];
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_SERVE_AS_IS, "nothing asked");
    vc_teardown(&data);
    vc_setup(&data, VC_HEADER, false, 1, 0);
    data.entry.role = DATA_ROLE_EVAL;
    cr_assert_eq(view_cursor_path_stat(&data.file), VC_HEADER + VC_COUNT * VC_RECORD);
    cr_assert(dataset_view_restore(&data.file, RESUME_CONTINUE, 0, 6, 0));
    cr_expect_eq(vc_first_payload_answer(&data, &told, message, sizeof message),
                 STALE_SIZE_SERVE_AS_IS, "an eval pass is never longer than its file");
    vc_teardown(&data);
}

/* --- a count taken by fstat (stale_size_positioned_past_end) -------------- */

/* A C loader that sized the file with fstat before its trainer loaded the
 * checkpoint, then visits the records by index. */
static void vc_setup_fstat_whole_then_restored(struct vc_data *data, struct view_cursor *cursor)
{
    vc_setup(data, VC_HEADER, false, 1, 0);
    view_cursor_open(cursor, &data->file);
    cr_assert_eq(view_cursor_size(cursor, SIZE_QUESTION_ANY), VC_HEADER + VC_COUNT * VC_RECORD);
    cr_assert(dataset_view_restore(&data->file, RESUME_CONTINUE, 0, 6, 0));
}

Test(stale_size, a_count_from_fstat_is_served_when_the_loader_seeks_past_the_end)
{
    struct vc_data data;
    struct view_cursor cursor;
    vc_setup_fstat_whole_then_restored(&data, &cursor);
    cr_expect_eq(vc_record_at(&cursor, 1), 7, "inside the resumed view: nothing to decide");
    cr_expect_eq(data.file.view_length, 4);
    cr_expect_eq(vc_record_at(&cursor, 8), 4, "past its end: the next sweep's");
    cr_expect_eq(data.file.view_length, VC_COUNT, "lengthened while under way");
    bool seen[VC_COUNT] = {false};
    for (uint64_t position = 0; position < VC_COUNT; position++)
        seen[vc_record_at(&cursor, position)] = true;
    for (uint64_t index = 0; index < VC_COUNT; index++)
        cr_expect(seen[index], "record %llu read", (unsigned long long)index);
    cr_expect_eq(data.file.shared->delivery.delivered, VC_COUNT, "every position delivered once");
    cr_expect_eq(data.file.view_pass, 0);
    cr_expect_eq(vc_record_at(&cursor, 0), 0, "a covered pass read again is the next one");
    cr_expect_eq(data.file.view_pass, 1);
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, a_count_from_fstat_leaves_a_reader_to_the_end_exact)
{
    struct vc_data data;
    struct view_cursor cursor;
    vc_setup_fstat_whole_then_restored(&data, &cursor);
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    unsigned char records[VC_COUNT * VC_RECORD];
    cr_expect_eq(vc_read_to_end(&cursor, VC_RECORD, records, sizeof records), 4 * VC_RECORD,
                 "the records left, and end-of-file");
    cr_expect_eq(data.file.view_pass, 1, "the read returning 0 ended the pass");
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, a_read_placed_past_the_end_is_served_only_within_the_reported_count)
{
    struct vc_data data;
    struct view_cursor cursor;
    vc_setup_fstat_whole_then_restored(&data, &cursor);
    uint64_t records = 0;
    char message[1024] = "";
    dataset_file_lock(&data.file);
    cr_expect_not(stale_size_positioned_past_end(&data.file, VC_HEADER + 3 * VC_RECORD,
                                                 &records, message, sizeof message),
                  "inside the view");
    cr_expect_not(stale_size_positioned_past_end(&data.file, VC_HEADER + VC_COUNT * VC_RECORD,
                                                 &records, message, sizeof message),
                  "past the count it was told too");
    cr_expect(stale_size_positioned_past_end(&data.file, VC_HEADER + 4 * VC_RECORD, &records,
                                             message, sizeof message));
    cr_expect_eq(records, VC_COUNT);
    cr_expect_not_null(strstr(message, "but the trainer reads it with the 10"), "%s", message);
    data.file.shared->mapped = true;
    cr_expect_not(stale_size_positioned_past_end(&data.file, VC_HEADER + 4 * VC_RECORD,
                                                 &records, message, sizeof message),
                  "a mapping cannot grow");
    dataset_file_unlock(&data.file);
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

/* --- a shorter count kept (stale_size_count_covered) ----------------------- */

/* A view resumed under continue at index 6, its 4 records counted by a
 * stat of the path (a Dataset built once after the restore), and a cursor
 * open on it. */
static void vc_setup_counted_after_restore(struct vc_data *data, struct view_cursor *cursor)
{
    vc_setup(data, VC_HEADER, false, 1, 0);
    cr_assert(dataset_view_restore(&data->file, RESUME_CONTINUE, 0, 6, 0));
    cr_assert_eq(view_cursor_path_stat(&data->file), VC_HEADER + 4 * VC_RECORD);
    view_cursor_open(cursor, &data->file);
}

/* One epoch of a loader that reads `count` records by index, then seeks
 * back to the first: the records it got, in `records`. */
static void vc_epoch_by_index(struct view_cursor *cursor, uint64_t count, uint64_t *records)
{
    for (uint64_t position = 0; position < count; position++)
        records[position] = vc_record_at(cursor, position);
    cr_assert_eq(view_cursor_seek(cursor, VC_HEADER, SEEK_SET), VC_HEADER);
}

Test(stale_size, a_count_of_a_resumed_pass_reads_each_later_pass_on_where_it_stopped)
{
    struct vc_data data;
    struct view_cursor cursor;
    vc_setup_counted_after_restore(&data, &cursor);
    uint64_t records[4];
    vc_epoch_by_index(&cursor, 4, records);
    cr_expect_eq(records[0], 6);
    cr_expect_eq(data.file.view_pass, 1, "the resumed pass was read whole");
    char message[1024] = "";
    cr_expect(vc_first_read_is_stale(&data, &cursor, message, sizeof message));
    cr_expect_not_null(strstr(message, "reads 4 of them per epoch, and the pass goes on"), "%s",
                       message);
    cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
    /* pass 1, four epochs' worth: 0-3, 4-7, then 8, 9 and two of the next sweep */
    static const uint64_t expected[3][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 0, 1}};
    for (int epoch = 0; epoch < 3; epoch++) {
        cr_expect_eq(data.file.view_pass, 1, "epoch %d is still in pass 1", epoch);
        cr_expect_eq(data.file.view_start_index, 4 * (uint64_t)epoch, "epoch %d", epoch);
        vc_epoch_by_index(&cursor, 4, records);
        for (int i = 0; i < 4; i++)
            cr_expect_eq(records[i], expected[epoch][i], "epoch %d, record %d: %llu", epoch, i,
                         (unsigned long long)records[i]);
    }
    cr_expect_eq(data.file.view_pass, 2, "the last window was the rest of pass 1, whole");
    vc_epoch_by_index(&cursor, 4, records);
    cr_expect_eq(records[0], 0, "pass 2 from its start");
    cr_expect_eq(data.file.view_start_index, 4);
    view_cursor_close(&cursor);
    vc_teardown(&data);
}

Test(stale_size, a_reader_to_the_end_with_a_shorter_count_reads_each_pass_whole)
{
    struct vc_data data;
    struct view_cursor cursor;
    vc_setup_counted_after_restore(&data, &cursor);
    for (int epoch = 0; epoch < 3; epoch++) {
        cr_assert_eq(view_cursor_seek(&cursor, VC_HEADER, SEEK_SET), VC_HEADER);
        cr_expect_eq(vc_read_to_end(&cursor, VC_RECORD, NULL, 0),
                     (epoch == 0 ? 4 : VC_COUNT) * VC_RECORD, "epoch %d", epoch);
        cr_expect_eq(data.file.view_pass, (uint64_t)epoch + 1);
    }
    view_cursor_close(&cursor);
    vc_teardown(&data);
}
