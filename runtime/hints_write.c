/* hints_write.c - building and writing ADAPTDL_HINTS_FILE (see hints_file.h):
 * the fitted model of rank 0's last batch-size decision and the goodput it
 * predicts for each replica count, rewritten whole at each decision.  The
 * reader beside it is hints_file.c; a test reads back what this writes. */
#include "hints_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "error_message.h"
#include "sysio.h"

void hints_add_fitted_model(struct json_line *line, const struct perf_params *perf,
                            double grad_sqr, double grad_var)
{
    static const char *const names[PERF_PARAMS_COUNT] = {"alpha_c", "beta_c", "alpha_n",
                                                         "beta_n",  "alpha_r", "beta_r",
                                                         "gamma"};
    double values[PERF_PARAMS_COUNT];
    perf_params_to_array(perf, values);
    json_line_begin_object(line, "perf_params");
    for (int i = 0; i < PERF_PARAMS_COUNT; i++)
        json_line_add_double(line, names[i], values[i]);
    json_line_end_object(line);
    json_line_add_double(line, "grad_sqr", grad_sqr);
    json_line_add_double(line, "grad_var", grad_var);
}

void hints_format(struct json_line *line, double time_seconds,
                  const struct batch_decision_inputs *inputs,
                  const struct batch_decision *decision, uint32_t max_replicas_profiled)
{
    json_line_begin(line, "hints", time_seconds);
    hints_add_fitted_model(line, &decision->perf, inputs->grad_sqr, inputs->grad_var);
    json_line_add_uint(line, "initial_global_bsz", inputs->initial_global_bsz);
    json_line_add_uint(line, "max_global_bsz", inputs->max_global_bsz);
    json_line_add_uint(line, "local_bsz_min", inputs->local_bsz_min);
    json_line_add_uint(line, "local_bsz_max", inputs->local_bsz_max);
    json_line_add_uint(line, "max_profiled_replicas", max_replicas_profiled);
    /* predicted goodput for each replica count up to twice the most profiled
     * (the table the launcher chooses the replica count from, and that the
     * shim's own replica decision computes the same way) */
    struct goodput_model model = {
        .perf = decision->perf,
        .grad = {.sqr = inputs->grad_sqr, .var = inputs->grad_var},
        .initial_global_bsz = inputs->initial_global_bsz,
    };
    struct replica_goodputs table;
    replica_goodputs_predict(&model, inputs->nodes, max_replicas_profiled, inputs->replicas,
                             inputs->max_global_bsz, inputs->local_bsz_min,
                             inputs->local_bsz_max, &table);
    json_line_begin_object(line, "goodput_by_replicas");
    for (uint32_t replicas = 1; replicas <= REPLICA_CHOICE_MAX_REPLICAS; replicas++) {
        char key[16];
        snprintf(key, sizeof key, "%u", replicas);
        if (!isnan(table.goodput[replicas]))
            json_line_add_double(line, key, table.goodput[replicas]);
    }
    json_line_end_object(line);
    json_line_end(line);
}

/* A temporary file beside `path`, then a rename onto it: a reader never
 * sees half of the hints. */
int hints_write(const char *path, const struct json_line *line, char *error, size_t error_size)
{
    if (!json_line_is_writable(line))
        return error_message(error, error_size, "ADAPTDL_HINTS_FILE: the hints for %s do not "
                             "fit in one line; not written", path);
    char temporary[4096];
    if ((size_t)snprintf(temporary, sizeof temporary, "%s.tmp.%ld", path, (long)getpid()) >=
        sizeof temporary)
        return error_message(error, error_size, "ADAPTDL_HINTS_FILE: path too long: %s", path);
    int fd = runtime_sysio.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return error_message(error, error_size, "ADAPTDL_HINTS_FILE: cannot write %s: %s",
                             temporary, strerror(errno));
    int status = sysio_write_all(fd, line->text, line->length);
    if (runtime_sysio.close(fd) != 0)
        status = -1;
    if (status != 0 || runtime_sysio.rename(temporary, path) != 0) {
        int saved = errno;
        runtime_sysio.unlink(temporary);
        return error_message(error, error_size, "ADAPTDL_HINTS_FILE: cannot write %s: %s",
                             path, strerror(saved));
    }
    return 0;
}
