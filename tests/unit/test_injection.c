/* test_injection.c - reading and rewriting the trainer's batch-size and
 * learning-rate arguments (adaptshim(7) "BATCH-SIZE CONTROL", ADAPTDL_BSZ_ARG, ADAPTDL_LR_ARG,
 * ADAPTDL_LR_RULE).
 *
 * Every argv form (`--batch-size 32`, `--batch-size=32`, `-b 32`, `-b32`,
 * `-b=32`), the flag inserted when absent, env:NAME present and absent,
 * several occurrences (the last one wins when reading, all are rewritten),
 * `--` ending the options, a flag without a value, values that are not
 * numbers or not positive (and the one-line message that names the
 * variable, the flag, the value and what is accepted), the learning-rate
 * factor per rule, AdaScale's gain at its edges, and number formatting.
 * Each rewritten array is freed, so a run under ASan also checks that the
 * single-allocation arrays leak nothing. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "injection.h"

#define COUNT_OF(array) ((int)(sizeof(array) / sizeof((array)[0])))
/* argc of a NULL-terminated array literal. */
#define ARGC(array) (COUNT_OF(array) - 1)

static struct injection_target argv_target(const char *flag)
{
    return (struct injection_target){INJECT_ARGV, (char *)flag};
}

static struct injection_target env_target(const char *name)
{
    return (struct injection_target){INJECT_ENV, (char *)name};
}

/* Reads a batch size from argv only; fails the test on error. */
static double read_batch_size_or_fail(const char *flag, int argc, char *const argv[],
                                      bool *present)
{
    struct injection_target target = argv_target(flag);
    char error[512] = "";
    double value = -1;
    int rc = injection_read_value(&target, INJECTION_BATCH_SIZE, argc, argv, NULL, &value,
                                  present, error, sizeof error);
    cr_assert_eq(rc, 0, "unexpected error: %s", error);
    return value;
}

/* Expects reading to fail with a one-line message, left in error. */
static void expect_read_error(const struct injection_target *target,
                              enum injection_quantity quantity, int argc, char *const argv[],
                              char *const envp[], char *error, size_t error_size)
{
    double value = 123;
    bool present = true;
    int rc = injection_read_value(target, quantity, argc, argv, envp, &value, &present, error,
                                  error_size);
    cr_assert_eq(rc, -1, "expected an error");
    cr_assert_not(present);
    cr_assert(strlen(error) > 0);
    cr_assert_null(strchr(error, '\n'), "message is not one line: %s", error);
}

/* A NULL-terminated list of what a message must contain. */
#define FRAGMENTS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Expects reading `quantity` after `flag` in argv to fail with a one-line
 * message that contains every one of `fragments`. */
static void expect_argv_error(const char *flag, enum injection_quantity quantity, int argc,
                              char *const argv[], const char *const fragments[])
{
    struct injection_target target = argv_target(flag);
    char error[1024] = "";
    expect_read_error(&target, quantity, argc, argv, NULL, error, sizeof error);
    for (const char *const *fragment = fragments; *fragment != NULL; fragment++)
        cr_assert(strstr(error, *fragment) != NULL, "no %s in: %s", *fragment, error);
}

static void expect_bad_batch_size(const char *text)
{
    char *argv[] = {"trainer", "--batch-size", (char *)text, NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv,
                      FRAGMENTS("ADAPTDL_BSZ_ARG", "accepted:"));
}

static double read_learning_rate(const char *text, int *rc)
{
    char *argv[] = {"trainer", "--lr", (char *)text, NULL};
    struct injection_target target = argv_target("--lr");
    char error[512] = "";
    double value = -1;
    bool present = false;
    *rc = injection_read_value(&target, INJECTION_LEARNING_RATE, ARGC(argv), argv, NULL,
                               &value, &present, error, sizeof error);
    if (*rc == 0)
        cr_assert(present);
    return value;
}

/* Compares a rewritten argv with the expected strings, NULL-terminated. */
static void expect_argv(char **actual, int actual_argc, const char *const expected[])
{
    int expected_argc = 0;
    while (expected[expected_argc] != NULL)
        expected_argc++;
    cr_assert_eq(actual_argc, expected_argc, "argc %d, expected %d", actual_argc,
                 expected_argc);
    for (int i = 0; i < expected_argc; i++)
        cr_assert_str_eq(actual[i], expected[i], "argv[%d]", i);
    cr_assert_null(actual[actual_argc], "argv[argc] must be NULL");
}

