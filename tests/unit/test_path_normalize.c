/* test_path_normalize.c - absolute paths built lexically
 * (runtime/path_normalize.h): relative to a base, ".", ".." and repeated
 * slashes resolved, "/" without a parent, an absolute path ignoring the
 * base, and a result that does not fit refused. */
#include <criterion/criterion.h>

#include <string.h>

#include "path_normalize.h"

static void expect_path(const char *base, const char *path, const char *expected)
{
    char out[256];
    cr_assert_eq(path_normalize_absolute(base, path, out, sizeof out), 0, "%s + %s", base, path);
    cr_expect_str_eq(out, expected, "%s + %s", base, path);
}

Test(path_normalize, relative_paths_join_the_base_and_dots_resolve)
{
    expect_path("/home/u", "data/train.bin", "/home/u/data/train.bin");
    expect_path("/home/u/", "./data//./train.bin", "/home/u/data/train.bin");
    expect_path("/home/u/job", "../data/train.bin", "/home/u/data/train.bin");
    expect_path("/", "../../x", "/x");
    expect_path("/a/b", "..", "/a");
    expect_path("/a", "../..", "/");
}

Test(path_normalize, an_absolute_path_ignores_the_base)
{
    expect_path("/home/u", "/data/./x/../train.bin", "/data/train.bin");
    expect_path("/ignored", "/", "/");
}

Test(path_normalize, a_result_that_does_not_fit_is_refused)
{
    char out[12];
    cr_expect_eq(path_normalize_absolute("/home/user", "data/train.bin", out, sizeof out), -1);
    cr_expect_eq(path_normalize_absolute("/", "x", out, 1), -1);
}
