/* test_dataset_view.c - one data file and the view of its current pass
 * (adaptshim(7) "What the trainer sees", transparency, tail policy, count=).
 *
 * Datasets are built in memory and handed to dataset_file_init as the
 * "mapping".  Every expected view is computed here independently of
 * dataset_view.c: the header (with the count field rewritten by hand), then
 * the records perm[(s + r + j*K) mod N] for j < ceil((N - s) / K), with perm
 * taken from record_permutation_apply. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataset_view.h"
#include "view_cursor.h"
#include "permutation.h"

#define DV_SEED 11
#define DV_PATH "/data/set/train.bin"
#define DV_BASENAME "train.bin"

/* --- building datasets ---------------------------------------------------- */

/* Byte `offset` of fixed record `index`: the index as a little-endian u64
 * first (when the record has room), then a pattern of both. */
static unsigned char dv_record_byte(uint64_t index, uint64_t offset, uint64_t record_size)
{
    if (record_size >= 8 && offset < 8)
        return (unsigned char)(index >> (8 * offset));
    return (unsigned char)(index * 31 + offset * 7 + 1);
}

static unsigned char dv_header_byte(uint64_t offset)
{
    return (unsigned char)(0xA0 + offset * 3);
}

/* header, N fixed records, then `extra` trailing bytes */
static unsigned char *dv_fixed_file(uint64_t header, uint64_t record_size, uint64_t count,
                                    uint64_t extra, uint64_t *size)
{
    *size = header + record_size * count + extra;
    unsigned char *bytes = malloc(*size ? *size : 1);
    cr_assert_not_null(bytes);
    for (uint64_t i = 0; i < header; i++)
        bytes[i] = dv_header_byte(i);
    for (uint64_t index = 0; index < count; index++)
        for (uint64_t b = 0; b < record_size; b++)
            bytes[header + index * record_size + b] = dv_record_byte(index, b, record_size);
    for (uint64_t i = 0; i < extra; i++)
        bytes[header + record_size * count + i] = 'x';
    return bytes;
}

/* Line `index`: "L<index>:" plus a variable run of letters, then '\n'. */
static size_t dv_line(uint64_t index, char *out)
{
    int length = sprintf(out, "L%llu:", (unsigned long long)index);
    uint64_t run = (index * 7) % 13;
    for (uint64_t i = 0; i < run; i++)
        out[length++] = (char)('a' + (index + i) % 26);
    out[length++] = '\n';
    return (size_t)length;
}

/* header, N lines, then `tail` (unterminated) */
static unsigned char *dv_lines_file(uint64_t header, uint64_t count, const char *tail,
                                    uint64_t *size)
{
    size_t capacity = header + count * 48 + strlen(tail) + 1;
    unsigned char *bytes = malloc(capacity);
    cr_assert_not_null(bytes);
    for (uint64_t i = 0; i < header; i++)
        bytes[i] = dv_header_byte(i);
    size_t used = header;
    for (uint64_t index = 0; index < count; index++)
        used += dv_line(index, (char *)bytes + used);
    memcpy(bytes + used, tail, strlen(tail));
    used += strlen(tail);
    *size = used;
    return bytes;
}

static struct data_entry dv_entry(uint64_t header, uint64_t record_size, bool shuffle,
                                  bool shard)
{
    return (struct data_entry){
        .glob = NULL,
        .record_size = record_size,
        .lines = record_size == 0,
        .header_size = header,
        .role = DATA_ROLE_TRAIN,
        .shuffle = shuffle,
        .shard = shard,
        .tail = TAIL_ERROR,
    };
}

static void dv_init(struct dataset_file *file, const struct data_entry *entry,
                    const unsigned char *bytes, uint64_t size, uint32_t replicas,
                    uint32_t rank)
{
    char error[512] = "";
    int status = dataset_file_init(file, entry, DV_PATH, bytes, size, DV_SEED, replicas, rank,
                                   error, sizeof error);
    cr_assert_eq(status, 0, "dataset_file_init: %s", error);
}

/* --- expected views, computed independently -------------------------------- */

struct dv_layout {
    uint64_t count;        /* N */
    uint64_t replicas;     /* K as the view uses it */
    uint64_t rank;
    uint64_t start;        /* s */
    uint64_t pass;
    bool shuffle;
    uint64_t seed;
    const char *basename;
};

static uint64_t dv_expected_length(const struct dv_layout *layout)
{
    if (layout->start >= layout->count)
        return 0;
    uint64_t remaining = layout->count - layout->start;
    return (remaining + layout->replicas - 1) / layout->replicas;
}

static uint64_t dv_expected_physical(const struct dv_layout *layout, uint64_t j)
{
    struct record_permutation permutation;
    record_permutation_init(&permutation, layout->count, layout->shuffle, layout->seed,
                            layout->basename, layout->pass, 0);
    uint64_t logical = (layout->start + layout->rank + j * layout->replicas) % layout->count;
    return record_permutation_apply(&permutation, logical);
}

/* Concatenation of header and the view's records (fixed size, or lines when
 * line_offsets is given).  The caller rewrites a count field itself. */
static unsigned char *dv_expected_view(const unsigned char *bytes, uint64_t header,
                                       uint64_t record_size, const uint64_t *line_offsets,
                                       const struct dv_layout *layout, uint64_t *size)
{
    uint64_t length = dv_expected_length(layout);
    uint64_t capacity = header;
    for (uint64_t j = 0; j < length; j++) {
        uint64_t physical = dv_expected_physical(layout, j);
        capacity += line_offsets ? line_offsets[physical + 1] - line_offsets[physical]
                                 : record_size;
    }
    unsigned char *view = malloc(capacity ? capacity : 1);
    cr_assert_not_null(view);
    memcpy(view, bytes, header);
    uint64_t used = header;
    for (uint64_t j = 0; j < length; j++) {
        uint64_t physical = dv_expected_physical(layout, j);
        uint64_t begin = line_offsets ? line_offsets[physical] : header + physical * record_size;
        uint64_t bytes_in_record =
            line_offsets ? line_offsets[physical + 1] - begin : record_size;
        memcpy(view + used, bytes + begin, bytes_in_record);
        used += bytes_in_record;
    }
    *size = used;
    return view;
}

/* Offsets of the lines of a dv_lines_file, computed from dv_line. */
static uint64_t *dv_line_offsets(uint64_t header, uint64_t count)
{
    uint64_t *offsets = malloc((count + 1) * sizeof *offsets);
    cr_assert_not_null(offsets);
    char line[64];
    offsets[0] = header;
    for (uint64_t index = 0; index < count; index++)
        offsets[index + 1] = offsets[index] + dv_line(index, line);
    return offsets;
}

static void dv_expect_whole_view(struct dataset_file *file, const unsigned char *expected,
                                 uint64_t expected_size, const char *what)
{
    cr_assert_eq(file->view_size, expected_size, "%s: view size %llu, expected %llu", what,
                 (unsigned long long)file->view_size, (unsigned long long)expected_size);
    unsigned char *got = malloc(expected_size + 16);
    cr_assert_not_null(got);
    size_t copied = dataset_view_copy(file, 0, got, expected_size + 16);
    cr_assert_eq(copied, expected_size, "%s: copied %zu", what, copied);
    cr_assert_eq(memcmp(got, expected, expected_size), 0, "%s: view bytes differ", what);
    free(got);
}

/* Copies at every offset (and a little past the end) with each size. */
static void dv_expect_every_offset(struct dataset_file *file, const unsigned char *expected,
                                   uint64_t expected_size, const size_t *sizes,
                                   size_t size_count)
{
    size_t largest = 0;
    for (size_t i = 0; i < size_count; i++)
        largest = sizes[i] > largest ? sizes[i] : largest;
    unsigned char *got = malloc(largest);
    cr_assert_not_null(got);
    for (size_t i = 0; i < size_count; i++)
        for (uint64_t offset = 0; offset <= expected_size + 2; offset++) {
            size_t want = sizes[i];
            uint64_t left = offset < expected_size ? expected_size - offset : 0;
            size_t expected_copied = left < want ? (size_t)left : want;
            size_t copied = dataset_view_copy(file, offset, got, want);
            if (copied != expected_copied ||
                memcmp(got, expected + (offset < expected_size ? offset : 0), copied) != 0)
                cr_assert_fail("copy of %zu at %llu: %zu bytes (expected %zu) or wrong bytes",
                               want, (unsigned long long)offset, copied, expected_copied);
        }
    free(got);
}

/* --- fixed records ------------------------------------------------------- */