static char **rewrite_or_fail(const char *flag, int argc, char *const argv[],
                              const char *new_value, int *new_argc)
{
    struct injection_target target = argv_target(flag);
    char error[512] = "";
    char **new_argv = NULL;
    int rc = injection_rewrite_argv(&target, INJECTION_BATCH_SIZE, argc, argv, new_value,
                                    new_argc, &new_argv, error, sizeof error);
    cr_assert_eq(rc, 0, "unexpected error: %s", error);
    cr_assert_not_null(new_argv);
    return new_argv;
}

/* --- reading: every form --------------------------------------------------- */

Test(injection_read, long_flag_with_separate_value)
{
    char *argv[] = {"trainer", "--epochs", "3", "--batch-size", "32", "data.bin", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("--batch-size", ARGC(argv), argv, &present), 32.0);
    cr_assert(present);
}

Test(injection_read, long_flag_with_equals)
{
    char *argv[] = {"trainer", "--batch-size=48", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("--batch-size", ARGC(argv), argv, &present), 48.0);
    cr_assert(present);
}

Test(injection_read, short_flag_with_separate_value)
{
    char *argv[] = {"trainer", "-b", "32", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("-b", ARGC(argv), argv, &present), 32.0);
    cr_assert(present);
}

Test(injection_read, short_flag_with_attached_value)
{
    char *argv[] = {"trainer", "-b32", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("-b", ARGC(argv), argv, &present), 32.0);
    cr_assert(present);
}

Test(injection_read, short_flag_with_equals)
{
    char *argv[] = {"trainer", "-b=32", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("-b", ARGC(argv), argv, &present), 32.0);
    cr_assert(present);
}

Test(injection_read, multi_letter_single_dash_flag)
{
    char *separate[] = {"trainer", "-bs", "16", NULL};
    char *equals[] = {"trainer", "-bs=24", NULL};
    char *attached[] = {"trainer", "-bs40", NULL};
    bool present = false;

    cr_assert_eq(read_batch_size_or_fail("-bs", ARGC(separate), separate, &present), 16.0);
    cr_assert(present);
    cr_assert_eq(read_batch_size_or_fail("-bs", ARGC(equals), equals, &present), 24.0);
    cr_assert(present);
    /* no attached form is guessed for a multi-letter flag */
    read_batch_size_or_fail("-bs", ARGC(attached), attached, &present);
    cr_assert_not(present);
}

Test(injection_read, short_flag_does_not_swallow_other_options)
{
    char *argv[] = {"trainer", "-bias", "-b", "8", "-bar", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("-b", ARGC(argv), argv, &present), 8.0);
    cr_assert(present);
}

Test(injection_read, longer_flag_with_same_prefix_is_another_flag)
{
    char *argv[] = {"trainer", "--batch-size-eval", "64", "--batch-sizes=1,2", NULL};
    bool present = true;
    read_batch_size_or_fail("--batch-size", ARGC(argv), argv, &present);
    cr_assert_not(present);
}

Test(injection_read, program_name_is_not_scanned)
{
    char *argv[] = {"--batch-size", "7", NULL};
    bool present = true;
    read_batch_size_or_fail("--batch-size", 1, argv, &present);
    cr_assert_not(present);
}

Test(injection_read, absent_flag)
{
    char *argv[] = {"trainer", "--epochs", "3", NULL};
    bool present = true;
    double value = read_batch_size_or_fail("--batch-size", ARGC(argv), argv, &present);
    cr_assert_not(present);
    cr_assert(isnan(value));
}

Test(injection_read, no_arguments_at_all)
{
    char *argv[] = {"trainer", NULL};
    bool present = true;
    read_batch_size_or_fail("--batch-size", ARGC(argv), argv, &present);
    cr_assert_not(present);
}

Test(injection_read, inject_none_reads_nothing)
{
    struct injection_target target = {INJECT_NONE, NULL};
    char *argv[] = {"trainer", "--batch-size", "32", NULL};
    double value = 0;
    bool present = true;
    char error[256] = "";
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, ARGC(argv), argv, NULL,
                                      &value, &present, error, sizeof error),
                 0);
    cr_assert_not(present);
}

/* --- reading: occurrences, end of options, missing values ------------------- */

Test(injection_read, last_occurrence_wins)
{
    char *argv[] = {"trainer", "--batch-size", "16", "--batch-size=32", "-x",
                    "--batch-size", "64", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("--batch-size", ARGC(argv), argv, &present), 64.0);
    cr_assert(present);
}

Test(injection_read, last_occurrence_wins_across_short_forms)
{
    char *argv[] = {"trainer", "-b", "8", "-b16", "-b=24", NULL};
    bool present = false;
    cr_assert_eq(read_batch_size_or_fail("-b", ARGC(argv), argv, &present), 24.0);
}

