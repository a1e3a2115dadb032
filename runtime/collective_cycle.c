/* collective_cycle.c - steps and gradient pieces from the repeating sequence
 * of a trainer's collectives (see collective_cycle.h). */
#include "collective_cycle.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define HISTORY_SIZE (2 * COLLECTIVE_CYCLE_MAX_PERIOD)

void collective_cycle_init(struct collective_cycle *cycle, uint64_t grad_min,
                           bool grad_min_given)
{
    memset(cycle, 0, sizeof *cycle);
    cycle->automatic = !grad_min_given;
    cycle->grad_min = grad_min_given ? grad_min : COLLECTIVE_CYCLE_DEFAULT_GRAD_MIN;
    cycle->threshold_in_force = cycle->grad_min;
    cycle->first_call_time = -1;
}

static bool same_call(const struct collective_call *a, const struct collective_call *b)
{
    return a->kind == b->kind && a->element == b->element && a->sum == b->sum &&
           a->count == b->count;
}

static bool float_sum_allreduce(const struct collective_call *call)
{
    return call->kind == COLLECTIVE_ALLREDUCE && call->sum &&
           call->element != COLLECTIVE_ELEMENT_OTHER;
}

/* The call `back` calls before the latest one (back < calls, < HISTORY_SIZE). */
static const struct collective_call *call_back(const struct collective_cycle *cycle,
                                               uint32_t back)
{
    return &cycle->history[(cycle->calls - 1 - back) % HISTORY_SIZE];
}

/* The smallest count that is a gradient piece within the latest `period`
 * calls (the locked cycle). */
static uint64_t cycle_threshold(const struct collective_cycle *cycle, uint32_t period)
{
    if (!cycle->automatic)
        return cycle->grad_min;
    int64_t largest = 0;
    for (uint32_t back = 0; back < period; back++) {
        const struct collective_call *call = call_back(cycle, back);
        if (float_sum_allreduce(call) && call->count > largest)
            largest = call->count;
    }
    /* a sixty-fourth of the largest, and never below 16 elements unless
     * the largest is smaller: a loss reduced with its count (2 doubles)
     * beside a 9-float gradient is no gradient piece */
    uint64_t threshold = ((uint64_t)largest + 63) / 64;
    uint64_t small = (uint64_t)largest < COLLECTIVE_CYCLE_SMALL_PIECE ? (uint64_t)largest
                                                                      : COLLECTIVE_CYCLE_SMALL_PIECE;
    if (threshold < small)
        threshold = small;
    if (threshold < 1)
        threshold = 1;
    return threshold < COLLECTIVE_CYCLE_DEFAULT_GRAD_MIN ? threshold
                                                         : COLLECTIVE_CYCLE_DEFAULT_GRAD_MIN;
}

/* The latest `period` calls repeat the `period` before them: they become
 * the cycle, position 0 the oldest of them and period - 1 the latest. */
static void lock_cycle(struct collective_cycle *cycle, uint32_t period)
{
    uint64_t threshold = cycle_threshold(cycle, period);
    cycle->threshold_in_force = threshold;
    cycle->period = period;
    cycle->position = period - 1;
    cycle->locks++;
    cycle->cycle_has_other_calls = false;
    for (uint32_t position = 0; position < period; position++) {
        const struct collective_call *call = call_back(cycle, period - 1 - position);
        cycle->gradient_at[position] =
            float_sum_allreduce(call) && (uint64_t)call->count >= threshold;
        if (!cycle->gradient_at[position])
            cycle->cycle_has_other_calls = true;
    }
    /* the boundary goes before the longest cyclic run of other collectives
     * (the first such run from position 0 on a tie); with none, before
     * position 0 */
    uint32_t best_start = 0, best_length = 0;
    for (uint32_t start = 0; start < period; start++) {
        uint32_t before = (start + period - 1) % period;
        if (cycle->gradient_at[start] || (period > 1 && !cycle->gradient_at[before]))
            continue;
        uint32_t length = 0;
        while (length < period && !cycle->gradient_at[(start + length) % period])
            length++;
        if (length > best_length) {
            best_length = length;
            best_start = start;
        }
    }
    cycle->boundary_position = best_start;
}