Test(dataset_view, fixed_geometry)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(12, 10, 11, 0, &size);
    struct data_entry entry = dv_entry(12, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 3, 2);
    cr_expect_eq(file.record_count, 11);
    cr_expect_eq(file.payload_size, 110);
    cr_expect_eq(file.view_length, 4);
    cr_expect_eq(file.view_size, 12 + 4 * 10);
    cr_expect_eq(file.view_pass, 0);
    cr_expect_eq(file.view_start_index, 0);
    cr_expect_str_eq(file.basename, DV_BASENAME);
    cr_expect_not(dataset_view_started(&file));
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, view_is_header_then_permuted_records_for_every_layout)
{
    static const uint64_t record_sizes[] = {1, 3, 8, 13};
    const uint64_t count = 17, header = 5;
    for (size_t rs = 0; rs < sizeof record_sizes / sizeof record_sizes[0]; rs++) {
        uint64_t record_size = record_sizes[rs];
        uint64_t size;
        unsigned char *bytes = dv_fixed_file(header, record_size, count, 0, &size);
        for (int shuffle = 0; shuffle <= 1; shuffle++)
            for (uint32_t replicas = 1; replicas <= 5; replicas++)
                for (uint32_t rank = 0; rank < replicas; rank++) {
                    static const uint64_t starts[] = {0, 1, 8, 16, 17};
                    for (size_t si = 0; si < sizeof starts / sizeof starts[0]; si++) {
                        struct data_entry entry = dv_entry(header, record_size, shuffle, true);
                        struct dataset_file file;
                        dv_init(&file, &entry, bytes, size, replicas, rank);
                        if (starts[si] != 0)
                            cr_assert(dataset_view_restore(&file, RESUME_CONTINUE, 0,
                                                           starts[si], 0));
                        struct dv_layout layout = {count, replicas, rank, starts[si], 0,
                                                   shuffle, DV_SEED, DV_BASENAME};
                        cr_assert_eq(file.view_length, dv_expected_length(&layout));
                        uint64_t expected_size;
                        unsigned char *expected = dv_expected_view(bytes, header, record_size,
                                                                   NULL, &layout,
                                                                   &expected_size);
                        char what[128];
                        snprintf(what, sizeof what, "record %llu shuffle %d K %u r %u s %llu",
                                 (unsigned long long)record_size, shuffle, replicas, rank,
                                 (unsigned long long)starts[si]);
                        dv_expect_whole_view(&file, expected, expected_size, what);
                        free(expected);
                        dataset_file_release(&file);
                    }
                }
        free(bytes);
    }
}

/* The index map alone, as the copy uses it: every view position of every
 * shard maps to the record the independent computation expects, and the
 * shards of one pass cover the file, each record once but for the few that
 * pad every shard to the same length. */
Test(dataset_view, logical_to_physical_is_the_shard_of_the_pass_permutation)
{
    const uint64_t count = 23, header = 4, record_size = 3;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(header, record_size, count, 0, &size);
    for (uint32_t replicas = 1; replicas <= 4; replicas++) {
        unsigned seen[23] = {0};
        uint64_t served = 0;
        for (uint32_t rank = 0; rank < replicas; rank++) {
            struct data_entry entry = dv_entry(header, record_size, true, true);
            struct dataset_file file;
            dv_init(&file, &entry, bytes, size, replicas, rank);
            struct dv_layout layout = {count, replicas, rank, 0, 0, true, DV_SEED, DV_BASENAME};
            for (uint64_t j = 0; j < file.view_length; j++) {
                uint64_t physical = dataset_view_logical_to_physical(&file, j);
                cr_expect_eq(physical, dv_expected_physical(&layout, j), "K %u r %u j %llu",
                             replicas, rank, (unsigned long long)j);
                cr_assert_lt(physical, count);
                seen[physical]++;
                served++;
            }
            dataset_file_release(&file);
        }
        uint64_t padding = served - count;
        cr_expect_lt(padding, replicas, "K %u: %llu served", replicas,
                     (unsigned long long)served);
        uint64_t repeated = 0;
        for (uint64_t i = 0; i < count; i++) {
            cr_expect(seen[i] == 1 || seen[i] == 2, "K %u: record %llu served %u times",
                      replicas, (unsigned long long)i, seen[i]);
            repeated += seen[i] - 1;
        }
        cr_expect_eq(repeated, padding, "K %u: only the padding repeats", replicas);
    }
    free(bytes);
}

Test(dataset_view, copies_at_every_offset_with_odd_sizes)
{
    const uint64_t header = 7, record_size = 13, count = 29;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(header, record_size, count, 0, &size);
    struct data_entry entry = dv_entry(header, record_size, true, true);
    for (uint32_t rank = 0; rank < 3; rank++) {
        struct dataset_file file;
        dv_init(&file, &entry, bytes, size, 3, rank);
        struct dv_layout layout = {count, 3, rank, 0, 0, true, DV_SEED, DV_BASENAME};
        uint64_t expected_size;
        unsigned char *expected =
            dv_expected_view(bytes, header, record_size, NULL, &layout, &expected_size);
        const size_t sizes[] = {1, 3, record_size - 1, record_size, record_size + 1,
                                2 * record_size + 5, 100000};
        dv_expect_every_offset(&file, expected, expected_size, sizes,
                               sizeof sizes / sizeof sizes[0]);
        free(expected);
        dataset_file_release(&file);
    }
    free(bytes);
}

