/* test_view_mapping.c - the mmap policy for data files (adaptshim(7) "Mappings"):
 * which mapping a request gets, its page arithmetic, when a view is the
 * file, filling a mapping from a view at an offset with a length that is
 * not a page multiple, the pass a mapping begins (and tells the pass
 * observer of), the memory check and the table of the shim's anonymous
 * mappings.
 *
 * Expected view bytes come from dataset_view_copy of the same view, which
 * test_dataset_view.c checks against an independent computation. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "view_cursor.h"
#include "view_mapping.h"

#define VM_PAGE 4096
#define VM_HEADER 16
#define VM_RECORD 24
#define VM_COUNT 1000

struct vm_data {
    unsigned char *bytes;
    uint64_t size;
    struct data_entry entry;
    struct dataset_file file;
};

/* VM_COUNT records of VM_RECORD bytes, each starting with its index. */
static void vm_setup(struct vm_data *data, bool shuffle, bool shard, uint32_t replicas,
                     uint32_t rank)
{
    memset(data, 0, sizeof *data);
    data->size = VM_HEADER + (uint64_t)VM_RECORD * VM_COUNT;
    data->bytes = malloc(data->size);
    cr_assert_not_null(data->bytes);
    for (uint64_t i = 0; i < VM_HEADER; i++)
        data->bytes[i] = (unsigned char)('H' + i);
    for (uint64_t index = 0; index < VM_COUNT; index++) {
        unsigned char *record = data->bytes + VM_HEADER + index * VM_RECORD;
        memcpy(record, &index, sizeof index);
        memset(record + 8, (int)(index * 7 + 1), VM_RECORD - 8);
    }
    data->entry = (struct data_entry){
        .record_size = VM_RECORD,
        .header_size = VM_HEADER,
        .role = DATA_ROLE_TRAIN,
        .shuffle = shuffle,
        .shard = shard,
        .tail = TAIL_ERROR,
    };
    char error[256] = "";
    cr_assert_eq(dataset_file_init(&data->file, &data->entry, "/data/mapped.bin", data->bytes,
                                   data->size, 5, replicas, rank, error, sizeof error), 0,
                 "%s", error);
}

static void vm_teardown(struct vm_data *data)
{
    dataset_file_release(&data->file);
    free(data->bytes);
}

static struct view_mapping_plan vm_plan(int64_t offset, uint64_t length, int protection,
                                        int flags, bool view_is_file, uint64_t view_size)
{
    struct view_mapping_request request = {
        .offset = offset, .length = length, .protection = protection, .flags = flags};
    struct view_mapping_plan plan;
    view_mapping_plan_request(&request, view_is_file, view_size, VM_PAGE, &plan);
    return plan;
}

/* --- the policy ------------------------------------------------------------- */

Test(view_mapping, writable_mappings_are_refused_with_eacces)
{
    struct view_mapping_plan shared = vm_plan(0, 100, PROT_READ | PROT_WRITE, MAP_SHARED,
                                              false, 5000);
    cr_expect_eq(shared.kind, VIEW_MAPPING_REFUSED);
    cr_expect_eq(shared.error, EACCES);
    cr_expect(strstr(shared.reason, "shared") != NULL, "%s", shared.reason);
    struct view_mapping_plan private = vm_plan(0, 100, PROT_READ | PROT_WRITE, MAP_PRIVATE,
                                               false, 5000);
    cr_expect_eq(private.kind, VIEW_MAPPING_REFUSED);
    cr_expect_eq(private.error, EACCES);
    cr_expect(strstr(private.reason, "private") != NULL, "%s", private.reason);
    /* even when the view is the file: a data file is never written */
    struct view_mapping_plan transparent = vm_plan(0, 100, PROT_WRITE, MAP_PRIVATE, true, 5000);
    cr_expect_eq(transparent.kind, VIEW_MAPPING_REFUSED);
    cr_expect_eq(transparent.error, EACCES);
}