Test(injection_read, every_occurrence_is_checked)
{
    char *argv[] = {"trainer", "--batch-size", "big", "--batch-size", "64", NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv, FRAGMENTS("\"big\""));
}

Test(injection_read, end_of_options_stops_the_scan)
{
    char *after_only[] = {"trainer", "--", "--batch-size", "32", NULL};
    char *before_and_after[] = {"trainer", "--batch-size", "16", "--", "--batch-size",
                                "32", NULL};
    char *bad_after[] = {"trainer", "-b", "4", "--", "-b", "not-a-number", NULL};
    bool present = true;

    read_batch_size_or_fail("--batch-size", ARGC(after_only), after_only, &present);
    cr_assert_not(present);
    cr_assert_eq(read_batch_size_or_fail("--batch-size", ARGC(before_and_after),
                                         before_and_after, &present),
                 16.0);
    cr_assert(present);
    cr_assert_eq(read_batch_size_or_fail("-b", ARGC(bad_after), bad_after, &present), 4.0);
}

Test(injection_read, double_dash_as_the_value_is_consumed)
{
    char *argv[] = {"trainer", "--batch-size", "--", "32", NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv, FRAGMENTS("\"--\""));
}

Test(injection_read, flag_without_value)
{
    char *argv[] = {"trainer", "--epochs", "3", "--batch-size", NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv,
                      FRAGMENTS("ADAPTDL_BSZ_ARG", "--batch-size", "argv[3]", "no value",
                                "accepted: --batch-size VALUE or --batch-size=VALUE"));
}

Test(injection_read, short_flag_without_value_lists_the_attached_form)
{
    char *argv[] = {"trainer", "-b", NULL};
    expect_argv_error("-b", INJECTION_LEARNING_RATE, ARGC(argv), argv,
                      FRAGMENTS("ADAPTDL_LR_ARG (argv:-b)", "-b VALUE, -b=VALUE or -bVALUE"));
}

Test(injection_read, value_of_the_flag_is_not_taken_for_the_flag)
{
    /* the second "--batch-size" is the first one's value: not a number */
    char *argv[] = {"trainer", "--batch-size", "--batch-size", "32", NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv,
                      FRAGMENTS("\"--batch-size\" in argv[2]"));
}

/* --- reading: values ------------------------------------------------------- */

Test(injection_read, non_numeric_batch_size_message)
{
    char *argv[] = {"trainer", "--batch-size=abc", NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv,
                      FRAGMENTS("ADAPTDL_BSZ_ARG", "argv:--batch-size", "\"abc\"", "argv[1]",
                                "is not a batch size", "accepted: a positive decimal integer"));
}

Test(injection_read, non_numeric_learning_rate_message)
{
    char *argv[] = {"trainer", "--lr", "fast", NULL};
    expect_argv_error("--lr", INJECTION_LEARNING_RATE, ARGC(argv), argv,
                      FRAGMENTS("ADAPTDL_LR_ARG", "argv:--lr", "\"fast\"", "argv[2]",
                                "is not a learning rate", "accepted: a finite decimal number"));
}

Test(injection_read, control_characters_in_a_value_stay_on_one_line)
{
    char *argv[] = {"trainer", "--batch-size", "3\n2\"", NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv,
                      FRAGMENTS("\"3\\x0a2\\\"\""));
}

