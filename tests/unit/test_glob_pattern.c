/* test_glob_pattern.c - which fnmatch(3) patterns the configuration
 * refuses (glob_pattern_check: those glibc cannot match as written) and
 * the directory a pattern is fixed to (glob_pattern_fixed_directory). */
#include <criterion/criterion.h>

#include <fnmatch.h>
#include <string.h>

#include "glob_pattern.h"

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

Test(glob_pattern, well_formed_patterns_are_accepted)
{
    static const char *const patterns[] = {
        "/data/train.bin", "*.bin", "ck[0-9]", "ck[!0-9]*", "ck[^a]", "shard-??.bin",
        "[]]", "[!]]", "[]a]", "[a-]", "[-a]", "[[]", "[a[]", "[[:digit:]]",
        "[[:alpha:][:digit:]_]", "[[:]", "[[:a]", "[[.a.]]", "[[=a=]]", "x\\[1\\]",
        "a\\\\", "[\\]]", "[a-\\z]", "run]", "[%-/]", "caf\xc3\xa9[\xc3\xa9-a]",
    };
    for (size_t i = 0; i < COUNT_OF(patterns); i++) {
        struct glob_pattern_problem problem = {.problem = ""};
        cr_expect(glob_pattern_check(patterns[i], &problem), "\"%s\": %s", patterns[i],
                  problem.problem);
    }
}

/* Each refused pattern, what the problem says, and the remedy offered. */
Test(glob_pattern, malformed_patterns_are_refused_with_their_problem_and_remedy)
{
    static const struct {
        const char *pattern;
        const char *problem;
        const char *remedy;
    } cases[] = {
        {"[unclosed", "has a '[' that no ']' closes (\"[unclosed\")", "\\[ for a literal '['"},
        {"/data/run[0-9/x.bin", "(\"[0-9/x.bin\")", "close it with ']'"},
        {"[", "no ']' closes", "\\["},
        {"[]", "no ']' closes (\"[]\")", "\\["},
        {"[!]", "no ']' closes", "\\["},
        {"a[b\\", "no ']' closes (\"[b\\\")", "\\["},
        {"[[:alpha:]", "no ']' closes", "\\["},
        {"x\\", "ends in a lone backslash", "\\\\ for a literal backslash"},
        {"[[:digits:]]", "unknown character class \"[:digits:]\"", "xdigit"},
        {"[[:ALPHA:]]", "unknown character class \"[:ALPHA:]\"", "alnum, alpha"},
        {"[[.a]", "has a \"[.\" that no \".]\" ends (\"[.a]\")", "\".]\""},
        {"[[=a]", "has a \"[=\" that no \"=]\" ends", "\"=]\""},
        {"ck[9-0]", "has a reversed range \"9-0\"", "such as 0-9"},
        {"[\\z-a]", "has a reversed range \"\\z-a\"", "a-z"},
    };
    for (size_t i = 0; i < COUNT_OF(cases); i++) {
        struct glob_pattern_problem problem = {.problem = ""};
        cr_expect_not(glob_pattern_check(cases[i].pattern, &problem), "\"%s\" accepted",
                      cases[i].pattern);
        cr_expect_not_null(strstr(problem.problem, cases[i].problem), "\"%s\": %s",
                           cases[i].pattern, problem.problem);
        cr_expect(problem.remedy != NULL && strstr(problem.remedy, cases[i].remedy) != NULL,
                  "\"%s\": remedy %s", cases[i].pattern,
                  problem.remedy ? problem.remedy : "(none)");
        cr_expect_null(strchr(problem.problem, '\n'));
        /* and without a problem to fill */
        cr_expect_not(glob_pattern_check(cases[i].pattern, NULL));
    }
}

/* Why they are refused: glibc matches none of them as meant.  An unclosed
 * '[' is taken literally, the others match nothing at all. */
Test(glob_pattern, glibc_matches_refused_patterns_only_literally_or_not_at_all)
{
    cr_expect_eq(fnmatch("ck[0-9", "ck1", 0), FNM_NOMATCH);
    cr_expect_eq(fnmatch("ck[0-9", "ck[0-9", 0), 0, "a literal '['");
    cr_expect_eq(fnmatch("x\\", "x\\", 0), FNM_NOMATCH);
    cr_expect_eq(fnmatch("x\\", "x", 0), FNM_NOMATCH);
    cr_expect_eq(fnmatch("[[:digits:]]", "1", 0), FNM_NOMATCH);
    cr_expect_eq(fnmatch("ck[9-0]", "ck5", 0), FNM_NOMATCH);
}

Test(glob_pattern, the_fixed_directory_ends_before_the_first_wildcard_component)
{
    static const struct {
        const char *pattern;
        const char *directory;
    } cases[] = {
        {"/no/such/dir/*.bin", "/no/such/dir"},
        {"/data/train.bin", "/data"},
        {"/data/run*/x.bin", "/data"},
        {"/data/tr?in.bin", "/data"},
        {"/data/[ab]/x.bin", "/data"},
        {"/x*", "/"},
        {"/x", "/"},
        {"*/x", ""},
        {"data/*.bin", "data"},
        {"train.bin", ""},
        {"*.bin", ""},
        {"/data/run\\*1/x*.bin", "/data/run*1"},
        {"/data/a\\[1\\]/b\\/c*", "/data/a[1]/b"},
    };
    for (size_t i = 0; i < COUNT_OF(cases); i++) {
        char directory[64];
        cr_assert_eq(glob_pattern_fixed_directory(cases[i].pattern, directory, sizeof directory),
                     0, "%s", cases[i].pattern);
        cr_expect_str_eq(directory, cases[i].directory, "%s", cases[i].pattern);
    }
}

Test(glob_pattern, a_fixed_directory_that_does_not_fit_is_refused)
{
    char directory[8];
    cr_expect_eq(glob_pattern_fixed_directory("/a/very/long/directory/*", directory,
                                              sizeof directory), -1);
    cr_expect_eq(glob_pattern_fixed_directory("/ab/*", directory, 0), -1);
    cr_expect_eq(glob_pattern_fixed_directory("/ab/*", directory, sizeof directory), 0);
    cr_expect_str_eq(directory, "/ab");
}