Test(dataset_view, copy_stops_at_the_view_end)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(4, 8, 10, 0, &size);
    struct data_entry entry = dv_entry(4, 8, false, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    cr_assert_eq(file.view_size, 4 + 5 * 8);
    unsigned char buffer[64];
    memset(buffer, 0x5a, sizeof buffer);
    cr_expect_eq(dataset_view_copy(&file, 40, buffer, sizeof buffer), 4);
    cr_expect_eq(buffer[4], 0x5a, "nothing written past the view");
    cr_expect_eq(dataset_view_copy(&file, 44, buffer, sizeof buffer), 0);
    cr_expect_eq(dataset_view_copy(&file, 1000, buffer, sizeof buffer), 0);
    cr_expect_eq(dataset_view_copy(&file, 0, buffer, 0), 0);
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, large_view_crosses_index_blocks)
{
    /* more records than one VIEW_INDEX_BLOCK, read backwards and forwards */
    const uint64_t count = 3 * VIEW_INDEX_BLOCK + 17, record_size = 8;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(0, record_size, count, 0, &size);
    struct data_entry entry = dv_entry(0, record_size, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    struct dv_layout layout = {count, 2, 1, 0, 0, true, DV_SEED, DV_BASENAME};
    uint64_t length = dv_expected_length(&layout);
    cr_assert_eq(file.view_length, length);
    struct record_permutation permutation;
    record_permutation_init(&permutation, count, true, DV_SEED, DV_BASENAME, 0, 0);
    for (uint64_t step = 0; step < 2 * length; step++) {
        uint64_t j = step < length ? length - 1 - step : step - length;
        uint64_t value = UINT64_MAX;
        if (dataset_view_copy(&file, j * record_size, &value, sizeof value) != 8)
            cr_assert_fail("short copy at record %llu", (unsigned long long)j);
        uint64_t expected = record_permutation_apply(&permutation, (1 + j * 2) % count);
        if (value != expected)
            cr_assert_fail("record %llu of the view is %llu, expected %llu",
                           (unsigned long long)j, (unsigned long long)value,
                           (unsigned long long)expected);
    }
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, each_pass_is_a_new_permutation_of_all_records)
{
    const uint64_t count = 64;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(0, 8, count, 0, &size);
    struct data_entry entry = dv_entry(0, 8, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    uint64_t previous[64];
    for (uint64_t pass = 0; pass < 3; pass++) {
        cr_assert_eq(file.view_pass, pass);
        uint64_t order[64];
        cr_assert_eq(dataset_view_copy(&file, 0, order, sizeof order), sizeof order);
        unsigned char seen[64] = {0};
        for (uint64_t j = 0; j < count; j++) {
            cr_assert_lt(order[j], count);
            cr_assert_not(seen[order[j]], "record %llu twice in one pass",
                          (unsigned long long)order[j]);
            seen[order[j]] = 1;
        }
        if (pass > 0)
            cr_expect_neq(memcmp(order, previous, sizeof order), 0, "pass %llu same order",
                          (unsigned long long)pass);
        memcpy(previous, order, sizeof order);
        cr_assert_eq(dataset_view_end_pass(&file), 0);
    }
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, order_depends_on_basename_and_seed_not_directory)
{
    const uint64_t count = 40;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(0, 8, count, 0, &size);
    struct data_entry entry = dv_entry(0, 8, true, true);
    char error[256];
    struct dataset_file a, b, c, d;
    cr_assert_eq(dataset_file_init(&a, &entry, "/mnt/a/train.bin", bytes, size, 5, 2, 1,
                                   error, sizeof error), 0);
    cr_assert_eq(dataset_file_init(&b, &entry, "/other/mount/train.bin", bytes, size, 5, 2, 1,
                                   error, sizeof error), 0);
    cr_assert_eq(dataset_file_init(&c, &entry, "/mnt/a/valid.bin", bytes, size, 5, 2, 1,
                                   error, sizeof error), 0);
    cr_assert_eq(dataset_file_init(&d, &entry, "/mnt/a/train.bin", bytes, size, 6, 2, 1,
                                   error, sizeof error), 0);
    uint64_t va[20], vb[20], vc[20], vd[20];
    cr_assert_eq(dataset_view_copy(&a, 0, va, sizeof va), sizeof va);
    cr_assert_eq(dataset_view_copy(&b, 0, vb, sizeof vb), sizeof vb);
    cr_assert_eq(dataset_view_copy(&c, 0, vc, sizeof vc), sizeof vc);
    cr_assert_eq(dataset_view_copy(&d, 0, vd, sizeof vd), sizeof vd);
    cr_expect_eq(memcmp(va, vb, sizeof va), 0, "same basename, same order");
    cr_expect_neq(memcmp(va, vc, sizeof va), 0, "another basename, another order");
    cr_expect_neq(memcmp(va, vd, sizeof va), 0, "another seed, another order");
    dataset_file_release(&a);
    dataset_file_release(&b);
    dataset_file_release(&c);
    dataset_file_release(&d);
    free(bytes);
}

Test(dataset_view, shard_0_gives_every_rank_all_records)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(3, 8, 21, 0, &size);
    struct data_entry entry = dv_entry(3, 8, true, false);
    struct dataset_file zero, three;
    dv_init(&zero, &entry, bytes, size, 4, 0);
    dv_init(&three, &entry, bytes, size, 4, 3);
    cr_expect_eq(three.replicas, 1);
    cr_expect_eq(three.rank, 0);
    cr_expect_eq(three.view_length, 21);
    unsigned char va[3 + 21 * 8], vb[3 + 21 * 8];
    cr_assert_eq(dataset_view_copy(&zero, 0, va, sizeof va), sizeof va);
    cr_assert_eq(dataset_view_copy(&three, 0, vb, sizeof vb), sizeof vb);
    cr_expect_eq(memcmp(va, vb, sizeof va), 0);
    dataset_file_release(&zero);
    dataset_file_release(&three);
    free(bytes);
}

Test(dataset_view, transparency_shuffle_0_shard_0_is_the_file)
{
    static const uint64_t record_sizes[] = {1, 5, 8, 64};
    for (size_t i = 0; i < sizeof record_sizes / sizeof record_sizes[0]; i++) {
        uint64_t size;
        unsigned char *bytes = dv_fixed_file(9, record_sizes[i], 37, 0, &size);
        struct data_entry entry = dv_entry(9, record_sizes[i], false, false);
        for (uint32_t rank = 0; rank < 3; rank++) {
            struct dataset_file file;
            dv_init(&file, &entry, bytes, size, 3, rank);
            for (int pass = 0; pass < 2; pass++) {
                dv_expect_whole_view(&file, bytes, size, "transparent view");
                cr_assert_eq(dataset_view_end_pass(&file), 0);
            }
            dataset_file_release(&file);
        }
        free(bytes);
    }
}

Test(dataset_view, records_before_fixed)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(10, 4, 9, 0, &size);
    struct data_entry entry = dv_entry(10, 4, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 0);
    cr_assert_eq(file.view_length, 5);
    cr_expect_eq(dataset_view_records_before(&file, 0), 0);
    cr_expect_eq(dataset_view_records_before(&file, 10), 0);
    cr_expect_eq(dataset_view_records_before(&file, 13), 0);
    cr_expect_eq(dataset_view_records_before(&file, 14), 1);
    cr_expect_eq(dataset_view_records_before(&file, 21), 2);
    cr_expect_eq(dataset_view_records_before(&file, 30), 5);
    cr_expect_eq(dataset_view_records_before(&file, 1000), 5);
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, a_record_is_delivered_with_its_last_byte_in_any_order)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    dataset_view_note_read(&file, 0, 6);             /* the header */
    cr_expect_eq(file.shared->tracker.delivered, 0);
    cr_expect_not(dataset_view_started(&file));
    dataset_view_note_read(&file, 6, 15);            /* 1.5 records */
    cr_expect_eq(file.shared->tracker.delivered, 1);
    cr_expect(dataset_view_started(&file));
    dataset_view_note_read(&file, 56, 10);           /* record 5, out of order */
    cr_expect_eq(file.shared->delivery.delivered, 2);
    cr_expect_eq(file.shared->tracker.delivered, 1, "progress is the delivered prefix");
    dataset_view_note_read(&file, 16, 20);           /* records 1 and 2 */
    cr_expect_eq(file.shared->tracker.delivered, 3);
    dataset_view_note_read(&file, 36, 0);
    dataset_view_note_read(&file, 36, 20);           /* 3 and 4: the prefix joins 5 */
    cr_expect_eq(file.shared->tracker.delivered, 6);
    uint64_t pass, index;
    pass_tracker_position(&file.shared->tracker, 0, &pass, &index, &(uint64_t){0});
    cr_expect_eq(index, 12, "s + K * P");
    cr_expect_not(dataset_view_covered(&file));
    dataset_view_note_read(&file, 66, 40);
    cr_expect(dataset_view_covered(&file));
    cr_expect(dataset_view_read_repeats_covered_pass(&file, 16, 10));
    cr_expect_not(dataset_view_read_repeats_covered_pass(&file, 0, 6), "the header is no record");
    cr_assert_eq(dataset_view_end_pass(&file), 0);
    cr_expect_eq(file.shared->delivery.delivered, 0);
    cr_expect_eq(file.shared->tracker.delivered, 0);
    cr_expect_not(dataset_view_covered(&file));
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, reads_stop_at_the_header_and_at_record_boundaries)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);   /* view: 6 + 10 * 10 bytes */
    cr_expect_eq(dataset_view_read_limit(&file, 0, 106), 106, "exactly the rest: whole");
    cr_expect_eq(dataset_view_read_limit(&file, 0, 4096), 6, "a larger buffer is read-ahead");
    cr_expect_eq(dataset_view_read_limit(&file, 0, 80), 6, "stops at the header's end");
    cr_expect_eq(dataset_view_read_limit(&file, 2, 3), 3);
    cr_expect_eq(dataset_view_read_limit(&file, 6, 20), 20, "whole records at a boundary");
    cr_expect_eq(dataset_view_read_limit(&file, 6, 25), 10, "not whole: one record");
    cr_expect_eq(dataset_view_read_limit(&file, 9, 20), 7, "inside a record: to its end");
    cr_expect_eq(dataset_view_read_limit(&file, 16, 4), 4);
    cr_expect_eq(dataset_view_block_size(&file), 10);
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, restore_refixes_the_view_only_before_start)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(0, 8, 30, 0, &size);
    struct data_entry entry = dv_entry(0, 8, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 4, 2);
    cr_assert(dataset_view_restore(&file, RESUME_REPLAY, 1, 10, 0));
    cr_expect_eq(file.view_length, 0, "pass 0 skipped under replay");
    cr_expect_eq(file.view_size, 0);
    cr_assert_eq(dataset_view_end_pass(&file), 0);
    cr_expect_eq(file.view_pass, 1);
    cr_expect_eq(file.view_start_index, 10);
    cr_expect_eq(file.view_length, 5);
    uint64_t first;
    cr_assert_eq(dataset_view_copy(&file, 0, &first, 8), 8);
    dataset_view_note_read(&file, 0, 8);
    struct dv_layout layout = {30, 4, 2, 10, 1, true, DV_SEED, DV_BASENAME};
    cr_expect_eq(first, dv_expected_physical(&layout, 0));
    cr_expect_not(dataset_view_restore(&file, RESUME_CONTINUE, 0, 0, 0));
    cr_expect_eq(file.view_pass, 1);
    cr_expect_eq(file.view_start_index, 10);
    dataset_file_release(&file);
    free(bytes);
}

/* --- tail policy and geometry errors ---------------------------------------- */

Test(dataset_view, tail_error_names_file_size_header_and_record)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(16, 10, 5, 3, &size);
    cr_assert_eq(size, 69);
    struct data_entry entry = dv_entry(16, 10, true, true);
    struct dataset_file file;
    char error[512] = "";
    cr_assert_eq(dataset_file_init(&file, &entry, "/data/odd.bin", bytes, size, 0, 1, 0,
                                   error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "/data/odd.bin"), "%s", error);
    cr_expect_not_null(strstr(error, "69"), "%s", error);
    cr_expect_not_null(strstr(error, "16"), "%s", error);
    cr_expect_not_null(strstr(error, "10"), "%s", error);
    cr_expect_not_null(strstr(error, "tail=drop"), "%s", error);
    cr_expect_null(strchr(error, '\n'), "one line");
    free(bytes);
}

/* A file name may hold a newline; the message stays one line all the same. */
Test(dataset_view, a_newline_in_the_file_name_keeps_the_message_on_one_line)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(16, 10, 5, 3, &size);
    struct data_entry entry = dv_entry(16, 10, true, true);
    struct dataset_file file;
    char error[512] = "";
    cr_assert_eq(dataset_file_init(&file, &entry, "/data/odd\nname.bin", bytes, size, 0, 1, 0,
                                   error, sizeof error),
                 -1);
    cr_expect_not_null(strstr(error, "/data/odd name.bin"), "%s", error);
    cr_expect_null(strchr(error, '\n'), "one line: %s", error);
    free(bytes);
}

Test(dataset_view, tail_drop_drops_the_partial_record)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(16, 10, 5, 3, &size);
    struct data_entry entry = dv_entry(16, 10, false, false);
    entry.tail = TAIL_DROP;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    cr_expect_eq(file.record_count, 5);
    cr_expect_eq(file.payload_size, 50);
    dv_expect_whole_view(&file, bytes, 66, "tail dropped");
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, file_smaller_than_header_is_refused)
{
    unsigned char bytes[4] = {1, 2, 3, 4};
    struct data_entry entry = dv_entry(8, 4, false, false);
    entry.tail = TAIL_DROP;
    struct dataset_file file;
    char error[512] = "";
    cr_assert_eq(dataset_file_init(&file, &entry, "/d/short.bin", bytes, 4, 0, 1, 0, error,
                                   sizeof error), -1);
    cr_expect_not_null(strstr(error, "/d/short.bin"), "%s", error);
    cr_expect_not_null(strstr(error, "size 4"), "%s", error);
    cr_expect_not_null(strstr(error, "8"), "%s", error);
}

Test(dataset_view, empty_and_header_only_files)
{
    /* the shim maps nothing for an empty file */
    struct data_entry entry = dv_entry(0, 8, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, NULL, 0, 2, 1);
    cr_expect_eq(file.record_count, 0);
    cr_expect_eq(file.view_size, 0);
    unsigned char buffer[8];
    cr_expect_eq(dataset_view_copy(&file, 0, buffer, sizeof buffer), 0);
    cr_assert_eq(dataset_view_end_pass(&file), 0);
    dataset_file_release(&file);

    struct data_entry lines = dv_entry(0, 0, true, true);
    dv_init(&file, &lines, NULL, 0, 2, 1);
    cr_expect_eq(file.record_count, 0);
    cr_expect_eq(file.view_size, 0);
    dataset_file_release(&file);

    unsigned char header[6] = {9, 8, 7, 6, 5, 4};
    struct data_entry with_header = dv_entry(6, 8, true, true);
    dv_init(&file, &with_header, header, 6, 3, 0);
    dv_expect_whole_view(&file, header, 6, "header-only file");
    dataset_file_release(&file);
}