Test(injection_read, long_value_is_cut_in_the_message)
{
    char value[1000];
    memset(value, 'x', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    char *argv[] = {"trainer", "--batch-size", value, NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv,
                      FRAGMENTS("...\"", "accepted:"));
}

Test(injection_read, batch_size_must_be_a_positive_integer)
{
    expect_bad_batch_size("0");
    expect_bad_batch_size("000");
    expect_bad_batch_size("-5");
    expect_bad_batch_size("-0");
    expect_bad_batch_size("+32");
    expect_bad_batch_size("3.5");
    expect_bad_batch_size("32.0");
    expect_bad_batch_size("1e3");
    expect_bad_batch_size("0x20");
    expect_bad_batch_size(" 32");
    expect_bad_batch_size("32 ");
    expect_bad_batch_size("32abc");
    expect_bad_batch_size("");
    expect_bad_batch_size("1099511627777");
    expect_bad_batch_size("99999999999999999999999999");
}

Test(injection_read, negative_batch_size_message)
{
    char *argv[] = {"trainer", "-b", "-8", NULL};
    expect_argv_error("-b", INJECTION_BATCH_SIZE, ARGC(argv), argv,
                      FRAGMENTS("\"-8\"", "positive"));
}

Test(injection_read, empty_value_after_equals)
{
    char *argv[] = {"trainer", "--batch-size=", NULL};
    expect_argv_error("--batch-size", INJECTION_BATCH_SIZE, ARGC(argv), argv, FRAGMENTS("\"\""));
}

Test(injection_read, batch_size_limits)
{
    char *largest[] = {"trainer", "--batch-size", "1099511627776", NULL};
    char *padded[] = {"trainer", "--batch-size", "0032", NULL};
    char *one[] = {"trainer", "--batch-size", "1", NULL};
    bool present;
    cr_assert_eq(read_batch_size_or_fail("--batch-size", ARGC(largest), largest, &present),
                 1099511627776.0);
    cr_assert_eq(read_batch_size_or_fail("--batch-size", ARGC(padded), padded, &present),
                 32.0);
    cr_assert_eq(read_batch_size_or_fail("--batch-size", ARGC(one), one, &present), 1.0);
}

Test(injection_read, learning_rate_values)
{
    int rc;
    cr_assert_eq(read_learning_rate("0.1", &rc), 0.1);
    cr_assert_eq(rc, 0);
    cr_assert_eq(read_learning_rate("1e-3", &rc), 1e-3);
    cr_assert_eq(rc, 0);
    cr_assert_eq(read_learning_rate("2E+1", &rc), 20.0);
    cr_assert_eq(rc, 0);
    cr_assert_eq(read_learning_rate(".5", &rc), 0.5);
    cr_assert_eq(rc, 0);
    cr_assert_eq(read_learning_rate("3", &rc), 3.0);
    cr_assert_eq(rc, 0);
    cr_assert_eq(read_learning_rate("0", &rc), 0.0);
    cr_assert_eq(rc, 0);
    /* the next argument is the value even when it starts with '-' */
    cr_assert_eq(read_learning_rate("-0.5", &rc), -0.5);
    cr_assert_eq(rc, 0);
}

Test(injection_read, learning_rate_rejects)
{
    static const char *const bad[] = {"",      "inf", "nan", "0x1p-3", " 0.1", "0.1 ", "1e999",
                                      "1e",    ".",   "e5",  "0.1.2",  "1,5",  "--",   "abc",
                                      "-inf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc;
        read_learning_rate(bad[i], &rc);
        cr_assert_eq(rc, -1, "\"%s\" was accepted", bad[i]);
    }
}

Test(injection_read, short_learning_rate_flag_attached_negative)
{
    char *argv[] = {"trainer", "-l-0.25", NULL};
    struct injection_target target = argv_target("-l");
    char error[256] = "";
    double value = 0;
    bool present = false;
    cr_assert_eq(injection_read_value(&target, INJECTION_LEARNING_RATE, ARGC(argv), argv,
                                      NULL, &value, &present, error, sizeof error),
                 0, "%s", error);
    cr_assert(present);
    cr_assert_eq(value, -0.25);
}

/* --- reading: environment ---------------------------------------------------- */

Test(injection_read, environment_present)
{
    char *envp[] = {"HOME=/root", "BATCH_SIZE=128", "PATH=/bin", NULL};
    char *argv[] = {"trainer", "--batch-size", "4", NULL};
    struct injection_target target = env_target("BATCH_SIZE");
    char error[256] = "";
    double value = 0;
    bool present = false;
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, ARGC(argv), argv, envp,
                                      &value, &present, error, sizeof error),
                 0, "%s", error);
    cr_assert(present);
    cr_assert_eq(value, 128.0);
}

Test(injection_read, environment_absent)
{
    char *envp[] = {"HOME=/root", "BATCH_SIZE_EVAL=64", "XBATCH_SIZE=3", "BATCH_SIZE", NULL};
    struct injection_target target = env_target("BATCH_SIZE");
    char error[256] = "";
    double value = 0;
    bool present = true;
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, 0, NULL, envp, &value,
                                      &present, error, sizeof error),
                 0, "%s", error);
    cr_assert_not(present);
    cr_assert(isnan(value));

    present = true;
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, 0, NULL, NULL, &value,
                                      &present, error, sizeof error),
                 0, "%s", error);
    cr_assert_not(present);
}

Test(injection_read, environment_first_entry_wins_as_getenv)
{
    char *envp[] = {"LR=0.5", "LR=0.25", NULL};
    struct injection_target target = env_target("LR");
    char error[256] = "";
    double value = 0;
    bool present = false;
    cr_assert_eq(injection_read_value(&target, INJECTION_LEARNING_RATE, 0, NULL, envp,
                                      &value, &present, error, sizeof error),
                 0, "%s", error);
    cr_assert_eq(value, 0.5);
}

