/* test_hints_write.c - building and writing ADAPTDL_HINTS_FILE
 * (runtime/hints_write.c): what the writer writes is what the reader reads,
 * the file is replaced whole, and a file that cannot be written gets one
 * line and leaves nothing behind. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hints_file.h"
#include "unit_helpers.h"

static const struct perf_params hints_perf = {
    .alpha_c = 0.01, .beta_c = 0.001, .alpha_n = 0.02, .beta_n = 0.01,
    .alpha_r = 0.005, .beta_r = 0.002, .gamma = 1.5,
};

/* The inputs of the decisions these tests write (each test takes a copy). */
static const struct batch_decision_inputs hints_inputs = {
    .grad_sqr = 1.0, .grad_var = 10.0, .nodes = 1, .replicas = 2,
    .current_local_bsz = 16, .initial_global_bsz = 32, .max_global_bsz = 1024,
};

static size_t hints_read_file(const char *path, char *text, size_t size)
{
    FILE *file = fopen(path, "r");
    cr_assert_not_null(file, "%s", path);
    size_t length = fread(text, 1, size - 1, file);
    fclose(file);
    text[length] = '\0';
    return length;
}

Test(hints_write, the_reader_reads_the_goodput_table_the_writer_predicts)
{
    struct batch_decision_inputs inputs = hints_inputs;
    struct batch_decision decision = {.valid = true, .perf = hints_perf};
    struct json_line line;
    hints_format(&line, 1796307514.5, &inputs, &decision, 2);
    cr_assert(json_line_is_writable(&line));

    struct goodput_model model = {
        .perf = hints_perf,
        .grad = {.sqr = inputs.grad_sqr, .var = inputs.grad_var},
        .initial_global_bsz = inputs.initial_global_bsz,
    };
    struct replica_goodputs expected;
    replica_goodputs_predict(&model, 1, 2, 2, 1024, 0, 0, &expected);

    struct replica_hints hints;
    char error[512] = "";
    cr_assert_eq(hints_parse(line.text, line.length, &hints, error, sizeof error), 0, "%s",
                 error);
    cr_expect_eq(hints.max_profiled_replicas, 2);
    size_t predicted = 0;
    for (uint32_t replicas = 1; replicas <= REPLICA_CHOICE_MAX_REPLICAS; replicas++) {
        double want = expected.goodput[replicas], got = hints.goodputs.goodput[replicas];
        if (isnan(want)) {
            cr_expect(isnan(got), "%u replicas: no prediction, read %g", replicas, got);
            continue;
        }
        predicted++;
        cr_expect(fabs(got - want) <= 1e-9 * fabs(want), "%u replicas: %g, read %g", replicas,
                  want, got);
    }
    cr_expect_eq(predicted, 4, "up to twice the most profiled replica count");
    cr_expect_not_null(strstr(line.text, "\"perf_params\": {\"alpha_c\": 0.01"), "%s", line.text);
    cr_expect_not_null(strstr(line.text, "\"grad_var\": 10"), "%s", line.text);
}

/* A fresh directory, and the path of `name` in it, for a hints file. */
struct hints_target {
    char directory[64];
    char path[256];
};

static void hints_target_make(struct hints_target *target, const char *name)
{
    snprintf(target->directory, sizeof target->directory, "/tmp/adaptshim-hints-XXXXXX");
    cr_assert_not_null(mkdtemp(target->directory));
    snprintf(target->path, sizeof target->path, "%s/%s", target->directory, name);
}

/* The hints line of a decision on hints_inputs with a gradient variance
 * of grad_var, at time_seconds, with max_replicas_profiled replicas
 * profiled. */
static void format_hints(struct json_line *line, double time_seconds, double grad_var,
                         uint32_t max_replicas_profiled)
{
    struct batch_decision_inputs inputs = hints_inputs;
    inputs.grad_var = grad_var;
    struct batch_decision decision = {.valid = true, .perf = hints_perf};
    hints_format(line, time_seconds, &inputs, &decision, max_replicas_profiled);
}

Test(hints_write, the_file_is_replaced_whole_and_no_temporary_stays)
{
    struct json_line first, second;
    struct hints_target target;
    hints_target_make(&target, "hints.json");
    format_hints(&first, 1.0, 10.0, 1);
    format_hints(&second, 2.0, 20.0, 2);
    char error[512] = "";
    cr_assert_eq(hints_write(target.path, &first, error, sizeof error), 0, "%s", error);
    cr_assert_eq(hints_write(target.path, &second, error, sizeof error), 0, "%s", error);
    char text[8192];
    size_t length = hints_read_file(target.path, text, sizeof text);
    cr_expect_eq(length, second.length);
    cr_expect_eq(memcmp(text, second.text, second.length), 0, "the second write, whole");
    cr_expect_eq(unit_directory_entry_count(target.directory), 1,
                 "no temporary file left beside it");
    unlink(target.path);
    rmdir(target.directory);
}

Test(hints_write, a_path_that_cannot_be_written_gets_one_line)
{
    struct hints_target target;
    hints_target_make(&target, "missing/hints.json");
    struct json_line line;
    format_hints(&line, 1.0, 10.0, 1);
    char error[512] = "";
    cr_expect_eq(hints_write(target.path, &line, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "ADAPTDL_HINTS_FILE: cannot write"), "%s", error);
    cr_expect_not_null(strstr(error, "missing/hints.json"), "%s", error);
    cr_expect_null(strchr(error, '\n'), "one line");
    cr_expect_eq(unit_directory_entry_count(target.directory), 0);
    rmdir(target.directory);
}

Test(hints_write, a_line_that_overflowed_is_not_written)
{
    struct hints_target target;
    hints_target_make(&target, "hints.json");
    struct json_line line;
    json_line_begin(&line, "hints", 1.0);
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "member_%d", i);
        json_line_add_double(&line, key, i);
    }
    json_line_end(&line);
    cr_assert_not(json_line_is_writable(&line));
    char error[512] = "";
    cr_expect_eq(hints_write(target.path, &line, error, sizeof error), -1);
    cr_expect_not_null(strstr(error, "do not fit"), "%s", error);
    cr_expect_eq(access(target.path, F_OK), -1, "nothing written");
    rmdir(target.directory);
}

Test(hints_write, the_fitted_model_is_an_object_of_seven_parameters_then_the_statistics)
{
    struct json_line line;
    json_line_begin(&line, "decision", 1.0);
    hints_add_fitted_model(&line, &hints_perf, 1.0, 10.0);
    json_line_end(&line);
    cr_assert(json_line_is_writable(&line));
    const char *names[] = {"alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma"};
    const char *object = strstr(line.text, "\"perf_params\": {");
    cr_assert_not_null(object, "%s", line.text);
    const char *close = strchr(object, '}');
    cr_assert_not_null(close, "%s", line.text);
    const char *previous = object;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char key[32];
        snprintf(key, sizeof key, "\"%s\": ", names[i]);
        const char *at = strstr(object, key);
        cr_assert_not_null(at, "%s missing: %s", names[i], line.text);
        cr_expect(at > previous && at < close, "%s inside the object, in order: %s", names[i],
                  line.text);
        previous = at;
    }
    cr_expect_not_null(strstr(line.text, "\"gamma\": 1.5}, \"grad_sqr\": 1, \"grad_var\": 10}"),
                       "gamma last, then the statistics: %s", line.text);
}