Test(dataset_view, zero_record_size_is_refused_not_a_crash)
{
    unsigned char bytes[16] = {0};
    struct data_entry entry = dv_entry(0, 0, false, false);
    entry.lines = false;  /* config never allows this; the runtime must not divide by 0 */
    struct dataset_file file;
    char error[256] = "";
    cr_expect_eq(dataset_file_init(&file, &entry, "/d/zero.bin", bytes, 16, 0, 1, 0, error,
                                   sizeof error), -1);
    cr_expect_not_null(strstr(error, "/d/zero.bin"), "%s", error);
}

/* --- lines mode ----------------------------------------------------------- */

Test(dataset_view, lines_view_matches_expected_at_every_offset)
{
    const uint64_t count = 23;
    for (uint64_t header = 0; header <= 6; header += 6) {
        uint64_t size;
        unsigned char *bytes = dv_lines_file(header, count, "", &size);
        uint64_t *offsets = dv_line_offsets(header, count);
        cr_assert_eq(offsets[count], size);
        for (int shuffle = 0; shuffle <= 1; shuffle++)
            for (uint32_t replicas = 1; replicas <= 3; replicas++)
                for (uint32_t rank = 0; rank < replicas; rank++) {
                    struct data_entry entry = dv_entry(header, 0, shuffle, true);
                    struct dataset_file file;
                    dv_init(&file, &entry, bytes, size, replicas, rank);
                    cr_assert_eq(file.record_count, count);
                    cr_assert_eq(file.payload_size, size - header);
                    struct dv_layout layout = {count, replicas, rank, 0, 0, shuffle, DV_SEED,
                                               DV_BASENAME};
                    uint64_t expected_size;
                    unsigned char *expected =
                        dv_expected_view(bytes, header, 0, offsets, &layout, &expected_size);
                    dv_expect_whole_view(&file, expected, expected_size, "lines");
                    const size_t sizes[] = {1, 2, 5, 17, 4096};
                    dv_expect_every_offset(&file, expected, expected_size, sizes,
                                           sizeof sizes / sizeof sizes[0]);
                    free(expected);
                    dataset_file_release(&file);
                }
        free(offsets);
        free(bytes);
    }
}

Test(dataset_view, lines_view_after_restore_and_next_pass)
{
    const uint64_t count = 31;
    uint64_t size;
    unsigned char *bytes = dv_lines_file(4, count, "", &size);
    uint64_t *offsets = dv_line_offsets(4, count);
    struct data_entry entry = dv_entry(4, 0, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    cr_assert(dataset_view_restore(&file, RESUME_CONTINUE, 3, 12, 0));
    for (uint64_t pass = 3; pass <= 4; pass++) {
        struct dv_layout layout = {count, 2, 1, pass == 3 ? 12 : 0, pass, true, DV_SEED,
                                   DV_BASENAME};
        uint64_t expected_size;
        unsigned char *expected = dv_expected_view(bytes, 4, 0, offsets, &layout,
                                                   &expected_size);
        dv_expect_whole_view(&file, expected, expected_size, "lines after restore");
        free(expected);
        cr_assert_eq(dataset_view_end_pass(&file), 0);
    }
    dataset_file_release(&file);
    free(offsets);
    free(bytes);
}

Test(dataset_view, lines_records_before_counts_whole_lines)
{
    /* lines "a\n", "bcd\n", "ef\n" in order: view offsets 0, 2, 6, 9 */
    const char text[] = "a\nbcd\nef\n";
    struct data_entry entry = dv_entry(0, 0, false, false);
    struct dataset_file file;
    dv_init(&file, &entry, (const unsigned char *)text, 9, 1, 0);
    cr_assert_eq(file.record_count, 3);
    static const uint64_t expected[10] = {0, 0, 1, 1, 1, 1, 2, 2, 2, 3};
    for (uint64_t offset = 0; offset < 10; offset++)
        cr_expect_eq(dataset_view_records_before(&file, offset), expected[offset],
                     "offset %llu", (unsigned long long)offset);
    cr_expect_eq(dataset_view_records_before(&file, 100), 3);
    /* a read across the line boundary counts the completed line only */
    dataset_view_note_read(&file, 0, 4);
    cr_expect_eq(file.shared->tracker.delivered, 1);
    dataset_view_note_read(&file, 4, 5);
    cr_expect_eq(file.shared->tracker.delivered, 3);
    dataset_file_release(&file);
}

/* The line holding a payload offset: its first byte, its last, and the
 * offsets of the file's end. */
Test(dataset_view, line_at_finds_the_line_that_holds_an_offset)
{
    /* lines "a\n", "bcd\n", "ef\n" in order: view offsets 0, 2, 6, 9 */
    const char text[] = "a\nbcd\nef\n";
    struct data_entry entry = dv_entry(0, 0, false, false);
    struct dataset_file file;
    dv_init(&file, &entry, (const unsigned char *)text, 9, 1, 0);
    static const uint64_t expected[9] = {0, 0, 1, 1, 1, 1, 2, 2, 2};
    for (uint64_t offset = 0; offset < 9; offset++)
        cr_expect_eq(dataset_view_line_at(&file, offset), expected[offset], "offset %llu",
                     (unsigned long long)offset);
    cr_expect_eq(dataset_view_line_at(&file, 9), 2, "the end belongs to the last line");
    dataset_file_release(&file);
}

Test(dataset_view, lines_tail_error_and_drop)
{
    uint64_t size;
    unsigned char *bytes = dv_lines_file(3, 5, "partial", &size);
    struct data_entry entry = dv_entry(3, 0, false, false);
    struct dataset_file file;
    char error[512] = "";
    cr_assert_eq(dataset_file_init(&file, &entry, "/d/text.txt", bytes, size, 0, 1, 0, error,
                                   sizeof error), -1);
    char size_text[32];
    snprintf(size_text, sizeof size_text, "%llu", (unsigned long long)size);
    cr_expect_not_null(strstr(error, "/d/text.txt"), "%s", error);
    cr_expect_not_null(strstr(error, size_text), "%s", error);
    cr_expect_not_null(strstr(error, "header 3"), "%s", error);
    cr_expect_not_null(strstr(error, "tail=drop"), "%s", error);

    entry.tail = TAIL_DROP;
    dv_init(&file, &entry, bytes, size, 1, 0);
    cr_expect_eq(file.record_count, 5);
    dv_expect_whole_view(&file, bytes, size - strlen("partial"), "partial line dropped");
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, transparency_lines)
{
    uint64_t size;
    unsigned char *bytes = dv_lines_file(5, 40, "", &size);
    struct data_entry entry = dv_entry(5, 0, false, false);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 4, 3);
    dv_expect_whole_view(&file, bytes, size, "transparent lines");
    dataset_file_release(&file);
    free(bytes);
}

/* --- count= field ---------------------------------------------------------- */

static uint64_t dv_read_count(const unsigned char *field, enum count_field_type type)
{
    uint64_t value = 0;
    switch (type) {
    case COUNT_FIELD_U32LE:
    case COUNT_FIELD_I32LE:
        for (int i = 3; i >= 0; i--)
            value = value << 8 | field[i];
        break;
    case COUNT_FIELD_U32BE:
        for (int i = 0; i < 4; i++)
            value = value << 8 | field[i];
        break;
    case COUNT_FIELD_U64LE:
        for (int i = 7; i >= 0; i--)
            value = value << 8 | field[i];
        break;
    case COUNT_FIELD_U64BE:
        for (int i = 0; i < 8; i++)
            value = value << 8 | field[i];
        break;
    }
    return value;
}

Test(dataset_view, count_field_is_rewritten_for_each_type)
{
    static const enum count_field_type types[] = {COUNT_FIELD_U32LE, COUNT_FIELD_U32BE,
                                                  COUNT_FIELD_I32LE, COUNT_FIELD_U64LE,
                                                  COUNT_FIELD_U64BE};
    const uint64_t header = 24, record_size = 6, count = 10;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(header, record_size, count, 0, &size);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        unsigned width = types[t] == COUNT_FIELD_U64LE || types[t] == COUNT_FIELD_U64BE ? 8 : 4;
        struct data_entry entry = dv_entry(header, record_size, true, true);
        entry.has_count_field = true;
        entry.count_offset = 3;  /* unaligned on purpose */
        entry.count_type = types[t];
        entry.count_unit = 2;
        struct dataset_file file;
        dv_init(&file, &entry, bytes, size, 3, 0);
        unsigned char view_header[24];
        cr_assert_eq(dataset_view_copy(&file, 0, view_header, header), header);
        /* L = 4 records of 6 bytes: 24 payload bytes, 12 two-byte units */
        cr_expect_eq(dv_read_count(view_header + 3, types[t]), 12, "type %zu", t);
        for (uint64_t i = 0; i < header; i++)
            if (i < 3 || i >= 3 + width)
                cr_expect_eq(view_header[i], bytes[i], "header byte %llu changed",
                             (unsigned long long)i);
        /* the field follows the view: a restored pass, then header-only */
        cr_assert(dataset_view_restore(&file, RESUME_CONTINUE, 0, 7, 0));
        cr_assert_eq(dataset_view_copy(&file, 0, view_header, header), header);
        cr_expect_eq(dv_read_count(view_header + 3, types[t]), 3, "1 record = 3 units");
        cr_assert(dataset_view_restore(&file, RESUME_CONTINUE, 0, count, 0));
        cr_assert_eq(dataset_view_copy(&file, 0, view_header, header), header);
        cr_expect_eq(dv_read_count(view_header + 3, types[t]), 0);
        dataset_file_release(&file);
    }
    free(bytes);
}