Test(injection_read, environment_bad_value_message)
{
    char *envp[] = {"BATCH_SIZE=lots", NULL};
    char *empty[] = {"BATCH_SIZE=", NULL};
    char *zero[] = {"BATCH_SIZE=0", NULL};
    struct injection_target target = env_target("BATCH_SIZE");
    char error[512] = "";
    expect_read_error(&target, INJECTION_BATCH_SIZE, 0, NULL, envp, error, sizeof error);
    cr_assert(strstr(error, "ADAPTDL_BSZ_ARG (env:BATCH_SIZE)") != NULL, "%s", error);
    cr_assert(strstr(error, "\"lots\"") != NULL, "%s", error);
    cr_assert(strstr(error, "environment") != NULL, "%s", error);
    cr_assert(strstr(error, "accepted: a positive decimal integer") != NULL, "%s", error);

    expect_read_error(&target, INJECTION_BATCH_SIZE, 0, NULL, empty, error, sizeof error);
    expect_read_error(&target, INJECTION_BATCH_SIZE, 0, NULL, zero, error, sizeof error);
}

Test(injection_read, error_buffer_may_be_absent_or_tiny)
{
    char *argv[] = {"trainer", "--batch-size", "x", NULL};
    struct injection_target target = argv_target("--batch-size");
    char tiny[8];
    double value;
    bool present;
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, ARGC(argv), argv, NULL,
                                      &value, &present, NULL, 0),
                 -1);
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, ARGC(argv), argv, NULL,
                                      &value, &present, tiny, sizeof tiny),
                 -1);
    cr_assert_eq(strlen(tiny), sizeof tiny - 1);
}

/* --- rewriting argv ---------------------------------------------------------- */

