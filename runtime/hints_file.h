/* hints_file.h - reading ADAPTDL_HINTS_FILE (adaptshim(7) "Decisions"): the goodput
 * table a launcher or scheduler chooses the replica count from.
 *
 * Rank 0 writes the file at each batch-size decision (hints_write.c) as one
 * JSON object,
 *
 *   {"type": "hints", "time": T, "perf_params": {...}, ...,
 *    "max_profiled_replicas": 1, "goodput_by_replicas": {"1": 1781.0, "2": 2374.6}}
 *
 * but the reader does not rely on that layout: it parses any JSON object
 * (members in any order, any spacing, nested values it skips), so that a
 * file written by a scheduler or edited by hand is read too.  What it needs
 * is a member "goodput_by_replicas" holding an object whose keys are
 * replica counts ("1" .. "64") and whose values are numbers (or null: no
 * prediction).  Anything else is an error with one line naming what was
 * wrong and where. */
#ifndef ADAPTSHIM_HINTS_FILE_H
#define ADAPTSHIM_HINTS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "batch_decision.h"
#include "metrics.h"
#include "replica_choice.h"

struct replica_hints {
    struct replica_goodputs goodputs;
    uint32_t max_profiled_replicas;   /* 0 when the member is absent */
};

/* Parses `length` bytes of text.  Returns 0 with *hints filled, or -1 with
 * a one-line message such as "byte 57: expected a number or null as the
 * goodput of 2 replicas" (hints left with every goodput NAN). */
int hints_parse(const char *text, size_t length, struct replica_hints *hints, char *error,
                size_t error_size);

/* The fitted model as the hints and the metrics' decision event give it:
 * "perf_params" (the seven parameters), "grad_sqr" and "grad_var". */
void hints_add_fitted_model(struct json_line *line, const struct perf_params *perf,
                            double grad_sqr, double grad_var);

/* The whole hints line of one decision: its fitted model, its batch limits,
 * "max_profiled_replicas" and the predicted "goodput_by_replicas". */
void hints_format(struct json_line *line, double time_seconds,
                  const struct batch_decision_inputs *inputs,
                  const struct batch_decision *decision, uint32_t max_replicas_profiled);

/* Replaces the file at `path` with `line` (a temporary file beside it, then
 * a rename): 0, or -1 with a one-line message, the old file left whole. */
int hints_write(const char *path, const struct json_line *line, char *error, size_t error_size);

#endif