Test(dataset_view, count_field_in_lines_mode_counts_view_bytes)
{
    uint64_t size;
    unsigned char *bytes = dv_lines_file(8, 12, "", &size);
    struct data_entry entry = dv_entry(8, 0, true, true);
    entry.has_count_field = true;
    entry.count_offset = 0;
    entry.count_type = COUNT_FIELD_U64LE;
    entry.count_unit = 1;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    unsigned char view_header[8];
    cr_assert_eq(dataset_view_copy(&file, 0, view_header, 8), 8);
    cr_expect_eq(dv_read_count(view_header, COUNT_FIELD_U64LE), file.view_size - 8);
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, count_field_outside_the_header_is_refused)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(8, 4, 3, 0, &size);
    struct data_entry entry = dv_entry(8, 4, false, false);
    entry.has_count_field = true;
    entry.count_offset = 2;
    entry.count_type = COUNT_FIELD_U64BE;
    entry.count_unit = 1;
    struct dataset_file file;
    char error[256] = "";
    cr_expect_eq(dataset_file_init(&file, &entry, "/d/idx.bin", bytes, size, 0, 1, 0, error,
                                   sizeof error), -1);
    cr_expect_not_null(strstr(error, "/d/idx.bin"), "%s", error);
    entry.count_offset = 0;
    dv_init(&file, &entry, bytes, size, 1, 0);
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, transparency_with_a_matching_count_field)
{
    /* an IDX-like file whose header already holds its record count */
    const uint64_t count = 25, record_size = 4;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(8, record_size, count, 0, &size);
    bytes[4] = 0, bytes[5] = 0, bytes[6] = 0, bytes[7] = (unsigned char)count;
    struct data_entry entry = dv_entry(8, record_size, false, false);
    entry.has_count_field = true;
    entry.count_offset = 4;
    entry.count_type = COUNT_FIELD_U32BE;
    entry.count_unit = record_size;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    dv_expect_whole_view(&file, bytes, size, "IDX-like transparent view");
    dataset_file_release(&file);
    free(bytes);
}

/* --- statistical epochs: passes longer than one sweep (adaptshim(7) "Statistical epochs") ----- */

static uint64_t dv_planned_length;
static uint64_t dv_planner(uint64_t record_count, uint64_t pass)
{
    (void)record_count;
    (void)pass;
    return dv_planned_length;
}

/* Physical record at logical index v of a pass of M >= N records: sweep
 * v / N has its own permutation, keyed by the wrap count. */
static uint64_t dv_expected_wrapped(uint64_t count, uint64_t pass, uint64_t v)
{
    struct record_permutation permutation;
    record_permutation_init(&permutation, count, true, DV_SEED, DV_BASENAME, pass,
                            v / count);
    return record_permutation_apply(&permutation, v % count);
}

/* A pass of 25 records over a 10-record file, 3 replicas: two whole sweeps
 * and half of a third, each in its own order, split as any pass is, with
 * AdaptDL's padding taken from the pass's own start. */
Test(dataset_view, a_pass_longer_than_the_file_wraps_with_a_fresh_order_per_sweep)
{
    const uint64_t count = 10, record_size = 16, header = 4;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(header, record_size, count, 0, &size);
    struct data_entry entry = dv_entry(header, record_size, true, true);
    dv_planned_length = 25;
    pass_tracker_length_planner = dv_planner;
    uint64_t seen[10] = {0};
    for (uint32_t rank = 0; rank < 3; rank++) {
        struct dataset_file file;
        dv_init(&file, &entry, bytes, size, 3, rank);
        cr_assert_eq(file.view_pass_length, 25);
        cr_assert_eq(file.view_length, 9, "ceil(25 / 3)");
        cr_assert_eq(file.view_size, header + 9 * record_size);
        for (uint64_t j = 0; j < file.view_length; j++) {
            unsigned char record[16];
            cr_assert_eq(dataset_view_copy(&file, header + j * record_size, record,
                                           record_size), record_size);
            uint64_t v = rank + 3 * j;
            if (v >= 25)
                v -= 25;  /* padding */
            uint64_t expected = dv_expected_wrapped(count, 0, v);
            cr_expect_eq(record[0], (unsigned char)expected, "rank %u position %llu", rank,
                         (unsigned long long)j);
            seen[record[0]]++;
        }
        dataset_file_release(&file);
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < count; i++) {
        total += seen[i];
        cr_expect(seen[i] >= 2 && seen[i] <= 4, "record %llu seen %llu times",
                  (unsigned long long)i, (unsigned long long)seen[i]);
    }
    cr_expect_eq(total, 27, "25 records and 2 padding");
    bool sweeps_differ = false;
    for (uint64_t i = 0; i < count; i++)
        sweeps_differ |= dv_expected_wrapped(count, 0, i) != dv_expected_wrapped(count, 0, i + 10);
    cr_expect(sweeps_differ, "the second sweep has its own order");
    pass_tracker_length_planner = NULL;
    free(bytes);
}

/* A pass shorter than the file (a statistical epoch ahead of its target):
 * the first M records of the pass's order. */
Test(dataset_view, a_pass_shorter_than_the_file_is_a_prefix_of_its_order)
{
    const uint64_t count = 40, record_size = 8;
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(0, record_size, count, 0, &size);
    struct data_entry entry = dv_entry(0, record_size, true, true);
    dv_planned_length = 13;
    pass_tracker_length_planner = dv_planner;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    cr_assert_eq(file.view_length, 13);
    for (uint64_t j = 0; j < 13; j++) {
        unsigned char record[8];
        dataset_view_copy(&file, j * record_size, record, record_size);
        cr_expect_eq(record[0], (unsigned char)dv_expected_wrapped(count, 0, j));
    }
    dataset_file_release(&file);
    pass_tracker_length_planner = NULL;
    free(bytes);
}

/* A forked child (a DataLoader worker) delivers into its parent's pass, and
 * a pass it ends is the parent's next view (adaptshim(7) "After fork"). */
Test(dataset_view, forked_children_deliver_into_the_parent_s_pass)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    for (int worker = 0; worker < 2; worker++) {
        pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
            /* worker k delivers records k, k + 2, ...: the parent's pass
             * sees them all only if both deliver into it */
            dataset_file_lock(&file);
            for (uint64_t j = (uint64_t)worker; j < 20; j += 2)
                dataset_view_note_read(&file, 6 + j * 10, 10);
            if (worker == 1)
                dataset_view_end_pass(&file);
            dataset_file_unlock(&file);
            _exit(0);
        }
        int status;
        cr_assert_eq(waitpid(child, &status, 0), child);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        dataset_file_lock(&file);
        if (worker == 0) {
            cr_expect_eq(file.shared->delivery.delivered, 10, "the first worker's records");
            cr_expect_eq(file.shared->tracker.delivered, 1, "prefix: record 0 only");
        }
        dataset_file_unlock(&file);
    }
    dataset_file_lock(&file);
    cr_expect_eq(file.shared->tracker.passes_completed, 1);
    cr_expect_eq(file.view_pass, 1, "the parent's view follows the pass a worker ended");
    unsigned char expected[10], got[10];
    struct record_permutation next;
    record_permutation_init(&next, 20, true, file.seed, file.basename, 1, 0);
    uint64_t first = record_permutation_apply(&next, 0);
    memcpy(expected, bytes + 6 + first * 10, 10);
    cr_assert_eq(dataset_view_copy(&file, 6, got, 10), 10);
    cr_expect_eq(memcmp(got, expected, 10), 0, "and shows pass 1's first record");
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

/* Records a prefetching loader may still hold (lookahead=): all of them
 * while the pass is not covered or its workers run; none once every record
 * was delivered by workers that have all exited, as a DataLoader's are when
 * its iterator is exhausted, and the pass then ends at the next snapshot. */
Test(dataset_view, a_pass_covered_by_workers_that_exited_is_over)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    entry.lookahead = 4;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    cr_expect_eq(dataset_view_records_in_flight(&file), 0,
                 "nothing delivered and the file not open here: nothing can be in flight");
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 6, 10);   /* the parent peeks at record 0 */
    dataset_file_unlock(&file);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        dataset_file_lock(&file);
        dataset_view_note_read(&file, 6, 20 * 10);   /* the whole pass */
        bool running_worker_counts = dataset_view_records_in_flight(&file) == 4 &&
                                     !dataset_view_readers_finished_pass(&file);
        dataset_file_unlock(&file);
        _exit(running_worker_counts ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "seen from the worker itself, the loop is not over");
    dataset_file_lock(&file);
    cr_expect(dataset_view_covered(&file));
    cr_expect(dataset_view_readers_finished_pass(&file));
    cr_expect_eq(dataset_view_records_in_flight(&file), 0,
                 "a covered pass whose workers exited holds nothing in flight");
    cr_expect(dataset_view_end_pass_finished_by_readers(&file));
    cr_expect_eq(file.view_pass, 1);
    cr_expect(!dataset_view_end_pass_finished_by_readers(&file), "once");
    dataset_file_unlock(&file);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &file);   /* the parent reads pass 1 itself */
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 6, 10 * 20);
    cr_expect(dataset_view_covered(&file));
    cr_expect(!dataset_view_readers_finished_pass(&file), "no worker read pass 1, and the "
              "parent's file is open");
    cr_expect_eq(dataset_view_records_in_flight(&file), 4);
    dataset_file_unlock(&file);
    view_cursor_close(&cursor);
    dataset_file_release(&file);
    free(bytes);
}

