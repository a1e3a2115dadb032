/* decision_text.c - a batch-size decision as one readable line (see
 * decision_text.h).
 *
 * Why a job keeps its batch is the first rule of SPEC §7 that the decision
 * does not meet, in the order a person would check them: a different batch
 * at all, then the speedup threshold, then the payback.  The rules are
 * re-read from the decision's numbers rather than taken from a code, so
 * the line stays true to batch_decide; what no rule explains (a caller's
 * veto, or a rule added later) still gets a line that says so. */
#include "decision_text.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* Appends like snprintf into a fixed buffer; `length` counts what the whole
 * line would need, so the caller can tell that it was cut. */
struct line_buffer {
    char *text;
    size_t size;
    size_t length;
};

__attribute__((format(printf, 2, 3)))
static void line_append(struct line_buffer *line, const char *format, ...)
{
    size_t used = line->length < line->size ? line->length : line->size;
    va_list arguments;
    va_start(arguments, format);
    int added = vsnprintf(line->text + used, line->size - used, format, arguments);
    va_end(arguments);
    if (added > 0)
        line->length += (size_t)added;
}

/* ---------------------------------------------------------------------------
 * Why the current batch is kept: the first entry that applies
 * ------------------------------------------------------------------------ */

static bool keeps_same_batch(const struct batch_decision_inputs *inputs,
                             const struct batch_decision *decision)
{
    return decision->choice.local_bsz == inputs->current_local_bsz;
}

static bool speedup_too_small(const struct batch_decision_inputs *inputs,
                              const struct batch_decision *decision)
{
    return !(isfinite(decision->speedup) && decision->speedup > inputs->speedup_threshold);
}

static bool payback_too_long(const struct batch_decision_inputs *inputs,
                             const struct batch_decision *decision)
{
    return !(decision->payback_time <= inputs->payback_seconds);
}

/* Every rule holds but the job keeps its batch: the caller vetoed it. */
static bool restart_vetoed(const struct batch_decision_inputs *inputs,
                           const struct batch_decision *decision)
{
    (void)inputs;
    return decision->restart;
}

static void say_same_batch(struct line_buffer *line, const struct batch_decision_inputs *inputs)
{
    (void)inputs;
    line_append(line, "the best batch is the current one");
}

static void say_speedup_too_small(struct line_buffer *line,
                                  const struct batch_decision_inputs *inputs)
{
    line_append(line, "the speedup is not above ADAPTDL_SPEEDUP %g", inputs->speedup_threshold);
}

static void say_payback_too_long(struct line_buffer *line,
                                 const struct batch_decision_inputs *inputs)
{
    line_append(line, "the payback is longer than ADAPTDL_PAYBACK_SECONDS %g",
                inputs->payback_seconds);
}

static void say_vetoed(struct line_buffer *line, const struct batch_decision_inputs *inputs)
{
    (void)inputs;
    line_append(line, "a restart would pay off, but without ADAPTDL_SAVE no checkpoint can "
                      "carry the job across it");
}

static const struct keep_reason {
    bool (*applies)(const struct batch_decision_inputs *, const struct batch_decision *);
    void (*say)(struct line_buffer *, const struct batch_decision_inputs *);
} keep_reasons[] = {
    {keeps_same_batch, say_same_batch},
    {speedup_too_small, say_speedup_too_small},
    {payback_too_long, say_payback_too_long},
    {restart_vetoed, say_vetoed},
};

static void say_why_kept(struct line_buffer *line, const struct batch_decision_inputs *inputs,
                         const struct batch_decision *decision)
{
    for (size_t i = 0; i < sizeof keep_reasons / sizeof keep_reasons[0]; i++) {
        if (keep_reasons[i].applies(inputs, decision)) {
            keep_reasons[i].say(line, inputs);
            return;
        }
    }
    line_append(line, "the decision rules ask for no restart");
}

/* ---------------------------------------------------------------------------
 * The line
 * ------------------------------------------------------------------------ */

size_t batch_decision_describe(const struct batch_decision_inputs *inputs,
                               const struct batch_decision *decision, bool restart_requested,
                               char *text, size_t size)
{
    struct line_buffer line = {.text = text, .size = size, .length = 0};
    if (size > 0)
        text[0] = '\0';
    unsigned replicas = inputs->replicas;
    line_append(&line, "batch-size decision: current global %llu (local %llu x %u replica%s)",
                (unsigned long long)(inputs->current_local_bsz * replicas),
                (unsigned long long)inputs->current_local_bsz, replicas,
                replicas == 1 ? "" : "s");
    if (!decision->valid) {
        line_append(&line, ": no throughput model yet (no step profile to fit): keeping the "
                           "current batch");
        return line.length;
    }
    line_append(&line, ", best global %llu (local %llu)",
                (unsigned long long)decision->choice.global_bsz,
                (unsigned long long)decision->choice.local_bsz);
    if (isfinite(decision->speedup))
        line_append(&line, ", predicted speedup %.3fx", decision->speedup);
    else
        line_append(&line, ", predicted speedup unknown");
    if (isfinite(decision->payback_time))
        line_append(&line, ", payback %.1f s", decision->payback_time);
    else
        line_append(&line, ", a restart never pays back");
    line_append(&line, " (restart cost %.1f s): ", decision->restart_cost);
    if (restart_requested) {
        line_append(&line, "restarting: the speedup is above ADAPTDL_SPEEDUP %g and the "
                           "payback within ADAPTDL_PAYBACK_SECONDS %g",
                    inputs->speedup_threshold, inputs->payback_seconds);
    } else {
        line_append(&line, "keeping the current batch: ");
        say_why_kept(&line, inputs, decision);
    }
    return line.length;
}
