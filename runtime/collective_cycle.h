/* collective_cycle.h - steps and gradient pieces from the repeating
 * sequence of a trainer's collectives (adaptshim(7) "Steps").
 *
 * A data-parallel trainer makes the same collectives in the same order at
 * every step: llm_parallelisms' train_dp.c all-reduces its loss (1 float)
 * and then five gradient tensors of 432, 16384, 64, 1728 and 27 floats.
 * Taken one call at a time, with "a gradient is at least ADAPTDL_GRAD_MIN
 * elements", its small bias gradients split every iteration into two steps
 * and a 16-parameter model has no gradient at all.  Taken as a cycle, the
 * step is one period of the sequence, whatever the sizes:
 *
 *   - the cycle is learned: the shortest period P (at most
 *     COLLECTIVE_CYCLE_MAX_PERIOD calls) whose last two repetitions are
 *     identical, call for call (kind, element type, MPI_SUM or not, count);
 *   - its gradient pieces are its float/double MPI_SUM all-reduces of at
 *     least min(1024, max(largest / 64, min(largest, 16))) elements, the
 *     largest being the cycle's largest such all-reduce: a loss and its
 *     count (2 doubles) beside a 9-float gradient are left out, the
 *     gradient of a small model is in, and so are the bias tensors of a
 *     large one down to a sixty-fourth of its largest piece; a user's
 *     ADAPTDL_GRAD_MIN replaces the threshold;
 *   - when the cycle holds other collectives too, the step boundary is
 *     placed before the longest run of them (cyclically): after the last
 *     gradient piece of an iteration, before the loss and metric
 *     reductions of the next;
 *   - a cycle of gradient pieces only ([G] repeated, or 300 buckets then a
 *     barrier, whose [G] repeats long before the barrier comes) says
 *     nothing of where a step ends: its pieces are classified by the
 *     cycle's threshold, and the per-call rule makes the boundaries (a
 *     run of gradient pieces ends at the next other collective, or at a
 *     train-batch read);
 *   - a call that breaks the cycle (an evaluation every N steps, a
 *     checkpoint's barrier) unlocks it: until a cycle is seen twice again,
 *     the per-call rule applies, with the threshold of the latest cycle
 *     (1024 before any, or the user's ADAPTDL_GRAD_MIN);
 *   - after a break, only a period no longer than the broken one may lock
 *     for 2 * COLLECTIVE_CYCLE_MAX_PERIOD calls: a validation every 32
 *     steps repeats too, with a period of 32 steps and itself, which would
 *     otherwise lock in the calls before the step's own period is seen
 *     twice again and make one step of 32.
 *
 * Every replica makes the same sequence, so every replica locks at the same
 * call and places the same boundaries: the piggy-backed reductions posted
 * at the boundaries always match.  Nothing here depends on handles or
 * addresses, which differ between processes. */
#ifndef ADAPTSHIM_COLLECTIVE_CYCLE_H
#define ADAPTSHIM_COLLECTIVE_CYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COLLECTIVE_CYCLE_MAX_PERIOD 128
/* Pieces below this many elements are gradient pieces only when nothing
 * larger is in the cycle. */
#define COLLECTIVE_CYCLE_SMALL_PIECE 16
/* Below this many elements no all-reduce is a gradient by default. */
#define COLLECTIVE_CYCLE_DEFAULT_GRAD_MIN 1024
/* Seconds of collectives without a gradient piece before the warning. */
#define COLLECTIVE_CYCLE_WARN_SECONDS 30.0

enum collective_kind {
    COLLECTIVE_ALLREDUCE = 1,
    COLLECTIVE_BARRIER,
    COLLECTIVE_BROADCAST,
};

enum collective_element {
    COLLECTIVE_ELEMENT_OTHER = 0,
    COLLECTIVE_ELEMENT_FLOAT,
    COLLECTIVE_ELEMENT_DOUBLE,
};

struct collective_call {
    enum collective_kind kind;   /* MPI_Iallreduce counts as an all-reduce */
    enum collective_element element;
    bool sum;                    /* MPI_SUM */
    int64_t count;
};

enum collective_boundary {
    COLLECTIVE_NO_BOUNDARY = 0,
    COLLECTIVE_BOUNDARY_BEFORE,  /* the cycle's boundary: a step ends before this call */
    COLLECTIVE_ENDS_GRADIENT_RUN /* no cycle: ends the step if gradient pieces are pending */
};

struct collective_verdict {
    bool gradient;
    enum collective_boundary boundary;
};

struct collective_cycle {
    /* the user's ADAPTDL_GRAD_MIN, or 0 with `automatic` */
    uint64_t grad_min;
    bool automatic;
    /* the latest calls, newest at history[(calls - 1) % size] */
    struct collective_call history[2 * COLLECTIVE_CYCLE_MAX_PERIOD];
    uint64_t calls;
    /* matches[p - 1]: consecutive calls equal to the call p before them */
    uint32_t matches[COLLECTIVE_CYCLE_MAX_PERIOD];

    /* the smallest gradient piece of the per-call rule: the user's
     * minimum, else the latest cycle's threshold (1024 before any) */
    uint64_t threshold_in_force;

    /* the locked cycle */
    uint32_t period;             /* 0: none */
    bool cycle_has_other_calls;  /* its boundaries are the steps */
    /* after the break of a cycle that made the steps: its period, and the
     * call at which it broke (0: no limit) */
    uint32_t relock_limit;
    uint64_t broken_at;
    uint32_t position;           /* of the latest call in the cycle */
    uint32_t boundary_position;
    bool gradient_at[COLLECTIVE_CYCLE_MAX_PERIOD];
    uint64_t locks;              /* times a cycle was locked (tests, log) */

    /* the warning when no call is a gradient piece */
    double first_call_time;
    bool gradient_seen;
    bool warned;
    int64_t largest_float_sum;   /* largest float/double MPI_SUM all-reduce seen */
};

/* `grad_min_given`: the user set ADAPTDL_GRAD_MIN = grad_min. */
void collective_cycle_init(struct collective_cycle *cycle, uint64_t grad_min,
                           bool grad_min_given);

/* One collective call, before it reaches MPI: is it a gradient piece, and
 * does a step end before it? */
struct collective_verdict collective_cycle_observe(struct collective_cycle *cycle,
                                                   const struct collective_call *call,
                                                   double now);

/* True while a cycle is locked. */
static inline bool collective_cycle_locked(const struct collective_cycle *cycle)
{
    return cycle->period != 0;
}

/* True while a locked cycle with other collectives than gradient pieces
 * makes the steps: a train-batch read then ends none. */
static inline bool collective_cycle_makes_boundaries(const struct collective_cycle *cycle)
{
    return cycle->period != 0 && cycle->cycle_has_other_calls;
}

/* Once, after COLLECTIVE_CYCLE_WARN_SECONDS of collectives none of which was
 * a gradient piece: fills `message` with one line naming ADAPTDL_GRAD_MIN
 * and returns true. */
bool collective_cycle_missing_gradient(struct collective_cycle *cycle, double now,
                                       char *message, size_t message_size);

#endif
