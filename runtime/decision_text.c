/* decision_text.c - a batch-size decision as one readable line (see
 * decision_text.h).
 *
 * Why a job keeps its batch is the reason batch_decide gave
 * (batch_decision.h's rules), with the numbers behind it; a decision that
 * would restart but does not was vetoed by its caller (no ADAPTDL_SAVE). */
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
 * Why the current batch is kept: the reason batch_decide gave, in words
 * ------------------------------------------------------------------------ */

static void say_same_batch(struct line_buffer *line, const struct batch_decision_inputs *inputs,
                           const struct batch_decision *decision)
{
    (void)inputs, (void)decision;
    line_append(line, "the best batch is the current one");
}

static void say_untrusted(struct line_buffer *line, const struct batch_decision_inputs *inputs,
                          const struct batch_decision *decision)
{
    (void)inputs, (void)decision;
    line_append(line, "the gradient statistics are not trustworthy yet (too few observations, "
                      "too noisy, or grad_sqr not positive)");
}

static void say_speedup_too_small(struct line_buffer *line,
                                  const struct batch_decision_inputs *inputs,
                                  const struct batch_decision *decision)
{
    line_append(line, "the speedup, %.3fx with the statistics one standard error against the "
                      "change, is not above ADAPTDL_SPEEDUP %g",
                decision->speedup_pessimistic, inputs->speedup_threshold);
}

static void say_reversal(struct line_buffer *line, const struct batch_decision_inputs *inputs,
                         const struct batch_decision *decision)
{
    line_append(line, "it would go back toward global %llu, which needs a speedup above "
                      "ADAPTDL_SPEEDUP squared (%.4g), not %.3fx",
                (unsigned long long)inputs->previous_global_bsz,
                inputs->speedup_threshold * inputs->speedup_threshold,
                decision->speedup_pessimistic);
}

static void say_payback_too_long(struct line_buffer *line,
                                 const struct batch_decision_inputs *inputs,
                                 const struct batch_decision *decision)
{
    (void)decision;
    line_append(line, "the payback is longer than ADAPTDL_PAYBACK_SECONDS %g",
                inputs->payback_seconds);
}

/* The rules hold but the job keeps its batch: the caller vetoed it. */
static void say_vetoed(struct line_buffer *line, const struct batch_decision_inputs *inputs,
                       const struct batch_decision *decision)
{
    (void)inputs, (void)decision;
    line_append(line, "a restart would pay off, but without ADAPTDL_SAVE no checkpoint can "
                      "carry the job across it");
}

typedef void (*keep_sayer)(struct line_buffer *, const struct batch_decision_inputs *,
                           const struct batch_decision *);

static const keep_sayer keep_reasons[] = {
    [BATCH_DECISION_UNTRUSTED] = say_untrusted,
    [BATCH_DECISION_KEEP] = say_same_batch,
    [BATCH_DECISION_BELOW_THRESHOLD] = say_speedup_too_small,
    [BATCH_DECISION_REVERSAL] = say_reversal,
    [BATCH_DECISION_NO_PAYBACK] = say_payback_too_long,
    [BATCH_DECISION_RESTART] = say_vetoed,
    [BATCH_DECISION_EXPLORE] = say_vetoed,
};

static void say_why_kept(struct line_buffer *line, const struct batch_decision_inputs *inputs,
                         const struct batch_decision *decision)
{
    unsigned reason = (unsigned)decision->reason;
    if (reason < sizeof keep_reasons / sizeof keep_reasons[0] && keep_reasons[reason] != NULL)
        keep_reasons[reason](line, inputs, decision);
    else
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
        line_append(&line, ", predicted speedup %.3fx (%.3fx pessimistic)", decision->speedup,
                    decision->speedup_pessimistic);
    else
        line_append(&line, ", predicted speedup unknown");
    if (isfinite(decision->payback_time))
        line_append(&line, ", payback %.1f s", decision->payback_time);
    else
        line_append(&line, ", a restart never pays back");
    line_append(&line, " (restart cost %.1f s): ", decision->restart_cost);
    if (restart_requested && decision->reason == BATCH_DECISION_EXPLORE) {
        line_append(&line, "restarting to measure a second batch size: every step so far had "
                           "local batch %llu, so the throughput model is a prior; at local "
                           "%llu, with a step no longer than now, the speedup would be %.3fx "
                           "(above ADAPTDL_SPEEDUP squared, %.4g)",
                    (unsigned long long)inputs->current_local_bsz,
                    (unsigned long long)decision->choice.local_bsz,
                    decision->speedup_pessimistic,
                    inputs->speedup_threshold * inputs->speedup_threshold);
    } else if (restart_requested) {
        line_append(&line, "restarting: the pessimistic speedup is above ADAPTDL_SPEEDUP %g "
                           "and the payback within ADAPTDL_PAYBACK_SECONDS %g",
                    inputs->speedup_threshold, inputs->payback_seconds);
    } else {
        line_append(&line, "keeping the current batch: ");
        say_why_kept(&line, inputs, decision);
    }
    return line.length;
}
