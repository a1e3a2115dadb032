/* test_error_message.c - the one-line error messages of the runtime
 * (runtime/error_message.h).
 *
 * Callers `return error_message(...)`, so it must return -1 whatever it
 * writes; what it embeds (file names, values) may hold newlines, which must
 * not break the line a log or a test reads; a short buffer is cut, never
 * overrun; and no buffer at all is fine. */
#include <criterion/criterion.h>

#include <string.h>

#include "error_message.h"

Test(error_message, formats_into_the_buffer_and_returns_minus_one)
{
    char error[64];
    memset(error, 'x', sizeof error);
    cr_expect_eq(error_message(error, sizeof error, "data file %s: %d records", "a.bin", 12),
                 -1);
    cr_expect_str_eq(error, "data file a.bin: 12 records");
    cr_expect_eq(error_message(error, sizeof error, "plain"), -1);
    cr_expect_str_eq(error, "plain", "a second message replaces the first");
}

Test(error_message, newlines_and_carriage_returns_become_spaces)
{
    char error[64];
    cr_expect_eq(error_message(error, sizeof error, "file \"%s\" is bad", "a\nb\r\nc"), -1);
    cr_expect_str_eq(error, "file \"a b  c\" is bad");
    error_message(error, sizeof error, "two\nlines\n");
    cr_expect_str_eq(error, "two lines ", "the format's own newlines too");
    error_message(error, sizeof error, "tab\tstays");
    cr_expect_str_eq(error, "tab\tstays", "only line breaks are replaced");
}

Test(error_message, a_short_buffer_is_cut_and_never_overrun)
{
    char error[16];
    memset(error, '#', sizeof error);
    cr_expect_eq(error_message(error, 8, "%s", "0123456789abcdef"), -1);
    cr_expect_str_eq(error, "0123456");
    for (size_t i = 8; i < sizeof error; i++)
        cr_expect_eq(error[i], '#', "byte %zu past the size was written", i);
    /* a newline past the cut is never looked at; one before it still is */
    error_message(error, 8, "ab\ncdefgh\n");
    cr_expect_str_eq(error, "ab cdef");
    error_message(error, 1, "anything");
    cr_expect_str_eq(error, "", "room for the NUL alone");
}

Test(error_message, no_buffer_is_fine)
{
    cr_expect_eq(error_message(NULL, 0, "nobody reads %s", "this"), -1);
    cr_expect_eq(error_message(NULL, 64, "nobody reads %s", "this"), -1);
    char error[8] = "keep";
    cr_expect_eq(error_message(error, 0, "not written"), -1);
    cr_expect_str_eq(error, "keep", "size 0 writes nothing");
}