/* A header read hands out no record: its process is no reader, so a pass
 * covered by workers that exited is whole even though the parent that read
 * the header lives on (PyTorch's Dataset reads the header in the parent). */
Test(dataset_view, a_header_read_makes_no_reader)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 4, 0, &size);
    struct data_entry entry = dv_entry(6, 10, false, false);
    entry.lookahead = 2;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 0, 6);
    cr_expect_eq(file.shared->readers.count, 0);
    dataset_view_note_read(&file, 6, 9);     /* not a whole record yet */
    cr_expect_eq(file.shared->readers.count, 0);
    dataset_view_note_read(&file, 15, 1);
    cr_expect_eq(file.shared->readers.count, 1);
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

/* A pass read by the process alone is finished once every record was
 * delivered and the process closed its last cursor on the file (llm.c's
 * fclose at an epoch's end); a mapping never finishes a pass. */
Test(dataset_view, a_covered_pass_whose_only_reader_closed_the_file_is_over)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 8, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    struct view_cursor first, second;
    view_cursor_open(&first, &file);
    view_cursor_open(&second, &file);
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 6, 10 * 8);
    cr_expect(!dataset_view_readers_finished_pass(&file), "two cursors open");
    dataset_file_unlock(&file);
    view_cursor_close(&first);
    dataset_file_lock(&file);
    cr_expect(!dataset_view_readers_finished_pass(&file), "one cursor still open");
    dataset_file_unlock(&file);
    view_cursor_close(&second);
    dataset_file_lock(&file);
    cr_expect(dataset_view_readers_finished_pass(&file));
    cr_expect(dataset_view_end_pass_finished_by_readers(&file));
    cr_expect_eq(file.view_pass, 1);
    dataset_view_note_mapped(&file);
    cr_expect(dataset_view_covered(&file));
    cr_expect(!dataset_view_readers_finished_pass(&file), "a mapping reads in secret");
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

/* A header-only view (a pass replay skips) ends at the sign that came
 * first: an open, a stat of the path, or a size question about an open
 * descriptor; a stat of the path only while no descriptor is open on it. */
Test(dataset_view, the_first_sign_on_a_header_only_view_is_the_one_that_ends_it)
{
    static const struct {
        const char *name;
        void (*note)(struct dataset_file *file);
        bool (*ends)(const struct dataset_file *file);
    } signs[] = {
        {"an open", dataset_view_note_opened, dataset_view_reopen_ends_pass},
        {"a stat of the path", dataset_view_note_path_stat, dataset_view_path_stat_ends_pass},
        {"a size question", dataset_view_note_size_question,
         dataset_view_size_question_ends_pass},
    };
    enum { SIGN_COUNT = sizeof signs / sizeof signs[0] };
    unsigned char header[6] = {1, 2, 3, 4, 5, 6};
    struct data_entry entry = dv_entry(6, 8, false, false);
    struct dataset_file file;
    for (size_t first = 0; first < SIGN_COUNT; first++) {
        dv_init(&file, &entry, header, 6, 1, 0);
        cr_assert_eq(file.view_length, 0);
        dataset_file_lock(&file);
        for (size_t sign = 0; sign < SIGN_COUNT; sign++)
            cr_expect(!signs[sign].ends(&file), "no sign yet: %s does not end it",
                      signs[sign].name);
        for (size_t sign = 0; sign < SIGN_COUNT; sign++)
            signs[(first + sign) % SIGN_COUNT].note(&file);
        for (size_t sign = 0; sign < SIGN_COUNT; sign++)
            cr_expect(signs[sign].ends(&file) == (sign == first),
                      "%s came first: %s %s it", signs[first].name, signs[sign].name,
                      sign == first ? "ends" : "does not end");
        dataset_file_unlock(&file);
        dataset_file_release(&file);
    }

    dv_init(&file, &entry, header, 6, 1, 0);
    dataset_file_lock(&file);
    dataset_view_note_path_stat(&file);
    dataset_file_unlock(&file);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &file);   /* an open notes its sign too */
    dataset_file_lock(&file);
    cr_expect(!dataset_view_reopen_ends_pass(&file), "the stat came first");
    cr_expect(!dataset_view_path_stat_ends_pass(&file), "a descriptor is open on the view");
    dataset_file_unlock(&file);
    view_cursor_close(&cursor);
    dataset_file_lock(&file);
    cr_expect(dataset_view_path_stat_ends_pass(&file));
    dataset_file_unlock(&file);
    dataset_file_release(&file);
}

/* With records, the first sign does not matter: a reopen ends the pass once
 * every record was delivered; a stat of the path too, even while this
 * process, its only reader, still holds the file open (a Dataset built anew
 * at each epoch asks for the size before the old one is released). */
Test(dataset_view, a_reopen_or_a_path_stat_ends_a_pass_once_every_record_was_delivered)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 8, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &file);
    dataset_file_lock(&file);
    dataset_view_note_path_stat(&file);
    dataset_view_note_read(&file, 6, 10 * 7);
    cr_expect(!dataset_view_reopen_ends_pass(&file), "one record is not delivered");
    cr_expect(!dataset_view_path_stat_ends_pass(&file), "one record is not delivered");
    dataset_view_note_read(&file, 6 + 10 * 7, 10);
    cr_expect(dataset_view_reopen_ends_pass(&file));
    cr_expect(dataset_view_path_stat_ends_pass(&file), "this process read it all, file open");
    cr_expect(!dataset_view_readers_finished_pass(&file), "the file is still open here");
    dataset_file_unlock(&file);
    view_cursor_close(&cursor);
    dataset_file_release(&file);
    free(bytes);
}

/* A loader that opened the file before the restore and keeps it open asks
 * its descriptor's size at every epoch: on a header-only view that question
 * is the epoch's sign only when it came first (above), and not after an
 * open; with records, it ends the pass once every record was delivered, the
 * file open or not. */
Test(dataset_view, a_size_asked_of_an_open_descriptor_is_a_sign_like_a_reopen)
{
    unsigned char header[6] = {1, 2, 3, 4, 5, 6};
    struct data_entry entry = dv_entry(6, 8, false, false);
    struct dataset_file file;
    dv_init(&file, &entry, header, 6, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &file);
    dataset_file_lock(&file);
    cr_expect(!dataset_view_size_question_ends_pass(&file), "the open was the first sign");
    dataset_file_unlock(&file);
    view_cursor_close(&cursor);
    dataset_file_release(&file);

    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 8, 0, &size);
    struct data_entry records_entry = dv_entry(6, 10, true, true);
    dv_init(&file, &records_entry, bytes, size, 1, 0);
    view_cursor_open(&cursor, &file);
    dataset_file_lock(&file);
    dataset_view_note_size_question(&file);
    dataset_view_note_read(&file, 6, 10 * 7);
    cr_expect(!dataset_view_size_question_ends_pass(&file), "one record is not delivered");
    dataset_view_note_read(&file, 6 + 10 * 7, 10);
    cr_expect(dataset_view_size_question_ends_pass(&file), "this process read it all, file open");
    dataset_file_unlock(&file);
    view_cursor_close(&cursor);
    dataset_file_release(&file);
    free(bytes);
}

/* Records in flight with lookahead=: while the file is open here, all of
 * them, even past what the pass just begun delivered (they may be the last
 * records of the pass a read-ahead loader read to its end); once it is
 * closed, at most what the current pass delivered. */
Test(dataset_view, records_in_flight_reach_past_the_current_pass_only_while_the_file_is_open)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(0, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(0, 10, true, true);
    entry.lookahead = 4;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &file);
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 0, 10 * 20);
    dataset_view_end_pass(&file);
    cr_expect_eq(dataset_view_records_in_flight(&file), 4, "read to the end, still open");
    dataset_view_note_read(&file, 0, 10);
    cr_expect_eq(dataset_view_records_in_flight(&file), 4);
    dataset_file_unlock(&file);
    view_cursor_close(&cursor);
    dataset_file_lock(&file);
    cr_expect_eq(dataset_view_records_in_flight(&file), 1, "closed: only pass 1's record");
    dataset_view_note_read(&file, 10, 10 * 5);
    cr_expect_eq(dataset_view_records_in_flight(&file), 4);
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

/* --- fixing the view and sharing the pass state -------------------------- */

/* Fixing the view rebuilds it from the shared tracker's pass and starts the
 * pass's bookkeeping afresh: nothing delivered, no mapping, no reader; the
 * generation moves on, so that every other process rebuilds its own view
 * at its next lock. */
