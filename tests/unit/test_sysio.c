/* test_sysio.c - the runtime's full reads and writes (runtime/sysio.h).
 *
 * Every state file, log line and metrics line goes out through
 * sysio_write_all, and snapshots, checkpoints and records come back through
 * sysio_pread_full: a short transfer or an EINTR taken for the whole would
 * silently cut a file.  The kernel's answers are replaced through the
 * runtime_sysio table by fakes over memory that move a few bytes at a
 * time, get interrupted or fail (each Criterion test runs in its own
 * process, so that is safe); one test reads a real file up to its end. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sysio.h"

/* --- a fake descriptor over memory ------------------------------------------ */

static struct {
    unsigned char data[256];
    size_t size;              /* bytes written, or the file's size for preads */
    size_t chunk;             /* most bytes one call moves */
    unsigned interruptions;   /* calls that fail with EINTR before any moves */
    unsigned fail_after;      /* calls that move bytes before one fails (0: never) */
    int fail_errno;
    unsigned calls;
    off_t offsets[64];        /* of each pread call */
} fake;

static void fake_reset(size_t chunk)
{
    memset(&fake, 0, sizeof fake);
    fake.chunk = chunk;
}

/* Called before every transfer: -1 with errno when this one is to fail. */
static int fake_next_call_fails(unsigned *moving_calls)
{
    fake.calls++;
    if (fake.interruptions > 0) {
        fake.interruptions--;
        errno = EINTR;
        return -1;
    }
    if (fake.fail_after > 0 && ++*moving_calls > fake.fail_after) {
        errno = fake.fail_errno;
        return -1;
    }
    return 0;
}

static unsigned fake_write_moves;

static ssize_t fake_write(int fd, const void *buffer, size_t size)
{
    (void)fd;
    if (fake_next_call_fails(&fake_write_moves) != 0)
        return -1;
    size_t count = size < fake.chunk ? size : fake.chunk;
    cr_assert_leq(fake.size + count, sizeof fake.data);
    memcpy(fake.data + fake.size, buffer, count);
    fake.size += count;
    return (ssize_t)count;
}

static unsigned fake_pread_moves;

static ssize_t fake_pread(int fd, void *buffer, size_t size, off_t offset)
{
    (void)fd;
    if (fake.calls < sizeof fake.offsets / sizeof fake.offsets[0])
        fake.offsets[fake.calls] = offset;
    if (fake_next_call_fails(&fake_pread_moves) != 0)
        return -1;
    if ((size_t)offset >= fake.size)
        return 0;
    size_t left = fake.size - (size_t)offset;
    size_t count = size < fake.chunk ? size : fake.chunk;
    if (count > left)
        count = left;
    memcpy(buffer, fake.data + offset, count);
    return (ssize_t)count;
}

static void fake_fill(size_t size)
{
    fake.size = size;
    for (size_t i = 0; i < size; i++)
        fake.data[i] = (unsigned char)(i * 7 + 3);
}

/* --- sysio_write_all -------------------------------------------------------- */

Test(sysio, a_short_write_is_continued_until_everything_is_written)
{
    fake_reset(3);
    runtime_sysio.write = fake_write;
    static const char text[] = "one line of a state file\n";
    cr_assert_eq(sysio_write_all(7, text, sizeof text - 1), 0);
    cr_expect_eq(fake.size, sizeof text - 1);
    cr_expect_eq(memcmp(fake.data, text, sizeof text - 1), 0, "every byte once, in order");
    cr_expect_eq(fake.calls, (sizeof text - 1 + 2) / 3, "three bytes a call: %u calls",
                 fake.calls);
}

Test(sysio, an_interrupted_write_is_retried)
{
    fake_reset(100);
    fake.interruptions = 2;
    runtime_sysio.write = fake_write;
    cr_assert_eq(sysio_write_all(7, "abcdef", 6), 0);
    cr_expect_eq(fake.size, 6);
    cr_expect_eq(memcmp(fake.data, "abcdef", 6), 0);
    cr_expect_eq(fake.calls, 3, "two EINTR, then the write");
}

Test(sysio, a_failing_write_stops_with_its_errno)
{
    fake_reset(4);
    fake.fail_after = 2;
    fake.fail_errno = ENOSPC;
    runtime_sysio.write = fake_write;
    errno = 0;
    cr_expect_eq(sysio_write_all(7, "0123456789abcdef", 16), -1);
    cr_expect_eq(errno, ENOSPC, "errno %d", errno);
    cr_expect_eq(fake.size, 8, "what went out before the failure stays written");
    cr_expect_eq(fake.calls, 3, "no retry after a real failure");
}

/* A write that moves nothing and reports nothing would repeat forever: it
 * fails with EIO after one call instead. */
