/* test_view_copy.c - copies of view bytes made without the file's lock
 * (threaded readers of one file: their throughput grows with the thread
 * count up to the cores, since no lock is held across a copy; adaptshim(7)
 * "Threads").
 *
 * A read whose copy is stuck -- its destination page is registered with
 * userfaultfd, so the first byte written there waits until the test lets it
 * go -- must not keep another thread from reading the same file, nor from
 * ending the pass; the stuck read then returns the bytes of the view it
 * began in and delivers nothing to the next pass.  Plans stay valid after
 * their view is replaced, pieces read with pread are copied again when the
 * shim's descriptor changed meanwhile, and a plan copies the same bytes into
 * any split of the destination. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock_time.h"
#include "view_cursor.h"

#define VY_HEADER 16
#define VY_RECORD 64
#define VY_COUNT 200

struct vy_data {
    unsigned char *bytes;
    size_t size;
    struct data_entry entry;
    struct dataset_file file;
};

/* VY_COUNT records of `record` bytes, each filled with bytes of its index. */
static void vy_setup(struct vy_data *data, uint64_t record, bool count_field)
{
    memset(data, 0, sizeof *data);
    data->size = VY_HEADER + record * VY_COUNT;
    data->bytes = malloc(data->size);
    cr_assert_not_null(data->bytes);
    for (size_t i = 0; i < VY_HEADER; i++)
        data->bytes[i] = (unsigned char)('h' + i);
    for (uint64_t index = 0; index < VY_COUNT; index++)
        for (uint64_t i = 0; i < record; i++)
            data->bytes[VY_HEADER + index * record + i] = (unsigned char)(index * 7 + i);
    data->entry = (struct data_entry){
        .record_size = record,
        .header_size = VY_HEADER,
        .role = DATA_ROLE_TRAIN,
        .shuffle = true,
        .shard = true,
        .tail = TAIL_ERROR,
        .has_count_field = count_field,
        .count_offset = 8,
        .count_type = COUNT_FIELD_U64LE,
        .count_unit = record,
    };
    char error[256] = "";
    cr_assert_eq(dataset_file_init(&data->file, &data->entry, "/data/copy.bin", data->bytes,
                                   data->size, 9, 2, 1, error, sizeof error), 0, "%s", error);
}

static void vy_teardown(struct vy_data *data)
{
    dataset_file_release(&data->file);
    free(data->bytes);
}

/* The whole current view, copied under the lock. */
static unsigned char *vy_whole_view(struct vy_data *data, uint64_t *size)
{
    dataset_file_lock(&data->file);
    *size = data->file.view_size;
    unsigned char *view = malloc(*size);
    cr_assert_not_null(view);
    cr_assert_eq(dataset_view_copy(&data->file, 0, view, *size), *size);
    dataset_file_unlock(&data->file);
    return view;
}

/* --- a page whose first write waits -------------------------------------------- */

struct vy_trap {
    int fd;                       /* userfaultfd */
    unsigned char *page;
    size_t page_size;
};