Test(injection_rewrite_argv, long_flag_with_separate_value)
{
    char *argv[] = {"trainer", "--epochs", "3", "--batch-size", "32", "data.bin", NULL};
    static const char *const expected[] = {"trainer", "--epochs", "3", "--batch-size", "64",
                                           "data.bin", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "64", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    /* unchanged entries are the originals; the original array is untouched */
    cr_assert_eq(new_argv[0], argv[0]);
    cr_assert_eq(new_argv[3], argv[3]);
    cr_assert_eq(new_argv[5], argv[5]);
    cr_assert_neq(new_argv[4], argv[4]);
    cr_assert_str_eq(argv[4], "32");
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, long_flag_with_equals)
{
    char *argv[] = {"trainer", "--batch-size=32", "x", NULL};
    static const char *const expected[] = {"trainer", "--batch-size=64", "x", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "64", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    cr_assert_str_eq(argv[1], "--batch-size=32");
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, short_flag_forms)
{
    char *argv[] = {"trainer", "-b", "32", "-b32", "-b=32", NULL};
    static const char *const expected[] = {"trainer", "-b", "1024", "-b1024", "-b=1024", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("-b", ARGC(argv), argv, "1024", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, every_occurrence_is_replaced)
{
    char *argv[] = {"trainer", "--batch-size", "16", "--batch-size=32", "--batch-size", "8",
                    NULL};
    static const char *const expected[] = {"trainer", "--batch-size", "96", "--batch-size=96",
                                           "--batch-size", "96", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "96", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, absent_flag_is_inserted_after_the_program)
{
    char *argv[] = {"trainer", "--epochs", "3", "data.bin", NULL};
    static const char *const expected[] = {"trainer", "--batch-size", "64", "--epochs", "3",
                                           "data.bin", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "64", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    cr_assert_eq(new_argv[3], argv[1]);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, inserted_with_program_name_only)
{
    char *argv[] = {"trainer", NULL};
    static const char *const expected[] = {"trainer", "-b", "64", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("-b", ARGC(argv), argv, "64", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, after_end_of_options_is_left_alone)
{
    char *argv[] = {"trainer", "--batch-size", "16", "--", "--batch-size", "32", NULL};
    static const char *const expected[] = {"trainer", "--batch-size", "64", "--",
                                           "--batch-size", "32", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "64", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    cr_assert_eq(new_argv[5], argv[5]);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, inserted_before_end_of_options)
{
    char *argv[] = {"trainer", "--", "--batch-size", "32", NULL};
    static const char *const expected[] = {"trainer", "--batch-size", "64", "--",
                                           "--batch-size", "32", NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "64", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, lookalike_flags_are_left_alone)
{
    char *argv[] = {"trainer", "-bias", "--b", "-bs", "4", NULL};
    static const char *const expected[] = {"trainer", "-b", "64", "-bias", "--b", "-bs", "4",
                                           NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("-b", ARGC(argv), argv, "64", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, value_of_any_length)
{
    char *argv[] = {"trainer", "--lr=0.1", "-l", "0.1", NULL};
    static const char *const expected[] = {"trainer", "--lr=0.00141421356", "-l", "0.1", NULL};
    struct injection_target target = argv_target("--lr");
    char error[256] = "";
    char **new_argv = NULL;
    int new_argc = 0;
    cr_assert_eq(injection_rewrite_argv(&target, INJECTION_LEARNING_RATE, ARGC(argv), argv,
                                        "0.00141421356", &new_argc, &new_argv, error,
                                        sizeof error),
                 0, "%s", error);
    expect_argv(new_argv, new_argc, expected);
    injection_free_argv(new_argv);

    char **shorter = rewrite_or_fail("--lr", ARGC(argv), argv, "1", &new_argc);
    cr_assert_str_eq(shorter[1], "--lr=1");
    injection_free_argv(shorter);
}

Test(injection_rewrite_argv, rewritten_value_reads_back)
{
    char *argv[] = {"trainer", "-b32", "--", "-b", "7", NULL};
    struct injection_target target = argv_target("-b");
    char error[256] = "";
    int new_argc;
    double value = 0;
    bool present = false;
    char **new_argv = rewrite_or_fail("-b", ARGC(argv), argv, "256", &new_argc);
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, new_argc, new_argv, NULL,
                                      &value, &present, error, sizeof error),
                 0, "%s", error);
    cr_assert(present);
    cr_assert_eq(value, 256.0);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, inserted_value_reads_back)
{
    char *argv[] = {"trainer", "x", NULL};
    struct injection_target target = argv_target("--batch-size");
    char error[256] = "";
    int new_argc;
    double value = 0;
    bool present = false;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "12", &new_argc);
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, new_argc, new_argv, NULL,
                                      &value, &present, error, sizeof error),
                 0, "%s", error);
    cr_assert(present);
    cr_assert_eq(value, 12.0);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, flag_without_value_is_an_error)
{
    char *argv[] = {"trainer", "--batch-size", "16", "--batch-size", NULL};
    struct injection_target target = argv_target("--batch-size");
    char error[512] = "";
    char **new_argv = (char **)argv;
    int new_argc = 99;
    cr_assert_eq(injection_rewrite_argv(&target, INJECTION_BATCH_SIZE, ARGC(argv), argv, "64",
                                        &new_argc, &new_argv, error, sizeof error),
                 -1);
    cr_assert_null(new_argv);
    cr_assert_eq(new_argc, 0);
    cr_assert(strstr(error, "ADAPTDL_BSZ_ARG") != NULL, "%s", error);
    cr_assert(strstr(error, "argv[3]") != NULL, "%s", error);
    cr_assert(strstr(error, "no value") != NULL, "%s", error);
    cr_assert_null(strchr(error, '\n'));
}

Test(injection_rewrite_argv, old_values_are_not_checked)
{
    char *argv[] = {"trainer", "--batch-size=", "--batch-size", "lots", NULL};
    static const char *const expected[] = {"trainer", "--batch-size=8", "--batch-size", "8",
                                           NULL};
    int new_argc;
    char **new_argv = rewrite_or_fail("--batch-size", ARGC(argv), argv, "8", &new_argc);
    expect_argv(new_argv, new_argc, expected);
    injection_free_argv(new_argv);
}

Test(injection_rewrite_argv, refused_inputs)
{
    char *argv[] = {"trainer", NULL};
    struct injection_target argv_flag = argv_target("--batch-size");
    struct injection_target env_name = env_target("BATCH_SIZE");
    struct injection_target none = {INJECT_NONE, NULL};
    char error[256] = "";
    char **new_argv;
    int new_argc;

    cr_assert_eq(injection_rewrite_argv(&env_name, INJECTION_BATCH_SIZE, ARGC(argv), argv,
                                        "8", &new_argc, &new_argv, error, sizeof error),
                 -1);
    cr_assert(strstr(error, "env:BATCH_SIZE") != NULL, "%s", error);
    cr_assert_null(new_argv);
    cr_assert_eq(injection_rewrite_argv(&none, INJECTION_BATCH_SIZE, ARGC(argv), argv, "8",
                                        &new_argc, &new_argv, error, sizeof error),
                 -1);
    cr_assert_eq(injection_rewrite_argv(NULL, INJECTION_BATCH_SIZE, ARGC(argv), argv, "8",
                                        &new_argc, &new_argv, error, sizeof error),
                 -1);
    cr_assert_eq(injection_rewrite_argv(&argv_flag, INJECTION_BATCH_SIZE, 0, argv, "8",
                                        &new_argc, &new_argv, error, sizeof error),
                 -1);
    cr_assert(strstr(error, "program name") != NULL, "%s", error);
    cr_assert_eq(injection_rewrite_argv(&argv_flag, INJECTION_BATCH_SIZE, ARGC(argv), argv,
                                        NULL, &new_argc, &new_argv, error, sizeof error),
                 -1);
    cr_assert_null(new_argv);
}

/* --- rewriting the environment ----------------------------------------------- */

static void expect_environment(char **actual, const char *const expected[])
{
    int i = 0;
    for (; expected[i] != NULL; i++) {
        cr_assert_not_null(actual[i], "entry %d missing", i);
        cr_assert_str_eq(actual[i], expected[i], "entry %d", i);
    }
    cr_assert_null(actual[i], "more entries than expected");
}

Test(injection_rewrite_environment, replaces_the_variable)
{
    char *envp[] = {"HOME=/root", "BATCH_SIZE=32", "PATH=/bin", NULL};
    static const char *const expected[] = {"HOME=/root", "BATCH_SIZE=64", "PATH=/bin", NULL};
    struct injection_target target = env_target("BATCH_SIZE");
    char error[256] = "";
    char **new_envp = NULL;
    cr_assert_eq(injection_rewrite_environment(&target, INJECTION_BATCH_SIZE, envp, "64",
                                               &new_envp, error, sizeof error),
                 0, "%s", error);
    expect_environment(new_envp, expected);
    cr_assert_eq(new_envp[0], envp[0]);
    cr_assert_eq(new_envp[2], envp[2]);
    cr_assert_str_eq(envp[1], "BATCH_SIZE=32");
    injection_free_environment(new_envp);
}

Test(injection_rewrite_environment, appends_when_absent)
{
    char *envp[] = {"HOME=/root", "BATCH_SIZE_EVAL=8", "XBATCH_SIZE=1", NULL};
    static const char *const expected[] = {"HOME=/root", "BATCH_SIZE_EVAL=8", "XBATCH_SIZE=1",
                                           "BATCH_SIZE=64", NULL};
    struct injection_target target = env_target("BATCH_SIZE");
    char error[256] = "";
    char **new_envp = NULL;
    cr_assert_eq(injection_rewrite_environment(&target, INJECTION_BATCH_SIZE, envp, "64",
                                               &new_envp, error, sizeof error),
                 0, "%s", error);
    expect_environment(new_envp, expected);
    injection_free_environment(new_envp);
}

Test(injection_rewrite_environment, empty_or_missing_environment)
{
    char *empty[] = {NULL};
    static const char *const expected[] = {"LR=0.2", NULL};
    struct injection_target target = env_target("LR");
    char error[256] = "";
    char **new_envp = NULL;
    cr_assert_eq(injection_rewrite_environment(&target, INJECTION_LEARNING_RATE, empty, "0.2",
                                               &new_envp, error, sizeof error),
                 0, "%s", error);
    expect_environment(new_envp, expected);
    injection_free_environment(new_envp);
    cr_assert_eq(injection_rewrite_environment(&target, INJECTION_LEARNING_RATE, NULL, "0.2",
                                               &new_envp, error, sizeof error),
                 0, "%s", error);
    expect_environment(new_envp, expected);
    injection_free_environment(new_envp);
}

Test(injection_rewrite_environment, every_duplicate_is_replaced)
{
    char *envp[] = {"BATCH_SIZE=1", "A=b", "BATCH_SIZE=2", NULL};
    static const char *const expected[] = {"BATCH_SIZE=9", "A=b", "BATCH_SIZE=9", NULL};
    struct injection_target target = env_target("BATCH_SIZE");
    char error[256] = "";
    char **new_envp = NULL;
    cr_assert_eq(injection_rewrite_environment(&target, INJECTION_BATCH_SIZE, envp, "9",
                                               &new_envp, error, sizeof error),
                 0, "%s", error);
    expect_environment(new_envp, expected);
    injection_free_environment(new_envp);
}

Test(injection_rewrite_environment, rewritten_value_reads_back)
{
    char *envp[] = {"BATCH_SIZE=oops", NULL};
    struct injection_target target = env_target("BATCH_SIZE");
    char error[256] = "";
    char **new_envp = NULL;
    double value = 0;
    bool present = false;
    cr_assert_eq(injection_rewrite_environment(&target, INJECTION_BATCH_SIZE, envp, "48",
                                               &new_envp, error, sizeof error),
                 0, "%s", error);
    cr_assert_eq(injection_read_value(&target, INJECTION_BATCH_SIZE, 0, NULL, new_envp, &value,
                                      &present, error, sizeof error),
                 0, "%s", error);
    cr_assert(present);
    cr_assert_eq(value, 48.0);
    injection_free_environment(new_envp);
}

Test(injection_rewrite_environment, refused_inputs)
{
    char *envp[] = {NULL};
    struct injection_target flag = argv_target("--lr");
    struct injection_target name = env_target("LR");
    char error[256] = "";
    char **new_envp = (char **)envp;
    cr_assert_eq(injection_rewrite_environment(&flag, INJECTION_LEARNING_RATE, envp, "8",
                                               &new_envp, error, sizeof error),
                 -1);
    cr_assert_null(new_envp);
    cr_assert(strstr(error, "ADAPTDL_LR_ARG (argv:--lr)") != NULL, "%s", error);
    cr_assert_eq(injection_rewrite_environment(&name, INJECTION_LEARNING_RATE, envp, NULL,
                                               &new_envp, error, sizeof error),
                 -1);
    cr_assert_null(new_envp);
}

/* --- formatting --------------------------------------------------------------- */

static void expect_formatted(double value, bool integer, const char *expected)
{
    char out[INJECTION_NUMBER_SIZE];
    injection_format_number(value, integer, out, sizeof out);
    cr_assert_str_eq(out, expected, "%.17g formatted", value);
}

Test(injection_format, batch_sizes_as_integers)
{
    expect_formatted(64.0, true, "64");
    expect_formatted(1.0, true, "1");
    expect_formatted(63.6, true, "64");
    expect_formatted(2.5, true, "3");
    expect_formatted(3.5, true, "4");
    expect_formatted(1099511627776.0, true, "1099511627776");
    expect_formatted(9007199254740992.0, true, "9007199254740992");
    expect_formatted(-0.0, true, "0");
    expect_formatted(0.2, true, "0");
}

Test(injection_format, learning_rates_with_nine_significant_digits)
{
    expect_formatted(0.1, false, "0.1");
    expect_formatted(0.1 * 2.0, false, "0.2");
    expect_formatted(0.1 * 3.0, false, "0.3");
    expect_formatted(0.001 * sqrt(2.0), false, "0.00141421356");
    expect_formatted(1e-5, false, "1e-05");
    expect_formatted(1.5e-4, false, "0.00015");
    expect_formatted(3.0, false, "3");
    expect_formatted(-0.0, false, "0");
    expect_formatted(123456789012.0, false, "1.23456789e+11");
}

Test(injection_format, learning_rate_reads_back)
{
    static const double rates[] = {0.1, 3e-4, 0.0123456789123, 1.0 / 3.0, 2.5e-7, 42.0};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
        char out[INJECTION_NUMBER_SIZE];
        double rate = rates[i] * 1.7;
        int rc;
        injection_format_number(rate, false, out, sizeof out);
        double back = read_learning_rate(out, &rc);
        cr_assert_eq(rc, 0, "\"%s\" not accepted back", out);
        cr_assert(fabs(back - rate) <= 5e-9 * rate, "%s", out);
    }
}

Test(injection_format, batch_size_reads_back)
{
    char out[INJECTION_NUMBER_SIZE];
    bool present = false;
    injection_format_number(384.0, true, out, sizeof out);
    char *argv[] = {"trainer", "-b", out, NULL};
    cr_assert_eq(read_batch_size_or_fail("-b", ARGC(argv), argv, &present), 384.0);
}

Test(injection_format, small_buffers_are_terminated)
{
    char out[3] = "zz";
    injection_format_number(1234.0, true, out, sizeof out);
    cr_assert_str_eq(out, "12");
    injection_format_number(1234.0, true, out, 0); /* writes nothing */
    cr_assert_str_eq(out, "12");
    injection_format_number(1234.0, true, NULL, 0);
}

Test(injection_names, variable_names)
{
    cr_assert_str_eq(injection_variable_name(INJECTION_BATCH_SIZE), "ADAPTDL_BSZ_ARG");
    cr_assert_str_eq(injection_variable_name(INJECTION_LEARNING_RATE), "ADAPTDL_LR_ARG");
}