Test(view_mapping, read_only_mappings_of_a_transparent_view_map_the_file)
{
    struct view_mapping_plan private = vm_plan(0, 5000, PROT_READ, MAP_PRIVATE, true, 5000);
    cr_expect_eq(private.kind, VIEW_MAPPING_PHYSICAL);
    struct view_mapping_plan shared = vm_plan(4096, 100, PROT_READ, MAP_SHARED, true, 5000);
    cr_expect_eq(shared.kind, VIEW_MAPPING_PHYSICAL);
    cr_expect_eq(shared.mapped_length, 4096);
}

/* numpy's memmap(mode='r') maps PROT_READ, MAP_SHARED: a read like any other */
Test(view_mapping, read_only_mappings_of_other_views_come_from_memory)
{
    struct view_mapping_plan private = vm_plan(0, 5000, PROT_READ, MAP_PRIVATE, false, 5000);
    cr_expect_eq(private.kind, VIEW_MAPPING_FROM_VIEW);
    struct view_mapping_plan shared = vm_plan(0, 5000, PROT_READ, MAP_SHARED, false, 5000);
    cr_expect_eq(shared.kind, VIEW_MAPPING_FROM_VIEW);
    cr_expect_eq(shared.anonymous_flags & MAP_TYPE, MAP_PRIVATE);
    cr_expect(shared.anonymous_flags & MAP_ANONYMOUS);
}

Test(view_mapping, arguments_the_kernel_rejects_are_einval)
{
    cr_expect_eq(vm_plan(0, 0, PROT_READ, MAP_PRIVATE, false, 5000).error, EINVAL);
    cr_expect_eq(vm_plan(100, 10, PROT_READ, MAP_PRIVATE, false, 5000).error, EINVAL);
    cr_expect_eq(vm_plan(-4096, 10, PROT_READ, MAP_PRIVATE, false, 5000).error, EINVAL);
    cr_expect_eq(vm_plan(4096, UINT64_MAX - 100, PROT_READ, MAP_PRIVATE, false, 5000).error,
                 EINVAL);
    struct view_mapping_plan plan = vm_plan(0, 0, PROT_READ, MAP_PRIVATE, true, 5000);
    cr_expect_eq(plan.kind, VIEW_MAPPING_REFUSED);
}

Test(view_mapping, page_arithmetic_of_a_mapping_from_the_view)
{
    /* offset one page in, a length that is not a page multiple, inside the view */
    struct view_mapping_plan inside = vm_plan(4096, 5000, PROT_READ, MAP_PRIVATE, false, 20000);
    cr_expect_eq(inside.mapped_length, 8192);
    cr_expect_eq(inside.filled_length, 5000);
    cr_expect_eq(inside.resident_bytes, 8192);
    /* running past the view's end: only the view's bytes are filled */
    struct view_mapping_plan past = vm_plan(8192, 6000, PROT_READ, MAP_PRIVATE, false, 12016);
    cr_expect_eq(past.mapped_length, 8192);
    cr_expect_eq(past.filled_length, 12016 - 8192);
    cr_expect_eq(past.resident_bytes, 4096);
    /* wholly past the end: nothing to fill */
    struct view_mapping_plan beyond = vm_plan(16384, 100, PROT_READ, MAP_PRIVATE, false, 12016);
    cr_expect_eq(beyond.kind, VIEW_MAPPING_FROM_VIEW);
    cr_expect_eq(beyond.filled_length, 0);
    cr_expect_eq(beyond.resident_bytes, 0);
    cr_expect_eq(beyond.mapped_length, 4096);
}

Test(view_mapping, anonymous_flags_keep_placement_and_drop_the_file_kind)
{
    int flags = view_mapping_anonymous_flags(MAP_SHARED | MAP_FIXED | MAP_POPULATE |
                                             MAP_NORESERVE);
    cr_expect_eq(flags & MAP_TYPE, MAP_PRIVATE);
    cr_expect(flags & MAP_ANONYMOUS);
    cr_expect(flags & MAP_FIXED);
    cr_expect(flags & MAP_NORESERVE);
    cr_expect_eq(flags & MAP_POPULATE, 0);
}

/* --- when a view is the file ------------------------------------------------ */