/* Whether a period may lock now (see the break rule in the header). */
static bool period_allowed(const struct collective_cycle *cycle, uint32_t period)
{
    return cycle->relock_limit == 0 || period <= cycle->relock_limit ||
           cycle->calls - cycle->broken_at > 2 * COLLECTIVE_CYCLE_MAX_PERIOD;
}

/* Keeps matches[] and locks the shortest allowed period seen twice in a row. */
static void learn_call(struct collective_cycle *cycle)
{
    uint32_t shortest = 0;
    for (uint32_t period = 1; period <= COLLECTIVE_CYCLE_MAX_PERIOD; period++) {
        bool repeats = cycle->calls > period &&
                       same_call(call_back(cycle, 0), call_back(cycle, period));
        cycle->matches[period - 1] = repeats ? cycle->matches[period - 1] + 1 : 0;
        if (shortest == 0 && cycle->matches[period - 1] >= period &&
            period_allowed(cycle, period))
            shortest = period;
    }
    if (cycle->period == 0 && shortest != 0) {
        lock_cycle(cycle, shortest);
        cycle->relock_limit = 0;
    }
}

struct collective_verdict collective_cycle_observe(struct collective_cycle *cycle,
                                                   const struct collective_call *call,
                                                   double now)
{
    if (cycle->first_call_time < 0)
        cycle->first_call_time = now;
    if (float_sum_allreduce(call) && call->count > cycle->largest_float_sum)
        cycle->largest_float_sum = call->count;

    struct collective_verdict verdict = {0};
    bool was_locked = cycle->period != 0;
    if (was_locked) {
        uint32_t next = (cycle->position + 1) % cycle->period;
        const struct collective_call *expected = call_back(cycle, cycle->period - 1);
        if (same_call(call, expected)) {
            cycle->position = next;
            verdict.gradient = cycle->gradient_at[next];
            if (cycle->cycle_has_other_calls)
                verdict.boundary = next == cycle->boundary_position ? COLLECTIVE_BOUNDARY_BEFORE
                                                                    : COLLECTIVE_NO_BOUNDARY;
            else   /* gradient pieces only: the per-call rule's boundaries */
                verdict.boundary = COLLECTIVE_NO_BOUNDARY;
        } else {
            /* broken: the per-call rule until a cycle locks again */
            if (cycle->cycle_has_other_calls) {
                cycle->relock_limit = cycle->period;
                cycle->broken_at = cycle->calls;
            }
            cycle->period = 0;
        }
    }
    if (cycle->period == 0) {
        verdict.gradient = float_sum_allreduce(call) && call->count >= 0 &&
                           (uint64_t)call->count >= cycle->threshold_in_force;
        verdict.boundary = verdict.gradient ? COLLECTIVE_NO_BOUNDARY : COLLECTIVE_ENDS_GRADIENT_RUN;
    }
    cycle->history[cycle->calls % HISTORY_SIZE] = *call;
    cycle->calls++;
    learn_call(cycle);
    if (verdict.gradient)
        cycle->gradient_seen = true;
    return verdict;
}

bool collective_cycle_missing_gradient(struct collective_cycle *cycle, double now,
                                       char *message, size_t message_size)
{
    if (cycle->warned || cycle->gradient_seen || cycle->first_call_time < 0 ||
        now - cycle->first_call_time < COLLECTIVE_CYCLE_WARN_SECONDS)
        return false;
    cycle->warned = true;
    if (cycle->largest_float_sum > 0)
        snprintf(message, message_size,
                 "no gradient all-reduce in %.0f s of collectives (%" PRIu64 " calls; the "
                 "largest float MPI_SUM all-reduce had %" PRId64 " elements, under "
                 "ADAPTDL_GRAD_MIN=%" PRIu64 "): no gradient statistics, no batch-size "
                 "decisions; set ADAPTDL_GRAD_MIN=%" PRId64 " if that all-reduce is the "
                 "gradient",
                 now - cycle->first_call_time, cycle->calls, cycle->largest_float_sum,
                 cycle->threshold_in_force, cycle->largest_float_sum);
    else
        snprintf(message, message_size,
                 "no gradient all-reduce in %.0f s of collectives (%" PRIu64 " calls, none a "
                 "float or double MPI_SUM all-reduce): no gradient statistics, no batch-size "
                 "decisions (ADAPTDL_GRAD_MIN sets the smallest all-reduce counted as a "
                 "gradient)",
                 now - cycle->first_call_time, cycle->calls);
    return true;
}
