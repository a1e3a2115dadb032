/* decision_text.h - one batch-size decision as one line a person can read
 * (what ADAPTDL_LOG=info prints for each decision, adaptshim(7) "Logging"): the current
 * and the chosen batch, the predicted speedup, the payback time, and why
 * the job restarts or keeps its batch.
 *
 *   batch-size decision: global 8 (4 on each of 2 replicas) -> 90 (45 each),
 *   predicted speedup 1.375x, payback 110.0 s (restart cost 30.0 s):
 *   restarting: the speedup is above ADAPTDL_SPEEDUP 1.05 and the payback
 *   within ADAPTDL_PAYBACK_SECONDS 600
 *
 * (one line in the log).  The metrics file's "decision" event carries the
 * same numbers for programs; this line is for people. */
#ifndef ADAPTSHIM_DECISION_TEXT_H
#define ADAPTSHIM_DECISION_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "batch_decision.h"

/* Writes the line (no newline) into `text` and returns its length, as
 * snprintf does: a line longer than `size` is cut, always NUL-terminated.
 * `restart_requested` is what the job does: the decision's own verdict, or
 * false when the caller overrode it (a restart that would pay off, but
 * without ADAPTDL_SAVE no checkpoint can carry the job across it). */
size_t batch_decision_describe(const struct batch_decision_inputs *inputs,
                               const struct batch_decision *decision, bool restart_requested,
                               char *text, size_t size);

#endif