Test(view_mapping, only_an_unsharded_unshuffled_view_is_the_file)
{
    struct vm_data data;
    vm_setup(&data, false, false, 2, 1);  /* shard=0 shuffle=0: the file */
    cr_expect(view_mapping_view_is_file(&data.file));
    vm_teardown(&data);
    vm_setup(&data, true, false, 1, 0);   /* shuffled */
    cr_expect_not(view_mapping_view_is_file(&data.file));
    vm_teardown(&data);
    vm_setup(&data, false, true, 2, 0);   /* half of the records */
    cr_expect_not(view_mapping_view_is_file(&data.file));
    vm_teardown(&data);
    vm_setup(&data, false, true, 1, 0);   /* sharded over one replica: still the file */
    cr_expect(view_mapping_view_is_file(&data.file));
    vm_teardown(&data);
}

Test(view_mapping, a_rewritten_header_or_a_dropped_tail_is_not_the_file)
{
    struct vm_data data;
    vm_setup(&data, false, false, 1, 0);
    data.file.header[3] ^= 0xff;          /* as a count= rewrite that changed it */
    cr_expect_not(view_mapping_view_is_file(&data.file));
    data.file.header[3] ^= 0xff;
    data.file.file_size += 5;             /* as a tail=drop of 5 bytes */
    cr_expect_not(view_mapping_view_is_file(&data.file));
    data.file.file_size -= 5;
    cr_expect(view_mapping_view_is_file(&data.file));
    vm_teardown(&data);
}

/* --- filling a mapping ------------------------------------------------------ */

static void vm_expect_fill(struct vm_data *data, uint64_t offset, uint64_t length)
{
    struct view_mapping_request request = {
        .offset = (int64_t)offset, .length = length, .protection = PROT_READ,
        .flags = MAP_PRIVATE};
    struct view_mapping_plan plan;
    view_mapping_plan_for_file(&data->file, &request, VM_PAGE, &plan);
    cr_assert_eq(plan.kind, VIEW_MAPPING_FROM_VIEW);
    unsigned char *memory = calloc(1, plan.mapped_length);
    unsigned char *expected = calloc(1, plan.mapped_length);
    uint64_t pass = 99;
    uint64_t copied = view_mapping_fill(&data->file, offset, memory, plan.filled_length, &pass);
    cr_expect_eq(copied, plan.filled_length);
    cr_expect_eq(pass, 0);
    size_t reference = dataset_view_copy(&data->file, offset, expected, length);
    cr_expect_eq(reference, copied);
    cr_expect_eq(memcmp(memory, expected, plan.mapped_length), 0,
                 "mapping at %llu of %llu bytes holds the view, zeros after it",
                 (unsigned long long)offset, (unsigned long long)length);
    free(memory);
    free(expected);
}

Test(view_mapping, fill_holds_the_view_at_an_offset_with_a_partial_page)
{
    struct vm_data data;
    vm_setup(&data, true, true, 2, 1);
    cr_assert_eq(data.file.view_size, VM_HEADER + 500 * VM_RECORD);
    vm_expect_fill(&data, 4096, 5000);
    vm_expect_fill(&data, 8192, 6000);    /* past the view's end: zeros */
    vm_expect_fill(&data, 0, data.file.view_size);
    vm_teardown(&data);
}

Test(view_mapping, fill_shows_this_replicas_shuffled_records)
{
    struct vm_data data;
    vm_setup(&data, true, true, 2, 0);
    uint64_t size = data.file.view_size;
    unsigned char *memory = malloc(size);
    uint64_t pass;
    cr_assert_eq(view_mapping_fill(&data.file, 0, memory, size, &pass), size);
    cr_expect_eq(memcmp(memory, data.bytes, VM_HEADER), 0, "header verbatim");
    size_t in_order = 0;
    for (uint64_t j = 0; j < 500; j++) {
        uint64_t id;
        memcpy(&id, memory + VM_HEADER + j * VM_RECORD, sizeof id);
        cr_assert_lt(id, VM_COUNT);
        in_order += id == 2 * j;
    }
    cr_expect_lt(in_order, 50, "shuffled: %zu records where a strided shard has them",
                 in_order);
    free(memory);
    vm_teardown(&data);
}