Test(dataset_view, fixing_the_view_follows_the_tracker_and_forgets_the_deliveries)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    uint64_t generation = file.shared->view_generation;
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 6, 30);   /* three records */
    dataset_view_note_mapped(&file);
    cr_assert_eq(file.shared->delivery.delivered, 3);
    cr_assert_eq(file.shared->readers.count, 1);
    cr_assert(dataset_view_covered(&file), "a mapping covers the view");

    pass_tracker_end_pass(&file.shared->tracker);
    cr_expect_eq(file.view_pass, 0, "the tracker alone does not move the view");
    cr_assert_eq(dataset_view_fix(&file), 0);
    cr_expect_eq(file.shared->view_generation, generation + 1);
    cr_expect_eq(file.view_generation, file.shared->view_generation);
    cr_expect_eq(file.view_pass, 1);
    cr_expect_eq(file.view_length, 10);
    cr_expect_eq(file.shared->delivery.delivered, 0);
    cr_expect_eq(file.shared->readers.count, 0);
    cr_expect_not(file.shared->mapped);
    cr_expect_not(dataset_view_covered(&file));

    /* a restored position (the pass has not started): pass 2 from s = 6 */
    cr_assert(pass_tracker_restore(&file.shared->tracker, RESUME_CONTINUE, 2, 6, 0));
    cr_assert_eq(dataset_view_fix(&file), 0);
    cr_expect_eq(file.shared->view_generation, generation + 2);
    cr_expect_eq(file.view_generation, file.shared->view_generation);
    cr_expect_eq(file.view_pass, 2);
    cr_expect_eq(file.view_start_index, 6);
    cr_expect_eq(file.view_length, 7, "ceil((20 - 6) / 2) records from s = 6");
    cr_expect_eq(file.view_size, 6 + 7 * 10);
    cr_expect_eq(file.shared->delivery.delivered, 0);
    cr_expect_eq(file.shared->delivery.length, 7);
    cr_expect_eq(file.shared->readers.count, 0);
    cr_expect_not(file.shared->mapped);
    cr_expect_not(dataset_view_covered(&file));
    struct dv_layout layout = {20, 2, 1, 6, 2, true, DV_SEED, DV_BASENAME};
    uint64_t expected_size;
    unsigned char *expected = dv_expected_view(bytes, 6, 10, NULL, &layout, &expected_size);
    dv_expect_whole_view(&file, expected, expected_size, "pass 2 from 6");
    free(expected);

    cr_assert_eq(dataset_view_fix(&file), 0, "fixing again is harmless");
    cr_expect_eq(file.shared->view_generation, generation + 3);
    cr_expect_eq(file.view_pass, 2);
    cr_expect_eq(file.view_length, 7);
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

/* A file of 20 records of 10 bytes after a 6-byte header, on one replica,
 * restored under continue into pass 0 at index `start`; returns its bytes
 * (freed by the caller), with the file's lock held. */
static unsigned char *dv_resumed_at(struct dataset_file *file, const struct data_entry *entry,
                                    uint64_t start)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    dv_init(file, entry, bytes, size, 1, 0);
    dataset_file_lock(file);
    cr_assert(dataset_view_restore(file, RESUME_CONTINUE, 0, start, 0));
    return bytes;
}

/* A loader that counted a longer view than the restore left reads with that
 * count: the pass grows to it, keeping what a pass under way delivered, and
 * a mapped view, which cannot grow, is left alone. */
Test(dataset_view, lengthening_a_pass_grows_its_view_and_keeps_its_deliveries)
{
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    unsigned char *bytes = dv_resumed_at(&file, &entry, 14);
    cr_assert_eq(file.view_length, 6, "records 14 to 19 are left");

    cr_expect_not(dataset_view_lengthen(&file, 6), "the view already holds 6");
    cr_expect_not(dataset_view_lengthen(&file, 4), "a pass never shrinks");
    cr_assert(dataset_view_lengthen(&file, 10), "not begun: fixed anew");
    cr_expect_eq(file.view_length, 10);
    cr_expect_eq(file.view_size, 6 + 10 * 10);
    cr_expect_eq(file.view_start_index, 14);
    cr_expect_eq(file.shared->delivery.delivered, 0);

    dataset_view_note_read(&file, 6, 2 * 10);
    uint64_t generation = file.shared->view_generation;
    cr_assert(dataset_view_lengthen(&file, 12), "a pass under way grows too");
    cr_expect_eq(file.view_length, 12);
    cr_expect_eq(file.view_size, 6 + 12 * 10);
    cr_expect_eq(file.shared->view_generation, generation + 1, "a new view to tell apart");
    cr_expect_eq(file.shared->delivery.delivered, 2, "its two deliveries are kept");
    cr_expect_eq(file.shared->delivery.length, 12);
    cr_expect_eq(file.shared->readers.count, 1, "and its reader");
    cr_expect_not(dataset_view_covered(&file));

    dataset_view_note_mapped(&file);
    cr_expect_not(dataset_view_lengthen(&file, 16), "a mapping cannot grow");
    cr_expect_eq(file.view_length, 12);
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

/* A loader that counted the 4 records a restore left, and kept that count,
 * reads only 4 of the next pass's 20: once it delivered them in order, ending
 * the pass moves its start past them instead, so nothing is skipped. */
Test(dataset_view, ending_a_pass_read_to_a_shorter_count_moves_its_start)
{
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    unsigned char *bytes = dv_resumed_at(&file, &entry, 16);
    stale_size_note_answer(&file, SIZE_QUESTION_TRAINER);
    dataset_view_note_read(&file, 6, 4 * 10);
    cr_expect_not(dataset_view_end_moves_start(&file), "the view asked about was covered");
    cr_assert_eq(dataset_view_end_pass(&file), 0);
    cr_assert_eq(file.view_pass, 1);
    cr_assert_eq(file.view_length, 20);

    dataset_view_note_read(&file, 6, 3 * 10);
    cr_expect_not(dataset_view_end_moves_start(&file), "3 of the 4 counted");
    dataset_view_note_read(&file, 6 + 3 * 10, 10);
    cr_expect(dataset_view_end_moves_start(&file), "the count of 4 delivered in order");
    cr_assert_eq(dataset_view_end_pass(&file), 0);
    cr_expect_eq(file.view_pass, 1, "the same pass");
    cr_expect_eq(file.view_start_index, 4, "goes on past the records delivered");
    cr_expect_eq(file.view_length, 16);
    cr_expect_eq(file.shared->delivery.delivered, 0);
    cr_expect_not(dataset_view_end_moves_start(&file), "nothing delivered from the new start");
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

Test(dataset_view, a_fixed_view_is_rebuilt_by_another_process_at_its_lock)
{
    uint64_t size;
    unsigned char *bytes = dv_lines_file(0, 12, "", &size);
    struct data_entry entry = dv_entry(0, 0, true, false);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        dataset_file_lock(&file);
        pass_tracker_end_pass(&file.shared->tracker);
        int status = dataset_view_fix(&file);
        dataset_file_unlock(&file);
        _exit(status == 0 && file.view_pass == 1 ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_expect_eq(file.view_pass, 0, "not rebuilt before the lock");
    dataset_file_lock(&file);
    cr_expect_eq(file.view_pass, 1);
    cr_expect_eq(file.view_generation, file.shared->view_generation);
    uint64_t *offsets = dv_line_offsets(0, 12);
    struct dv_layout layout = {12, 1, 0, 0, 1, true, DV_SEED, DV_BASENAME};
    uint64_t expected_size;
    unsigned char *expected = dv_expected_view(bytes, 0, 0, offsets, &layout, &expected_size);
    dv_expect_whole_view(&file, expected, expected_size, "pass 1 of the lines");
    dataset_file_unlock(&file);
    free(expected);
    free(offsets);
    dataset_file_release(&file);
    free(bytes);
}

/* The first process to register a file in the job's arena moves its fresh
 * pass state there; a later registration of the same file (device, inode,
 * record count) adopts that pass, deliveries included; when the arena is
 * full the file keeps its own state, with errno saying why. */
static void dv_init_identified(struct dataset_file *file, const struct data_entry *entry,
                               const unsigned char *bytes, uint64_t size, uint64_t inode)
{
    dv_init(file, entry, bytes, size, 1, 0);
    file->device = 9;
    file->inode = inode;
}

Test(dataset_view, the_first_registration_moves_the_pass_state_into_the_arena)
{
    struct pass_state_arena *arena = pass_state_arena_create(1 << 20);
    cr_assert_not_null(arena);
    size_t available = pass_state_arena_available(arena);
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file first;
    dv_init_identified(&first, &entry, bytes, size, 41);
    cr_assert_neq(first.shared_size, 0, "its own mapping at first");
    cr_assert_eq(dataset_file_share_pass_state_in_arena(&first, arena), 0);
    cr_expect_eq(first.shared_size, 0, "now in the arena");
    cr_expect_lt(pass_state_arena_available(arena), available);
    cr_expect_not(first.pass_state_adopted);
    cr_expect_eq(first.view_length, 20);
    cr_expect_eq(first.shared->delivery.length, 20);
    cr_expect_eq(first.shared->tracker.record_count, 20);

    /* it works there: deliveries and the end of a pass */
    dataset_file_lock(&first);
    dataset_view_note_read(&first, 6, 200);
    cr_expect(dataset_view_covered(&first));
    cr_assert_eq(dataset_view_end_pass(&first), 0);
    dataset_view_note_read(&first, 6, 20);
    dataset_file_unlock(&first);

    struct dataset_file second;
    dv_init_identified(&second, &entry, bytes, size, 41);
    cr_assert_eq(dataset_file_share_pass_state_in_arena(&second, arena), 0);
    cr_expect(second.pass_state_adopted);
    cr_expect_eq(second.shared, first.shared, "one pass state for the file");
    cr_expect_eq(second.view_pass, 1, "the pass the first one ended");
    cr_expect_eq(second.shared->delivery.delivered, 2, "adopted, not fixed afresh");
    cr_expect_eq(second.view_generation, first.shared->view_generation);

    struct dataset_file other;
    dv_init_identified(&other, &entry, bytes, size, 42);
    cr_assert_eq(dataset_file_share_pass_state_in_arena(&other, arena), 0);
    cr_expect_not(other.pass_state_adopted, "another inode is another file");
    cr_expect_neq(other.shared, first.shared);
    cr_expect_eq(other.view_pass, 0);
    cr_expect_eq(other.shared->delivery.delivered, 0);

    dataset_file_release(&first);
    dataset_file_release(&second);
    dataset_file_release(&other);
    pass_state_arena_destroy(arena);
    free(bytes);
}

static int dv_fill_nothing(void *block, void *context)
{
    (void)block;
    (void)context;
    return 0;
}

Test(dataset_view, a_file_keeps_its_own_pass_state_when_the_arena_is_full)
{
    struct pass_state_arena *arena = pass_state_arena_create(1 << 16);
    cr_assert_not_null(arena);
    struct pass_state_key filler = {.device = 1, .inode = 1, .record_count = 1};
    bool created;
    cr_assert_not_null(pass_state_arena_claim(arena, &filler, pass_state_arena_available(arena),
                                              dv_fill_nothing, NULL, &created));
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 20, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init_identified(&file, &entry, bytes, size, 41);
    struct dataset_pass_state *own = file.shared;
    errno = 0;
    cr_expect_eq(dataset_file_share_pass_state_in_arena(&file, arena), -1);
    cr_expect_eq(errno, ENOSPC);
    cr_expect_eq(file.shared, own, "its own state is kept");
    cr_expect_neq(file.shared_size, 0);
    cr_expect_not(file.pass_state_adopted);
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 6, 10);
    cr_expect_eq(file.shared->delivery.delivered, 1, "and still works");
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    pass_state_arena_destroy(arena);
    free(bytes);
}

/* llm.c reads B*T+1 tokens per batch and moves by B*T: each placed read
 * is a record and two bytes, so it never reads its view's last record.
 * Once all but fewer records than one such read were delivered, the pass is
 * over for it: the end rules treat it as covered, and a checkpoint commit
 * finds its readers done although the file stays open.  A loader that
 * reads in sequence (no placed read) or places reads of whole records is
 * never cut short. */
Test(dataset_view, the_rest_shorter_than_a_placed_read_ends_the_pass)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 8, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 1, 0);
    struct view_cursor cursor;
    view_cursor_open(&cursor, &file);
    dataset_file_lock(&file);
    /* in sequence: seven of eight records, nothing placed */
    dataset_view_note_read(&file, 6, 7 * 10);
    cr_expect(!dataset_view_rest_is_less_than_a_placed_read(&file));
    cr_expect(!dataset_view_covered(&file), "a sequential reader reads on");
    /* placed reads of whole records (one, a batch of three) read on to the
     * end: a short last batch is still to come */
    dataset_view_note_placed_read(&file, 6, 10);
    dataset_view_note_placed_read(&file, 6, 30);
    cr_expect(!dataset_view_rest_is_less_than_a_placed_read(&file));
    cr_expect(!dataset_view_readers_finished_pass(&file));
    /* the header in a placed read is no part of its unit */
    dataset_view_note_placed_read(&file, 0, 6 + 10);
    cr_expect(!dataset_view_rest_is_less_than_a_placed_read(&file));
    /* a placed read of a record and two bytes: the last record is out of reach */
    dataset_view_note_placed_read(&file, 6, 12);
    cr_expect(dataset_view_rest_is_less_than_a_placed_read(&file));
    cr_expect(dataset_view_covered(&file));
    cr_expect(dataset_view_reopen_ends_pass(&file));
    cr_expect(dataset_view_readers_finished_pass(&file), "the open file does not hold it");
    cr_expect(dataset_view_end_pass_finished_by_readers(&file));
    cr_expect_eq(file.view_pass, 1);
    cr_expect(!dataset_view_rest_is_less_than_a_placed_read(&file), "a new pass: nothing read");
    /* the read unit is the loader's: the next pass ends the same way */
    dataset_view_note_read(&file, 6, 7 * 10);
    cr_expect(dataset_view_rest_is_less_than_a_placed_read(&file));
    dataset_file_unlock(&file);
    view_cursor_close(&cursor);
    dataset_file_release(&file);
    free(bytes);
}