Test(sysio, a_write_that_moves_nothing_fails_instead_of_spinning)
{
    fake_reset(0);
    runtime_sysio.write = fake_write;
    errno = 0;
    cr_expect_eq(sysio_write_all(7, "abc", 3), -1);
    cr_expect_eq(errno, EIO, "errno %d", errno);
    cr_expect_eq(fake.calls, 1);
}

Test(sysio, writing_nothing_calls_nothing)
{
    fake_reset(4);
    runtime_sysio.write = fake_write;
    cr_expect_eq(sysio_write_all(7, "", 0), 0);
    cr_expect_eq(fake.calls, 0);
}

/* --- sysio_pread_full ------------------------------------------------------- */

Test(sysio, a_short_pread_is_continued_until_the_count_or_end_of_file)
{
    fake_reset(5);
    fake_fill(40);
    runtime_sysio.pread = fake_pread;
    unsigned char buffer[64];
    cr_assert_eq(sysio_pread_full(9, buffer, 16, 10), 16);
    cr_expect_eq(memcmp(buffer, fake.data + 10, 16), 0);
    cr_expect_eq(fake.calls, 4, "5 + 5 + 5 + 1 bytes");
    cr_expect_eq(fake.offsets[0], 10);
    cr_expect_eq(fake.offsets[1], 15, "each call continues where the last one stopped");
    cr_expect_eq(fake.offsets[2], 20);
    cr_expect_eq(fake.offsets[3], 25);

    fake.calls = 0;
    memset(buffer, 0, sizeof buffer);
    cr_assert_eq(sysio_pread_full(9, buffer, sizeof buffer, 28), 12, "end of file first");
    cr_expect_eq(memcmp(buffer, fake.data + 28, 12), 0);
    cr_expect_eq(fake.calls, 4, "5 + 5 + 2, then the 0 of end of file");
    cr_expect_eq(sysio_pread_full(9, buffer, sizeof buffer, 40), 0, "at the end: nothing");
    cr_expect_eq(sysio_pread_full(9, buffer, sizeof buffer, 1000), 0, "past the end");
}

Test(sysio, an_interrupted_pread_is_retried)
{
    fake_reset(100);
    fake_fill(20);
    fake.interruptions = 3;
    runtime_sysio.pread = fake_pread;
    unsigned char buffer[20];
    cr_assert_eq(sysio_pread_full(9, buffer, sizeof buffer, 0), 20);
    cr_expect_eq(memcmp(buffer, fake.data, 20), 0);
    cr_expect_eq(fake.calls, 4);
    cr_expect_eq(fake.offsets[3], 0, "the retry reads at the same offset");
}

Test(sysio, a_failing_pread_returns_minus_one_with_its_errno)
{
    fake_reset(4);
    fake_fill(40);
    fake.fail_after = 1;
    fake.fail_errno = EIO;
    runtime_sysio.pread = fake_pread;
    unsigned char buffer[16];
    errno = 0;
    cr_expect_eq(sysio_pread_full(9, buffer, sizeof buffer, 0), -1,
                 "not the 4 bytes read before: a partial count would look like end of file");
    cr_expect_eq(errno, EIO, "errno %d", errno);
    cr_expect_eq(fake.calls, 2);
}

Test(sysio, reading_nothing_calls_nothing)
{
    fake_reset(4);
    fake_fill(40);
    runtime_sysio.pread = fake_pread;
    unsigned char byte;
    cr_expect_eq(sysio_pread_full(9, &byte, 0, 3), 0);
    cr_expect_eq(fake.calls, 0);
}

Test(sysio, a_real_file_is_read_at_an_offset_up_to_its_end)
{
    char directory[] = "/tmp/adaptshim-test-sysio-XXXXXX";
    cr_assert_not_null(mkdtemp(directory));
    char path[sizeof directory + 16];
    snprintf(path, sizeof path, "%s/file", directory);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    static const char content[] = "0123456789abcdefghij";
    cr_assert_eq(sysio_write_all(fd, content, sizeof content - 1), 0);
    char buffer[32] = "";
    cr_expect_eq(sysio_pread_full(fd, buffer, 8, 4), 8);
    cr_expect_eq(memcmp(buffer, "456789ab", 8), 0);
    cr_expect_eq(sysio_pread_full(fd, buffer, sizeof buffer, 15), 5);
    cr_expect_eq(memcmp(buffer, "fghij", 5), 0);
    cr_expect_eq(sysio_pread_full(fd, buffer, sizeof buffer, 0), 20);
    close(fd);
    errno = 0;
    cr_expect_eq(sysio_pread_full(fd, buffer, sizeof buffer, 0), -1, "a closed descriptor");
    cr_expect_eq(errno, EBADF);
    cr_expect_eq(sysio_write_all(fd, "x", 1), -1);
    cr_expect_eq(errno, EBADF);
    unlink(path);
    rmdir(directory);
}