Test(view_mapping, a_mapping_begins_its_pass_and_delivers_nothing)
{
    struct vm_data data;
    vm_setup(&data, true, true, 2, 0);
    cr_assert_not(dataset_view_started(&data.file));
    unsigned char page[VM_PAGE];
    uint64_t pass;
    view_mapping_fill(&data.file, 0, page, sizeof page, &pass);
    cr_expect(dataset_view_started(&data.file), "begun: a reopen ends it");
    cr_expect_eq(data.file.shared->tracker.delivered, 0, "no record counts as delivered");
    /* a reopen (view_cursor_open) after the mapping ends the pass: the next
     * mapping shows pass 1 */
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    view_mapping_fill(&data.file, 0, page, sizeof page, &pass);
    cr_expect_eq(pass, 1);
    vm_teardown(&data);
}

Test(view_mapping, mapping_a_transparent_view_begins_its_pass_too)
{
    struct vm_data data;
    vm_setup(&data, false, false, 1, 0);
    view_mapping_note_mapped(&data.file);
    cr_expect(dataset_view_started(&data.file));
    cr_expect_eq(data.file.shared->tracker.delivered, 0);
    vm_teardown(&data);
}

/* The pass observer (the shim's metrics events) hears of a pass a mapping
 * began, once, as "mapped"; a mapping of a pass already begun tells it
 * nothing more. */
static struct {
    unsigned calls;
    bool begins;
    uint64_t pass;
    uint64_t records;
    char why[32];
} vm_observed;

static void vm_observer(const struct dataset_file *file, bool begins, uint64_t pass,
                        uint64_t records_consumed, const char *why)
{
    (void)file;
    vm_observed.calls++;
    vm_observed.begins = begins;
    vm_observed.pass = pass;
    vm_observed.records = records_consumed;
    snprintf(vm_observed.why, sizeof vm_observed.why, "%s", why);
}

Test(view_mapping, the_pass_observer_hears_of_a_mapped_pass_once)
{
    struct vm_data data;
    vm_setup(&data, true, false, 1, 0);
    memset(&vm_observed, 0, sizeof vm_observed);
    view_cursor_pass_observer = vm_observer;
    view_mapping_note_mapped(&data.file);
    cr_expect_eq(vm_observed.calls, 1);
    cr_expect(vm_observed.begins);
    cr_expect_eq(vm_observed.pass, 0);
    cr_expect_eq(vm_observed.records, 0);
    cr_expect_str_eq(vm_observed.why, "mapped");
    cr_expect(dataset_view_covered(&data.file), "for the end rules, the whole view was handed out");
    view_mapping_note_mapped(&data.file);
    unsigned char page[VM_PAGE];
    uint64_t pass;
    view_mapping_fill(&data.file, 0, page, sizeof page, &pass);
    cr_expect_eq(vm_observed.calls, 1, "the pass had begun already");

    /* a reopen ends it (the observer hears the end); the next mapping begins pass 1 */
    struct view_cursor cursor;
    view_cursor_open(&cursor, &data.file);
    cr_expect_eq(vm_observed.calls, 2);
    cr_expect_not(vm_observed.begins);
    cr_expect_str_eq(vm_observed.why, "reopened");
    view_mapping_fill(&data.file, 0, page, sizeof page, &pass);
    cr_expect_eq(pass, 1);
    cr_expect_eq(vm_observed.calls, 3);
    cr_expect(vm_observed.begins);
    cr_expect_eq(vm_observed.pass, 1);
    cr_expect_str_eq(vm_observed.why, "mapped");
    view_cursor_pass_observer = NULL;
    view_cursor_close(&cursor);
    vm_teardown(&data);
}

/* --- memory ----------------------------------------------------------------- */