/* false when this kernel or this user has no userfaultfd */
static bool vy_trap_open(struct vy_trap *trap)
{
    trap->page_size = (size_t)sysconf(_SC_PAGESIZE);
    trap->fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (trap->fd < 0)
        trap->fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (trap->fd < 0)
        return false;
    struct uffdio_api api = {.api = UFFD_API};
    trap->page = mmap(NULL, trap->page_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(trap->page, MAP_FAILED);
    struct uffdio_register region = {
        .range = {.start = (uintptr_t)trap->page, .len = trap->page_size},
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (ioctl(trap->fd, UFFDIO_API, &api) != 0 ||
        ioctl(trap->fd, UFFDIO_REGISTER, &region) != 0) {
        close(trap->fd);
        munmap(trap->page, trap->page_size);
        return false;
    }
    return true;
}

/* Waits until a thread is stuck writing to the page; false after `seconds`. */
static bool vy_trap_wait_for_fault(struct vy_trap *trap, double seconds)
{
    struct pollfd ready = {.fd = trap->fd, .events = POLLIN};
    if (poll(&ready, 1, (int)(seconds * 1000)) != 1)
        return false;
    struct uffd_msg message;
    return read(trap->fd, &message, sizeof message) == (ssize_t)sizeof message &&
           message.event == UFFD_EVENT_PAGEFAULT;
}

/* Lets the stuck write go on (into a zero page). */
static void vy_trap_release(struct vy_trap *trap)
{
    struct uffdio_zeropage zero = {
        .range = {.start = (uintptr_t)trap->page, .len = trap->page_size}};
    cr_assert_eq(ioctl(trap->fd, UFFDIO_ZEROPAGE, &zero), 0, "UFFDIO_ZEROPAGE: %s",
                 strerror(errno));
}

static void vy_trap_close(struct vy_trap *trap)
{
    close(trap->fd);
    munmap(trap->page, trap->page_size);
}

/* --- threads ------------------------------------------------------------------------ */

struct vy_reader {
    struct view_cursor *cursor;
    unsigned char *buffer;
    size_t size;
    uint64_t offset;              /* pread; UINT64_MAX: read */
    bool to_the_end;              /* read until a read returns 0 */
    ssize_t result;
    int done;
};

static void *vy_reader_run(void *argument)
{
    struct vy_reader *reader = argument;
    ssize_t total = 0;
    if (reader->offset != UINT64_MAX) {
        total = view_cursor_pread(reader->cursor, reader->buffer, reader->size, reader->offset);
    } else if (!reader->to_the_end) {
        total = view_cursor_read(reader->cursor, reader->buffer, reader->size);
    } else {
        for (;;) {
            ssize_t got = view_cursor_read(reader->cursor, reader->buffer + total,
                                           reader->size - (size_t)total);
            if (got <= 0)
                break;
            total += got;
        }
    }
    reader->result = total;
    __atomic_store_n(&reader->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static bool vy_wait_done(struct vy_reader *reader, double seconds)
{
    double deadline = clock_monotonic_seconds() + seconds;
    while (!__atomic_load_n(&reader->done, __ATOMIC_ACQUIRE)) {
        if (clock_monotonic_seconds() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

/* Two cursors on one file, one of whose reads will get stuck in its copy
 * into the trapped page while the other reads. */
struct vy_race {
    struct vy_trap trap;
    struct vy_data data;
    unsigned char *view;          /* the whole view before the race */
    uint64_t size;
    struct view_cursor stuck_cursor, other_cursor;
};

/* Skips the test where this system has no userfaultfd. */
static void vy_race_start(struct vy_race *race)
{
    if (!vy_trap_open(&race->trap))
        cr_skip_test("userfaultfd is not available here");
    vy_setup(&race->data, VY_RECORD, false);
    race->view = vy_whole_view(&race->data, &race->size);
    view_cursor_open(&race->stuck_cursor, &race->data.file);
    view_cursor_open(&race->other_cursor, &race->data.file);
}

/* Runs stuck until it is stuck in its copy, then other; lets stuck go on
 * once other is done (or has waited 20 s), and expects that other did not
 * wait for stuck's copy. */
static void vy_race_run(struct vy_race *race, struct vy_reader *stuck, struct vy_reader *other)
{
    pthread_t stuck_thread, other_thread;
    cr_assert_eq(pthread_create(&stuck_thread, NULL, vy_reader_run, stuck), 0);
    cr_assert(vy_trap_wait_for_fault(&race->trap, 30), "the read never reached its copy");
    cr_assert_eq(pthread_create(&other_thread, NULL, vy_reader_run, other), 0);
    bool other_finished_first = vy_wait_done(other, 20);
    vy_trap_release(&race->trap);
    pthread_join(stuck_thread, NULL);
    pthread_join(other_thread, NULL);
    cr_expect(other_finished_first, "a read of the same file waited for another's copy");
}

static void vy_race_finish(struct vy_race *race)
{
    free(race->view);
    vy_trap_close(&race->trap);
    vy_teardown(&race->data);
}

Test(view_copy, a_read_stuck_in_its_copy_does_not_keep_others_from_the_file)
{
    struct vy_race race;
    vy_race_start(&race);
    /* a pread of three records into the trapped page; meanwhile another
     * thread preads the same records, and more */
    struct vy_reader stuck = {.cursor = &race.stuck_cursor, .buffer = race.trap.page,
                              .size = 3 * VY_RECORD, .offset = VY_HEADER};
    unsigned char other_bytes[10 * VY_RECORD];
    struct vy_reader other = {.cursor = &race.other_cursor, .buffer = other_bytes,
                              .size = sizeof other_bytes, .offset = VY_HEADER};
    vy_race_run(&race, &stuck, &other);
    cr_expect_eq(other.result, (ssize_t)sizeof other_bytes);
    cr_expect_eq(memcmp(other_bytes, race.view + VY_HEADER, sizeof other_bytes), 0);
    cr_expect_eq(stuck.result, 3 * VY_RECORD);
    cr_expect_eq(memcmp(race.trap.page, race.view + VY_HEADER, 3 * VY_RECORD), 0,
                 "the stuck read finishes its copy once it may");
    cr_expect_eq(race.data.file.shared->tracker.delivered, 10, "both preads delivered");
    vy_race_finish(&race);
}

Test(view_copy, a_pass_ended_during_a_copy_leaves_the_read_its_view_and_no_deliveries)
{
    struct vy_race race;
    vy_race_start(&race);
    /* the stuck cursor has read the header and two records; its next read
     * takes three more records, into the trapped page */
    unsigned char start[VY_HEADER + 2 * VY_RECORD];
    cr_assert_eq(view_cursor_read(&race.stuck_cursor, start, sizeof start), VY_HEADER);
    cr_assert_eq(view_cursor_read(&race.stuck_cursor, start + VY_HEADER, 2 * VY_RECORD),
                 2 * VY_RECORD);
    struct vy_reader stuck = {.cursor = &race.stuck_cursor, .buffer = race.trap.page,
                              .size = 3 * VY_RECORD, .offset = UINT64_MAX};
    /* another thread reads the view to its end: the pass ends */
    /* (room beyond the view: the read that returns 0 asks for something) */
    unsigned char *other_bytes = malloc(race.size + VY_RECORD);
    struct vy_reader other = {.cursor = &race.other_cursor, .buffer = other_bytes,
                              .size = race.size + VY_RECORD, .offset = UINT64_MAX,
                              .to_the_end = true};
    vy_race_run(&race, &stuck, &other);
    cr_expect_eq(other.result, (ssize_t)race.size);
    cr_expect_eq(race.data.file.view_pass, 1, "the other reader ended the pass");
    cr_expect_eq(stuck.result, 3 * VY_RECORD);
    cr_expect_eq(memcmp(race.trap.page, race.view + VY_HEADER + 2 * VY_RECORD, 3 * VY_RECORD),
                 0, "the stuck read returns bytes of the view it began in");
    cr_expect_not(dataset_view_started(&race.data.file),
                  "nothing was delivered to the next pass");
    cr_expect_eq(race.data.file.shared->tracker.delivered, 0);
    cr_expect_eq(race.stuck_cursor.offset, VY_HEADER + 5 * VY_RECORD);
    cr_expect_eq(view_cursor_read(&race.stuck_cursor, start, 1), 0,
                 "its cursor still stands in the pass that is over");
    free(other_bytes);
    vy_race_finish(&race);
}

Test(view_copy, a_plan_copies_the_view_it_was_made_in)
{
    struct vy_data data;
    vy_setup(&data, VY_RECORD, true);
    uint64_t size;
    unsigned char *old_view = vy_whole_view(&data, &size);
    unsigned char *copy = calloc(1, size);
    struct iovec whole = {copy, size};
    struct view_copy_plan plan;
    dataset_file_lock(&data.file);
    uint64_t planned = dataset_view_plan_copy(&data.file, 0, size, &whole, 1, 0, &plan);
    dataset_view_end_pass(&data.file);
    dataset_file_unlock(&data.file);
    cr_assert_eq(planned, size, "a whole view of %d records fits one plan", VY_COUNT);
    cr_expect_eq(plan.direct_bytes, VY_HEADER, "a count= header is copied at planning");
    dataset_view_run_copy(&data.file, &plan, &whole, 1, 0);
    cr_expect_eq(memcmp(copy, old_view, size), 0);
    uint64_t new_size;
    unsigned char *new_view = vy_whole_view(&data, &new_size);
    cr_expect_neq(memcmp(new_view + VY_HEADER, old_view + VY_HEADER, new_size - VY_HEADER), 0,
                  "the next pass has another order");
    free(new_view);
    free(copy);
    free(old_view);
    vy_teardown(&data);
}

Test(view_copy, the_same_bytes_into_any_split_of_the_destination)
{
    static const uint64_t records[] = {VY_RECORD, 4096 + 24};
    for (size_t r = 0; r < sizeof records / sizeof records[0]; r++) {
        struct vy_data data;
        vy_setup(&data, records[r], r == 0);
        uint64_t size;
        unsigned char *view = vy_whole_view(&data, &size);
        unsigned char *out = calloc(1, size);
        /* vectors of 1, 7, 4095, 4097 ... bytes, from offsets inside the header */
        static const size_t lengths[] = {1, 7, 4095, 0, 4097, 13, 8192};
        for (uint64_t offset = 3; offset < size; offset += size / 3) {
            struct iovec vector[sizeof lengths / sizeof lengths[0]];
            size_t total = 0;
            for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
                size_t length = total + lengths[i] <= size ? lengths[i] : size - total;
                vector[i] = (struct iovec){out + total, length};
                total += length;
            }
            memset(out, 0, size);
            struct view_copy_plan plan;
            uint64_t done = 0;
            while (done < total) {
                dataset_file_lock(&data.file);
                uint64_t planned = dataset_view_plan_copy(&data.file, offset + done, total - done,
                                                          vector, 7, done, &plan);
                dataset_file_unlock(&data.file);
                if (planned == 0)
                    break;
                dataset_view_run_copy(&data.file, &plan, vector, 7, done);
                done += planned;
            }
            uint64_t expected = size - offset < total ? size - offset : total;
            cr_expect_eq(done, expected, "record %llu, offset %llu",
                         (unsigned long long)records[r], (unsigned long long)offset);
            cr_expect_eq(memcmp(out, view + offset, (size_t)done), 0, "record %llu, offset %llu",
                         (unsigned long long)records[r], (unsigned long long)offset);
        }
        free(out);
        free(view);
        vy_teardown(&data);
    }
}

/* A temporary file holding `size` bytes of `bytes`, opened read-only. */
static int vy_temporary_file(const unsigned char *bytes, size_t size)
{
    char path[] = "/tmp/adaptshim-view-copy-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, bytes, size), (ssize_t)size);
    return fd;
}

Test(view_copy, pieces_read_while_the_descriptor_changed_are_copied_again)
{
    struct vy_data data;
    vy_setup(&data, 8192, false);
    uint64_t size;
    unsigned char *view = vy_whole_view(&data, &size);
    /* the shim's descriptor of the file, and another file of zeros */
    int source = vy_temporary_file(data.bytes, data.size);
    unsigned char *zeros = calloc(1, data.size);
    int other = vy_temporary_file(zeros, data.size);
    dataset_file_lock(&data.file);
    dataset_view_set_source_fd(&data.file, source);
    unsigned char *out = calloc(1, size);
    struct iovec whole = {out, size};
    struct view_copy_plan plan;
    uint64_t planned = dataset_view_plan_copy(&data.file, 0, size, &whole, 1, 0, &plan);
    /* what a dup2 over the shim's descriptor does: move it first, then the
     * number becomes another file's */
    dataset_view_set_source_fd(&data.file, -1);
    dataset_file_unlock(&data.file);
    cr_assert_eq(dup2(other, source), source);
    dataset_view_run_copy(&data.file, &plan, &whole, 1, 0);
    cr_expect_eq(planned, size);
    cr_expect_eq(memcmp(out, view, size), 0, "the view's bytes, not the other file's");
    close(source);
    close(other);
    free(out);
    free(zeros);
    free(view);
    vy_teardown(&data);
}