/* resume=whole-pass (adaptshim(7) "Loaders that take the size once"): a pass interrupted at
 * index 10 of 30 is restored whole, from index 0 and in its own order; a complete pass stays
 * complete (header-only), and without the key the view is what is left. */
Test(dataset_view, resume_whole_pass_serves_an_interrupted_pass_whole)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(0, 8, 30, 0, &size);
    struct data_entry entry = dv_entry(0, 8, true, true);
    entry.resume_whole_pass = true;
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    cr_assert(dataset_view_restore(&file, RESUME_CONTINUE, 3, 10, 0));
    cr_expect_eq(file.view_pass, 3);
    cr_expect_eq(file.view_start_index, 0);
    cr_expect_eq(file.view_length, 15);
    uint64_t first;
    cr_assert_eq(dataset_view_copy(&file, 0, &first, 8), 8);
    struct dv_layout layout = {30, 2, 1, 0, 3, true, DV_SEED, DV_BASENAME};
    cr_expect_eq(first, dv_expected_physical(&layout, 0), "the pass's own order");
    cr_assert(dataset_view_restore(&file, RESUME_CONTINUE, 3, 30, 0));
    cr_expect_eq(file.view_length, 0, "a complete pass is not interrupted");
    dataset_file_release(&file);
    entry.resume_whole_pass = false;
    dv_init(&file, &entry, bytes, size, 2, 1);
    cr_assert(dataset_view_restore(&file, RESUME_CONTINUE, 3, 10, 0));
    cr_expect_eq(file.view_start_index, 10);
    cr_expect_eq(file.view_length, 10);
    dataset_file_release(&file);
    free(bytes);
}

/* Gradient all-reduces and commits the test's "shim" has seen. */
static uint64_t dv_training_events_seen;

static uint64_t dv_training_events(void)
{
    return dv_training_events_seen;
}

/* Reads the whole current view of `file` (4 records of 8 bytes) and ends
 * its pass, as a reader that got end-of-file; returns its first record. */
static uint64_t dv_read_pass_to_its_end(struct dataset_file *file)
{
    uint64_t first;
    cr_assert_eq(dataset_view_copy(file, 6, &first, 8), 8);
    dataset_view_note_read(file, 6, 4 * 10);
    cr_assert_eq(dataset_view_end_pass(file), 0);
    return first;
}

/* A loader that counts its records, rewinds and reads them again gets the
 * same view twice, once per pass, when nothing was trained since the pass
 * began (and only when the shim can tell). */
Test(dataset_view, a_pass_read_again_with_nothing_trained_is_served_again_once)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 8, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 0);
    dataset_file_lock(&file);
    uint64_t first = dv_read_pass_to_its_end(&file);
    cr_expect_not(dataset_view_read_again_without_training(&file), "nothing can tell");
    cr_expect_eq(file.view_pass, 1);

    dataset_view_training_events = dv_training_events;
    dv_training_events_seen = 0;
    /* pass 1: counted, read again: the same records, once */
    first = dv_read_pass_to_its_end(&file);
    cr_assert(dataset_view_read_again_without_training(&file));
    cr_expect_eq(file.view_pass, 1);
    uint64_t again = dv_read_pass_to_its_end(&file);
    cr_expect_eq(again, first, "the same records in the same order");
    cr_expect_not(dataset_view_read_again_without_training(&file), "once per pass");
    cr_expect_eq(file.view_pass, 2);
    dv_training_events_seen += 6;  /* the epoch trains from memory */

    /* the next epoch counts and reads pass 2 again in the same way */
    first = dv_read_pass_to_its_end(&file);
    cr_assert(dataset_view_read_again_without_training(&file), "every epoch");
    cr_expect_eq(dv_read_pass_to_its_end(&file), first);
    dv_training_events_seen += 6;

    /* a loader that reads each epoch once and trains meanwhile: new passes */
    dv_read_pass_to_its_end(&file);
    dv_training_events_seen++;
    cr_expect_not(dataset_view_read_again_without_training(&file), "trained since it began");
    cr_expect_eq(file.view_pass, 4);
    dataset_view_training_events = NULL;
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}

/* A replica that read about 1/K of its view when it looks at the file
 * again shards the data itself: said once per file; a replica that read
 * more, less, or all of it, or the only replica, is not named. */
Test(dataset_view, a_replica_that_read_one_share_of_its_view_is_named_once)
{
    uint64_t size;
    unsigned char *bytes = dv_fixed_file(6, 10, 40, 0, &size);
    struct data_entry entry = dv_entry(6, 10, true, true);
    struct dataset_file file;
    dv_init(&file, &entry, bytes, size, 2, 1);
    dataset_file_lock(&file);
    cr_assert_eq(file.view_length, 20);
    dataset_view_note_read(&file, 6, 5 * 10);
    cr_expect_not(dataset_view_read_one_replica_share(&file), "a quarter");
    dataset_view_note_read(&file, 6 + 5 * 10, 4 * 10);
    cr_expect(dataset_view_read_one_replica_share(&file), "9 of 20: a share, give or take one");
    cr_expect_not(dataset_view_read_one_replica_share(&file), "said once");
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    dv_init(&file, &entry, bytes, size, 1, 0);
    dataset_file_lock(&file);
    dataset_view_note_read(&file, 6, 20 * 10);
    cr_expect_not(dataset_view_read_one_replica_share(&file), "one replica shards nothing");
    dataset_file_unlock(&file);
    dataset_file_release(&file);
    free(bytes);
}