Test(view_mapping, meminfo_available_is_parsed_in_bytes)
{
    uint64_t bytes = 0;
    const char *text = "MemTotal:       16318412 kB\nMemFree:         1000 kB\n"
                       "MemAvailable:    8123456 kB\nBuffers:  1 kB\n";
    cr_assert_eq(view_mapping_parse_meminfo(text, &bytes), 0);
    cr_expect_eq(bytes, 8123456ULL * 1024);
    cr_expect_eq(view_mapping_parse_meminfo("MemTotal: 5 kB\n", &bytes), -1);
    cr_expect_eq(view_mapping_parse_meminfo("", &bytes), -1);
}

Test(view_mapping, this_machine_reports_available_memory)
{
    uint64_t bytes = 0;
    cr_assert_eq(view_mapping_available_memory(&bytes), 0);
    cr_expect_gt(bytes, 0);
}

/* --- the table of the shim's mappings --------------------------------------- */

static struct view_mapping_table vm_table = VIEW_MAPPING_TABLE_INITIALIZER;

static void vm_table_reset(void)
{
    vm_table.count = 0;
}

Test(view_mapping, table_forgets_an_exact_munmap, .init = vm_table_reset)
{
    cr_assert(view_mapping_table_empty(&vm_table));
    cr_assert_eq(view_mapping_table_add(&vm_table, (void *)0x10000, 8192, NULL, 3), 0);
    cr_expect_not(view_mapping_table_empty(&vm_table));
    struct view_mapping_entry entry;
    cr_expect(view_mapping_table_find_overlap(&vm_table, (void *)0x11000, 1, &entry));
    cr_expect_eq(entry.pass, 3);
    cr_expect_not(view_mapping_table_find_overlap(&vm_table, (void *)0x12000, 4096, &entry));
    cr_expect_not(view_mapping_table_find_overlap(&vm_table, (void *)0xf000, 4096, &entry));
    cr_expect_eq(view_mapping_table_forget_range(&vm_table, (void *)0x10000, 8192), 8192);
    cr_expect(view_mapping_table_empty(&vm_table));
}

Test(view_mapping, table_trims_a_partial_munmap, .init = vm_table_reset)
{
    view_mapping_table_add(&vm_table, (void *)0x10000, 4 * 4096, NULL, 0);
    view_mapping_table_add(&vm_table, (void *)0x40000, 4096, NULL, 1);
    /* the head of the first */
    cr_expect_eq(view_mapping_table_forget_range(&vm_table, (void *)0x10000, 4096), 4096);
    struct view_mapping_entry entry;
    cr_expect_not(view_mapping_table_find_overlap(&vm_table, (void *)0x10000, 4096, &entry));
    cr_expect(view_mapping_table_find_overlap(&vm_table, (void *)0x11000, 4096, &entry));
    /* its tail */
    cr_expect_eq(view_mapping_table_forget_range(&vm_table, (void *)0x13000, 8192), 4096);
    cr_expect_not(view_mapping_table_find_overlap(&vm_table, (void *)0x13000, 4096, &entry));
    /* a hole in the middle keeps the entry */
    cr_expect_eq(view_mapping_table_forget_range(&vm_table, (void *)0x11800, 16), 16);
    cr_expect(view_mapping_table_find_overlap(&vm_table, (void *)0x11000, 1, &entry));
    /* a range covering everything forgets both */
    view_mapping_table_forget_range(&vm_table, (void *)0, 0x100000);
    cr_expect(view_mapping_table_empty(&vm_table));
}

Test(view_mapping, a_full_table_refuses_more_entries, .init = vm_table_reset)
{
    for (unsigned i = 0; i < VIEW_MAPPING_TABLE_CAPACITY; i++)
        cr_assert_eq(view_mapping_table_add(&vm_table, (void *)(uintptr_t)(0x100000 + i * 4096),
                                            4096, NULL, 0), 0);
    cr_expect_eq(view_mapping_table_add(&vm_table, (void *)0x10, 4096, NULL, 0), -1);
    view_mapping_table_forget_range(&vm_table, (void *)0x100000,
                                    (uint64_t)VIEW_MAPPING_TABLE_CAPACITY * 4096);
    cr_expect(view_mapping_table_empty(&vm_table));
}
