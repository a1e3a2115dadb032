/* test_stream_fetch.c - the consumed part of a stdio stream's last fetch
 * (runtime/stream_fetch.h): the fetch less what is still unread in the
 * buffer, nothing when there is no fetch or the buffer holds it all, and a
 * fetch made inside a seek counted from the seek's target (and known as a
 * read the trainer placed). */
#include <criterion/criterion.h>

#include "stream_fetch.h"

static struct stream_fetch fetched(uint64_t pass, uint64_t start, uint64_t length)
{
    struct stream_fetch fetch = {0};
    stream_fetch_record(&fetch, pass, start, length);
    return fetch;
}

Test(stream_fetch, the_consumed_part_is_the_fetch_less_the_unread_bytes)
{
    struct stream_fetch fetch = fetched(3, 16, 8192);
    uint64_t pass = 0, start = 0, length = 0;
    cr_assert(stream_fetch_consumed(&fetch, 8000, &pass, &start, &length));
    cr_expect_eq(pass, 3);
    cr_expect_eq(start, 16);
    cr_expect_eq(length, 192, "80-byte header read plus the rest of 192 bytes");
    cr_assert(stream_fetch_consumed(&fetch, 0, &pass, &start, &length));
    cr_expect_eq(length, 8192, "an empty buffer: the whole fetch");
}

Test(stream_fetch, an_unread_buffer_or_no_fetch_delivers_nothing)
{
    struct stream_fetch fetch = fetched(0, 0, 4096);
    uint64_t pass, start, length = 1;
    cr_assert(stream_fetch_consumed(&fetch, 4096, &pass, &start, &length));
    cr_expect_eq(length, 0);
    cr_assert(stream_fetch_consumed(&fetch, 5000, &pass, &start, &length));
    cr_expect_eq(length, 0, "more unread than fetched (a foreign buffer) is still nothing");

    struct stream_fetch none = fetched(0, 0, 0);
    cr_expect(!stream_fetch_consumed(&none, 0, &pass, &start, &length), "a read of 0 bytes");
    stream_fetch_forget(&fetch);
    cr_expect(!stream_fetch_consumed(&fetch, 0, &pass, &start, &length), "after a reposition");
}

Test(stream_fetch, a_fetch_inside_a_seek_counts_from_the_target)
{
    struct stream_fetch fetch = {0};
    stream_fetch_seek_begins(&fetch, 5000);
    /* glibc reads from the block boundary at 4096 and skips to 5000 */
    stream_fetch_record(&fetch, 1, 4096, 4096);
    stream_fetch_seek_ends(&fetch);
    uint64_t pass, start, length;
    cr_assert(stream_fetch_consumed(&fetch, 3192, &pass, &start, &length));
    cr_expect_eq(start, 5000);
    cr_expect_eq(length, 0, "the trainer has read nothing after its target yet");
    cr_assert(stream_fetch_consumed(&fetch, 3000, &pass, &start, &length));
    cr_expect_eq(length, 192);
    cr_expect(fetch.placed, "what the trainer reads after its fseek is a read it placed");

    /* a target beyond what the read returned leaves an empty fetch */
    stream_fetch_seek_begins(&fetch, 10000);
    stream_fetch_record(&fetch, 1, 8192, 1000);
    cr_assert(stream_fetch_consumed(&fetch, 0, &pass, &start, &length));
    cr_expect_eq(start, 9192);
    cr_expect_eq(length, 0);

    /* after the seek, fetches count from where they read */
    stream_fetch_seek_ends(&fetch);
    stream_fetch_record(&fetch, 1, 8192, 1000);
    cr_assert(stream_fetch_consumed(&fetch, 0, &pass, &start, &length));
    cr_expect_eq(start, 8192);
    cr_expect_eq(length, 1000);
    cr_expect(!fetch.placed, "a refill that follows on is no placed read");
}
