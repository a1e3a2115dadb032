/* test_plot.c - adaptdl-plot draws the metrics files of a real adaptive job
 * (two ranks, restarted for new batch sizes) into one PNG and prints its
 * path; every run's "start" metrics event carries the injected batch size
 * and learning rate it plots; bad input (no file, a missing file, a
 * directory, a file without step lines, no gnuplot) is one line on stderr
 * and a non-zero status; `make install` puts the plotter in bin/. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define DIM 4

/* harness_build_path returns a buffer the next call overwrites: a copy. */
static char *plot_path(void)
{
    return strdup(harness_build_path("adaptdl-plot"));
}

/* The first line of `text` that contains both needles, as a new string. */
static char *line_with(const char *text, const char *first, const char *second)
{
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t length = end ? (size_t)(end - line) : strlen(line);
        char *copy = strndup(line, length);
        if (strstr(copy, first) && strstr(copy, second))
            return copy;
        free(copy);
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

/* Whether `directory` holds an entry whose name starts with `prefix` (a
 * temporary directory the plotter should have removed). */
static bool has_entry_starting_with(const char *directory, const char *prefix)
{
    DIR *listing = opendir(directory);
    cr_assert_not_null(listing, "cannot list %s", directory);
    bool found = false;
    for (struct dirent *entry; (entry = readdir(listing)) != NULL;)
        if (strncmp(entry->d_name, prefix, strlen(prefix)) == 0)
            found = true;
    closedir(listing);
    return found;
}

static void expect_png(const char *path)
{
    size_t size = 0;
    char *bytes = harness_read_file(path, &size);
    cr_assert_not_null(bytes, "no PNG at %s", path);
    static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    cr_expect(size > sizeof signature && memcmp(bytes, signature, sizeof signature) == 0,
              "%s does not start with the PNG signature", path);
    free(bytes);
}

/* The adaptive job of the launcher tests, with a metrics file per rank:
 * the wrapper relaunches it at each exit with status 143 until it ends. */
Test(plot, a_restarted_adaptive_job_is_drawn_into_one_png, .timeout = 300)
{
    struct harness_wrapped_job wrapped;
    harness_wrapped_job_init(&wrapped, 4000, DIM);
    char metrics_setting[700];
    snprintf(metrics_setting, sizeof metrics_setting, "ADAPTDL_METRICS_FILE=%s/metrics.%%r",
             wrapped.job.directory);
    char *environment[] = {metrics_setting, "ADAPTDL_BSZ_ARG=argv:--batch-size",
                           "ADAPTDL_BATCH_SIZE=8", "ADAPTDL_MAX_BATCH_SIZE=256",
                           "ADAPTDL_DECIDE_SECONDS=0.3", "ADAPTDL_PAYBACK_SECONDS=100000",
                           "ADAPTDL_LR_ARG=argv:--lr", "ADAPTDL_LR_RULE=linear",
                           "ADAPTDL_LOG=info", NULL};
    char *log = harness_run_wrapped_sgd_mpi(&wrapped, "2", "6", "200", environment);
    size_t restarts = harness_count_occurrences(log, "adaptdl-wrap: the trainer asked for a "
                                                     "restart");
    cr_assert_gt(restarts, 0, "the job changed its batch size through a restart: %s", log);

    /* every run of every rank starts with what it was given */
    char *rank0 = harness_path_in(wrapped.job.directory, "metrics.0");
    char *rank1 = harness_path_in(wrapped.job.directory, "metrics.1");
    char *text = harness_read_output(rank0);
    cr_expect_eq(harness_count_occurrences(text, "{\"type\": \"start\", "), restarts + 1,
                 "one start event per run: %s", text);
    char *first = line_with(text, "{\"type\": \"start\", ", "\"restarts\": 0, ");
    cr_assert_not_null(first, "the first run's start event: %s", text);
    static const char *const first_fields[] = {
        "\"replicas\": 2, ", "\"rank\": 0, ", "\"local_bsz\": 4, ", "\"global_bsz\": 8, ",
        "\"initial_global_bsz\": 8, ", "\"lr\": 0.01, ", "\"trainer_lr\": 0.01, ",
        "\"lr_factor\": 1, ", "\"lr_rule\": \"linear\"}"};
    for (size_t i = 0; i < sizeof first_fields / sizeof first_fields[0]; i++)
        cr_expect(strstr(first, first_fields[i]) != NULL, "%s in %s", first_fields[i], first);
    char *second = line_with(text, "{\"type\": \"start\", ", "\"restarts\": 1, ");
    cr_assert_not_null(second, "the relaunch's start event: %s", text);
    cr_expect(strstr(second, "\"lr\": 0.01, ") == NULL,
              "the relaunch's larger batch came with a rescaled learning rate: %s", second);

    /* the plot of both ranks' files */
    char *png = harness_path_in(wrapped.job.directory, "job.png");
    char *script = harness_path_in(wrapped.job.directory, "job.gp");
    char tmpdir_setting[700];
    snprintf(tmpdir_setting, sizeof tmpdir_setting, "TMPDIR=%s", wrapped.job.directory);
    char *plot_argv[] = {plot_path(), "-o", png, "--script", script, rank0, rank1, NULL};
    char *plot_environment[] = {tmpdir_setting, NULL};
    struct run_result result;
    harness_run(&result, plot_argv, plot_environment, false, 120);
    cr_assert_eq(result.status, 0, "stdout %s\nstderr %s", result.out, result.err);
    char expected_out[800];
    snprintf(expected_out, sizeof expected_out, "%s\n", png);
    cr_expect_str_eq(result.out, expected_out, "it prints the PNG's path");
    cr_expect_str_eq(result.err, "", "nothing on stderr");
    expect_png(png);
    cr_expect(!has_entry_starting_with(wrapped.job.directory, "adaptdl-plot."),
              "its temporary directory is gone");

    /* what it drew: a dashed line for each restart, the learning rate of
     * every run, the batch sizes of the step lines */
    char *drawn = harness_read_output(script);
    cr_expect_eq(harness_count_occurrences(drawn, "set arrow from "), restarts,
                 "one line per restart: %s", drawn);
    char restarts_title[64];
    snprintf(restarts_title, sizeof restarts_title, "%zu restart(s)", restarts);
    cr_expect(strstr(drawn, restarts_title) != NULL, "%s", drawn);
    cr_expect(strstr(drawn, "$lr << EOD\n") != NULL && strstr(drawn, " 0.01\n") != NULL,
              "the first run's learning rate: %s", drawn);
    cr_expect(strstr(drawn, "no learning rate was injected") == NULL, "%s", drawn);
    cr_expect(strstr(drawn, "title \"global batch\"") != NULL, "%s", drawn);
    cr_expect(strstr(drawn, "title \"goodput\"") != NULL, "goodput after a decision: %s",
              drawn);

    free(drawn);
    run_result_free(&result);
    free(second);
    free(first);
    free(text);
    free(log);
    harness_remove_temp_dir(wrapped.job.directory);
}

/* One bad input: the plotter exits with `status`, one line on stderr that
 * contains `needle`, and no PNG. */
static void expect_refusal(char *const argv[], char *const environment[], int status,
                           const char *needle, const char *png)
{
    struct run_result result;
    harness_run(&result, argv, environment, false, 60);
    cr_expect_eq(result.status, status, "%s: status %d, stderr %s", needle, result.status,
                 result.err);
    cr_expect_str_eq(result.out, "", "%s: nothing on stdout", needle);
    cr_expect(strncmp(result.err, "adaptdl-plot: ", 14) == 0 && strstr(result.err, needle) &&
                  harness_count_occurrences(result.err, "\n") == 1,
              "one line naming \"%s\": %s", needle, result.err);
    struct stat status_buffer;
    cr_expect(stat(png, &status_buffer) != 0, "%s: no PNG was written", needle);
    run_result_free(&result);
}

Test(plot, bad_inputs_are_one_line_and_a_non_zero_status)
{
    const char *directory = harness_temp_dir();
    char *png = harness_path_in(directory, "out.png");
    char *missing = harness_path_in(directory, "no-such-metrics");
    char *empty = harness_path_in(directory, "empty");
    char *no_steps = harness_path_in(directory, "no-steps");
    char *good = harness_path_in(directory, "good");
    cr_assert_eq(harness_write_file(empty, "", 0), 0);
    const char *events = "{\"type\": \"start\", \"time\": 100, \"restarts\": 0}\n"
                         "{\"type\": \"exit\", \"time\": 101, \"status\": 0, \"why\": \"x\"}\n";
    cr_assert_eq(harness_write_file(no_steps, events, strlen(events)), 0);
    const char *steps = "{\"type\": \"step\", \"time\": 100, \"step\": 1, \"replicas\": 1, "
                        "\"local_bsz\": 8, \"global_bsz\": 8, \"noise_scale\": null}\n";
    cr_assert_eq(harness_write_file(good, steps, strlen(steps)), 0);
    char *plot = plot_path();
    char *none[] = {NULL};

    char *no_argument[] = {plot, "-o", png, NULL};
    expect_refusal(no_argument, none, 2, "no metrics file given", png);
    char *unknown_option[] = {plot, "--colour", good, NULL};
    expect_refusal(unknown_option, none, 2, "unknown option --colour", png);
    char *missing_file[] = {plot, "-o", png, good, missing, NULL};
    expect_refusal(missing_file, none, 2, "no-such-metrics: no such file", png);
    char *a_directory[] = {plot, "-o", png, (char *)directory, NULL};
    expect_refusal(a_directory, none, 2, "not a regular file", png);
    char *an_empty_file[] = {plot, "-o", png, empty, NULL};
    expect_refusal(an_empty_file, none, 2, "empty: no \"step\" line", png);
    char *only_events[] = {plot, "-o", png, good, no_steps, NULL};
    expect_refusal(only_events, none, 2, "no-steps: no \"step\" line", png);
    char *nested = harness_path_in(missing, "out.png");
    char *no_directory[] = {plot, "-o", nested, good, NULL};
    expect_refusal(no_directory, none, 2, "cannot write it: no directory", nested);

    char gnuplot_setting[700];
    snprintf(gnuplot_setting, sizeof gnuplot_setting, "GNUPLOT=%s/no-gnuplot", directory);
    char *without_gnuplot[] = {gnuplot_setting, NULL};
    char *plot_good[] = {plot, "-o", png, good, NULL};
    expect_refusal(plot_good, without_gnuplot, 1, "install gnuplot (Debian: apt-get install "
                                                  "gnuplot-nox)", png);

    /* the same file draws once gnuplot is there: the refusals were about
     * their input alone (one step line, no restart, no decision) */
    struct run_result result;
    harness_run(&result, plot_good, none, false, 60);
    cr_expect_eq(result.status, 0, "stderr %s", result.err);
    expect_png(png);
    run_result_free(&result);
    free(nested);
    harness_remove_temp_dir(directory);
}

/* `make install` puts the plotter beside the launcher, and it runs from
 * there. */
Test(plot, make_install_puts_it_in_bin, .timeout = 300)
{
    const char *directory = harness_temp_dir();
    char *commands = NULL;
    if (asprintf(&commands, "'%s/prefix/bin/adaptdl-plot' --help\n", directory) < 0)
        abort();
    struct run_result result;
    harness_run_after_install(&result, directory, commands);
    cr_expect(strstr(result.out, "usage: adaptdl-plot ") != NULL, "%s", result.out);
    run_result_free(&result);
    free(commands);
    harness_remove_temp_dir(directory);
}
